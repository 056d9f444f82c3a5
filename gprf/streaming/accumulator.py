r"""Chunked accumulation of :class:`~gprf.streaming.SufficientStatistics` from a GPyTorch model's modules.

Each chunk ``(x, y[, noise])`` is featurized exactly as the model's covariance module does it (active
dimensions, lengthscales, ScaleKernel amplitudes, feature sums), centred with the mean module and weighted
with the likelihood's noise; its contribution to :math:`G, b, q, s, N` is added in the factor dtype
(:class:`gprf.settings.factor_dtype`, float64 by default) and the chunk is dropped. Peak memory is
:math:`O(\text{chunk}\cdot F + F^2)` whatever the number of points.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, _GaussianLikelihoodBase
from gpytorch.means import Mean
from torch import Tensor

from gprf._checks import check_positive_int
from gprf.features.versions import state_versions
from gprf.kernels import is_feature_kernel
from gprf.linalg import covariance_root
from gprf.settings import factor_dtype, validate_inputs
from gprf.streaming.features import likelihood_noise, model_fingerprint
from gprf.streaming.predictor import StreamingPredictor
from gprf.streaming.statistics import SufficientStatistics, fingerprint_mismatch


def _check_targets(x: Tensor, y: Tensor, name: str) -> None:
    if not torch.is_tensor(y) or not y.is_floating_point():
        raise TypeError(f"{name} must be a real floating-point tensor, got {getattr(y, 'dtype', type(y).__name__)}.")
    if y.dim() < 1 or y.size(-1) != x.size(-2):
        raise ValueError(
            f"{name} must have shape (..., n) with n = {x.size(-2)} points as in x (shape {tuple(x.shape)}), "
            f"got shape {tuple(y.shape)}."
        )
    if validate_inputs.applies_to(y) and not bool(torch.isfinite(y).all()):
        raise ValueError(f"{name} contains NaN or infinite values; remove those points before streaming them.")


def noise_variances(likelihood: _GaussianLikelihoodBase, x: Tensor, shape: torch.Size, noise: Tensor | None) -> Tensor:
    """The observation-noise variances :math:`\\sigma_i^2` the likelihood adds to a chunk of shape ``shape``.

    ``FixedNoiseGaussianLikelihood`` needs the chunk's own ``noise`` (its stored noise belongs to the
    training set it was built with), plus its learned homoscedastic noise when it has one; any other
    Gaussian likelihood gives the noise as its marginal does for these inputs.
    """
    own = likelihood_noise(likelihood, x, shape)
    if isinstance(likelihood, FixedNoiseGaussianLikelihood):
        if noise is None:
            raise ValueError(
                "FixedNoiseGaussianLikelihood needs the noise variances of each chunk: pass noise= (shape (..., n))."
            )
        _check_targets(x, noise, "noise")
        if validate_inputs.applies_to(noise) and not bool((noise > 0).all()):
            raise ValueError("noise must be positive (observation-noise variances).")
        return noise if own is None else noise + own
    if noise is not None:
        raise ValueError(
            f"noise= is only used with FixedNoiseGaussianLikelihood; {type(likelihood).__name__} provides its own "
            "noise. Drop noise= or use a FixedNoiseGaussianLikelihood."
        )
    return own


class StreamingFit:
    r"""Accumulates :class:`~gprf.streaming.SufficientStatistics` over chunks of data for fixed hyperparameters.

    Build it from a GPyTorch model (:meth:`from_model`: its ``covar_module``, ``mean_module`` and
    ``likelihood``) or from the modules themselves, feed chunks with :meth:`update` or :meth:`fit` (any
    iterable of ``(x, y)`` or ``(x, y, noise)``: a generator, a ``DataLoader``, :func:`iterate_chunks`), then
    read :attr:`statistics` or get a :meth:`predictor`. The modules are used as they are: train the
    hyperparameters first (e.g. on a subsample); the fit runs under ``torch.no_grad()``. The modules must not change
    between chunks: a chunk after ``resample_features()``, an optimizer step, ``load_state_dict`` or a gprf kernel's
    setter with other values raises (seen through the modules' version counters; GPyTorch's own setters, e.g.
    ``likelihood.noise = ...``, write past them).

    Chunks may live on any device; inputs must have the model's dtype. Targets have shape ``(..., n)``:
    batched models take ``(*batch, n)``; extra leading target dimensions share the kernel and noise (one
    :math:`F\times F` Gram matrix for all of them).

    Example:
        >>> fit = StreamingFit.from_model(model)
        >>> for x, y in loader:  # chunks that never sit in memory together
        ...     fit.update(x, y)
        >>> mean, variance = fit.predictor().predict(x_test, chunk_size=10_000)
    """

    def __init__(
        self, covar_module: Kernel, likelihood: _GaussianLikelihoodBase, mean_module: Mean | None = None
    ) -> None:
        if not isinstance(covar_module, Kernel) or not is_feature_kernel(covar_module):
            raise TypeError(
                f"covar_module must be a gprf random-feature kernel (optionally in ScaleKernel), got "
                f"{type(covar_module).__name__}; dense kernels have no finite sufficient statistics."
            )
        if not isinstance(likelihood, _GaussianLikelihoodBase):
            raise TypeError(
                f"likelihood must be a GPyTorch Gaussian likelihood (GaussianLikelihood or "
                f"FixedNoiseGaussianLikelihood), got {type(likelihood).__name__}."
            )
        if mean_module is not None and not isinstance(mean_module, Mean):
            raise TypeError(f"mean_module must be a gpytorch.means.Mean or None, got {type(mean_module).__name__}.")
        self.covar_module = covar_module
        self.likelihood = likelihood
        self.mean_module = mean_module
        self._sums: dict[str, Tensor] | None = None
        self._num_data = 0  # a host integer: counting points needs no device round trip
        self._fingerprint: Tensor | None = None
        self._input_dim: int | None = None
        self._model_state: tuple | None = None  # the modules' state versions when the fingerprint was taken

    @classmethod
    def from_model(cls, model: torch.nn.Module) -> StreamingFit:
        """Use a GPyTorch model's ``covar_module``, ``likelihood`` and (if present) ``mean_module``."""
        for name in ("covar_module", "likelihood"):
            if not hasattr(model, name):
                raise TypeError(
                    f"from_model needs a model with a {name} attribute (GPyTorch ExactGP convention); pass the "
                    "modules to StreamingFit(covar_module, likelihood, mean_module) instead."
                )
        return cls(model.covar_module, model.likelihood, getattr(model, "mean_module", None))

    # ------------------------------------------------------------------ accumulation
    @torch.no_grad()
    def update(self, x: Tensor, y: Tensor, noise: Tensor | None = None) -> StreamingFit:
        """Add one chunk: inputs ``x`` ``(..., n, d)``, targets ``y`` ``(..., n)``, optional noise ``(..., n)``."""
        if not torch.is_tensor(x):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}.")
        x = x.unsqueeze(-1) if x.dim() == 1 else x  # GPyTorch treats 1-d inputs as n points in one dimension
        if self._input_dim is not None and x.size(-1) != self._input_dim:
            raise ValueError(f"x has {x.size(-1)} columns but earlier chunks had {self._input_dim}.")
        _check_targets(x, y, "y")
        if self._sums is not None:
            self._check_model_unchanged(x)

        dtype = factor_dtype.value()
        root = covariance_root(self.covar_module, x)
        prior_mean = self.mean_module(x) if self.mean_module is not None else torch.zeros_like(y)
        variances = noise_variances(self.likelihood, x, prior_mean.shape, noise)
        # As the in-memory prediction strategy does: residual in the model dtype, sums in the factor dtype.
        residual = (y - prior_mean).to(dtype)
        phi = root.scaled_features().to(dtype)  # a chunk-sized copy: the sums need the amplitude in the rows
        variances = variances.to(dtype)
        weighted = phi / variances.unsqueeze(-1)
        chunk = {
            "gram": weighted.mT @ phi,
            "rhs": (weighted.mT @ residual.unsqueeze(-1)).squeeze(-1),
            "quadratic": (residual.square() / variances).sum(-1),
            "log_noise": variances.log().sum(-1),
        }
        if self._sums is None:
            self._start(x, chunk)
        else:
            self._add(chunk)
        self._num_data += x.size(-2)
        return self

    def _fingerprint_now(self, x: Tensor) -> Tensor:
        return model_fingerprint(self.covar_module, x.size(-1), x.dtype, x.device, self.mean_module, self.likelihood)

    def _start(self, x: Tensor, chunk: dict[str, Tensor]) -> None:
        self._input_dim = x.size(-1)
        self._fingerprint = self._fingerprint_now(x)
        self._model_state = state_versions(self.covar_module, self.likelihood, self.mean_module)
        self._sums = chunk

    def _check_model_unchanged(self, x: Tensor) -> None:
        """Raise when the model changed since the first chunk: its sums would mix two models. Free while no
        parameter, buffer or feature draw was written; after a write, the fingerprints are compared (one host
        synchronisation), so a write of the same values passes."""
        state = state_versions(self.covar_module, self.likelihood, self.mean_module)
        if state == self._model_state:
            return
        differing = fingerprint_mismatch(self._fingerprint, self._fingerprint_now(x), self._sums["gram"].size(-1))
        if differing is not None:
            raise ValueError(
                f"The model's {differing} changed after the first chunk (resample_features(), a hyperparameter set or "
                "trained): the sums so far belong to the old model. Stream every chunk with one model: start a new "
                "StreamingFit, or restore the model."
            )
        self._model_state = state

    def _add(self, chunk: dict[str, Tensor]) -> None:
        for name, value in chunk.items():
            total = self._sums[name]
            if value.shape != total.shape:
                raise ValueError(
                    f"This chunk gives {name} of shape {tuple(value.shape)}, earlier chunks {tuple(total.shape)}: "
                    "every chunk needs the same batch and target shape."
                )
            total += value

    def fit(self, chunks: Iterable) -> StreamingFit:
        """:meth:`update` with every ``(x, y)`` or ``(x, y, noise)`` of an iterable (e.g. a ``DataLoader``)."""
        if not isinstance(chunks, Iterable) or torch.is_tensor(chunks):
            raise TypeError(
                f"fit expects an iterable of (x, y) or (x, y, noise) chunks (e.g. iterate_chunks(x, y)), got "
                f"{type(chunks).__name__}; call update(x, y) for one chunk."
            )
        for chunk in chunks:
            if not isinstance(chunk, (tuple, list)) or len(chunk) not in (2, 3):
                raise TypeError(
                    "fit expects an iterable of (x, y) or (x, y, noise) tuples, got "
                    f"{type(chunk).__name__} {chunk!r:.80}."
                )
            self.update(*chunk)
        return self

    # ------------------------------------------------------------------ results
    @property
    def statistics(self) -> SufficientStatistics:
        """The statistics of all chunks so far, a snapshot that later updates do not change."""
        if self._sums is None:
            raise ValueError("No data yet: call update(x, y) or fit(chunks) first.")
        gram = self._sums["gram"]
        return SufficientStatistics(
            **{name: value.clone() for name, value in self._sums.items()},
            num_data=torch.tensor(float(self._num_data), dtype=gram.dtype, device=gram.device),
            fingerprint=self._fingerprint,
            input_dim=self._input_dim,
        )

    def predictor(self, statistics: SufficientStatistics | None = None) -> StreamingPredictor:
        """A :class:`~gprf.streaming.StreamingPredictor` for this model (likelihood included, for
        ``observation_noise=True``) from :attr:`statistics`, or from the given (e.g. all-reduced) ``statistics``."""
        statistics = self.statistics if statistics is None else statistics
        return StreamingPredictor.from_statistics(statistics, self.covar_module, self.mean_module, self.likelihood)


def iterate_chunks(
    x: Tensor, y: Tensor, noise: Tensor | None = None, chunk_size: int = 10_000
) -> Iterator[tuple[Tensor, ...]]:
    """Views ``(x[..., i:j, :], y[..., i:j][, noise[..., i:j]])`` of in-memory data, ``chunk_size`` points each."""
    check_positive_int(chunk_size, "chunk_size")
    if not torch.is_tensor(x) or x.dim() < 2:
        raise ValueError(f"x must be a tensor of shape (..., n, d), got {getattr(x, 'shape', type(x).__name__)}.")
    # Slicing would cut mismatched arrays into chunks of different lengths without a word.
    _check_targets(x, y, "y")
    if noise is not None:
        _check_targets(x, noise, "noise")
    for start in range(0, x.size(-2), chunk_size):
        stop = start + chunk_size
        chunk = (x[..., start:stop, :], y[..., start:stop])
        yield chunk if noise is None else (*chunk, noise[..., start:stop])
