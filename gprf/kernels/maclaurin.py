"""Maclaurin feature kernels: dot-product kernels and the Gaussian kernel with optimized allocations."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.features import FeatureMapBase, MaclaurinAllocation, MaclaurinFeatures
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.random_feature_kernel import RandomFeatureKernel


class MaclaurinKernel(RandomFeatureKernel):
    r"""Maclaurin-feature approximation of the Gaussian, exponential or polynomial kernel of :math:`x/\ell`.

    * ``kernel="gaussian"``: GPyTorch's RBF kernel :math:`e^{-\lVert x - y\rVert^2/2\ell^2}`;
    * ``kernel="exponential"``: :math:`e^{x^\top y/\ell^2}`;
    * ``kernel="polynomial"``: :math:`(x^\top y/\ell^2 + c)^p` (``degree``, ``bias``).

    Features are :class:`~gprf.features.MaclaurinFeatures` of the scaled inputs (constant plus one
    independent sketch per degree, real or complex, ``posterior=`` as for every random-feature kernel). With
    ``allocation="optimized"`` (the default) the number of features per degree is optimized on the training
    inputs as the map sees them, :math:`X/\ell`: pass ``train_inputs`` to do it at construction and call
    :meth:`refit_allocation` when the lengthscale has moved.

    **Training recipe.** The optimized allocation depends on the lengthscale, which the marginal likelihood
    moves, and refitting changes the features (a new draw) — the loss jumps at every refit. Either

    1. fit the hyperparameters with a cheap proxy (e.g. :class:`~gprf.kernels.RandomFourierKernel` for the
       Gaussian kernel, or the exact kernel on a subsample), copy them, then ``refit_allocation(train_x)``
       once and condition (recommended), or
    2. train with the Maclaurin kernel and call ``refit_allocation(train_x)`` every ``k`` steps (e.g. every
       25–50 Adam steps) and once more at the end, then ``model.train(); model.eval()`` to rebuild the
       prediction caches.

    Args:
        num_features: Total number ``F`` of features (constant included; complex features if ``complex``).
        num_dims: Input dimension (defaults to ``ard_num_dims`` or ``len(active_dims)``).
        feature_map: A built :class:`~gprf.features.MaclaurinFeatures` instead of its arguments.
        train_inputs: Raw training inputs to optimize the allocation on at construction (optional).
        kwargs: The arguments of :class:`~gprf.features.MaclaurinFeatures` — ``kernel`` (``"gaussian"``,
            ``"exponential"``, ``"polynomial"``), ``sketch`` (``"rademacher"``, ``"gaussian"``, ``"srht"``:
            TensorSRHT, for every degree), ``complex``, ``allocation`` (``"optimized"``, ``"random"`` (Kar &
            Karnick) or a list ``[D_1, ..., D_m]``), ``degree`` and ``bias`` (polynomial kernel only; ``bias``
            defaults to 1), ``min_degree`` and ``max_degree`` (the truncation degrees searched by the optimizer),
            ``seed`` — then ``posterior=`` and GPyTorch ``Kernel`` arguments.

    Example:
        >>> base = MaclaurinKernel(512, num_dims=d, kernel="gaussian", sketch="srht", train_inputs=train_x)
        >>> kernel = ScaleKernel(base)
    """

    feature_map_class = MaclaurinFeatures

    def __init__(
        self,
        num_features: int | FeatureMapBase | None = None,
        num_dims: int | None = None,
        *,
        train_inputs: Tensor | None = None,
        **kwargs,
    ) -> None:
        super().__init__(num_features, num_dims, **kwargs)
        if train_inputs is not None:
            self.refit_allocation(train_inputs)

    def refit_allocation(self, train_inputs: Tensor, max_samples: int | None = 1000) -> MaclaurinAllocation:
        """Optimize the allocation on ``train_inputs / lengthscale`` (centred for the Gaussian kernel).

        At most ``max_samples`` rows enter the :math:`O(n^2)` pair statistics (see
        :meth:`gprf.features.MaclaurinFeatures.fit_allocation`). Redraws the features. Call
        ``model.train(); model.eval()`` afterwards if the model has already predicted (its caches hold the old
        features). With ``train_inputs=`` at construction the allocation is fitted at the *initial*
        lengthscale: set the lengthscale first or refit once it is known.
        """
        if self.active_dims is not None:
            train_inputs = train_inputs.index_select(-1, self.active_dims)
        with torch.no_grad():
            scaled = self.scale_inputs(train_inputs.to(self.lengthscale.dtype))
        if scaled.dim() > 2:
            # Batched models (e.g. one batch member per output) share one allocation: use every point.
            scaled = scaled.reshape(-1, scaled.size(-1))
        return self.feature_map.fit_allocation(scaled, max_samples=max_samples)

    def exact(self) -> Kernel:
        """RBF / exponential / polynomial kernel sharing this kernel's lengthscale parameter."""
        feature_map = self.feature_map
        arguments = dict(degree=feature_map.degree, bias=feature_map.bias) if feature_map.kernel == "polynomial" else {}
        exact = exact_target(feature_map.kernel).build(
            ard_num_dims=self.ard_num_dims, batch_shape=self.batch_shape, active_dims=self.active_dims, **arguments
        )
        return self._tie_lengthscale(exact)
