r"""An exact GPyTorch kernel whose conjugate gradients are preconditioned by random features of itself."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import gpytorch
import torch
from gpytorch.kernels import Kernel
from linear_operator import to_dense
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor
from torch.func import functional_call

from gprf._checks import check_finite_inputs, check_generator, check_positive_int
from gprf.features.unseeded import unseeded_seed
from gprf.kernels.feature_kernel import FeatureKernel, same_inputs
from gprf.linalg import ExactKernelLinearOperator, FeatureRootLinearOperator
from gprf.linalg.capacitance import solve_triangular
from gprf.prediction import PreconditionedPredictionStrategy
from gprf.prediction.preconditioned import PREDICTION_TOLERANCE
from gprf.settings import factor_dtype, feature_chunk_size

#: The preconditioners a PreconditionedKernel can build (see its ``preconditioner`` argument).
PRECONDITIONERS = ("random_features", "nystrom")
#: Jitter of the Nyström points' kernel matrix, relative to its mean diagonal.
NYSTROM_JITTER = 1e-8


class _ExactKernelFunction:
    """``covar_func`` of :class:`~gprf.linalg.ExactKernelLinearOperator`: ``kernel`` evaluated with the given tensors in
    place of its parameters ``names`` (``torch.func.functional_call``), so that blocks can be recomputed under
    autograd from detached copies."""

    def __init__(self, kernel: Kernel, names: Sequence[str]) -> None:
        self.kernel = kernel
        self.names = tuple(names)

    def __call__(self, x1: Tensor, x2: Tensor, diag: bool = False, **params: Tensor) -> Tensor:
        values = {name: params[f"p{i}"] for i, name in enumerate(self.names)}
        with gpytorch.settings.lazily_evaluate_kernels(False):
            return to_dense(functional_call(self.kernel, values, (x1, x2), {"diag": diag}))


class _FeatureCovariance:
    """``preconditioner_covariance`` of :class:`~gprf.linalg.ExactKernelLinearOperator`: the random-feature
    covariance of ``kernel`` at ``x`` with its root formed (the preconditioner applies it at every iteration)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def __call__(self, x: Tensor) -> FeatureRootLinearOperator:
        with gpytorch.settings.lazily_evaluate_kernels(False), feature_chunk_size(False):
            return self.kernel(x)


class _NystromCovariance:
    r"""``preconditioner_covariance`` for ``preconditioner="nystrom"``: the Nyström covariance
    :math:`K_{XZ}K_{ZZ}^{-1}K_{ZX} = \Phi\Phi^\top`, :math:`\Phi = K_{XZ}L^{-\top}` (:math:`K_{ZZ} + \epsilon I =
    LL^\top` in the factor dtype), of ``num_points`` training inputs :math:`Z` drawn uniformly without replacement
    (seeded by ``seed``; all of them when there are fewer)."""

    def __init__(self, kernel: Kernel, num_points: int, seed: int) -> None:
        self.kernel = kernel
        self.num_points = num_points
        self.seed = seed

    def __call__(self, x: Tensor) -> FeatureRootLinearOperator:
        num_rows = x.size(-2)
        inducing = x
        if self.num_points < num_rows:
            rows = torch.randperm(num_rows, generator=torch.Generator().manual_seed(self.seed))[: self.num_points]
            inducing = x[..., rows.to(x.device), :]
        with gpytorch.settings.lazily_evaluate_kernels(False):
            cross = to_dense(self.kernel(x, inducing))
            gram = to_dense(self.kernel(inducing, inducing)).to(factor_dtype.value())
        # A relative jitter keeps K_ZZ factorisable; it only lowers K_XZ K_ZZ^-1 K_ZX, which stays below K.
        jitter = NYSTROM_JITTER * gram.diagonal(dim1=-2, dim2=-1).mean(-1).unsqueeze(-1).unsqueeze(-1)
        cholesky = psd_safe_cholesky(gram + jitter * torch.eye(gram.size(-1), dtype=gram.dtype, device=gram.device))
        root = solve_triangular(cholesky, cross.mT.to(gram.dtype), upper=False).mT
        return FeatureRootLinearOperator(root.to(x.dtype))


