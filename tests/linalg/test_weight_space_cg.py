"""Weight-space CG: solves and inverse quadratic forms (with their gradients) that match the Cholesky factor, an
unbiased stochastic log-determinant and log-determinant gradient (z-tests over probe draws with the empirical standard
error), the warm start, the Nyström preconditioner's saving in iterations, the marginal-likelihood route it serves
(one training step as with the Cholesky factor), and clear errors."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from linear_operator.utils.warnings import NumericalWarning

import gprf
from gprf.exceptions import NonFiniteTrainingDataError
from gprf.linalg import WeightSpaceCGState, cg_inv_quad_logdet
from gprf.testing import regression_data
from tests.helpers.regression import make_model


def _spectral_gram(num_features=80, decay=4.0, top=1e5, seed=0):
    r""":math:`G = Q\,\mathrm{diag}(\lambda)\,Q^\top` with :math:`\lambda_i = \text{top}\,e^{-i/\text{decay}}`."""
    generator = torch.Generator().manual_seed(seed)
    basis = torch.linalg.qr(torch.randn(num_features, num_features, generator=generator, dtype=torch.float64)).Q
    spectrum = top * torch.exp(-torch.arange(num_features, dtype=torch.float64) / decay)
    projection = torch.randn(num_features, 3, generator=generator, dtype=torch.float64)
    return (basis * spectrum) @ basis.mT, projection


def _cholesky_terms(gram, projection):
    cholesky = torch.linalg.cholesky(torch.eye(gram.size(-1), dtype=gram.dtype) + gram)
    whitened = torch.linalg.solve_triangular(cholesky, projection, upper=False)
    return whitened.square().sum(-2), 2 * cholesky.diagonal(dim1=-2, dim2=-1).log().sum(-1)


@pytest.mark.parametrize("batch", [(), (2,)])
def test_inv_quad_matches_cholesky_and_warm_start_skips_the_solve(batch):
    gram, projection = _spectral_gram()
    gram, projection = gram.expand(*batch, *gram.shape), projection.expand(*batch, *projection.shape)
    expected, _ = _cholesky_terms(gram, projection)
    terms = cg_inv_quad_logdet(gram, projection, logdet=False, tolerance=1e-12, preconditioner_rank=20)
    assert terms.converged and terms.logdet is None and terms.iterations > 5
    torch.testing.assert_close(terms.inv_quad, expected, rtol=1e-8, atol=0)
    solution = torch.linalg.solve(torch.eye(80, dtype=torch.float64) + gram, projection)
    torch.testing.assert_close(terms.solution, solution, rtol=0, atol=1e-8 * solution.abs().max())
    warm = cg_inv_quad_logdet(gram, projection, logdet=False, tolerance=1e-10, initial_guess=terms.solution)
    assert warm.iterations == 0  # the guess already meets the tolerance
    torch.testing.assert_close(warm.inv_quad, expected, rtol=1e-8, atol=0)


def test_inv_quad_gradients_match_cholesky():
    gram, projection = _spectral_gram(top=1e3)
    params = [gram.clone().requires_grad_(True), projection.clone().requires_grad_(True)]
    weights = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)  # distinct output gradients per column
    terms = cg_inv_quad_logdet(*params, logdet=False, tolerance=1e-12, preconditioner_rank=10)
    grads = torch.autograd.grad((terms.inv_quad * weights).sum(), params)
    reference = [gram.clone().requires_grad_(True), projection.clone().requires_grad_(True)]
    expected = torch.autograd.grad((_cholesky_terms(*reference)[0] * weights).sum(), reference)
    for actual, target in zip(grads, expected, strict=True):
        torch.testing.assert_close(actual, target, rtol=0, atol=1e-6 * target.abs().max())


def _probe_draws(num_draws, rank, seed):
    """One batch member per probe draw: each member gets its own preconditioner sketch and probes."""
    gram, _ = _spectral_gram(num_features=50, decay=6.0, top=1e3)
    draws = gram.expand(num_draws, 50, 50).clone().requires_grad_(True)
    terms = cg_inv_quad_logdet(
        draws, num_probes=4, tolerance=1e-11, preconditioner_rank=rank, generator=torch.Generator().manual_seed(seed)
    )
    return gram, draws, terms


def test_stochastic_logdet_is_unbiased_over_probe_draws():
    gram, _, terms = _probe_draws(num_draws=400, rank=8, seed=5)
    exact = torch.logdet(torch.eye(50, dtype=torch.float64) + gram)
    estimates = terms.logdet.detach()
    standard_error = estimates.std() / estimates.numel() ** 0.5
    assert standard_error > 1e-3 * exact.abs()  # the estimate is random: the test can fail
    assert (estimates.mean() - exact).abs() < 4 * standard_error  # z-test at 4 standard errors


def test_stochastic_logdet_gradient_is_unbiased_over_probe_draws():
    gram, draws, terms = _probe_draws(num_draws=400, rank=8, seed=6)
    (gradients,) = torch.autograd.grad(terms.logdet.sum(), draws)  # one Hutchinson estimate of C^-1 per draw
    inverse = torch.linalg.inv(torch.eye(50, dtype=torch.float64) + gram)
    torch.testing.assert_close(gradients, gradients.mT)  # symmetrised
    standard_error = gradients.std(0) / gradients.size(0) ** 0.5
    assert (standard_error > 0).all()
    z_scores = (gradients.mean(0) - inverse) / standard_error
    assert z_scores.abs().max() < 5  # 1275 distinct entries: P(|z| > 5 anywhere) is below 1e-3
    # The derivative along one symmetric direction (what a hyperparameter sees): a single z-test.
    direction = torch.randn(50, 50, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    direction = direction + direction.mT
    along = (gradients * direction).sum((-2, -1))
    z_score = (along.mean() - (inverse * direction).sum()) / (along.std() / along.numel() ** 0.5)
    assert z_score.abs() < 4


def test_nystrom_preconditioner_cuts_iterations_on_fast_spectral_decay():
    gram, projection = _spectral_gram(num_features=200, decay=4.0, top=1e6)
    plain = cg_inv_quad_logdet(gram, projection, logdet=False, tolerance=1e-8, preconditioner_rank=0)
    preconditioned = cg_inv_quad_logdet(gram, projection, logdet=False, tolerance=1e-8, preconditioner_rank=60)
    assert plain.converged and preconditioned.converged
    assert plain.iterations >= 3 * preconditioned.iterations
    torch.testing.assert_close(preconditioned.inv_quad, plain.inv_quad, rtol=1e-6, atol=0)


def test_bad_arguments_and_unconverged_solves():
    gram, projection = _spectral_gram()
    with pytest.raises(ValueError, match="nothing to compute"):
        cg_inv_quad_logdet(gram, None, logdet=False)
    with pytest.raises(ValueError, match="max_iterations must be an integer of at least 1"):
        cg_inv_quad_logdet(gram, projection, max_iterations=0)
    with pytest.raises(ValueError, match="num_probes must be an integer of at least 1"):
        cg_inv_quad_logdet(gram, projection, num_probes=0)
    with pytest.raises(ValueError, match=r"tolerance is a relative residual in \(0, 1\)"):
        cg_inv_quad_logdet(gram, projection, tolerance=1.5)
    with pytest.raises(ValueError, match="rank must be a non-negative integer"):
        cg_inv_quad_logdet(gram, projection, preconditioner_rank=-2)
    with pytest.warns(NumericalWarning, match="max_iterations=2"):
        terms = cg_inv_quad_logdet(gram, projection, logdet=False, max_iterations=2, preconditioner_rank=0)
    assert not terms.converged and terms.iterations == 2


def _model_gradients(solver, data, **options):
    x, y = data
    model = make_model(x, y, num_features=64)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    model.train()
    with gprf.settings.weight_space_solver(solver, **options):
        loss = -mll(model(x), y)
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters()}


def test_training_step_with_cg_matches_cholesky():
    data = regression_data(n=300)
    loss, expected = _model_gradients("cholesky", data)
    state = WeightSpaceCGState()
    options = dict(tolerance=1e-10, num_probes=16, preconditioner_rank=32, probe_seed=0, state=state)
    cg_loss, actual = _model_gradients("cg", data, **options)
    assert state.iterations > 0 and state.converged and state.solution.shape == (64, 1)
    with gprf.settings.feature_chunk_size(100):  # a lazy root: the Gram is summed over row chunks, never formed
        chunked_loss, chunked = _model_gradients("cg", data, **options)
    torch.testing.assert_close(chunked_loss, cg_loss)
    for name, grad in actual.items():
        torch.testing.assert_close(chunked[name], grad, msg=name)
    torch.testing.assert_close(cg_loss, loss, rtol=2e-3, atol=0)  # the log-determinant is an estimate
    for name, grad in expected.items():
        # An SGD step moves each parameter by -lr * grad: the same step within 1% (the mean's gradient is exact;
        # the preconditioner as control variate keeps the others' Hutchinson error near 1e-4 here).
        torch.testing.assert_close(actual[name], grad, rtol=0.01, atol=1e-3 * grad.abs().max(), msg=name)
    # "auto" switches to CG from auto_threshold features on, and stays with the Cholesky factor below it.
    below = WeightSpaceCGState()
    auto_loss, _ = _model_gradients("auto", data, auto_threshold=65, state=below)
    assert below.iterations is None and torch.equal(auto_loss, loss)
    above = WeightSpaceCGState()
    _model_gradients("auto", data, auto_threshold=64, state=above)
    assert above.iterations is not None


def test_cg_route_refuses_nonfinite_training_rows():
    x, y = regression_data(n=100)
    y[3] = float("nan")
    model = make_model(x, y, num_features=16)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    model.train()
    with gprf.settings.weight_space_solver("cg"), pytest.raises(NonFiniteTrainingDataError, match="1 of 100"):
        mll(model(x), y)
