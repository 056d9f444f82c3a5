"""A class-batched exact GP for Dirichlet classification, with the batch shapes right the first time."""

from __future__ import annotations

from collections.abc import Callable

import torch
from gpytorch.kernels import Kernel, RBFKernel, ScaleKernel
from gpytorch.means import ConstantMean, Mean
from gpytorch.models import ExactGP
from torch import Tensor

from gprf.distributions import MultivariateNormal
from gprf.likelihoods.dirichlet import DirichletClassificationLikelihood


class DirichletGPModel(ExactGP):
    r"""``C`` independent GP regressions of the Dirichlet targets, one per class, as one batched ``ExactGP``.

    The mean and the ``ScaleKernel``-wrapped kernel have batch shape ``likelihood.class_batch_shape``
    (``(C,)``, or ``(..., C)`` for batched labels): every class has its own constant mean, amplitude and kernel
    hyperparameters, and its own heteroscedastic noise from the likelihood. With a gprf random-feature kernel
    each class costs one :math:`F\times F` factorisation (:class:`~gprf.prediction.FeatureSpacePredictionStrategy`).

    Inputs are expanded over the class axis (``(..., n, d) -> (..., C, n, d)``, a view) before they reach
    GPyTorch, so training, prediction and fantasies see consistent batch shapes; call the model with the
    usual ``(n, d)`` inputs.

    Args:
        train_x: Training inputs ``(..., n, d)`` matching the likelihood's labels ``(..., n)``.
        likelihood: The :class:`~gprf.likelihoods.DirichletClassificationLikelihood` of the training labels.
        base_kernel: A kernel built with ``batch_shape=likelihood.class_batch_shape``, or a callable taking that
            ``batch_shape`` and returning one (default: ``RBFKernel``). It is wrapped in a class-batched
            ``ScaleKernel``.
        mean_module: Default: a class-batched ``ConstantMean``.
        share_features: For gprf random-feature kernels, use one feature draw for all classes
            (:meth:`~gprf.kernels.FeatureMapOwner.share_features`): the classes keep their own
            hyperparameters and :math:`F\times F` factorisations but see the same features, so the
            approximation error does not differ arbitrarily between classes.

    Example:
        >>> likelihood = DirichletClassificationLikelihood(y, num_classes=10)
        >>> model = DirichletGPModel(x, likelihood, lambda batch_shape: RandomFourierKernel(
        ...     1024, num_dims=x.size(-1), batch_shape=batch_shape))
    """

    def __init__(
        self,
        train_x: Tensor,
        likelihood: DirichletClassificationLikelihood,
        base_kernel: Kernel | Callable[[torch.Size], Kernel] | None = None,
        mean_module: Mean | None = None,
        share_features: bool = True,
    ) -> None:
        if not isinstance(likelihood, DirichletClassificationLikelihood):
            raise TypeError(
                "likelihood must be a gprf.likelihoods.DirichletClassificationLikelihood, got "
                f"{type(likelihood).__name__}."
            )
        labels = likelihood.targets
        if not torch.is_tensor(train_x) or train_x.dim() != labels.dim() + 1 or train_x.shape[:-1] != labels.shape:
            shape = tuple(train_x.shape) if torch.is_tensor(train_x) else type(train_x).__name__
            raise ValueError(
                f"train_x must have shape (*labels.shape, d) = {(*labels.shape, 'd')} to match the likelihood's "
                "labels, "
                f"got {shape}."
            )
        if train_x.dtype != likelihood.transformed_targets.dtype:
            raise TypeError(
                f"train_x has dtype {train_x.dtype} but the likelihood's targets "
                f"{likelihood.transformed_targets.dtype}; "
                f"build the likelihood with dtype={train_x.dtype} (or convert train_x)."
            )
        self.class_batch_shape = likelihood.class_batch_shape
        super().__init__(self.class_inputs(train_x), likelihood.transformed_targets, likelihood)
        batch_shape = self.class_batch_shape
        if base_kernel is None:
            base_kernel = RBFKernel(batch_shape=batch_shape)
        elif not isinstance(base_kernel, Kernel):
            base_kernel = base_kernel(batch_shape)
        if base_kernel.batch_shape != batch_shape:
            raise ValueError(
                f"base_kernel has batch_shape {tuple(base_kernel.batch_shape)}; build it with "
                f"batch_shape=likelihood.class_batch_shape = {tuple(batch_shape)} (one kernel per class; a shared "
                "kernel inside a class-batched ScaleKernel would make random-feature covariances dense)."
            )
        if share_features and hasattr(base_kernel, "share_features"):  # gprf random-feature kernels
            base_kernel.share_features()
        self.covar_module = ScaleKernel(base_kernel, batch_shape=batch_shape)
        self.mean_module = ConstantMean(batch_shape=batch_shape) if mean_module is None else mean_module

    def class_inputs(self, x: Tensor) -> Tensor:
        """``(..., m, d)`` inputs expanded (not copied) to ``(..., C, m, d)``; class-axis inputs pass through."""
        if x.dim() >= len(self.class_batch_shape) + 2:
            return x
        if x.dim() != len(self.class_batch_shape) + 1:
            raise ValueError(
                f"Expected inputs of shape {(*self.class_batch_shape[:-1], 'm', 'd')}, got {tuple(x.shape)}."
            )
        return x.unsqueeze(-3).expand(*x.shape[:-2], self.class_batch_shape[-1], *x.shape[-2:])

    def __call__(self, *inputs: Tensor, **kwargs) -> MultivariateNormal:
        return super().__call__(*(self.class_inputs(x) for x in inputs), **kwargs)

    def forward(self, x: Tensor) -> MultivariateNormal:
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))

    def condition_on_labels(self, x: Tensor, labels: Tensor) -> DirichletGPModel:
        """A new model that also conditions on labelled points ``x`` ``(..., m, d)``, ``labels`` ``(..., m)``.

        The likelihood turns the labels into Dirichlet targets and noise; GPyTorch's ``get_fantasy_model``
        then updates the prediction caches (for random-feature kernels a rank-``m`` update of each class's
        :math:`F\\times F` factor). The model must be in eval mode; hyperparameters are kept, as in a refit of
        the posterior on all points.
        """
        if self.training:
            raise ValueError("condition_on_labels updates the posterior: call model.eval() first.")
        if self.prediction_strategy is None:
            with torch.no_grad():
                self(x)  # builds the training-set caches the fantasy update starts from
        targets, noise = self.likelihood.transform(labels)
        return self.get_fantasy_model(self.class_inputs(x), targets, noise=noise)
