"""benchmarks.regression_methods: every contender starts from GPyTorch's initial hyperparameters at the benchmark's
sizes, trains on its own objective under a clock that excludes checkpoints, and is scored by closed-form metrics;
the gprf runner works with a recipe that takes a callback and with one that does not."""

from __future__ import annotations

import math
import time
from unittest import mock

import gpytorch
import pytest
import torch
from gpytorch.kernels import InducingPointKernel, RFFKernel

import gprf
from benchmarks import regression_methods
from benchmarks.regression_methods import (
    METHODS,
    SENSIBLE_START,
    Clock,
    Sizes,
    build_contender,
    cg_iterations_per_solve,
    checkpoint_times,
    predictive_metrics,
    run_contender,
)
from gprf.cli.data import Split
from gprf.kernels import RandomFourierKernel

pytestmark = pytest.mark.usefixtures("single_thread")
CPU = torch.device("cpu")
SENSIBLY_STARTED = ["exact-start", "exact-warm", "gprf-exact", "gprf-exact-surrogate"]


@pytest.fixture
def split(generator) -> Split:
    x = torch.rand(60, 2, generator=generator, dtype=torch.float64) * 4 - 2
    test_x = torch.rand(20, 2, generator=generator, dtype=torch.float64) * 4 - 2
    f = lambda z: torch.sin(2 * z[:, 0]) + z[:, 1]  # noqa: E731
    return Split(x, f(x), test_x, f(test_x), 0.0, 1.0)


def test_checkpoints_double_up_to_the_budget():
    assert checkpoint_times(8.0, 4) == [1.0, 2.0, 4.0, 8.0]
    assert checkpoint_times(3.0, 1) == [3.0]


def test_metrics_are_the_rmse_the_mae_and_the_mean_gaussian_nll():
    mean, var, y = torch.tensor([0.0, 1.0]), torch.tensor([1.0, 4.0]), torch.tensor([1.0, -1.0])
    metrics = predictive_metrics(mean, var, y)
    assert metrics["rmse"] == pytest.approx(math.sqrt((1 + 4) / 2))
    assert metrics["mae"] == pytest.approx((1 + 2) / 2)
    nll = [0.5 * math.log(2 * math.pi) + 0.5, 0.5 * math.log(2 * math.pi * 4) + 0.5 * 4 / 4]
    assert metrics["nll"] == pytest.approx(sum(nll) / 2)


def test_the_clock_leaves_out_its_pauses():
    clock = Clock(CPU)
    with clock.pause():
        time.sleep(0.05)
    assert clock.seconds() < 0.05  # 0.05 s paused, a few microseconds counted


def test_sizes_are_capped_at_the_training_rows():
    assert Sizes(1024, 1024, 4096).capped(300) == Sizes(300, 300, 4096)


def test_every_method_but_the_sensible_starts_starts_from_gpytorch_initial_hyperparameters_at_its_size(split):
    sizes, softplus0 = Sizes(16, 8, 32, 12, "random_features"), math.log(2.0)
    for method in (method for method in METHODS if method not in SENSIBLY_STARTED):
        contender = build_contender(method, split, sizes, 24, seed=3)
        model = contender.model
        kernel = model.covar_module
        scale = kernel.base_kernel if isinstance(kernel, InducingPointKernel) else kernel
        assert model.mean_module.constant.item() == 0.0
        assert scale.outputscale.item() == pytest.approx(softplus0)
        torch.testing.assert_close(scale.base_kernel.lengthscale, torch.full((1, 2), softplus0, dtype=torch.float64))
        assert contender.noise() == pytest.approx(softplus0 + 1e-4)
        if method == "rff":
            assert isinstance(scale.base_kernel, RFFKernel) and scale.base_kernel.num_samples == 16  # F/2
        if method == "gprf":
            base = scale.base_kernel
            assert isinstance(base, RandomFourierKernel) and base.feature_map.num_features == 24
            assert base.feature_map.sampler == "orthogonal"
        if method in ("sgpr", "svgp"):
            inducing = kernel.inducing_points if method == "sgpr" else model.variational_strategy.inducing_points
            assert inducing.shape == (16, 2)
            assert all((split.train_x == z).all(-1).any() for z in inducing)  # seeded training rows


