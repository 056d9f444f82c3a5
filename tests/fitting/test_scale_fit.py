"""``fit_scale_hyperparameters``: its objective is GPyTorch's marginal likelihood, its optimum a brute-force one."""

from __future__ import annotations

import copy
import math

import gpytorch
import pytest
import torch
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.likelihoods import BernoulliLikelihood, FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.means import LinearMean, ZeroMean
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import GammaPrior, NormalPrior

import gprf.settings
from gprf.fitting import ScaleFitResult, fit_scale_hyperparameters
from gprf.fitting.scale_fit import fit_scale_with_sums, supports_exact_scale_fit
from gprf.kernels import RandomFourierKernel
from gprf.testing import ExactGPModel, regression_data
from tests.helpers.regression import make_model

# Gradients of GPyTorch's marginal likelihood per point at the fit, w.r.t. the raw parameters. L-BFGS drives the O(F)
# objective's gradient below 1e-10, but that objective is the marginal likelihood through the eigendecomposition of
# the Gram matrix, whose rounding is eps * s * lambda_max / noise ~ 1e-16 * 1e5 relative in these problems (the
# fitted outputscales are large): it moves the optimum's gradient by up to ~5e-8 (measured). Before the fit the
# gradients are above 1e-2 (asserted where it matters).
GRADIENT_TOLERANCE = 2e-7
# L-BFGS stops where the objective's rounding jitter (1e-14 to 1e-12 near the optimum, measured on both spectral
# routes) hides its progress. Along flat directions that leaves gradients up to a few 1e-6 (measured 2.3e-6 on the
# two-output BoTorch model) and parameters a few 1e-9 relative apart between fits that round differently.
NOISE_FLOOR_GRADIENT = 1e-5
NOISE_FLOOR_RTOL = 1e-7
# Agreement of the O(F) objective with GPyTorch's value (the same rounding as above, ~1e-11 relative, plus GPyTorch's).
VALUE_RTOL = 1e-9


def _mll(model: ExactGPModel) -> ExactMarginalLogLikelihood:
    return ExactMarginalLogLikelihood(model.likelihood, model)


def _gpytorch_value(mll: ExactMarginalLogLikelihood) -> torch.Tensor:
    """GPyTorch's marginal likelihood of the training data (per point, with every prior), in training mode."""
    mll.train()
    model = mll.model
    return mll(model(*model.train_inputs), model.train_targets)


def _scale_raw_parameters(model) -> dict[str, torch.Tensor]:
    raw = {"noise": model.likelihood.noise_covar.raw_noise}
    if isinstance(model.covar_module, ScaleKernel):
        raw["outputscale"] = model.covar_module.raw_outputscale
    if isinstance(model.mean_module, gpytorch.means.ConstantMean):
        raw["constant"] = model.mean_module.raw_constant
    return raw


def _gpytorch_gradients(mll: ExactMarginalLogLikelihood) -> dict[str, torch.Tensor]:
    """Gradients of GPyTorch's summed marginal likelihood w.r.t. the raw scale parameters."""
    raw = _scale_raw_parameters(mll.model)
    gradients = torch.autograd.grad(_gpytorch_value(mll).sum(), list(raw.values()))
    return dict(zip(raw, gradients, strict=True))


def _with_scale_priors(model: ExactGPModel) -> ExactGPModel:
    """Priors on the outputscale, the noise and the constant (registered the way GPyTorch's modules do)."""
    model.covar_module.register_prior("outputscale_prior", GammaPrior(2.0, 1.0), lambda m: m.outputscale)
    model.likelihood.noise_covar.register_prior("noise_prior", GammaPrior(1.5, 20.0), lambda m: m.noise)
    model.mean_module.register_prior("mean_prior", NormalPrior(0.0, 0.5), lambda m: m.constant)
    return model.double()


