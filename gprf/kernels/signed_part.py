"""The positive semi-definite parts of a signed random-feature kernel, as ordinary feature kernels."""

from __future__ import annotations

import torch
from torch import Tensor

from gprf._checks import check_choice
from gprf.kernels.feature_kernel import FeatureKernel
from gprf.kernels.signed_feature_kernel import SignedFeatureKernel

PSD_PARTS = ("positive", "absolute")


class SignedPartKernel(FeatureKernel):
    """A PSD part of a :class:`SignedRandomFeatureKernel` (see :meth:`SignedRandomFeatureKernel.psd_part`).

    It shares the signed kernel's feature draws and lengthscale (a view, not a copy), and is an ordinary
    gprf feature kernel: marginal likelihood in :math:`O(NF^2)`, feature-space prediction, sampling.
    """

    def __init__(self, signed_kernel: SignedFeatureKernel, part: str = "positive") -> None:
        super().__init__(batch_shape=signed_kernel.batch_shape, active_dims=signed_kernel.active_dims)
        self.signed_kernel = signed_kernel
        self.part = check_choice(part, "part", PSD_PARTS)

    def features(self, x: Tensor) -> Tensor:
        positive, negative = self.signed_kernel.signed_features(x)
        return positive if self.part == "positive" else torch.cat([positive, negative], dim=-1)

    @property
    def root_dim(self) -> int:
        return self.signed_kernel.root_dim * (1 if self.part == "positive" else 2)

    # No parameters of its own to carry a batch shape: index and expand the signed kernel it views.
    def __getitem__(self, index) -> SignedPartKernel:
        return SignedPartKernel(self.signed_kernel[index], self.part)

    def expand_batch(self, *sizes) -> SignedPartKernel:
        return SignedPartKernel(self.signed_kernel.expand_batch(*sizes), self.part)
