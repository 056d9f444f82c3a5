"""PreconditionedKernel: GPyTorch's BaseKernelTestCase; the exact covariance and the shared hyperparameters (training,
priors counted once, state_dict, pickling, dtypes, batches, composites); the CG/SLQ marginal likelihood and its
gradient against the dense exact ones within their closed-form standard deviations; resampling the preconditioner;
BoTorch's SingleTaskGP with and without gprf's MultivariateNormal; and the construction errors."""

from __future__ import annotations

import copy
import math
import pickle
import unittest
import warnings

import gpytorch
import pytest
import torch
from gpytorch.kernels import LinearKernel, MaternKernel, PeriodicKernel, RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior
from torch.func import functional_call

import gprf
from gprf.exceptions import DenseCovarianceWarning
from gprf.kernels import PreconditionedKernel, RandomFourierKernel
from gprf.kernels.preconditioned_kernel import NYSTROM_JITTER
from gprf.linalg import PreconditionedAddedDiagLinearOperator, cg_iterations, feature_root
from gprf.testing import SEED, ExactGPModel, InputDimKernelTestCase, num_dims_of, regression_data
from tests.helpers.slq import seeded_slq, slq_logdet_sd


class TestPreconditionedKernel(InputDimKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        num_dims = num_dims_of(kwargs, 2)
        batch_shape = kwargs.pop("batch_shape", torch.Size())
        base = ScaleKernel(RBFKernel(batch_shape=batch_shape), batch_shape=batch_shape, **kwargs)
        return PreconditionedKernel(base, 64, num_dims=num_dims, seed=SEED)

    def create_kernel_ard(self, num_dims, **kwargs):
        batch_shape = kwargs.pop("batch_shape", torch.Size())
        base = MaternKernel(nu=1.5, ard_num_dims=num_dims, batch_shape=batch_shape, **kwargs)
        return PreconditionedKernel(base, 64, seed=SEED)


class TestNystromPreconditionedKernel(TestPreconditionedKernel):
    def create_kernel_no_ard(self, **kwargs):
        kwargs.pop("num_dims", None)
        batch_shape = kwargs.pop("batch_shape", torch.Size())
        base = ScaleKernel(RBFKernel(batch_shape=batch_shape), batch_shape=batch_shape, **kwargs)
        return PreconditionedKernel(base, 16, preconditioner="nystrom", seed=SEED)

    def create_kernel_ard(self, num_dims, **kwargs):
        batch_shape = kwargs.pop("batch_shape", torch.Size())
        base = MaternKernel(nu=1.5, ard_num_dims=num_dims, batch_shape=batch_shape, **kwargs)
        return PreconditionedKernel(base, 16, preconditioner="nystrom", seed=SEED)


def rbf(d=3, dtype=torch.float64):
    kernel = ScaleKernel(RBFKernel(ard_num_dims=d)).to(dtype)
    kernel.outputscale = 1.3
    kernel.base_kernel.lengthscale = torch.tensor([0.3, 0.5, 0.8][:d], dtype=dtype)
    return kernel


def model_around(kernel, x, y, noise=0.01, features=64, **options):
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(x.dtype)
    likelihood.noise = noise
    covar = PreconditionedKernel(kernel, features, seed=0, **options) if features else kernel
    model = ExactGPModel(x, y, likelihood, covar).to(x.dtype)
    model.mean_module.constant.data.fill_(0.2)
    return model


def mll_of(model):
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    return mll(model(*model.train_inputs), model.train_targets)


# ---------------------------------------------------------------------------------------------- hyperparameters
def test_the_hyperparameters_are_the_base_kernels():
    base = rbf()
    kernel = PreconditionedKernel(base, 32, seed=0)
    assert {id(p) for p in kernel.parameters()} == {id(p) for p in base.parameters()}
    assert {id(p) for p in kernel.preconditioner_kernel.parameters()} == {id(p) for p in base.parameters()}
    assert kernel.exact() is base and kernel.base_kernel is base


def test_training_the_model_trains_the_base_kernel():
    x, y = regression_data(60)
    base = rbf()
    model = model_around(base, x, y)
    before = base.base_kernel.raw_lengthscale.detach().clone()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    with gpytorch.settings.max_cholesky_size(0):
        (-mll_of(model)).backward()
    optimizer.step()
    assert base.base_kernel.raw_lengthscale.grad is not None
    assert not torch.equal(base.base_kernel.raw_lengthscale.detach(), before)


def test_priors_are_counted_once():
    x, y = regression_data(50)
    base = rbf()
    base.base_kernel.register_prior("lengthscale_prior", GammaPrior(3.0, 6.0), lambda m: m.lengthscale)
    preconditioned = model_around(base, x, y)
    plain = model_around(base, x, y, features=0)
    assert len(list(preconditioned.named_priors())) == len(list(plain.named_priors())) == 1
    torch.testing.assert_close(mll_of(preconditioned), mll_of(plain))  # Cholesky at 50 points: identical


@pytest.mark.parametrize("preconditioner", ["random_features", "nystrom"])
def test_the_random_feature_kernel_shares_parameters_and_priors_on_the_kernels_dtype(preconditioner):
    base = rbf()
    base.base_kernel.register_prior("lengthscale_prior", GammaPrior(3.0, 6.0), lambda m: m.lengthscale)
    kernel = PreconditionedKernel(base, 32, seed=0, preconditioner=preconditioner).float()
    surrogate = kernel.random_feature_kernel()
    assert {id(p) for p in surrogate.parameters()} == {id(p) for p in base.parameters()}
    assert [name for name, *_ in surrogate.named_priors()] == ["base_kernel.lengthscale_prior"]
    assert all(buffer.dtype == torch.float32 for buffer in surrogate.buffers() if buffer.is_floating_point())
    assert isinstance(surrogate.base_kernel, RandomFourierKernel) and surrogate.base_kernel.num_features == 32
    if preconditioner == "random_features":  # the same seed: the preconditioner's own draw
        x = torch.rand(20, 3)
        torch.testing.assert_close(feature_root(surrogate(x)).scaled_features(), _features(kernel, x))


def test_state_dict_pickling_and_copies_keep_the_draws_and_the_tying():
    base = rbf()
    kernel = PreconditionedKernel(base, 32, seed=0)
    x = torch.rand(20, 3, dtype=torch.float64)
    fresh = PreconditionedKernel(rbf(), 32, seed=None)
    fresh.load_state_dict(kernel.state_dict())
    for other in (fresh, pickle.loads(pickle.dumps(kernel)), copy.deepcopy(kernel)):
        torch.testing.assert_close(other(x).to_dense(), kernel(x).to_dense())
        torch.testing.assert_close(_features(other, x), _features(kernel, x))
        shared = other.preconditioner_kernel.base_kernel.raw_lengthscale
        assert shared is other.base_kernel.base_kernel.raw_lengthscale


def test_to_moves_the_draws_with_the_hyperparameters():
    kernel = PreconditionedKernel(rbf(), 32, seed=0).float()
    x = torch.rand(50, 3)
    preconditioner = kernel(x).evaluate_kernel().add_diagonal(torch.tensor(0.1)).preconditioner
    assert preconditioner.features.dtype == torch.float32 and preconditioner.factor.cholesky.dtype == torch.float64
    assert all(buffer.dtype == torch.float32 for buffer in kernel.buffers() if buffer.is_floating_point())
    torch.testing.assert_close(kernel(x).to_dense(), kernel.base_kernel(x).to_dense())


def _features(kernel, x):
    return feature_root(kernel.preconditioner_kernel(x)).scaled_features()


def test_resample_features_redraws_the_preconditioner_only():
    kernel = PreconditionedKernel(rbf(), 32, seed=0)
    x = torch.rand(20, 3, dtype=torch.float64)
    covariance, features = kernel(x).to_dense(), _features(kernel, x)
    kernel.resample_features(torch.Generator().manual_seed(5))
    redrawn = _features(kernel, x)
    assert not torch.allclose(redrawn, features)
    torch.testing.assert_close(kernel(x).to_dense(), covariance)
    kernel.resample_features(torch.Generator().manual_seed(5))
    torch.testing.assert_close(_features(kernel, x), redrawn)


def test_composite_kernels_are_exact_and_preconditioned():
    x, y = regression_data(90, d=4)
    composite = (
        ScaleKernel(RBFKernel(ard_num_dims=2, active_dims=[0, 1]) * MaternKernel(nu=2.5, active_dims=[2]))
        + LinearKernel(active_dims=[3])
    ).double()
    kernel = PreconditionedKernel(composite, 128, seed=0)
    torch.testing.assert_close(kernel(x).to_dense(), composite(x).to_dense())
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    covariance = likelihood(gpytorch.distributions.MultivariateNormal(torch.zeros_like(y), kernel(x)))
    covariance = covariance.lazy_covariance_matrix.evaluate_kernel()
    assert isinstance(covariance, PreconditionedAddedDiagLinearOperator)
    with gpytorch.settings.max_cholesky_size(0), gpytorch.settings.cg_tolerance(1e-8), torch.no_grad():
        solved = covariance.solve(y.unsqueeze(-1))
    dense = composite(x).to_dense() + likelihood.noise * torch.eye(90, dtype=torch.float64)
    torch.testing.assert_close(solved, torch.linalg.solve(dense, y.unsqueeze(-1)), rtol=1e-4, atol=1e-4)


def test_batched_models_with_an_exact_root_match_the_dense_likelihood():
    # A linear kernel's random-feature root is exact (P is the covariance): CG and SLQ give the exact likelihood.
    x, y = regression_data(70, batch_shape=(2,))
    base = ScaleKernel(LinearKernel(batch_shape=torch.Size([2])), batch_shape=torch.Size([2])).double()
    base.outputscale = torch.tensor([0.6, 1.4])
    likelihood = gpytorch.likelihoods.GaussianLikelihood(batch_shape=torch.Size([2])).double()
    likelihood.noise = 0.02
    kernel = PreconditionedKernel(base, 16, num_dims=3, seed=0)
    model = ExactGPModel(x, y, likelihood, kernel, batch_shape=torch.Size([2])).double()
    with gpytorch.settings.max_cholesky_size(0), gpytorch.settings.cg_tolerance(1e-8):
        value = mll_of(model)
    model.covar_module = base
    torch.testing.assert_close(value, mll_of(model), rtol=1e-7, atol=1e-7)


def test_float32_models_train_through_cg():
    # An exact root (linear kernel): the float32 CG/SLQ likelihood is the dense float64 one to float32 accuracy.
    x, y = regression_data(120, dtype=torch.float32)
    base = ScaleKernel(LinearKernel()).float()
    model = model_around(base, x, y, noise=0.05, num_dims=3)
    with gpytorch.settings.max_cholesky_size(0):
        value = mll_of(model)
        value.backward()
    assert value.dtype == torch.float32 and base.raw_outputscale.grad is not None
    reference = mll_of(model_around(base.double(), x.double(), y.double(), noise=0.05, features=0))
    torch.testing.assert_close(value.double(), reference, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------- Nystrom points
def _nystrom_preconditioner(kernel, x, noise=0.01):
    return kernel(x).evaluate_kernel().add_diagonal(torch.tensor(noise, dtype=x.dtype)).preconditioner


def test_nystrom_preconditioner_is_the_nystrom_covariance_below_the_kernel():
    x = torch.rand(200, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    base = rbf()
    kernel = PreconditionedKernel(base, 40, preconditioner="nystrom", seed=3)
    assert kernel.preconditioner_kernel is None
    preconditioner = _nystrom_preconditioner(kernel, x)
    rows = torch.randperm(200, generator=torch.Generator().manual_seed(3))[:40]
    with torch.no_grad():
        covariance = base(x).to_dense()
        cross = covariance[:, rows]
        gram = covariance[rows][:, rows]
        gram = gram + NYSTROM_JITTER * gram.diagonal().mean() * torch.eye(40, dtype=torch.float64)
        nystrom = cross @ torch.linalg.solve(gram, cross.mT)
        torch.testing.assert_close(preconditioner.operator().to_dense(), nystrom + 0.01 * torch.eye(200))
        # K - K_XZ K_ZZ^-1 K_ZX is positive semi-definite: every eigenvalue of P^-1 (K + noise) is at least 1.
        cholesky = torch.linalg.cholesky(preconditioner.operator().to_dense())
        whitened = torch.linalg.solve_triangular(cholesky, covariance + 0.01 * torch.eye(200), upper=False)
        eigenvalues = torch.linalg.eigvalsh(torch.linalg.solve_triangular(cholesky, whitened.mT, upper=False))
    assert eigenvalues.min() > 1 - 1e-6


def test_nystrom_on_all_points_preconditions_perfectly():
    x = torch.rand(150, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    kernel = PreconditionedKernel(rbf(), 500, preconditioner="nystrom", seed=0)
    covariance = kernel(x).evaluate_kernel().add_diagonal(torch.tensor(0.01, dtype=torch.float64))
    rhs = torch.randn(150, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        dense = kernel(x).to_dense() + 0.01 * torch.eye(150)
    counts = cg_iterations(dense.matmul, rhs, covariance.preconditioner.solve, (1e-4,))
    assert counts == {1e-4: 1}


def test_nystrom_points_follow_the_seed_and_resample():
    x = torch.rand(100, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    kernel = PreconditionedKernel(rbf(), 20, preconditioner="nystrom", seed=7)
    features = _nystrom_preconditioner(kernel, x).features
    torch.testing.assert_close(_nystrom_preconditioner(pickle.loads(pickle.dumps(kernel)), x).features, features)
    kernel.resample_features(torch.Generator().manual_seed(1))
    redrawn = _nystrom_preconditioner(kernel, x).features
    assert not torch.allclose(redrawn, features)
    kernel.resample_features(torch.Generator().manual_seed(1))
    torch.testing.assert_close(_nystrom_preconditioner(kernel, x).features, redrawn)


def test_nystrom_takes_kernels_random_features_cannot_convert():
    x, y = regression_data(120)
    base = ScaleKernel(PeriodicKernel()).double()
    kernel = PreconditionedKernel(base, 60, preconditioner="nystrom", seed=0)
    covariance = kernel(x).evaluate_kernel().add_diagonal(torch.tensor(0.05, dtype=torch.float64))
    with gpytorch.settings.max_cholesky_size(0), gpytorch.settings.cg_tolerance(1e-8), torch.no_grad():
        solved = covariance.solve(y.unsqueeze(-1))
        dense = base(x).to_dense() + 0.05 * torch.eye(120)
    torch.testing.assert_close(solved, torch.linalg.solve(dense, y.unsqueeze(-1)), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------- CG/SLQ vs dense
def _stochastic_setup(num_points=80, num_probes=64):
    x, y = regression_data(num_points)
    base = rbf()
    model = model_around(base, x, y, features=48)
    raws = (base.raw_outputscale, base.base_kernel.raw_lengthscale, model.likelihood.noise_covar.raw_noise)
    return x, y, model, base, raws, num_probes


def _dense_covariances(model, base, x, raws):
    """The dense training covariance and preconditioner as functions of the raw hyperparameters."""
    kernel, likelihood = model.covar_module, model.likelihood.noise_covar
    names = {id(p): n for n, p in kernel.preconditioner_kernel.named_parameters()}

    def matrices(outputscale, lengthscale, noise):
        values = {"raw_outputscale": outputscale, "base_kernel.raw_lengthscale": lengthscale}
        variance = likelihood.raw_noise_constraint.transform(noise) * torch.eye(x.size(0), dtype=x.dtype)
        with gpytorch.settings.lazily_evaluate_kernels(False):
            covariance = functional_call(base, values, (x, x)).to_dense() + variance
            approximate = {
                names[id(raw)]: value for raw, value in zip(raws[:2], (outputscale, lengthscale), strict=True)
            }
            root = feature_root(functional_call(kernel.preconditioner_kernel, approximate, (x,))).scaled_features()
        return covariance, root @ root.mT + variance

    return matrices


def test_mll_matches_the_dense_mll_within_the_slq_standard_deviation():
    x, y, model, base, raws, num_probes = _stochastic_setup()
    matrices = _dense_covariances(model, base, x, raws)
    with torch.no_grad():
        covariance, preconditioner = matrices(*raws)
    n = x.size(0)
    # The MLL is -(... + log det)/(2N).
    logdet_sd = slq_logdet_sd(covariance, preconditioner, num_probes)
    with seeded_slq(num_probes, n):
        value = mll_of(model)
    reference = mll_of(model_around(base, x, y, features=0))
    assert abs(value.item() - reference.item()) <= 4 * logdet_sd / (2 * n), (value, reference, logdet_sd)


def _central_differences(matrices, raws, step=1e-5):
    """``(dK, dP)`` for every entry of every raw hyperparameter, in order."""
    values = [raw.detach().clone() for raw in raws]
    for i, value in enumerate(values):
        for j in range(value.numel()):
            shifted = []
            for sign in (1, -1):
                moved = [v.clone() for v in values]
                moved[i].view(-1)[j] += sign * step
                with torch.no_grad():
                    shifted.append(matrices(*moved))
            yield tuple((plus - minus) / (2 * step) for plus, minus in zip(*shifted, strict=True))


def test_mll_gradient_matches_the_dense_gradient_within_its_standard_deviation():
    # The variance-reduced estimate of d log det K / d theta (Wenger et al., 2022) is
    #   mean_i w_i^T (M1 - M2) w_i + tr(P^-1 dP),  M1 = P^-1/2 dK K^-1 P^1/2,  M2 = P^-1/2 dP P^-1/2,
    # over w_i ~ N(0, I): variance 2 ||sym(M1 - M2)||_F^2 / S per hyperparameter; the MLL divides by -2N.
    x, y, model, base, raws, num_probes = _stochastic_setup()
    matrices = _dense_covariances(model, base, x, raws)
    with torch.no_grad():
        covariance, preconditioner = matrices(*raws)
    eigenvalues, eigenvectors = torch.linalg.eigh(preconditioner)
    root = (eigenvectors * eigenvalues.sqrt()) @ eigenvectors.mT
    inverse_root = (eigenvectors / eigenvalues.sqrt()) @ eigenvectors.mT
    sds = []
    for d_k, d_p in _central_differences(matrices, raws):  # derivatives only enter the bound
        m1 = inverse_root @ d_k @ torch.linalg.solve(covariance, root)
        m2 = inverse_root @ d_p @ inverse_root
        symmetric = (m1 - m2 + (m1 - m2).mT) / 2
        sds.append(math.sqrt(2 * symmetric.square().sum().item() / num_probes) / (2 * x.size(0)))
    with (
        torch.random.fork_rng(),
        gpytorch.settings.max_cholesky_size(0),
        gpytorch.settings.num_trace_samples(num_probes),
        gpytorch.settings.cg_tolerance(1e-8),
    ):
        torch.manual_seed(0)
        grads = torch.autograd.grad(mll_of(model), raws)
    reference = model_around(base, x, y, features=0)
    reference.likelihood.noise_covar.raw_noise = raws[2]
    expected = torch.autograd.grad(mll_of(reference), raws)
    estimates = torch.cat([g.flatten() for g in grads])
    exact = torch.cat([g.flatten() for g in expected])
    bound = 4 * torch.tensor(sds, dtype=torch.float64) + 1e-6  # + CG's accuracy in the solves
    assert ((estimates - exact).abs() <= bound).all(), (estimates, exact, bound)


# ---------------------------------------------------------------------------------------------- BoTorch
@pytest.mark.botorch
def test_singletaskgp_drop_in_and_the_gprf_route_with_botorchs_settings():
    botorch = pytest.importorskip("botorch")
    # An exact root (linear kernel), so that the CG route's likelihood is the dense one.
    x, y = regression_data(120)
    train_y = y.unsqueeze(-1)
    base = ScaleKernel(LinearKernel()).double()

    class GprfSingleTaskGP(botorch.models.SingleTaskGP):
        def forward(self, x):
            output = super().forward(x)
            return gprf.distributions.MultivariateNormal(output.mean, output.lazy_covariance_matrix)

    plain = botorch.models.SingleTaskGP(x, train_y, covar_module=PreconditionedKernel(base, 8, num_dims=3, seed=0))
    routed = GprfSingleTaskGP(x, train_y, covar_module=PreconditionedKernel(base, 8, num_dims=3, seed=0))
    reference = botorch.models.SingleTaskGP(x, train_y, covar_module=base)
    for model in (plain, routed, reference):
        model.train()
    mll = lambda model: gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)(  # noqa: E731
        model(*model.train_inputs), model.train_targets
    )
    with gpytorch.settings.max_cholesky_size(50):
        with pytest.warns(DenseCovarianceWarning):  # plain SingleTaskGP: dense Cholesky under BoTorch's settings
            dense_value = mll(plain)
        with warnings.catch_warnings():
            warnings.simplefilter("error", DenseCovarianceWarning)
            cg_value = mll(routed)  # gprf's MultivariateNormal: preconditioned CG
    torch.testing.assert_close(dense_value, mll(reference))
    torch.testing.assert_close(cg_value, dense_value, rtol=1e-6, atol=1e-6)
    test_x = torch.rand(7, 3, dtype=torch.float64)
    posterior = plain.posterior(test_x)
    torch.testing.assert_close(posterior.mean, reference.posterior(test_x).mean)


# ---------------------------------------------------------------------------------------------- errors
def test_construction_errors_name_the_option():
    with pytest.raises(TypeError, match="must be an exact kernel.*exact"):
        PreconditionedKernel(ScaleKernel(RandomFourierKernel(16, num_dims=2)), 32)
    with pytest.raises(TypeError, match="cannot convert base_kernel.*PeriodicKernel.*preconditioner='nystrom'"):
        PreconditionedKernel(PeriodicKernel(), 32, num_dims=2)
    with pytest.raises(ValueError, match="num_dims"):
        PreconditionedKernel(RBFKernel(), 32)
    with pytest.raises(TypeError, match="base_kernel must be a GPyTorch Kernel"):
        PreconditionedKernel("rbf", 32)
    with pytest.raises(ValueError, match="block_rows must be a positive"):
        PreconditionedKernel(RBFKernel(ard_num_dims=2), 32, block_rows=0)
    with pytest.raises(ValueError, match="num_features"):
        PreconditionedKernel(RBFKernel(ard_num_dims=2), 0)
    with pytest.raises(ValueError, match="Unknown preconditioner 'pivoted'.*'nystrom'"):
        PreconditionedKernel(RBFKernel(ard_num_dims=2), 8, preconditioner="pivoted")


def test_evaluation_errors():
    kernel = PreconditionedKernel(RBFKernel(ard_num_dims=2), 16)
    x = torch.rand(5, 2)
    with pytest.raises(NotImplementedError, match="last_dim_is_batch"):
        kernel.forward(x, x, last_dim_is_batch=True)
    with pytest.raises(TypeError, match="no extra kernel arguments"):
        kernel.forward(x, x, foo=1)
