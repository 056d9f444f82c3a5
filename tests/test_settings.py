"""gprf.settings.validate_inputs switches the NaN/inf check of feature maps."""

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
