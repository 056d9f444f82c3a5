"""A BoTorch ``SingleTaskGP`` whose covariance is a random-feature kernel, with the batch shapes set up."""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior
from botorch.optim.closures import get_loss_closure_with_grads
from botorch.optim.fit import fit_gpytorch_mll_scipy
from botorch.utils.types import DEFAULT, _DefaultType
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import Likelihood
from gpytorch.likelihoods.noise_models import HomoskedasticNoise
from gpytorch.means import Mean
from gpytorch.mlls import MarginalLogLikelihood
from gpytorch.module import Module
from torch import Tensor

from gprf.botorch.features import check_pathwise_kernel
from gprf.distributions import MultivariateNormal
from gprf.features import FeatureMapBase
from gprf.fitting.recipe import FIT_MLL_OPTIONS, fit_mll
from gprf.kernels import RandomFourierKernel, is_feature_expression, unwrap_scale_kernel
from gprf.sizing import suggest_num_features


class RandomFeatureSingleTaskGP(SingleTaskGP):
    r"""BoTorch's ``SingleTaskGP`` with an :math:`O(NF^2)` random-feature covariance.

    Everything ``SingleTaskGP`` offers keeps working (``fit_gpytorch_mll``, input and outcome transforms,
    ``posterior``, MC acquisition functions, ``fantasize``/qKG, ``condition_on_observations``,
    ``subset_output``, ``load_state_dict`` into a fresh model); in addition:

    * without ``covar_module``, the kernel is a :class:`~gprf.kernels.RandomFourierKernel` approximating
      BoTorch's default covariance: an ARD RBF (or Matérn) kernel on the *transformed* inputs with BoTorch's
      dimension-scaled log-normal lengthscale prior and lower bound, batch shape ``[m]`` for ``m`` outputs, with
      as many features as the training points need (:func:`gprf.suggest_num_features`) unless ``num_features``
      says otherwise;
    * a user ``covar_module`` must be a gprf feature kernel (optionally in ``ScaleKernel``) with that batch
      shape; anything else raises, naming the kernel, instead of silently training an :math:`O(N^3)` model;
    * ``_subset_batch_dict`` covers every parameter and per-output feature draw (:func:`output_batch_dims`), and
      ``subset_output`` also fixes the batch shape of kernels that own no tensor, so it works with every gprf
      kernel family that takes a ``batch_shape``;
    * the marginal likelihood is the exact :math:`O(NF^2)` one whatever linear_operator's fast-computation
      settings (BoTorch switches fast ``log_prob`` off on import, which would make a plain ``SingleTaskGP``
      with a gprf kernel factor the dense :math:`N\times N` matrix): ``forward`` returns
      :class:`gprf.distributions.MultivariateNormal`;
    * pathwise sampling (``draw_matheron_paths``, ``PathwiseThompsonSampling``) uses the kernel's own
      features and the weight-space update of :mod:`gprf.botorch` (also true for a plain ``SingleTaskGP``
      with a gprf kernel).

    Args:
        train_X: ``batch_shape x n x d`` training inputs.
        train_Y: ``batch_shape x n x m`` training targets.
        train_Yvar: Optional observed noise variances (``FixedNoiseGaussianLikelihood``).
        likelihood, mean_module, outcome_transform, input_transform: as in ``SingleTaskGP``.
        covar_module: A gprf feature kernel; default: see above.
        num_features: Number of features ``F`` of the default kernel, or ``"auto"`` (default):
            :func:`gprf.suggest_num_features` of the training points and the transformed input dimension.
        kernel: Target of the default kernel: ``"rbf"``, ``"matern12"``, ``"matern32"`` or ``"matern52"``.
        sampler: Frequency sampler of the default kernel (see :class:`~gprf.features.RandomFourierFeatures`).
            ``"orthogonal"`` here, where the kernels default to ``"iid"``: the same cost and a lower variance.
        seed: Seed of the default kernel's feature draws.

    Example:
        >>> model = RandomFeatureSingleTaskGP(train_X, train_Y, num_features=1024)
        >>> fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    """

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        likelihood: Likelihood | None = None,
        covar_module: Module | None = None,
        mean_module: Mean | None = None,
        outcome_transform: OutcomeTransform | _DefaultType | None = DEFAULT,
        input_transform: InputTransform | None = None,
        *,
        num_features: int | str = "auto",
        kernel: str = "rbf",
        sampler: str = "orthogonal",
        seed: int | None = None,
    ) -> None:
        check_training_shapes(train_X, train_Y, train_Yvar)
        output_batch_shape = model_batch_shape(train_X, train_Y)
        if covar_module is None:
            num_dims = transformed_dim(train_X, input_transform)
            if isinstance(num_features, str):
                if num_features != "auto":
                    raise ValueError(f"num_features must be a positive integer or 'auto', got {num_features!r}.")
                num_features = suggest_num_features(train_X.size(-2), num_dims)
            covar_module = RandomFourierKernel(
                num_features,
                num_dims=num_dims,
                kernel=kernel,
                sampler=sampler,
                seed=seed,
                **botorch_lengthscale_arguments(num_dims, output_batch_shape),
            ).to(train_X)
        else:
            _check_covar_module(covar_module, output_batch_shape)
        super().__init__(
            train_X,
            train_Y,
            train_Yvar=train_Yvar,
            likelihood=likelihood,
            covar_module=covar_module,
            mean_module=mean_module,
            outcome_transform=outcome_transform,
            input_transform=input_transform,
        )
        self._subset_batch_dict = output_batch_dims(self, self._aug_batch_shape)
        self._num_input_columns = train_X.size(-1)

    def posterior(self, X: Tensor, *args: Any, **kwargs: Any):
        """BoTorch's posterior at ``X`` (``batch x q x d``), after checking that ``X`` has the training inputs'
        ``d`` columns (GPyTorch would otherwise fail inside its concatenation of training and test points)."""
        if X.dim() < 2 or X.size(-1) != self._num_input_columns:
            raise ValueError(
                f"X must have shape (..., q, {self._num_input_columns}) like the training inputs, got "
                f"{tuple(X.shape)}; pass points with {self._num_input_columns} columns."
            )
        try:
            torch.broadcast_shapes(X.shape[:-2], self._input_batch_shape)
        except RuntimeError:
            raise ValueError(
                f"X has batch shape {tuple(X.shape[:-2])}, which does not broadcast with the training inputs' batch "
                f"shape {tuple(self._input_batch_shape)}; pass X of shape (*batch, q, d) with batch broadcasting to it."
            ) from None
        return super().posterior(X, *args, **kwargs)

    def subset_output(self, idcs: list[int]) -> RandomFeatureSingleTaskGP:
        """BoTorch's ``subset_output`` (the tensors of :func:`output_batch_dims` indexed), then the batch shape of the
        kernels and feature maps that own none of those tensors: BoTorch updates only the owners, which left e.g. a
        scale-free quadrature kernel (no parameter) broadcasting its one remaining draw back over the old outputs."""
        num_outputs = self.num_outputs
        if any(isinstance(i, bool) or not isinstance(i, int) or not -num_outputs <= i < num_outputs for i in idcs):
            raise IndexError(f"subset_output: idcs must be output indices in [0, {num_outputs}), got {list(idcs)}.")
        subset = super().subset_output(idcs)
        if subset._aug_batch_shape != self._aug_batch_shape:
            # Read on this model: in the copy, a kernel with stale parts cannot broadcast its batch shape.
            originals = dict(self.named_modules())
            for name, module in subset.named_modules():
                original = originals.get(name)
                if isinstance(module, (Kernel, FeatureMapBase)) and original.batch_shape == self._aug_batch_shape:
                    module.batch_shape = subset._aug_batch_shape
        return subset

    def forward(self, x: Tensor) -> MultivariateNormal:
        prior = super().forward(x)
        return MultivariateNormal(prior.mean, prior.lazy_covariance_matrix)

    def custom_fit(
        self,
        mll: MarginalLogLikelihood,
        closure: Callable | None = None,
        closure_kwargs: dict[str, Any] | None = None,
        optimizer_kwargs: dict[str, Any] | None = None,
        optimizer: Callable | None = None,
        **kwargs: Any,
    ) -> MarginalLogLikelihood:
        """How BoTorch's ``fit_gpytorch_mll`` fits this model: :func:`gprf.fit_mll` (nested small-``F`` tuning on a
        row subsample, exact scale refit; L-BFGS then the exact refit for small problems).

        ``fit_gpytorch_mll`` hands its keyword arguments over: those of :func:`gprf.fit_mll` (``time_budget``,
        ``tune_features``, ``tune_rows``, ``progress``, ...) are used, the others ignored, as BoTorch ignores
        unexpected keywords. An explicit ``optimizer`` or ``closure`` runs BoTorch's generic route instead: the
        optimizer (default ``fit_gpytorch_mll_scipy``) on the closure (default ``get_loss_closure_with_grads``).
        """
        if optimizer is None and closure is None:
            options = {name: kwargs[name] for name in FIT_MLL_OPTIONS if name in kwargs}
            return fit_mll(mll, **options)
        mll.train()
        if closure is None:
            parameters = {name: p for name, p in mll.named_parameters() if p.requires_grad}
            closure = get_loss_closure_with_grads(mll, parameters=parameters)
        if closure_kwargs:
            closure = partial(closure, **closure_kwargs)
        (optimizer or fit_gpytorch_mll_scipy)(mll, closure=closure, **(optimizer_kwargs or {}))
        return mll.eval()