@pytest.mark.parametrize("priors", [False, True], ids=["no-priors", "priors"])
@pytest.mark.parametrize(("num_data", "num_features"), [(80, 32), (20, 64)], ids=["N>F", "N<F"])
def test_objective_equals_gpytorch_and_the_fit_zeroes_its_gradient(num_data, num_features, priors):
    x, y = regression_data(n=num_data)
    model = make_model(x, y, num_features=num_features)
    if priors:
        model = _with_scale_priors(model)
    mll = _mll(model)
    assert max(float(gradient.abs().max()) for gradient in _gpytorch_gradients(mll).values()) > 1e-2
    with torch.no_grad():
        before = _gpytorch_value(mll)
    result = fit_scale_hyperparameters(mll, chunk_size=7)
    assert isinstance(result, ScaleFitResult) and result.iterations > 0
    torch.testing.assert_close(result.mll_before, before, rtol=VALUE_RTOL, atol=0)
    with torch.no_grad():
        after = _gpytorch_value(mll)
    torch.testing.assert_close(result.mll_after, after, rtol=VALUE_RTOL, atol=0)
    assert after > before + 0.1  # the starting values (noise 0.05, outputscale 1.7, constant 0.3) are off
    for name, gradient in _gpytorch_gradients(mll).items():
        assert gradient.abs().max() < GRADIENT_TOLERANCE, (name, gradient)
    torch.testing.assert_close(result.noise, model.likelihood.noise.detach().squeeze(-1), rtol=0, atol=0)
    torch.testing.assert_close(result.outputscale, model.covar_module.outputscale.detach(), rtol=0, atol=0)
    torch.testing.assert_close(result.constant, model.mean_module.constant.detach(), rtol=0, atol=0)


def test_priors_of_other_parameters_are_left_out():
    """A lengthscale prior is constant at fixed features: GPyTorch's value minus it (divided by N, as GPyTorch divides
    every prior) is the fitted objective."""
    x, y = regression_data(n=40)
    model = make_model(x, y, num_features=16)
    model.covar_module.base_kernel.register_prior("lengthscale_prior", GammaPrior(3.0, 6.0), lambda m: m.lengthscale)
    model = model.double()
    mll = _mll(model)
    result = fit_scale_hyperparameters(mll)
    lengthscale = model.covar_module.base_kernel.lengthscale.detach()
    with torch.no_grad():
        expected = _gpytorch_value(mll) - GammaPrior(3.0, 6.0).log_prob(lengthscale).sum().double() / 40
    torch.testing.assert_close(result.mll_after, expected, rtol=VALUE_RTOL, atol=0)


