"""The factorisation home: CapacitanceFactor updates, factor_capacitance and its check of the training rows, and the
float32 Gram with float64 products unless its own rounding is known to be negligible: float32 models within 1e-6 of
float64 arithmetic on their features at every noise level from 1e-6 to 1."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from linear_operator.operators import ConstantDiagLinearOperator

import gprf
from gprf.exceptions import NonFiniteTrainingDataError
from gprf.kernels import RandomFourierKernel
from gprf.linalg import CapacitanceFactor, FeatureRootLinearOperator, capacitance, factor_capacitance
from gprf.linalg.capacitance import (
    GRAM_ERROR_CONSTANT,
    GRAM_ERROR_TOLERANCE,
    lower_precision_gram_error,
    nonfinite_rows,
    products_in_factor_dtype,
)
from gprf.linalg.lazy_features import LazyFeatures
from gprf.testing import ExactGPModel


def _random_gram(f: int, seed: int, batch=()):
    r = torch.randn(*batch, 3 * f, f, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return r.mT @ r


@pytest.mark.parametrize("num_new", [1, 3, 40])  # 40 > F exercises a rank-deficient thin QR
def test_update_matches_direct_factorisation(num_new):
    f = 12
    gram = _random_gram(f, 0)
    factor = CapacitanceFactor.from_gram(gram)
    generator = torch.Generator().manual_seed(1)
    capacitance = gram + torch.eye(f, dtype=torch.float64)
    for _ in range(3):  # repeated updates compose
        u = torch.randn(f, num_new, generator=generator, dtype=torch.float64)
        factor = factor.update(u)
        capacitance = capacitance + u @ u.mT
    rhs = torch.randn(f, 4, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(factor.solve(rhs), torch.linalg.solve(capacitance, rhs), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(factor.logdet(), torch.logdet(capacitance), rtol=1e-10, atol=1e-10)
    # G^{-1} is a root of C^{-1}: (G^{-1})^T G^{-1} = C^{-1}.
    inv_root = factor.solve_root(torch.eye(f, dtype=torch.float64))
    torch.testing.assert_close(inv_root.mT @ inv_root, torch.linalg.inv(capacitance), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(factor.solve_root_transpose(factor.solve_root(rhs)), factor.solve(rhs))


def test_batched_update_broadcasts_over_new_leading_dims():
    f = 6
    gram = _random_gram(f, 2, batch=(2,))
    factor = CapacitanceFactor.from_gram(gram)
    u = torch.randn(5, 2, f, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    updated = factor.update(u)
    rhs = torch.randn(f, 1, dtype=torch.float64)
    expected = torch.linalg.solve(gram + torch.eye(f, dtype=torch.float64) + u @ u.mT, rhs)
    torch.testing.assert_close(updated.solve(rhs), expected, rtol=1e-9, atol=1e-10)


def test_non_finite_gram_is_a_clear_error():
    gram = _random_gram(4, 4)
    gram[0, 0] = float("nan")
    with pytest.raises(NonFiniteTrainingDataError, match="NaN"):
        CapacitanceFactor.from_gram(gram)


def test_solve_triangular_folds_extra_batch_dimensions():
    from gprf.linalg.capacitance import solve_triangular

    generator = torch.Generator().manual_seed(0)
    matrix = torch.randn(2, 5, 5, generator=generator, dtype=torch.float64)
    lower = torch.linalg.cholesky(matrix @ matrix.mT + 5 * torch.eye(5, dtype=torch.float64))
    rhs = torch.randn(7, 1, 5, 3, generator=generator, dtype=torch.float64)
    for upper, factor in ((False, lower), (True, lower.mT)):
        expected = torch.linalg.solve_triangular(factor, rhs, upper=upper)
        torch.testing.assert_close(solve_triangular(factor, rhs, upper=upper), expected, rtol=0, atol=1e-12)


def _rows(n=12, f=5, seed=0, batch=()):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(*batch, n, f, generator=generator, dtype=torch.float64)
    noise = 0.1 + torch.rand(*batch, n, generator=generator, dtype=torch.float64)
    rhs = torch.randn(*batch, n, 2, generator=generator, dtype=torch.float64)
    return features, noise, rhs


@pytest.mark.parametrize("with_scale", [False, True])
def test_factor_capacitance_matches_the_scaled_dense_definitions(with_scale):
    features, noise, rhs = _rows(batch=(3,))
    outputscale = torch.tensor([0.5, 1.0, 2.5], dtype=torch.float64) if with_scale else None
    factor, projection = factor_capacitance(features, noise, rhs, outputscale)
    phi = features if outputscale is None else features * outputscale.sqrt()[:, None, None]
    capacitance = torch.eye(5, dtype=torch.float64) + phi.mT @ (phi / noise.unsqueeze(-1))
    torch.testing.assert_close(factor.cholesky @ factor.cholesky.mT, capacitance, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(projection, phi.mT @ (rhs / noise.unsqueeze(-1)), rtol=1e-12, atol=1e-12)


def test_float32_features_are_factored_in_the_factor_dtype():
    features, noise, rhs = _rows()
    factor, projection = factor_capacitance(features.float(), noise.float(), rhs.float())
    assert factor.cholesky.dtype == projection.dtype == torch.float64
    with gprf.settings.factor_dtype(torch.float32):
        factor, projection = factor_capacitance(features.float(), noise.float(), rhs.float())
    assert factor.cholesky.dtype == projection.dtype == torch.float32


@pytest.mark.parametrize(
    "corrupt, count",
    [
        (lambda f, n, r: f.__setitem__((0, 3, 1), float("nan")), 1),  # a feature (an input that overflowed)
        (lambda f, n, r: r.__setitem__((1, 7, 0), float("inf")), 1),  # a target
        (lambda f, n, r: n.__setitem__((slice(None), 2), -0.1), 1),  # a non-positive noise variance
        (lambda f, n, r: (r.__setitem__((0, 4, 1), float("nan")), f.__setitem__((2, 9, 0), float("nan"))), 2),
    ],
    ids=["feature", "target", "noise", "two-rows"],
)
def test_non_finite_training_rows_are_counted(corrupt, count):
    features, noise, rhs = _rows(batch=(3,))
    corrupt(features, noise, rhs)
    with pytest.raises(NonFiniteTrainingDataError, match=rf"^{count} of 12 training points"):
        factor_capacitance(features, noise, rhs)


def test_nonfinite_rows_marks_rows_across_batch_members():
    features, noise, rhs = _rows(batch=(2,))
    features[1, 5, 0] = float("inf")
    mask = nonfinite_rows(features, noise, rhs)
    assert mask.shape == (2, 12) and mask.sum() == 1 and bool(mask[1, 5])


def test_the_gram_error_estimate_is_c_u_times_the_largest_diagonal_entry():
    features, noise, _ = _rows(batch=(2,))
    features, outputscale = features.float(), torch.tensor([0.5, 3.0], dtype=torch.float64)
    unit = torch.finfo(torch.float32).eps / 2
    one_noise = noise[..., :1]
    gram = outputscale[:, None, None] * features.double().mT @ (features.double() / one_noise.unsqueeze(-1))
    expected = GRAM_ERROR_CONSTANT * unit * gram.diagonal(dim1=-2, dim2=-1).max().item()
    assert lower_precision_gram_error(features, one_noise, outputscale) == pytest.approx(expected, rel=1e-6)
    # One variance per row: bounded with the smallest, so never below the exact largest diagonal entry.
    gram = outputscale[:, None, None] * features.double().mT @ (features.double() / noise.unsqueeze(-1))
    exact = GRAM_ERROR_CONSTANT * unit * gram.diagonal(dim1=-2, dim2=-1).max().item()
    assert exact <= lower_precision_gram_error(features, noise, outputscale) <= exact * noise.max() / noise.min()


def test_the_estimate_follows_the_float32_matmul_precision():
    features, noise, _ = _rows()
    highest = lower_precision_gram_error(features.float(), noise, None)
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")  # TF32 where the hardware has it: a 10-bit mantissa
        assert lower_precision_gram_error(features.float(), noise, None) == pytest.approx(highest * 2.0**13)
    finally:
        torch.set_float32_matmul_precision(previous)


def test_products_stay_in_the_features_dtype_only_when_known_to_be_accurate():
    features, noise, _ = _rows()
    float32 = features.float()
    assert not products_in_factor_dtype(features, noise, None)  # float64 roots: already the factor dtype
    with gprf.settings.factor_dtype(torch.float32):
        assert not products_in_factor_dtype(float32, noise, None)
    # The largest diagonal entry of G scales with 1/noise: float32 products only below the tolerance.
    error = lower_precision_gram_error(float32, noise, None)
    scale = error / GRAM_ERROR_TOLERANCE
    assert not products_in_factor_dtype(float32, noise * scale * 1.01, None)
    assert products_in_factor_dtype(float32, noise * scale * 0.99, None)
    assert products_in_factor_dtype(float32, -noise, None)  # a bad noise gets the exact route (and its error)
    lazy = LazyFeatures(float32[..., :3], lambda x: torch.cat([x, x[..., :2]], -1), chunk_size=4)
    assert lower_precision_gram_error(lazy, noise, None) is None and products_in_factor_dtype(lazy, noise, None)
    assert lower_precision_gram_error(float32.to(torch.complex64), noise, None) is None


@pytest.mark.parametrize("noise_scale, exact_first", [(1e3, False), (1.0, True)])
def test_cpu_roots_decide_on_exact_products_before_forming_the_gram(monkeypatch, noise_scale, exact_first):
    """On the CPU the rounding estimate reads the Gram's diagonal from the rows (no device to synchronise with): a
    float32 Gram it would reject is never formed, and the factor is the one with float64 products."""
    features, noise, rhs = _rows()
    features, noise, rhs = features.float(), (noise * noise_scale).float(), rhs.float()
    calls = []
    original = capacitance.weighted_sums

    def recording(*args, exact_products=False, **kwargs):
        calls.append(exact_products)
        return original(*args, exact_products=exact_products, **kwargs)

    monkeypatch.setattr(capacitance, "weighted_sums", recording)
    factor, projection = factor_capacitance(features, noise, rhs)
    assert calls == [exact_first]
    expected, expected_projection = original(features, noise, rhs, exact_products=True)
    if exact_first:
        eye = torch.eye(expected.size(-1), dtype=expected.dtype)
        torch.testing.assert_close(factor.cholesky, torch.linalg.cholesky(expected + eye), rtol=1e-12, atol=0)
        torch.testing.assert_close(projection, expected_projection, rtol=1e-12, atol=0)


@pytest.mark.parametrize("num_features", [512, 1024])
def test_float32_model_at_noise_1e_minus_6_matches_float64(num_features):
    r"""A float32 Gram at noise 1e-6 (N = 2000) is rounded by far more than the identity it is added to; the
    factorisation forms it again with float64 products instead of raising NotPSDError.

    The float64 model has the same (float32-rounded) data. What remains is the float32 model's own rounding: of its
    features :math:`R` and noise :math:`\sigma^2` (to first order :math:`|\delta f| \le \sum|\partial f/\partial
    R|\,|\delta R| + |\partial f/\partial\sigma^2|\,|\delta\sigma^2|` for the marginal likelihood :math:`f`, with
    the float64 gradient and the actual float32 rounding) and the float32 rounding of the two terms and their sum
    that GPyTorch combines (:math:`3u(|y^\top K^{-1}y| + |\log\det K| + N\log 2\pi)/(2N)`).
    """
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(2000, 3, generator=generator)
    y = torch.sin(4 * x).sum(-1) + 0.1 * torch.randn(2000, generator=generator)
    values, roots, noises = {}, {}, {}
    for dtype in (torch.float32, torch.float64):
        likelihood = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.GreaterThan(1e-9))
        kernel = RandomFourierKernel(num_features, num_dims=3, sampler="orthogonal", seed=0)
        model = ExactGPModel(x.to(dtype), y.to(dtype), likelihood, kernel).to(dtype).train()
        likelihood.noise = 1e-6
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        values[dtype] = mll(model(x.to(dtype)), y.to(dtype)).detach()
        with torch.no_grad():
            roots[dtype], noises[dtype] = kernel.features(x.to(dtype)).double(), likelihood.noise.double()
    assert values[torch.float32].dtype == torch.float32 and torch.isfinite(values[torch.float32])

    root = roots[torch.float64].requires_grad_(True)
    noise = noises[torch.float64].requires_grad_(True)
    operator = FeatureRootLinearOperator(root) + ConstantDiagLinearOperator(noise, diag_shape=2000)
    inv_quad, logdet = operator.inv_quad_logdet(y.double().unsqueeze(-1), logdet=True)
    constant = 2000 * math.log(2 * math.pi)
    reference = -(inv_quad + logdet + constant) / 4000
    torch.testing.assert_close(reference.detach(), values[torch.float64], rtol=1e-12, atol=0)
    grad_root, grad_noise = torch.autograd.grad(reference, (root, noise))
    first_order = (grad_root.abs() * (roots[torch.float32] - root.detach()).abs()).sum()
    first_order = first_order + (grad_noise.abs() * (noises[torch.float32] - noise.detach()).abs()).sum()
    unit = torch.finfo(torch.float32).eps / 2
    output_rounding = 3 * unit * (inv_quad.abs() + logdet.abs() + constant).detach() / 4000
    assert (values[torch.float32].double() - values[torch.float64]).abs() <= first_order + output_rounding


class _StructuredModel(ExactGPModel):
    def forward(self, x):
        return gprf.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


@pytest.mark.parametrize("noise", [1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6])
def test_float32_models_are_float64_arithmetic_on_their_features_to_1e_minus_6(noise):
    r"""A float32 model's predictive mean and variance and its marginal likelihood against float64 arithmetic on the
    same float32 features and hyperparameters (N = 300, F = 64, lengthscale 0.3).

    Means and variances within :math:`10^{-6}` of the largest reference value; the marginal likelihood within
    :math:`10^{-6}` of the scale of its terms, :math:`(|y^\top K^{-1}y| + |\log\det K| + N\log 2\pi)/(2N)`, plus the
    float32 rounding of the terms and their sum that GPyTorch combines (:math:`3u` of that scale). The float32 Gram
    of the rows would give errors up to :math:`10^{-3}` here (its rounding is :math:`u\max_j G_{jj}` relative,
    :math:`\max_j G_{jj}\approx N/(F\sigma^2)`). Variances are compared below GPyTorch's float32 floor of
    :math:`10^{-6}` (``gpytorch.settings.min_variance``), which would otherwise replace them.
    """
    generator = torch.Generator().manual_seed(0)
    x, test_x = torch.rand(300, 3, generator=generator), torch.rand(50, 3, generator=generator)
    y = torch.sin(6 * x[:, 0]) + x[:, 1] + 0.01 * torch.randn(300, generator=generator)
    likelihood = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.GreaterThan(1e-9))
    kernel = RandomFourierKernel(64, num_dims=3, seed=0)
    model = _StructuredModel(x, y, likelihood, kernel).float().train()
    likelihood.noise, kernel.lengthscale = noise, 0.3
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    with torch.no_grad(), gpytorch.settings.min_variance(float_value=1e-30):
        value = mll(model(x), y)
        model.eval()
        prediction = model(test_x)
        mean, variance = prediction.mean, prediction.variance
        root, test_root = kernel.features(x).double(), kernel.features(test_x).double()
        sigma2, constant = likelihood.noise.double(), model.mean_module.constant.double()
    assert mean.dtype == variance.dtype == value.dtype == torch.float32

    residual = y.double() - constant
    covariance = root @ root.mT + sigma2 * torch.eye(300, dtype=torch.float64)
    cholesky = torch.linalg.cholesky(covariance)
    inv_quad = torch.cholesky_solve(residual[:, None], cholesky).squeeze(-1) @ residual
    logdet = 2 * cholesky.diagonal().log().sum()
    constant_term = 300 * math.log(2 * math.pi)
    reference = -(inv_quad + logdet + constant_term) / 600
    capacitance = torch.eye(64, dtype=torch.float64) + root.mT @ root / sigma2
    factor = torch.linalg.cholesky(capacitance)
    weights = torch.cholesky_solve((root.mT @ residual / sigma2)[:, None], factor).squeeze(-1)
    whitened = torch.linalg.solve_triangular(factor, test_root.mT, upper=False)
    reference_mean, reference_variance = constant + test_root @ weights, whitened.square().sum(0)

    assert (mean.double() - reference_mean).abs().max() <= 1e-6 * reference_mean.abs().max()
    assert (variance.double() - reference_variance).abs().max() <= 1e-6 * reference_variance.max()
    scale = (inv_quad.abs() + logdet.abs() + constant_term) / 600
    unit = torch.finfo(torch.float32).eps / 2
    assert (value.double() - reference).abs() <= (1e-6 + 3 * unit) * scale


def test_capacitance_sums_are_the_factors_sums_in_the_factor_dtype():
    generator = torch.Generator().manual_seed(3)
    features = torch.randn(40, 6, generator=generator)  # float32: products in float64 where their rounding matters
    noise = torch.full((40,), 2.0**-13)  # small, and exact in float32 (so is its ratio to the outputscale)
    rhs = torch.randn(40, 2, generator=generator)
    gram, projection = capacitance.capacitance_sums(features, noise, rhs, torch.tensor(2.0))
    assert gram.dtype == projection.dtype == torch.float64
    exact = features.double()
    torch.testing.assert_close(gram, 2.0 * exact.mT @ exact / 2.0**-13, rtol=1e-12, atol=0)
    scaled_rhs = (rhs / torch.tensor(2.0).sqrt()).double()  # the amplitude enters as Y / sqrt(s), in Y's dtype
    torch.testing.assert_close(projection, 2.0 * exact.mT @ scaled_rhs / 2.0**-13, rtol=1e-12, atol=0)
    factor, _ = factor_capacitance(features, noise, rhs, torch.tensor(2.0))
    eye = torch.eye(6, dtype=torch.float64)
    torch.testing.assert_close(factor.cholesky @ factor.cholesky.mT, gram + eye, rtol=1e-12, atol=0)
