"""SignedPartKernel: the PSD parts of a signed random-feature kernel, ordinary feature kernels on the same draws."""

from __future__ import annotations

import pytest
import torch
from gpytorch.kernels import ScaleKernel

from gprf.kernels import FeatureKernel, SignedPartKernel
from gprf.testing import regression_data, train_by_mll
from tests.helpers.regression import signed_kernel, signed_model


def test_psd_part_trains_by_marginal_likelihood():
    x, y = regression_data(60)
    signed = signed_kernel().base_kernel
    for part, columns in (("positive", 96), ("absolute", 192)):
        psd = signed.psd_part(part)
        assert psd.features(x).shape == (60, columns)
        model = signed_model(x, y, ScaleKernel(psd).double())
        losses = train_by_mll(model, x, y, steps=15)
        assert losses[-1] < losses[0]
        model.eval()
        assert bool((model(x[:4]).variance > 0).all())
    torch.testing.assert_close(
        signed.psd_part()(x).to_dense() - signed(x).to_dense(),
        signed.signed_features(x)[1] @ signed.signed_features(x)[1].mT,
    )


def test_parts_are_views_of_the_signed_draws():
    x, _ = regression_data(15)
    signed = signed_kernel().base_kernel
    positive, absolute = signed.psd_part(), signed.psd_part("absolute")
    assert isinstance(positive, FeatureKernel) and positive.signed_kernel is signed
    a, b = signed.signed_features(x)
    torch.testing.assert_close(positive.features(x), a, rtol=0, atol=0)
    torch.testing.assert_close(absolute.features(x), torch.cat([a, b], dim=-1), rtol=0, atol=0)
    assert (positive.root_dim, absolute.root_dim) == (signed.root_dim, 2 * signed.root_dim)
    # A view, not a copy: the parts follow the signed kernel's lengthscale and redraws.
    signed.lengthscale = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    signed.resample_features(torch.Generator().manual_seed(1))
    torch.testing.assert_close(positive.features(x), signed.signed_features(x)[0], rtol=0, atol=0)


def test_unknown_part_is_refused():
    with pytest.raises(ValueError, match="'positive', 'absolute'"):
        SignedPartKernel(signed_kernel().base_kernel, "negative")
