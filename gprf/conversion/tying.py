"""Sharing hyperparameters between a GPyTorch kernel and its gprf translation, and the input dimension a translation
draws its features for."""

from __future__ import annotations

from gpytorch.kernels import Kernel

from gprf.conversion.registry import Context
from gprf.kernels.exact_expression import tie_priors


def tie(target: Kernel, source: Kernel, *raw_names: str) -> Kernel:
    """Make ``target`` use ``source``'s parameters ``raw_names`` (the very ``Parameter`` objects), their constraints
    and ``source``'s own priors: one source of truth, so training either kernel trains both."""
    for raw_name in raw_names:
        parameter = getattr(source, raw_name)
        setattr(target, raw_name, parameter)
        target.register_constraint(raw_name, getattr(source, f"{raw_name}_constraint"))
    tie_priors(target, source)
    return target.to(getattr(source, raw_names[0])) if raw_names else target


def input_dim(kernel: Kernel, context: Context) -> int:
    """The number of input columns ``kernel`` sees: ``len(active_dims)``, else ``ard_num_dims``, else the call's
    ``num_dims``; a mismatch between them is a ``ValueError`` naming the part."""
    ard = kernel.ard_num_dims if kernel.ard_num_dims not in (None, 1) else None
    active = None if kernel.active_dims is None else len(kernel.active_dims)
    if active is not None and ard is not None and active != ard:
        raise ValueError(
            context.error(
                kernel,
                f"has active_dims selecting {active} columns but ard_num_dims={ard}",
                f"make them agree (ard_num_dims={active}, or active_dims with {ard} columns)",
            )
        )
    for dim in (active, ard):
        if dim is not None:
            return dim
    if context.num_dims is None:
        raise ValueError(
            context.error(
                kernel,
                "does not tell its input dimension (no active_dims, no ard_num_dims)",
                "pass num_dims=d to gprf.random_features (random features are drawn for a known dimension)",
            )
        )
    return context.num_dims
