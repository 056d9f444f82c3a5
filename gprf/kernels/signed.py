r"""Kernels of signed random features (GRFF/GORF, paper 001) and the indefinite kernels they approximate.

**Krein-space meaning.** An indefinite kernel :math:`k = k_+ - k_-` is the reproducing kernel of a Krein space
:math:`\mathcal K = \mathcal H_+ \ominus \mathcal H_-`, not of a Hilbert space, and it is not the covariance of any
Gaussian process. Kernel ridge regression still makes sense there (Ong et al. 2004; Oglic & Gärtner 2018): the
stationary point of the regularised risk is :math:`f(x_*) = k_*^\top(\hat K + \sigma^2 I)^{-1}y`, the same formula
as a GP posterior mean. gprf supports exactly that use: in an ``ExactGP`` with a Gaussian likelihood,
``model(x).mean`` is the Krein-space ridge solution (:math:`\sigma^2` = the likelihood noise, the ScaleKernel
outputscale scales :math:`\hat K`), and :func:`krein_ridge_mean` computes it without a model. The marginal likelihood
(log-determinant), Cholesky factors, posterior variances and sampling need a PSD covariance and raise
:class:`~gprf.exceptions.IndefiniteKernelError`; ``kernel.psd_part()`` gives a PSD kernel to use instead.
"""

from __future__ import annotations

import torch
from gpytorch import settings
from gpytorch.kernels import Kernel
from gpytorch.models.exact_prediction_strategies import DefaultPredictionStrategy
from linear_operator.operators import DiagLinearOperator, ZeroLinearOperator
from torch import Tensor

from gprf._checks import check_choice
from gprf.exceptions import IndefiniteKernelError
from gprf.features import (
    DeltaGaussianSpectrum,
    SignedRadialSpectrum,
    SignedRandomFeatures,
    SphericalPolynomialSpectrum,
    check_unit_norm,
)
from gprf.kernels.feature_kernel import FeatureKernel, same_inputs
from gprf.kernels.random_feature_kernel import RandomFeatureKernel, resolve_num_dims
from gprf.operators.signed import (
    IndefiniteDenseLinearOperator,
    IndefinitePosteriorCovariance,
    SignedRootLinearOperator,
    indefinite_error,
)

PSD_PARTS = ("positive", "absolute")


class SignedPredictionStrategy(DefaultPredictionStrategy):
    r"""Posterior mean of an indefinite-kernel model (Krein-space kernel ridge regression), no covariance.

    The mean is GPyTorch's :math:`\mu_* + K_{*X}(\hat K + \Sigma)^{-1}(y - \mu)`, with the solve done by the
    Woodbury identity on the signed root (:class:`~gprf.operators.signed.SignedRootAddedDiagLinearOperator`,
    :math:`O(NF^2)`, float64). The predictive covariance is an
    :class:`~gprf.operators.signed.IndefinitePosteriorCovariance` that raises when used (or a zero operator
    under ``gpytorch.settings.skip_posterior_variances``); fantasies raise.
    """

    def exact_predictive_covar(self, test_test_covar, test_train_covar):
        shape = test_test_covar.shape
        if settings.skip_posterior_variances.on():
            return ZeroLinearOperator(*shape, dtype=test_test_covar.dtype, device=test_test_covar.device)
        reference = torch.zeros(shape[:-1], dtype=test_test_covar.dtype, device=test_test_covar.device)
        return IndefinitePosteriorCovariance(reference)

    def get_fantasy_strategy(self, *args, **kwargs):
        raise indefinite_error("Conditioning on fantasy observations (a posterior covariance)")


