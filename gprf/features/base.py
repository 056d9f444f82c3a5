"""The feature-map contracts: one real root (:class:`FeatureMap`), or two roots and a signature
(:class:`SignedFeatureMap`)."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
from torch import Tensor

from gprf._checks import check_choice, check_features_input, check_generator, check_positive_int
from gprf.features.nested import member_segments, new_streams, next_draw_version, observe_draw_version
from gprf.features.unseeded import unseeded_generator


class FeatureMapBase(torch.nn.Module, ABC):
    r"""What every random feature map in gprf shares: its random draws, batch handling and input checks.

    A feature map turns inputs ``x`` of shape ``(..., n, input_dim)`` (already divided by any lengthscale)
    into features whose inner products estimate a kernel. :class:`FeatureMap` returns one root
    (:math:`\hat k = \mathrm{Re}\,\Phi\Phi^H`), :class:`SignedFeatureMap` two roots and a signature
    (:math:`\hat k = AA^\top - BB^\top`, an indefinite kernel); they are siblings, not one a restriction of the
    other.

    Contract (relied on by kernels, prediction strategies and the BoTorch integration):

    * every random draw is a registered buffer created eagerly in ``__init__`` (so ``.to()``,
      ``state_dict``/``load_state_dict`` into a fresh object, pickling and ``deepcopy`` work), drawn
      from a ``torch.Generator`` seeded by ``seed`` (when ``seed is None``, from torch's global generator state,
      read but never advanced: :mod:`gprf.features.unseeded`);
      :meth:`resample` redraws the buffers in place; every new draw (construction, :meth:`resample`,
      ``load_state_dict``, :meth:`resized`) takes a fresh :attr:`draw_version` from one process-wide counter,
      so different draws never share a version, whichever map object shows it;
    * buffers carry a leading ``batch_shape`` (independent draws per batch member);
    * ``num_features`` is the number of features :math:`F` of the map: real features for real maps, complex
      features for complex maps (whose real root has :math:`2F` columns), frequencies per part for signed maps;
      ``root_dim`` is the number of columns of the real root(s), the size of the factorisations downstream;
    * inputs of another floating dtype than the draws are computed in the promoted dtype (as torch's type
      promotion does for GPyTorch's kernels);
    * no host synchronisation and no numpy in the forward pass.

    Subclasses implement :meth:`_draw` (the random tensors, keyed by buffer name) and :meth:`_featurize`.

    **Nested draws.** Maps whose draws can nest (:meth:`resized`) read their draws from a stream
    (:mod:`gprf.features.nested`): they set :attr:`nesting_refusal` to ``None`` for their configuration, implement
    :meth:`_member_stream_draws` and :meth:`_stream_units`, and draw with :meth:`_draw_streams`.
    """

    #: Why this map cannot be resized (``None`` if it can); maps that nest set it per configuration before drawing.
    nesting_refusal: str | None = "its draws are not read from a nested stream"

    def __init__(
        self,
        input_dim: int,
        num_features: int,
        batch_shape: torch.Size | tuple[int, ...] = torch.Size(),
        seed: int | None = None,
    ) -> None:
        super().__init__()
        self.input_dim = check_positive_int(input_dim, "input_dim")
        self.num_features = check_positive_int(num_features, "num_features")
        self.batch_shape = torch.Size(batch_shape)
        if any(size < 1 for size in self.batch_shape):
            raise ValueError(f"batch_shape must hold positive sizes, got {tuple(self.batch_shape)}.")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {seed!r}.")
        self.seed = seed
        self._random_buffer_names: list[str] = []
        #: A fresh value whenever the draws change, so caches built on old features can notice (no host sync).
        self.draw_version = next_draw_version()

    # ------------------------------------------------------------------ randomness
    def _generator(self, generator: torch.Generator | None = None) -> torch.Generator:
        if check_generator(generator) is not None:
            return generator
        if self.seed is not None:
            return torch.Generator().manual_seed(self.seed)
        # Follows `torch.manual_seed` without advancing the global generator (gprf.features.unseeded).
        return unseeded_generator()

    @abstractmethod
    def _draw(self, generator: torch.Generator) -> dict[str, Tensor]:
        """Draw every random tensor of the map (CPU, float64 or integer), keyed by buffer name."""

    def _register_draws(self, generator: torch.Generator | None = None) -> None:
        """Create the random buffers; call once at the end of a subclass ``__init__``."""
        dtype = torch.get_default_dtype()
        # The precision the draws were rounded to: resized maps round their draws alike, so that a map built in
        # float32 and converted to float64 keeps its (rounded) prefix bit for bit.
        self.draw_dtype = dtype
        for name, value in self._draw(self._generator(generator)).items():
            self.register_buffer(name, value.to(dtype) if value.is_floating_point() else value)
            self._random_buffer_names.append(name)

    @torch.no_grad()
    def resample(self, generator: torch.Generator | None = None) -> None:
        """Redraw every random buffer in place (same shapes, device and dtype).

        Without ``generator``, a seeded map redraws the same features it was built with; pass a
        generator (or use ``seed=None``) for fresh draws.
        """
        self._refuse_if_expanded()
        for name, value in self._draw(self._generator(generator)).items():
            buffer = getattr(self, name)
            buffer.copy_(value)
            if buffer.is_floating_point():
                self.draw_dtype = buffer.dtype
        self.draw_version = next_draw_version()

    def _refuse_if_expanded(self, operation: str = "resample") -> None:
        """Raise if any draw (of this map or a map inside it) was expanded over the batch by :meth:`batch_expand`:
        batch members share such draws, so redrawing them cannot make the members independent."""
        for buffer in self.buffers():
            if any(stride == 0 and size > 1 for stride, size in zip(buffer.stride(), buffer.shape, strict=True)):
                raise RuntimeError(
                    f"{type(self).__name__}.{operation}: the draws were expanded over the batch (batch_expand), so "
                    f"batch members share them; {operation} the original map or build a map with this batch_shape."
                )

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # The number of stream segments depends on the map's resizing history: adopt the stored one.
        stored = state_dict.get(prefix + "draw_streams")
        current = getattr(self, "draw_streams", None)
        if stored is not None and current is not None and stored.shape != current.shape:
            self.draw_streams = torch.empty(stored.shape, dtype=current.dtype, device=current.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.draw_version = next_draw_version()

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        # A map from another process keeps its version; later draws here must not meet it again.
        observe_draw_version(self.draw_version)

    # ------------------------------------------------------------------ nested draws
    def _draw_streams(self, generator: torch.Generator) -> dict[str, Tensor]:
        """:meth:`_draw` of a nestable map: a fresh stream per batch member (seeds from ``generator``), read up to
        this map's size."""
        streams = new_streams(self.batch_shape, 0, generator)
        if hasattr(self, "draw_streams"):
            self.draw_streams = streams.to(self.draw_streams.device)
        else:
            self.register_buffer("draw_streams", streams)
        return self._stream_draws()

    def _stream_draws(self) -> dict[str, Tensor]:
        """Every random tensor of the map read from :attr:`draw_streams` (CPU, float64 or integer), batch-stacked."""
        if not hasattr(self, "draw_streams"):
            return {}  # a map without random draws (e.g. a degree-0 sketch)
        members = [self._member_stream_draws(segments) for segments in member_segments(self.draw_streams)]
        return {
            name: torch.stack([m[name] for m in members]).reshape(*self.batch_shape, *members[0][name].shape)
            for name in members[0]
        }

    def _member_stream_draws(self, segments: list[tuple[int, int]]) -> dict[str, Tensor]:
        """The random tensors of one batch member (no batch dimensions) from its stream ``segments``."""
        raise NotImplementedError(f"{type(self).__name__} cannot be resized: {self.nesting_refusal}.")

    def _stream_units(self) -> int:
        """How many stream units the map reads (frequencies, rows, blocks: see the subclass)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be resized: {self.nesting_refusal}.")

    def _set_num_features(self, num_features: int) -> None:
        """Adopt a new number of features (and everything derived from it); subclasses validate it."""
        self.num_features = num_features

    @torch.no_grad()
    def resized(self, num_features: int, generator: torch.Generator | None = None) -> FeatureMapBase:
        r"""A new map of ``num_features`` features whose draws nest with this map's (this map is unchanged).

        The new map has the same configuration, ``batch_shape``, dtype and device. Its draws are the first units
        of this map's stream (:mod:`gprf.features.nested`):

        * a smaller map holds exactly the leading draws of this one (its features are this map's leading
          features with the normalisation of the new ``F``);
        * a larger map holds this map's draws followed by the continuation of the stream: independent draws for
          iid samplers, the completion of the last orthogonal block in the orthogonal complement of its rows
          (then new blocks) for orthogonal samplers, whole new blocks for structured ones, the next points of
          the same scrambled Sobol sequence for QMC. It is a draw of the larger map: for the default generator,
          exactly the map a construction (or :meth:`resample`) with this map's stream would give at that size.

        The draws are rounded to the precision the map drew them in (``draw_dtype``) before taking the buffers'
        dtype, so a map built in float32 and converted with ``.double()`` keeps its prefix bit for bit.

        Without ``generator`` every resize reads the same stream, so shrinking and growing back returns the
        original draws bit for bit, seeded or not. With ``generator``, the units beyond this map's size come
        from a new stream seeded from it (an independent continuation; shrinking below this size and growing
        back then reads the original stream again up to here).

        Raises ``NotImplementedError`` (with the reason) for maps whose draws cannot nest.
        """
        check_generator(generator)
        if self.nesting_refusal is not None:
            raise NotImplementedError(f"{type(self).__name__} cannot be resized: {self.nesting_refusal}.")
        num_features = check_positive_int(num_features, "num_features")
        self._refuse_if_expanded("resized")
        new = copy.deepcopy(self)
        new._set_num_features(num_features)
        if generator is not None and hasattr(self, "draw_streams"):
            first_new = self._stream_units()
            kept = self.draw_streams[..., :, 0] < first_new
            kept_count = int(kept.reshape(-1, kept.size(-1))[0].sum())  # segment starts are shared by the batch
            fresh = new_streams(self.batch_shape, first_new, generator).to(self.draw_streams.device)
            new.draw_streams = torch.cat([self.draw_streams[..., :kept_count, :], fresh], dim=-2)
        for name, value in new._stream_draws().items():
            current = getattr(new, name)
            if value.is_floating_point():
                value = value.to(self.draw_dtype).to(current.dtype)
            setattr(new, name, value.to(current.device))
        new.draw_version = next_draw_version()
        return new

    # ------------------------------------------------------------------ batch handling
    @property
    def batched_buffer_names(self) -> list[str]:
        """The buffers of this map (not of maps inside it) that lead with ``batch_shape``: its random draws and
        their stream segments. Other buffers (centres, tables, scales) are shared by the batch members."""
        return self._random_buffer_names + (["draw_streams"] if hasattr(self, "draw_streams") else [])

    def _map_random_buffers(self, fn: Callable[[Tensor], Tensor], batch_shape: torch.Size) -> FeatureMap:
        new = copy.deepcopy(self)
        for name in self.batched_buffer_names:
            setattr(new, name, fn(getattr(new, name)))
        new.batch_shape = batch_shape
        return new

    def batch_index(self, index: tuple) -> FeatureMap:
        """A copy whose random buffers are indexed on their leading batch dimensions."""
        if len(self.batch_shape) == 0:
            return self
        probe = torch.empty(self.batch_shape, device="meta")[index]
        return self._map_random_buffers(lambda t: t[index], probe.shape)

    def batch_expand(self, batch_shape: torch.Size) -> FeatureMap:
        """A copy whose random buffers are expanded (not redrawn) to ``batch_shape``."""
        batch_shape = torch.Size(batch_shape)
        old = len(self.batch_shape)
        return self._map_random_buffers(lambda t: t.expand(*batch_shape, *t.shape[old:]), batch_shape)

    # ------------------------------------------------------------------ features
    def forward(self, x: Tensor):
        """The features of ``x`` (see the subclasses), in the promoted dtype of the inputs and the draws."""
        check_features_input(x, self.input_dim, type(self).__name__)
        dtype = self._buffer_dtype()
        if dtype is None or x.dtype == dtype:
            return self._featurize(x)
        promoted = torch.promote_types(x.dtype, dtype)
        x = x.to(promoted)
        if promoted == dtype:
            return self._featurize(x)
        # Draws in a lower precision than the inputs (e.g. a float32 kernel in a float64 model): compute with
        # the draws promoted for this call only, leaving the module's buffers as they are.
        promoted_buffers = {
            name: buffer.to(torch.promote_types(buffer.dtype, promoted))
            for name, buffer in self.named_buffers()
            if buffer.is_floating_point() or buffer.is_complex()
        }
        return torch.func.functional_call(self, promoted_buffers, (x,), strict=False)

    def _buffer_dtype(self) -> torch.dtype | None:
        """The floating dtype of the draws (``None`` for maps without floating draws)."""
        for name in self._random_buffer_names:
            buffer = getattr(self, name)
            if buffer.is_floating_point():
                return buffer.dtype
        return None

    @abstractmethod
    def _featurize(self, x: Tensor) -> Tensor:
        """Features of validated inputs."""

    # ------------------------------------------------------------------ closed forms
    def expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        """:math:`E[\\hat k(x1_i, x2_i)]` row by row (the target kernel or its truncation), shape ``(..., n)``."""
        self._check_pair(x1, x2)
        return self._expected_kernel(x1, x2)

    def variance(self, x1: Tensor, x2: Tensor, part: str = "real") -> Tensor:
        """Closed-form variance of :math:`\\hat k(x1_i, x2_i)` row by row, for the current ``num_features``.

        ``part="real"`` is the variance of the real-part estimate; ``part="total"`` is
        :math:`E|\\hat k - k|^2` (the same for real maps).
        """
        self._check_part(part)
        self._check_pair(x1, x2)
        return self._variance(x1, x2, part)

    def _expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no closed-form expected kernel.")

    def _variance(self, x1: Tensor, x2: Tensor, part: str) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no closed-form variance.")

    def _check_pair(self, x1: Tensor, x2: Tensor) -> None:
        for x in (x1, x2):
            check_features_input(x, self.input_dim, type(self).__name__)
        if x1.shape[-2] != x2.shape[-2]:
            raise ValueError(f"x1 and x2 pair up row by row: got {x1.shape[-2]} and {x2.shape[-2]} rows.")

    @staticmethod
    def _check_part(part: str) -> str:
        return check_choice(part, "part", ("real", "total"))

    def extra_repr(self) -> str:
        return f"input_dim={self.input_dim}, num_features={self.num_features}, batch_shape={tuple(self.batch_shape)}"


class FeatureMap(FeatureMapBase):
    r"""A random feature map :math:`x \mapsto \Phi(x)` with :math:`\hat k(x, y) = \mathrm{Re}\,\Phi(x)\Phi(y)^H`.

    :meth:`forward` returns :math:`\Phi(x)`, real or complex (``is_complex``), of shape ``(..., n, num_features)``;
    :meth:`real_features` the real root :math:`R` with :math:`RR^\top = \mathrm{Re}(\Phi\Phi^H)`, which has
    ``root_dim`` columns. See :class:`FeatureMapBase` for the contract every map keeps.
    """

    is_complex: bool = False

    def forward(self, x: Tensor) -> Tensor:
        """Features :math:`\\Phi(x)`, shape ``(..., n, num_features)``, real or complex."""
        return super().forward(x)

    @property
    def root_dim(self) -> int:
        """Number of columns of :meth:`real_features`: ``num_features``, doubled for complex maps."""
        return 2 * self.num_features if self.is_complex else self.num_features

    def real_features(self, x: Tensor) -> Tensor:
        r"""Real root :math:`R` with :math:`RR^\top = \mathrm{Re}(\Phi\Phi^H)`: ``[Re Φ, Im Φ]`` for complex maps."""
        return real_root(self(x))


def real_root(phi: Tensor) -> Tensor:
    r"""The real root of features :math:`\Phi`: :math:`\Phi` itself, or
    :math:`[\mathrm{Re}\,\Phi, \mathrm{Im}\,\Phi]` for complex features."""
    return torch.cat([phi.real, phi.imag], dim=-1) if phi.is_complex() else phi


class SignedFeatureMap(FeatureMapBase):
    r"""A random feature map with two real roots: :math:`\hat k(x, y) = a(x)^\top a(y) - b(x)^\top b(y)`.

    The estimate of an indefinite kernel has no real root :math:`R` with :math:`RR^\top = \hat K`; it is
    :math:`L\,\mathrm{diag}(\varsigma)L^\top` with :math:`L = [A, B]` and the :meth:`signature`
    :math:`\varsigma = (1, \ldots, 1, -1, \ldots, -1)`. :meth:`forward` returns ``(A, B)``, each with ``root_dim``
    columns. See :class:`FeatureMapBase` for the contract every map keeps.
    """

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        r"""The roots ``(A, B)``, each of shape ``(..., n, root_dim)``: :math:`\hat K = AA^\top - BB^\top`."""
        return super().forward(x)

    @property
    @abstractmethod
    def root_dim(self) -> int:
        """Number of columns of each root."""

    def signature(self, dtype: torch.dtype | None = None, device: torch.device | None = None) -> Tensor:
        r""":math:`\varsigma`: ``root_dim`` ones then ``root_dim`` minus ones, the signs of the columns of
        ``[A, B]``."""
        signature = torch.ones(2 * self.root_dim, dtype=dtype, device=device)
        signature[self.root_dim :] = -1.0
        return signature