def test_batch_model_fits_every_member():
    batch_shape = torch.Size([2])
    x, y = regression_data(n=50, batch_shape=batch_shape)
    y = y * torch.tensor([[1.0], [4.0]], dtype=torch.float64) + torch.tensor([[0.0], [-3.0]], dtype=torch.float64)
    model = make_model(x, y, num_features=24, batch_shape=batch_shape)
    mll = _mll(model)
    with torch.no_grad():
        before = _gpytorch_value(mll)
    result = fit_scale_hyperparameters(mll)
    assert result.mll_before.shape == batch_shape and result.noise.shape == batch_shape
    torch.testing.assert_close(result.mll_before, before, rtol=VALUE_RTOL, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(result.mll_after, _gpytorch_value(mll), rtol=VALUE_RTOL, atol=0)
    for name, gradient in _gpytorch_gradients(mll).items():
        assert gradient.abs().max() < GRADIENT_TOLERANCE, (name, gradient)
    # The second output is 4x the first (plus an offset): its fitted outputscale is larger and its constant lower.
    assert result.outputscale[1] > 4 * result.outputscale[0]
    assert result.constant[1] < result.constant[0] - 2


def test_float32_model_matches_its_float64_twin_and_stores_float32():
    x, y = regression_data(n=60, dtype=torch.float32)
    model = make_model(x, y, num_features=32).float()
    mll = _mll(model)
    with torch.no_grad():
        before = _gpytorch_value(_mll(copy.deepcopy(model).double()))
    result = fit_scale_hyperparameters(mll)
    assert model.covar_module.raw_outputscale.dtype == torch.float32
    # The objective is evaluated in float64 from the float32 features, so it is compared with the float64 twin of the
    # model (same float32 parameter values; features recomputed in float64, which moves the value by ~1e-7
    # relative). GPyTorch's own float32 value carries float32 residuals and is only good to ~1e-4 relative.
    torch.testing.assert_close(result.mll_before, before, rtol=1e-6, atol=0)
    twin = _mll(copy.deepcopy(model).double())
    with torch.no_grad():
        after = _gpytorch_value(twin)
    torch.testing.assert_close(result.mll_after, after, rtol=1e-6, atol=0)
    assert after > before + 0.1
    # The twin is at its optimum up to the float32 rounding of the fitted parameters (raw values ~1, rounding ~1e-7).
    for name, gradient in _gpytorch_gradients(twin).items():
        assert gradient.abs().max() < 1e-5, (name, gradient)


def _dense_profiled_grid(model, log_outputscales: torch.Tensor, log_noises: torch.Tensor) -> torch.Tensor:
    """Brute force: the marginal likelihood per point on a grid, from dense N x N covariances, with the constant at
    its generalised least-squares optimum for each grid point."""
    (x,) = model.train_inputs
    y = model.train_targets
    with torch.no_grad():
        kernel = model.covar_module.base_kernel(x).to_dense()
    s = log_outputscales.exp()[:, None, None, None]
    noise = log_noises.exp()[None, :, None, None]
    covariance = s * kernel + noise * torch.eye(y.numel(), dtype=y.dtype)
    ones = torch.ones_like(y)
    solved = torch.linalg.solve(covariance, torch.stack([y, ones], -1))
    constant = solved[..., 0].sum(-1) / solved[..., 1].sum(-1)
    mean = constant[..., None] * ones
    return torch.distributions.MultivariateNormal(mean, covariance).log_prob(y) / y.numel()


class _SummedMll(torch.nn.Module):
    """GPyTorch's summed marginal likelihood as a module, so that ``torch.func.functional_call`` can vary parameters."""

    def __init__(self, mll: ExactMarginalLogLikelihood) -> None:
        super().__init__()
        self.mll = mll

    def forward(self) -> torch.Tensor:
        return _gpytorch_value(self.mll).sum()


def _gpytorch_lbfgs_reference(model) -> ExactMarginalLogLikelihood:
    """Brute force: a long L-BFGS run on GPyTorch's marginal likelihood (autograd through the model) over the same raw
    parameters, from other starting values."""
    reference = copy.deepcopy(model)
    reference.covar_module.outputscale = 1.0
    reference.likelihood.noise = 1.0
    reference.mean_module.constant = 0.0
    mll = _mll(reference)
    parameters = list(_scale_raw_parameters(reference).values())
    optimizer = torch.optim.LBFGS(
        parameters, max_iter=1000, tolerance_grad=1e-13, tolerance_change=1e-16, line_search_fn="strong_wolfe"
    )

    def closure():
        optimizer.zero_grad()
        loss = -_gpytorch_value(mll).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return mll


def test_fit_is_the_brute_force_optimum():
    x, y = regression_data(n=60)
    model = make_model(x, y, num_features=16)
    # Shorter lengthscales than make_model's: no feature is nearly constant, so the constant mean and the outputscale
    # are well determined (a well-conditioned optimum that the brute-force runs can pin down).
    model.covar_module.base_kernel.lengthscale = 0.3
    mll = _mll(model)
    reference = _gpytorch_lbfgs_reference(model)
    result = fit_scale_hyperparameters(mll)
    fitted = float(result.mll_after)

    # A dense grid over (log s, log noise) around the fit, +-2 in steps of 0.1: the fit is at least as good as every
    # grid point, and the best grid point is the fit's neighbour (so the fit is not a local optimum elsewhere).
    log_s, log_noise = math.log(float(result.outputscale)), math.log(float(result.noise))
    offsets = torch.linspace(-2.0, 2.0, 41, dtype=torch.float64)
    grid = _dense_profiled_grid(model, log_s + offsets, log_noise + offsets)
    assert fitted >= float(grid.max()) - 1e-10  # the O(F) objective's rounding, see VALUE_RTOL
    best = divmod(int(grid.argmax()), 41)
    assert abs(best[0] - 20) <= 1 and abs(best[1] - 20) <= 1

    # The long L-BFGS run through GPyTorch reaches the same optimum.
    with torch.no_grad():
        reference_value = float(_gpytorch_value(reference))
    assert fitted >= reference_value - 1e-6
    assert abs(fitted - reference_value) < 1e-10
    # Parameter tolerance: both runs end with raw gradients of GPyTorch's objective below g (asserted); near the
    # optimum the raw parameters then lie within g / lambda_min of it, lambda_min the smallest eigenvalue of the
    # negative Hessian of the objective in the raw parameters (computed below), so they agree to 2 g / lambda_min.
    reference_gradients = _gpytorch_gradients(reference)
    gradient_bound = GRADIENT_TOLERANCE
    assert all(gradient.abs().max() < gradient_bound for gradient in reference_gradients.values())
    assert all(gradient.abs().max() < gradient_bound for gradient in _gpytorch_gradients(mll).values())
    raw = _scale_raw_parameters(model)
    values = torch.cat([parameter.detach().reshape(-1) for parameter in raw.values()])
    by_id = {id(parameter): name for name, parameter in model.named_parameters()}
    names = [f"mll.model.{by_id[id(parameter)]}" for parameter in raw.values()]
    shapes = [parameter.shape for parameter in raw.values()]

    def objective(vector: torch.Tensor) -> torch.Tensor:
        pieces = vector.split([math.prod(shape) for shape in shapes])
        arguments = {name: piece.view(shape) for name, piece, shape in zip(names, pieces, shapes, strict=True)}
        return torch.func.functional_call(_SummedMll(mll), arguments, ())

    hessian = torch.autograd.functional.hessian(objective, values)
    smallest = float(torch.linalg.eigvalsh(-hessian).min())
    assert smallest > 1e-3
    tolerance = 2 * gradient_bound / smallest
    assert tolerance < 1e-4  # a check that means something
    reference_values = torch.cat(
        [parameter.detach().reshape(-1) for parameter in _scale_raw_parameters(reference.model).values()]
    )
    torch.testing.assert_close(values, reference_values, rtol=0, atol=tolerance)


def test_noise_lower_bound_is_respected_when_active():
    """GPyTorch's constraints enforce bounds by a transform; BoTorch's have transform=None (bounds for scipy)."""
    x, y = regression_data(n=60)  # noise standard deviation 0.1: variance 0.01, below the bound
    fits = []
    for constraint in (GreaterThan(0.05), GreaterThan(0.05, transform=None)):
        likelihood = GaussianLikelihood(noise_constraint=constraint)
        model = make_model(x, y, likelihood=likelihood, num_features=32)
        likelihood.noise = 0.3
        mll = _mll(model)
        result = fit_scale_hyperparameters(mll)
        noise = float(likelihood.noise.detach())
        assert 0.05 <= noise < 0.05 + 1e-6 and float(result.noise) == noise
        # The bound is active: the marginal likelihood rises as the noise falls towards it.
        with torch.no_grad():
            at_fit = float(_gpytorch_value(mll))
            likelihood.noise = 0.051
            assert float(_gpytorch_value(mll)) < at_fit - 1e-4
        fits.append((model, result))
    # Both reach the constrained optimum that L-BFGS through GPyTorch finds (with the enforcing transform).
    reference = _gpytorch_lbfgs_reference(fits[0][0])
    with torch.no_grad():
        reference_value = float(_gpytorch_value(reference))
    for _, result in fits:
        assert float(result.mll_after) >= reference_value - 1e-6
    torch.testing.assert_close(fits[0][1].mll_after, fits[1][1].mll_after, rtol=1e-9, atol=0)


def test_fixed_outputscale_and_zero_mean():
    x, y = regression_data(n=50)
    kernel = RandomFourierKernel(32, num_dims=3, ard_num_dims=3, seed=0)
    model = ExactGPModel(x, y, GaussianLikelihood(), kernel).double()
    model.mean_module = ZeroMean()
    kernel.lengthscale = 0.5
    mll = _mll(model)
    result = fit_scale_hyperparameters(mll)
    assert result.outputscale is None and result.constant is None
    with torch.no_grad():
        torch.testing.assert_close(result.mll_after, _gpytorch_value(mll), rtol=VALUE_RTOL, atol=0)
    assert abs(float(_gpytorch_gradients(mll)["noise"])) < GRADIENT_TOLERANCE


def _nested_scale_kernel() -> ScaleKernel:
    inner = ScaleKernel(RandomFourierKernel(32, num_dims=3, ard_num_dims=3, seed=0))
    inner.outputscale = 2.5  # a fixed amplitude beneath the fitted outputscale
    return ScaleKernel(inner)


@pytest.mark.parametrize(
    "build",
    [
        _nested_scale_kernel,
        lambda: ScaleKernel(RandomFourierKernel(32, num_dims=2, seed=0), active_dims=[0, 2]),
        lambda: ScaleKernel(RandomFourierKernel(32, num_dims=2, active_dims=[0, 2], seed=0)),
    ],
    ids=["nested-scale-kernels", "outer-active-dims", "inner-active-dims"],
)
def test_the_amplitude_beneath_the_fitted_outputscale_stays_fixed(build):
    x, y = regression_data(n=50)
    kernel = build()
    model = ExactGPModel(x, y, GaussianLikelihood(), kernel).double()
    inner = kernel.base_kernel
    fixed_before = inner.outputscale.detach().clone() if isinstance(inner, ScaleKernel) else None
    mll = _mll(model)
    with torch.no_grad():
        before = _gpytorch_value(mll)
    result = fit_scale_hyperparameters(mll)
    torch.testing.assert_close(result.mll_before, before, rtol=VALUE_RTOL, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(result.mll_after, _gpytorch_value(mll), rtol=VALUE_RTOL, atol=0)
    assert float(result.mll_after) > float(before) + 0.1
    for name, gradient in _gpytorch_gradients(mll).items():
        assert gradient.abs().max() < GRADIENT_TOLERANCE, (name, gradient)
    if fixed_before is not None:
        torch.testing.assert_close(inner.outputscale.detach(), fixed_before, rtol=0, atol=0)


def test_other_means_are_a_fixed_offset():
    x, y = regression_data(n=50)
    y = y + 2 * x[:, 0]
    model = make_model(x, y, num_features=32)
    model.mean_module = LinearMean(3).double()
    with torch.no_grad():
        model.mean_module.weights.copy_(torch.tensor([[2.0], [0.1], [-0.2]]))
    weights = model.mean_module.weights.detach().clone()
    mll = _mll(model)
    with torch.no_grad():
        before = _gpytorch_value(mll)
    result = fit_scale_hyperparameters(mll)
    assert result.constant is None and torch.equal(model.mean_module.weights, weights)
    torch.testing.assert_close(result.mll_before, before, rtol=VALUE_RTOL, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(result.mll_after, _gpytorch_value(mll), rtol=VALUE_RTOL, atol=0)
    for name, gradient in _gpytorch_gradients(mll).items():
        assert gradient.abs().max() < GRADIENT_TOLERANCE, (name, gradient)


def test_chunking_and_training_mode_do_not_change_the_fit():
    x, y = regression_data(n=45)
    fits = []
    for chunk_size, training in [(None, True), (4, False)]:
        model = make_model(x, y, num_features=16)
        mll = _mll(model)
        mll.train(training)
        fits.append(fit_scale_hyperparameters(mll, chunk_size=chunk_size))
        assert mll.training == training and model.training == training
    for name in ("outputscale", "noise", "constant"):
        torch.testing.assert_close(getattr(fits[0], name), getattr(fits[1], name), rtol=NOISE_FLOOR_RTOL, atol=0)
    # At the optimum the value is flat in those directions: it agrees far more closely.
    torch.testing.assert_close(fits[0].mll_after, fits[1].mll_after, rtol=1e-10, atol=0)
    assert "mll/N" in str(fits[0]) and "noise" in str(fits[0])


@pytest.mark.parametrize(("num_data", "num_features", "points"), [(20, 64, True), (80, 32, False)], ids=["N<F", "N>F"])
def test_fewer_points_than_features_refit_on_the_points_gram(num_data, num_features, points):
    """N < F: the statistics come from the N x N Gram and no F x F sums are formed (None), with the fit of the
    features route (forced by the setting) to the optimiser's noise floor."""
    x, y = regression_data(n=num_data)
    fits = []
    for route in ("auto", "features"):
        model = make_model(x, y, num_features=num_features)
        with gprf.settings.covariance_route(route):
            result, sums = fit_scale_with_sums(_mll(model))
        fits.append(result)
        taken_points = route == "auto" and points
        assert (sums is None) == taken_points
        if sums is not None:
            assert sums.gram.shape == (num_features, num_features) and sums.num_data == num_data
    for name in ("outputscale", "noise", "constant"):
        torch.testing.assert_close(getattr(fits[0], name), getattr(fits[1], name), rtol=NOISE_FLOOR_RTOL, atol=0)
    torch.testing.assert_close(fits[0].mll_after, fits[1].mll_after, rtol=1e-10, atol=0)


def test_a_model_without_rows_is_refused_whatever_its_features():
    x, y = regression_data(n=5)
    model = make_model(x, y, num_features=64)  # F > N: the points route, were there any rows
    model.set_train_data(x[:0], y[:0], strict=False)
    with pytest.raises(ValueError, match="no rows"):
        fit_scale_with_sums(_mll(model))


def test_unsupported_models_raise_clear_errors():
    x, y = regression_data(n=20)
    assert supports_exact_scale_fit(_mll(make_model(x, y)))
    fixed = make_model(x, y, likelihood=FixedNoiseGaussianLikelihood(noise=torch.full((20,), 0.01)))
    assert not supports_exact_scale_fit(_mll(fixed))
    with pytest.raises(TypeError, match="FixedNoiseGaussianLikelihood.*gradient-based"):
        fit_scale_hyperparameters(_mll(fixed))

    dense = ExactGPModel(x, y, GaussianLikelihood(), ScaleKernel(RBFKernel())).double()
    assert not supports_exact_scale_fit(_mll(dense))
    with pytest.raises(TypeError, match="RBFKernel"):
        fit_scale_hyperparameters(_mll(dense))

    model = make_model(x, y)
    mll = _mll(model)
    mll.likelihood = model.likelihood = BernoulliLikelihood()
    assert not supports_exact_scale_fit(mll)
    with pytest.raises(TypeError, match="BernoulliLikelihood.*gradient-based"):
        fit_scale_hyperparameters(mll)

    assert not supports_exact_scale_fit(model)
    with pytest.raises(TypeError, match="ExactMarginalLogLikelihood"):
        fit_scale_hyperparameters(model)
    with pytest.raises(ValueError, match="max_iter"):
        fit_scale_hyperparameters(_mll(make_model(x, y)), max_iter=0)
    with pytest.raises(ValueError, match="chunk_size"):
        fit_scale_hyperparameters(_mll(make_model(x, y)), chunk_size=0)


def _branin_like_data(num_outputs: int, n: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs on [5, 15]^3 (far from the unit cube, so the input transform matters) and targets of different scales."""
    generator = torch.Generator().manual_seed(seed)
    x = 5 + 10 * torch.rand(n, 3, generator=generator, dtype=torch.float64)
    first = torch.sin(x).sum(-1) + 0.05 * torch.randn(n, generator=generator, dtype=torch.float64)
    second = 30 + 10 * torch.cos(0.5 * x[:, 0]) + 0.5 * torch.randn(n, generator=generator, dtype=torch.float64)
    return x, torch.stack([first, second], -1)[:, :num_outputs]


@pytest.mark.botorch
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_botorch_single_task_gp_with_learned_normalize_and_standardize(training):
    pytest.importorskip("botorch")
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize

    x, y = _branin_like_data(num_outputs=1)
    kernel = ScaleKernel(RandomFourierKernel(64, num_dims=3, ard_num_dims=3, sampler="orthogonal", seed=0))
    # Normalize without bounds learns them from the training inputs in training mode.
    model = SingleTaskGP(x, y, covar_module=kernel, input_transform=Normalize(3), outcome_transform=Standardize(1))
    kernel.base_kernel.lengthscale = 0.3
    mll = _mll(model).train(training)
    with torch.no_grad():
        before = _gpytorch_value(mll)
    mll.train(training)
    result = fit_scale_hyperparameters(mll)
    assert model.training == training
    # The inputs the fit used are the transformed ones: values equal BoTorch's marginal likelihood (its forward
    # transforms the inputs in training mode), and the model holds its inputs as it did.
    (inputs,) = model.train_inputs
    torch.testing.assert_close(inputs, model.input_transform(x) if not training else x, rtol=0, atol=1e-12)
    torch.testing.assert_close(result.mll_before, before, rtol=VALUE_RTOL, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(result.mll_after, _gpytorch_value(mll), rtol=VALUE_RTOL, atol=0)
    # BoTorch's default likelihood has a log-normal noise prior: the gradients vanish with it included.
    assert any(module is model.likelihood.noise_covar for _, module, _, _, _ in model.named_priors())
    assert not model.likelihood.noise_covar.raw_noise_constraint.enforced  # BoTorch's bounds: kept by the fit
    assert float(result.noise) >= float(model.likelihood.noise_covar.raw_noise_constraint.lower_bound)
    for name, gradient in _gpytorch_gradients(mll).items():
        assert gradient.abs().max() < GRADIENT_TOLERANCE, (name, gradient)


@pytest.mark.botorch
def test_botorch_random_feature_model_with_two_outputs():
    pytest.importorskip("botorch")
    from botorch.models.transforms import Normalize, Standardize

    from gprf.botorch import RandomFeatureSingleTaskGP

    x, y = _branin_like_data(num_outputs=2)
    bounds = torch.tensor([[5.0] * 3, [15.0] * 3], dtype=torch.float64)
    model = RandomFeatureSingleTaskGP(
        x, y, num_features=64, seed=0, input_transform=Normalize(3, bounds=bounds), outcome_transform=Standardize(2)
    )
    model.covar_module.lengthscale = 0.3
    mll = _mll(model)

    def without_lengthscale_prior(value: torch.Tensor) -> torch.Tensor:
        """BoTorch's default kernel has a lengthscale prior, which the scale fit leaves out (constant here)."""
        kernel = model.covar_module
        log_prior = kernel.lengthscale_prior.log_prob(kernel.lengthscale).reshape(2, -1).sum(-1)
        return value - log_prior / x.size(0)

    with torch.no_grad():
        before = without_lengthscale_prior(_gpytorch_value(mll))
    result = fit_scale_hyperparameters(mll)
    # Batch shape [2] (one GP per output); the default kernel has no ScaleKernel, so the outputscale stays 1.
    assert result.outputscale is None and result.noise.shape == (2,) and result.constant.shape == (2,)
    torch.testing.assert_close(result.mll_before, before, rtol=VALUE_RTOL, atol=0)
    with torch.no_grad():
        after = without_lengthscale_prior(_gpytorch_value(mll))
    torch.testing.assert_close(result.mll_after, after, rtol=VALUE_RTOL, atol=0)
    for name, gradient in _gpytorch_gradients(mll).items():
        assert gradient.abs().max() < NOISE_FLOOR_GRADIENT, (name, gradient)


def test_a_model_without_rows_fits_the_rows_its_reduction_adds():
    """Rows sharded over processes: the model of a shard without rows, given the sums of all of them, fits what the
    model holding them fits."""
    x, y = regression_data(n=120)
    full = make_model(x, y, num_features=16)
    empty = make_model(x[:0], y[:0], num_features=16)
    captured = {}

    def capture(sums, num_data):
        captured["sums"] = [value.clone() for value in sums]
        return sums, num_data

    def full_rows(sums, num_data):
        assert num_data == 0 and all(float(value.abs().max()) == 0 for value in sums)
        return captured["sums"], 120

    expected = fit_scale_hyperparameters(_mll(full), reduce_sums=capture)
    result = fit_scale_hyperparameters(_mll(empty), reduce_sums=full_rows)
    torch.testing.assert_close(result.mll_after, expected.mll_after, rtol=1e-12, atol=0)
    for name in ("outputscale", "noise", "constant"):
        torch.testing.assert_close(getattr(result, name), getattr(expected, name), rtol=1e-10, atol=0)
