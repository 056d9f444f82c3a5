"""gprf.testing.feature_maps: the readers of maps of either kind, and the contract catching maps that break it (the
contract passing on every gprf map is tests/features/test_base.py::TestEveryFeatureMap)."""

from __future__ import annotations

import pytest
import torch

from gprf.features import PolynomialSketch, RandomFourierFeatures, SignedRandomFeatures, delta_gaussian_spectrum
from gprf.testing import (
    FeatureMapTestCase,
    all_draws,
    build_in,
    check_resample,
    kernel_estimate,
    paired_estimate,
    random_buffers,
    real_roots,
)

X = 0.5 * torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_readers_of_a_complex_map():
    sketch = build_in(torch.float64, PolynomialSketch, 3, 8, 2, "srht", complex=True, seed=0)
    phi = sketch(X)
    (root,) = real_roots(sketch, X)
    torch.testing.assert_close(root, torch.cat([phi.real, phi.imag], -1), rtol=0, atol=0)
    torch.testing.assert_close(kernel_estimate(sketch, X), (phi @ phi.conj().mT).real)
    torch.testing.assert_close(paired_estimate(sketch, X, X.flip(0)), (phi * phi.flip(0).conj()).sum(-1).real)
    assert set(random_buffers(sketch)) == set(sketch._random_buffer_names)


def test_readers_of_a_signed_map():
    signed = build_in(
        torch.float64, SignedRandomFeatures, 3, 6, delta_gaussian_spectrum([1.5, -1.0], [1.0, 0.4]), seed=0
    )
    a, b = signed(X)
    assert all(torch.equal(r, e) for r, e in zip(real_roots(signed, X), (a, b), strict=True))
    torch.testing.assert_close(kernel_estimate(signed, X), a @ a.mT - b @ b.mT)
    torch.testing.assert_close(paired_estimate(signed, X, X), (a * a).sum(-1) - (b * b).sum(-1))
    assert all_draws(signed) and all(draw.dtype == torch.float64 for draw in all_draws(signed).values())


def test_build_in_creates_the_draws_in_the_dtype_and_restores_the_default():
    previous = torch.get_default_dtype()
    single = build_in(torch.float32, RandomFourierFeatures, 3, 8, seed=0)
    assert single.frequencies.dtype == torch.float32 and torch.get_default_dtype() is previous


def test_check_resample_on_fourier_features(float64):
    original = check_resample(lambda **kwargs: RandomFourierFeatures(3, 8, **kwargs), X)
    assert original.shape == (2, 5, 8)


# ---------------------------------------------------------------------------------------- maps that break the contract
class _StaleVersion(RandomFourierFeatures):
    """Redraws without a new draw version: caches built on the old draws would not notice."""

    def resample(self, generator=None):
        version = self.draw_version
        super().resample(generator)
        self.draw_version = version


class _Biased(RandomFourierFeatures):
    """Features scaled by 1.2: the estimate is 1.44 times the kernel."""

    def _featurize(self, x):
        return 1.2 * super()._featurize(x)


class _Unchecked(RandomFourierFeatures):
    """Skips the input checks."""

    def forward(self, x):
        return self._featurize(x)


def _case(map_class: type[RandomFourierFeatures]) -> FeatureMapTestCase:
    class Case(FeatureMapTestCase):
        def create_feature_map(self, batch_shape, seed):
            return map_class(3, 12, batch_shape=batch_shape, seed=seed)

    return Case()


def test_the_contract_passes_a_correct_map():
    case = _case(RandomFourierFeatures)
    case.test_resample_changes_the_draws_and_bumps_the_version()
    case.test_unbiased_within_the_closed_form_standard_error()
    case.test_nan_input_is_a_clear_error()


def test_the_contract_catches_a_resample_without_a_new_version():
    with pytest.raises(AssertionError):
        _case(_StaleVersion).test_resample_changes_the_draws_and_bumps_the_version()


def test_the_contract_catches_a_biased_estimate():
    with pytest.raises(AssertionError, match="off its expectation by"):
        _case(_Biased).test_unbiased_within_the_closed_form_standard_error()


def test_the_contract_catches_unchecked_inputs():
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        _case(_Unchecked).test_nan_input_is_a_clear_error()


def test_a_case_without_a_factory_says_what_to_implement():
    with pytest.raises(NotImplementedError, match=r"must implement create_feature_map\(batch_shape, seed\)"):
        FeatureMapTestCase().build()
