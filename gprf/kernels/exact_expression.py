r"""The exact kernel expression behind an expression of feature kernels, sharing its hyperparameters."""

from __future__ import annotations

from gpytorch.kernels import AdditiveKernel, Kernel, ProductKernel, ScaleKernel


def tie_priors(target: Kernel, source: Kernel) -> None:
    """Register ``source``'s own priors (not its sub-kernels') on ``target``: the same prior objects and closures.

    GPyTorch's prior closures take the module as their argument (``lambda m: m.lengthscale``), so they read the
    target's (shared) hyperparameter when the target's marginal likelihood adds them.
    """
    own = {entry[0] for entry in target.named_priors()}
    for name, _, prior, closure, setting_closure in source.named_priors():
        if "." not in name and name not in own:
            target.register_prior(name, prior, closure, setting_closure)


def scale_like(base: Kernel, source: ScaleKernel) -> ScaleKernel:
    """``ScaleKernel(base)`` sharing ``source``'s outputscale parameter, constraint and prior (one source of truth:
    training either kernel trains both)."""
    scaled = ScaleKernel(base, batch_shape=source.batch_shape, active_dims=source.active_dims)
    scaled.raw_outputscale = source.raw_outputscale
    scaled.register_constraint("raw_outputscale", source.raw_outputscale_constraint)
    tie_priors(scaled, source)
    return scaled.to(source.raw_outputscale)


def exact_expression(kernel: Kernel) -> Kernel:
    """The exact kernel that ``kernel`` approximates, sharing every hyperparameter.

    ``ScaleKernel`` wrappers are kept (sharing their outputscales), GPyTorch's own ``AdditiveKernel`` and
    ``ProductKernel`` are rebuilt around their parts' exact expressions; every other kernel answers with its own
    ``exact()`` (feature kernels, their sums and products). GPyTorch kernels without ``exact()`` are already exact and
    are returned as they are.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"exact_expression takes a GPyTorch Kernel, got {type(kernel).__name__}.")
    if isinstance(kernel, ScaleKernel):
        return scale_like(exact_expression(kernel.base_kernel), kernel)
    if type(kernel) in (AdditiveKernel, ProductKernel):  # GPyTorch's own sums and products of such kernels
        return type(kernel)(*(exact_expression(part) for part in kernel.kernels))
    exact = getattr(kernel, "exact", None)
    return exact() if callable(exact) else kernel
