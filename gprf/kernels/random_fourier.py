"""Random Fourier feature kernels for RBF and Matérn kernels."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel, MaternKernel, RBFKernel

from gprf.features import RandomFourierFeatures
from gprf.kernels.feature_map_owner import resolve_num_dims
from gprf.kernels.random_feature_kernel import RandomFeatureKernel

_MATERN_NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


class RandomFourierKernel(RandomFeatureKernel):
    r"""Random Fourier feature approximation of GPyTorch's RBF or Matérn kernel.

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
        kernel: ``"rbf"``, ``"matern12"``, ``"matern32"`` or ``"matern52"``.
        sampler: ``"iid"``, ``"orthogonal"``, ``"structured"`` or ``"qmc"``.
        seed: Seed of the feature draws (``None``: from the global RNG).
        kwargs: GPyTorch :class:`~gpytorch.kernels.Kernel` arguments (``ard_num_dims``, ``batch_shape``,
            ``active_dims``, ``lengthscale_prior``, ``lengthscale_constraint``, ...).

    Example:
        >>> covar_module = ScaleKernel(RandomFourierKernel(num_features=512, num_dims=8, ard_num_dims=8))
    """

    def __init__(
        self,
        num_features: int,
        num_dims: int | None = None,
        kernel: str = "rbf",
        sampler: str = "iid",
        seed: int | None = None,
        **kwargs,
    ) -> None:
        num_dims = resolve_num_dims(
            num_dims, kwargs.get("ard_num_dims"), kwargs.get("active_dims"), "RandomFourierKernel"
        )
        feature_map = RandomFourierFeatures(
            num_dims,
            num_features,
            kernel=kernel,
            sampler=sampler,
            batch_shape=kwargs.get("batch_shape", torch.Size()),
            seed=seed,
        )
        super().__init__(feature_map, **kwargs)

    def exact(self) -> Kernel:
        """GPyTorch's ``RBFKernel``/``MaternKernel`` sharing this kernel's lengthscale parameter and constraint."""
        kwargs = dict(ard_num_dims=self.ard_num_dims, batch_shape=self.batch_shape, active_dims=self.active_dims)
        name = self.feature_map.kernel
        exact = RBFKernel(**kwargs) if name == "rbf" else MaternKernel(nu=_MATERN_NU[name], **kwargs)
        return self._tie_lengthscale(exact)
