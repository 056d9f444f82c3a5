"""gprf.settings: the NaN/inf check of feature maps and the dtype of every factorisation."""

from __future__ import annotations

import pytest
import torch

import gprf
from gprf.features import RandomFourierFeatures


def test_validate_inputs_modes():
    features = RandomFourierFeatures(2, 8, seed=0).double()
    bad = torch.tensor([[float("inf"), 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="NaN or infinite"):
        features(bad)  # "auto" checks CPU tensors
    with gprf.settings.validate_inputs(False):
        assert not torch.isfinite(features(bad)).all()
    with pytest.raises(ValueError, match="NaN or infinite"):
        features(bad)  # restored on exit
    with pytest.raises(ValueError, match="True, False or 'auto'"):
        gprf.settings.validate_inputs("sometimes")


def test_factor_dtype_modes():
    assert gprf.settings.factor_dtype.value() == torch.float64
    assert gprf.settings.factor_dtype.complex_value() == torch.complex128
    with gprf.settings.factor_dtype(torch.float32):
        assert gprf.settings.factor_dtype.value() == torch.float32
        assert gprf.settings.factor_dtype.complex_value() == torch.complex64
    assert gprf.settings.factor_dtype.value() == torch.float64  # restored on exit
    with pytest.raises(ValueError, match="torch.float32 or torch.float64"):
        gprf.settings.factor_dtype(torch.float16)
