"""gprf.kernels.feature_kernel: the feature-kernel protocol — evaluations to a feature root, sums that keep one root,
refused products and dense sums — and the contract every exported feature-kernel class keeps.

The contract (``KERNEL_CASES``) covers every exported concrete subclass of FeatureKernel (one real root) and of its
sibling SignedFeatureKernel (two roots and a signature, gprf/kernels/signed_feature_kernel.py): both are the
protocol by which a kernel hands its roots to everything downstream, so one table and one set of checks serve both.
A test fails when an exported class has no factory, so a new kernel cannot skip the contract.
"""

from __future__ import annotations

import copy
import pickle

import gpytorch
import pytest
import torch
from gpytorch.kernels import Kernel, RBFKernel, ScaleKernel
from linear_operator.operators import LowRankRootLinearOperator, MatmulLinearOperator

import gprf
import gprf.kernels
from gprf.exceptions import LowRankStructureWarning
from gprf.features import Skeleton
from gprf.features.versions import feature_versions
from gprf.kernels import (
    AdditiveFeatureKernel,
    ArcCosineQuadratureKernel,
    CompositionalRandomFeatureKernel,
    FeatureKernel,
    FeatureMapOwner,
    FeatureProductKernel,
    FeatureSumKernel,
    IndexRootKernel,
    LinearFeatureKernel,
    LocalizedMaclaurinKernel,
    MaclaurinKernel,
    OffsetPolynomialSketchKernel,
    PolynomialSketchKernel,
    QuadratureKernel,
    RandomFourierKernel,
    SignedFeatureKernel,
    SignedPartKernel,
    SignedRandomFeatureKernel,
    is_feature_kernel,
    unwrap_scale_kernel,
)
from gprf.kernels.feature_kernel import same_inputs
from gprf.linalg import FeatureRootLinearOperator, SignedRootLinearOperator, feature_root
from gprf.testing import regression_data
from tests.helpers.exports import concrete_exported_classes
from tests.helpers.regression import SPECTRUM, make_model


