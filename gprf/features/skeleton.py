r"""Computation skeletons: the DAGs that define compositional kernels (Daniely et al. 2017, §5).

A skeleton has *input nodes* — a receptive field (coordinates of the input vector) with a normalised base
kernel — and *internal nodes* — a dual activation :math:`\hat\sigma_v` applied to the mean of the kernels of
the nodes feeding it. The unique node that feeds no other node is the output, and

.. math::
    k_v(x, y) = \hat\sigma_v\Big(\frac{1}{|\mathrm{in}(v)|}\sum_{u\in\mathrm{in}(v)} k_u(x, y)\Big),
    \qquad k = k_{\mathrm{output}}.

Base kernels (on the receptive field :math:`S`, inputs already divided by the lengthscale):

* ``"linear"``: the normalised dot product of the inputs augmented by a unit coordinate,
  :math:`k(x, y) = \tilde x^\top\tilde y/(\lVert\tilde x\rVert\lVert\tilde y\rVert)`, :math:`\tilde x = [x_S, 1]`
  (inputs on a sphere, as in Daniely et al. 2017; the extra coordinate keeps zero patches defined and makes the
  lengthscale the scale of :math:`x` relative to the constant);
* ``"gaussian"``: :math:`k(x, y) = e^{-\lVert x_S - y_S\rVert^2/2}`.

Both satisfy :math:`k(x, x) = 1`, so every node kernel lies in :math:`[-1, 1]` where the duals are defined.

References:
    * A. Daniely, R. Frostig, Y. Singer. *Toward Deeper Understanding of Neural Networks: The Power of
      Initialization and a Dual View on Expressivity.* Advances in Neural Information Processing Systems (NeurIPS),
      2016.
    * A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.* arXiv:1703.07872,
      2017.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from gprf._checks import check_choice, check_positive_int
from gprf.features.dual_activations import DualActivation, as_dual_activation

BASE_KERNELS = ("linear", "gaussian")


@dataclass(frozen=True)
class InputNode:
    """An input node: the coordinates it reads (its receptive field) and its base kernel."""

    receptive_field: tuple[int, ...]
    base_kernel: str = "linear"

    def __post_init__(self) -> None:
        object.__setattr__(self, "receptive_field", tuple(int(i) for i in self.receptive_field))
        check_choice(self.base_kernel, "base_kernel", BASE_KERNELS)


@dataclass(frozen=True)
class InternalNode:
    """An internal node: the ids of the nodes feeding it and its dual activation (name, coefficients or object)."""

    inputs: tuple[int, ...]
    activation: DualActivation = field(default_factory=DualActivation.relu)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(int(i) for i in self.inputs))
        object.__setattr__(self, "activation", as_dual_activation(self.activation))


class Skeleton:
    r"""A computation skeleton: a DAG of input nodes (ids ``0..I-1``) and internal nodes (ids ``I..``).

    Args:
        input_dim: Length of the (flattened) input vectors.
        input_nodes: :class:`InputNode` objects, or receptive fields (sequences of coordinates, base kernel
            ``"linear"``).
        internal_nodes: :class:`InternalNode` objects, or ``(inputs, activation)`` pairs; ``inputs`` are node
            ids (input nodes first, then internal nodes in the order given).
        input_shape: Shape the flattened inputs come from (e.g. ``(8, 8)`` images), for error messages.

    Raises ``ValueError`` for empty or out-of-range receptive fields, internal nodes without inputs or with
    unknown or repeated inputs, cycles, and nodes that feed nothing apart from the single output node.
    """

    def __init__(
        self,
        input_dim: int,
        input_nodes: Sequence[InputNode | Sequence[int]],
        internal_nodes: Sequence[InternalNode | tuple] = (),
        input_shape: tuple[int, ...] | None = None,
    ) -> None:
        self.input_dim = check_positive_int(input_dim, "input_dim")
        self.input_shape = tuple(input_shape) if input_shape is not None else (input_dim,)
        self.input_nodes = tuple(n if isinstance(n, InputNode) else InputNode(tuple(n)) for n in input_nodes)
        self.internal_nodes = tuple(n if isinstance(n, InternalNode) else InternalNode(*n) for n in internal_nodes)
        if not self.input_nodes:
            raise ValueError("A skeleton needs at least one input node.")
        self._check_input_nodes()
        self.order = self._topological_order()
        self.output = self._single_output()

    # ------------------------------------------------------------------ structure
    @property
    def num_inputs(self) -> int:
        return len(self.input_nodes)

    @property
    def num_nodes(self) -> int:
        return len(self.input_nodes) + len(self.internal_nodes)

    def is_input(self, node: int) -> bool:
        return node < self.num_inputs

    def node_inputs(self, node: int) -> tuple[int, ...]:
        """Ids of the nodes feeding ``node`` (empty for input nodes)."""
        return () if self.is_input(node) else self.internal_nodes[node - self.num_inputs].inputs

    def activation(self, node: int) -> DualActivation:
        return self.internal_nodes[node - self.num_inputs].activation

    def _check_input_nodes(self) -> None:
        for index, node in enumerate(self.input_nodes):
            field_ = node.receptive_field
            if not field_:
                raise ValueError(f"input node {index} has an empty receptive field; give it at least one coordinate.")
            if min(field_) < 0 or max(field_) >= self.input_dim or len(set(field_)) != len(field_):
                raise ValueError(
                    f"input node {index} has receptive field {field_}: coordinates must be distinct and lie in "
                    f"[0, {self.input_dim}) for input_dim={self.input_dim}."
                )

    def _topological_order(self) -> list[int]:
        """Internal node ids, each after all of its inputs (Kahn's algorithm); raises on cycles."""
        first = self.num_inputs
        pending: dict[int, set[int]] = {}
        for offset, node in enumerate(self.internal_nodes):
            v = first + offset
            if not node.inputs:
                raise ValueError(f"internal node {v} has no inputs; every internal node needs at least one input node.")
            bad = [u for u in node.inputs if not 0 <= u < self.num_nodes or u == v]
            if bad:
                raise ValueError(
                    f"internal node {v} has invalid inputs {bad}: ids lie in [0, {self.num_nodes}), not itself."
                )
            if len(set(node.inputs)) != len(node.inputs):
                raise ValueError(f"internal node {v} lists an input twice: {node.inputs}.")
            pending[v] = {u for u in node.inputs if u >= first}
        order: list[int] = []
        ready = [v for v, deps in pending.items() if not deps]
        while ready:
            v = ready.pop()
            order.append(v)
            for w, deps in pending.items():
                if v in deps:
                    deps.discard(v)
                    if not deps:
                        ready.append(w)
        if len(order) != len(self.internal_nodes):
            blocked = sorted(set(pending) - set(order))
            raise ValueError(
                f"the skeleton has a cycle: internal nodes {blocked} lie on it or depend on it; "
                "a skeleton must be a DAG."
            )
        return order

    def _single_output(self) -> int:
        used = {u for node in self.internal_nodes for u in node.inputs}
        sinks = [v for v in range(self.num_nodes) if v not in used]
        if len(sinks) != 1:
            raise ValueError(
                f"a skeleton has exactly one output node (a node feeding no other node); nodes {sinks} feed "
                "nothing. Connect them or remove them."
            )
        return sinks[0]

    @property
    def depth(self) -> int:
        """Number of internal nodes on the longest path from an input to the output."""
        level = dict.fromkeys(range(self.num_inputs), 0)
        for v in self.order:
            level[v] = 1 + max(level[u] for u in self.node_inputs(v))
        return level[self.output]

    @property
    def complexity(self) -> float:
        r"""Expected number of base features multiplied into one random feature (Daniely et al. 2017, eq. 11):
        :math:`C_v = \hat\sigma_v'(1)\,\mathrm{mean}_{u\in\mathrm{in}(v)} C_u`, :math:`C = 1` at input nodes.
        It is 1 for every skeleton of ReLU and unit-scale exponential nodes, whatever the input dimension."""
        cost = dict.fromkeys(range(self.num_inputs), 1.0)
        for v in self.order:
            inputs = self.node_inputs(v)
            cost[v] = self.activation(v).expected_degree * sum(cost[u] for u in inputs) / len(inputs)
        return cost[self.output]

    # ------------------------------------------------------------------ kernels
    def check_input(self, x: Tensor, owner: str = "Skeleton") -> None:
        if not torch.is_tensor(x) or x.dim() < 2 or x.size(-1) != self.input_dim:
            shape = tuple(x.shape) if torch.is_tensor(x) else type(x).__name__
            origin = (
                ""
                if self.input_shape == (self.input_dim,)
                else f" (inputs of shape {self.input_shape} flattened row-major)"
            )
            raise ValueError(
                f"{owner}: the skeleton expects inputs of shape (..., n, {self.input_dim}){origin}, got {shape}; "
                f"reshape the inputs with x.reshape(*x.shape[:-{len(self.input_shape)}], {self.input_dim})"
                " or build the skeleton for this input shape."
            )

    def kernel(self, x1: Tensor, x2: Tensor, diag: bool = False) -> Tensor:
        """The exact skeleton kernel: ``(..., n, m)`` or row by row ``(..., n)`` with ``diag=True``."""
        for x in (x1, x2):
            self.check_input(x)
        return self._recurse(lambda node: _base_kernel(node, x1, x2, diag), lambda act, rho: act(rho))

    def second_moment(self, x1: Tensor, x2: Tensor) -> Tensor:
        r"""Row by row :math:`E[\psi(x)^2\psi(y)^2]` of one random feature :math:`\psi` (Daniely et al. 2017, Alg. 1).

        The same recursion as the kernel with the base features' second moments at the inputs:
        :math:`\psi_v = \prod_{i\le n}\psi_{u_i}` with :math:`n\sim b`, :math:`u_i` uniform, gives
        :math:`M_v = \sum_n b_n(\mathrm{mean}_u M_u)^n`; for coordinate sampling
        :math:`M = (|S| + 1)\sum_j\tilde x_j^2\tilde y_j^2` (unit :math:`\tilde x, \tilde y`), for
        :math:`\sqrt2\cos(w^\top x + c)`, :math:`M = 1 + k^4/2`. The series is evaluated beyond 1 where it
        converges and is ``inf`` where it diverges (ReLU nodes whose inputs have :math:`M > 1`).
        """
        for x in (x1, x2):
            self.check_input(x)
        return self._recurse(lambda node: _base_second_moment(node, x1, x2), lambda act, r: act.extended(r))

    def _recurse(
        self, base: Callable[[InputNode], Tensor], activate: Callable[[DualActivation, Tensor], Tensor]
    ) -> Tensor:
        """Evaluate the node recursion in topological order, freeing node values after their last use."""
        if self.is_input(self.output):
            return base(self.input_nodes[self.output])
        consumers = dict.fromkeys(range(self.num_nodes), 0)
        for node in self.internal_nodes:
            for u in node.inputs:
                consumers[u] += 1
        values: dict[int, Tensor] = {}
        for v in self.order:
            inputs = self.node_inputs(v)
            total = None
            for u in inputs:
                value = values[u] if u in values else base(self.input_nodes[u])
                total = value if total is None else total + value
                consumers[u] -= 1
                if consumers[u] == 0:
                    values.pop(u, None)
                elif u not in values:
                    values[u] = value
            values[v] = activate(self.activation(v), total / len(inputs))
        return values[self.output]

    # ------------------------------------------------------------------ constructors
    @classmethod
    def fully_connected(
        cls,
        input_dim: int,
        num_layers: int = 1,
        activation: str | Sequence[float] | DualActivation = "relu",
        base_kernel: str = "linear",
    ) -> Skeleton:
        r"""One input node reading the whole vector, then a chain of ``num_layers`` internal nodes.

        This is the fully connected skeleton of any width (all nodes of a layer have the same kernel), e.g.
        :math:`\hat\sigma(\hat\sigma(k_0))` for two layers. With ``base_kernel="linear"``, an exponential node
        gives the Gaussian kernel of the normalised augmented inputs.
        """
        check_positive_int(num_layers, "num_layers")
        act = as_dual_activation(activation)
        internal = [InternalNode((layer,), act) for layer in range(num_layers)]
        return cls(input_dim, [InputNode(tuple(range(input_dim)), base_kernel)], internal)

    @classmethod
    def convolutional(
        cls,
        input_shape: int | tuple[int] | tuple[int, int],
        patch_size: int = 3,
        stride: int = 1,
        num_layers: int = 2,
        activation: str | Sequence[float] | DualActivation = "relu",
        output_activation: str | Sequence[float] | DualActivation | None = None,
        base_kernel: str = "linear",
    ) -> Skeleton:
        """A 1-D or 2-D convolution-like skeleton on inputs of ``input_shape`` (flattened row-major).

        One input node per pixel (its base kernel on the single value); ``num_layers`` convolution layers, each
        node reading a ``patch_size`` window (square in 2-D) of the previous layer with ``stride`` (windows are
        shifted to cover the border, and shrink to the whole grid when it is smaller than a patch); a fully
        connected output node over the last layer with ``output_activation`` (default: ``activation``).
        """
        shape = (input_shape,) if isinstance(input_shape, int) else tuple(input_shape)
        if len(shape) not in (1, 2):
            raise ValueError(f"input_shape must be 1-D (length,) or 2-D (height, width), got {input_shape!r}.")
        for name, value in (("patch_size", patch_size), ("stride", stride)):
            check_positive_int(value, name)
        for size in shape:
            check_positive_int(size, "input_shape entries")
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0:
            raise ValueError(f"num_layers must be a non-negative integer, got {num_layers!r}.")
        act = as_dual_activation(activation)
        out_act = act if output_activation is None else as_dual_activation(output_activation)
        input_dim = math.prod(shape)
        inputs = [InputNode((i,), base_kernel) for i in range(input_dim)]
        grid = torch.arange(input_dim).reshape(shape)  # node ids of the current layer on its grid
        internal: list[InternalNode] = []
        for _ in range(num_layers):
            starts = [_window_starts(size, patch_size, stride) for size in grid.shape]
            new_ids = []
            for corner in _product(starts):
                window = grid[tuple(slice(c, c + patch_size) for c in corner)]
                internal.append(InternalNode(tuple(window.flatten().tolist()), act))
                new_ids.append(input_dim + len(internal) - 1)
            grid = torch.tensor(new_ids).reshape([len(s) for s in starts])
        internal.append(InternalNode(tuple(grid.flatten().tolist()), out_act))
        return cls(input_dim, inputs, internal, input_shape=shape)

    def __repr__(self) -> str:
        return (
            f"Skeleton(input_shape={self.input_shape}, input_nodes={self.num_inputs}, "
            f"internal_nodes={len(self.internal_nodes)}, depth={self.depth})"
        )


def _window_starts(size: int, patch: int, stride: int) -> list[int]:
    if size <= patch:
        return [0]
    starts = list(range(0, size - patch + 1, stride))
    if starts[-1] + patch < size:  # cover the border
        starts.append(size - patch)
    return starts


def _product(starts: list[list[int]]) -> list[tuple[int, ...]]:
    corners: list[tuple[int, ...]] = [()]
    for axis in starts:
        corners = [corner + (s,) for corner in corners for s in axis]
    return corners


def augmented_unit(x: Tensor, receptive_field: tuple[int, ...]) -> Tensor:
    r""":math:`\tilde x/\lVert\tilde x\rVert` with :math:`\tilde x = [x_S, 1]` (never zero, so always defined)."""
    idx = torch.as_tensor(receptive_field, device=x.device)
    z = torch.cat([x.index_select(-1, idx), torch.ones_like(x[..., :1])], dim=-1)
    return z / z.norm(dim=-1, keepdim=True)


def _base_kernel(node: InputNode, x1: Tensor, x2: Tensor, diag: bool) -> Tensor:
    if node.base_kernel == "linear":
        z1, z2 = augmented_unit(x1, node.receptive_field), augmented_unit(x2, node.receptive_field)
        return (z1 * z2).sum(-1) if diag else z1 @ z2.mT
    idx = torch.as_tensor(node.receptive_field, device=x1.device)
    a, b = x1.index_select(-1, idx), x2.index_select(-1, idx)
    if diag:
        return torch.exp(-0.5 * (a - b).square().sum(-1))
    # |a|^2 + |b|^2 - 2ab, clamped: exact enough for a kernel and cheaper than pairwise differences.
    sq = a.square().sum(-1).unsqueeze(-1) + b.square().sum(-1).unsqueeze(-2) - 2.0 * a @ b.mT
    return torch.exp(-0.5 * sq.clamp_min(0.0))


def _base_second_moment(node: InputNode, x1: Tensor, x2: Tensor) -> Tensor:
    if node.base_kernel == "linear":
        z1, z2 = augmented_unit(x1, node.receptive_field), augmented_unit(x2, node.receptive_field)
        return z1.size(-1) * (z1.square() * z2.square()).sum(-1)
    k = _base_kernel(node, x1, x2, diag=True)
    return 1.0 + 0.5 * k**4
