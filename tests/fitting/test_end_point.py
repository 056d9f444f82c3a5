"""A fit ends where the model can predict: the end point's prediction cache is built, an end point whose capacitance
does not factor falls back to the last checkpoint that does, and a fit with no such point says why."""

from __future__ import annotations

import warnings

import pytest
import torch
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.utils.errors import NotPSDError

import gprf
from gprf.exceptions import FitFallbackWarning
from gprf.fitting import scale_fit
from gprf.fitting.end_point import end_where_predictable, parameter_values, prediction_failure
from gprf.kernels import PolynomialSketchKernel, RandomFourierKernel
from tests.helpers.models import scaled_gp, training_mll

# With fewer points than features, s Phi^T Phi / sigma^2 has zero eigenvalues that rounding at 1e20 * 1e-16 moves by
# far more than the identity's 1: the capacitance is numerically indefinite (every seed tried fails at 1e16 and above
# and factors at 1e14 and below).
_UNPREDICTABLE_OUTPUTSCALE = 1e20


def _sketch_mll(num_points: int = 10) -> ExactMarginalLogLikelihood:
    x = torch.rand(num_points, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = scaled_gp(x, x.sum(-1), PolynomialSketchKernel(32, num_dims=2, degree=2, seed=0)).double()
    return ExactMarginalLogLikelihood(model.likelihood, model)


def _at_outputscale(mll: ExactMarginalLogLikelihood, outputscale: float) -> list[torch.Tensor]:
    mll.model.covar_module.outputscale = outputscale
    return parameter_values(mll)


def _predicts(mll: ExactMarginalLogLikelihood) -> bool:
    model = mll.model
    with torch.no_grad():
        output = model(model.train_inputs[0][:3])
        return bool(torch.isfinite(output.mean).all() & torch.isfinite(output.variance).all())


def test_a_predictable_end_point_is_kept_in_eval_mode_without_a_cache():
    mll = _sketch_mll()
    start = _at_outputscale(mll, 1.0)
    _at_outputscale(mll, 3.0)
    end_where_predictable(mll, [("the start", start)])
    # The check's cache is dropped: the first real prediction builds its own under the settings in force there.
    assert not mll.training and mll.model.prediction_strategy is None
    assert mll.model.covar_module.outputscale.item() == pytest.approx(3.0)


def test_an_unpredictable_end_point_falls_back_to_the_last_checkpoint_that_predicts():
    mll = _sketch_mll()
    checkpoints = [
        ("the start", _at_outputscale(mll, 1.0)),
        ("tuning", _at_outputscale(mll, 5.0)),
        ("the scale refit", _at_outputscale(mll, _UNPREDICTABLE_OUTPUTSCALE)),
    ]
    _at_outputscale(mll, 10 * _UNPREDICTABLE_OUTPUTSCALE)
    assert isinstance(prediction_failure(mll), NotPSDError)
    with pytest.warns(FitFallbackWarning, match="NotPSDError.*set back to those after tuning"):
        end_where_predictable(mll, checkpoints)
    assert mll.model.covar_module.outputscale.item() == pytest.approx(5.0)
    assert not mll.training and _predicts(mll)


def test_a_fit_with_no_predictable_point_says_why_and_keeps_its_end_point():
    mll = _sketch_mll()
    checkpoints = [("the start", _at_outputscale(mll, _UNPREDICTABLE_OUTPUTSCALE))]
    _at_outputscale(mll, 2 * _UNPREDICTABLE_OUTPUTSCALE)
    with pytest.raises(NotPSDError, match="nor at any earlier point of the fit, its start included"):
        end_where_predictable(mll, checkpoints)
    assert mll.model.covar_module.outputscale.item() == pytest.approx(2 * _UNPREDICTABLE_OUTPUTSCALE)


def _high_degree_sketch_mll() -> ExactMarginalLogLikelihood:
    generator = torch.Generator().manual_seed(1)
    x = 1.5 * torch.randn(60, 3, generator=generator, dtype=torch.float64)
    y = torch.sin(x[:, 0]) + x[:, 1] * x[:, 2]
    model = scaled_gp(x, y, PolynomialSketchKernel(64, num_dims=3, degree=10, seed=1)).double()
    return ExactMarginalLogLikelihood(model.likelihood, model)


def test_fit_mll_of_a_high_degree_sketch_ends_where_the_model_predicts(monkeypatch):
    """The scale refit of a degree-10 sketch of unscaled inputs on the F x F route (its statistics from the
    features' Gram, as for N > F; forced here at N = 60 < F = 64) drives the outputscale to ~1e95 along the ridge
    s / l^20 = const, where the capacitance does not factor: the fit used to return that model."""
    monkeypatch.setattr(scale_fit, "likelihood_takes_points_route", lambda model: False)
    mll = _high_degree_sketch_mll()
    with pytest.warns(FitFallbackWarning, match="set back"):
        gprf.fit_mll(mll, seed=1)
    assert not mll.training and _predicts(mll)
    assert mll.model.covar_module.outputscale.item() < 1e10


def test_below_f_rows_the_same_fit_refits_on_the_points_gram_and_predicts():
    """N < F: the refit's statistics come from the N x N Gram, whose rounding does not open that ridge: the fit ends
    where the model predicts, without falling back, at a marginal likelihood far above the start's (-2.15 against
    -9.59 per point; the forced F x F route falls back to the start)."""
    mll = _high_degree_sketch_mll()
    before = training_mll(mll)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FitFallbackWarning)
        gprf.fit_mll(mll, seed=1)
    assert not mll.training and _predicts(mll)
    assert mll.model.covar_module.outputscale.item() < 1e10
    assert training_mll(mll) > before + 5.0


