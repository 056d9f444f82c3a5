"""Global switches, used as context managers (GPyTorch style)."""

from __future__ import annotations

import torch


class validate_inputs:
    """Whether feature maps check their inputs for NaN/inf.

    ``"auto"`` (default) checks CPU tensors only: the check is free there, while on CUDA it forces a
    host synchronisation per forward pass. Non-finite CUDA training data still surface as a clear error
    from the factorisation of the marginal likelihood or the prediction caches (which synchronise once per
    factorisation anyway). ``True`` checks on every device, ``False`` never checks.

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


class factor_dtype:
    r"""The dtype in which every :math:`F\times F` capacitance (and every :math:`N\times N` matrix of the
    few-points route) is formed and factored, and in which streamed sufficient statistics are summed.

    ``torch.float64`` (default) keeps float32 models accurate at small noise: the two terms of the
    inverse quadratic form nearly cancel there, and the capacitance :math:`I + R^\top\Sigma^{-1}R` has a
    condition number up to :math:`1 + \lVert R\rVert^2/\sigma^2`. ``torch.float32`` trades that accuracy
    for speed on GPUs with slow float64 arithmetic.

    Example:
        >>> with gprf.settings.factor_dtype(torch.float32):
        ...     loss = -mll(model(train_x), train_y)
    """

    _value: torch.dtype = torch.float64

    def __init__(self, dtype: torch.dtype) -> None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"factor_dtype takes torch.float32 or torch.float64, got {dtype!r}.")
        self.dtype = dtype
        self.prev = torch.float64

    @classmethod
    def value(cls) -> torch.dtype:
        """The current factor dtype."""
        return cls._value

    @classmethod
    def complex_value(cls) -> torch.dtype:
        """The complex dtype of the same precision (Hermitian capacitances of complex features)."""
        return torch.complex128 if cls._value == torch.float64 else torch.complex64

    def __enter__(self) -> None:
        self.prev = factor_dtype._value
        factor_dtype._value = self.dtype

    def __exit__(self, *args: object) -> bool:
        factor_dtype._value = self.prev
        return False
