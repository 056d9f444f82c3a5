"""The checks of :func:`gprf.fit_mll`'s options: each bad value is refused with an error that names the option."""

from __future__ import annotations

import math
from collections.abc import Callable

from gprf.features.unseeded import unseeded_seed

#: Seeds are the range ``torch.Generator.manual_seed`` takes without wrapping around.
_SEED_LIMIT = 2**63


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_count(value: object, name: str, *, minimum: int, optional: bool, meaning: str) -> int | None:
    """An integer ``>= minimum`` (or ``None`` when ``optional``); ``meaning`` says what it counts, for the message."""
    if value is None and optional:
        return None
    if not _is_int(value):
        accepted = f"an integer >= {minimum}" + (" or None" if optional else "")
        raise TypeError(f"{name} must be {accepted} ({meaning}), got {type(value).__name__} {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum} ({meaning}), got {value}.")
    return value


def check_positive_seconds(value: object, name: str) -> float | None:
    """Positive seconds (``math.inf`` allowed) or ``None``."""
    if value is None:
        return None
    if not _is_real(value):
        raise TypeError(f"{name} must be positive seconds or None, got {type(value).__name__} {value!r}.")
    if not value > 0:  # also refuses NaN
        raise ValueError(f"{name} must be positive seconds or None, got {value!r}.")
    return float(value)


def check_learning_rate(value: object) -> float:
    if not _is_real(value):
        raise TypeError(f"lr must be a positive finite float, got {type(value).__name__} {value!r}.")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"lr must be a positive finite float (Adam's step size, e.g. 0.1), got {value!r}.")
    return float(value)


def resolve_seed(seed: object) -> int:
    """``seed`` checked, or for ``None`` one derived from torch's global generator state without advancing it
    (repeatable after ``torch.manual_seed``: :func:`gprf.features.unseeded.unseeded_seed`)."""
    if seed is None:
        return unseeded_seed()
    if not _is_int(seed):
        raise TypeError(f"seed must be an integer in [0, 2**63) or None (drawn), got {type(seed).__name__} {seed!r}.")
    if not 0 <= seed < _SEED_LIMIT:
        raise ValueError(f"seed must be an integer in [0, 2**63) or None (drawn), got {seed}.")
    return seed


def check_flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}.")
    return value


def check_callback(callback: object) -> Callable[[str, float], None] | None:
    if callback is not None and not callable(callback):
        raise TypeError(
            f"callback must be callable as callback(stage, seconds) or None, got {type(callback).__name__}."
        )
    return callback


def check_choice(value: object, name: str, choices: tuple[str, ...], meaning: str) -> str:
    """One of ``choices`` (strings); ``meaning`` says what the option decides, for the message."""
    accepted = " or ".join(repr(choice) for choice in choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be {accepted} ({meaning}), got {type(value).__name__} {value!r}.")
    if value not in choices:
        raise ValueError(f"{name} must be {accepted} ({meaning}), got {value!r}.")
    return value
