r"""Chunked prediction from streamed statistics, without the training data.

With the weight posterior :math:`N(m_w, C^{-1})`, :math:`m_w = C^{-1}b`, :math:`C = LL^\top`, the latent
predictive distribution at a test point with feature root :math:`\phi_*` is

.. math::
    \mu_* = \mu(x_*) + \phi_*^\top m_w, \qquad \sigma_*^2 = \phi_*^\top C^{-1}\phi_* = \lVert L^{-1}\phi_*\rVert^2,

the same numbers as the in-memory :class:`~gprf.prediction.FeatureSpacePredictionStrategy`. Test points are
featurized chunk by chunk: :math:`O(\text{chunk}\cdot F)` memory and :math:`O(\text{chunk}\cdot F^2)` work
per chunk, per-point variances only (no :math:`M\times M` covariance).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from gpytorch.kernels import Kernel
from gpytorch.means import Mean
from torch import Tensor

from gprf._checks import check_positive_int
from gprf.features.versions import state_versions
from gprf.linalg import covariance_root
from gprf.prediction import WeightSpacePosterior
from gprf.streaming.features import model_fingerprint
from gprf.streaming.statistics import SufficientStatistics, fingerprint_mismatch


class StreamingPredictor:
    r"""Latent predictive mean and variance of a random-feature GP from its weight posterior (module docstring).

    Build it with :meth:`from_statistics` (or :meth:`gprf.streaming.StreamingFit.predictor`); it holds the
    :math:`F\times F` factor and the model's covariance and mean modules, not the training data.
    Add the likelihood's noise to the variance for the predictive distribution of new observations.

    Example:
        >>> predictor = StreamingPredictor.from_statistics(statistics, model.covar_module, model.mean_module)
        >>> mean, variance = predictor.predict(x_test, chunk_size=10_000)
    """

    def __init__(self, posterior: WeightSpacePosterior, covar_module: Kernel, mean_module: Mean | None = None) -> None:
        self.posterior = posterior
        self.covar_module = covar_module
        self.mean_module = mean_module
        self._model_state = state_versions(covar_module, mean_module)
        self._statistics: SufficientStatistics | None = None  # what from_statistics checked the modules against

    @classmethod
    def from_statistics(
        cls, statistics: SufficientStatistics, covar_module: Kernel, mean_module: Mean | None = None
    ) -> StreamingPredictor:
        """The posterior of ``statistics`` for the modules they were computed with.

        Raises ``ValueError`` when ``covar_module``'s random features or hyperparameters, or the prior mean, differ
        from those of the statistics (checked on their fingerprint; one host synchronisation).
        """
        if not isinstance(statistics, SufficientStatistics):
            raise TypeError(
                f"from_statistics expects SufficientStatistics (StreamingFit.statistics), got "
                f"{type(statistics).__name__}."
            )
        differing = cls._mismatch(statistics, covar_module, mean_module)
        if differing is not None:
            raise ValueError(
                f"The {differing} differ from those the statistics were computed with; predict with the modules "
                "they were streamed with (same seed and hyperparameter values, and the same mean_module)."
            )
        predictor = cls(statistics.posterior(), covar_module, mean_module)
        predictor._statistics = statistics
        return predictor

    @staticmethod
    def _mismatch(statistics: SufficientStatistics, covar_module: Kernel, mean_module: Mean | None) -> str | None:
        parameter = next(covar_module.parameters())  # inputs must have the kernel's dtype and device
        fingerprint = model_fingerprint(
            covar_module, statistics.input_dim, parameter.dtype, parameter.device, mean_module
        )
        reference = statistics.fingerprint.to(fingerprint.device)
        return fingerprint_mismatch(fingerprint, reference, statistics.root_dim, parts=("features", "mean"))

    def _check_model_unchanged(self) -> None:
        """Raise when the kernel or the mean changed since the predictor was built. Free while no parameter, buffer
        or feature draw was written; after a write, a predictor from statistics compares fingerprints (one host
        synchronisation), so a write of the same values passes."""
        state = state_versions(self.covar_module, self.mean_module)
        if state == self._model_state:
            return
        if self._statistics is None or self._mismatch(self._statistics, self.covar_module, self.mean_module):
            raise RuntimeError(
                "The kernel or the mean changed after this predictor was built (features redrawn with "
                "resample_features(), a hyperparameter set or trained); its posterior belongs to the old model. "
                "Stream the data again with the model as it is now, or restore the model."
            )
        self._model_state = state

    @torch.no_grad()
    def _predict_chunk(self, x: Tensor) -> tuple[Tensor, Tensor]:
        self._check_model_unchanged()
        root = covariance_root(self.covar_module, x)
        dtype = root.features.dtype
        phi = root.scaled_features().to(self.posterior.mean.dtype)
        mean = (phi @ self.posterior.mean.unsqueeze(-1)).squeeze(-1).to(dtype)
        if self.mean_module is not None:
            mean = mean + self.mean_module(x)
        variance = self.posterior.factor.solve_root(phi.mT).square().sum(-2).to(dtype)
        return torch.broadcast_tensors(mean, variance)

    def predict(self, x: Tensor, chunk_size: int | None = None) -> tuple[Tensor, Tensor]:
        """Mean and variance ``(..., M)`` at ``x`` ``(..., M, d)``, featurizing ``chunk_size`` points at a time."""
        if not torch.is_tensor(x):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}.")
        x = x.unsqueeze(-1) if x.dim() == 1 else x
        if chunk_size is None:
            return self._predict_chunk(x)
        check_positive_int(chunk_size, "chunk_size")
        parts = [self._predict_chunk(chunk) for chunk in x.split(chunk_size, dim=-2)]
        return torch.cat([mean for mean, _ in parts], dim=-1), torch.cat([var for _, var in parts], dim=-1)

    def predict_chunks(self, chunks: Iterable[Tensor]) -> Iterator[tuple[Tensor, Tensor]]:
        """Mean and variance for each input chunk of an iterable: for test sets that do not fit in memory."""
        for x in chunks:
            yield self.predict(x)