@pytest.fixture
def x64():
    return torch.randn(30, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _kernel64(**kwargs) -> RandomFourierKernel:
    return RandomFourierKernel(128, num_dims=3, seed=0, **kwargs).double()


def test_structure_of_evaluations(x64):
    kernel = _kernel64()
    assert isinstance(kernel(x64).evaluate_kernel(), LowRankRootLinearOperator)
    assert isinstance(kernel(x64, x64[:5]).evaluate_kernel(), MatmulLinearOperator)
    # Equal values in a different tensor are recognised as the same points.
    assert isinstance(kernel(x64, x64.clone()).evaluate_kernel(), LowRankRootLinearOperator)
    features = kernel.features(x64)
    torch.testing.assert_close(kernel(x64).to_dense(), features @ features.mT)
    torch.testing.assert_close(kernel(x64, diag=True), (features**2).sum(-1))


def test_feature_sum_keeps_one_root(x64):
    k1 = ScaleKernel(RandomFourierKernel(64, num_dims=3, seed=0)).double()
    k2 = ScaleKernel(RandomFourierKernel(32, num_dims=3, kernel="matern32", seed=1)).double()
    k1.outputscale, k2.outputscale = 2.0, 0.5
    total = FeatureSumKernel(k1, k2)
    covar = total(x64).evaluate_kernel()
    assert isinstance(covar, LowRankRootLinearOperator) and covar.root.shape[-1] == 96
    torch.testing.assert_close(covar.to_dense(), k1(x64).to_dense() + k2(x64).to_dense())
    direct = k1.base_kernel + k2.base_kernel
    assert isinstance(direct, FeatureSumKernel)
    torch.testing.assert_close(direct(x64).to_dense(), k1.base_kernel(x64).to_dense() + k2.base_kernel(x64).to_dense())


def test_feature_sum_respects_each_summands_active_dims():
    first = RandomFourierKernel(16, num_dims=1, active_dims=[0], seed=0).double()
    second = ScaleKernel(RandomFourierKernel(16, num_dims=2, active_dims=[1, 2], seed=1)).double()
    total = first + second
    x = torch.rand(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = first(x).to_dense() + second(x).to_dense()
    torch.testing.assert_close(total(x).to_dense(), expected, rtol=0, atol=1e-12)


def test_feature_sum_exact_is_gpytorchs_sum_of_the_tied_exact_summands(x64):
    k1 = ScaleKernel(RandomFourierKernel(64, num_dims=3, seed=0)).double()
    k2 = RandomFourierKernel(32, num_dims=3, kernel="matern32", seed=1).double()
    k1.outputscale = 2.0
    exact = FeatureSumKernel(k1, k2).exact()
    assert isinstance(exact, gpytorch.kernels.AdditiveKernel)
    scaled, matern = exact.kernels
    assert scaled.raw_outputscale is k1.raw_outputscale and matern.raw_lengthscale is k2.raw_lengthscale
    expected = 2.0 * RBFKernel().double()(x64).to_dense() + gpytorch.kernels.MaternKernel(nu=1.5).double()(x64)
    torch.testing.assert_close(exact(x64).to_dense(), expected.to_dense())


def test_products_and_dense_sums_are_refused_or_loud(x64):
    kernel = _kernel64()
    with pytest.raises(TypeError, match="Multiplying a random-feature kernel by RBFKernel is not supported"):
        kernel * RBFKernel()
    assert isinstance(kernel * _kernel64(), FeatureProductKernel)
    with pytest.warns(LowRankStructureWarning, match="dense"):
        mixed = kernel + RBFKernel().double()
    torch.testing.assert_close(mixed(x64).to_dense(), kernel(x64).to_dense() + RBFKernel().double()(x64).to_dense())
    with pytest.raises(NotImplementedError, match="last_dim_is_batch"):
        kernel.forward(x64, x64, last_dim_is_batch=True)


def test_feature_sums_flatten_index_and_expand(x64):
    first = RandomFourierKernel(8, num_dims=3, batch_shape=torch.Size([2]), seed=0).double()
    second = ScaleKernel(
        RandomFourierKernel(8, num_dims=3, batch_shape=torch.Size([2]), seed=1), batch_shape=torch.Size([2])
    )
    third = RandomFourierKernel(4, num_dims=3, batch_shape=torch.Size([2]), seed=2).double()
    total = FeatureSumKernel(FeatureSumKernel(first, second.double()), third)
    assert len(total.kernels) == 3 and total.root_dim == 20  # nested sums are flattened
    covariance = total(x64).to_dense()
    torch.testing.assert_close(total[1](x64).to_dense(), covariance[1], rtol=1e-12, atol=1e-12)
    plain = FeatureSumKernel(RandomFourierKernel(8, num_dims=3, seed=0), RandomFourierKernel(4, num_dims=3, seed=1))
    plain = plain.double()
    expanded = plain.expand_batch(torch.Size([3]))
    torch.testing.assert_close(expanded(x64).to_dense(), plain(x64).to_dense().expand(3, 30, 30))
    with pytest.raises(ValueError, match="at least two kernels"):
        FeatureSumKernel(first)
    with pytest.raises(TypeError, match="only adds random-feature kernels .* got RBFKernel"):
        FeatureSumKernel(first, RBFKernel())


def test_protocol_helpers(x64):
    kernel = _kernel64()
    scaled = ScaleKernel(ScaleKernel(kernel))
    assert unwrap_scale_kernel(scaled) is kernel and is_feature_kernel(scaled) and not is_feature_kernel(RBFKernel())
    assert not is_feature_kernel(kernel.feature_map)
    assert same_inputs(x64, x64) and same_inputs(x64, x64.clone()) and same_inputs(x64, x64[:])
    assert not same_inputs(x64, x64[:5]) and not same_inputs(x64, x64 + 1e-12)
    assert feature_versions(scaled) == (kernel.feature_map.draw_version,)


# ======================================================================================== every kernel class
# Factories ``(batch_shape, seed) -> kernel`` on 3 input columns; the lengthscales are set to non-default values by
# _kernel. Each exported concrete FeatureKernel or SignedFeatureKernel subclass needs at least one.
def _feature_sum(batch_shape, seed):
    scaled = ScaleKernel(
        RandomFourierKernel(8, num_dims=3, batch_shape=batch_shape, seed=seed), batch_shape=batch_shape
    )
    scaled.outputscale = 0.6
    sketch = PolynomialSketchKernel(8, num_dims=3, degree=2, bias=1.0, batch_shape=batch_shape, seed=seed + 1)
    return FeatureSumKernel(scaled, sketch, batch_shape=batch_shape)


def _feature_product(batch_shape, seed):
    # No active_dims: GPyTorch's Kernel.__getitem__ indexes the active_dims buffer like a batch parameter.
    rbf = RandomFourierKernel(8, num_dims=3, batch_shape=batch_shape, seed=seed)
    matern = ScaleKernel(
        RandomFourierKernel(8, num_dims=3, kernel="matern52", batch_shape=batch_shape, seed=seed + 1),
        batch_shape=batch_shape,
    )
    matern.outputscale = 0.6
    return FeatureProductKernel(rbf, matern, num_features=8, method="permutation", seed=seed)


# Exported feature kernels whose contract lives in their own test module, with the reason.
CONTRACT_ELSEWHERE = {
    IndexRootKernel: "task indices as inputs, an exact root (no draws): tests/kernels/test_index_root_kernel.py",
    LinearFeatureKernel: "an exact root (no draws): tests/kernels/test_linear_feature_kernel.py",
}

KERNEL_CASES = {
    "random-fourier": (
        RandomFourierKernel,
        lambda batch_shape, seed: RandomFourierKernel(
            16, num_dims=3, ard_num_dims=3, batch_shape=batch_shape, seed=seed
        ),
    ),
    "quadrature": (
        QuadratureKernel,
        lambda batch_shape, seed: QuadratureKernel(1, num_dims=3, ard_num_dims=3, batch_shape=batch_shape, seed=seed),
    ),
    "arc-cosine-quadrature": (
        ArcCosineQuadratureKernel,
        lambda batch_shape, seed: ArcCosineQuadratureKernel(
            1, num_dims=3, order=1, rotation="butterfly", batch_shape=batch_shape, seed=seed
        ),
    ),
    "polynomial-sketch-complex": (
        PolynomialSketchKernel,
        lambda batch_shape, seed: PolynomialSketchKernel(
            8, num_dims=3, degree=2, sketch="srht", complex=True, bias=1.0, batch_shape=batch_shape, seed=seed
        ),
    ),
    "maclaurin": (
        MaclaurinKernel,
        lambda batch_shape, seed: MaclaurinKernel(
            10, num_dims=3, kernel="gaussian", allocation=[5, 4], ard_num_dims=3, batch_shape=batch_shape, seed=seed
        ),
    ),
    "localized-maclaurin": (
        LocalizedMaclaurinKernel,
        lambda batch_shape, seed: LocalizedMaclaurinKernel(
            10, num_dims=3, allocation=[5, 4], batch_shape=batch_shape, seed=seed
        ),
    ),
    "compositional": (
        CompositionalRandomFeatureKernel,
        lambda batch_shape, seed: CompositionalRandomFeatureKernel(
            Skeleton.fully_connected(3, 2, "relu", base_kernel="gaussian"), 16, batch_shape=batch_shape, seed=seed
        ),
    ),
    "feature-sum": (FeatureSumKernel, _feature_sum),
    "additive-second-order": (
        AdditiveFeatureKernel,
        lambda batch_shape, seed: AdditiveFeatureKernel(
            4, num_dims=3, order=2, features_per_pair=2, ard_num_dims=3, batch_shape=batch_shape, seed=seed
        ),
    ),
    "offset-polynomial-sketch": (
        OffsetPolynomialSketchKernel,
        lambda batch_shape, seed: OffsetPolynomialSketchKernel(
            8, num_dims=3, degree=2, sketch="srht", batch_shape=batch_shape, seed=seed
        ),
    ),
    "feature-product": (FeatureProductKernel, _feature_product),
    "signed-part": (
        SignedPartKernel,
        lambda batch_shape, seed: SignedPartKernel(
            SignedRandomFeatureKernel(6, SPECTRUM, num_dims=3, batch_shape=batch_shape, seed=seed), "absolute"
        ),
    ),
    "signed-random-feature": (
        SignedRandomFeatureKernel,
        lambda batch_shape, seed: SignedRandomFeatureKernel(
            6, SPECTRUM, num_dims=3, ard_num_dims=3, sampler="orthogonal", batch_shape=batch_shape, seed=seed
        ),
    ),
}


def _kernel(case: str, batch_shape=torch.Size(), seed: int = 0, dtype: torch.dtype = torch.float64) -> Kernel:
    kernel = KERNEL_CASES[case][1](torch.Size(batch_shape), seed).to(dtype)
    for module in kernel.modules():  # non-default lengthscales, so that every factor shows in the comparisons
        if isinstance(module, Kernel) and module.has_lengthscale and module.raw_lengthscale.requires_grad:
            size = module.lengthscale.size(-1)
            module.lengthscale = torch.linspace(0.8, 1.6, size, dtype=dtype).expand(module.lengthscale.shape)
    return kernel


def _x(n: int = 7, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return 0.5 * torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def _roots(kernel: Kernel, x: torch.Tensor) -> torch.Tensor:
    """The stacked real roots [R] or [A, B] of the kernel at ``x``."""
    if isinstance(kernel, SignedFeatureKernel):
        return torch.cat(kernel.signed_features(x), dim=-1)
    return kernel.features(x)


def _signature(kernel: Kernel, like: torch.Tensor) -> torch.Tensor:
    return kernel.signature(like) if isinstance(kernel, SignedFeatureKernel) else like.new_ones(kernel.root_dim)


def _resample(kernel: Kernel, seed: int) -> None:
    """Redraw every feature map of the kernel: its own, or its summands' and parts'."""
    owners = [module for module in kernel.modules() if isinstance(module, FeatureMapOwner)]
    assert owners
    for offset, owner in enumerate(owners):
        owner.resample_features(torch.Generator().manual_seed(seed + offset))


def test_every_exported_feature_kernel_has_a_contract_case():
    covered = {cls for cls, _ in KERNEL_CASES.values()}
    exported = concrete_exported_classes(gprf.kernels, (FeatureKernel, SignedFeatureKernel))
    missing = [cls.__name__ for cls in exported if cls not in covered and cls not in CONTRACT_ELSEWHERE]
    assert not missing, f"add a factory to KERNEL_CASES for {missing}"
    for case, (cls, _) in KERNEL_CASES.items():
        assert type(_kernel(case)) is cls, case


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_evaluations_are_the_root_operator(case):
    kernel, x, y = _kernel(case), _x(), _x(4, seed=1)
    roots, signature = _roots(kernel, x), _signature(kernel, x)
    covariance = kernel(x).evaluate_kernel()
    if isinstance(kernel, SignedFeatureKernel):
        assert isinstance(covariance, SignedRootLinearOperator)
    else:
        assert isinstance(covariance, FeatureRootLinearOperator)
        torch.testing.assert_close(feature_root(covariance).features, roots, rtol=0, atol=0)
    torch.testing.assert_close(covariance.to_dense(), (roots * signature) @ roots.mT)
    torch.testing.assert_close(kernel(x, y).to_dense(), (roots * signature) @ _roots(kernel, y).mT)
    torch.testing.assert_close(kernel(x, diag=True), covariance.to_dense().diagonal())
    if isinstance(kernel, FeatureMapOwner):  # the roots are the map's at the inputs divided by the lengthscale
        scaled = x / kernel.lengthscale if kernel.has_lengthscale else x
        if isinstance(kernel, OffsetPolynomialSketchKernel):  # the offset enters as a constant input coordinate
            scaled = kernel.augment(x)
        if isinstance(kernel, SignedFeatureKernel):
            expected = torch.cat(kernel.feature_map(scaled), dim=-1)
        else:
            expected = kernel.feature_map.real_features(scaled)
        if isinstance(kernel, AdditiveFeatureKernel) and kernel.order == 2:  # interactions weighted by sqrt(tau)
            first, second = kernel.feature_map.component_slices()
            weight = kernel.interaction_variance.sqrt()
            expected = torch.cat([expected[..., first], expected[..., second] * weight], dim=-1)
        torch.testing.assert_close(roots, expected, rtol=0, atol=0)


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_root_dim_is_the_number_of_root_columns(case):
    kernel, x = _kernel(case), _x()
    if isinstance(kernel, SignedFeatureKernel):
        a, b = kernel.signed_features(x)
        assert a.shape == b.shape == (7, kernel.root_dim)
        assert kernel.signature(x).shape == (2 * kernel.root_dim,)
    else:
        assert kernel.features(x).shape == (7, kernel.root_dim) == (7, feature_root(kernel(x)).num_columns)


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_scale_kernel_keeps_the_structure(case):
    kernel, x = _kernel(case), _x()
    scaled = ScaleKernel(kernel).double()
    scaled.outputscale = 1.7
    covariance = scaled(x).evaluate_kernel()
    roots, signature = _roots(kernel, x), _signature(kernel, x)
    if isinstance(kernel, SignedFeatureKernel):
        assert isinstance(covariance, SignedRootLinearOperator)
    else:
        assert isinstance(covariance, FeatureRootLinearOperator)
        decoded = feature_root(scaled(x))  # the amplitude kept apart from the root
        torch.testing.assert_close(decoded.features, roots, rtol=0, atol=0)
        torch.testing.assert_close(decoded.outputscale, torch.tensor(1.7, dtype=torch.float64))
    torch.testing.assert_close(covariance.to_dense(), 1.7 * (roots * signature) @ roots.mT)
    torch.testing.assert_close(scaled(x, diag=True), 1.7 * kernel(x, diag=True))


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_batch_members_have_their_own_draws(case):
    kernel, x = _kernel(case, batch_shape=(2,)), _x()
    covariance = kernel(x).to_dense()
    assert covariance.shape == (2, 7, 7)
    assert not torch.allclose(covariance[0], covariance[1])
    roots, signature = _roots(kernel, x), _signature(kernel, x)
    assert roots.shape[:-1] == (2, 7)
    torch.testing.assert_close(covariance, (roots * signature) @ roots.mT)


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_state_dict_into_a_fresh_kernel(case):
    kernel, fresh, x = _kernel(case, seed=0), _kernel(case, seed=1), _x()
    assert not torch.allclose(fresh(x).to_dense(), kernel(x).to_dense())
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x).to_dense(), kernel(x).to_dense(), rtol=0, atol=0)


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_pickle_and_deepcopy(case):
    kernel, x = _kernel(case), _x()
    for clone in (pickle.loads(pickle.dumps(kernel)), copy.deepcopy(kernel)):
        torch.testing.assert_close(clone(x).to_dense(), kernel(x).to_dense(), rtol=0, atol=0)


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_float32_and_float64(case):
    double, x = _kernel(case), _x()
    single = _kernel(case, dtype=torch.float32)
    assert single(x.float()).to_dense().dtype == torch.float32 and double(x).to_dense().dtype == torch.float64
    reference = double(x).to_dense().detach()
    # float32 draws, hyperparameters and inputs: relative rounding 6e-8 per operation over a few dozen operations;
    # 1e-5 of the largest entry leaves a margin of ~100.
    atol = 1e-5 * float(reference.abs().max())
    torch.testing.assert_close(single(x.float()).to_dense().double(), reference, rtol=0, atol=atol)
    # float64 inputs into a float32 kernel are computed in float64 (torch's type promotion, as GPyTorch's kernels).
    promoted = single(x).to_dense()
    assert promoted.dtype == torch.float64
    torch.testing.assert_close(promoted, reference, rtol=0, atol=atol)


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_feature_versions_follow_the_draws(case):
    kernel, x = _kernel(case), _x()
    before, versions = kernel(x).to_dense(), feature_versions(kernel)
    assert versions and (isinstance(kernel, SignedFeatureKernel) or feature_root(kernel(x)).versions == versions)
    _resample(kernel, seed=11)
    assert feature_versions(kernel) != versions
    assert isinstance(kernel, SignedFeatureKernel) or feature_root(kernel(x)).versions == feature_versions(kernel)
    assert not torch.allclose(kernel(x).to_dense(), before)


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_batch_indexing_selects_a_member(case):
    kernel, x = _kernel(case, batch_shape=(2,)), _x()
    covariance = kernel(x).to_dense()
    member = kernel[1]
    assert member.batch_shape == torch.Size()
    torch.testing.assert_close(member(x).to_dense(), covariance[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_contract_dtype_and_device_follow_to(case):
    kernel = _kernel(case, dtype=torch.float32)
    assert kernel.dtype == torch.float32 and kernel.double().dtype == torch.float64
    assert kernel.device == torch.device("cpu")


def test_feature_sum_of_scale_free_kernels_reports_the_dtype_of_its_draws():
    total = FeatureSumKernel(
        ArcCosineQuadratureKernel(1, num_dims=3, seed=0), ArcCosineQuadratureKernel(1, num_dims=3, seed=1)
    )
    assert total.double().dtype == torch.float64 and total.device == torch.device("cpu")


# ---------------------------------------------------------------------- marginal likelihood over row chunks
def _chunked_model(likelihood_kind: str, batch_shape=torch.Size()):
    x, y = regression_data(n=50, batch_shape=tuple(batch_shape))
    if likelihood_kind == "heteroscedastic":
        noise = 0.02 + 0.1 * torch.rand(*batch_shape, 50, generator=torch.Generator().manual_seed(2), dtype=x.dtype)
        likelihood = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise, batch_shape=batch_shape)
    else:
        likelihood = None
    model = make_model(x, y, likelihood=likelihood, num_features=16, batch_shape=batch_shape).train()
    return model, x, y


def _mll_and_grads(model, x, y):
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    value = mll(model(x), y).sum()
    params = [param for param in model.parameters() if param.requires_grad]
    return value, torch.autograd.grad(value, params)


@pytest.mark.parametrize("chunk_size", [7, 10, 49])
@pytest.mark.parametrize(
    "likelihood_kind, batch_shape",
    [("homoscedastic", torch.Size()), ("heteroscedastic", torch.Size()), ("homoscedastic", torch.Size([2]))],
    ids=["homoscedastic", "heteroscedastic", "batch"],
)
def test_marginal_likelihood_and_gradients_equal_with_row_chunks(chunk_size, likelihood_kind, batch_shape):
    model, x, y = _chunked_model(likelihood_kind, batch_shape)
    with gprf.settings.feature_chunk_size(chunk_size):
        root = feature_root(model.covar_module(x))
        assert root.is_lazy and root.num_points == 50 and root.num_columns == 16
        value, grads = _mll_and_grads(model, x, y)
    with gprf.settings.feature_chunk_size(False):
        assert not feature_root(model.covar_module(x)).is_lazy
        expected_value, expected_grads = _mll_and_grads(model, x, y)
    torch.testing.assert_close(value, expected_value, rtol=1e-10, atol=1e-10)
    assert len(grads) >= 3  # mean, outputscale, lengthscale (and a learned noise)
    for actual, reference in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(actual, reference, rtol=1e-9, atol=1e-10)


def test_chunked_marginal_likelihood_saves_nothing_of_size_n_by_f():
    """Bytes saved for backward by one marginal likelihood stay below a quarter of the root's N x F."""
    x, y = regression_data(n=3000)
    model = make_model(x, y, num_features=128).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    saved = []

    def pack(tensor):
        saved.append(tensor.numel() * tensor.element_size())
        return tensor

    root_bytes = 3000 * model.covar_module.base_kernel.root_dim * 8
    for setting in (512, False):
        saved.clear()
        with gprf.settings.feature_chunk_size(setting), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            mll(model(x), y)
        if setting:
            assert sum(saved) < root_bytes / 4
        else:
            assert sum(saved) > root_bytes  # the formed root is kept: the check can fail


def test_lazy_root_is_formed_only_by_consumers_of_the_root(x64):
    kernel = _kernel64()
    with gprf.settings.feature_chunk_size(8):
        covariance = kernel(x64).evaluate_kernel()
        assert isinstance(covariance, FeatureRootLinearOperator) and feature_root(covariance).is_lazy
        assert covariance.shape == (30, 30)
        torch.testing.assert_close(covariance.to_dense(), kernel.features(x64) @ kernel.features(x64).mT)
        block = covariance[:12, :12]
        assert feature_root(block).is_lazy
        torch.testing.assert_close(block.to_dense(), covariance.to_dense()[:12, :12])
        assert covariance.detach().feature_root.features.grad_fn is None
