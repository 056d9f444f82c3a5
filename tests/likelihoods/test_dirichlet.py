"""DirichletClassificationLikelihood: the transform, each fixed GPyTorch defect, and bad input.

Every ``test_fixes_*`` test fails on ``gpytorch.likelihoods.DirichletClassificationLikelihood`` (the failure
mode is named in the test's docstring).
"""

from __future__ import annotations

import math
import pickle

import gpytorch
import pytest
import torch
from gpytorch.distributions import MultivariateNormal

from gprf.likelihoods import DirichletClassificationLikelihood, dirichlet_transform

LABELS = torch.tensor([0, 1, 2, 2, 1, 0])
NUM_CLASSES = 3


def latent(num_points: int, num_classes: int = NUM_CLASSES, dtype=torch.float64) -> MultivariateNormal:
    """A class-batched latent distribution with unit variances (observed variance - 1 is the noise)."""
    eye = torch.eye(num_points, dtype=dtype).expand(num_classes, num_points, num_points)
    return MultivariateNormal(torch.zeros(num_classes, num_points, dtype=dtype), eye)


def expected_noise(labels: torch.Tensor, num_classes: int, alpha_epsilon: float) -> torch.Tensor:
    """log(1/alpha + 1) written out per entry: alpha = 1 + eps on the label's class, eps elsewhere."""
    on = math.log(1.0 / (1.0 + alpha_epsilon) + 1.0)
    off = math.log(1.0 / alpha_epsilon + 1.0)
    rows = [[on if int(label) == c else off for label in labels] for c in range(num_classes)]
    return torch.tensor(rows, dtype=torch.float64)


def observed_noise(distribution: MultivariateNormal) -> torch.Tensor:
    return distribution.covariance_matrix.diagonal(dim1=-2, dim2=-1) - 1.0


# ---------------------------------------------------------------------- the transform
@pytest.mark.parametrize("alpha_epsilon", [0.01, 0.3])
def test_transform_matches_the_dirichlet_moment_match(float64, alpha_epsilon):
    targets, noise = dirichlet_transform(LABELS, NUM_CLASSES, alpha_epsilon, torch.float64)
    ref_noise = expected_noise(LABELS, NUM_CLASSES, alpha_epsilon)
    alpha = torch.where(ref_noise < math.log(1 / alpha_epsilon + 1), 1 + alpha_epsilon, alpha_epsilon)
    torch.testing.assert_close(noise, ref_noise)
    torch.testing.assert_close(targets, alpha.log() - 0.5 * ref_noise)
    # The log-normal moment match: E[exp(y + eps)] = alpha and Var[exp(y + eps)] = alpha (Gamma(alpha, 1)).
    mean = torch.exp(targets + noise / 2)
    var = (noise.exp() - 1) * torch.exp(2 * targets + noise)
    torch.testing.assert_close(mean, alpha)
    torch.testing.assert_close(var, alpha)


def test_training_noise_and_targets_match_gpytorch(float64):
    ours = DirichletClassificationLikelihood(LABELS, num_classes=NUM_CLASSES)
    theirs = gpytorch.likelihoods.DirichletClassificationLikelihood(LABELS, dtype=torch.float64)
    torch.testing.assert_close(ours.transformed_targets, theirs.transformed_targets)
    torch.testing.assert_close(ours.noise, theirs.noise)
    assert isinstance(ours, gpytorch.likelihoods.DirichletClassificationLikelihood)


def test_training_mode_uses_the_training_noise(float64):
    likelihood = DirichletClassificationLikelihood(LABELS, num_classes=NUM_CLASSES, alpha_epsilon=0.1)
    likelihood.train()
    torch.testing.assert_close(observed_noise(likelihood(latent(6))), expected_noise(LABELS, NUM_CLASSES, 0.1))
    with pytest.raises(ValueError, match="6 training labels but got 4"):
        likelihood(latent(4))


