r"""Class probabilities of a Dirichlet GP classifier from its per-point posterior marginals.

With the posterior marginals :math:`f_c(x_*)\sim N(\mu_c, s_c^2)` of the ``C`` class GPs,

.. math::
    p(y_* = c \mid x_*) \approx \frac1S\sum_{s=1}^{S}\mathrm{softmax}\big(\mu + s\odot\varepsilon^{(s)}\big)_c,
    \qquad \varepsilon^{(s)}\sim N(0, I_C),

the Monte-Carlo mean of the softmax of samples of the latent values (Milios et al. 2018, §4; Wacker, Kanagawa &
Filippone 2024, App. D.4). Only the marginal variances are used, never a joint :math:`M\times M` covariance: with
a random-feature kernel the cost is :math:`O(MF^2)` per class.

References:
    * D. Milios, R. Camoriano, P. Michiardi, L. Rosasco, M. Filippone. *Dirichlet-based Gaussian Processes for
      Large-scale Calibrated Classification.* Advances in Neural Information Processing Systems (NeurIPS), 2018.
    * J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of Machine
      Learning Research, 2024 (arXiv:2201.08712).
"""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.models import ExactGP
from torch import Tensor

from gprf._checks import check_generator, check_positive_int


def class_marginals(model: ExactGP, x: Tensor) -> tuple[Tensor, Tensor]:
    """Posterior mean and variance of the latent class functions at ``x``, each ``(..., C, M)``.

    ``model`` is a class-batched GP in eval mode whose likelihood has ``num_classes`` (e.g.
    :class:`~gprf.likelihoods.DirichletGPModel`); the variances are the diagonal of the posterior
    covariance (posterior variances are never skipped here).
    """
    num_classes = getattr(model.likelihood, "num_classes", None)
    if num_classes is None:
        raise TypeError(
            f"model.likelihood must be a DirichletClassificationLikelihood (with num_classes), got "
            f"{type(model.likelihood).__name__}."
        )
    if model.training:
        raise ValueError("Class probabilities need the posterior: call model.eval() first.")
    with gpytorch.settings.skip_posterior_variances(False):
        posterior = model(x)
        mean, variance = posterior.mean, posterior.variance
    if mean.dim() < 2 or mean.size(-2) != num_classes:
        raise ValueError(
            f"The model's output has shape {tuple(mean.shape)} but the likelihood has {num_classes} classes: "
            "build the mean and kernel with batch_shape=likelihood.class_batch_shape (DirichletGPModel does)."
        )
    return mean, variance


def predict_proba(
    model: ExactGP, x: Tensor, num_samples: int = 256, generator: torch.Generator | None = None
) -> Tensor:
    """Class probabilities ``(..., M, C)`` at ``x`` (see the module docstring for the formula).

    Args:
        model: A class-batched GP in eval mode trained on ``likelihood.transformed_targets``.
        x: Test inputs ``(M, d)`` (batched models: ``(..., M, d)``).
        num_samples: Number ``S`` of latent samples per point.
        generator: Generator of the samples (a CPU generator works for models on any device).
    """
    num_samples = check_positive_int(num_samples, "num_samples")
    check_generator(generator)
    mean, variance = class_marginals(model, x)
    draw_device = generator.device if generator is not None else mean.device
    noise = torch.randn((num_samples, *mean.shape), generator=generator, dtype=mean.dtype, device=draw_device)
    samples = mean + variance.clamp_min(0).sqrt() * noise.to(mean.device)
    return torch.softmax(samples, dim=-2).mean(0).mT


def predict(model: ExactGP, x: Tensor, num_samples: int = 256, generator: torch.Generator | None = None) -> Tensor:
    """Predicted labels ``(..., M)``: the argmax of :func:`predict_proba`."""
    return predict_proba(model, x, num_samples=num_samples, generator=generator).argmax(-1)
