"""Adversarial use of Dirichlet classification (:mod:`gprf.likelihoods`): labels of the wrong kind, models built on
data that does not match them, and sampling arguments of the wrong type."""

from __future__ import annotations

import math

import pytest
import torch

from gprf.kernels import RandomFourierKernel
from gprf.likelihoods import DirichletClassificationLikelihood, DirichletGPModel, predict, predict_proba

X = torch.rand(30, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
LABELS = (X[:, 0] > 0.5).long()


def _model(labels=LABELS, x=X):
    likelihood = DirichletClassificationLikelihood(labels, dtype=x.dtype)
    kernel = RandomFourierKernel(32, num_dims=2, seed=0, batch_shape=likelihood.class_batch_shape)
    return DirichletGPModel(x, likelihood, kernel).to(x.dtype)


@pytest.mark.parametrize(
    ("labels", "kwargs", "match"),
    [
        (LABELS - 1, {}, "class labels 0..C-1, got a negative label -1"),
        (LABELS.double() + 0.5, {}, "whole-number class labels 0..C-1, got 1.5"),
        (LABELS[:0], {}, r"targets must have shape \(\.\.\., n\) with n >= 1 labels"),
        (torch.zeros(5, dtype=torch.long), {}, "targets hold a single class; pass num_classes=C"),
        (LABELS, {"num_classes": 1}, "num_classes must be an integer >= 2, got 1"),
        (LABELS, {"alpha_epsilon": 0}, "alpha_epsilon must be positive and finite"),
        (LABELS, {"alpha_epsilon": math.nan}, "alpha_epsilon must be positive and finite"),
    ],
)
def test_bad_labels_and_options_are_refused(labels, kwargs, match):
    with pytest.raises(ValueError, match=match):
        DirichletClassificationLikelihood(labels, **kwargs)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8, torch.int64])
def test_labels_of_any_integer_dtype_give_the_same_likelihood(dtype):
    reference = DirichletClassificationLikelihood(LABELS)
    other = DirichletClassificationLikelihood(LABELS.to(dtype))
    torch.testing.assert_close(other.noise, reference.noise)
    torch.testing.assert_close(other.transformed_targets, reference.transformed_targets)


def test_a_model_refuses_inputs_that_do_not_match_the_labels():
    likelihood = DirichletClassificationLikelihood(LABELS, dtype=torch.float64)
    kernel = RandomFourierKernel(32, num_dims=2, seed=0, batch_shape=likelihood.class_batch_shape)
    with pytest.raises(ValueError, match=r"train_x must have shape \(\*labels.shape, d\) = \(30, 'd'\)"):
        DirichletGPModel(X[:5], likelihood, kernel)


def test_a_model_refuses_inputs_of_another_dtype_than_the_likelihood():
    with pytest.raises(TypeError, match="build the likelihood with dtype=torch.float64"):
        DirichletGPModel(X, DirichletClassificationLikelihood(LABELS, dtype=torch.float32))


def test_a_model_refuses_a_kernel_without_the_class_batch():
    likelihood = DirichletClassificationLikelihood(LABELS, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"build it with batch_shape=likelihood.class_batch_shape = \(2,\)"):
        DirichletGPModel(X, likelihood, RandomFourierKernel(32, num_dims=2, seed=0))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_samples": 0}, ValueError, "num_samples must be a positive integer, got 0"),
        ({"generator": 3}, TypeError, "generator must be a torch.Generator or None, got int"),
    ],
)
def test_bad_sampling_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        predict_proba(_model().eval(), X[:3], **kwargs)


def test_probabilities_need_eval_mode():
    with pytest.raises(ValueError, match=r"call model.eval\(\) first"):
        predict_proba(_model(), X[:3])


def test_probabilities_sum_to_one_and_repeat_with_a_seeded_generator():
    model = _model().eval()
    first, again = (predict_proba(model, X[:4], generator=torch.Generator().manual_seed(1)) for _ in range(2))
    torch.testing.assert_close(first.sum(-1), torch.ones(4, dtype=torch.float64))
    assert torch.equal(first, again)
    assert predict(model, X[:0]).shape == (0,)
