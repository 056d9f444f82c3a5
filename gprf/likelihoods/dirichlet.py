r"""Dirichlet-based GP classification as heteroscedastic regression (Milios et al. 2018).

Each label :math:`y_i\in\{0,\dots,C-1\}` becomes Dirichlet pseudo-counts
:math:`\alpha_i = \mathrm{onehot}(y_i) + \alpha_\epsilon`; each Gamma marginal of the Dirichlet is matched
by a log-normal, which gives, per class :math:`c`, a regression target and a Gaussian noise variance

.. math::
    \sigma^2_{ic} = \log\big(1/\alpha_{ic} + 1\big), \qquad \tilde y_{ic} = \log\alpha_{ic} - \sigma^2_{ic}/2 .

The classifier is :math:`C` independent GP regressions :math:`\tilde y_{\cdot c} = f_c(X) + \varepsilon_c`,
:math:`\varepsilon_{ic}\sim N(0, \sigma^2_{ic})` (Milios et al. 2018, §4; Wacker, Kanagawa & Filippone 2024,
App. D.4), and class probabilities are :math:`E[\mathrm{softmax}(f(x_*))]` under the posterior marginals
(:func:`gprf.likelihoods.predict_proba`).

References:
    * D. Milios, R. Camoriano, P. Michiardi, L. Rosasco, M. Filippone. *Dirichlet-based Gaussian Processes for
      Large-scale Calibrated Classification.* Advances in Neural Information Processing Systems (NeurIPS), 2018.
    * J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of Machine
      Learning Research, 2024 (arXiv:2201.08712).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from gpytorch.likelihoods import DirichletClassificationLikelihood as _GPyTorchDirichletLikelihood
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood
from gpytorch.likelihoods.noise_models import FixedGaussianNoise
from linear_operator.operators import DiagLinearOperator, LinearOperator
from torch import Tensor

from gprf.settings import validate_inputs

_LABEL_KWARGS = ("targets", "labels")


def check_alpha_epsilon(alpha_epsilon: object) -> float:
    """A positive finite :math:`\\alpha_\\epsilon` (zero would give :math:`\\log 0` targets)."""
    if isinstance(alpha_epsilon, bool) or not isinstance(alpha_epsilon, (int, float)):
        raise TypeError(f"alpha_epsilon must be a positive float, got {alpha_epsilon!r}.")
    if not (math.isfinite(alpha_epsilon) and alpha_epsilon > 0):
        raise ValueError(
            f"alpha_epsilon must be positive and finite (the pseudo-count of the other classes; 0.01 is the usual "
            f"choice), got {alpha_epsilon!r}."
        )
    return float(alpha_epsilon)


def check_labels(labels: object, name: str, num_classes: int | None = None) -> Tensor:
    """Class labels of shape ``(..., n)`` in ``[0, num_classes)`` as int64 (what ``one_hot`` and indexing take).

    Any integer dtype is accepted (``uint8``, ``int16``, ``int32``, ...), and floating labels holding whole numbers
    (checked always: truncating 1.5 to class 1 would be silently wrong); booleans and complex numbers are refused.
    The range is checked where :class:`gprf.settings.validate_inputs` applies (one host sync, outside training).
    """
    if not torch.is_tensor(labels):
        raise TypeError(f"{name} must be a tensor of integer class labels, got {type(labels).__name__}.")
    if labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer class labels 0..C-1, got dtype {labels.dtype}.")
    if labels.dim() < 1 or labels.size(-1) == 0:
        raise ValueError(f"{name} must have shape (..., n) with n >= 1 labels, got shape {tuple(labels.shape)}.")
    if labels.is_floating_point():
        whole = torch.isfinite(labels) & (labels == labels.round())
        if not bool(whole.all()):
            bad = labels[~whole].reshape(-1)[0].item()
            raise ValueError(
                f"{name} must hold whole-number class labels 0..C-1, got {bad!r} (dtype {labels.dtype}); map the "
                "values to class indices first."
            )
    if num_classes is not None and validate_inputs.applies_to(labels):
        low, high = labels.min(), labels.max()
        if bool(low < 0) or bool(high >= num_classes):
            raise ValueError(
                f"{name} must lie in [0, num_classes) = [0, {num_classes}), got values in [{int(low)}, {int(high)}]; "
                "relabel the classes as 0..C-1 (or raise num_classes)."
            )
    return labels.long()


def resolve_num_classes(labels: Tensor, num_classes: int | None) -> int:
    """``num_classes`` checked against the training labels, or inferred from them when ``None``."""
    if bool(labels.min() < 0):
        raise ValueError(f"targets must be class labels 0..C-1, got a negative label {int(labels.min())}.")
    needed = int(labels.max()) + 1
    if num_classes is None:
        if needed < 2:
            raise ValueError("targets hold a single class; pass num_classes=C to say how many classes exist.")
        return needed
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}.")
    if num_classes < needed:
        raise ValueError(
            f"num_classes={num_classes} is smaller than the labels require (largest label {needed - 1}); "
            f"pass num_classes>={needed}."
        )
    return num_classes


def dirichlet_transform(
    labels: Tensor, num_classes: int, alpha_epsilon: float, dtype: torch.dtype, device: torch.device | None = None
) -> tuple[Tensor, Tensor]:
    r"""Regression targets :math:`\tilde y` and noise variances :math:`\sigma^2` of labels ``(..., n)``.

    Both have shape ``(..., num_classes, n)`` (the class is a GP batch dimension): :math:`\alpha = \mathrm{onehot}(y) +
    \alpha_\epsilon`, :math:`\sigma^2 = \log(1/\alpha + 1)`, :math:`\tilde y = \log\alpha - \sigma^2/2`. ``labels`` as
    :func:`~gprf.likelihoods.dirichlet.check_labels` takes them (any integer dtype).
    """
    labels = check_labels(labels, "labels", num_classes)
    onehot = torch.nn.functional.one_hot(labels.to(device=device), num_classes).mT
    alpha = onehot.to(dtype) + alpha_epsilon
    noise = torch.log1p(alpha.reciprocal())
    return alpha.log() - 0.5 * noise, noise


def _pop_labels(kwargs: dict[str, Any]) -> Tensor | None:
    """Labels passed as ``targets=`` (GPyTorch's name) or ``labels=``."""
    given = [key for key in _LABEL_KWARGS if kwargs.get(key) is not None]
    if len(given) > 1:
        raise ValueError("Pass the labels once, as targets= or labels=, not both.")
    labels = kwargs.pop(given[0]) if given else None
    for key in _LABEL_KWARGS:
        kwargs.pop(key, None)
    if labels is not None and kwargs.get("noise") is not None:
        raise ValueError("Pass either labels (their Dirichlet noise is used) or noise=, not both.")
    return labels


def _is_training_set_call(params: tuple) -> bool:
    """GPyTorch's prediction strategies pass the model's training inputs as one list (``likelihood(prior, [X])``)."""
    return len(params) == 1 and isinstance(params[0], (list, tuple))


class DirichletClassificationLikelihood(_GPyTorchDirichletLikelihood):
    r"""Dirichlet classification likelihood (Milios et al. 2018): ``C`` heteroscedastic GP regressions.

    See :mod:`gprf.likelihoods.dirichlet` for the transform. A drop-in replacement for GPyTorch's class of the
    same name (it subclasses it and keeps ``targets``, ``transformed_targets``, ``num_classes``,
    ``alpha_epsilon``, ``noise``, ``second_noise`` and the ``targets=`` call argument) that fixes:

    * ``num_classes`` is explicit (or inferred once from the training labels) and never re-inferred from test
      labels: test labels missing the top class give the right ``(C, M)`` noise instead of wrong shapes;
    * ``alpha_epsilon`` is honoured for test labels (GPyTorch uses 0.01 there whatever was set);
    * at test time the noise comes from ``targets=``/``labels=`` or ``noise=``; calling the likelihood on
      test points without them raises a ``ValueError`` instead of silently reusing the training noise (test
      set of the training size) or silently dropping it (other sizes). The training noise is used only in
      training mode and for the training-set calls GPyTorch's prediction strategies make;
    * with ``learn_additional_noise=True`` a given test (or fantasy) noise gets the learned noise added once
      (GPyTorch adds the given noise twice and drops the learned one);
    * fantasies work: :meth:`get_fantasy_likelihood` appends the new points' labels and noise (GPyTorch
      reads the labels from the wrong argument and crashes);
    * ``batch_shape`` (of the learned additional noise) is honoured, defaulting to the class batch shape
      ``(*targets.shape[:-1], C)``; batched labels ``(..., n)`` work;
    * ``dtype`` defaults to torch's default dtype (not float32), labels and targets are buffers that follow
      ``.to()`` and ``state_dict``, and test-label noise takes the dtype and device of the predictive
      distribution.

    Use it with a class-batched model (:class:`~gprf.likelihoods.DirichletGPModel` builds one), train the
    model on ``likelihood.transformed_targets`` by the exact marginal likelihood, and get class probabilities
    with :func:`~gprf.likelihoods.predict_proba`.

    Reference: D. Milios, R. Camoriano, P. Michiardi, L. Rosasco, M. Filippone. *Dirichlet-based Gaussian Processes
    for Large-scale Calibrated Classification.* Advances in Neural Information Processing Systems (NeurIPS), 2018.

    Args:
        targets: Integer class labels, shape ``(..., n)``.
        num_classes: Number of classes ``C`` (``None``: ``targets.max() + 1``).
        alpha_epsilon: Pseudo-count :math:`\alpha_\epsilon > 0` of the classes a point does not belong to.
        learn_additional_noise: Learn a homoscedastic noise added to the Dirichlet noise.
        batch_shape: Batch shape of the learned additional noise (default: ``(*targets.shape[:-1], C)``, one
            per class); must broadcast against the class batch shape.
        dtype: Floating dtype of the targets and noise (default: ``torch.get_default_dtype()``).
        kwargs: ``noise_prior``/``noise_constraint`` of the additional noise.

    Example:
        >>> likelihood = DirichletClassificationLikelihood(train_labels, num_classes=10)
        >>> model = DirichletGPModel(train_x, likelihood, base_kernel=RandomFourierKernel(1024, num_dims=d,
        ...     batch_shape=likelihood.class_batch_shape))
        >>> probs = predict_proba(model, test_x)  # (M, C)
    """

    def __init__(
        self,
        targets: Tensor,
        num_classes: int | None = None,
        alpha_epsilon: float = 0.01,
        learn_additional_noise: bool = False,
        batch_shape: torch.Size | tuple[int, ...] | None = None,
        dtype: torch.dtype | None = None,
        **kwargs: Any,
    ) -> None:
        alpha_epsilon = check_alpha_epsilon(alpha_epsilon)
        labels = check_labels(targets, "targets")
        num_classes = resolve_num_classes(labels, num_classes)
        dtype = torch.get_default_dtype() if dtype is None else dtype
        if not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating dtype, got {dtype}.")
        transformed, noise = dirichlet_transform(labels, num_classes, alpha_epsilon, dtype)
        class_batch_shape = transformed.shape[:-1]
        batch_shape = class_batch_shape if batch_shape is None else torch.Size(batch_shape)
        try:
            torch.broadcast_shapes(batch_shape, class_batch_shape)
        except RuntimeError:
            raise ValueError(
                f"batch_shape {tuple(batch_shape)} of the additional noise does not broadcast against the class batch "
                f"shape {tuple(class_batch_shape)}; use {tuple(class_batch_shape)} (one per class) or () (shared)."
            ) from None
        # GPyTorch's __init__ re-infers num_classes, ignores batch_shape and crashes on batched labels, so the
        # Gaussian part is set up directly.
        FixedNoiseGaussianLikelihood.__init__(
            self, noise=noise, learn_additional_noise=learn_additional_noise, batch_shape=batch_shape, **kwargs
        )
        self.num_classes = num_classes
        self.alpha_epsilon = alpha_epsilon
        self.register_buffer("targets", labels)
        self.register_buffer("transformed_targets", transformed)

    @property
    def class_batch_shape(self) -> torch.Size:
        """``(*targets.shape[:-1], num_classes)``: the batch shape of the model's mean and kernel."""
        return self.transformed_targets.shape[:-1]

    # ------------------------------------------------------------------ transform
    def transform(
        self, labels: Tensor, dtype: torch.dtype | None = None, device: torch.device | None = None
    ) -> tuple[Tensor, Tensor]:
        """Regression targets and noise ``(..., C, m)`` of new labels ``(..., m)`` with this likelihood's
        ``num_classes`` and ``alpha_epsilon`` (default dtype/device: those of ``transformed_targets``)."""
        dtype = self.transformed_targets.dtype if dtype is None else dtype
        device = self.transformed_targets.device if device is None else device
        return dirichlet_transform(labels, self.num_classes, self.alpha_epsilon, dtype, device)

    def _set_labels(self, labels: Tensor) -> None:
        transformed, noise = self.transform(labels)
        self.targets = labels.to(self.targets.device)
        self.transformed_targets = transformed
        self.noise_covar = FixedGaussianNoise(noise=noise)

    # ------------------------------------------------------------------ noise
    def __call__(self, input: Tensor | Any, *args: Any, **kwargs: Any) -> Any:
        labels = _pop_labels(kwargs)
        if labels is not None:
            reference = input if torch.is_tensor(input) else input.mean
            kwargs["noise"] = self.transform(labels, dtype=reference.dtype, device=reference.device)[1]
        # Skip GPyTorch's DirichletClassificationLikelihood.__call__ (it ignores alpha_epsilon and re-infers C).
        return super(_GPyTorchDirichletLikelihood, self).__call__(input, *args, **kwargs)

    def _shaped_noise_covar(self, base_shape: torch.Size, *params: Any, **kwargs: Any) -> Tensor | LinearOperator:
        noise = kwargs.pop("noise", None)
        if noise is not None:
            # GPyTorch hands noise= to the learned noise model too, which then returns it again: the given noise
            # would be doubled and the learned noise dropped. Add the learned noise for base_shape instead.
            given = DiagLinearOperator(noise)
            if self.second_noise_covar is None:
                return given
            return given + self.second_noise_covar(shape=base_shape)
        if not (self.training or _is_training_set_call(params)):
            raise ValueError(
                "DirichletClassificationLikelihood needs the labels of test points to know their noise: call "
                "likelihood(model(x), targets=labels) (or noise=...). For class probabilities without labels "
                "use gprf.likelihoods.predict_proba(model, x). The training noise is only used in training mode."
            )
        num_train = self.noise_covar.noise.size(-1)
        if base_shape[-1] != num_train:
            raise ValueError(
                f"The likelihood holds the noise of {num_train} training labels but got {base_shape[-1]} points; "
                "pass targets=labels for other points."
            )
        return super()._shaped_noise_covar(base_shape, *params, **kwargs)

    # ------------------------------------------------------------------ fantasies
    def _labels_from_noise(self, noise: Tensor) -> Tensor:
        """The labels whose Dirichlet noise is ``noise`` (the label's class has the strictly smallest noise)."""
        if noise.dim() < 2 or noise.size(-2) != self.num_classes:
            raise ValueError(
                f"Fantasy noise must have shape (..., {self.num_classes}, m) (see likelihood.transform), "
                f"got {tuple(noise.shape)}."
            )
        labels = noise.argmin(-2)
        if not torch.allclose(noise, self.transform(labels, dtype=noise.dtype, device=noise.device)[1]):
            raise ValueError(
                "Fantasy noise is not the Dirichlet noise of any labels; pass noise=likelihood.transform(labels)[1] "
                "(or use DirichletGPModel.condition_on_labels)."
            )
        return labels

    def get_fantasy_likelihood(self, **kwargs: Any) -> DirichletClassificationLikelihood:
        """This likelihood with new points appended (their labels as ``labels=``/``targets=``, or their
        Dirichlet noise as ``noise=``, which is what ``ExactGP.get_fantasy_model`` forwards)."""
        labels = _pop_labels(kwargs)
        if labels is None:
            if kwargs.get("noise") is None:
                raise ValueError(
                    "Fantasies need the new labels (labels=...) or their noise (noise=likelihood.transform(labels)[1])."
                )
            labels = self._labels_from_noise(kwargs["noise"])
        labels = check_labels(labels, "labels", self.num_classes).to(self.targets.device)
        old = (
            self.targets.expand(*labels.shape[:-1], self.targets.size(-1))
            if labels.dim() > self.targets.dim()
            else self.targets
        )
        fantasy = copy.deepcopy(self)
        fantasy._set_labels(torch.cat([old, labels], dim=-1))
        return fantasy

    def extra_repr(self) -> str:
        return f"num_classes={self.num_classes}, alpha_epsilon={self.alpha_epsilon}"