def _new_seed(generator: torch.Generator | None) -> int:
    """A seed for the Nyström points, from ``generator`` (without one: :func:`unseeded_seed`, which leaves torch's
    global generator as it is)."""
    if generator is None:
        return unseeded_seed()
    return int(torch.randint(0, 2**62, (1,), generator=check_generator(generator)))


def _no_prior(module: torch.nn.Module) -> None:
    """The closure of a removed prior (module level, so the kernel stays picklable)."""


# The preconditioner's root is gprf.random_features of the base kernel; gprf.conversion builds on gprf.kernels, so it
# registers that function here when imported (``import gprf`` imports it), and this module never imports it back.
_random_features: Callable[..., Kernel]


def register_random_features(random_features: Callable[..., Kernel]) -> None:
    """Make ``random_features(kernel, num_features, **options)`` the converter that builds preconditioner roots."""
    global _random_features
    _random_features = random_features


class PreconditionedKernel(Kernel):
    r"""The *exact* kernel ``base_kernel``, whose GPyTorch conjugate gradients are preconditioned by random features of
    itself.

    The covariance is that of ``base_kernel`` (RBF, Matérn, ``ScaleKernel`` and the composites
    :func:`gprf.random_features` converts), evaluated lazily as GPyTorch's exact kernels are. Its training covariance
    :math:`\hat K = sK_\ell + \Sigma` plus a Gaussian likelihood's noise hands linear_operator's conjugate gradients
    (CG) and stochastic Lanczos quadrature (SLQ; Gardner et al., 2018) the preconditioner

    .. math::
        P = \Sigma + s\,\Phi\Phi^\top, \qquad
        P^{-1}v = \Sigma^{-1}v - s\,\Sigma^{-1}\Phi\,(I_F + s\,\Phi^\top\Sigma^{-1}\Phi)^{-1}\Phi^\top\Sigma^{-1}v,

    with :math:`\Phi` the :math:`N\times F` random-feature root of the same kernel at the same hyperparameters
    (``gprf.random_features(base_kernel, num_features, ...)``, which shares the very ``Parameter`` objects), instead of
    GPyTorch's rank-15 pivoted Cholesky. The :math:`F\times F` capacitance is factored once per evaluation in float64
    (:func:`gprf.linalg.factor_capacitance`), each application costs :math:`O(NF)`, :math:`\log\det P` follows from
    the determinant lemma and the SLQ probes are :math:`z = \Sigma^{1/2}\varepsilon_1 + \sqrt s\,\Phi\varepsilon_2
    \sim N(0, P)`, so that :math:`\log\det\hat K = \log\det P + \log\det(P^{-1/2}\hat KP^{-1/2})` is estimated with
    the variance-reduced gradient of Wenger, Pleiss, Hennig, Cunningham & Gardner (2022).

    **Which root.** :math:`P^{-1}\hat K` has its eigenvalues near 1 where :math:`s\Phi\Phi^\top` is within
    :math:`\sigma^2` of :math:`sK`; Avron, Clarkson & Woodruff (2017) relate the features this needs to the kernel's
    statistical dimension. Random features (``preconditioner="random_features"``, the default) err in both directions
    with a spectral norm that shrinks only like :math:`F^{-1/2}`, so at small noise they help less than their count
    suggests. ``preconditioner="nystrom"`` uses the Nyström root :math:`\Phi = K_{XZ}L^{-\top}`
    (:math:`K_{ZZ} = LL^\top`) of ``num_features`` training inputs :math:`Z` drawn uniformly (seeded), at the same
    :math:`O(NF)` cost per application: its error :math:`K - K_{XZ}K_{ZZ}^{-1}K_{ZX}` is positive semi-definite and
    falls with the kernel's eigenvalues, so every eigenvalue of :math:`P^{-1}\hat K` is at least 1. On 10,800 rows of
    kin40k at hyperparameters tuned on 2,000 (noise :math:`0.005`), CG to GPyTorch's prediction tolerance took 587
    iterations without a preconditioner, 448 with the rank-15 pivoted Cholesky, 299 with 1,024 random features, 67
    with 4,096 and 39 with 1,024 Nyström points (``python -m benchmarks.cg_iterations``).

    * **Memory** :math:`O(N\cdot\text{block} + NF)`: kernel products are computed ``block_rows`` rows at a time and
      recomputed under autograd in the backward pass (:class:`~gprf.linalg.ExactKernelLinearOperator`), as GPyTorch's
      partitioned and KeOps kernels do; a matrix that fits in one block (:math:`N^2 \le 2^{24}` entries by default)
      is evaluated once and kept, as GPyTorch keeps a dense kernel matrix.
    * **When CG runs**: as for every GPyTorch kernel, linear_operator factors :math:`\hat K` by Cholesky at or below
      ``gpytorch.settings.max_cholesky_size`` (800 points by default) and runs CG above it. BoTorch switches
      linear_operator's fast computations off on import, which makes GPyTorch's ``MultivariateNormal`` factor the
      dense matrix at any size (with a :class:`~gprf.exceptions.DenseCovarianceWarning` above
      ``max_cholesky_size``): return :class:`gprf.distributions.MultivariateNormal` from the model's ``forward`` to
      keep CG; predictions (:class:`~gprf.prediction.PreconditionedPredictionStrategy`) take it by themselves.
    * **Parameters**: the hyperparameters are ``base_kernel``'s (training this kernel trains them; :meth:`exact`
      and :attr:`base_kernel` give the exact kernel); the preconditioner's feature draws are buffers
      (``state_dict``, pickling, ``.to()``) and the Nyström points follow ``seed`` (an attribute); both are redrawn
      by :meth:`resample_features`. The preconditioner follows the hyperparameters: it is built anew for every
      evaluation of the covariance and shared by the solves of that evaluation (marginal likelihood and backward
      pass, or a prediction's mean and variances).
    * **Prediction accuracy**: the mean solve :math:`\hat K^{-1}(y - \mu)` runs CG to the smaller of
      ``prediction_tolerance`` and GPyTorch's ``eval_cg_tolerance`` (0.01). At 0.01 the posterior mean still
      carries the solve's error: on those kin40k rows the test RMSE was 0.1146 at 0.01 and 0.1141 at
      :math:`10^{-3}` and :math:`10^{-4}` (a dense float64 solve: 0.1141). With the Nyström preconditioner the
      tighter solve costs a few more iterations (the prediction took 13.0 s at both tolerances, one CPU thread),
      where GPyTorch's exact GP took 21.0 s at 0.01 and 30.3 s at :math:`10^{-3}`.

    Args:
        base_kernel: The exact kernel (a GPyTorch kernel expression that :func:`gprf.random_features` converts).
        num_features: Features :math:`F` of the preconditioner (Nyström points with ``preconditioner="nystrom"``).
        preconditioner: ``"random_features"`` or ``"nystrom"`` (see above).
        sampler, sketch, budget, seed, num_dims: Passed to :func:`gprf.random_features` (e.g. ``sampler=
            "orthogonal"``; ``num_dims`` for kernels that do not tell their input dimension); ``seed`` also seeds the
            Nyström points.
        block_rows: Rows per block of the kernel products (``None``: :math:`2^{24}` entries per block).
        prediction_tolerance: Relative residual of the prediction's mean solve (see above; ``None``: GPyTorch's
            ``eval_cg_tolerance``).

    Example:
        >>> covar_module = PreconditionedKernel(ScaleKernel(RBFKernel(ard_num_dims=d)), num_features=1024)
        >>> # inside an ExactGP; train with ExactMarginalLogLikelihood as usual (CG above max_cholesky_size)

    References:
        Avron, Clarkson & Woodruff, *Faster Kernel Ridge Regression Using Sketching and Preconditioning*, SIAM J.
        Matrix Anal. Appl. 2017. Wenger, Pleiss, Hennig, Cunningham & Gardner, *Preconditioning for Scalable Gaussian
        Process Hyperparameter Optimization*, ICML 2022. Gardner, Pleiss, Bindel, Weinberger & Wilson, *GPyTorch:
        Blackbox Matrix-Matrix Gaussian Process Inference with GPU Acceleration*, NeurIPS 2018.
    """

    def __init__(
        self,
        base_kernel: Kernel,
        num_features: int,
        *,
        preconditioner: str = "random_features",
        sampler: str = "iid",
        sketch: str = "srht",
        budget=None,
        seed: int | None = None,
        num_dims: int | None = None,
        block_rows: int | None = None,
        prediction_tolerance: float | None = PREDICTION_TOLERANCE,
    ) -> None:
        if not isinstance(base_kernel, Kernel):
            raise TypeError(f"base_kernel must be a GPyTorch Kernel, got {type(base_kernel).__name__}.")
        approximate = [type(module).__name__ for module in base_kernel.modules() if isinstance(module, FeatureKernel)]
        if approximate:
            raise TypeError(
                f"base_kernel must be an exact kernel, but it holds the random-feature kernel {approximate[0]}; pass "
                "the exact kernel it approximates (kernel.exact(), or gprf.kernels.exact_expression(kernel))."
            )
        if preconditioner not in PRECONDITIONERS:
            raise ValueError(
                f"Unknown preconditioner {preconditioner!r}; valid choices are: "
                f"{', '.join(map(repr, PRECONDITIONERS))}."
            )
        if block_rows is not None and (
            isinstance(block_rows, bool) or not isinstance(block_rows, int) or block_rows < 1
        ):
            raise ValueError(f"block_rows must be a positive number of rows or None, got {block_rows!r}.")
        check_positive_int(num_features, "num_features")
        if prediction_tolerance is not None and (
            isinstance(prediction_tolerance, bool)
            or not isinstance(prediction_tolerance, (int, float))
            or not 0 < prediction_tolerance < math.inf
        ):
            raise ValueError(
                f"prediction_tolerance must be a positive relative residual (e.g. 1e-3) or None, got "
                f"{prediction_tolerance!r}."
            )
        super().__init__(batch_shape=base_kernel.batch_shape)
        #: The exact kernel, whose hyperparameters are this kernel's.
        self.base_kernel = base_kernel
        #: Features :math:`F` of the preconditioner (Nyström points with ``preconditioner="nystrom"``).
        self.num_features = num_features
        self.preconditioner = preconditioner
        self.block_rows = block_rows
        self.prediction_tolerance = prediction_tolerance
        self.options = {"sampler": sampler, "sketch": sketch, "budget": budget, "seed": seed, "num_dims": num_dims}
        if preconditioner == "nystrom":
            self.preconditioner_kernel = None
            self.nystrom_seed = _new_seed(None) if seed is None else seed
            return
        try:
            approximation = _random_features(base_kernel, num_features, **self.options)
        except TypeError as err:
            raise TypeError(
                f"PreconditionedKernel builds its preconditioner with gprf.random_features, which cannot convert "
                f"base_kernel: {err} (or use preconditioner='nystrom', which evaluates the kernel itself)"
            ) from err
        self.preconditioner_kernel = _without_priors(approximation)

    def exact(self) -> Kernel:
        """The exact kernel (:attr:`base_kernel`, not a copy)."""
        return self.base_kernel

    def random_feature_kernel(self) -> Kernel:
        """The random-feature approximation of :attr:`base_kernel` with :attr:`num_features` features
        (:func:`gprf.random_features` with this kernel's ``sampler``, ``sketch``, ``budget``, ``seed`` and
        ``num_dims``), on this kernel's device and dtype. It shares the base kernel's ``Parameter`` objects and
        priors, so training it trains this kernel: :func:`gprf.fit_mll` tunes an exact model through it."""
        kernel = _random_features(self.base_kernel, self.num_features, **self.options)
        reference = next(itertools.chain(self.parameters(), self.buffers()), None)
        return kernel if reference is None else kernel.to(device=reference.device, dtype=reference.dtype)

    def resample_features(self, generator: torch.Generator | None = None) -> None:
        """Redraw the preconditioner's random features (or Nyström points) in place; the covariance does not
        change."""
        if self.preconditioner == "nystrom":
            self.nystrom_seed = _new_seed(generator)
        else:
            _resample(self.preconditioner_kernel, generator)

    def _preconditioner_covariance(self) -> _FeatureCovariance | _NystromCovariance:
        if self.preconditioner == "nystrom":
            return _NystromCovariance(self.base_kernel, self.num_features, self.nystrom_seed)
        return _FeatureCovariance(self.preconditioner_kernel)

    def forward(
        self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params
    ) -> Tensor | ExactKernelLinearOperator:
        if last_dim_is_batch:
            raise NotImplementedError(
                "PreconditionedKernel does not support last_dim_is_batch (deprecated in GPyTorch); build one kernel "
                "per input dimension instead."
            )
        if params:
            raise TypeError(f"PreconditionedKernel takes no extra kernel arguments, got {sorted(params)}.")
        # GPyTorch's exact kernels turn NaN inputs into NaN covariances without a word; the feature kernels refuse them.
        for x in (x1, x2):
            check_finite_inputs(x, "PreconditionedKernel")
        if diag:
            return self.base_kernel(x1, x2, diag=True)
        names, tensors = zip(*self.base_kernel.named_parameters(), strict=True) if self._has_parameters() else ((), ())
        batch_dims = len(self.base_kernel.batch_shape)
        return ExactKernelLinearOperator(
            x1,
            x2,
            _ExactKernelFunction(self.base_kernel, names),
            num_nonbatch_dimensions={f"p{i}": tensor.dim() - batch_dims for i, tensor in enumerate(tensors)},
            preconditioner_covariance=self._preconditioner_covariance() if same_inputs(x1, x2) else None,
            block_rows=self.block_rows,
            **{f"p{i}": tensor for i, tensor in enumerate(tensors)},
        )

    def _has_parameters(self) -> bool:
        return next(self.base_kernel.parameters(), None) is not None

    def num_outputs_per_input(self, x1: Tensor, x2: Tensor) -> int:
        return self.base_kernel.num_outputs_per_input(x1, x2)

    def prediction_strategy(self, train_inputs, train_prior_dist, train_labels, likelihood):
        strategy = PreconditionedPredictionStrategy(train_inputs, train_prior_dist, train_labels, likelihood)
        strategy.tolerance = self.prediction_tolerance
        return strategy

    # ------------------------------------------------------------------ batch views keep the tying
    def __getitem__(self, index) -> Kernel:
        if len(self.batch_shape) == 0:
            return self
        return self._around(self.base_kernel[index])

    def expand_batch(self, *sizes) -> Kernel:
        expanded = self.base_kernel.expand_batch(*sizes)
        return self if expanded is self.base_kernel else self._around(expanded)

    def _around(self, base_kernel: Kernel) -> PreconditionedKernel:
        """A kernel of the same construction around ``base_kernel`` (a batch view), preconditioned by its own
        features: GPyTorch's per-kernel copies of indexed parameters would untie the two."""
        return PreconditionedKernel(
            base_kernel,
            self.num_features,
            preconditioner=self.preconditioner,
            block_rows=self.block_rows,
            prediction_tolerance=self.prediction_tolerance,
            **self.options,
        )


def _without_priors(kernel: Kernel) -> Kernel:
    """``kernel`` with the priors it shares with the exact kernel removed: the exact kernel's marginal likelihood adds
    them once (GPyTorch collects the priors of every submodule)."""
    for name, owner, *_ in list(kernel.named_priors()):
        owner.register_prior(name.rsplit(".", 1)[-1], None, _no_prior)
    return kernel


def _resample(module: torch.nn.Module, generator: torch.Generator | None) -> None:
    """``resample_features`` of every outermost part of ``module`` that has one (sums have none: their parts do)."""
    if hasattr(module, "resample_features"):
        module.resample_features(generator)
        return
    for child in module.children():
        _resample(child, generator)
