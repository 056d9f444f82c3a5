"""Global switches, used as context managers (GPyTorch style)."""

from __future__ import annotations

import torch


class validate_inputs:
    """Whether feature maps check their inputs for NaN/inf.

    ``"auto"`` (default) checks CPU tensors only: the check is free there, while on CUDA it forces a
    host synchronisation per forward pass. Non-finite CUDA inputs still surface as a ``NanError`` from
    the Cholesky factorisation of the marginal likelihood. ``True`` checks on every device, ``False``
    never checks.

    Example:
        >>> with gprf.settings.validate_inputs(True):
        ...     loss = -mll(model(train_x), train_y)
    """

    _state: bool | str = "auto"

    def __init__(self, state: bool | str = True) -> None:
        if state not in (True, False, "auto"):
            raise ValueError(f"validate_inputs takes True, False or 'auto', got {state!r}.")
        self.state = state
        self.prev: bool | str = "auto"

    @classmethod
    def applies_to(cls, x: torch.Tensor) -> bool:
        if cls._state == "auto":
            return x.device.type == "cpu"
        return bool(cls._state)

    def __enter__(self) -> None:
        self.prev = validate_inputs._state
        validate_inputs._state = self.state

    def __exit__(self, *args: object) -> bool:
        validate_inputs._state = self.prev
        return False
