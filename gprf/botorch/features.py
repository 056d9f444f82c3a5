"""Hand BoTorch's pathwise samplers the kernel's own frozen random features.

BoTorch draws prior sample paths :math:`f(x) = \\phi(x)^\\top w`, :math:`w \\sim N(0, I)`, from a feature map
produced by ``GenKernelFeatures`` for the model's kernel. Its built-in generators draw *new* Fourier
features for RBF/Matérn kernels and raise ``NotImplementedError`` for anything else. For a gprf kernel the
finite model *is* the feature model, so the right map is the kernel's own root :math:`r(x)` with
:math:`k(x, y) = r(x)^\\top r(y)`: prior paths then have exactly the covariance of the model being fitted
(not a second approximation of it).
"""

from __future__ import annotations

import torch
from botorch.sampling.pathwise.features import FeatureMap as PathwiseFeatureMap
from gpytorch.kernels import Kernel
from torch import Size, Tensor

from gprf.botorch.frozen import frozen_copy
from gprf.kernels import RandomFeatureKernel, is_feature_expression, root_columns, unwrap_scale_kernel
from gprf.linalg import covariance_root


class IdentityTransform(torch.nn.Module):
    """The identity, as an output transform BoTorch can chain with (it composes, never tests for ``None``)."""

    def forward(self, values: Tensor) -> Tensor:
        return values


def check_pathwise_kernel(kernel: Kernel) -> None:
    """Raise unless sample paths from ``kernel``'s real root follow the model's posterior."""
    if not is_feature_expression(kernel):
        raise TypeError(
            f"{type(unwrap_scale_kernel(kernel)).__name__} has no finite feature map; gprf's pathwise sampling needs "
            "a gprf random-feature kernel (optionally in ScaleKernel, or in sums and products of such kernels)."
        )
    base = unwrap_scale_kernel(kernel)
    if isinstance(base, RandomFeatureKernel) and base.posterior == "complex" and base.feature_map.is_complex:
        raise NotImplementedError(
            f"{type(base).__name__} uses posterior='complex', whose predictive is not the posterior of a "
            "real Gaussian feature model, so pathwise samples cannot follow it; set posterior='real_kernel' "
            "(the default) for pathwise sampling."
        )


class KernelRootFeatureMap(PathwiseFeatureMap):
    r"""BoTorch feature map :math:`\phi(x) = \sqrt s\,r(x)`: the feature root of a gprf covariance at raw inputs.

    ``kernel`` is a gprf :class:`~gprf.kernels.FeatureKernel`, alone or inside ``ScaleKernel`` (amplitude
    :math:`s`), or GPyTorch's sums and products of such kernels (:func:`~gprf.kernels.is_feature_expression`). The
    map keeps a frozen copy of ``kernel`` as it is at construction — its random feature draws and
    its hyperparameters (:func:`~gprf.botorch.frozen.frozen_copy`) — so that sample paths built on it keep the draw
    they were made with: a later ``resample_features()`` or hyperparameter change of ``kernel`` does not reach them
    (build a new map, or draw new paths, to follow it). It evaluates the copy as GPyTorch does (``active_dims``,
    lengthscales) and reads the root back through :func:`gprf.linalg.covariance_root`; nothing random is added.
    ``output_transform`` is the identity, so that a caller can chain an outputscale onto it as BoTorch's
    generators do. With ``num_inputs`` (the columns of the model's transformed training inputs), points of another
    width are refused with an error that says so.
    """

    def __init__(self, kernel: Kernel, num_inputs: int | None = None) -> None:
        check_pathwise_kernel(kernel)
        super().__init__()
        self.kernel = frozen_copy(kernel)
        self.num_inputs = num_inputs
        self.input_transform = None
        self.output_transform = IdentityTransform()

    def forward(self, x: Tensor) -> Tensor:
        if self.num_inputs is not None and (x.dim() < 2 or x.size(-1) != self.num_inputs):
            raise ValueError(
                f"Sample paths of this model take points of shape (..., n, {self.num_inputs}) (the width of its "
                f"training inputs), got {tuple(x.shape)}; pass candidates with {self.num_inputs} columns."
            )
        return covariance_root(self.kernel, x).scaled_features()

    @property
    def num_outputs(self) -> int:
        return root_columns(self.kernel)

    @property
    def batch_shape(self) -> Size:
        return self.kernel.batch_shape


def gen_root_features(kernel: Kernel, num_inputs: int, num_outputs: int) -> KernelRootFeatureMap:
    """BoTorch's feature generator (its ``GenKernelFeatures`` signature) for gprf kernels, alone or inside
    ``ScaleKernel`` (then the whole module's root: amplitude and the wrapper's ``active_dims`` included, read by the one
    decoder).

    ``num_outputs`` (BoTorch's requested feature count) is ignored on purpose: the model's covariance is fixed by
    the kernel's own features, and drawing a different number would sample another model. So is ``num_inputs``:
    BoTorch passes the width after ``active_dims``, while this map reads the full points (the kernel selects).
    """
    return KernelRootFeatureMap(kernel)
