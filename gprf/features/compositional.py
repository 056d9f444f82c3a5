r"""Compositional random features from computation skeletons (Daniely, Frostig, Gupta & Singer 2017).

One random feature of a :class:`~gprf.features.Skeleton` is drawn by Algorithm 1 of Daniely et al. (2017):
starting at the output node, every internal node :math:`v` draws a degree :math:`n\sim b^{(v)}` (the coefficients
of its dual activation) and :math:`n` of its inputs uniformly with replacement, and recurses into them; every
visited input node contributes a base random feature, and the feature is their product,

.. math::
    \psi(x) = \prod_{\text{leaves } \ell} \psi_{u_\ell}(x), \qquad E[\psi(x)\psi(y)] = k_{\text{skeleton}}(x, y)

(Lemmas 9–10 of the paper: sampling the degree realises :math:`\sum_n b_n\rho^n`, a product of independent
features realises a product of kernels, a uniform input realises the mean). Base features:

* ``"linear"`` input nodes (normalised :math:`\tilde x = [x_S, 1]`): coordinate sampling
  :math:`\psi(x) = \sqrt{|S| + 1}\,\tilde x_j/\lVert\tilde x\rVert`, :math:`j` uniform (Daniely et al. 2017, Example 5):
  :math:`O(1)` per feature whatever the receptive field, and discrete, so that features repeat;
* ``"gaussian"`` input nodes: :math:`\psi(x) = \sqrt2\cos(w^\top x_S + c)`, :math:`w\sim N(0, I)`,
  :math:`c\sim U[0, 2\pi)` (the real form of :math:`e^{iw^\top x}` with a random phase).

A feature is a *monomial* in these base features. Features are stored as flat index/weight buffers: the atoms
(base features) with their input coordinates, projection weights and phases, and the column each atom
multiplies into; the forward pass gathers the inputs, evaluates all atoms and multiplies them per column with a
scatter product — its cost per feature is the number of atoms, whose mean is the skeleton's
:attr:`~gprf.features.Skeleton.complexity` (1 for ReLU and exponential skeletons, whatever the input dimension).

Reference: A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.*
arXiv:1703.07872, 2017.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from gprf.features.base import FeatureMap
from gprf.features.nested import member_segments, next_draw_version, stream_generator
from gprf.features.skeleton import Skeleton

# Features per chunk of the stream of a map without de-duplication.
_CHUNK = 64
# Atom kinds (values of the ``atom_kind`` buffer); padding atoms (batch members with fewer atoms) evaluate to 1.
_LINEAR, _GAUSSIAN, _PADDING = 0, 1, 2


@dataclass
class _Draws:
    """The sampled paths of ``num`` features: their leaves (input nodes) and the base-feature draws."""

    num_paths: int
    leaf_path: Tensor  # (L,) feature (path) index of each leaf
    leaf_node: Tensor  # (L,) input node of each leaf
    leaf_coordinate: Tensor  # (L,) linear leaves: sampled position in [x_S, 1] (flat index into the node table)
    leaf_phase: Tensor  # (L,) gaussian leaves: phase c
    entry_leaf: Tensor  # (E,) gaussian leaves: one entry per coordinate of the receptive field
    entry_coordinate: Tensor  # (E,)
    entry_weight: Tensor  # (E,) the normal projection weights w


class CompositionalFeatures(FeatureMap):
    r"""Random features of the compositional kernel of a computation skeleton (Daniely et al. 2017, Alg. 1).

    With ``deduplicate=False`` the map holds ``num_features`` independent features :math:`\psi_t/\sqrt F`, an
    exactly unbiased estimate of the skeleton kernel with variance :math:`(M - k^2)/F` (:meth:`variance`, with
    :math:`M` from :meth:`Skeleton.second_moment`).

    With ``deduplicate=True`` (Daniely et al. 2017, §6) features are drawn as long as they add at most ``num_features``
    *distinct* monomials: drawing stops just *before* the draw that would bring an (F+1)-th one, and a monomial
    drawn :math:`c` times out of the :math:`T` kept draws becomes one column with weight :math:`\sqrt{c/T}`. This
    is exactly the kernel estimate of all :math:`T` draws with ``num_features`` columns — more draws for the same
    budget and so a lower error. Duplicates come from the discrete draws: the empty monomial (the constant feature
    of degree-0 draws, e.g. a fraction :math:`1/\pi` of ReLU features) and coordinate-sampling atoms; Gaussian
    atoms never repeat. The stopping rule matters: stopping *at* the draw that completes ``num_features``
    distinct monomials (the naive rule) under-weights frequent monomials — on the deep digits skeleton of the
    example its bias exceeds the variance it removes — while the prefix before the (F+1)-th distinct monomial
    passes the same Monte-Carlo unbiasedness test as the plain map (``tests/features/test_compositional.py``).
    There is no closed-form variance for it (:math:`T` is random).

    Reference: A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.*
    arXiv:1703.07872, 2017.

    Args:
        skeleton: The :class:`~gprf.features.Skeleton`; its ``input_dim`` is the map's input dimension.
        num_features: Number of columns ``F``.
        deduplicate: Merge repeated monomials and draw until ``F`` distinct ones exist.
        max_draws: Give up (``ValueError``) after this many draws without ``F`` distinct monomials (default
            ``100 * F + 10000``; skeletons with few possible monomials, e.g. a single linear node with an
            identity activation, cannot reach large ``F``).
        batch_shape: Independent draws for each batch member.
        seed: Seed of the draws.

    The number of atoms depends on the draws, so buffers change shape on :meth:`resample` and
    ``load_state_dict`` adopts the stored shapes.
    """

    def __init__(
        self,
        skeleton: Skeleton,
        num_features: int,
        deduplicate: bool = True,
        max_draws: int | None = None,
        batch_shape: torch.Size | tuple[int, ...] = torch.Size(),
        seed: int | None = None,
    ) -> None:
        if not isinstance(skeleton, Skeleton):
            raise TypeError(f"skeleton must be a gprf.features.Skeleton, got {type(skeleton).__name__}.")
        super().__init__(skeleton.input_dim, num_features, batch_shape=batch_shape, seed=seed)
        self.skeleton = skeleton
        self.deduplicate = bool(deduplicate)
        self.max_draws = 100 * num_features + 10000 if max_draws is None else max_draws
        self.nesting_refusal = (
            "with deduplicate=True the columns are weighted by how often each monomial occurs among all draws made "
            "until the (F+1)-th distinct one, so the weights of a smaller map are not those of a larger one; use "
            "deduplicate=False for nested draws"
            if self.deduplicate
            else None
        )
        self._build_tables()
        self._register_draws()

    # ------------------------------------------------------------------ skeleton tables
    def _build_tables(self) -> None:
        """Fixed (non-random) CSR tables of the skeleton used by the sampler and the forward pass."""
        sk = self.skeleton
        d = sk.input_dim
        # Children of every node (CSR), and the activation id of internal nodes.
        children = [list(sk.node_inputs(v)) for v in range(sk.num_nodes)]
        self._child_ptr = torch.tensor([0] + [len(c) for c in children]).cumsum(0)
        self._child_ids = torch.tensor([u for c in children for u in c], dtype=torch.long)
        self._activations = []
        activation_of = torch.full((sk.num_nodes,), -1, dtype=torch.long)
        for v in range(sk.num_inputs, sk.num_nodes):
            act = sk.activation(v)
            known = next((i for i, a in enumerate(self._activations) if a is act), None)
            if known is None:
                self._activations.append(act)
                known = len(self._activations) - 1
            activation_of[v] = known
        self._activation_of = activation_of
        # Input nodes: the augmented receptive fields [S, bias] in one flat table (bias = coordinate d).
        fields = [list(node.receptive_field) for node in sk.input_nodes]
        self._is_gaussian = torch.tensor([node.base_kernel == "gaussian" for node in sk.input_nodes])
        sizes = torch.tensor([len(f) for f in fields])
        self._field_ptr = torch.cat([torch.zeros(1, dtype=torch.long), (sizes + 1).cumsum(0)])
        table = torch.tensor([c for f in fields for c in f + [d]], dtype=torch.long)
        self._slot_coordinate = table  # CPU copy for the sampler
        node_of_slot = torch.repeat_interleave(torch.arange(sk.num_inputs), sizes + 1)
        # Buffers of the forward pass (not random: rebuilt from the skeleton, so not saved in the state dict).
        self.register_buffer("node_slot_coordinate", table, persistent=False)
        self.register_buffer("node_of_slot", node_of_slot, persistent=False)
        self.register_buffer(
            "node_sqrt_size", (sizes + 1).double().sqrt().to(torch.get_default_dtype()), persistent=False
        )

    # ------------------------------------------------------------------ sampling (construction time, CPU)
    def _sample_paths(self, num: int, generator: torch.Generator) -> _Draws:
        """Algorithm 1 for ``num`` features at once, one DAG level per iteration."""
        sk = self.skeleton
        path = torch.arange(num)
        node = torch.full((num,), sk.output, dtype=torch.long)
        leaf_path, leaf_node = [], []
        while node.numel():
            at_input = node < sk.num_inputs
            leaf_path.append(path[at_input])
            leaf_node.append(node[at_input])
            path, node = path[~at_input], node[~at_input]
            degrees = torch.zeros_like(node)
            act_ids = self._activation_of[node]
            for a, act in enumerate(self._activations):
                mask = act_ids == a
                count = int(mask.sum())
                if count:
                    degrees[mask] = act.sample_degrees(count, generator)
            path, parent = path.repeat_interleave(degrees), node.repeat_interleave(degrees)
            fan_in = self._child_ptr[parent + 1] - self._child_ptr[parent]
            pick = (torch.rand(parent.numel(), generator=generator, dtype=torch.float64) * fan_in).long()
            node = self._child_ids[self._child_ptr[parent] + pick.clamp(max=fan_in - 1)]
        leaf_path, leaf_node = torch.cat(leaf_path), torch.cat(leaf_node)
        return self._sample_atoms(num, leaf_path, leaf_node, generator)

    def _sample_atoms(self, num: int, leaf_path: Tensor, leaf_node: Tensor, generator: torch.Generator) -> _Draws:
        start, stop = self._field_ptr[leaf_node], self._field_ptr[leaf_node + 1]
        uniform = torch.rand(leaf_node.numel(), generator=generator, dtype=torch.float64)
        coordinate = start + (uniform * (stop - start)).long().clamp(max=stop - start - 1)
        phase = 2.0 * math.pi * torch.rand(leaf_node.numel(), generator=generator, dtype=torch.float64)
        # Gaussian leaves project their receptive field (the slots before the bias slot) on normal weights.
        gaussian = torch.nonzero(self._is_gaussian[leaf_node]).flatten()
        lengths = stop[gaussian] - start[gaussian] - 1
        entry_leaf = gaussian.repeat_interleave(lengths)
        offsets = torch.arange(entry_leaf.numel()) - (lengths.cumsum(0) - lengths).repeat_interleave(lengths)
        entry_slot = start[gaussian].repeat_interleave(lengths) + offsets
        weight = torch.randn(entry_leaf.numel(), generator=generator, dtype=torch.float64)
        return _Draws(
            num, leaf_path, leaf_node, coordinate, phase, entry_leaf, self._slot_coordinate[entry_slot], weight
        )

    @staticmethod
    def _monomial_keys(draws: _Draws, num: int, gaussian: Tensor, first_key: int) -> list[tuple[int, ...]]:
        """A canonical key per path: the sorted atoms (coordinate slots; a fresh id for every Gaussian atom)."""
        keys = torch.where(gaussian, -(first_key + torch.arange(gaussian.numel())) - 1, draws.leaf_coordinate)
        order = torch.argsort(draws.leaf_path, stable=True)
        sorted_paths, sorted_keys = draws.leaf_path[order].tolist(), keys[order].tolist()
        grouped: list[list[int]] = [[] for _ in range(num)]
        for p, k in zip(sorted_paths, sorted_keys, strict=True):
            grouped[p].append(k)
        return [tuple(sorted(g)) for g in grouped]

    def _draw_member(self, generator: torch.Generator) -> dict[str, Tensor]:
        """Columns of one batch member of a de-duplicating map: draw until ``F`` distinct monomials and merge."""
        target = self.num_features
        chunks: list[_Draws] = []
        columns: dict[tuple[int, ...], int] = {}  # monomial -> column
        representative: list[tuple[int, int]] = []  # column -> (chunk, path)
        counts: list[int] = []
        total = 0
        gaussian_atoms = 0
        done = False
        while not done:
            if total >= self.max_draws:
                if len(representative) == target:
                    break  # every possible monomial is a column: a fixed number of draws, T = max_draws
                raise ValueError(
                    f"CompositionalFeatures: only {len(representative)} distinct monomials after {total} draws, fewer "
                    f"than num_features={target}; this skeleton has too few possible features for this budget — "
                    "lower num_features or pass deduplicate=False."
                )
            remaining = target - len(representative)
            # Chunks grow geometrically.
            size = min(max(64, 2 * remaining, total), self.max_draws - total)
            draws = self._sample_paths(size, generator)
            gaussian = self._is_gaussian[draws.leaf_node]
            keys = self._monomial_keys(draws, size, gaussian, gaussian_atoms)
            gaussian_atoms += int(gaussian.sum())
            chunks.append(draws)
            for p, key in enumerate(keys):
                column = columns.get(key)
                if column is not None:
                    counts[column] += 1
                    total += 1
                    continue
                if len(representative) == target:  # the draw would add an (F+1)-th distinct monomial: stop before it
                    done = True
                    break
                columns[key] = len(representative)
                representative.append((len(chunks) - 1, p))
                counts.append(1)
                total += 1
        weights = torch.tensor(counts, dtype=torch.float64) / total
        return self._columns(chunks, representative, weights.sqrt(), total, 0)

    def _columns(self, chunks, representative, weights, total, repeated) -> dict[str, Tensor]:
        """Flat atom/entry tensors of the chosen representative paths (atoms grouped by column)."""
        pairs = torch.tensor(representative, dtype=torch.long).reshape(-1, 2)
        atoms, entries = [], []
        num_atoms = 0
        for c, draws in enumerate(chunks):
            chosen = pairs[:, 0] == c
            column_of_path = torch.full((draws.num_paths,), -1)
            column_of_path[pairs[chosen, 1]] = torch.nonzero(chosen).flatten()
            column = column_of_path[draws.leaf_path]
            kept = torch.nonzero(column >= 0).flatten()
            kept = kept[torch.argsort(column[kept], stable=True)]
            atoms.append((column[kept], draws.leaf_node[kept], draws.leaf_coordinate[kept], draws.leaf_phase[kept]))
            atom_of_leaf = torch.full((draws.leaf_node.numel(),), -1)
            atom_of_leaf[kept] = num_atoms + torch.arange(kept.numel())
            atom = atom_of_leaf[draws.entry_leaf]
            used = atom >= 0
            entries.append((atom[used], draws.entry_coordinate[used], draws.entry_weight[used]))
            num_atoms += kept.numel()
        atom_feature, atom_node, atom_slot, atom_phase = (torch.cat(parts) for parts in zip(*atoms, strict=True))
        order = torch.argsort(atom_feature, stable=True)  # column order across chunks
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel())
        entry_atom, entry_coordinate, entry_weight = (torch.cat(parts) for parts in zip(*entries, strict=True))
        return {
            "atom_feature": atom_feature[order],
            "atom_node": atom_node[order],
            "atom_kind": self._is_gaussian[atom_node[order]].long(),
            "atom_coordinate": self._slot_coordinate[atom_slot[order]],
            "atom_phase": atom_phase[order],
            "entry_atom": rank[entry_atom],
            "entry_coordinate": entry_coordinate,
            "entry_weight": entry_weight,
            "feature_weight": weights,
            "num_draws": torch.tensor(total),
            "num_repeated": torch.tensor(repeated),
        }

    def _draw(self, generator: torch.Generator) -> dict[str, Tensor]:
        if not self.deduplicate:
            return self._draw_streams(generator)
        return self._stack_members([self._draw_member(generator) for _ in range(max(1, self.batch_shape.numel()))])

    # ------------------------------------------------------------ nested draws (deduplicate=False)
    def _stream_units(self) -> int:
        """Features (sampled paths) read from the stream: ``num_features``."""
        return self.num_features

    def _stream_draws(self) -> dict[str, Tensor]:
        return self._stack_members(
            [self._member_stream_draws(segments) for segments in member_segments(self.draw_streams)]
        )

    def _member_stream_draws(self, segments: list[tuple[int, int]]) -> dict[str, Tensor]:
        """The first ``num_features`` paths of the stream, ``_CHUNK`` paths per chunk, one column each."""
        target = self.num_features
        chunks: list[_Draws] = []
        representative: list[tuple[int, int]] = []
        seen: set[tuple[int, ...]] = set()
        repeated = gaussian_atoms = 0
        for chunk in range(math.ceil(target / _CHUNK)):
            first, last = chunk * _CHUNK, min((chunk + 1) * _CHUNK, target)
            for index, (start, seed) in enumerate(segments):
                stop = segments[index + 1][0] if index + 1 < len(segments) else target
                low, high = max(start, first), min(stop, last)
                if low >= high:
                    continue
                draws = self._sample_paths(_CHUNK, stream_generator(seed, chunk))
                gaussian = self._is_gaussian[draws.leaf_node]
                keys = self._monomial_keys(draws, _CHUNK, gaussian, gaussian_atoms)
                gaussian_atoms += int(gaussian.sum())
                chunks.append(draws)
                for path in range(low - first, high - first):
                    repeated += keys[path] in seen
                    seen.add(keys[path])
                    representative.append((len(chunks) - 1, path))
        weights = torch.full((target,), 1.0 / target, dtype=torch.float64).sqrt()
        return self._columns(chunks, representative, weights, target, repeated)

    def _stack_members(self, members: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        return {
            name: _pad_and_stack([m[name] for m in members], name).reshape((*self.batch_shape, *_tail(members, name)))
            for name in members[0]
        }

    # ------------------------------------------------------------ resampling and loading (shapes follow the draws)
    @torch.no_grad()
    def resample(self, generator: torch.Generator | None = None) -> None:
        """Redraw the features (new buffers: the number of atoms depends on the draws; device and dtype kept)."""
        self._refuse_if_expanded()
        device = self.feature_weight.device
        dtype = self.feature_weight.dtype
        for name, value in self._draw(self._generator(generator)).items():
            setattr(self, name, value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype))
        self.draw_dtype = dtype
        self.draw_version = next_draw_version()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        for name in self._random_buffer_names:
            stored = state_dict.get(prefix + name)
            current = getattr(self, name)
            if stored is not None and stored.shape != current.shape:
                setattr(self, name, torch.empty(stored.shape, dtype=current.dtype, device=current.device))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # ------------------------------------------------------------------ features
    @property
    def total_draws(self) -> Tensor:
        """Number of sampled features :math:`T` behind the columns (``num_features`` without de-duplication)."""
        return self.num_draws

    def _buffer_dtype(self) -> torch.dtype:
        return self.feature_weight.dtype

    def _featurize(self, x: Tensor) -> Tensor:
        batch = torch.broadcast_shapes(x.shape[:-2], self.batch_shape)
        n = x.size(-2)
        x = torch.cat([x, torch.ones_like(x[..., :1])], dim=-1).expand(*batch, n, self.input_dim + 1)

        def gather(index: Tensor) -> Tensor:  # x[..., index] with a batched index
            return x.gather(-1, index.unsqueeze(-2).expand(*batch, n, index.size(-1)))

        def per_point(t: Tensor) -> Tensor:
            return t.unsqueeze(-2).expand(*batch, n, t.size(-1))

        # Norms of the augmented receptive fields [x_S, 1] (>= 1: never zero).
        squares = x[..., self.node_slot_coordinate].square()
        norms = torch.zeros(*batch, n, self.skeleton.num_inputs, dtype=x.dtype, device=x.device)
        norms = norms.index_add(-1, self.node_of_slot, squares).sqrt()
        scale = self.node_sqrt_size / norms
        linear = gather(self.atom_coordinate) * scale.gather(-1, per_point(self.atom_node))
        projection = torch.zeros(*batch, n, self.atom_kind.size(-1), dtype=x.dtype, device=x.device)
        projection = projection.scatter_add(
            -1, per_point(self.entry_atom), gather(self.entry_coordinate) * per_point(self.entry_weight)
        )
        gaussian = math.sqrt(2.0) * torch.cos(projection + per_point(self.atom_phase))
        kind = per_point(self.atom_kind)
        atoms = torch.where(kind == _LINEAR, linear, torch.where(kind == _GAUSSIAN, gaussian, torch.ones_like(linear)))
        products = torch.ones(*batch, n, self.num_features, dtype=x.dtype, device=x.device)
        products = products.scatter_reduce(-1, per_point(self.atom_feature), atoms, "prod", include_self=True)
        return products * per_point(self.feature_weight)

    # ------------------------------------------------------------------ closed forms
    def _expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The skeleton kernel row by row (the expectation of the plain, non-de-duplicated estimate)."""
        return self.skeleton.kernel(x1, x2, diag=True)

    def _variance(self, x1: Tensor, x2: Tensor, part: str) -> Tensor:
        """:math:`(M - k^2)/F` row by row for ``deduplicate=False`` (``inf`` where :math:`M` diverges)."""
        if self.deduplicate:
            raise NotImplementedError(
                "No closed-form variance for deduplicate=True (the number of draws is random); use deduplicate=False."
            )
        k = self.skeleton.kernel(x1, x2, diag=True)
        return (self.skeleton.second_moment(x1, x2) - k.square()) / self.num_features

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, skeleton={self.skeleton!r}, deduplicate={self.deduplicate}"


def _tail(members: list[dict[str, Tensor]], name: str) -> tuple[int, ...]:
    sizes = [m[name].shape for m in members]
    return () if len(sizes[0]) == 0 else (max(s[0] for s in sizes),)


def _pad_and_stack(values: list[Tensor], name: str) -> Tensor:
    """Stack per-member tensors, padding ragged atom/entry lists with neutral elements.

    Padding atoms have kind ``_PADDING`` (value 1, multiplied into column 0); padding entries have weight 0.
    """
    if values[0].dim() == 0:
        return torch.stack(values)
    length = max(v.numel() for v in values)
    fill = _PADDING if name == "atom_kind" else 0
    return torch.stack([torch.cat([v, v.new_full((length - v.numel(),), fill)]) for v in values])
