"""Accuracy metrics for kernel approximations and probabilistic predictions (Wacker et al. 2024, §6.1.3).

Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of
Machine Learning Research, 2024 (arXiv:2201.08712).
"""

from __future__ import annotations

import math

import torch
from linear_operator import to_dense
from linear_operator.operators import LinearOperator
from torch import Tensor


def _dense_real(matrix: Tensor | LinearOperator) -> Tensor:
    dense = to_dense(matrix)
    return dense.real if dense.is_complex() else dense


def _check_same_shape(a: Tensor, b: Tensor, names: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{names} must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}.")


def relative_frobenius_error(approx: Tensor | LinearOperator, exact: Tensor | LinearOperator) -> Tensor:
    r""":math:`\lVert\hat K - K\rVert_F / \lVert K\rVert_F` (the real part of a complex :math:`\hat K`), per batch.

    ``exact`` broadcasts against batches of approximations (e.g. one approximation per feature draw).
    """
    approx, exact = _dense_real(approx), _dense_real(exact)
    if approx.shape[-2:] != exact.shape[-2:]:
        raise ValueError(
            f"approx and exact must be matrices of the same size, got {tuple(approx.shape)} and {tuple(exact.shape)}."
        )
    approx, exact = torch.broadcast_tensors(approx, exact)
    return torch.linalg.matrix_norm(approx - exact) / torch.linalg.matrix_norm(exact)


def gaussian_kl(mean_p: Tensor, var_p: Tensor, mean_q: Tensor, var_q: Tensor) -> Tensor:
    r"""Mean over test points of :math:`\mathrm{KL}(N(m_p, s_p^2)\,\Vert\,N(m_q, s_q^2))`.

    .. math::
        \frac1M\sum_i \tfrac12\Big[\log\frac{s_{q,i}^2}{s_{p,i}^2}
        + \frac{s_{p,i}^2 + (m_{p,i} - m_{q,i})^2}{s_{q,i}^2} - 1\Big]

    Pass the approximation as ``p`` and the exact predictive as ``q`` (KL(approx ‖ exact)). This is the
    *mean per test point*; multiply by the number of points for the sum used by some papers.
    """
    for name, value in (("var_p", var_p), ("var_q", var_q)):
        if bool((value <= 0).any()):
            raise ValueError(f"{name} must be positive.")
    kl = 0.5 * (torch.log(var_q / var_p) + (var_p + (mean_p - mean_q).square()) / var_q - 1.0)
    return kl.mean(-1)


def mnll(mean: Tensor, var: Tensor, target: Tensor) -> Tensor:
    r"""Mean negative log likelihood of ``target`` under :math:`N(\text{mean}, \text{var})`, per point averaged."""
    _check_same_shape(mean, target, "mean and target")
    if bool((var <= 0).any()):
        raise ValueError("var must be positive.")
    return (0.5 * torch.log(2 * math.pi * var) + 0.5 * (target - mean).square() / var).mean(-1)


def nmse(prediction: Tensor, target: Tensor) -> Tensor:
    r"""Normalised mean squared error :math:`\mathrm{MSE}/\mathrm{Var}(y)` (1 = predicting the test mean)."""
    _check_same_shape(prediction, target, "prediction and target")
    return (prediction - target).square().mean(-1) / target.var(-1, unbiased=False)


def error_rate(prediction: Tensor, target: Tensor) -> Tensor:
    """Fraction of misclassified points; ``prediction`` holds labels ``(..., n)`` or probabilities ``(..., n, C)``."""
    labels = prediction.argmax(-1) if prediction.dim() == target.dim() + 1 else prediction
    _check_same_shape(labels, target, "predicted labels and target")
    return (labels != target).to(torch.get_default_dtype()).mean(-1)


def expected_calibration_error(probs: Tensor, target: Tensor, num_bins: int = 15) -> Tensor:
    r"""Top-label expected calibration error with ``num_bins`` equal-width confidence bins.

    :math:`\mathrm{ECE} = \sum_b \frac{|B_b|}{n}\,|\mathrm{acc}(B_b) - \mathrm{conf}(B_b)|` (Guo et al. 2017).

    Reference: C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. *On Calibration of Modern Neural Networks.*
    International Conference on Machine Learning (ICML), 2017.
    """
    if probs.dim() != 2 or target.shape != probs.shape[:1]:
        raise ValueError(f"probs must be (n, C) and target (n,), got {tuple(probs.shape)} and {tuple(target.shape)}.")
    confidence, labels = probs.max(-1)
    correct = (labels == target).to(probs.dtype)
    bins = torch.clamp((confidence * num_bins).long(), max=num_bins - 1)
    counts = torch.zeros(num_bins, dtype=probs.dtype, device=probs.device).index_add_(0, bins, torch.ones_like(correct))
    acc = torch.zeros_like(counts).index_add_(0, bins, correct)
    conf = torch.zeros_like(counts).index_add_(0, bins, confidence)
    return (acc - conf).abs().sum() / probs.size(0)