# ---------------------------------------------------------------------- the fixed defects
def test_fixes_alpha_epsilon_ignored_for_test_targets(float64):
    """GPyTorch recomputes the test noise with alpha_epsilon=0.01 whatever was set (4.615 instead of 2.398)."""
    likelihood = DirichletClassificationLikelihood(LABELS, alpha_epsilon=0.1).eval()
    test_labels = torch.tensor([0, 1, 2, 0])
    observed = likelihood(latent(4), targets=test_labels)
    torch.testing.assert_close(observed_noise(observed), expected_noise(test_labels, NUM_CLASSES, 0.1))


@pytest.mark.parametrize("test_labels", [[0, 1, 1, 0], [0, 0, 0, 0]], ids=["top-class-missing", "one-class"])
def test_fixes_num_classes_reinferred_from_test_targets(float64, test_labels):
    """GPyTorch infers C = max + 1 from the test labels: a shape error, or a (1, M) noise silently broadcast."""
    likelihood = DirichletClassificationLikelihood(LABELS, num_classes=NUM_CLASSES).eval()
    test_labels = torch.tensor(test_labels)
    observed = likelihood(latent(4), labels=test_labels)
    assert observed.covariance_matrix.shape == (NUM_CLASSES, 4, 4)
    torch.testing.assert_close(observed_noise(observed), expected_noise(test_labels, NUM_CLASSES, 0.01))


@pytest.mark.parametrize("num_points", [6, 4], ids=["training-size", "other-size"])
def test_fixes_silent_training_noise_at_test_time(float64, num_points):
    """GPyTorch reuses the training noise for a test set of the training size and drops it otherwise."""
    likelihood = DirichletClassificationLikelihood(LABELS, learn_additional_noise=True).eval()
    with pytest.raises(ValueError, match="needs the labels of test points"):
        likelihood(latent(num_points))
    with pytest.raises(ValueError, match="needs the labels of test points"):
        likelihood(latent(num_points), torch.zeros(num_points, 2))


def test_fixes_test_noise_doubled_with_learned_noise(float64):
    """GPyTorch passes the test noise to the learned noise model too: it adds the Dirichlet noise twice and drops
    the learned noise (the same happens to fantasy points)."""
    likelihood = DirichletClassificationLikelihood(LABELS, learn_additional_noise=True)
    likelihood.second_noise = torch.tensor(0.3)
    likelihood.eval()
    test_labels = torch.tensor([0, 1, 2, 0])
    observed = likelihood(latent(4), targets=test_labels)
    torch.testing.assert_close(observed_noise(observed), expected_noise(test_labels, NUM_CLASSES, 0.01) + 0.3)


def test_explicit_test_noise_is_used_as_given(float64):
    likelihood = DirichletClassificationLikelihood(LABELS).eval()
    noise = torch.full((NUM_CLASSES, 4), 0.25)
    torch.testing.assert_close(observed_noise(likelihood(latent(4), noise=noise)), noise)


@pytest.mark.parametrize("by", ["labels", "noise"])
def test_fixes_fantasy_likelihood(float64, by):
    """GPyTorch's get_fantasy_likelihood reads the labels from ``noise`` and crashes (AttributeError)."""
    likelihood = DirichletClassificationLikelihood(LABELS, num_classes=4, alpha_epsilon=0.05)
    new_labels = torch.tensor([3, 1])
    kwargs = {"labels": new_labels} if by == "labels" else {"noise": likelihood.transform(new_labels)[1]}
    fantasy = likelihood.get_fantasy_likelihood(**kwargs)
    all_labels = torch.cat([LABELS, new_labels])
    assert torch.equal(fantasy.targets, all_labels)
    torch.testing.assert_close(fantasy.noise_covar.noise, expected_noise(all_labels, 4, 0.05))
    torch.testing.assert_close(fantasy.transformed_targets, dirichlet_transform(all_labels, 4, 0.05, torch.float64)[0])
    assert torch.equal(likelihood.targets, LABELS)  # the original is untouched


def test_fantasy_over_a_fantasy_batch(float64):
    likelihood = DirichletClassificationLikelihood(LABELS)
    new_labels = torch.tensor([[2, 1], [0, 0]])
    fantasy = likelihood.get_fantasy_likelihood(noise=likelihood.transform(new_labels)[1])
    assert torch.equal(fantasy.targets, torch.cat([LABELS.expand(2, 6), new_labels], dim=-1))
    assert fantasy.noise_covar.noise.shape == (2, NUM_CLASSES, 8)


