r"""Exact fit of a random-feature GP's outputscale, noise and constant mean at fixed features.

At fixed lengthscales the features :math:`\Phi` are fixed, and the exact marginal likelihood of
:math:`y \sim N(c\mathbf 1 + m_0, s\Phi\Phi^\top + \sigma^2 I)` is an :math:`O(F)` function of
:math:`(s, \sigma^2, c)` once :math:`\Phi^\top\Phi` is eigendecomposed
(:class:`~gprf.fitting.ScaleStatistics`). :func:`~gprf.fitting.fit_scale_hyperparameters` builds those statistics from a
GPyTorch model in row chunks and maximises the marginal likelihood (plus the log priors of these parameters) over
the *raw* parameters, through their constraints, with :math:`c` profiled out in closed form where it can be.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from gpytorch.constraints import Interval
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.likelihoods.noise_models import HomoskedasticNoise
from gpytorch.means import ConstantMean, Mean, ZeroMean
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP
from gpytorch.priors import Prior
from gpytorch.utils.transforms import inv_sigmoid, inv_softplus
from torch import Tensor

from gprf._checks import check_positive_int
from gprf.fitting.scale_statistics import FeatureSums, ScaleStatistics, SumsReduction
from gprf.kernels.feature_kernel import is_feature_kernel, unwrap_scale_kernel
from gprf.kernels.feature_product_kernel import select_active
from gprf.linalg import choose_route, covariance_root

# Elements of one chunk of features (rows x F); 2^23 float64 values are 64 MiB.
_CHUNK_ELEMENTS = 2**23
# L-BFGS stops when the largest gradient entry of the summed objective (O(1) per point, in float64) falls below this.
# Iterations cost O(F), so it runs to the gradient criterion (or max_iter), not to a small change of the value, which
# near the optimum falls below float64 resolution (change ~ gradient^2 / curvature) long before the gradient is small.
_TOLERANCE_GRAD = 1e-10
_TOLERANCE_CHANGE = 0.0


@dataclass(frozen=True)
class ScaleFitResult:
    r"""What :func:`fit_scale_hyperparameters` did, for progress reporting.

    Attributes:
        mll_before: The objective before the fit, ``(*batch)``: :math:`\log p(y)` plus the log priors of the
            outputscale, noise and constant, divided by :math:`N` (GPyTorch's ``ExactMarginalLogLikelihood`` without
            the priors of other parameters).
        mll_after: The same after the fit, at the values written into the model.
        outputscale: The fitted ``ScaleKernel`` outputscale, or ``None`` without a ``ScaleKernel``.
        noise: The fitted noise variance (the likelihood's ``noise``).
        constant: The fitted ``ConstantMean`` constant, or ``None`` for other means.
        iterations: L-BFGS iterations.
        statistics_seconds: Wall time of the statistics (features, Gram matrix, eigendecomposition).
        optimization_seconds: Wall time of the optimisation.
    """

    mll_before: Tensor
    mll_after: Tensor
    outputscale: Tensor | None
    noise: Tensor
    constant: Tensor | None
    iterations: int
    statistics_seconds: float
    optimization_seconds: float

    def __str__(self) -> str:
        def show(values: Tensor) -> str:
            flat = values.detach().reshape(-1).tolist()
            text = ", ".join(f"{value:.6g}" for value in flat)
            return text if len(flat) == 1 else f"[{text}]"

        fitted = [f"noise {show(self.noise)}"]
        if self.outputscale is not None:
            fitted.insert(0, f"outputscale {show(self.outputscale)}")
        if self.constant is not None:
            fitted.append(f"constant {show(self.constant)}")
        return (
            f"mll/N {show(self.mll_before)} -> {show(self.mll_after)} ({', '.join(fitted)}; {self.iterations} L-BFGS "
            f"iterations; statistics {self.statistics_seconds:.2f} s, optimisation {self.optimization_seconds:.2f} s)"
        )


class _ScalePriors(torch.nn.Module):
    r"""The log priors GPyTorch's ``ExactMarginalLogLikelihood`` adds for the scale parameters, as a function of
    candidate raw values (evaluated by ``torch.func.functional_call``, which swaps the owners' parameters)."""

    def __init__(self, owners: dict[str, torch.nn.Module], priors: list[tuple[torch.nn.Module, Prior, object]]):
        super().__init__()
        for name, module in owners.items():
            self.add_module(name, module)  # parameters named "<owner>.<raw name>" for functional_call
        self.priors = priors

    def forward(self, batch_ndim: int) -> Tensor | float:
        total = 0.0
        for module, prior, closure in self.priors:
            term = prior.log_prob(closure(module))
            # GPyTorch's reduction: sum everything beyond the marginal likelihood's batch dimensions.
            total = total + term.reshape(*term.shape[:batch_ndim], -1).sum(-1)
        return total


def _scale_fit_refusal(mll: object) -> str | None:
    """Why :func:`fit_scale_hyperparameters` does not apply to ``mll`` (the message of its ``TypeError``), or ``None``
    where it applies: a homoscedastic Gaussian likelihood and a gprf feature covariance in an ``ExactGP``.

    Raises:
        ValueError: The model does not hold one training input tensor (as the fit itself).
    """
    if not isinstance(mll, ExactMarginalLogLikelihood) or not isinstance(mll.model, ExactGP):
        return (
            "fit_scale_hyperparameters takes gpytorch.mlls.ExactMarginalLogLikelihood of an ExactGP, got "
            f"{type(mll).__name__}; fit other objectives with a gradient-based optimizer."
        )
    model, likelihood = mll.model, mll.likelihood
    if model.train_inputs is None or len(model.train_inputs) != 1:
        raise ValueError(
            "fit_scale_hyperparameters needs a model with one training input tensor (model.set_train_data)."
        )
    homoscedastic = isinstance(likelihood, GaussianLikelihood) and isinstance(
        likelihood.noise_covar, HomoskedasticNoise
    )
    if isinstance(likelihood, FixedNoiseGaussianLikelihood) or not homoscedastic:
        return (
            f"fit_scale_hyperparameters fits a homoscedastic gpytorch GaussianLikelihood (one noise variance per "
            f"batch member), got {type(likelihood).__name__}; fit models with this likelihood by gradient-based "
            "fitting of the marginal likelihood instead (e.g. botorch.fit_gpytorch_mll or torch.optim)."
        )
    for name in ("covar_module", "mean_module"):
        if not isinstance(getattr(model, name, None), torch.nn.Module):
            return f"fit_scale_hyperparameters needs the model's {name} (GPyTorch's ExactGP convention)."
    if not is_feature_kernel(model.covar_module):
        return (
            f"fit_scale_hyperparameters needs a gprf random-feature covar_module (optionally in ScaleKernel), got "
            f"{type(unwrap_scale_kernel(model.covar_module)).__name__}; fit other kernels by gradient-based fitting."
        )
    return None


def supports_exact_scale_fit(mll: object) -> bool:
    """Whether :func:`fit_scale_hyperparameters` applies to ``mll`` (a homoscedastic Gaussian likelihood and a gprf
    feature covariance in an ``ExactGP``); where it does not, the fit raises a ``TypeError`` saying why."""
    return _scale_fit_refusal(mll) is None


@dataclass
class _ScaleParameters:
    """The modules whose parameters the exact fit optimises, found (and checked) from an ``ExactGP``."""

    scale_kernel: ScaleKernel | None
    noise_covar: HomoskedasticNoise
    constant_mean: ConstantMean | None
    offset_mean: Mean | None
    priors: _ScalePriors

    @classmethod
    def from_mll(cls, mll: object) -> _ScaleParameters:
        refusal = _scale_fit_refusal(mll)
        if refusal is not None:
            raise TypeError(refusal)
        model, likelihood = mll.model, mll.likelihood
        covar_module, mean_module = model.covar_module, model.mean_module
        scale_kernel = covar_module if isinstance(covar_module, ScaleKernel) else None
        constant_mean = mean_module if isinstance(mean_module, ConstantMean) else None
        offset_mean = None if isinstance(mean_module, (ConstantMean, ZeroMean)) else mean_module

        owners = {"noise": likelihood.noise_covar}
        if scale_kernel is not None:
            owners["scale"] = scale_kernel
        if constant_mean is not None:
            owners["mean"] = constant_mean
        priors = [
            (module, prior, closure)
            for _, module, prior, closure, _ in model.named_priors()
            if any(module is owner for owner in owners.values())
        ]
        return cls(scale_kernel, likelihood.noise_covar, constant_mean, offset_mean, _ScalePriors(owners, priors))

    def has_constant_prior_or_constraint(self) -> bool:
        mean = self.constant_mean
        return any(module is mean for module, _, _ in self.priors.priors) or hasattr(mean, "raw_constant_constraint")


def training_inputs(model: ExactGP) -> Tensor:
    """The training inputs as the model's forward sees them in training mode.

    BoTorch models keep the untransformed inputs in ``train_inputs`` in training mode and apply their input
    transform in ``forward`` (``model.transform_inputs``); plain GPyTorch models use ``train_inputs`` as they are.
    """
    (inputs,) = model.train_inputs
    transform_inputs = getattr(model, "transform_inputs", None)
    return inputs if transform_inputs is None else transform_inputs(inputs)


def _feature_chunks(
    model: ExactGP, offset_mean: Mean | None, inputs: Tensor, targets: Tensor, rows: int
) -> Iterator[tuple[Tensor, Tensor]]:
    """``(root R, y - m0)`` of consecutive row chunks, featurized as the model's covariance does it (one empty chunk
    for no rows, which tells the sums' shapes)."""
    for start in range(0, max(inputs.size(-2), 1), rows):
        x = inputs[..., start : start + rows, :]
        y = targets[..., start : start + rows]
        yield covariance_root(model.covar_module, x).features, (y if offset_mean is None else y - offset_mean(x))


def _fixed_outputscale(model: ExactGP, scale_kernel: ScaleKernel | None, inputs: Tensor) -> Tensor | None:
    r"""The factor of the covariance besides the fitted outputscale :math:`s` (``None`` for 1): the amplitude of the
    root beneath the fitted ``ScaleKernel`` (inner ``ScaleKernel``\ s and constant factors), read from that root."""
    x = inputs[..., :1, :]
    if scale_kernel is None:
        return covariance_root(model.covar_module, x).outputscale
    base = scale_kernel.base_kernel
    # GPyTorch hands the base kernel the columns the ScaleKernel selects: its own active_dims, which it takes over
    # from a base kernel that has some (then the base kernel selects them itself).
    return covariance_root(base, x if base.active_dims is not None else select_active(scale_kernel, x)).outputscale


def _raw_copy(parameter: Tensor, dtype: torch.dtype) -> Tensor:
    return parameter.detach().to(dtype).clone()


class _FreeParameter:
    r"""A raw parameter as L-BFGS sees it: an unconstrained float64 leaf :math:`u`.

    With GPyTorch's default constraints the transform enforces the bounds, and :math:`u` is the raw value itself. A
    constraint built with ``transform=None`` (as BoTorch builds them, enforcing the bounds with scipy's bounded
    optimiser instead) leaves the raw value equal to the parameter: then :math:`u` maps into the bounds as GPyTorch's
    transforms would, :math:`l + \operatorname{softplus}(u)`, :math:`h - \operatorname{softplus}(u)` or
    :math:`l + (h - l)\,\sigma(u)`.
    """

    def __init__(self, parameter: Tensor, constraint: Interval | None, dtype: torch.dtype) -> None:
        self.parameter = parameter
        self.bounds = None
        if constraint is not None and not constraint.enforced:
            lower, upper = (bound.to(dtype) for bound in (constraint.lower_bound, constraint.upper_bound))
            self.bounds = tuple(bound if bool(torch.isfinite(bound).all()) else None for bound in (lower, upper))
        self.leaf = self._free(_raw_copy(parameter, dtype)).requires_grad_(True)

    def _free(self, raw: Tensor) -> Tensor:
        if self.bounds is None:
            return raw
        lower, upper = self.bounds
        tiny = torch.finfo(raw.dtype).eps  # a start on the bound moves just inside it
        if lower is not None and upper is not None:
            return inv_sigmoid(((raw - lower) / (upper - lower)).clamp(tiny, 1 - tiny))
        if lower is not None:
            return inv_softplus((raw - lower).clamp_min(tiny))
        return raw if upper is None else inv_softplus((upper - raw).clamp_min(tiny))

    def raw(self) -> Tensor:
        """The raw value of the leaf (differentiable)."""
        if self.bounds is None:
            return self.leaf
        lower, upper = self.bounds
        if lower is not None and upper is not None:
            return lower + (upper - lower) * torch.sigmoid(self.leaf)
        if lower is not None:
            return lower + torch.nn.functional.softplus(self.leaf)
        return self.leaf if upper is None else upper - torch.nn.functional.softplus(self.leaf)


def fit_scale_hyperparameters(
    mll: ExactMarginalLogLikelihood,
    *,
    chunk_size: int | None = None,
    max_iter: int = 100,
    reduce_sums: SumsReduction | None = None,
) -> ScaleFitResult:
    r"""Maximise the exact marginal likelihood over the outputscale, noise and constant mean at fixed features.

    For an ``ExactGP`` whose ``covar_module`` is a gprf feature kernel (alone, in ``ScaleKernel``, or a feature
    sum) with a homoscedastic ``GaussianLikelihood``: the features of the training inputs (as the model's forward
    sees them in training mode, BoTorch input transforms included) are computed in row chunks of ``chunk_size``,
    reduced to :class:`~gprf.fitting.ScaleStatistics` (:math:`O(NF^2 + F^3)` once), and the objective

    .. math::
        \mathcal L(s, \sigma^2, c) = \tfrac1N \Big(\log N\big(y \mid c\mathbf 1 + m_0,\ s\Phi\Phi^\top + \sigma^2 I\big)
        + \log p(s) + \log p(\sigma^2) + \log p(c)\Big)

    (GPyTorch's ``ExactMarginalLogLikelihood``, which divides the priors by :math:`N` too, with the priors the model
    registers on these parameters) is
    maximised by L-BFGS with strong-Wolfe line search at :math:`O(F)` per evaluation, over the *raw* parameters
    through their constraints' transforms (so bounds such as the noise's ``GreaterThan`` hold exactly). Batch
    members (BoTorch's output batch) are fitted together.

    What is fitted:

    * ``ScaleKernel`` outermost: its outputscale :math:`s`; without one :math:`s` stays 1 (any other amplitude
      inside the kernel stays fixed);
    * the likelihood's noise :math:`\sigma^2`;
    * ``ConstantMean``: :math:`c`, profiled out as :math:`c^* = \mathbf 1^\top K^{-1}(y - m_0) / \mathbf 1^\top
      K^{-1}\mathbf 1` when it has no prior or constraint and one constant per batch member, optimised jointly
      otherwise; ``ZeroMean``: :math:`c = 0`; any other mean is a fixed offset :math:`m_0`.

    The optimum is written into the raw parameters; the model is left in the training mode it had.

    Args:
        mll: GPyTorch's ``ExactMarginalLogLikelihood`` of the model.
        chunk_size: Rows per chunk of features (``None``: about :math:`2^{23}/F` rows).
        max_iter: Most L-BFGS iterations.
        reduce_sums: ``None`` (every row is in this process), or the function that sums the row sums over the
            processes holding the rest of the rows (``FeatureSums.from_chunks``'s ``reduce``):
            :func:`gprf.fit_mll` passes the one of a :class:`gprf.distributed.ShardedMarginalLogLikelihood`.

    Returns:
        A :class:`ScaleFitResult` (objective before and after, fitted values, iterations, timings).

    Raises:
        TypeError: For another objective or model, a likelihood other than a homoscedastic ``GaussianLikelihood``
            (observed or heteroscedastic noise, non-Gaussian likelihoods: fit those by gradient-based fitting), or
            a covariance that is not a gprf feature kernel.

    Example:
        >>> mll = ExactMarginalLogLikelihood(model.likelihood, model)
        >>> result = fit_scale_hyperparameters(mll)
        >>> print(result)  # mll/N before -> after, fitted values
    """
    result, _ = fit_scale_with_sums(mll, chunk_size=chunk_size, max_iter=max_iter, reduce_sums=reduce_sums)
    return result


def fit_scale_with_sums(
    mll: ExactMarginalLogLikelihood,
    *,
    chunk_size: int | None = None,
    max_iter: int = 100,
    reduce_sums: SumsReduction | None = None,
) -> tuple[ScaleFitResult, FeatureSums | None]:
    """:func:`~gprf.fitting.fit_scale_hyperparameters`, also returning the :class:`~gprf.fitting.FeatureSums` it formed
    (the Gram matrix the prediction cache needs too: :mod:`gprf.fitting.handover`); with ``reduce_sums``, those of all
    the processes' rows.

    With every row in this process and fewer points than features (the points route of
    :func:`gprf.linalg.choose_route` for the likelihood), the statistics come from the :math:`N\times N` Gram
    (:meth:`~gprf.fitting.ScaleStatistics.from_points`, :math:`O(N^2F + N^3)` instead of :math:`O(NF^2 + F^3)`) and
    no sums are returned (``None``): the model's predictions take the points route too, which has no use for them."""
    parameters = _ScaleParameters.from_mll(mll)
    max_iter = check_positive_int(max_iter, "max_iter")
    if chunk_size is not None:  # checked whichever route the statistics take
        check_positive_int(chunk_size, "chunk_size")
    was_training = mll.training
    mll.train()  # BoTorch models hold the untransformed inputs in training mode
    try:
        begin = time.perf_counter()
        with torch.no_grad():
            inputs = training_inputs(mll.model)
            fixed = _fixed_outputscale(mll.model, parameters.scale_kernel, inputs)
        sums = None
        if reduce_sums is None and likelihood_takes_points_route(mll.model):
            statistics = _points_statistics(mll.model, parameters.offset_mean, inputs)
        else:
            sums = _training_sums(mll.model, parameters.offset_mean, chunk_size, None, reduce_sums)
            statistics = ScaleStatistics.from_sums(sums)
        middle = time.perf_counter()
        result = _optimize(parameters, statistics, fixed, max_iter)
        end = time.perf_counter()
    finally:
        mll.train(was_training)
    return ScaleFitResult(**result, statistics_seconds=middle - begin, optimization_seconds=end - middle), sums


def likelihood_takes_points_route(model: ExactGP) -> bool:
    """Whether the marginal likelihood of the model's training covariance, every row in this process, takes the
    :math:`N\times N` route (:func:`gprf.linalg.choose_route`: fewer points than features, memory permitting)."""
    (inputs,) = model.train_inputs  # input transforms may change the columns, not the rows
    root_dim = unwrap_scale_kernel(model.covar_module).root_dim
    batch_shape = torch.broadcast_shapes(
        inputs.shape[:-2], model.train_targets.shape[:-1], model.covar_module.batch_shape
    )
    # No rows: the sums route, whose check names the problem.
    return inputs.size(-2) > 0 and choose_route("likelihood", inputs.size(-2), root_dim, batch_shape) == "points"


def _points_statistics(model: ExactGP, offset_mean: Mean | None, inputs: Tensor) -> ScaleStatistics:
    """:meth:`ScaleStatistics.from_points` of every training row at once (the model is in training mode)."""
    with torch.no_grad():
        ((features, residual),) = _feature_chunks(model, offset_mean, inputs, model.train_targets, inputs.size(-2))
        return ScaleStatistics.from_points(features, residual)


def training_feature_sums(mll: ExactMarginalLogLikelihood, num_rows: int | None = None) -> FeatureSums:
    """The :class:`~gprf.fitting.FeatureSums` of the first ``num_rows`` training rows (``None``: all), formed as
    :func:`fit_scale_hyperparameters` forms them (what :func:`gprf.fit_mll` times to estimate the refit's cost)."""
    parameters = _ScaleParameters.from_mll(mll)
    was_training = mll.training
    mll.train()
    try:
        return _training_sums(mll.model, parameters.offset_mean, None, num_rows, None)
    finally:
        mll.train(was_training)


def _training_sums(
    model: ExactGP,
    offset_mean: Mean | None,
    chunk_size: int | None,
    num_rows: int | None,
    reduce: SumsReduction | None,
) -> FeatureSums:
    """The sums of the model's (first ``num_rows``) training rows in chunks of ``chunk_size`` rows (``None``: about
    :math:`2^{23}/F`), summed over the processes by ``reduce`` (:meth:`FeatureSums.from_chunks`); the model is in
    training mode."""
    with torch.no_grad():
        inputs, targets = training_inputs(model), model.train_targets
        if num_rows is not None:
            inputs, targets = inputs[..., :num_rows, :], targets[..., :num_rows]
        if chunk_size is None:
            chunk_size = max(1, _CHUNK_ELEMENTS // unwrap_scale_kernel(model.covar_module).root_dim)
        rows = check_positive_int(chunk_size, "chunk_size")
        return FeatureSums.from_chunks(_feature_chunks(model, offset_mean, inputs, targets, rows), reduce=reduce)


def _optimize(
    parameters: _ScaleParameters, statistics: ScaleStatistics, fixed: Tensor | None, max_iter: int
) -> dict[str, object]:
    """L-BFGS on the raw scale parameters; writes the optimum into the model."""
    dtype = statistics.eigenvalues.dtype
    scale, noise_covar, mean = parameters.scale_kernel, parameters.noise_covar, parameters.constant_mean
    batch_shape = statistics.batch_shape
    profiled = (
        mean is not None
        and not parameters.has_constant_prior_or_constraint()
        and mean.raw_constant.shape == batch_shape
    )
    fixed = None if fixed is None else fixed.detach().to(dtype)

    # The raw parameters to optimise, under their names in parameters.priors.
    free = {"noise.raw_noise": _FreeParameter(noise_covar.raw_noise, noise_covar.raw_noise_constraint, dtype)}
    if scale is not None:
        free["scale.raw_outputscale"] = _FreeParameter(scale.raw_outputscale, scale.raw_outputscale_constraint, dtype)
    if mean is not None and not profiled:
        constraint = getattr(mean, "raw_constant_constraint", None)
        free["mean.raw_constant"] = _FreeParameter(mean.raw_constant, constraint, dtype)

    def raw_values() -> dict[str, Tensor]:
        return {name: variable.raw() for name, variable in free.items()}

    def values(raw: dict[str, Tensor], constant: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Outputscale and noise of the raw values, and the constant (profiled when not given)."""
        noise = noise_covar.raw_noise_constraint.transform(raw["noise.raw_noise"]).squeeze(-1)
        outputscale = torch.ones((), dtype=dtype, device=noise.device)
        if scale is not None:
            outputscale = scale.raw_outputscale_constraint.transform(raw["scale.raw_outputscale"])
        effective = outputscale if fixed is None else outputscale * fixed
        if constant is None and mean is not None:
            if profiled:
                constant = statistics.optimal_constant(effective, noise)
            else:
                constant = raw["mean.raw_constant"]
                if hasattr(mean, "raw_constant_constraint"):
                    constant = mean.raw_constant_constraint.transform(constant)
        return outputscale, noise, constant

    def objective(raw: dict[str, Tensor], constant: Tensor | None = None) -> Tensor:
        outputscale, noise, constant = values(raw, constant)
        effective = outputscale if fixed is None else outputscale * fixed
        value = statistics.log_marginal_likelihood(effective, noise, 0.0 if constant is None else constant)
        if parameters.priors.priors:  # a profiled constant has no prior
            log_prior = torch.func.functional_call(parameters.priors, raw, (len(batch_shape),))
            value = value + log_prior / statistics.num_data
        return value

    with torch.no_grad():
        current = {name: _raw_copy(variable.parameter, dtype) for name, variable in free.items()}
        mll_before = objective(current, None if mean is None else mean.constant.detach().to(dtype))

    leaves = [variable.leaf for variable in free.values()]
    optimizer = torch.optim.LBFGS(
        leaves,
        max_iter=max_iter,
        tolerance_grad=_TOLERANCE_GRAD,
        tolerance_change=_TOLERANCE_CHANGE,
        line_search_fn="strong_wolfe",
    )

    def closure() -> Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = -objective(raw_values()).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    iterations = int(optimizer.state[leaves[0]].get("n_iter", 0))

    with torch.no_grad():
        raw = raw_values()
        outputscale, noise, constant = values(raw)
        if not bool(torch.isfinite(noise).all() & torch.isfinite(outputscale).all()):
            raise RuntimeError("The scale fit diverged (non-finite outputscale or noise); the model was not changed.")
        for name, variable in free.items():
            variable.parameter.copy_(raw[name])
        if profiled:
            mean.raw_constant.copy_(constant)
        # The objective at the values as stored (in the model's dtype).
        stored = {name: _raw_copy(variable.parameter, dtype) for name, variable in free.items()}
        stored_constant = None if mean is None else mean.constant.detach().to(dtype)
        mll_after = objective(stored, stored_constant)
    return {
        "mll_before": mll_before.detach(),
        "mll_after": mll_after.detach(),
        "outputscale": None if scale is None else scale.outputscale.detach().clone(),
        "noise": noise_covar.noise.detach().squeeze(-1).clone(),
        "constant": None if mean is None else mean.constant.detach().clone(),
        "iterations": iterations,
    }
