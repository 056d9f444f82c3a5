"""Helpers shared by the streaming tests: the in-memory reference and a streamed prediction of the same model."""

from __future__ import annotations

import torch

from gprf.streaming import StreamingFit, iterate_chunks
from gprf.testing import ExactGPModel

NUM_TRAIN = 200


# Both paths compute the same float64 sums, in a different order: agreement to rounding, far below 1e-8.
TOLERANCE = {torch.float64: dict(rtol=0, atol=1e-8), torch.float32: dict(rtol=1e-5, atol=1e-5)}


def in_memory_prediction(model: ExactGPModel, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    model.eval()
    with torch.no_grad():
        posterior = model(test_x)
        return posterior.mean, posterior.variance


def streamed_prediction(model, x, y, test_x, chunk_size=37, noise=None):
    fit = StreamingFit.from_model(model).fit(iterate_chunks(x, y, noise, chunk_size=chunk_size))
    return fit.predictor().predict(test_x, chunk_size=11)


def assert_streamed_matches_in_memory(model, x, y, test_x, noise=None, rtol=0.0, atol=1e-8) -> None:
    """Streamed mean and variance at ``test_x`` equal the in-memory prediction strategy's."""
    mean, variance = streamed_prediction(model, x, y, test_x, noise=noise)
    expected_mean, expected_variance = in_memory_prediction(model, test_x)
    assert mean.dtype == variance.dtype == expected_mean.dtype and mean.device == test_x.device
    torch.testing.assert_close(mean, expected_mean, rtol=rtol, atol=atol)
    torch.testing.assert_close(variance, expected_variance, rtol=rtol, atol=atol)