@pytest.mark.parametrize("method", SENSIBLY_STARTED)
def test_the_sensible_start_is_lengthscale_one_outputscale_one_noise_a_tenth(split, method):
    contender = build_contender(method, split, Sizes(16, 8, 32, 12, "random_features"), None, seed=3)
    kernel = contender.model.covar_module
    if method.startswith("gprf-exact"):
        assert kernel.num_features == 12 and kernel.preconditioner == "random_features"
        assert kernel.block_rows == 60  # the kernel matrix kept whole, as GPyTorch keeps the exact GP's
        kernel = kernel.base_kernel
    assert SENSIBLE_START == {"lengthscale": 1.0, "outputscale": 1.0, "noise": 0.1}
    torch.testing.assert_close(kernel.base_kernel.lengthscale, torch.ones(1, 2, dtype=torch.float64))
    assert kernel.outputscale.item() == pytest.approx(1.0) and contender.noise() == pytest.approx(0.1)


def test_the_warm_start_tunes_on_a_subsample_then_on_every_row(split, monkeypatch):
    monkeypatch.setattr(regression_methods, "WARM_ROWS", 20)
    monkeypatch.setattr(regression_methods, "WARM_STEPS", 5)
    contender = build_contender("exact-warm", split, Sizes(16, 8, 32), None, seed=0)
    model = contender.model
    rows_seen = []
    loss = contender.loss
    contender.loss = lambda: (rows_seen.append(model.train_targets.numel()), loss())[1]
    run = regression_methods.Run(contender, split, 1.0, 1, CPU)
    regression_methods.train_warm(contender, run, 1.0, seed=0)
    assert rows_seen[:5] == [20] * 5 and len(rows_seen) > 5 and set(rows_seen[5:]) == {60}
    assert model.train_inputs[0] is split.train_x and model.train_targets is split.train_y


def test_cg_iterations_of_an_exact_preconditioner_are_one(split):
    """A preconditioner equal to the training covariance (pivoted Cholesky of full rank, Nystrom at every training
    point) solves in one iteration; a Cholesky-sized problem reports none."""
    exact = build_contender("exact", split, Sizes(16, 8, 32), None, seed=0)
    nystrom = build_contender("gprf-exact", split, Sizes(16, 8, 32, 60, "nystrom"), None, seed=0)
    assert cg_iterations_per_solve(exact) is None  # 60 rows: GPyTorch factors by Cholesky
    with gpytorch.settings.max_cholesky_size(10), gpytorch.settings.max_preconditioner_size(60):
        assert cg_iterations_per_solve(exact) == 1
        assert cg_iterations_per_solve(nystrom) == 1
    with gpytorch.settings.max_cholesky_size(10), gpytorch.settings.max_preconditioner_size(2):
        assert cg_iterations_per_solve(exact) > 1


def test_svgp_minibatches_cover_every_row_once_per_epoch(split):
    contender = build_contender("svgp", split, Sizes(16, 25, 32), None, seed=0)
    seen = []
    elbo = contender.elbo
    contender.elbo = lambda output, y: (seen.append(y.clone()), elbo(output, y))[1]
    for _ in range(3):  # 60 rows in minibatches of 25: 25, 25, 10
        contender.loss()
    assert [len(y) for y in seen] == [25, 25, 10]
    assert sorted(torch.cat(seen).tolist()) == sorted(split.train_y.tolist())


