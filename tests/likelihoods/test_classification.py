"""gprf.likelihoods.classification: class probabilities from the per-class posterior marginals — unbiased Monte-Carlo
softmax means (Gauss-Hermite reference), reproducible predictions, marginals without the M x M covariance."""

from __future__ import annotations

from unittest import mock

import gpytorch
import numpy as np
import pytest
import torch
from linear_operator.operators import LowRankRootLinearOperator

from gprf.likelihoods import (
    DirichletClassificationLikelihood,
    DirichletGPModel,
    class_marginals,
    predict,
    predict_proba,
)
from tests.helpers.classification import NUM_CLASSES, dense_prediction, make_data, make_model, rff_factory

pytestmark = pytest.mark.usefixtures("single_thread")


def test_marginals_never_form_the_test_covariance(float64):
    x, labels = make_data(40)
    test_x, _ = make_data(200, seed=2)  # M > F: the predictive covariance is a low-rank root
    model = make_model(x, labels)
    with mock.patch.object(LowRankRootLinearOperator, "to_dense", side_effect=AssertionError("M x M formed")):
        probs = predict_proba(model, test_x, num_samples=4, generator=torch.Generator().manual_seed(0))
    assert probs.shape == (200, NUM_CLASSES)


def test_predict_proba_is_unbiased_for_two_classes(float64):
    """For C = 2, E[softmax(f)_1] = E[sigmoid(f_1 - f_0)] is a 1-D Gaussian integral (Gauss-Hermite reference)."""
    x, labels = make_data(30)
    labels = (labels > 0).long()
    likelihood = DirichletClassificationLikelihood(labels, num_classes=2)
    model = DirichletGPModel(x, likelihood, rff_factory()).eval()
    test_x, _ = make_data(6, seed=5)
    num_samples = 4000
    probs = predict_proba(model, test_x, num_samples=num_samples, generator=torch.Generator().manual_seed(1))
    mean, var = class_marginals(model, test_x)
    nodes, weights = (torch.as_tensor(t) for t in np.polynomial.hermite.hermgauss(80))
    z_mean = (mean[1] - mean[0]).unsqueeze(-1)
    z = z_mean + (2 * (var[0] + var[1])).sqrt().unsqueeze(-1) * nodes  # z ~ N(mu, s^2) at the nodes
    sig = torch.sigmoid(z)
    expected = (weights * sig).sum(-1) / torch.pi**0.5
    second = (weights * sig**2).sum(-1) / torch.pi**0.5
    bound = 5 * ((second - expected**2) / num_samples).sqrt()
    assert bool(((probs[:, 1] - expected).abs() <= bound).all()), (probs[:, 1], expected, bound)
    torch.testing.assert_close(probs.sum(-1), torch.ones(6, dtype=torch.float64))


def test_predict_is_reproducible_and_matches_the_argmax(float64):
    x, labels = make_data(40)
    model = make_model(x, labels)
    first = predict_proba(model, x[:10], generator=torch.Generator().manual_seed(3))
    again = predict_proba(model, x[:10], generator=torch.Generator().manual_seed(3))
    assert torch.equal(first, again)
    assert torch.equal(predict(model, x[:10], generator=torch.Generator().manual_seed(3)), first.argmax(-1))


def test_class_marginals_are_the_posterior_diagonal(float64):
    x, labels = make_data(30)
    test_x, _ = make_data(6, seed=4)
    model = make_model(x, labels)
    with gpytorch.settings.skip_posterior_variances(True):  # ignored: the variances are always computed
        mean, var = class_marginals(model, test_x)
    ref_mean, ref_var = dense_prediction(model, x, test_x)
    torch.testing.assert_close(mean, ref_mean, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(var, ref_var, rtol=1e-6, atol=1e-8)


def test_bad_calls(float64):
    x, labels = make_data(20)
    model = make_model(x, labels)
    with pytest.raises(ValueError, match="num_samples"):
        predict_proba(model, x, num_samples=0)
    model.train()
    with pytest.raises(ValueError, match="model.eval"):
        predict_proba(model, x)
    regression = DirichletGPModel(x, DirichletClassificationLikelihood(labels, num_classes=NUM_CLASSES), rff_factory())
    regression.likelihood = gpytorch.likelihoods.GaussianLikelihood()
    with pytest.raises(TypeError, match="DirichletClassificationLikelihood"):
        class_marginals(regression.eval(), x)