class SignedRandomFeatureKernel(RandomFeatureKernel):
    r"""Signed random-feature approximation :math:`\hat k(x, y) = a(x/\ell)^\top a(y/\ell) - b(x/\ell)^\top b(y/\ell)`.

    ``kernel(X)`` is a :class:`~gprf.operators.signed.SignedRootLinearOperator` :math:`AA^\top - BB^\top`
    (never :math:`N\times N`), ``kernel(X, diag=True)`` the diagonal :math:`\lVert\mu_+\rVert - \lVert\mu_-\rVert`.
    The roots come from :class:`~gprf.features.SignedRandomFeatures` (GRFF with ``sampler="iid"``, GORF with
    ``"orthogonal"``). See the module docstring for what a GPyTorch model can do with it: posterior mean (kernel
    ridge regression) yes; marginal likelihood, variances, sampling no (:class:`~gprf.exceptions.IndefiniteKernelError`).

    Spectra defined on the unit sphere (:func:`~gprf.features.spherical_polynomial_spectrum`) take unit-norm inputs
    and have no lengthscale: it is set to 1 and frozen.

    Args:
        num_features: Frequencies per part :math:`s` (each root has ``2s`` columns).
        spectrum: The signed spectrum (:func:`~gprf.features.delta_gaussian_spectrum`,
            :func:`~gprf.features.spherical_polynomial_spectrum`).
        num_dims: Input dimension (defaults to ``ard_num_dims``, or ``len(active_dims)``).
        sampler: ``"iid"`` (GRFF) or ``"orthogonal"`` (GORF).
        seed: Seed of the feature draws.
        kwargs: GPyTorch :class:`~gpytorch.kernels.Kernel` arguments.

    Example:
        >>> spectrum = gprf.features.delta_gaussian_spectrum([1.0, -1.0], [1.0, 10.0])
        >>> covar_module = SignedRandomFeatureKernel(64, spectrum, num_dims=64, sampler="orthogonal")
    """

    def __init__(
        self,
        num_features: int,
        spectrum: SignedRadialSpectrum,
        num_dims: int | None = None,
        sampler: str = "iid",
        seed: int | None = None,
        **kwargs,
    ) -> None:
        num_dims = resolve_num_dims(num_dims, kwargs.get("ard_num_dims"), kwargs.get("active_dims"), type(self).__name__)
        feature_map = SignedRandomFeatures(
            num_dims, num_features, spectrum, sampler=sampler, batch_shape=kwargs.get("batch_shape", torch.Size()), seed=seed
        )
        super().__init__(feature_map, **kwargs)
        if spectrum.on_sphere:
            self.lengthscale = 1.0
            self.raw_lengthscale.requires_grad_(False)

    @property
    def num_features(self) -> int:
        """Frequencies per part :math:`s`."""
        return self.feature_map.num_features

    @property
    def spectrum(self) -> SignedRadialSpectrum:
        return self.feature_map.spectrum

    def signed_features(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The roots ``(A, B)`` of raw inputs (divided by the lengthscale inside)."""
        return self.feature_map(self.scale_inputs(x))

    def features(self, x: Tensor) -> Tensor:
        raise IndefiniteKernelError(
            f"{type(self).__name__} is indefinite (AA^T - BB^T) and has no real feature root: use "
            "signed_features(x) for (A, B), or psd_part() for a PSD random-feature kernel."
        )

    def _roots(self, x: Tensor) -> Tensor:
        positive, negative = self.signed_features(x)
        return torch.cat([positive, negative], dim=-1)

    def _signature(self, root: Tensor) -> Tensor:
        half = root.size(-1) // 2
        signature = torch.ones(root.size(-1), dtype=root.dtype, device=root.device)
        signature[half:] = -1.0
        return signature

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise NotImplementedError(f"{type(self).__name__} does not support last_dim_is_batch.")
        r1 = self._roots(x1)
        r2 = r1 if same_inputs(x1, x2) else self._roots(x2)
        signature = self._signature(r1)
        if diag:
            return (r1 * r2 * signature).sum(-1)
        return SignedRootLinearOperator(r1, r2, signature)

    def prediction_strategy(self, train_inputs, train_prior_dist, train_labels, likelihood):
        return SignedPredictionStrategy(train_inputs, train_prior_dist, train_labels, likelihood)

    def psd_part(self, part: str = "positive") -> SignedPartKernel:
        r"""A PSD random-feature kernel built from the same draws and lengthscale.

        ``"positive"``: :math:`a(x)^\top a(y) \approx \lVert\mu_+\rVert\tilde k_+` (the positive part of the Jordan
        decomposition); ``"absolute"``: :math:`a^\top a + b^\top b \approx \lVert\mu_+\rVert\tilde k_+ +
        \lVert\mu_-\rVert\tilde k_-`, the kernel of the Hilbert space associated with the Krein space.
        """
        return SignedPartKernel(self, part)

    def exact(self) -> Kernel:
        """:class:`DeltaGaussianKernel` or :class:`SphericalPolynomialKernel`, sharing the lengthscale."""
        spectrum = self.spectrum
        if isinstance(spectrum, SphericalPolynomialSpectrum):
            return SphericalPolynomialKernel(spectrum.a, spectrum.degree).to(self.raw_lengthscale)
        if isinstance(spectrum, DeltaGaussianSpectrum):
            exact = DeltaGaussianKernel(
                spectrum.weights.tolist(),
                spectrum.lengthscales.tolist(),
                ard_num_dims=self.ard_num_dims,
                batch_shape=self.batch_shape,
                active_dims=self.active_dims,
            )
            return self._tie_lengthscale(exact)
        raise NotImplementedError(f"No exact kernel is registered for {type(spectrum).__name__}.")

    def __add__(self, other: Kernel) -> Kernel:
        raise TypeError(
            "Sums with a signed random-feature kernel are not supported; put every component in one spectrum "
            "(delta_gaussian_spectrum takes any number of weighted Gaussians)."
        )


class SignedPartKernel(FeatureKernel):
    """A PSD part of a :class:`SignedRandomFeatureKernel` (see :meth:`SignedRandomFeatureKernel.psd_part`).

    It shares the signed kernel's feature draws and lengthscale (a view, not a copy), and is an ordinary
    gprf feature kernel: marginal likelihood in :math:`O(NF^2)`, feature-space prediction, sampling.
    """

    def __init__(self, signed_kernel: SignedRandomFeatureKernel, part: str = "positive") -> None:
        super().__init__(batch_shape=signed_kernel.batch_shape, active_dims=signed_kernel.active_dims)
        self.signed_kernel = signed_kernel
        self.part = check_choice(part, "part", PSD_PARTS)

    def features(self, x: Tensor) -> Tensor:
        positive, negative = self.signed_kernel.signed_features(x)
        return positive if self.part == "positive" else torch.cat([positive, negative], dim=-1)


def krein_ridge_mean(kernel: Kernel, train_x: Tensor, train_y: Tensor, test_x: Tensor, noise: float | Tensor) -> Tensor:
    r"""Kernel ridge regression with an indefinite kernel: :math:`k(x_*, X)(K + \sigma^2 I)^{-1}y`.

    ``kernel`` is a :class:`SignedRandomFeatureKernel` (solved by the Woodbury identity on its signed root in
    :math:`O(NF^2)`), an exact indefinite target (:class:`DeltaGaussianKernel`, :class:`SphericalPolynomialKernel`:
    dense LU), either possibly inside a ``ScaleKernel``. ``noise`` is :math:`\sigma^2` (scalar or per training
    point). The same numbers as ``model(test_x).mean`` of an ``ExactGP`` with zero mean and a Gaussian likelihood.
    """
    noise = torch.as_tensor(noise, dtype=train_x.dtype, device=train_x.device)
    if bool((noise <= 0).any()):
        raise ValueError("noise must be positive (the ridge parameter sigma^2).")
    train_covar = kernel(train_x).evaluate_kernel()
    system = train_covar + DiagLinearOperator(noise.expand(train_covar.shape[:-1]))
    weights = system.solve(train_y.unsqueeze(-1))
    return (kernel(test_x, train_x).evaluate_kernel() @ weights).squeeze(-1)


class DeltaGaussianKernel(Kernel):
    r"""Exact delta-Gaussian kernel :math:`k(x, y) = \sum_i a_i \exp(-\lVert x - y\rVert^2 / 2\sigma_i^2\ell^2)`.

    Indefinite when some :math:`a_i < 0` (paper 001 eq. 19); the mixture weights :math:`a_i` and relative scales
    :math:`\sigma_i` are fixed, the (ARD) lengthscale :math:`\ell` is a hyperparameter. Evaluations are
    :class:`~gprf.operators.signed.IndefiniteDenseLinearOperator`: usable for kernel ridge regression,
    PSD operations raise.
    """

    has_lengthscale = True

    def __init__(self, weights, lengthscales, **kwargs) -> None:
        super().__init__(**kwargs)
        self.spectrum = DeltaGaussianSpectrum(weights, lengthscales)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params):
        squared = self.covar_dist(x1 / self.lengthscale, x2 / self.lengthscale, diag=diag, square_dist=True)
        values = self.spectrum.profile_sq(squared)
        return values if diag else IndefiniteDenseLinearOperator(values)


class SphericalPolynomialKernel(Kernel):
    r"""Exact polynomial kernel on the unit sphere, :math:`k(x, y) = (1 - \lVert x - y\rVert^2/a^2)^p
    = ((1 - 2/a^2) + (2/a^2)\,x^\top y)^p` (paper 001 eq. 17).

    Inputs must have unit norm (rows are checked where :class:`gprf.settings.validate_inputs` applies, with a
    ``ValueError`` asking to normalise them); there is no lengthscale. Evaluations are
    :class:`~gprf.operators.signed.IndefiniteDenseLinearOperator`.
    """

    def __init__(self, a: float, degree: int, **kwargs) -> None:
        super().__init__(**kwargs)
        if not a > 0:
            raise ValueError(f"a must be positive, got {a!r}.")
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
            raise ValueError(f"degree must be a non-negative integer, got {degree!r}.")
        self.a, self.degree = float(a), degree

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params):
        for x in (x1, x2):
            check_unit_norm(x, type(self).__name__)
        squared = self.covar_dist(x1, x2, diag=diag, square_dist=True)
        values = (1.0 - squared / self.a**2).pow(self.degree)
        return values if diag else IndefiniteDenseLinearOperator(values)