def test_fantasy_noise_that_is_no_dirichlet_noise_is_rejected(float64):
    likelihood = DirichletClassificationLikelihood(LABELS)
    with pytest.raises(ValueError, match="not the Dirichlet noise"):
        likelihood.get_fantasy_likelihood(noise=torch.full((NUM_CLASSES, 2), 0.3))
    with pytest.raises(ValueError, match="need the new labels"):
        likelihood.get_fantasy_likelihood()


@pytest.mark.parametrize(
    ("batch_shape", "noise_shape"), [(None, (NUM_CLASSES, 1)), ((), (1,)), ((2, NUM_CLASSES), (2, NUM_CLASSES, 1))]
)
def test_fixes_user_batch_shape_ignored(batch_shape, noise_shape):
    """GPyTorch always gives the learned noise the batch shape (C,), whatever ``batch_shape`` says."""
    likelihood = DirichletClassificationLikelihood(LABELS, learn_additional_noise=True, batch_shape=batch_shape)
    assert likelihood.second_noise_covar.raw_noise.shape == noise_shape


def test_fixes_batched_targets(float64):
    """GPyTorch indexes with ``arange(len(targets))`` and crashes (IndexError) on labels of shape (b, n)."""
    labels = torch.stack([LABELS, LABELS.flip(0)])
    likelihood = DirichletClassificationLikelihood(labels, num_classes=NUM_CLASSES)
    assert likelihood.class_batch_shape == (2, NUM_CLASSES)
    assert likelihood.transformed_targets.shape == (2, NUM_CLASSES, 6)
    for b in range(2):
        torch.testing.assert_close(likelihood.noise_covar.noise[b], expected_noise(labels[b], NUM_CLASSES, 0.01))


def test_fixes_dtype_not_inferred(float64):
    """GPyTorch defaults to float32 targets whatever the default dtype; gprf follows it, ``.to()`` and the input."""
    likelihood = DirichletClassificationLikelihood(LABELS)
    assert likelihood.transformed_targets.dtype == torch.float64
    assert likelihood.noise.dtype == torch.float64
    likelihood = likelihood.to(torch.float32).eval()
    assert likelihood.transformed_targets.dtype == torch.float32 and likelihood.noise.dtype == torch.float32
    observed = likelihood(latent(4, dtype=torch.float64), targets=torch.tensor([0, 1, 2, 0]))
    assert observed.covariance_matrix.dtype == torch.float64


def test_state_dict_and_pickle(float64):
    likelihood = DirichletClassificationLikelihood(LABELS, learn_additional_noise=True)
    likelihood.second_noise = torch.tensor(0.37)
    fresh = DirichletClassificationLikelihood(LABELS, learn_additional_noise=True)
    fresh.load_state_dict(likelihood.state_dict())
    torch.testing.assert_close(fresh.noise, likelihood.noise)
    clone = pickle.loads(pickle.dumps(likelihood))
    torch.testing.assert_close(clone.noise, likelihood.noise)
    assert torch.equal(clone.targets, LABELS) and clone.num_classes == NUM_CLASSES


