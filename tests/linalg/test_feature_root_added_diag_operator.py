"""FeatureRootAddedDiagLinearOperator: the Gaussian log density of s RR^T + noise in feature space (and densely for
fewer points than features) against dense formulas with their gradients, structure kept under scaling and noise, the
float32 error bound, the factor dtype, refused non-finite training data (with a count), and linear_operator's
LinearOperatorTestCase."""

from __future__ import annotations

import unittest

import gpytorch
import linear_operator
import pytest
import torch
from linear_operator.operators import ConstantDiagLinearOperator, DiagLinearOperator
from linear_operator.test.linear_operator_test_case import LinearOperatorTestCase

import gprf
from gprf.exceptions import NonFiniteTrainingDataError
from gprf.linalg import FeatureRootAddedDiagLinearOperator, FeatureRootLinearOperator, feature_root
from gprf.testing import regression_data
from tests.helpers.regression import make_model


def _inputs(n=9, f=4, batch=(), seed=0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    root = torch.randn(*batch, n, f, generator=generator, dtype=dtype)
    noise = 0.1 + torch.rand(*batch, n, generator=generator, dtype=dtype)
    return root, noise


@pytest.mark.parametrize("batch", [(), (3,)])
def test_scaled_root_and_constant_noise_match_dense(batch):
    """ScaleKernel's lazy amplitude and a homoscedastic noise enter through the F x F factor (no scaled root)."""
    root, _ = _inputs(batch=batch)
    amplitude = torch.full(batch, 1.7, dtype=torch.float64).requires_grad_(True)
    noise = torch.full((*batch, 1), 0.2, dtype=torch.float64).requires_grad_(True)
    rhs = torch.randn(*batch, 9, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    root.requires_grad_(True)
    scaled = FeatureRootLinearOperator(root).mul(amplitude.view(*batch, 1, 1))  # as ScaleKernel does
    operator = scaled + ConstantDiagLinearOperator(noise, diag_shape=9)
    assert isinstance(operator, FeatureRootAddedDiagLinearOperator)
    hand_off = operator.feature_root  # the amplitude is kept apart from the root
    assert hand_off.features is root and hand_off.outputscale is not None and hand_off.noise.shape == (*batch, 1)
    inv_quad, logdet = operator.inv_quad_logdet(inv_quad_rhs=rhs.unsqueeze(-1), logdet=True)
    eye = torch.eye(9, dtype=torch.float64)
    dense = amplitude.unsqueeze(-1).unsqueeze(-1) * (root @ root.mT) + noise.unsqueeze(-1) * eye
    expected_inv_quad = (rhs * torch.linalg.solve(dense, rhs.unsqueeze(-1)).squeeze(-1)).sum(-1)
    expected_logdet = torch.logdet(dense)
    torch.testing.assert_close(inv_quad, expected_inv_quad)
    torch.testing.assert_close(logdet, expected_logdet)
    params = [root, amplitude, noise]
    grads = torch.autograd.grad((inv_quad + logdet).sum(), params)
    expected = torch.autograd.grad((expected_inv_quad + expected_logdet).sum(), params)
    for actual, reference in zip(grads, expected, strict=True):
        torch.testing.assert_close(actual, reference)


@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("num_features", [4, 20], ids=["feature-space", "fewer-points-than-features"])
def test_inv_quad_logdet_matches_dense(batch, num_features):
    root, noise = _inputs(f=num_features, batch=batch)
    rhs = torch.randn(*batch, 9, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    params = [root.requires_grad_(True), noise.requires_grad_(True)]
    operator = FeatureRootLinearOperator(root) + DiagLinearOperator(noise)
    assert isinstance(operator, FeatureRootAddedDiagLinearOperator)
    inv_quad, logdet = operator.inv_quad_logdet(inv_quad_rhs=rhs, logdet=True)
    dense = root @ root.mT + torch.diag_embed(noise)
    expected_inv_quad = (rhs * torch.linalg.solve(dense, rhs)).sum((-2, -1))
    expected_logdet = torch.logdet(dense)
    torch.testing.assert_close(inv_quad, expected_inv_quad)
    torch.testing.assert_close(logdet, expected_logdet)
    grads = torch.autograd.grad((inv_quad + logdet).sum(), params)
    expected = torch.autograd.grad((expected_inv_quad + expected_logdet).sum(), params)
    for actual, reference in zip(grads, expected, strict=True):
        torch.testing.assert_close(actual, reference)
    unreduced, _ = operator.inv_quad_logdet(inv_quad_rhs=rhs, reduce_inv_quad=False)
    assert unreduced.shape == (*batch, 2)


def test_structure_survives_scaling_and_constant_noise():
    root, _ = _inputs()
    scaled = FeatureRootLinearOperator(root).mul(torch.tensor(2.5, dtype=torch.float64))
    assert isinstance(scaled, FeatureRootLinearOperator)
    operator = scaled.add_diagonal(torch.tensor(0.3, dtype=torch.float64))
    assert isinstance(operator, FeatureRootAddedDiagLinearOperator)
    _, logdet = operator.inv_quad_logdet(logdet=True)
    torch.testing.assert_close(logdet, torch.logdet(2.5 * root @ root.mT + 0.3 * torch.eye(9, dtype=torch.float64)))


def test_float32_small_noise_error_within_gemm_rounding_bound():
    """At noise 1e-4 a float32 model only loses the rounding of its float32 Gram matrix.

    The float64 reference uses the same (float32-rounded) inputs. Forming G = R^T S^-1 R in float32 has
    elementwise error |dG| <= gamma_N |R|^T S^-1 |R| with gamma_N = N u / (1 - N u) (u = float32 unit
    roundoff; Higham, Accuracy and Stability, eq. 3.13); everything else is float64. To first order
    |d(b^T C^-1 b)| <= ||C^-1 b||^2 ||dG||_2 and |d logdet C| <= ||C^-1||_F ||dG||_F.
    """
    root, _ = _inputs(n=300, f=40, seed=2)
    generator = torch.Generator().manual_seed(3)
    root32 = root.float()
    noise32 = torch.full((300,), 1e-4, dtype=torch.float32)
    rhs32 = (root32 @ torch.randn(40, 1, generator=generator)) + 1e-2
    root64, noise64, rhs64 = root32.double(), noise32.double(), rhs32.double()

    quad, logdet = (FeatureRootLinearOperator(root32) + DiagLinearOperator(noise32)).inv_quad_logdet(rhs32, logdet=True)
    ref_quad, ref_logdet = (FeatureRootLinearOperator(root64) + DiagLinearOperator(noise64)).inv_quad_logdet(
        rhs64, logdet=True
    )
    assert quad.dtype == logdet.dtype == torch.float32

    unit_roundoff = torch.finfo(torch.float32).eps / 2
    gamma = 300 * unit_roundoff / (1 - 300 * unit_roundoff)
    gram_error = gamma * torch.linalg.matrix_norm(root64.abs().mT @ (root64.abs() / noise64.unsqueeze(-1)))
    capacitance = torch.eye(40, dtype=torch.float64) + root64.mT @ (root64 / noise64.unsqueeze(-1))
    weights = torch.linalg.solve(capacitance, root64.mT @ (rhs64 / noise64.unsqueeze(-1)))
    # The final cast of each result to float32 adds one rounding of the result.
    quad_bound = weights.square().sum() * gram_error + unit_roundoff * ref_quad.abs()
    inverse_norm = torch.linalg.matrix_norm(torch.linalg.inv(capacitance))
    logdet_bound = inverse_norm * gram_error + unit_roundoff * ref_logdet.abs()
    assert (quad.double() - ref_quad).abs() <= quad_bound
    assert (logdet.double() - ref_logdet).abs() <= logdet_bound


@pytest.mark.parametrize("num_features", [16, 128], ids=["feature-space", "fewer-points-than-features"])
@pytest.mark.parametrize("where", ["target", "input"])
def test_marginal_likelihood_names_the_bad_rows(num_features, where):
    x, y = regression_data(n=40)
    if where == "target":
        y[[3, 17]] = torch.tensor([float("nan"), float("inf")], dtype=torch.float64)
    else:
        x[5, 1] = float("nan")
    model = make_model(x, y, num_features=num_features).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    count = 2 if where == "target" else 1
    # Inputs: the CPU check of the feature map would catch them first; switch it off to reach the factorisation,
    # as on a GPU where that check would cost a host synchronisation per forward pass (and GPyTorch's debug check
    # that the training inputs are passed, which NaN != NaN defeats).
    with gprf.settings.validate_inputs(False), gpytorch.settings.debug(False):
        with pytest.raises(NonFiniteTrainingDataError, match=rf"^{count} of 40 "):
            mll(model(x), y)


def test_marginal_likelihood_of_no_training_points_is_refused():
    x, y = torch.empty(0, 3, dtype=torch.float64), torch.empty(0, dtype=torch.float64)
    model = make_model(x, y).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    with pytest.raises(ValueError, match="marginal likelihood of 0 training points is undefined"):
        mll(model(x), y)


def test_factor_dtype_setting_reaches_the_marginal_likelihood():
    x, y = regression_data(n=60)
    model = make_model(x, y, num_features=16).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    reference = mll(model(x), y)
    with gprf.settings.factor_dtype(torch.float32):
        single = mll(model(x), y)
    # The float64 model's value with a float32 factor: equal to float32 accuracy, not to float64's.
    torch.testing.assert_close(single, reference, rtol=1e-5, atol=1e-5)
    assert single.item() != reference.item()


# ---------------------------------------------------------------------------------------- linear_operator's case
class TestFeatureRootAddedDiagOperatorCase(LinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks on K = s R R^T + diag(noise) with fewer features than points (F = 2 < N = 5)."""

    seed = 0
    batch_shape = ()
    # Solves, quadratic forms and log-determinants are exact in feature space (Woodbury, determinant lemma): no CG;
    # the root decomposition is exact too ([sqrt(s) R, noise^1/2]): no Lanczos.
    should_call_cg = False
    should_call_lanczos = False
    # Samples from the exact root have the covariance K (checked on 50000 draws).
    should_test_sample = True

    def create_linear_op(self):
        operator = FeatureRootLinearOperator(
            torch.randn(*self.batch_shape, 5, 2), outputscale=0.5 + torch.rand(self.batch_shape)
        )
        return operator.add_diagonal(0.5 + torch.rand(*self.batch_shape, 5))

    def evaluate_linear_op(self, linear_op):
        root = feature_root(linear_op)
        noise = torch.diag_embed(root.noise.expand(*root.noise.shape[:-1], root.num_points))
        return root.outputscale[..., None, None] * root.features @ root.features.mT + noise


class TestFeatureRootAddedDiagOperatorCaseBatch(TestFeatureRootAddedDiagOperatorCase):
    seed = 1
    batch_shape = (3,)


class TestFeatureRootAddedDiagOperatorCaseMultiBatch(TestFeatureRootAddedDiagOperatorCase):
    seed = 2
    batch_shape = (2, 3)


class TestFeatureRootAddedConstantNoiseOperatorCase(TestFeatureRootAddedDiagOperatorCase):
    """The homoscedastic form: one noise variance per batch member (a ConstantDiagLinearOperator)."""

    seed = 3
    batch_shape = (3,)

    def create_linear_op(self):
        operator = FeatureRootLinearOperator(
            torch.randn(*self.batch_shape, 5, 2), outputscale=0.5 + torch.rand(self.batch_shape)
        )
        return operator.add_diagonal(0.5 + torch.rand(*self.batch_shape, 1))

    def _assert_eigenpairs(self, evaluated, evals, evecs, expected_evals, tolerances):
        """``evecs`` orthonormal with ``evaluated @ evecs = evecs diag(evals)``; ``evals`` the ``expected_evals``."""
        self.assertAllClose(evals, expected_evals, **tolerances)
        self.assertAllClose(evaluated @ evecs, evecs * evals.unsqueeze(-2), **tolerances)
        self.assertAllClose(evecs.mT @ evecs, torch.eye(evecs.size(-1)).expand(*evals.shape[:-1], -1, -1), **tolerances)

    def test_eigh(self):
        """The noise variance is an eigenvalue of multiplicity N - F = 3, whose eigenvectors are any orthonormal basis
        of their space: linear_operator's check compares them entry by entry with those of torch's eigh of the dense
        matrix (it skips repeated eigenvalues only when the reference's are bitwise equal, which rounding prevents).
        Checked instead: the eigenvalues, and eigenvectors that are orthonormal and satisfy K V = V diag(evals)."""
        linear_op = self.create_linear_op()
        evals, evecs = torch.linalg.eigh(linear_op)
        evaluated = self.evaluate_linear_op(linear_op)
        order = evals.argsort(-1)
        evecs = evecs.to_dense().gather(-1, order.unsqueeze(-2).expand(*evecs.shape))
        expected = torch.linalg.eigvalsh(evaluated)
        self._assert_eigenpairs(evaluated, evals.gather(-1, order), evecs, expected, self.tolerances["symeig"]["float"])

    def test_diagonalization(self, symeig=False):
        """Lanczos (linear_operator's "usually partial" diagonalization) of s R R^T + noise I sees a Krylov space of
        dimension F + 1 = 3, the number of distinct eigenvalues: it returns those F + 1 eigenpairs, not the
        multiplicity of the noise eigenvalue. Checked: they are exact eigenpairs and every distinct eigenvalue; the
        full diagonalization (method="symeig") runs linear_operator's check."""
        if symeig:
            return super().test_diagonalization(symeig=True)
        linear_op = self.create_linear_op()
        with linear_operator.settings.max_cholesky_size(0):
            evals, evecs = linear_op.diagonalization()
        order = evals.argsort(-1)
        evecs = evecs.to_dense().gather(-1, order.unsqueeze(-2).expand(*evecs.shape))
        evaluated = self.evaluate_linear_op(linear_op)
        distinct = torch.linalg.eigvalsh(evaluated)[..., 2:]  # the noise once, then the others
        self._assert_eigenpairs(evaluated, evals.gather(-1, order), evecs, distinct, self.tolerances["symeig"]["float"])
