r"""Matheron paths of gprf models drawn in weight space: memory that does not grow with points times paths.

BoTorch's ``draw_matheron_paths`` evaluates every prior path at every training input (:math:`S\times N` values) and
hands them to the Gaussian update, which forms residuals and observation-noise draws of the same size. For a gprf
model the prior path is :math:`f = \tilde\Phi w` with the kernel's own scaled features
:math:`\tilde\Phi = \sqrt s\,R`, so the update weights of Matheron's rule

.. math::
    v = C^{-1}\tilde\Phi^\top\Sigma^{-1}(y - \tilde\Phi w - \varepsilon) = C^{-1}(p - Gw - \xi), \qquad
    G = \tilde\Phi^\top\Sigma^{-1}\tilde\Phi,\; C = I + G,\; p = \tilde\Phi^\top\Sigma^{-1}y,

need only :math:`F`-dimensional quantities: :math:`\xi = \tilde\Phi^\top\Sigma^{-1}\varepsilon` with
:math:`\varepsilon \sim N(0, \Sigma)` is distributed as :math:`N(0, G)` and is drawn exactly in feature space from
the eigendecomposition :math:`G = V\Lambda V^\top` as :math:`\xi = V\Lambda^{1/2}V^\top z`,
:math:`z \sim N(0, I_F)`.
:math:`G` and :math:`p` are summed over row chunks at any :math:`N` (:meth:`gprf.settings.feature_chunk_size.chunked`),
and :math:`G = LL^\top - I` is read back from the Cholesky factor :math:`L` of :math:`C`. Work
:math:`O(NF^2 + F^3 + SF^2)`, memory :math:`O(\text{chunk}\cdot F + F^2 + SF)`; the :math:`S` paths are the columns
of one solve. The posterior paths have the same distribution as with the update of sampled values at the
training inputs (:func:`~gprf.botorch.weight_space_update`); Matheron's rule for pathwise conditioning is that of
Wilson et al. (2020, 2021).

References:
    * J. T. Wilson, V. Borovitskiy, A. Terenin, P. Mostowsky, M. P. Deisenroth. *Efficiently Sampling Functions from
      Gaussian Process Posteriors.* International Conference on Machine Learning (ICML), 2020.
    * J. T. Wilson, V. Borovitskiy, A. Terenin, P. Mostowsky, M. P. Deisenroth. *Pathwise Conditioning of Gaussian
      Processes.* Journal of Machine Learning Research 22, 2021.
"""

from __future__ import annotations

import torch
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.utils import get_output_transform, get_train_inputs, get_train_targets
from gpytorch.models import ExactGP
from torch import Size, Tensor

from gprf.botorch.frozen import frozen_copy
from gprf.botorch.paths import SharedFeatureMatheronPath
from gprf.botorch.prior import kernel_feature_paths
from gprf.botorch.update import check_update_kernel, observation_noise
from gprf.kernels import root_columns
from gprf.linalg import CapacitanceFactor, FeatureRoot, choose_route, covariance_root, factor_points
from gprf.settings import feature_chunk_size


def weight_space_matheron_paths(model: ExactGP, sample_shape: Size) -> SharedFeatureMatheronPath:
    r"""Posterior sample paths of ``model`` by Matheron's rule with the update in weight space (module docstring).

    Args:
        model: An ``ExactGP`` (e.g. BoTorch's ``SingleTaskGP``) whose ``covar_module`` is a gprf feature kernel,
            optionally inside ``ScaleKernel``, with a Gaussian likelihood (homoscedastic, fixed or batched noise).
        sample_shape: Sizes of the sample dimensions.

    Returns:
        BoTorch's ``MatheronPath`` (a :class:`~gprf.botorch.paths.SharedFeatureMatheronPath`): prior paths
        :math:`x \mapsto \mu(x) + \tilde\phi(x)^\top w` (:func:`~gprf.botorch.prior.kernel_feature_paths`) and
        update paths :math:`x \mapsto \tilde\phi(x)^\top v` on the same feature map, weights
        ``sample_shape x batch x F``, with the model's input and output transforms; what ``draw_matheron_paths``
        returns for other models, and featurising its inputs once per evaluation.
    """
    prior_paths = matheron_prior_paths(model, sample_shape)
    with torch.no_grad():  # a drawn path keeps its values (gprf.botorch.frozen)
        root, residuals = training_root(model)
        weights = feature_space_update_weights(root, residuals, prior_paths.weight)
    return matheron_paths(model, prior_paths, weights)


