"""BoTorch models with gprf kernels shared by the tests of gprf.botorch."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("botorch")

from botorch.models.transforms import Normalize, Standardize  # noqa: E402

import gprf.botorch  # noqa: E402,F401  (registers the pathwise integration)
from gprf.botorch import RandomFeatureSingleTaskGP  # noqa: E402


def branin_like(x: torch.Tensor, num_outputs: int) -> torch.Tensor:
    """Smooth test targets on [0, 1]^d (one or two outputs, different scales)."""
    first = torch.sin(6 * x).sum(-1) + x.square().sum(-1)
    second = 10 * torch.cos(4 * x[..., :1]).squeeze(-1) + x.sum(-1)
    return torch.stack([first, second], -1)[..., :num_outputs]


def make_botorch_model(
    num_outputs: int = 1,
    n: int = 40,
    d: int = 3,
    num_features: int = 64,
    device: str | torch.device = "cpu",
    seed: int = 0,
    data_seed: int = 0,
    **kwargs,
) -> RandomFeatureSingleTaskGP:
    """A RandomFeatureSingleTaskGP with Normalize/Standardize on reproducible data (float64); ``seed`` seeds the features."""
    generator = torch.Generator().manual_seed(data_seed)
    x = (2 * torch.rand(n, d, generator=generator, dtype=torch.float64) - 1).to(device)
    y = branin_like(x, num_outputs)
    return RandomFeatureSingleTaskGP(
        x,
        y,
        num_features=num_features,
        seed=seed,
        input_transform=Normalize(d, bounds=torch.tensor([[-1.0] * d, [1.0] * d], dtype=torch.float64, device=device)),
        outcome_transform=Standardize(num_outputs),
        **kwargs,
    )
