r"""Signed random-feature kernels (GRFF/GORF) of stationary indefinite kernels (Luo, Fang, Yang & Huang 2021).

Reference: Q. Luo, K. Fang, J. Yang, X. Huang. *Towards Unbiased Random Features with Lower Variance for Stationary
Indefinite Kernels.* International Joint Conference on Neural Networks (IJCNN), 2021.
"""

from __future__ import annotations

from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.features import (
    DeltaGaussianSpectrum,
    FeatureMapBase,
    SignedRadialSpectrum,
    SignedRandomFeatures,
    SphericalPolynomialSpectrum,
)
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.feature_map_owner import FeatureMapOwner
from gprf.kernels.signed_feature_kernel import SignedFeatureKernel
from gprf.kernels.signed_part import SignedPartKernel


class SignedRandomFeatureKernel(FeatureMapOwner, SignedFeatureKernel):
    r"""Signed random-feature approximation :math:`\hat k(x, y) = a(x/\ell)^\top a(y/\ell) - b(x/\ell)^\top b(y/\ell)`.

    ``kernel(X)`` is a :class:`~gprf.linalg.SignedRootLinearOperator` :math:`AA^\top - BB^\top`
    (never :math:`N\times N`), ``kernel(X, diag=True)`` the diagonal :math:`\lVert\mu_+\rVert - \lVert\mu_-\rVert`.
    The roots come from :class:`~gprf.features.SignedRandomFeatures` (GRFF with ``sampler="iid"``, GORF with
    ``"orthogonal"``). See :mod:`gprf.kernels.signed_feature_kernel` for what a GPyTorch model can do with it:
    posterior mean (kernel ridge regression) yes; marginal likelihood, variances, sampling no
    (:class:`~gprf.exceptions.IndefiniteKernelError`).

    Spectra defined on the unit sphere (:func:`~gprf.features.spherical_polynomial_spectrum`) take unit-norm inputs
    and have no lengthscale: it is set to 1 and frozen.

    Args:
        num_features: Frequencies per part :math:`s` (each root has ``root_dim = 2s`` columns).
        spectrum: The signed spectrum (:func:`~gprf.features.delta_gaussian_spectrum`,
            :func:`~gprf.features.spherical_polynomial_spectrum`).
        num_dims: Input dimension (defaults to ``ard_num_dims``, or ``len(active_dims)``).
        feature_map: A built :class:`~gprf.features.SignedRandomFeatures` instead of its arguments.
        kwargs: The arguments of :class:`~gprf.features.SignedRandomFeatures` — ``sampler`` (``"iid"``: GRFF,
            ``"orthogonal"``: GORF), ``seed`` — then GPyTorch :class:`~gpytorch.kernels.Kernel` arguments.

    Example:
        >>> spectrum = gprf.features.delta_gaussian_spectrum([1.0, -1.0], [1.0, 10.0])
        >>> covar_module = SignedRandomFeatureKernel(64, spectrum, num_dims=64, sampler="orthogonal")
    """

    feature_map_class = SignedRandomFeatures

    def __init__(
        self,
        num_features: int | FeatureMapBase | None = None,
        spectrum: SignedRadialSpectrum | None = None,
        num_dims: int | None = None,
        **kwargs,
    ) -> None:
        if spectrum is not None:
            kwargs["spectrum"] = spectrum
        super().__init__(num_features, num_dims, **kwargs)
        if self.spectrum.on_sphere:
            self.lengthscale = 1.0
            self.raw_lengthscale.requires_grad_(False)

    @property
    def spectrum(self) -> SignedRadialSpectrum:
        return self.feature_map.spectrum

    def signed_features(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The roots ``(A, B)`` of raw inputs (divided by the lengthscale inside)."""
        return self.feature_map(self.scale_inputs(x))

    @property
    def root_dim(self) -> int:
        """Columns of each root, ``2 * num_features``."""
        return self.feature_map.root_dim

    def psd_part(self, part: str = "positive") -> SignedPartKernel:
        r"""A PSD random-feature kernel built from the same draws and lengthscale.

        ``"positive"``: :math:`a(x)^\top a(y) \approx \lVert\mu_+\rVert\tilde k_+` (the positive part of the Jordan
        decomposition); ``"absolute"``: :math:`a^\top a + b^\top b \approx \lVert\mu_+\rVert\tilde k_+ +
        \lVert\mu_-\rVert\tilde k_-`, the kernel of the Hilbert space associated with the Krein space.
        """
        return SignedPartKernel(self, part)

    def exact(self) -> Kernel:
        """:class:`~gprf.kernels.exact.DeltaGaussianKernel` or :class:`~gprf.kernels.exact.SphericalPolynomialKernel`,
        sharing the lengthscale."""
        spectrum = self.spectrum
        if isinstance(spectrum, SphericalPolynomialSpectrum):
            exact = exact_target("spherical_polynomial").build(a=spectrum.a, degree=spectrum.degree)
            return exact.to(self.raw_lengthscale)
        if isinstance(spectrum, DeltaGaussianSpectrum):
            exact = exact_target("delta_gaussian").build(
                weights=spectrum.weights.tolist(),
                lengthscales=spectrum.lengthscales.tolist(),
                ard_num_dims=self.ard_num_dims,
                batch_shape=self.batch_shape,
                active_dims=self.active_dims,
            )
            return self._tie_lengthscale(exact)
        raise NotImplementedError(f"No exact kernel is registered for {type(spectrum).__name__}.")