def matheron_prior_paths(model: ExactGP, sample_shape: Size) -> GeneralizedLinearPath:
    """The prior part of :func:`weight_space_matheron_paths` (the one random draw besides the update's noise)."""
    check_update_kernel(model.covar_module)
    # The outcome untransform applies to the sum of the two paths, not to the prior path alone.
    return kernel_feature_paths(model, sample_shape, untransform_outcomes=False)


def matheron_paths(model: ExactGP, prior_paths: GeneralizedLinearPath, weights: Tensor) -> SharedFeatureMatheronPath:
    """The Matheron paths of ``prior_paths`` and update ``weights`` (:func:`capacitance_update_weights`)."""
    update_paths = GeneralizedLinearPath(
        feature_map=prior_paths.feature_map,
        weight=weights.to(prior_paths.weight.dtype),
        input_transform=prior_paths.input_transform,
        is_ensemble=prior_paths.is_ensemble,
    )
    return SharedFeatureMatheronPath(
        prior_paths=prior_paths, update_paths=update_paths, output_transform=frozen_copy(get_output_transform(model))
    )


def training_root(model: ExactGP) -> tuple[FeatureRoot, Tensor]:
    r"""The root of the model's transformed training inputs with its noise variances, and the residuals
    :math:`y - \mu(X)`: the prior paths carry the model's mean function as their bias
    (:func:`~gprf.botorch.prior.kernel_feature_paths`), so the residual of Matheron's rule is
    :math:`y - \mu(X) - \tilde\Phi w - \varepsilon` and the mean is taken off the targets before they are projected.
    """
    (points,) = get_train_inputs(model, transformed=True)
    targets = get_train_targets(model, transformed=True)
    kernel = model.covar_module
    # Only the chunked sums are needed and nothing is differentiated: chunking at any N costs nothing extra and keeps
    # the N x F root out of memory.
    with feature_chunk_size.chunked(root_columns(kernel), points.device):
        root = covariance_root(kernel, points)
    noise = observation_noise(model.likelihood, points)
    mean = model.mean_module(points) if getattr(model, "mean_module", None) is not None else 0.0
    return root.with_noise(noise), targets - mean


def feature_space_update_weights(root: FeatureRoot, residuals: Tensor, prior_weights: Tensor) -> Tensor:
    r""":math:`C^{-1}(p - Gw - \xi)` (module docstring) in the factor dtype, for any model whose training covariance is
    a feature root: ``root`` with its noise variances, ``residuals`` the targets minus the prior mean ``(*batch, N)``,
    ``prior_weights`` ``sample_shape x batch x F``. Returns the update weights, shaped like ``prior_weights``.

    The solve against the data takes the cheaper space (:func:`gprf.linalg.choose_route`): with fewer points than
    features, :math:`\tilde\Phi^\top K^{-1}(y - \tilde\Phi w - \varepsilon)` with :math:`\varepsilon\sim N(0,\Sigma)`
    drawn at the points (:func:`points_update_weights`); the prior weights :math:`w` are the same either way."""
    batch_shape = root.source.shape[:-2]
    num_samples = prior_weights.shape[: prior_weights.dim() - len(batch_shape) - 1].numel()
    if choose_route("pathwise", root.num_points, root.num_columns, batch_shape, num_samples=num_samples) == "points":
        return points_update_weights(root, residuals, prior_weights)
    factor, projection = root.factor(residuals.unsqueeze(-1))
    cholesky = factor.cholesky
    eye = torch.eye(cholesky.size(-1), dtype=cholesky.dtype, device=cholesky.device)
    gram = cholesky @ cholesky.mT - eye  # G = C - I, F x F
    standard = update_normals(gram, prior_weights)
    return capacitance_update_weights(factor, gram, projection, prior_weights, standard)


