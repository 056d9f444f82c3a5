"""Polynomial sketch kernels (real and complex) in GPyTorch."""

from __future__ import annotations

from gpytorch.kernels import Kernel

from gprf.features import PolynomialSketch
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.random_feature_kernel import RandomFeatureKernel


class PolynomialSketchKernel(RandomFeatureKernel):
    r"""Random-feature approximation of :math:`k(x, y) = (x^\top y/\ell^2 + c)^p`.

    Features are a :class:`~gprf.features.PolynomialSketch` of :math:`x/\ell` (Gaussian, Rademacher,
    TensorSRHT or TensorSketch; real or complex; Wacker, Kanagawa & Filippone 2024, §3–4). A complex sketch with
    ``num_features = D`` gives the real-part kernel :math:`\mathrm{Re}\,\Phi\Phi^H` through the real root
    :math:`[\mathrm{Re}\,\Phi, \mathrm{Im}\,\Phi]` with :math:`2D` columns, so training and prediction stay
    real (:math:`O(N(2D)^2)`). Wrap in ``ScaleKernel`` for an amplitude.

    Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal
    of Machine Learning Research, 2024 (arXiv:2201.08712).

    Args:
        num_features: Number ``D`` of sketch features (complex features for ``complex=True``).
        num_dims: Input dimension (defaults to ``ard_num_dims`` or ``len(active_dims)``).
        feature_map: A built :class:`~gprf.features.PolynomialSketch` instead of its arguments.
        kwargs: The arguments of :class:`~gprf.features.PolynomialSketch` — ``degree`` :math:`p \ge 0` (default 2),
            ``sketch`` (``"gaussian"``, ``"rademacher"``, ``"srht"``, ``"tensorsketch"``), ``complex`` (the
            real-part kernel), ``bias`` :math:`c \ge 0` (a constant: with ``ScaleKernel`` and the lengthscale any
            :math:`c > 0` spans the same kernels, see :class:`~gprf.kernels.exact.ScaledPolynomialKernel`),
            ``seed`` — then ``posterior="real_kernel"|"complex"`` (see :class:`~gprf.kernels.RandomFeatureKernel`)
            and GPyTorch ``Kernel`` arguments (``ard_num_dims``, ``batch_shape``, priors, ...).

    Example:
        >>> covar_module = ScaleKernel(PolynomialSketchKernel(512, num_dims=8, degree=3, sketch="srht", complex=True))
    """

    feature_map_class = PolynomialSketch

    def exact(self) -> Kernel:
        """:class:`~gprf.kernels.exact.ScaledPolynomialKernel` sharing this kernel's lengthscale parameter."""
        feature_map = self.feature_map
        exact = exact_target("polynomial").build(
            degree=feature_map.degree,
            bias=feature_map.bias,
            ard_num_dims=self.ard_num_dims,
            batch_shape=self.batch_shape,
            active_dims=self.active_dims,
        )
        return self._tie_lengthscale(exact)
