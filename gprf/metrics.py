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

from gprf.linalg import feature_root


def _dense_real(matrix: Tensor | LinearOperator) -> Tensor:
    r"""``matrix`` as a dense real tensor (the real part of a complex one).

    A random-feature covariance is formed from its root, :math:`s\,RR^\top (+\,\Sigma)`, rather than by
    ``to_dense()``: a metric of the dense matrix forms it on purpose, and ``to_dense()`` warns about a model that
    forms it unasked.
    """
    root = feature_root(matrix)
    if root is None:
        dense = to_dense(matrix)
        return dense.real if dense.is_complex() else dense
    scaled = root.scaled_features()
    dense = scaled @ scaled.mT
    if root.noise is not None:
        dense = dense + torch.diag_embed(root.noise.expand(dense.shape[:-1]))
    return dense


def _check_same_shape(a: Tensor, b: Tensor, names: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{names} must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}.")


def _check_labels(target: Tensor, num_classes: int) -> None:
    """Class labels must index the ``num_classes`` columns of the probabilities (a label outside would count as a
    miss)."""
    if target.numel() and not bool(((target >= 0) & (target < num_classes)).all()):
        raise ValueError(
            f"target must hold class labels 0 .. {num_classes - 1} (the columns of the probabilities), got values "
            f"from {target.min().item()} to {target.max().item()}."
        )


def relative_frobenius_error(approx: Tensor | LinearOperator, exact: Tensor | LinearOperator) -> Tensor:
    r""":math:`\lVert\hat K - K\rVert_F / \lVert K\rVert_F` (the real part of a complex :math:`\hat K`), per batch.

    ``exact`` broadcasts against batches of approximations (e.g. one approximation per feature draw). A
    random-feature covariance (a model's ``covar_module(x)``) is formed from its feature root, without the
    :class:`~gprf.exceptions.LowRankStructureWarning` of its ``to_dense()``: the metric needs the dense matrix.
    """
    approx, exact = _dense_real(approx), _dense_real(exact)
    if approx.shape[-2:] != exact.shape[-2:]:
        raise ValueError(
            f"approx and exact must be matrices of the same size, got {tuple(approx.shape)} and {tuple(exact.shape)}."
        )
    approx, exact = torch.broadcast_tensors(approx, exact)
    norm = torch.linalg.matrix_norm(exact)
    if not bool((norm > 0).all()):
        raise ValueError("exact must have a positive Frobenius norm: the relative error of a zero matrix is 0 / 0.")
    return torch.linalg.matrix_norm(approx - exact) / norm


def gaussian_kl(mean_p: Tensor, var_p: Tensor, mean_q: Tensor, var_q: Tensor) -> Tensor:
    r"""Mean over test points of :math:`\mathrm{KL}(N(m_p, s_p^2)\,\Vert\,N(m_q, s_q^2))`.

    .. math::
        \frac1M\sum_i \tfrac12\Big[\log\frac{s_{q,i}^2}{s_{p,i}^2}
        + \frac{s_{p,i}^2 + (m_{p,i} - m_{q,i})^2}{s_{q,i}^2} - 1\Big]

    Pass the approximation as ``p`` and the exact predictive as ``q`` (KL(approx ‖ exact)). This is the
    *mean per test point*; multiply by the number of points for the sum used by some papers.
    """
    for name, value in (("var_p", var_p), ("var_q", var_q)):
        if not bool((value > 0).all()):  # NaN fails the comparison too
            raise ValueError(f"{name} must be positive (and not NaN).")
    kl = 0.5 * (torch.log(var_q / var_p) + (var_p + (mean_p - mean_q).square()) / var_q - 1.0)
    return kl.mean(-1)


def mnll(mean: Tensor, var: Tensor, target: Tensor) -> Tensor:
    r"""Mean negative log likelihood of ``target`` under :math:`N(\text{mean}, \text{var})`, per point averaged."""
    _check_same_shape(mean, target, "mean and target")
    if not bool((var > 0).all()):  # NaN fails the comparison too
        raise ValueError("var must be positive (and not NaN).")
    return (0.5 * torch.log(2 * math.pi * var) + 0.5 * (target - mean).square() / var).mean(-1)


def nmse(prediction: Tensor, target: Tensor) -> Tensor:
    r"""Normalised mean squared error :math:`\mathrm{MSE}/\mathrm{Var}(y)` (1 = predicting the test mean).

    A constant target (e.g. a single test point) gives :math:`+\infty` for any error, and NaN for none."""
    _check_same_shape(prediction, target, "prediction and target")
    return (prediction - target).square().mean(-1) / target.var(-1, unbiased=False)


def error_rate(prediction: Tensor, target: Tensor) -> Tensor:
    """Fraction of misclassified points; ``prediction`` holds labels ``(..., n)`` or probabilities ``(..., n, C)``."""
    probabilities = prediction.dim() == target.dim() + 1
    labels = prediction.argmax(-1) if probabilities else prediction
    _check_same_shape(labels, target, "predicted labels and target")
    if probabilities:
        _check_labels(target, prediction.size(-1))
    return (labels != target).to(torch.get_default_dtype()).mean(-1)


def expected_calibration_error(probs: Tensor, target: Tensor, num_bins: int = 15) -> Tensor:
    r"""Top-label expected calibration error with ``num_bins`` equal-width confidence bins.

    :math:`\mathrm{ECE} = \sum_b \frac{|B_b|}{n}\,|\mathrm{acc}(B_b) - \mathrm{conf}(B_b)|` (Guo et al. 2017).

    Reference: C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. *On Calibration of Modern Neural Networks.*
    International Conference on Machine Learning (ICML), 2017.
    """
    if probs.dim() != 2 or target.shape != probs.shape[:1]:
        raise ValueError(f"probs must be (n, C) and target (n,), got {tuple(probs.shape)} and {tuple(target.shape)}.")
    if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 1:
        raise ValueError(f"num_bins must be a positive integer, got {num_bins!r}.")
    _check_labels(target, probs.size(-1))
    confidence, labels = probs.max(-1)
    correct = (labels == target).to(probs.dtype)
    bins = torch.clamp((confidence * num_bins).long(), max=num_bins - 1)
    counts = torch.zeros(num_bins, dtype=probs.dtype, device=probs.device).index_add_(0, bins, torch.ones_like(correct))
    acc = torch.zeros_like(counts).index_add_(0, bins, correct)
    conf = torch.zeros_like(counts).index_add_(0, bins, confidence)
    return (acc - conf).abs().sum() / probs.size(0)
