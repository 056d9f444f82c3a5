r"""Chunked prediction from streamed statistics, without the training data.

With the weight posterior :math:`N(m_w, C^{-1})`, :math:`m_w = C^{-1}b`, :math:`C = LL^\top`, the latent
predictive distribution at a test point with feature root :math:`\phi_*` is

.. math::
    \mu_* = \mu(x_*) + \phi_*^\top m_w, \qquad \sigma_*^2 = \phi_*^\top C^{-1}\phi_* = \lVert L^{-1}\phi_*\rVert^2,

the same numbers as the in-memory :class:`~gprf.prediction.FeatureSpacePredictionStrategy`. Test points are
featurized chunk by chunk: :math:`O(\text{chunk}\cdot F)` memory and :math:`O(\text{chunk}\cdot F^2)` work
per chunk, per-point variances only (no :math:`M\times M` covariance). With ``observation_noise=True`` the
variance is that of a new observation, :math:`\sigma_*^2 + \sigma_{\text{noise}}^2(x_*)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

import torch
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, _GaussianLikelihoodBase
from gpytorch.means import Mean
from torch import Tensor

from gprf._checks import check_positive_int
from gprf.features.versions import state_versions
from gprf.linalg import covariance_root
from gprf.prediction import WeightSpacePosterior
from gprf.streaming.features import likelihood_noise, model_fingerprint
from gprf.streaming.statistics import SufficientStatistics, fingerprint_mismatch


class Prediction(NamedTuple):
    """Predictive mean and per-point variance ``(..., M)``; unpacks as ``mean, variance = prediction``."""

    mean: Tensor
    variance: Tensor


class StreamingPredictor:
    r"""Latent predictive mean and variance of a random-feature GP from its weight posterior (module docstring).

    Build it with :meth:`from_statistics` (or :meth:`gprf.streaming.StreamingFit.predictor`); it holds the
    :math:`F\times F` factor, the model's covariance and mean modules and, when given (as
    :meth:`~gprf.streaming.StreamingFit.predictor` does), its likelihood; not the training data.
    ``predict(x, observation_noise=True)`` adds the observation noise to the variance: the likelihood's own noise at
    ``x``, plus per-point noise variances passed as ``noise=`` (needed for a ``FixedNoiseGaussianLikelihood``, whose
    fixed noise comes with the data, and for a predictor built without a likelihood).

    Example:
        >>> predictor = StreamingPredictor.from_statistics(statistics, model.covar_module, model.mean_module)
        >>> mean, variance = predictor.predict(x_test, chunk_size=10_000)
        >>> observed = fit.predictor().predict(x_test, observation_noise=True)  # observed.mean, observed.variance
    """

    def __init__(
        self,
        posterior: WeightSpacePosterior,
        covar_module: Kernel,
        mean_module: Mean | None = None,
        likelihood: _GaussianLikelihoodBase | None = None,
    ) -> None:
        if likelihood is not None and not isinstance(likelihood, _GaussianLikelihoodBase):
            raise TypeError(
                f"likelihood must be a GPyTorch Gaussian likelihood or None, got {type(likelihood).__name__}."
            )
        self.posterior = posterior
        self.covar_module = covar_module
        self.mean_module = mean_module
        self.likelihood = likelihood
        self._model_state = state_versions(covar_module, mean_module, likelihood)
        self._statistics: SufficientStatistics | None = None  # what from_statistics checked the modules against

    @classmethod
    def from_statistics(
        cls,
        statistics: SufficientStatistics,
        covar_module: Kernel,
        mean_module: Mean | None = None,
        likelihood: _GaussianLikelihoodBase | None = None,
    ) -> StreamingPredictor:
        """The posterior of ``statistics`` for the modules they were computed with.

        Raises ``ValueError`` when ``covar_module``'s random features or hyperparameters, the prior mean or (when
        ``likelihood`` is given, for ``observation_noise=True``) the likelihood's noise differ from those of the
        statistics (checked on their fingerprint; one host synchronisation).
        """
        if not isinstance(statistics, SufficientStatistics):
            raise TypeError(
                f"from_statistics expects SufficientStatistics (StreamingFit.statistics), got "
                f"{type(statistics).__name__}."
            )
        differing = cls._mismatch(statistics, covar_module, mean_module, likelihood)
        if differing is not None:
            raise ValueError(
                f"The {differing} differ from those the statistics were computed with; predict with the modules "
                "they were streamed with (same seed and hyperparameter values, and the same mean_module)."
            )
        predictor = cls(statistics.posterior(), covar_module, mean_module, likelihood)
        predictor._statistics = statistics
        return predictor

    @staticmethod
    def _mismatch(
        statistics: SufficientStatistics,
        covar_module: Kernel,
        mean_module: Mean | None,
        likelihood: _GaussianLikelihoodBase | None,
    ) -> str | None:
        parameter = next(covar_module.parameters())  # inputs must have the kernel's dtype and device
        fingerprint = model_fingerprint(
            covar_module, statistics.input_dim, parameter.dtype, parameter.device, mean_module, likelihood
        )
        reference = statistics.fingerprint.to(fingerprint.device)
        parts = ("features", "mean") if likelihood is None else ("features", "noise", "mean")
        return fingerprint_mismatch(fingerprint, reference, statistics.root_dim, parts=parts)

    def _check_model_unchanged(self) -> None:
        """Raise when the kernel, the mean or the likelihood changed since the predictor was built. Free while no
        parameter, buffer or feature draw was written; after a write, a predictor from statistics compares
        fingerprints (one host synchronisation), so a write of the same values passes."""
        state = state_versions(self.covar_module, self.mean_module, self.likelihood)
        if state == self._model_state:
            return
        if self._statistics is None or self._mismatch(
            self._statistics, self.covar_module, self.mean_module, self.likelihood
        ):
            raise RuntimeError(
                "The kernel, the mean or the likelihood changed after this predictor was built (features redrawn with "
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

    def predict(
        self,
        x: Tensor,
        chunk_size: int | None = None,
        observation_noise: bool = False,
        noise: Tensor | None = None,
    ) -> Prediction:
        """Mean and variance ``(..., M)`` at ``x`` ``(..., M, d)``, featurizing ``chunk_size`` points at a time.

        ``observation_noise=True`` adds the observation-noise variance: the held likelihood's own noise at ``x``
        plus ``noise`` ``(..., M)`` when given (per-point noise variances: required for a
        ``FixedNoiseGaussianLikelihood`` and for a predictor without a likelihood).
        """
        if not torch.is_tensor(x):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}.")
        if not isinstance(observation_noise, bool):
            raise TypeError(f"observation_noise must be True or False, got {type(observation_noise).__name__}.")
        if noise is not None and not observation_noise:
            raise ValueError("noise= is only added with observation_noise=True; pass both or neither.")
        x = x.unsqueeze(-1) if x.dim() == 1 else x
        if chunk_size is None:
            mean, variance = self._predict_chunk(x)
        else:
            check_positive_int(chunk_size, "chunk_size")
            parts = [self._predict_chunk(chunk) for chunk in x.split(chunk_size, dim=-2)]
            mean = torch.cat([mean for mean, _ in parts], dim=-1)
            variance = torch.cat([var for _, var in parts], dim=-1)
        if observation_noise:
            variance = variance + self._observation_noise(x, variance, noise)
        return Prediction(mean, variance)

    def _observation_noise(self, x: Tensor, variance: Tensor, noise: Tensor | None) -> Tensor:
        """The noise variance ``(..., M)`` that :meth:`predict` adds (its docstring)."""
        if noise is not None:
            if not torch.is_tensor(noise):
                raise TypeError(f"noise must be a torch.Tensor of noise variances, got {type(noise).__name__}.")
            try:
                torch.broadcast_shapes(noise.shape, variance.shape)
            except RuntimeError:
                raise ValueError(
                    f"noise of shape {tuple(noise.shape)} does not broadcast to the predictions' shape "
                    f"{tuple(variance.shape)}: pass one variance per test point."
                ) from None
        if self.likelihood is None or isinstance(self.likelihood, FixedNoiseGaussianLikelihood):
            if noise is None:
                holder = "no likelihood" if self.likelihood is None else "a FixedNoiseGaussianLikelihood"
                raise ValueError(
                    f"observation_noise=True with {holder} needs the test points' noise variances: pass noise= "
                    "(shape (..., M)), or build the predictor with the model's likelihood (StreamingFit.predictor())."
                )
        with torch.no_grad():
            own = None if self.likelihood is None else likelihood_noise(self.likelihood, x, variance.shape)
        own = torch.zeros_like(variance) if own is None else own.to(variance.dtype)
        return own if noise is None else own + noise.to(variance.dtype)

    def predict_chunks(
        self, chunks: Iterable[Tensor | tuple[Tensor, Tensor]], observation_noise: bool = False
    ) -> Iterator[Prediction]:
        """:meth:`predict` for each chunk of an iterable, for test sets that do not fit in memory: chunks are inputs
        ``x``, or ``(x, noise)`` pairs with the points' noise variances (added with ``observation_noise=True``)."""
        for chunk in chunks:
            x, noise = chunk if isinstance(chunk, tuple | list) else (chunk, None)
            yield self.predict(x, observation_noise=observation_noise, noise=noise)