def test_the_fit_returns_in_eval_mode_with_the_refits_prediction_cache():
    x = torch.rand(80, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    model = scaled_gp(x, torch.sin(4 * x[:, 0]), RandomFourierKernel(32, num_dims=2, seed=0)).double()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    returned = gprf.fit_mll(mll)
    # The refit's Gram matrix went to the strategy the first prediction uses (tests/fitting/test_handover.py).
    assert returned is mll and not mll.training and model.prediction_strategy is not None
    assert _predicts(mll)


def test_the_check_can_be_replaced():
    """Rows sharded over processes check the capacitance of all of them: the check is a parameter."""
    mll = _sketch_mll()
    start = parameter_values(mll)
    _at_outputscale(mll, 2.0)
    checked = []

    def only_the_start_predicts(candidate):
        checked.append(float(candidate.model.covar_module.outputscale))
        return None if len(checked) > 1 else RuntimeError("not at 2.0")

    with pytest.warns(FitFallbackWarning, match="after the start"):
        end_where_predictable(mll, [("the start", start)], failure_of=only_the_start_predicts)
    assert len(checked) == 2 and checked[0] == pytest.approx(2.0)  # the end point, then the start
    assert all(torch.equal(value, expected) for value, expected in zip(parameter_values(mll), start, strict=True))


def test_a_known_failure_is_not_checked_again_and_the_replaced_check_judges_the_checkpoints():
    """The hand-over's failure at the end point, with a sharded fit's check at the checkpoints."""
    mll = _sketch_mll()
    start, start_outputscale = parameter_values(mll), float(mll.model.covar_module.outputscale)
    _at_outputscale(mll, 2.0)
    checked = []

    def record(candidate):
        checked.append(float(candidate.model.covar_module.outputscale))
        return None

    with pytest.warns(FitFallbackWarning, match=r"RuntimeError: known at 2\.0.*after the start"):
        end_where_predictable(mll, [("the start", start)], failure=RuntimeError("known at 2.0"), failure_of=record)
    assert checked == [pytest.approx(start_outputscale)]  # only the start was checked
    assert all(torch.equal(value, expected) for value, expected in zip(parameter_values(mll), start, strict=True))
