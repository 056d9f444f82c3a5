"""The base of kernels whose real feature root comes from a random :class:`~gprf.features.FeatureMap`."""

from __future__ import annotations

from torch import Tensor

from gprf._checks import check_choice
from gprf.features import FeatureMapBase
from gprf.kernels.feature_kernel import FeatureKernel
from gprf.kernels.feature_map_owner import FeatureMapOwner
from gprf.prediction import ComplexFeaturePredictionStrategy, FeatureSpacePredictionStrategy

POSTERIORS = ("real_kernel", "complex")


class RandomFeatureKernel(FeatureMapOwner, FeatureKernel):
    r"""A kernel approximated by a random :class:`~gprf.features.FeatureMap` of lengthscale-scaled inputs.

    :math:`\hat k(x, y) = \mathrm{Re}\,\Phi(x/\ell)\Phi(y/\ell)^H`, evaluated through the real root
    ``feature_map.real_features(x / lengthscale)`` so that gradients reach the (ARD) lengthscale. The feature draws are
    buffers with the kernel's ``batch_shape`` (BoTorch uses ``batch_shape=[m]`` for ``m`` outputs): they follow
    ``.to()``, ``state_dict`` and pickling, and stay fixed during training
    (:meth:`~gprf.kernels.FeatureMapOwner.resample_features` redraws them). ``num_features`` is the map's number of
    features :math:`F` (complex features for complex maps), ``root_dim`` the number of columns of the real root
    (:math:`2F` then).

    Wrap in :class:`~gpytorch.kernels.ScaleKernel` for an amplitude, as with any GPyTorch kernel.

    Complex feature maps offer two posteriors, chosen with ``posterior``:

    * ``"real_kernel"`` (default): the ordinary GP with the real kernel :math:`\mathrm{Re}\,\Phi\Phi^H`
      through the real root :math:`[\mathrm{Re}\,\Phi, \mathrm{Im}\,\Phi]`
      (:class:`~gprf.prediction.FeatureSpacePredictionStrategy`);
    * ``"complex"``: the real part of the complex-feature GP posterior (Wacker, Kanagawa & Filippone 2024,
      App. D; :class:`~gprf.prediction.ComplexFeaturePredictionStrategy`). The marginal likelihood used for
      training is the real-part kernel's either way. For real feature maps both coincide.

    Construction (see :class:`~gprf.kernels.FeatureMapOwner`): ``Kernel(feature_map=map, **kernel_kwargs)`` owns a
    built map; a family with a :attr:`~gprf.kernels.FeatureMapOwner.feature_map_class` also builds it from the
    map's arguments, ``Kernel(num_features, num_dims, **map_and_kernel_kwargs)``.

    Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal
    of Machine Learning Research, 2024 (arXiv:2201.08712).
    """

    def __init__(
        self,
        num_features: int | FeatureMapBase | None = None,
        num_dims: int | None = None,
        *,
        feature_map: FeatureMapBase | None = None,
        posterior: str = "real_kernel",
        **kwargs,
    ) -> None:
        super().__init__(num_features, num_dims, feature_map=feature_map, **kwargs)
        self.posterior = posterior

    @property
    def posterior(self) -> str:
        """``"real_kernel"`` or ``"complex"`` (validated on assignment too)."""
        return self._posterior

    @posterior.setter
    def posterior(self, value: str) -> None:
        self._posterior = check_choice(value, "posterior", POSTERIORS)

    @property
    def root_dim(self) -> int:
        """Number of columns of the real root (``num_features``, doubled for complex maps)."""
        return self.feature_map.root_dim

    def features(self, x: Tensor) -> Tensor:
        """Real root of raw inputs: ``feature_map.real_features(x / lengthscale)``."""
        return self.feature_map.real_features(self.scale_inputs(x))

    def prediction_strategy(self, train_inputs, train_prior_dist, train_labels, likelihood):
        if self.posterior == "complex" and self.feature_map.is_complex:
            return ComplexFeaturePredictionStrategy(train_inputs, train_prior_dist, train_labels, likelihood)
        return FeatureSpacePredictionStrategy(train_inputs, train_prior_dist, train_labels, likelihood)
