"""gprf.kernels.expressions, and GPyTorch's kernel algebra of gprf kernels end to end: which expressions evaluate to
a feature root and its width (the evaluated root's, without evaluating); a sum of scaled feature kernels has the
marginal likelihood (value and gradients), predictions and fantasies of gprf's FeatureSumKernel; and every spelling
with a part that has no feature root warns that the covariance is dense."""

from __future__ import annotations

import warnings

import gpytorch
import pytest
import torch
from gpytorch.kernels import AdditiveKernel, IndexKernel, ProductKernel, RBFKernel, ScaleKernel

import gprf
from gprf.exceptions import DispatchFallbackWarning, LowRankStructureWarning
from gprf.kernels import FeatureSumKernel, IndexRootKernel, RandomFourierKernel, is_feature_expression, root_columns
from gprf.linalg import feature_root
from gprf.testing.models import regression_data
from tests.helpers.models import GprfDistributionGP


def _model(kernel, x, y):
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = 0.05
    return GprfDistributionGP(x, y, likelihood, kernel).double()


def _rff(features=16, kernel="rbf", seed=0):
    """A Fourier feature kernel on the data columns 0:3 of inputs whose column 3 holds task indices."""
    return RandomFourierKernel(features, num_dims=3, kernel=kernel, seed=seed, active_dims=[0, 1, 2]).double()


def _task():
    return IndexKernel(num_tasks=3, rank=1, active_dims=[3]).double()


def _points(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Data ``n x 3`` with a task column, and targets."""
    x, y = regression_data(n=n, seed=seed)
    return torch.cat([x, torch.arange(n).remainder(3).double()[:, None]], -1), y


EXPRESSIONS = {
    "scaled": (lambda: ScaleKernel(_rff()), 16),
    "sum": (lambda: ScaleKernel(_rff()) + ScaleKernel(_rff(8, "matern52", 1)), 24),
    "sum of sums": (lambda: AdditiveKernel(ScaleKernel(_rff()) + _rff(8, seed=1), ScaleKernel(_rff(4, seed=2))), 28),
    "task product": (lambda: ScaleKernel(_rff()) * _task(), 48),
    "scaled product of a sum and a task": (lambda: ScaleKernel(_rff() + _rff(8, seed=1)) * _task(), 72),
    "product then task": (lambda: ProductKernel(ScaleKernel(_rff()), _rff(seed=1), _task()), 48),
    "exact root factor": (lambda: ScaleKernel(_rff()) * IndexRootKernel(_task()), 64),
}


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_feature_expressions_and_their_root_width(name):
    build, columns = EXPRESSIONS[name]
    kernel = build()
    x, _ = _points(20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DispatchFallbackWarning)  # a sketched product says so once, when built
        assert is_feature_expression(kernel) and root_columns(kernel) == columns
        assert feature_root(kernel(x)).num_columns == columns


DENSE = {
    "feature + exact": lambda: ScaleKernel(_rff()) + ScaleKernel(RBFKernel()),
    "exact + feature": lambda: ScaleKernel(RBFKernel()) + ScaleKernel(_rff()),
    "feature * exact": lambda: ScaleKernel(_rff()) * RBFKernel(),
    "exact * feature": lambda: RBFKernel() * ScaleKernel(_rff()),
    "task first": lambda: _task() * ScaleKernel(_rff()),
    "sum times a random factor": lambda: (ScaleKernel(_rff()) + ScaleKernel(_rff(8, seed=1))) * _rff(seed=2),
}


@pytest.mark.parametrize("name", list(DENSE))
def test_every_spelling_with_a_dense_part_warns(name):
    kernel = DENSE[name]().double()
    assert not is_feature_expression(kernel)
    with pytest.raises(TypeError, match="does not evaluate to a feature root"):
        root_columns(kernel)
    x, y = _points(40)
    model = _model(kernel, x, y)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    with pytest.warns(LowRankStructureWarning, match="dense"):
        loss = -mll(model(x), y)
    assert torch.isfinite(loss)


def _sum_spellings():
    first = ScaleKernel(_rff(16)).double()
    second = ScaleKernel(_rff(16, "matern52", 1)).double()
    first.outputscale, second.outputscale = 1.7, 0.4
    return first + second, FeatureSumKernel(first, second)


def test_a_scaled_sum_has_the_likelihood_of_the_feature_sum():
    x, y = _points(60)
    ours, native = _sum_spellings()
    assert isinstance(ours, AdditiveKernel)
    losses, gradients = [], []
    for kernel in (ours, native):
        model = _model(kernel, x, y)
        loss = -gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)(model(x), y)
        parameters = list(kernel.parameters())
        losses.append(loss.item())
        gradients.append(torch.autograd.grad(loss, parameters))
    assert abs(losses[0] - losses[1]) < 1e-8
    for ours_gradient, native_gradient in zip(*gradients, strict=True):
        torch.testing.assert_close(ours_gradient, native_gradient, rtol=1e-8, atol=1e-10)


def test_a_scaled_sum_predicts_and_fantasizes_as_the_feature_sum():
    # GPyTorch predicts its AdditiveKernel with its own default strategy (gprf's is not asked): on the same root its
    # predictions and fantasies are the feature model's. Fewer points than columns, so nothing here is dense.
    x, y = _points(24)
    test_x, _ = _points(5, seed=7)
    ours, native = _sum_spellings()
    models = [_model(kernel, x, y).eval() for kernel in (ours, native)]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", LowRankStructureWarning)
        predictions = [model(test_x) for model in models]
        fantasies = [
            model.get_fantasy_model(test_x[:2], torch.tensor([0.3, -0.2], dtype=torch.float64))(test_x)
            for model in models
        ]
    assert isinstance(models[1].prediction_strategy, gprf.prediction.FeatureSpacePredictionStrategy)
    for ours_prediction, native_prediction in (predictions, fantasies):
        torch.testing.assert_close(ours_prediction.mean, native_prediction.mean, rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(
            ours_prediction.covariance_matrix, native_prediction.covariance_matrix, rtol=1e-8, atol=1e-10
        )
