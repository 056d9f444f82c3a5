"""Random Fourier feature kernels for RBF, Matérn and other stationary kernels with a spectral law."""

from __future__ import annotations

from gpytorch.kernels import Kernel

from gprf.features import RandomFourierFeatures
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.random_feature_kernel import RandomFeatureKernel


class RandomFourierKernel(RandomFeatureKernel):
    r"""Random Fourier feature approximation of GPyTorch's RBF or Matérn kernel (or of any stationary target of the
    exact-target table, :mod:`gprf.kernels.exact.targets`).

    .. math::
        \hat k(x, y) = \frac{1}{m}\sum_{i=1}^{m}\cos\big(w_i^\top (x - y)/\ell\big), \qquad w_i \sim p,

    with :math:`p` the spectral density of the unit-lengthscale kernel (standard normal for RBF,
    multivariate Student-t with :math:`2\nu` degrees of freedom for Matérn-:math:`\nu`) and ``num_features
    = 2m`` real features :math:`[\cos(Wx/\ell), \sin(Wx/\ell)]/\sqrt m`. Samplers ``"iid"``,
    ``"orthogonal"``, ``"structured"`` (SORF, :math:`O(d\log d)` per frequency block) and ``"qmc"`` are
    described in :class:`~gprf.features.RandomFourierFeatures`.

    Training costs :math:`O(NF^2)` through the Woodbury identity; prediction :math:`O(MF^2)` through
    :class:`~gprf.prediction.FeatureSpacePredictionStrategy`.

    Args:
        num_features: Number of real features ``F`` (even).
        num_dims: Input dimension (defaults to ``ard_num_dims``, or ``len(active_dims)``).
        feature_map: A built :class:`~gprf.features.RandomFourierFeatures` instead of its arguments.
        kwargs: The arguments of :class:`~gprf.features.RandomFourierFeatures` — ``kernel`` (``"rbf"``,
            ``"matern12"``, ``"matern32"``, ``"matern52"`` or a :class:`~gprf.features.StationarySpectrum`),
            ``sampler`` (``"iid"``, ``"orthogonal"``, ``"structured"``, ``"qmc"``), ``seed`` — then ``posterior=``
            and GPyTorch :class:`~gpytorch.kernels.Kernel` arguments (``ard_num_dims``, ``batch_shape``,
            ``active_dims``, ``lengthscale_prior``, ``lengthscale_constraint``, ...).

    Example:
        >>> covar_module = ScaleKernel(RandomFourierKernel(num_features=512, num_dims=8, ard_num_dims=8))
    """

    feature_map_class = RandomFourierFeatures

    def exact(self) -> Kernel:
        """The map's stationary target (GPyTorch's ``RBFKernel``/``MaternKernel`` for the built-in ones) sharing this
        kernel's lengthscale parameter and constraint."""
        target = exact_target(self.feature_map.kernel)
        exact = target.build(ard_num_dims=self.ard_num_dims, batch_shape=self.batch_shape, active_dims=self.active_dims)
        return self._tie_lengthscale(exact)
