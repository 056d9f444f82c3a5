"""gprf.kernels.exact.targets: the table of exact targets — every row builds its kernel, a kernel finds its row, each
Matérn name and smoothness pair is written once (the spectrum's), names are unique — and a new stationary family added
in a temporary module through the documented extension points alone (a spectrum, an exact kernel, one row) gets
``exact()``, ``gprf.random_features``, ``gprf.fit_mll`` and BoTorch's pathwise sampling."""

from __future__ import annotations

import importlib.util
import math
import sys
import textwrap

import gpytorch
import pytest
import torch
from gpytorch.kernels import (
    AdditiveStructureKernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    RBFKernel,
    RQKernel,
    ScaleKernel,
)
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf
from gprf.features import SPECTRA, RandomFourierFeatures, Skeleton
from gprf.kernels import AdditiveFeatureKernel, RandomFourierKernel, exact_expression
from gprf.kernels.exact import (
    EXACT_TARGETS,
    ArcCosineKernel,
    CompositionalKernel,
    ExactTarget,
    StationaryTarget,
    exact_target,
    find_exact_target,
    register_exact_target,
    stationary_targets,
)
from gprf.testing import ExactGPModel
from tests.helpers.gaussian_samples import assert_paths_follow_the_posterior

Z_BOUND = 4.5  # two-sided, over a few dozen z-scores per test


@pytest.fixture
def restored_table():
    """The table as it was after the test (a test may register rows)."""
    rows = dict(EXACT_TARGETS)
    yield
    EXACT_TARGETS.clear()
    EXACT_TARGETS.update(rows)


# ---------------------------------------------------------------------------------------- the table
@pytest.mark.parametrize(
    ("name", "arguments", "kernel_type"),
    [
        ("rbf", {}, RBFKernel),
        ("matern12", {}, MaternKernel),
        ("matern52", {}, MaternKernel),
        ("linear", {}, LinearKernel),
        ("offset_polynomial", {"power": 3}, PolynomialKernel),
        ("arccos0", {}, ArcCosineKernel),
        ("compositional", {"skeleton": Skeleton.fully_connected(2, 1, "relu")}, CompositionalKernel),
    ],
)
def test_every_row_builds_its_kernel_and_finds_itself(name, arguments, kernel_type):
    target = exact_target(name)
    kernel = target.build(**arguments)
    assert type(kernel) is kernel_type
    assert find_exact_target(kernel) is target


def test_each_matern_name_and_nu_come_from_the_spectrum():
    rows = {target.name: target for target in stationary_targets()}
    assert list(rows) == ["rbf", "matern12", "matern32", "matern52"]
    for name in ("matern12", "matern32", "matern52"):
        assert rows[name].spectrum is SPECTRA[name]
        assert rows[name].build().nu == SPECTRA[name].nu == dict(rows[name].fixed)["nu"]
    assert find_exact_target(MaternKernel(nu=1.5)).name == "matern32"
    assert exact_target("gaussian") is exact_target("rbf")  # the Maclaurin maps' name of the RBF kernel


def test_a_subclass_finds_its_base_row_unless_it_has_its_own(restored_table):
    class MyRBF(RBFKernel):
        pass

    assert find_exact_target(MyRBF()) is exact_target("rbf")
    own = register_exact_target(ExactTarget("my_rbf", MyRBF))
    assert find_exact_target(MyRBF()) is own
    assert find_exact_target(RQKernel()) is None


def test_names_are_unique_and_unknown_names_are_refused(restored_table):
    with pytest.raises(ValueError, match="exact target named 'rbf' is already registered"):
        register_exact_target(ExactTarget("rbf", RBFKernel))
    with pytest.raises(ValueError, match="exact target named 'gaussian' is already registered"):
        register_exact_target(ExactTarget("other", RQKernel, aliases=("gaussian",)))
    with pytest.raises(ValueError, match="Unknown exact target 'cosine'; registered targets are: 'rbf', 'gaussian'"):
        exact_target("cosine")
    with pytest.raises(TypeError, match="kernel_type must be a GPyTorch Kernel class"):
        ExactTarget("cosine", torch.nn.Linear)
    with pytest.raises(TypeError, match="spectrum must be a gprf.features.StationarySpectrum, got str"):
        StationaryTarget("rbf", RBFKernel)
    with pytest.raises(TypeError, match="register_exact_target takes an ExactTarget, got RBFKernel"):
        register_exact_target(RBFKernel())


# ---------------------------------------------------------------------------------------- a new stationary family
# Its feature module: the Cauchy kernel k(r) = 1 / (1 + r^2 / 2) is E[exp(-s^2 r^2 / 2)] with s^2 ~ Exp(1), a scale
# mixture of Gaussians, so its spectral law is w = s z with that radial scale (inverse CDF sqrt(-log(1 - u))).
FEATURE_MODULE = """
import torch

from gprf.features import StationarySpectrum


class CauchySpectrum(StationarySpectrum):
    name = "toy_cauchy"

    def profile(self, r):
        return 1.0 / (1.0 + r.square() / 2)

    def radial_scale(self, shape, generator):
        return torch.empty(shape, dtype=torch.float64).exponential_(generator=generator).sqrt()

    def radial_scale_from_uniform(self, u):
        return torch.sqrt(-torch.log1p(-u.double()))
"""
# Its kernel module: the exact kernel (GPyTorch has none) and its row of the table.
KERNEL_MODULE = """
from gpytorch.kernels import Kernel

from gprf.kernels.exact import StationaryTarget, register_exact_target
from toy_cauchy_features import CauchySpectrum


class CauchyKernel(Kernel):
    has_lengthscale = True

    def forward(self, x1, x2, diag=False, **params):
        squared = self.covar_dist(x1.div(self.lengthscale), x2.div(self.lengthscale), diag=diag, square_dist=True)
        return 1.0 / (1.0 + squared / 2)


register_exact_target(StationaryTarget(CauchySpectrum(), CauchyKernel))
"""


