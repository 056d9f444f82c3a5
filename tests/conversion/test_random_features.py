"""gprf.random_features: round trips for every supported kernel type (the very hyperparameter objects shared, the
exact expression's values back), Monte-Carlo means of composite approximations against the exact expression within
the closed-form variance, training through either kernel, devices and dtypes, and bad input."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch
from botorch.models.kernels.positive_index import PositiveIndexKernel
from gpytorch.kernels import (
    AdditiveStructureKernel,
    IndexKernel,
    LinearKernel,
    MaternKernel,
    PeriodicKernel,
    PolynomialKernel,
    RBFKernel,
    RQKernel,
    ScaleKernel,
)
from gpytorch.priors import GammaPrior

import gprf
from gprf.botorch import RandomFeatureSingleTaskGP
from gprf.conversion import approximation_moments
from gprf.features import (
    MaclaurinFeatures,
    PolynomialSketch,
    RandomFourierFeatures,
    SignedRandomFeatures,
    optimize_maclaurin_allocation,
)
from gprf.kernels import (
    AdditiveFeatureKernel,
    FeatureProductKernel,
    FeatureSumKernel,
    IndexRootKernel,
    LinearFeatureKernel,
    OffsetPolynomialSketchKernel,
    PolynomialSketchKernel,
    PreconditionedKernel,
    RandomFourierKernel,
    exact_expression,
)
from gprf.testing import DEVICES

Z_BOUND = 4.5  # two-sided, over a few dozen z-scores per test


def _x(n: int = 6, d: int = 5, seed: int = 0) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    x[:, -1] = torch.arange(n) % 3  # a task column for the index kernels
    return x


def _additive_structure() -> AdditiveStructureKernel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return AdditiveStructureKernel(ScaleKernel(RBFKernel(ard_num_dims=4)), num_dims=4, active_dims=[0, 1, 2, 3])


# name -> (GPyTorch expression on 5 columns, the gprf type at its root or inside its ScaleKernel)
EXPRESSIONS = {
    "rbf-ard": (lambda: ScaleKernel(RBFKernel(ard_num_dims=4, active_dims=[0, 1, 2, 3])), RandomFourierKernel),
    "matern12": (lambda: MaternKernel(nu=0.5, active_dims=[0, 1]), RandomFourierKernel),
    "matern32": (lambda: MaternKernel(nu=1.5, ard_num_dims=2, active_dims=[1, 2]), RandomFourierKernel),
    "matern52": (lambda: ScaleKernel(MaternKernel(nu=2.5, active_dims=[0, 3])), RandomFourierKernel),
    "linear": (lambda: LinearKernel(ard_num_dims=4, active_dims=[0, 1, 2, 3]), LinearFeatureKernel),
    "polynomial": (lambda: PolynomialKernel(power=2, active_dims=[0, 1]), OffsetPolynomialSketchKernel),
    "index": (lambda: IndexKernel(num_tasks=3, rank=2, active_dims=[4]), IndexRootKernel),
    "positive-index": (lambda: PositiveIndexKernel(num_tasks=3, rank=2, active_dims=[4]), IndexRootKernel),
    "sum": (
        lambda: (
            ScaleKernel(RBFKernel(active_dims=[0, 1]))
            + LinearKernel(active_dims=[2, 3])
            + ScaleKernel(MaternKernel(nu=2.5, active_dims=[0, 3]))
        ),
        FeatureSumKernel,
    ),
    "product": (
        lambda: RBFKernel(ard_num_dims=2, active_dims=[0, 1]) * MaternKernel(nu=1.5, active_dims=[2, 3]),
        FeatureProductKernel,
    ),
    "multitask": (
        lambda: ScaleKernel(RBFKernel(active_dims=[0, 1, 2, 3])) * IndexKernel(num_tasks=3, rank=2, active_dims=[4]),
        FeatureProductKernel,
    ),
    "additive-structure": (_additive_structure, AdditiveFeatureKernel),
}


def _expression(name: str):
    kernel = EXPRESSIONS[name][0]().double()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # non-default hyperparameters, so that ties and values are visible
        for raw in kernel.parameters():
            raw.copy_(0.5 * torch.randn(raw.shape, generator=generator, dtype=raw.dtype))
    return kernel


@pytest.mark.parametrize("name", EXPRESSIONS)
def test_round_trip_shares_hyperparameters_and_gives_the_exact_expression_back(name):
    kernel = _expression(name)
    approximation = gprf.random_features(kernel, num_features=64, seed=0)
    root = approximation.base_kernel if isinstance(approximation, ScaleKernel) else approximation
    assert isinstance(root, EXPRESSIONS[name][1])
    # The very Parameter objects: nothing is copied, so training either kernel trains both.
    original = {id(param) for param in kernel.parameters()}
    assert original <= {id(param) for param in approximation.parameters()}
    exact = exact_expression(approximation)
    assert {id(param) for param in exact.parameters()} == original
    x, y = _x(), _x(4, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # AdditiveStructureKernel uses last_dim_is_batch
        reference, reference_diag = kernel(x, y).to_dense(), kernel(x, diag=True)
    torch.testing.assert_close(exact(x, y).to_dense(), reference)
    torch.testing.assert_close(exact(x, diag=True), reference_diag)
    assert approximation(x, y).to_dense().shape == reference.shape


def test_priors_and_constraints_are_shared():
    kernel = ScaleKernel(RBFKernel(lengthscale_prior=GammaPrior(3.0, 6.0)), outputscale_prior=GammaPrior(2.0, 0.15))
    approximation = gprf.random_features(kernel, 32, num_dims=3, seed=0)
    priors = {name: prior for name, _, prior, *_ in approximation.named_priors()}
    assert priors["outputscale_prior"] is kernel.outputscale_prior
    assert priors["base_kernel.lengthscale_prior"] is kernel.base_kernel.lengthscale_prior
    assert approximation.base_kernel.raw_lengthscale_constraint is kernel.base_kernel.raw_lengthscale_constraint
    # Setting through either kernel sets both.
    approximation.base_kernel.lengthscale = 0.37
    torch.testing.assert_close(kernel.base_kernel.lengthscale, torch.tensor([[0.37]]))


@pytest.mark.parametrize("name", ["sum", "product", "multitask", "additive-structure", "polynomial"])
def test_monte_carlo_mean_is_the_exact_expression_within_the_closed_form_variance(name):
    num_draws = 200
    kernel = _expression(name)
    x, y = _x(), _x(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        target = kernel(x, y, diag=True).detach()
    values, variances = [], []
    for draw in range(num_draws):
        approximation = gprf.random_features(kernel, num_features=16, seed=1000 * draw)
        values.append(approximation(x, y, diag=True).detach())
        variances.append(approximation_moments(approximation, x, y)[1].detach())
    mean, variance = torch.stack(values).mean(0), variances[0]
    torch.testing.assert_close(approximation_moments(approximation, x, y)[0].detach(), target)
    assert bool((variance > 0).all())
    assert ((mean - target) / (variance / num_draws).sqrt()).abs().max() < Z_BOUND


def test_training_the_approximation_trains_the_original():
    kernel = ScaleKernel(RBFKernel(ard_num_dims=3)) + LinearKernel()
    approximation = gprf.random_features(kernel, num_features=35, num_dims=3, seed=0)  # linear: 3 columns
    assert approximation.root_dim == 35  # 32 Fourier features and the 3 linear columns
    before = [param.detach().clone() for param in kernel.parameters()]
    x = torch.randn(20, 3)
    loss = approximation(x).to_dense().trace()
    loss.backward()
    torch.optim.SGD(approximation.parameters(), lr=0.1).step()
    assert all(not torch.equal(param, old) for param, old in zip(kernel.parameters(), before, strict=True))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_devices_and_dtypes_follow_the_original(device, dtype):
    kernel = EXPRESSIONS["sum"][0]().to(device=device, dtype=dtype)
    approximation = gprf.random_features(kernel, 64, seed=0)
    x = _x().to(device=device, dtype=dtype)
    covariance = approximation(x).to_dense()
    assert covariance.dtype == dtype and covariance.device.type == torch.device(device).type


def test_unsupported_kernels_name_the_part_and_an_alternative():
    with pytest.raises(TypeError, match=r"kernels\.1\.base_kernel: PeriodicKernel .*RBFKernel or MaternKernel"):
        gprf.random_features(RBFKernel() + ScaleKernel(PeriodicKernel()), 64, num_dims=2)
    with pytest.raises(TypeError, match=r"the kernel \(root\): RQKernel .*scale mixture of RBF"):
        gprf.random_features(RQKernel(), 64, num_dims=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        structure = AdditiveStructureKernel(PeriodicKernel(), num_dims=3)
    with pytest.raises(TypeError, match=r"base_kernel: PeriodicKernel inside AdditiveStructureKernel"):
        gprf.random_features(structure, 64)


def test_bad_input_errors():
    with pytest.raises(ValueError, match=r"active_dims selecting 2 columns but ard_num_dims=3"):
        gprf.random_features(RBFKernel(ard_num_dims=3, active_dims=[0, 1]), 64)
    with pytest.raises(ValueError, match="num_features is too small: 2 feature.* 3 random parts"):
        gprf.random_features(RBFKernel() + RBFKernel() + MaternKernel(), 2, num_dims=2)
    with pytest.raises(ValueError, match="num_features must be a positive integer"):
        gprf.random_features(RBFKernel(), 0, num_dims=2)
    with pytest.raises(ValueError, match="pass num_dims=d"):
        gprf.random_features(RBFKernel(), 64)
    with pytest.raises(ValueError, match="budget names parts .*'kernels.7'"):
        gprf.random_features(RBFKernel() + RBFKernel(), 64, num_dims=2, budget={"kernels.7": 8})
    with pytest.raises(ValueError, match="Unknown sampler"):
        gprf.random_features(RBFKernel(), 64, num_dims=2, sampler="sobol")
    with pytest.raises(TypeError, match="GPyTorch Kernel"):
        gprf.random_features(torch.nn.Linear(2, 2), 64)


# ------------------------------------------------------------------ defaults by entry point
# The defaults that differ between entry points are the ones the docs list (which_model.rst, "Names and defaults by
# entry point"): a changed default fails here until that table is updated with it.
DOCUMENTED_SIGNATURE_DEFAULTS = [
    (RandomFourierFeatures, "sampler", "iid"),
    (RandomFourierFeatures, "kernel", "rbf"),
    (gprf.random_features, "sampler", "iid"),
    (gprf.random_features, "sketch", "srht"),
    (PreconditionedKernel, "sampler", "iid"),
    (PreconditionedKernel, "sketch", "srht"),
    (SignedRandomFeatures, "sampler", "iid"),
    (PolynomialSketch, "sketch", "gaussian"),
    (MaclaurinFeatures, "sketch", "rademacher"),
    (MaclaurinFeatures, "kernel", "exponential"),
    (optimize_maclaurin_allocation, "sketch", "rademacher"),
]


@pytest.mark.parametrize(
    ("entry_point", "argument", "documented"),
    DOCUMENTED_SIGNATURE_DEFAULTS,
    ids=[f"{entry.__name__}.{arg}" for entry, arg, _ in DOCUMENTED_SIGNATURE_DEFAULTS],
)
def test_signature_default_is_the_documented_one(entry_point, argument, documented):
    assert inspect.signature(entry_point).parameters[argument].default == documented


def test_kernels_built_with_defaults_use_the_documented_sampler_and_sketch():
    assert RandomFourierKernel(8, num_dims=2, seed=0).feature_map.sampler == "iid"
    assert PolynomialSketchKernel(8, num_dims=2, seed=0).feature_map.sketch == "gaussian"
    assert OffsetPolynomialSketchKernel(8, num_dims=2, seed=0).feature_map.sketch == "gaussian"


def test_botorch_model_defaults_to_orthogonal_frequencies():
    parameters = inspect.signature(RandomFeatureSingleTaskGP).parameters
    assert parameters["sampler"].default == "orthogonal"
    assert parameters["kernel"].default == "rbf"