@pytest.mark.parametrize("method", ["exact", "exact-start", "exact-warm", "sgpr", "svgp", "rff"])
def test_training_improves_on_the_initial_fit(split, method):
    before = build_contender(method, split, Sizes(30, 30, 64), None, seed=0).evaluate(split, CPU)
    result = run_contender(method, split, Sizes(30, 30, 64), None, 0.4, 3, seed=0, device=CPU)
    assert result["rmse"] < before["rmse"] and result["nll"] < before["nll"]
    # Training stops when the longest step would not fit in the time left (steps of 60 rows take milliseconds).
    assert result["steps"] >= 1 and 0.2 <= result["train_s"] <= 0.4
    points = result["checkpoints"]
    assert points[-1] == {
        key: value for key, value in result.items() if key not in ("noise", "cg_iterations", "checkpoints")
    }
    assert [p["train_s"] for p in points] == sorted(p["train_s"] for p in points)
    assert all(p["train_s"] >= 0.1 for p in points)  # the first checkpoint is at budget / 4


def test_a_run_leaves_the_global_rng_alone(split):
    torch.manual_seed(5)
    expected = torch.rand(2)
    torch.manual_seed(5)
    run_contender("rff", split, Sizes(8, 8, 16), None, 0.05, 1, seed=0, device=CPU)  # RFFKernel draws from it
    assert torch.equal(torch.rand(2), expected)


def test_gprf_runner_takes_checkpoints_at_the_recipes_stages(split):
    result = run_contender("gprf", split, Sizes(8, 8, 16), 32, 5.0, 3, seed=0, device=CPU)
    *points, final = result["checkpoints"]
    # 60 points and 32 features are a small problem: fit_mll's stages are the (empty) tuning, the exact scale refit
    # and full L-BFGS, one callback each.
    assert final["steps"] == result["steps"] == 3
    assert all(p["stage"] in ("tune", "scale", "finish") for p in points)
    assert result["rmse"] < 0.5  # a smooth function, 60 points, 32 features


@pytest.mark.parametrize(("method", "start"), [("gprf-exact", "subsample"), ("gprf-exact-surrogate", "surrogate")])
def test_gprf_exact_runs_the_exact_route_of_the_recipe(split, method, start):
    before = build_contender(method, split, Sizes(8, 8, 16, 16), None, seed=0).evaluate(split, CPU)
    calls = []
    fit_mll = gprf.fit_mll

    def recording(mll, **options):
        calls.append(options["exact_start"])
        return fit_mll(mll, **options)

    with mock.patch("gprf.fit_mll", recording):
        result = run_contender(method, split, Sizes(8, 8, 16, 16), None, 2.0, 2, seed=0, device=CPU)
    assert calls == [start]
    # A step per callback: the exact steps and the stage ends.
    assert result["steps"] > 4
    assert result["rmse"] < before["rmse"] and result["nll"] < before["nll"]
    assert result["cg_iterations"] is None  # 60 rows: Cholesky


@pytest.mark.parametrize("method", ["exact", "exact-start", "exact-warm", "gprf-exact", "gprf-exact-surrogate"])
def test_exact_predictions_use_fast_variances_and_the_tight_mean_solve(split, method):
    contender = build_contender(method, split, Sizes(8, 8, 16), None, 0)
    with contender.predict_settings():
        assert gpytorch.settings.fast_pred_var.on()
        assert gpytorch.settings.eval_cg_tolerance.value() == 1e-3
    assert gpytorch.settings.eval_cg_tolerance.value() == 0.01


class SteppedClock:
    """A training clock that advances ``step`` seconds with every loss evaluation."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def seconds(self):
        return self.now


def test_a_step_starts_only_while_the_longest_step_fits_in_the_time_left(split):
    contender = build_contender("exact-start", split, Sizes(8, 8, 16), None, 0)
    run = regression_methods.Run(contender, split, 1.0, 1, CPU)
    clock = run.clock = SteppedClock(0.4)
    loss = contender.loss

    def timed_loss():
        clock.now += clock.step
        return loss()

    contender.loss = timed_loss
    regression_methods._adam_steps(contender, run, regression_methods._adam(contender), 1.0, math.inf)
    assert run.steps == 2 and clock.now == pytest.approx(0.8)  # a third step would have ended at 1.2 s
