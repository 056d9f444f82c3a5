"""The base of kernels that own a random FeatureMap."""

from __future__ import annotations

from abc import abstractmethod

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf._checks import check_choice
from gprf.features import FeatureMap
from gprf.kernels.feature_kernel import FeatureKernel
from gprf.prediction import ComplexFeaturePredictionStrategy, FeatureSpacePredictionStrategy

POSTERIORS = ("real_kernel", "complex")


def resolve_num_dims(num_dims: int | None, ard_num_dims: int | None, active_dims, owner: str) -> int:
    """The input dimension a random-feature kernel is built for (its buffers need it up front)."""
    if num_dims is None:
        num_dims = ard_num_dims
    if num_dims is None and active_dims is not None:
        num_dims = len(active_dims)
    if num_dims is None:
        raise ValueError(
            f"{owner} needs the input dimension to draw its features at construction: pass num_dims=d "
            "(or ard_num_dims=d)."
        )
    if ard_num_dims is not None and ard_num_dims not in (1, num_dims):
        raise ValueError(f"{owner}: ard_num_dims={ard_num_dims} does not match num_dims={num_dims}.")
    return num_dims


class RandomFeatureKernel(FeatureKernel):
    r"""A kernel approximated by a random :class:`~gprf.features.FeatureMap` of lengthscale-scaled inputs.

    :math:`\hat k(x, y) = \mathrm{Re}\,\Phi(x/\ell)\Phi(y/\ell)^H`, evaluated through the real root
    ``feature_map.real_features(x / lengthscale)`` so that gradients reach the (ARD) lengthscale. The
    feature draws are buffers with the kernel's ``batch_shape`` (BoTorch uses ``batch_shape=[m]`` for
    ``m`` outputs): they follow ``.to()``, ``state_dict`` and pickling, and stay fixed during training
    (:meth:`resample_features` redraws them).

    Wrap in :class:`~gpytorch.kernels.ScaleKernel` for an amplitude, as with any GPyTorch kernel.

    Complex feature maps offer two posteriors, chosen with ``posterior``:

    * ``"real_kernel"`` (default): the ordinary GP with the real kernel :math:`\mathrm{Re}\,\Phi\Phi^H`
      through the real root :math:`[\mathrm{Re}\,\Phi, \mathrm{Im}\,\Phi]`
      (:class:`~gprf.prediction.FeatureSpacePredictionStrategy`);
    * ``"complex"``: the real part of the complex-feature GP posterior (paper 000, App. D,
      :class:`~gprf.prediction.ComplexFeaturePredictionStrategy`). The marginal likelihood used for training
      is the real-part kernel's either way. For real feature maps both coincide.
    """

    has_lengthscale = True

    def __init__(self, feature_map: FeatureMap, posterior: str = "real_kernel", **kwargs) -> None:
        super().__init__(**kwargs)
        self.posterior = posterior
        # A map without batch dimensions is shared by every batch member (one draw for all outputs/classes).
        if feature_map.batch_shape not in (torch.Size(), self.batch_shape):
            raise ValueError(
                f"feature_map.batch_shape {tuple(feature_map.batch_shape)} differs from the kernel's "
                f"batch_shape {tuple(self.batch_shape)}; use a map with the kernel's batch_shape (independent "
                "draws per batch member) or without batch dimensions (one shared draw)."
            )
        self.feature_map = feature_map

    @property
    def posterior(self) -> str:
        """``"real_kernel"`` or ``"complex"`` (validated on assignment too)."""
        return self._posterior

    @posterior.setter
    def posterior(self, value: str) -> None:
        self._posterior = check_choice(value, "posterior", POSTERIORS)

    @property
    def num_features(self) -> int:
        """Number of columns of the real root."""
        return self.feature_map.num_real_features

    def _set_lengthscale(self, value: Tensor | float) -> None:
        value = torch.as_tensor(value)
        if not bool((value > 0).all()):
            raise ValueError(f"lengthscale must be positive, got {value}.")
        super()._set_lengthscale(value)

    def scale_inputs(self, x: Tensor) -> Tensor:
        """``x / lengthscale`` (what the feature map sees)."""
        if x.dtype != self.lengthscale.dtype:
            raise TypeError(
                f"{type(self).__name__} has dtype {self.lengthscale.dtype} but got inputs of dtype {x.dtype}; "
                "convert the inputs or call .to(dtype) on the model."
            )
        return x / self.lengthscale

    def features(self, x: Tensor) -> Tensor:
        """Real root of raw inputs: ``feature_map.real_features(x / lengthscale)``."""
        return self.feature_map.real_features(self.scale_inputs(x))

    def share_features(self) -> RandomFeatureKernel:
        """Use one feature draw (batch member 0's) for every batch member, in place; returns ``self``.

        Batch members (outputs, classes) keep their own hyperparameters but share the random features, so
        their approximation errors are alike and the feature buffers are ``batch_shape`` times smaller.
        """
        if len(self.feature_map.batch_shape) > 0:
            first = self.feature_map.batch_index((0,) * len(self.feature_map.batch_shape))
            self.feature_map = first._map_random_buffers(torch.Tensor.clone, torch.Size())
        return self

    def resample_features(self, generator: torch.Generator | None = None) -> None:
        """Redraw the random features in place (see :meth:`gprf.features.FeatureMap.resample`)."""
        self.feature_map.resample(generator)

    def prediction_strategy(self, train_inputs, train_prior_dist, train_labels, likelihood):
        if self.posterior == "complex" and self.feature_map.is_complex:
            return ComplexFeaturePredictionStrategy(
                train_inputs,
                train_prior_dist,
                train_labels,
                likelihood,
                num_complex_features=self.feature_map.num_features,
            )
        return FeatureSpacePredictionStrategy(train_inputs, train_prior_dist, train_labels, likelihood)

    @abstractmethod
    def exact(self) -> Kernel:
        """The exact target kernel, sharing this kernel's hyperparameters (for metrics and comparisons)."""

    def _tie_lengthscale(self, exact: Kernel) -> Kernel:
        """Make ``exact`` share this kernel's lengthscale parameter and constraint (one source of truth)."""
        exact.raw_lengthscale = self.raw_lengthscale
        exact.register_constraint("raw_lengthscale", self.raw_lengthscale_constraint)
        return exact.to(self.raw_lengthscale)

    # Keep the feature draws aligned with the batch of the hyperparameters.
    def __getitem__(self, index) -> Kernel:
        new_kernel = super().__getitem__(index)
        if new_kernel is not self:
            new_kernel.feature_map = self.feature_map.batch_index(index if isinstance(index, tuple) else (index,))
        return new_kernel

    def expand_batch(self, *sizes) -> Kernel:
        new_kernel = super().expand_batch(*sizes)
        if new_kernel is not self and len(self.feature_map.batch_shape) > 0:
            new_kernel.feature_map = self.feature_map.batch_expand(new_kernel.batch_shape)
        return new_kernel
