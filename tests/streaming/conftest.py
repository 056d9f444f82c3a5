"""Helpers shared by the streaming tests: the in-memory reference and a streamed prediction of the same model."""

from __future__ import annotations

import torch

from gprf.streaming import StreamingFit, iterate_chunks
from tests.prediction.conftest import ExactModel

NUM_TRAIN = 200


# Both paths compute the same float64 sums, in a different order: agreement to rounding, far below 1e-8.
TOLERANCE = {torch.float64: dict(rtol=0, atol=1e-8), torch.float32: dict(rtol=1e-5, atol=1e-5)}


def in_memory_prediction(model: ExactModel, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    model.eval()
    with torch.no_grad():
        posterior = model(test_x)
        return posterior.mean, posterior.variance


def streamed_prediction(model, x, y, test_x, chunk_size=37, noise=None):
    fit = StreamingFit.from_model(model).fit(iterate_chunks(x, y, noise, chunk_size=chunk_size))
    return fit.predictor().predict(test_x, chunk_size=11)