@pytest.fixture
def toy_family(tmp_path, monkeypatch, restored_table):
    """The toy family's two modules, written to a temporary folder and imported; its row leaves with the test."""
    for name, source in (("toy_cauchy_features", FEATURE_MODULE), ("toy_cauchy_kernels", KERNEL_MODULE)):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    features = importlib.import_module("toy_cauchy_features")
    kernels = importlib.import_module("toy_cauchy_kernels")
    yield features, kernels
    for name in ("toy_cauchy_features", "toy_cauchy_kernels"):
        sys.modules.pop(name, None)


def _x(n: int, d: int = 2, seed: int = 0) -> torch.Tensor:
    return 2 * torch.rand(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 1


@pytest.mark.parametrize("sampler", ["iid", "orthogonal", "qmc"])
def test_a_new_stationary_family_has_random_fourier_features_and_its_exact_kernel(toy_family, sampler):
    features, kernels = toy_family
    spectrum = features.CauchySpectrum()
    kernel = RandomFourierKernel(feature_map=RandomFourierFeatures(2, 64, kernel=spectrum, sampler=sampler, seed=0))
    kernel = kernel.double()
    kernel.lengthscale = 0.8
    exact = kernel.exact()
    assert type(exact) is kernels.CauchyKernel and exact.raw_lengthscale is kernel.raw_lengthscale
    x, y = _x(12), _x(12, seed=1)
    # The map's expected kernel is the exact kernel (the spectral law reproduces the profile: Bochner).
    torch.testing.assert_close(kernel.feature_map.expected_kernel(x / 0.8, y / 0.8), exact(x, y, diag=True))
    if sampler != "iid":
        return
    # Monte Carlo over draws against the closed-form iid variance (1 + k(2 delta)) / 2 - k(delta)^2, over m.
    num_draws = 400
    values = []
    for draw in range(num_draws):
        kernel.resample_features(torch.Generator().manual_seed(draw))
        values.append(kernel(x, y, diag=True).detach())
    variance = kernel.feature_map.variance(x / 0.8, y / 0.8)
    z = (torch.stack(values).mean(0) - exact(x, y, diag=True).detach()) / (variance / num_draws).sqrt()
    assert z.abs().max() < Z_BOUND


def test_random_features_converts_the_new_target_alone_in_sums_and_in_additive_structure(toy_family):
    _, kernels = toy_family
    target = ScaleKernel(kernels.CauchyKernel(ard_num_dims=2)) + ScaleKernel(RBFKernel())
    approximation = gprf.random_features(target, 128, sampler="orthogonal", seed=0, num_dims=2)
    cauchy = approximation.kernels[0].base_kernel
    assert isinstance(cauchy, RandomFourierKernel) and cauchy.feature_map.kernel == "toy_cauchy"
    assert cauchy.feature_map.sampler == "orthogonal" and cauchy.num_features == 64
    assert cauchy.raw_lengthscale is target.kernels[0].base_kernel.raw_lengthscale
    assert type(exact_expression(approximation).kernels[0].base_kernel) is kernels.CauchyKernel
    additive = gprf.random_features(AdditiveStructureKernel(kernels.CauchyKernel(), num_dims=3), 24, seed=0)
    assert isinstance(additive, AdditiveFeatureKernel) and additive.exact().kernel == "toy_cauchy"
    x, one_dimensional = _x(5, d=3), kernels.CauchyKernel().double()
    per_dim = sum(one_dimensional(x[:, [j]]).to_dense() for j in range(3))
    torch.testing.assert_close(additive.double().exact()(x).to_dense(), per_dim)


def _data(n: int = 60, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    x = _x(n, seed=seed)
    y = torch.sin(3 * x[:, 0]) + x[:, 1] ** 2
    return x, y + 0.05 * torch.randn(n, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)


def test_fit_mll_fits_a_model_of_the_new_family(toy_family):
    _, kernels = toy_family
    x, y = _data()
    covar_module = gprf.random_features(ScaleKernel(kernels.CauchyKernel(ard_num_dims=2)), 128, seed=0).double()
    model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), covar_module).double()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)

    def full_mll() -> float:
        mll.train()
        with torch.no_grad():
            return float(mll(model(x), y))

    before = full_mll()
    gprf.fit_mll(mll, tune_steps=30)
    after = full_mll()
    assert math.isfinite(after) and after > before, (before, after)
    # The exact target shares the fitted lengthscale.
    exact = exact_expression(covar_module)
    assert type(exact.base_kernel) is kernels.CauchyKernel
    torch.testing.assert_close(exact.base_kernel.lengthscale, covar_module.base_kernel.lengthscale)


@pytest.mark.botorch
def test_botorch_pathwise_samples_of_the_new_family_follow_the_posterior(toy_family):
    from botorch.models import SingleTaskGP

    _, kernels = toy_family
    num_paths = 3000
    x, y = _data(40)
    covar_module = gprf.random_features(ScaleKernel(kernels.CauchyKernel(ard_num_dims=2)), 64, seed=0).double()
    model = SingleTaskGP(x, y.unsqueeze(-1), covar_module=covar_module).eval()
    test_x = _x(6, seed=3)
    assert_paths_follow_the_posterior(model, test_x, num_paths, Z_BOUND)
