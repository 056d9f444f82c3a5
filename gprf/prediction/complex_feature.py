r"""The real part of the complex-feature GP posterior (Wacker, Kanagawa & Filippone 2024, App. D).

Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of
Machine Learning Research, 2024 (arXiv:2201.08712).
"""

from __future__ import annotations

import torch
from torch import Tensor

from gprf.linalg import FeatureRoot
from gprf.prediction.feature_space import FeatureSpacePredictionStrategy
from gprf.settings import factor_dtype


class ComplexFeaturePredictionStrategy(FeatureSpacePredictionStrategy):
    r"""The real part of the complex-feature GP posterior (Wacker, Kanagawa & Filippone 2024, App. D.2–D.3,
    eqs. 84–90).

    A complex feature map :math:`\Phi` defines the Hermitian kernel :math:`\hat k = \Phi\Phi^H` and a proper
    complex GP. Conditioning it on real data with Gaussian noise :math:`\Sigma` and keeping real parts gives

    .. math::
        \mu(x_*) = \mathrm{Re}\big(\phi_*\,C^{-1}\Phi^H\Sigma^{-1}(y - m)\big) + m(x_*), \qquad
        \mathrm{cov}(x_*, x_*') = \mathrm{Re}\big(\phi_*\,C^{-1}\phi_*'^H\big), \qquad
        C = I + \Phi^H\Sigma^{-1}\Phi,

    with the ScaleKernel amplitude in :math:`\Phi` (kept apart, as for real features). The Hermitian
    :math:`F\times F` capacitance is formed and factored in the complex dtype of
    :class:`gprf.settings.factor_dtype` (linear_operator has no complex support, so the complex algebra stays
    here and GPyTorch receives real tensors and real low-rank roots :math:`[\mathrm{Re}\,B^H, \mathrm{Im}\,B^H]`,
    :math:`B = L^{-1}\phi_*^H`). :math:`\Phi` is read back from the kernel's real root
    :math:`[\mathrm{Re}\,\Phi, \mathrm{Im}\,\Phi]`. The marginal likelihood (training) uses the real-part kernel.
    Costs: forming :math:`C` takes about 4 real :math:`NF^2` products against :math:`4NF^2`-equivalent for real
    features with :math:`2F` columns, and its Cholesky 4× the real :math:`F\times F` one against 8× for
    :math:`2F` real features (ibid., §D.3).

    Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of
    Machine Learning Research, 2024 (arXiv:2201.08712).
    """

    points_route = False  # the complex posterior is not the real-root one the points route computes
    adopts_root_posterior = False  # its capacitance is of the complex features

    def _weight_features(self, root: FeatureRoot) -> Tensor:
        columns = root.num_columns
        if columns % 2:
            raise ValueError(
                f"posterior='complex' expects the real root [Re Phi, Im Phi] of a complex feature map (an even "
                f"number of columns), got {columns} columns."
            )
        features = root.features.to(factor_dtype.value())
        return torch.complex(features[..., : columns // 2], features[..., columns // 2 :])

    def _training_features(self, root: FeatureRoot) -> Tensor:
        return self._weight_features(root)

    def _fallback(self, reason: str) -> None:
        # The fallback would silently answer with the real-part-kernel posterior instead: refuse.
        raise ValueError(
            f"posterior='complex' needs a random-feature kernel (alone or in ScaleKernel) and a Gaussian "
            f"likelihood with diagonal noise ({reason}); use posterior='real_kernel' otherwise."
        )