def test_follows_the_device(device):
    likelihood = DirichletClassificationLikelihood(LABELS).to(device)
    assert likelihood.targets.device.type == device.type
    assert likelihood.noise.device.type == device.type
    assert likelihood.transform(torch.tensor([0, 2], device=device))[1].device.type == device.type


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"targets": LABELS.double() + 0.5}, ValueError, "whole-number class labels"),
        ({"targets": torch.tensor([0.0, math.nan, 1.0])}, ValueError, "whole-number class labels"),
        ({"targets": torch.tensor([0.0, math.inf, 1.0])}, ValueError, "whole-number class labels"),
        ({"targets": LABELS.bool()}, TypeError, "integer class labels"),
        ({"targets": LABELS.to(torch.complex64)}, TypeError, "integer class labels"),
        ({"targets": torch.tensor([0, -1, 2], dtype=torch.int8)}, ValueError, "negative label"),
        ({"targets": LABELS.int(), "num_classes": 2}, ValueError, "smaller than the labels require"),
        ({"targets": [0, 1, 2]}, TypeError, "tensor of integer class labels"),
        ({"targets": torch.tensor([0, -1, 2])}, ValueError, "negative label"),
        ({"targets": LABELS, "num_classes": 2}, ValueError, "smaller than the labels require"),
        ({"targets": LABELS, "num_classes": 1}, ValueError, "integer >= 2"),
        ({"targets": torch.zeros(4, dtype=torch.long)}, ValueError, "single class"),
        ({"targets": LABELS, "alpha_epsilon": -0.1}, ValueError, "alpha_epsilon must be positive"),
        ({"targets": LABELS, "alpha_epsilon": 0.0}, ValueError, "alpha_epsilon must be positive"),
        ({"targets": LABELS, "alpha_epsilon": "0.1"}, TypeError, "alpha_epsilon must be a positive float"),
        ({"targets": LABELS, "learn_additional_noise": True, "batch_shape": (4,)}, ValueError, "does not broadcast"),
        ({"targets": LABELS, "dtype": torch.long}, TypeError, "floating dtype"),
        ({"targets": torch.tensor([], dtype=torch.long)}, ValueError, "n >= 1 labels"),
    ],
)
def test_bad_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        DirichletClassificationLikelihood(**kwargs)


@pytest.mark.parametrize(
    ("test_labels", "match"),
    [
        (torch.tensor([0, 3, 1, 0]), r"\[0, 3\)"),
        (torch.tensor([0, -1, 1, 0]), r"\[0, 3\)"),
        (torch.tensor([0, 3, 1, 0], dtype=torch.uint8), r"\[0, 3\)"),
        (torch.tensor([0, -1, 1, 0], dtype=torch.int16), r"\[0, 3\)"),
        (torch.tensor([0.0, 1.25, 1.0, 0.0]), "whole-number class labels"),
    ],
    ids=["too-large", "negative", "too-large-uint8", "negative-int16", "fractional"],
)
def test_bad_test_labels(float64, test_labels, match):
    likelihood = DirichletClassificationLikelihood(LABELS).eval()
    with pytest.raises(ValueError, match=match):
        likelihood(latent(4), targets=test_labels)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.float32, torch.float64])
def test_labels_of_any_integer_dtype_or_whole_floats_give_the_int64_results(float64, dtype):
    """one_hot takes int64 only: labels of other integer dtypes (and floats holding whole numbers) are converted."""
    likelihood = DirichletClassificationLikelihood(LABELS.to(dtype), num_classes=NUM_CLASSES)
    reference = DirichletClassificationLikelihood(LABELS, num_classes=NUM_CLASSES)
    assert likelihood.targets.dtype == torch.long and torch.equal(likelihood.targets, LABELS)
    assert torch.equal(likelihood.transformed_targets, reference.transformed_targets)
    torch.testing.assert_close(likelihood.noise, expected_noise(LABELS, NUM_CLASSES, 0.01), rtol=0, atol=0)
    test_labels = torch.tensor([2, 0, 1, 1])
    observed = likelihood.eval()(latent(4), targets=test_labels.to(dtype))
    torch.testing.assert_close(observed_noise(observed), expected_noise(test_labels, NUM_CLASSES, 0.01))
    targets, noise = dirichlet_transform(test_labels.to(dtype), NUM_CLASSES, 0.01, torch.float64)
    assert torch.equal(noise, expected_noise(test_labels, NUM_CLASSES, 0.01))
    fantasy = likelihood.get_fantasy_likelihood(labels=test_labels.to(dtype))
    assert torch.equal(fantasy.targets, torch.cat([LABELS, test_labels]))


def test_labels_and_noise_together_are_rejected(float64):
    likelihood = DirichletClassificationLikelihood(LABELS).eval()
    with pytest.raises(ValueError, match="not both"):
        likelihood(latent(4), targets=torch.tensor([0, 1, 2, 0]), noise=torch.ones(NUM_CLASSES, 4))
    with pytest.raises(ValueError, match="not both"):
        likelihood(latent(4), targets=torch.tensor([0, 1, 2, 0]), labels=torch.tensor([0, 1, 2, 0]))
