r"""The test problems of ``--what bo``: what a batch of points observes, and its noiseless value.

* ``styblinski-tang``: the negated Styblinski–Tang function on :math:`[-5, 5]^d`, rescaled to the unit cube;
  noiseless, maximum :math:`39.166\,d`.
* ``gp-sample``: the large-scale Thompson-sampling setting of Lin et al. (2023): a function drawn from a GP prior
  with a Matérn-3/2 kernel of lengthscale 0.5 and unit amplitude on :math:`[0, 1]^d` (one function per seed),
  observed with Gaussian noise of variance ``noise``. The function is a random Fourier feature draw with
  ``num_frequencies`` iid frequencies (:math:`f = \phi(x/\ell)^\top w`, :math:`w \sim N(0, I)`), whose covariance is
  within :math:`O(1/\sqrt{m})` of the Matérn kernel's, as in that benchmark.

Reference: J. A. Lin, J. Antorán, S. Padhy, D. Janz, J. M. Hernández-Lobato, A. Terenin. *Sampling from Gaussian
Process Posteriors using Stochastic Gradient Descent.* Advances in Neural Information Processing Systems
(NeurIPS), 2023.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gprf.features import RandomFourierFeatures

#: ``--bo-objective`` names.
BO_OBJECTIVES = ("styblinski-tang", "gp-sample")

# Rows per evaluation chunk of a GP sample: bounds the n x F feature block at 2048 x 2 num_frequencies.
_CHUNK_ROWS = 2048


class StyblinskiTang:
    """The negated Styblinski–Tang function of ``dim`` inputs in the unit cube (noiseless)."""

    def __init__(self, dim: int) -> None:
        from botorch.test_functions import StyblinskiTang as BoTorchStyblinskiTang

        self.function = BoTorchStyblinskiTang(dim=dim, negate=True)
        self.description = f"Styblinski-Tang-{dim} (negated, maximised)"

    def value(self, x: Tensor) -> Tensor:
        """Noiseless values ``(n,)`` at points ``(n, d)`` of the unit cube."""
        bounds = self.function.bounds.to(x)
        return self.function(bounds[0] + (bounds[1] - bounds[0]) * x)

    def observe(self, x: Tensor) -> Tensor:
        """Observations ``(n, 1)``: the values themselves."""
        return self.value(x).unsqueeze(-1)


class GPSample:
    """A Matérn-3/2 GP prior draw on the unit cube, seeded by ``seed``, observed with noise of variance ``noise``."""

    def __init__(
        self, dim: int, seed: int, noise: float = 1e-3, lengthscale: float = 0.5, num_frequencies: int = 4096
    ) -> None:
        self.features = RandomFourierFeatures(dim, 2 * num_frequencies, kernel="matern32", seed=seed).double()
        generator = torch.Generator().manual_seed(seed + 1)
        self.weights = torch.randn(2 * num_frequencies, generator=generator, dtype=torch.float64)
        self.noise_generator = torch.Generator().manual_seed(seed + 2)
        self.noise, self.lengthscale = noise, lengthscale
        self.description = (
            f"a Matern-3/2 GP sample in {dim} dimensions (lengthscale {lengthscale:g}, noise variance {noise:g})"
        )

    def value(self, x: Tensor) -> Tensor:
        """Noiseless values ``(n,)`` at points ``(n, d)``."""
        features, weights = self.features.to(x.device), self.weights.to(x.device)
        chunks = [features(chunk.double() / self.lengthscale) @ weights for chunk in x.split(_CHUNK_ROWS)]
        return torch.cat(chunks).to(x.dtype)

    def observe(self, x: Tensor) -> Tensor:
        """Noisy observations ``(n, 1)``."""
        noise = torch.randn(x.size(0), generator=self.noise_generator, dtype=torch.float64)
        return (self.value(x) + self.noise**0.5 * noise.to(x)).unsqueeze(-1)


def make_objective(name: str, dim: int, seed: int, noise: float) -> StyblinskiTang | GPSample:
    """The ``--bo-objective`` problem ``name`` in ``dim`` dimensions for run ``seed``."""
    if name == "gp-sample":
        return GPSample(dim, seed, noise)
    return StyblinskiTang(dim)
