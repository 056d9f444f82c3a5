"""Argument validation shared by feature maps and kernels (clear errors naming the argument)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from gprf.exceptions import NonFiniteTrainingDataError
from gprf.settings import validate_inputs


def check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return value


def check_choice(value: str, name: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"Unknown {name} {value!r}; valid choices are: {', '.join(map(repr, choices))}.")
    return value


def check_generator(generator: object) -> torch.Generator | None:
    """``generator`` itself when it is a ``torch.Generator`` or ``None``; a ``TypeError`` naming the fix otherwise (a
    seed passed where a generator is expected would fail deep inside torch's samplers)."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}; pass "
            f"torch.Generator().manual_seed({generator!r}) for a seeded draw."
        )
    return generator


def resolve_num_dims(num_dims: int | None, ard_num_dims: int | None, active_dims, owner: str) -> int:
    """The input dimension a kernel is built for (feature draws need it up front): ``num_dims``, else
    ``ard_num_dims``, else the number of ``active_dims``; ``owner`` names the kernel in the errors."""
    if num_dims is None:
        num_dims = ard_num_dims
    if num_dims is None and active_dims is not None:
        num_dims = len(active_dims)
    if num_dims is None:
        raise ValueError(
            f"{owner} needs the input dimension to draw its features at construction: pass num_dims=d "
            "(or ard_num_dims=d)."
        )
    check_positive_int(num_dims, f"{owner}: num_dims")
    if ard_num_dims is not None and ard_num_dims not in (1, num_dims):
        raise ValueError(f"{owner}: ard_num_dims={ard_num_dims} does not match num_dims={num_dims}.")
    if active_dims is not None and len(active_dims) != num_dims:
        # GPyTorch selects the active columns before the kernel runs: the kernel then sees len(active_dims) columns.
        raise ValueError(
            f"{owner}: num_dims={num_dims} does not match the {len(active_dims)} active_dims {list(active_dims)} (the "
            f"kernel sees only the active columns); pass num_dims={len(active_dims)} or leave it out."
        )
    return num_dims


def check_features_input(x: Tensor, input_dim: int, owner: str) -> None:
    """Check the trailing dimension, the dtype and (where cheap) finiteness of a feature-map input."""
    if not torch.is_tensor(x):
        raise TypeError(f"{owner} expects a torch.Tensor input, got {type(x).__name__}.")
    if x.dim() < 2:
        raise ValueError(f"{owner} expects inputs of shape (..., n, {input_dim}), got shape {tuple(x.shape)}.")
    if x.size(-1) != input_dim:
        raise ValueError(
            f"{owner} was built for input dimension {input_dim} but got inputs with {x.size(-1)} columns "
            f"(shape {tuple(x.shape)}); pass num_dims={x.size(-1)} when constructing it."
        )
    if x.is_complex() or not x.is_floating_point():
        raise TypeError(f"{owner} expects real floating-point inputs, got dtype {x.dtype}.")
    check_finite_inputs(x, owner)


def check_finite_inputs(x: Tensor, owner: str) -> None:
    """Raise a ``ValueError`` naming the rows when ``x`` holds NaN or infinite values and
    :class:`~gprf.settings.validate_inputs` applies to it (CPU tensors by default: free there)."""
    if validate_inputs.applies_to(x) and not bool(torch.isfinite(x).all()):
        raise ValueError(
            f"{owner} received NaN or infinite inputs in {describe_nonfinite_rows(x)} (a model in training mode "
            "evaluates its training inputs, train_x); remove or impute them before featurizing."
        )


def describe_nonfinite_rows(x: Tensor, shown: int = 5) -> str:
    """``"2 of 20 rows (rows 3, 7)"``: how many rows of ``x`` ``(..., n, d)`` hold a NaN or infinite value (in any
    batch member) and the first ``shown`` of them (one host synchronisation)."""
    flagged = (~torch.isfinite(x)).any(-1).reshape(-1, x.size(-2)).any(0)
    rows = flagged.nonzero().squeeze(-1).tolist()
    listed = ", ".join(map(str, rows[:shown])) + (", ..." if len(rows) > shown else "")
    return f"{len(rows)} of {x.size(-2)} rows (rows {listed})"


def check_training_inputs(inputs: Sequence[Tensor]) -> None:
    """Raise :class:`~gprf.exceptions.NonFiniteTrainingDataError` naming the rows when a model's training inputs hold
    NaN or infinite values: GPyTorch's ``ExactGP`` (with ``gpytorch.settings.debug`` on, its default) would instead
    report "You must train on the training inputs!", since NaN never equals itself."""
    for index, x in enumerate(inputs):
        if torch.is_tensor(x) and x.is_floating_point() and not bool(torch.isfinite(x).all()):
            which = "" if len(inputs) == 1 else f" (input {index})"
            raise NonFiniteTrainingDataError(
                f"The training inputs{which} hold NaN or infinite values in {describe_nonfinite_rows(x)}; remove or "
                "impute those points (model.set_train_data) before training."
            )