def _weight_columns(gram: Tensor, prior_weights: Tensor) -> tuple[Tensor, Size]:
    """The prior weights as columns ``batch x F x S`` in the factor dtype, and their sample shape."""
    batch_shape = gram.shape[:-2]
    sample_shape = prior_weights.shape[: prior_weights.dim() - len(batch_shape) - 1]
    columns = prior_weights.to(gram.dtype).reshape(-1, *prior_weights.shape[len(sample_shape) :]).movedim(0, -1)
    return columns.expand(*batch_shape, *columns.shape[-2:]), sample_shape


def update_normals(gram: Tensor, prior_weights: Tensor) -> Tensor:
    r"""The standard normals :math:`z` behind the update's noise term :math:`\xi = G^{1/2}z`, ``batch x F x S`` (drawn
    from torch's global generator)."""
    columns, _ = _weight_columns(gram, prior_weights)
    return torch.randn(columns.shape, dtype=columns.dtype, device=columns.device)


def capacitance_update_weights(
    factor: CapacitanceFactor, gram: Tensor, projection: Tensor, prior_weights: Tensor, standard: Tensor
) -> Tensor:
    r""":math:`C^{-1}(p - Gw - \xi)` from the factored capacitance :math:`C = I + G`, the Gram matrix :math:`G`, the
    projection :math:`p` ``(*batch, F, 1)``, the prior weights ``sample_shape x batch x F`` and the standard normals
    :math:`z` of :func:`update_normals` (:math:`\xi = G^{1/2}z`); shaped like ``prior_weights``."""
    columns, sample_shape = _weight_columns(gram, prior_weights)
    # xi = G^{1/2} z ~ N(0, G) with the symmetric square root, which (unlike V diag(sqrt(lambda)) alone) does not
    # depend on how eigh picks eigenvectors within (near-)repeated eigenvalues: rounding-level changes of G move xi
    # by rounding-level amounts.
    eigenvalues, eigenvectors = torch.linalg.eigh(gram)
    rotated = eigenvalues.clamp_min(0).sqrt().unsqueeze(-1) * (eigenvectors.mT @ standard)
    noise_projection = eigenvectors @ rotated

    weights = factor.solve(projection - gram @ columns - noise_projection)  # batch x F x S
    return weights.movedim(-1, 0).reshape(*sample_shape, *gram.shape[:-2], weights.size(-2))


def points_update_weights(
    root: FeatureRoot, residuals: Tensor, prior_weights: Tensor, noise_draws: Tensor | None = None
) -> Tensor:
    r""":math:`\tilde\Phi^\top K^{-1}(y - \mu - \tilde\Phi w - \varepsilon)` with :math:`K = \tilde\Phi\tilde\Phi^\top +
    \Sigma` factored as an :math:`N\times N` matrix, :math:`O(N^2F + N^3 + SNF + SN^2)`: by the push-through identity
    the weights :math:`C^{-1}(p - Gw - \xi)` with :math:`\xi = \tilde\Phi^\top\Sigma^{-1}\varepsilon`.

    Arguments as for :func:`feature_space_update_weights`; ``noise_draws`` :math:`\varepsilon` ``batch x N x S``
    (default: drawn from :math:`N(0, \Sigma)` with torch's global generator). Shaped like ``prior_weights``.
    """
    factor = factor_points(root, residuals.unsqueeze(-1))
    columns, sample_shape = _weight_columns(factor.cholesky, prior_weights)  # the batch shape and dtype of K
    if noise_draws is None:
        noise = root.noise.to(columns.dtype).expand(*columns.shape[:-2], root.num_points)
        standard = torch.randn(*noise.shape, columns.size(-1), dtype=columns.dtype, device=columns.device)
        noise_draws = noise.sqrt().unsqueeze(-1) * standard
    errors = residuals.to(columns.dtype).unsqueeze(-1) - factor.features @ columns - noise_draws
    weights = factor.features.mT @ factor.solve(errors)  # batch x F x S
    return weights.movedim(-1, 0).reshape(*sample_shape, *columns.shape[:-2], weights.size(-2))
