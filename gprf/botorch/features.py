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
from botorch.sampling.pathwise.features.generators import GenKernelFeatures
from gpytorch.kernels import Kernel
from torch import Size, Tensor

from gprf.kernels import FeatureKernel, RandomFeatureKernel


class IdentityTransform(torch.nn.Module):
    """The identity, as an output transform BoTorch can chain with (it composes, never tests for ``None``)."""

    def forward(self, values: Tensor) -> Tensor:
        return values


def check_pathwise_kernel(kernel: Kernel) -> None:
    """Raise if sample paths from ``kernel``'s real root would not follow the model's posterior."""
    if isinstance(kernel, RandomFeatureKernel) and kernel.posterior == "complex" and kernel.feature_map.is_complex:
        raise NotImplementedError(
            f"{type(kernel).__name__} uses posterior='complex', whose predictive is not the posterior of a "
            "real Gaussian feature model, so pathwise samples cannot follow it; set posterior='real_kernel' "
            "(the default) for pathwise sampling."
        )


class KernelRootFeatureMap(PathwiseFeatureMap):
    r"""BoTorch feature map :math:`\phi(x) = r(x)`: the real feature root of a gprf kernel at raw inputs.

    The kernel applies its own lengthscale (so gradients and later hyperparameter changes are seen) and
    its ``active_dims``; the map adds nothing random. ``output_transform`` is the identity so that
    BoTorch's ``ScaleKernel`` generator can chain the outputscale onto it.

    Args:
        kernel: A gprf :class:`~gprf.kernels.FeatureKernel`.
    """

    def __init__(self, kernel: FeatureKernel) -> None:
        check_pathwise_kernel(kernel)
        super().__init__()
        self.kernel = kernel
        self.input_transform = None
        self.output_transform = IdentityTransform()

    def forward(self, x: Tensor) -> Tensor:
        active_dims = self.kernel.active_dims
        if active_dims is not None:
            x = x.index_select(-1, active_dims)
        return self.kernel.features(x)

    @property
    def num_outputs(self) -> int:
        return self.kernel.num_features

    @property
    def batch_shape(self) -> Size:
        return self.kernel.batch_shape


@GenKernelFeatures.register(FeatureKernel)
def _gen_kernel_root_features(kernel: FeatureKernel, *, num_inputs: int, num_outputs: int) -> KernelRootFeatureMap:
    # ``num_outputs`` (BoTorch's requested feature count) is ignored on purpose: the model's covariance is
    # fixed by the kernel's own features, and drawing a different number would sample another model.
    return KernelRootFeatureMap(kernel)
