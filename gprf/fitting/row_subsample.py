r"""Training on a seeded subsample of the rows: the inputs, the targets and the likelihood's per-row noise together.

A subsample of :math:`n` rows :math:`S` of a GP with observed noise :math:`\Sigma = \mathrm{diag}(\sigma_i^2)` has
the marginal likelihood :math:`N(y_S \mid \mu(X_S), K_{SS} + \Sigma_{SS})`: every per-row quantity is indexed
alike. GPyTorch keeps observed noise in the likelihood (``FixedGaussianNoise.noise``, ``(..., N)``: BoTorch's
``train_Yvar``, gprf's Dirichlet classification noise), apart from the model's training data, and treats a noise
vector whose length differs from the data's as no noise at all; so the subsample indexes it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from gpytorch.likelihoods import Likelihood
from gpytorch.likelihoods.noise_models import FixedGaussianNoise
from gpytorch.models import ExactGP


def subsample_rows(num_rows: int, size: int, seed: int, device: torch.device) -> torch.Tensor:
    """``size`` distinct row indices out of ``num_rows``, sorted, drawn by a CPU generator seeded with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(num_rows, generator=generator)[:size].sort().values.to(device)


def per_row_noise_models(likelihood: Likelihood, num_rows: int) -> list[FixedGaussianNoise]:
    """The likelihood's observed-noise models that hold one variance per training row (last dimension ``num_rows``)."""
    return [
        module
        for module in likelihood.modules()
        if isinstance(module, FixedGaussianNoise) and module.noise.dim() > 0 and module.noise.size(-1) == num_rows
    ]


@contextmanager
def training_rows(model: ExactGP, likelihood: Likelihood, rows: torch.Tensor) -> Iterator[None]:
    """Train on ``rows`` of the training data for a while, then restore it.

    Inputs are indexed along dim -2, the targets and every per-row observed noise of ``likelihood`` along dim -1;
    the originals (the same tensor objects) are put back on exit, also after an exception.
    """
    inputs, targets = model.train_inputs, model.train_targets
    num_rows = targets.size(-1)
    if rows.numel() == num_rows:
        yield
        return
    noise_models = per_row_noise_models(likelihood, num_rows)
    noises = [module.noise for module in noise_models]
    model.set_train_data(tuple(x.index_select(-2, rows) for x in inputs), targets.index_select(-1, rows), strict=False)
    for module, noise in zip(noise_models, noises, strict=True):
        module.noise = noise.index_select(-1, rows.to(noise.device))
    try:
        yield
    finally:
        for module, noise in zip(noise_models, noises, strict=True):
            module.noise = noise
        model.set_train_data(inputs, targets, strict=False)