def model_batch_shape(train_X: Tensor, train_Y: Tensor) -> torch.Size:
    """A ``SingleTaskGP``'s covariance batch shape: the inputs' batch shape, and ``[m]`` for ``m > 1`` outputs."""
    return train_X.shape[:-2] + (torch.Size([train_Y.shape[-1]]) if train_Y.shape[-1] > 1 else torch.Size())


def botorch_lengthscale_arguments(num_dims: int, batch_shape: torch.Size) -> dict[str, Any]:
    """The kernel arguments of BoTorch's default covariance: ARD over ``num_dims``, the batch shape, and its
    dimension-scaled log-normal lengthscale prior and lower bound."""
    priors = get_covar_module_with_dim_scaled_prior(ard_num_dims=num_dims, batch_shape=batch_shape)
    return {
        "ard_num_dims": num_dims,
        "batch_shape": batch_shape,
        "lengthscale_prior": priors.lengthscale_prior,
        "lengthscale_constraint": priors.raw_lengthscale_constraint,
    }


def check_training_shapes(train_X: Tensor, train_Y: Tensor, train_Yvar: Tensor | None) -> None:
    """A ``ValueError`` when the targets do not have one row per training input: BoTorch builds such a model and
    fails only at its first prediction, inside GPyTorch."""
    for name, values in (("train_Y", train_Y), ("train_Yvar", train_Yvar)):
        if values is None or train_X.dim() < 2 or values.dim() < 2:
            continue  # BoTorch's own checks name the missing output dimension
        if values.size(-2) != train_X.size(-2):
            raise ValueError(
                f"{name} has {values.size(-2)} rows (shape {tuple(values.shape)}) but train_X has {train_X.size(-2)} "
                f"(shape {tuple(train_X.shape)}); pass one row of {name} per training input."
            )


