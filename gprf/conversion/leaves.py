r"""Translations of single GPyTorch kernels: stationary targets such as RBF and Matérn (random Fourier features),
linear (exact root),
polynomial (sketches with the offset as an input coordinate), task kernels (exact low-rank root), and gprf feature
kernels (already approximated: kept as they are)."""

from __future__ import annotations

from gpytorch.kernels import IndexKernel, Kernel, LinearKernel, PolynomialKernel

from gprf.conversion.registry import Context, register_translation
from gprf.conversion.tying import input_dim, tie
from gprf.features import StationarySpectrum
from gprf.kernels import (
    FeatureKernel,
    IndexRootKernel,
    LinearFeatureKernel,
    OffsetPolynomialSketchKernel,
    RandomFourierKernel,
)
from gprf.kernels.exact import StationaryTarget, find_exact_target, stationary_targets


def stationary_spectrum_of(kernel: Kernel, context: Context) -> StationarySpectrum:
    """The spectrum of a stationary target (GPyTorch's RBF or Matérn kernel, ...): its row of the exact-target
    table."""
    target = find_exact_target(kernel)
    if not isinstance(target, StationaryTarget):
        raise TypeError(
            context.error(
                kernel,
                "is none of the stationary targets with random Fourier features",
                f"use one of {', '.join(map(repr, stationary_targets()))}",
            )
        )
    return target.spectrum


def even_features(kernel: Kernel, context: Context) -> int:
    """The part's features rounded down to an even number (cosine and sine per frequency), at least two."""
    features = context.features(kernel)
    if features < 2:
        raise ValueError(
            context.error(
                kernel,
                f"gets {features} random Fourier feature(s) but needs at least 2 (a cosine and a sine)",
                "raise num_features or this part's budget",
            )
        )
    return features - features % 2


@register_translation(StationaryTarget)
def translate_fourier(kernel: Kernel, context: Context) -> Kernel:
    """:class:`~gprf.kernels.RandomFourierKernel` of the target's spectrum sharing the lengthscale (parameter,
    constraint, prior)."""
    num_dims = input_dim(kernel, context)
    gprf_kernel = RandomFourierKernel(
        even_features(kernel, context),
        num_dims=num_dims,
        kernel=stationary_spectrum_of(kernel, context),
        sampler=context.sampler,
        seed=context.next_seed(),
        ard_num_dims=kernel.ard_num_dims,
        batch_shape=kernel.batch_shape,
        active_dims=kernel.active_dims,
    )
    return tie(gprf_kernel, kernel, "raw_lengthscale")


@register_translation(LinearKernel)
def translate_linear(kernel: LinearKernel, context: Context) -> Kernel:
    """:class:`~gprf.kernels.LinearFeatureKernel` (exact root, :math:`d` columns) sharing ``raw_variance``."""
    gprf_kernel = LinearFeatureKernel(
        num_dims=input_dim(kernel, context),
        ard_num_dims=kernel.ard_num_dims,
        batch_shape=kernel.batch_shape,
        active_dims=kernel.active_dims,
    )
    return tie(gprf_kernel, kernel, "raw_variance")


@register_translation(PolynomialKernel)
def translate_polynomial(kernel: PolynomialKernel, context: Context) -> Kernel:
    """:class:`~gprf.kernels.OffsetPolynomialSketchKernel` (the offset as a constant input coordinate)."""
    power = float(kernel.power)
    if not power.is_integer() or power < 0:
        raise TypeError(
            context.error(kernel, f"with power={kernel.power} has no polynomial sketch", "use an integer power >= 0")
        )
    gprf_kernel = OffsetPolynomialSketchKernel(
        context.features(kernel),
        num_dims=input_dim(kernel, context),
        degree=int(power),
        sketch=context.sketch,
        seed=context.next_seed(),
        batch_shape=kernel.batch_shape,
        active_dims=kernel.active_dims,
    )
    return tie(gprf_kernel, kernel, "raw_offset")


@register_translation(IndexKernel)
def translate_index(kernel: IndexKernel, context: Context) -> Kernel:
    """:class:`~gprf.kernels.IndexRootKernel` holding the task kernel itself (exact root, rank + tasks columns)."""
    try:
        return IndexRootKernel(kernel)
    except TypeError as error:
        raise TypeError(f"{context.error(kernel, 'has no exact task root', 'use IndexKernel')} ({error})") from error


@register_translation(FeatureKernel)
def keep_feature_kernel(kernel: FeatureKernel, context: Context) -> Kernel:
    """A gprf feature kernel is already an approximation: kept, with its own features."""
    return kernel
