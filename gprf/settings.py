"""Global switches, used as context managers (GPyTorch style).

Every setting is a process-wide value with a default: ``with setting(value):`` sets it and the block's exit restores
what was set before, also when the block raises, so blocks nest. Process-wide means that a value set in one thread is
seen by every thread (autograd's device threads, for one, read it during a backward pass run inside the block), and
that the settings are not thread-safe: blocks of one setting entered concurrently in several threads restore one
another's values in the wrong order. Enter them from one thread at a time.

This module is the package's ground floor: it imports torch only, so that every other module may read the settings.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

import torch


class _Setting:
    """A process-wide value that a ``with`` block sets and its exit restores.

    Subclasses declare the default as the class attribute ``_value``, check their arguments in ``__init__`` and pass
    the value the block sets to ``super().__init__``; their classmethods read ``cls._value``. Each entry pushes the
    value it replaces onto the instance's own stack, so an instance may be entered again, also within itself.
    """

    _value: ClassVar[Any]

    def __init__(self, value: object) -> None:
        self._block_value = value
        self._replaced: list[object] = []

    def __enter__(self) -> None:
        setting = type(self)
        self._replaced.append(setting._value)
        setting._value = self._block_value

    def __exit__(self, *exc_info: object) -> bool:
        type(self)._value = self._replaced.pop()
        return False  # exceptions propagate


class validate_inputs(_Setting):
    """Whether feature maps check their inputs for NaN/inf.

    ``"auto"`` (default) checks CPU tensors only: the check is free there, while on CUDA it forces a
    host synchronisation per forward pass. Non-finite CUDA training data still surface as a clear error
    from the factorisation of the marginal likelihood or the prediction caches (which synchronise once per
    factorisation anyway). ``True`` checks on every device, ``False`` never checks.

    Example:
        >>> with gprf.settings.validate_inputs(True):
        ...     loss = -mll(model(train_x), train_y)
    """

    _value: ClassVar[bool | str] = "auto"

    def __init__(self, state: bool | str = True) -> None:
        if state not in (True, False, "auto"):
            raise ValueError(f"validate_inputs takes True, False or 'auto', got {state!r}.")
        super().__init__(state)

    @classmethod
    def applies_to(cls, x: torch.Tensor) -> bool:
        """Whether ``x`` is checked under the current setting."""
        if cls._value == "auto":
            return x.device.type == "cpu"
        return bool(cls._value)


class factor_dtype(_Setting):
    r"""The dtype in which every :math:`F\times F` capacitance (and every :math:`N\times N` matrix of the
    few-points route) is formed and factored, and in which streamed sufficient statistics are summed.

    ``torch.float64`` (default) keeps float32 models accurate at small noise: the two terms of the
    inverse quadratic form nearly cancel there, and the capacitance :math:`I + R^\top\Sigma^{-1}R` has a
    condition number up to :math:`1 + \lVert R\rVert^2/\sigma^2`. ``torch.float32`` trades that accuracy
    for speed on GPUs with slow float64 arithmetic.

    Example:
        >>> with gprf.settings.factor_dtype(torch.float32):
        ...     loss = -mll(model(train_x), train_y)
    """

    _value: ClassVar[torch.dtype] = torch.float64

    def __init__(self, dtype: torch.dtype) -> None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"factor_dtype takes torch.float32 or torch.float64, got {dtype!r}.")
        super().__init__(dtype)

    @classmethod
    def value(cls) -> torch.dtype:
        """The current factor dtype."""
        return cls._value

    @classmethod
    def complex_value(cls) -> torch.dtype:
        """The complex dtype of the same precision (Hermitian capacitances of complex features)."""
        return torch.complex128 if cls._value == torch.float64 else torch.complex64


@runtime_checkable
class _WarmStartState(Protocol):
    """What the weight-space CG solve reads and writes in a caller's warm-start state (as
    :class:`gprf.linalg.WeightSpaceCGState` does), checked by its members so that this module imports no other."""

    solution: torch.Tensor | None
    iterations: int | None
    converged: bool | None

    def guess_for(self, projection: torch.Tensor) -> torch.Tensor | None: ...


class weight_space_solver(_Setting):
    r"""How the marginal likelihood treats the :math:`F\times F` capacitance :math:`C = I + s\,R^\top\Sigma^{-1}R`.

    ``"cholesky"`` factors :math:`C` (exact, :math:`O(F^3)` forward and backward). ``"cg"`` solves with
    preconditioned conjugate gradients and estimates :math:`\log\det C` by stochastic Lanczos quadrature
    (:func:`gprf.linalg.cg_inv_quad_logdet`, :math:`O(\text{iterations}\cdot F^2)`): the log-determinant and its
    gradient become estimates (see :doc:`/large_scale`). ``"auto"`` (default) takes CG from ``auto_threshold``
    features on and the Cholesky factor below. Either is only used where the marginal likelihood takes the features
    route (:class:`covariance_route`: by default with at least as many training points as features); with fewer,
    :math:`K` is factored as an :math:`N\times N` matrix.

    Args:
        solver: ``"auto"``, ``"cholesky"`` or ``"cg"``.
        auto_threshold: The number of features :math:`F` from which ``"auto"`` uses CG. The default is where CG
            made the whole training step clearly faster (1.7 times) on a 2-core CPU (:doc:`/large_scale`); below it
            the exact log-determinant costs little more. It is hardware dependent.
        tolerance: CG's relative residual per right-hand side.
        max_iterations: CG iteration limit (a solve that reaches it warns).
        num_probes: Probes of the log-determinant estimate and of its gradient.
        preconditioner_rank: Rank of the randomized Nyström preconditioner (0: none).
        probe_seed: Draw the same probes (and preconditioner sketch) at every evaluation (default), so that the loss
            is a deterministic function of the hyperparameters, as line-search optimisers such as L-BFGS (BoTorch's
            ``fit_gpytorch_mll``) need; ``None`` draws fresh ones from torch's global generator at every evaluation
            (unbiased stochastic gradients, for Adam or SGD).
        state: A :class:`gprf.linalg.WeightSpaceCGState` the caller owns (one per model) to warm-start each solve
            from the previous solution (or any object with its ``guess_for`` method and its ``solution``,
            ``iterations`` and ``converged`` fields); ``None`` starts from zero.

    Example:
        >>> state = gprf.linalg.WeightSpaceCGState()
        >>> with gprf.settings.weight_space_solver("cg", state=state):
        ...     loss = -mll(model(train_x), train_y)
    """

    _value: ClassVar[weight_space_solver | None] = None  # None: the defaults

    def __init__(
        self,
        solver: str = "auto",
        *,
        auto_threshold: int = 8192,
        tolerance: float = 1e-4,
        max_iterations: int = 1000,
        num_probes: int = 16,
        preconditioner_rank: int = 256,
        probe_seed: int | None = 0,
        state: object | None = None,
    ) -> None:
        if solver not in ("auto", "cholesky", "cg"):
            raise ValueError(f"weight_space_solver takes 'auto', 'cholesky' or 'cg', got {solver!r}.")
        for name, value, low in (
            ("auto_threshold", auto_threshold, 1),
            ("max_iterations", max_iterations, 1),
            ("num_probes", num_probes, 1),
            ("preconditioner_rank", preconditioner_rank, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"weight_space_solver: {name} must be an integer of at least {low}, got {value!r}.")
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 < tolerance < 1:
            raise ValueError(f"weight_space_solver: tolerance is a relative residual in (0, 1), got {tolerance!r}.")
        if probe_seed is not None and (isinstance(probe_seed, bool) or not isinstance(probe_seed, int)):
            raise ValueError(f"weight_space_solver: probe_seed must be an integer or None, got {probe_seed!r}.")
        if state is not None and not isinstance(state, _WarmStartState):
            raise ValueError(
                f"weight_space_solver: state must be a gprf.linalg.WeightSpaceCGState or None, got {type(state)!r}."
            )
        self.solver = solver
        self.auto_threshold = auto_threshold
        self.tolerance = float(tolerance)
        self.max_iterations = max_iterations
        self.num_probes = num_probes
        self.preconditioner_rank = preconditioner_rank
        self.probe_seed = probe_seed
        self.state = state
        super().__init__(self)  # a block makes this whole setting the current one

    @classmethod
    def current(cls) -> weight_space_solver:
        """The active setting (the defaults outside any ``with`` block)."""
        return cls._value if cls._value is not None else cls()

    def uses_cg(self, num_features: int) -> bool:
        """Whether a capacitance of ``num_features`` columns is solved by CG under this setting."""
        return self.solver == "cg" or (self.solver == "auto" and num_features >= self.auto_threshold)


class feature_chunk_size(_Setting):
    r"""Whether the marginal likelihood of a feature kernel forms its :math:`N\times F` root, or sums
    :math:`R^\top\Sigma^{-1}R` and :math:`R^\top\Sigma^{-1}Y` over row chunks whose features are recomputed in the
    backward pass (:func:`gprf.linalg.chunked_gram.chunked_gram_projection`: memory :math:`O(\text{chunk}\cdot F +
    F^2)` instead of :math:`O(NF)`, for about one more evaluation of the features).

    ``"auto"`` (default) chunks roots of at least :attr:`AUTO_MIN_ELEMENTS` entries :math:`NF`, in chunks of about
    :attr:`CHUNK_ELEMENTS` entries (at least :attr:`MIN_CHUNK_ROWS` rows); an integer chunks every root of more rows
    than it, in chunks of that many rows; ``False`` never chunks. Consumers of the root itself (prediction) still form
    it; pathwise sampling needs only the sums and always chunks (:meth:`chunked`). The choice is made when the kernel
    is evaluated.

    Example:
        >>> with gprf.settings.feature_chunk_size(4096):
        ...     loss = -mll(model(train_x), train_y)
    """

    #: Entries :math:`NF` from which ``"auto"`` chunks a root.
    AUTO_MIN_ELEMENTS = 2**27
    #: Entries of an automatic chunk of the marginal likelihood (and of the chunked sums on a GPU).
    CHUNK_ELEMENTS = 2**23
    #: Entries of an automatic chunk of the sums without a backward pass on the CPU (:meth:`chunked`).
    SUMS_CHUNK_ELEMENTS = 2**20
    #: Rows of an automatic chunk at least.
    MIN_CHUNK_ROWS = 256
    _value: ClassVar[int | bool | str] = "auto"

    def __init__(self, rows: int | bool | str = "auto") -> None:
        valid = rows is False or rows == "auto" or (isinstance(rows, int) and not isinstance(rows, bool) and rows > 0)
        if not valid:
            raise ValueError(f"feature_chunk_size takes a positive number of rows, False or 'auto', got {rows!r}.")
        super().__init__(rows)

    @classmethod
    def chunk_rows(cls, num_columns: int) -> int:
        """Rows per chunk for a root of ``num_columns`` columns (the set number, or the automatic one)."""
        if isinstance(cls._value, int) and not isinstance(cls._value, bool):
            return cls._value
        return max(cls.MIN_CHUNK_ROWS, cls.CHUNK_ELEMENTS // max(num_columns, 1))

    @classmethod
    def chunked(cls, num_columns: int, device: torch.device) -> feature_chunk_size:
        """A setting that chunks every root of more rows than a chunk, for consumers that need only the chunked sums
        and no backward pass (pathwise sampling), where chunks save memory at no extra featurisation.

        The set number of rows is kept, and so is ``False`` (never chunk). ``"auto"`` becomes chunks of about
        :attr:`SUMS_CHUNK_ELEMENTS` entries on the CPU (at least :attr:`MIN_CHUNK_ROWS` rows): with no backward pass
        to amortise, a chunk only needs to keep its GEMM efficient, and each chunk's temporaries (its features,
        their float64 copy, the featurisation's intermediates) stay a few tens of megabytes. On a GPU, where each
        chunk costs a dozen kernel launches, the chunks are the marginal likelihood's (:attr:`CHUNK_ELEMENTS`).
        """
        if cls._value is False or (isinstance(cls._value, int) and not isinstance(cls._value, bool)):
            return cls(cls._value)
        elements = cls.SUMS_CHUNK_ELEMENTS if device.type == "cpu" else cls.CHUNK_ELEMENTS
        return cls(max(cls.MIN_CHUNK_ROWS, elements // max(num_columns, 1)))

    @classmethod
    def rows(cls, num_points: int, num_columns: int) -> int | None:
        """Rows per chunk for a root of ``num_points`` x ``num_columns``, or ``None`` to form the root whole."""
        if cls._value is False:
            return None
        if cls._value == "auto" and num_points * num_columns < cls.AUTO_MIN_ELEMENTS:
            return None
        rows = cls.chunk_rows(num_columns)
        return rows if num_points > rows else None


class covariance_route(_Setting):
    r"""In which space a feature-kernel GP computes: the :math:`N\times N` covariance of its points or the
    :math:`F\times F` capacitance of its features.

    With :math:`K = s\,RR^\top + \Sigma` (:math:`N` points, :math:`F` features) the marginal likelihood, the posterior
    and the pathwise update can be computed either with the :math:`N\times N` matrix :math:`K` itself (``"points"``:
    :math:`O(N^2F + N^3)`, then :math:`O(MNF + MN^2)` per prediction at :math:`M` points) or with the capacitance
    :math:`C = I + s\,R^\top\Sigma^{-1}R` (``"features"``: :math:`O(NF^2 + F^3)`, then :math:`O(MF^2)`); both are exact
    for the random-feature kernel and give the same numbers up to rounding. ``"auto"`` (default) takes the cheaper
    one for each call from :math:`N`, :math:`F`, :math:`M` and the batch shape (:func:`gprf.linalg.choose_route`);
    the other two force a route.

    Args:
        route: ``"auto"``, ``"points"`` or ``"features"``.
        max_points_bytes: The largest batch of :math:`N\times N` matrices (in bytes, in the factor dtype) the
            ``"points"`` route may form: ``"auto"`` takes the features route beyond it, and a forced ``"points"``
            raises ``ValueError`` instead of running out of memory. Default 2 GiB.

    Example:
        >>> with gprf.settings.covariance_route("features"):
        ...     posterior = model.posterior(candidates)
    """

    ROUTES = ("auto", "points", "features")
    _value: ClassVar[covariance_route | None] = None  # None: the defaults

    def __init__(self, route: str = "auto", *, max_points_bytes: int = 2**31) -> None:
        if route not in self.ROUTES:
            raise ValueError(f"covariance_route takes 'auto', 'points' or 'features', got {route!r}.")
        if isinstance(max_points_bytes, bool) or not isinstance(max_points_bytes, int) or max_points_bytes < 1:
            raise ValueError(
                f"covariance_route: max_points_bytes must be a positive integer, got {max_points_bytes!r}."
            )
        self.route = route
        self.max_points_bytes = max_points_bytes
        super().__init__(self)  # a block makes this whole setting the current one

    @classmethod
    def current(cls) -> covariance_route:
        """The active setting (the defaults outside any ``with`` block)."""
        return cls._value if cls._value is not None else cls()