def transformed_dim(train_X: Tensor, input_transform: InputTransform | None) -> int:
    """The input dimension the kernel sees (input transforms may add or drop columns)."""
    if input_transform is None:
        return train_X.shape[-1]
    with torch.no_grad():  # on a copy: fitting transforms (e.g. Normalize) learn from what they see
        return copy.deepcopy(input_transform).to(train_X)(train_X).shape[-1]


def _check_covar_module(covar_module: Module, batch_shape: torch.Size) -> None:
    if not is_feature_expression(covar_module):
        raise TypeError(
            f"RandomFeatureSingleTaskGP needs a gprf random-feature covar_module (optionally in ScaleKernel); "
            f"{type(unwrap_scale_kernel(covar_module)).__name__} has no finite feature map. Use "
            "botorch.models.SingleTaskGP for exact kernels."
        )
    check_pathwise_kernel(covar_module)
    if covar_module.batch_shape != batch_shape:
        raise ValueError(
            f"covar_module has batch_shape {tuple(covar_module.batch_shape)} but the model needs "
            f"{tuple(batch_shape)} (input batch shape + [m] for m > 1 outputs): build the kernel (and any "
            f"ScaleKernel) with batch_shape=torch.Size({list(batch_shape)})."
        )


def output_batch_dims(model: torch.nn.Module, aug_batch_shape: torch.Size) -> dict[str, int]:
    """``{name: dim}`` of every parameter and buffer that carries the output batch dimension.

    BoTorch's ``subset_output`` indexes these tensors along ``dim``. They are the parameters of the modules with
    ``batch_shape == aug_batch_shape`` (and of a homoscedastic noise model, which keeps no ``batch_shape``), and the
    random draws of gprf feature maps with that batch shape (:attr:`gprf.features.FeatureMapBase.batched_buffer_names`);
    GPyTorch modules and gprf maps put batch dimensions first, and the output dimension is the last of them. Every
    other buffer (constraint bounds, a Maclaurin map's centre and degree scales, a compositional map's node tables,
    a product's pairing, ...) is shared by the outputs, even where its leading size happens to equal the number of
    outputs. Fixed observation noise is left out: ``subset_output`` subsets it itself.
    """
    if len(aug_batch_shape) == 0:
        return {}
    dims = {}
    for module_name, module in model.named_modules():
        batched = getattr(module, "batch_shape", None) == aug_batch_shape
        tensors = []
        if batched or isinstance(module, HomoskedasticNoise):
            tensors.extend(module.named_parameters(recurse=False))
        if batched and isinstance(module, FeatureMapBase):
            tensors.extend((name, getattr(module, name)) for name in module.batched_buffer_names)
        for name, tensor in tensors:
            if tensor.shape[: len(aug_batch_shape)] == aug_batch_shape:
                full_name = f"{module_name}.{name}" if module_name else name
                dims[full_name] = len(aug_batch_shape) - 1 - tensor.dim()
    return dims
