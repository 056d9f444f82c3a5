"""gprf.settings: the NaN/inf check of feature maps, the dtype of every factorisation, the weight-space solver and the
row chunks of feature roots; how their blocks nest and restore."""

from __future__ import annotations

import threading

import pytest
import torch

import gprf
from gprf.features import RandomFourierFeatures


def test_validate_inputs_modes():
    features = RandomFourierFeatures(2, 8, seed=0).double()
    bad = torch.tensor([[float("inf"), 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="NaN or infinite"):
        features(bad)  # "auto" checks CPU tensors
    with gprf.settings.validate_inputs(False):
        assert not torch.isfinite(features(bad)).all()
    with pytest.raises(ValueError, match="NaN or infinite"):
        features(bad)  # restored on exit
    with pytest.raises(ValueError, match="True, False or 'auto'"):
        gprf.settings.validate_inputs("sometimes")


def test_factor_dtype_modes():
    assert gprf.settings.factor_dtype.value() == torch.float64
    assert gprf.settings.factor_dtype.complex_value() == torch.complex128
    with gprf.settings.factor_dtype(torch.float32):
        assert gprf.settings.factor_dtype.value() == torch.float32
        assert gprf.settings.factor_dtype.complex_value() == torch.complex64
    assert gprf.settings.factor_dtype.value() == torch.float64  # restored on exit
    with pytest.raises(ValueError, match="torch.float32 or torch.float64"):
        gprf.settings.factor_dtype(torch.float16)


def test_weight_space_solver_modes():
    default = gprf.settings.weight_space_solver.current()
    assert default.solver == "auto" and not default.uses_cg(default.auto_threshold - 1)
    assert default.uses_cg(default.auto_threshold)
    state = gprf.linalg.WeightSpaceCGState()
    with gprf.settings.weight_space_solver("cg", tolerance=1e-8, num_probes=4, probe_seed=3, state=state):
        active = gprf.settings.weight_space_solver.current()
        assert active.uses_cg(1) and active.tolerance == 1e-8 and active.num_probes == 4 and active.state is state
        with gprf.settings.weight_space_solver("cholesky"):
            assert not gprf.settings.weight_space_solver.current().uses_cg(10**9)
        assert gprf.settings.weight_space_solver.current() is active  # nested blocks restore on exit
    assert gprf.settings.weight_space_solver.current().solver == "auto"


class _GuessOnly:
    """A warm start without the fields the solve writes back (solution, iterations, converged)."""

    def guess_for(self, projection):
        return None


def test_weight_space_solver_takes_a_warm_start_state_by_its_members():
    class OwnState:
        solution = iterations = converged = None

        def guess_for(self, projection):
            return None

    state = OwnState()
    with gprf.settings.weight_space_solver("cg", state=state):
        assert gprf.settings.weight_space_solver.current().state is state


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(solver="lanczos"), "'auto', 'cholesky' or 'cg'"),
        (dict(auto_threshold=0), "auto_threshold must be an integer of at least 1"),
        (dict(max_iterations=2.5), "max_iterations must be an integer of at least 1"),
        (dict(num_probes=0), "num_probes must be an integer of at least 1"),
        (dict(preconditioner_rank=-1), "preconditioner_rank must be an integer of at least 0"),
        (dict(tolerance=0.0), r"tolerance is a relative residual in \(0, 1\)"),
        (dict(probe_seed="zero"), "probe_seed must be an integer or None"),
        (dict(state={}), "state must be a gprf.linalg.WeightSpaceCGState"),
        (dict(state=_GuessOnly()), "state must be a gprf.linalg.WeightSpaceCGState"),
    ],
)
def test_weight_space_solver_refuses_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gprf.settings.weight_space_solver(**kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("dense",), {}, "'auto', 'points' or 'features'"),
        ((), {"max_points_bytes": 0}, "max_points_bytes must be a positive integer"),
        ((), {"max_points_bytes": 1.5}, "max_points_bytes must be a positive integer"),
    ],
)
def test_covariance_route_refuses_bad_values(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        gprf.settings.covariance_route(*args, **kwargs)


def test_feature_chunk_size_modes():
    rule = gprf.settings.feature_chunk_size
    big = rule.AUTO_MIN_ELEMENTS // 1024
    assert rule.rows(1000, 1024) is None  # "auto": small roots are formed
    assert rule.rows(big, 1024) == rule.CHUNK_ELEMENTS // 1024
    with rule(100):
        assert rule.rows(101, 8) == 100 and rule.rows(100, 8) is None and rule.chunk_rows(8) == 100
    with rule(False):
        assert rule.rows(big, 1024) is None
    assert rule.rows(big, 1024) == rule.CHUNK_ELEMENTS // 1024  # restored on exit
    for bad in (0, -3, True, "always", 2.5):
        with pytest.raises(ValueError, match="positive number of rows, False or 'auto'"):
            rule(bad)


def test_chunked_sums_chunk_every_root_and_keep_explicit_choices():
    rule = gprf.settings.feature_chunk_size
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    with rule.chunked(512, cpu):
        # Chunked however small N F is, in the sums' smaller CPU chunks.
        assert rule.rows(5000, 512) == rule.SUMS_CHUNK_ELEMENTS // 512
    with rule.chunked(512, cuda):
        assert rule.rows(20000, 512) == rule.CHUNK_ELEMENTS // 512
    with rule(100), rule.chunked(512, cpu):
        assert rule.rows(101, 512) == 100
    with rule(False), rule.chunked(512, cpu):
        assert rule.rows(10**6, 512) is None
    assert rule.rows(5000, 512) is None  # restored: "auto" forms small roots


_CPU, _META = torch.empty(1, 1), torch.empty(1, 1, device="meta")
_RULE = gprf.settings.feature_chunk_size
_BIG = _RULE.AUTO_MIN_ELEMENTS // 1024
# Per setting: two values a block may set and a reading of the current value through the public API that tells
# each value from the default and from the other.
SETTINGS = {
    "validate_inputs": (
        gprf.settings.validate_inputs,
        True,
        False,
        lambda: (gprf.settings.validate_inputs.applies_to(_CPU), gprf.settings.validate_inputs.applies_to(_META)),
    ),
    "factor_dtype": (gprf.settings.factor_dtype, torch.float32, torch.float64, gprf.settings.factor_dtype.value),
    "weight_space_solver": (
        gprf.settings.weight_space_solver,
        "cg",
        "cholesky",
        lambda: gprf.settings.weight_space_solver.current().solver,
    ),
    "feature_chunk_size": (_RULE, 100, False, lambda: (_RULE.rows(101, 8), _RULE.rows(_BIG, 1024))),
    "covariance_route": (
        gprf.settings.covariance_route,
        "points",
        "features",
        lambda: gprf.settings.covariance_route.current().route,
    ),
}


@pytest.mark.parametrize("name", SETTINGS)
def test_blocks_nest_and_restore_the_previous_value_after_an_exception(name):
    setting, outer, inner, read = SETTINGS[name]
    default = read()
    with setting(outer):
        at_outer = read()
        with pytest.raises(RuntimeError, match="raised inside"), setting(inner):
            at_inner = read()
            raise RuntimeError("raised inside the inner block")
        assert read() == at_outer
    assert read() == default
    assert at_outer != default and at_inner != at_outer  # each block changed the reading


@pytest.mark.parametrize("name", SETTINGS)
def test_one_instance_may_be_entered_again_within_itself(name):
    setting, outer, inner, read = SETTINGS[name]
    default = read()
    block = setting(outer)
    with block:
        at_outer = read()
        with setting(inner):
            at_inner = read()
            with block:
                assert read() == at_outer
            assert read() == at_inner  # each entry restores what it replaced, not the instance's first
        assert read() == at_outer
    assert read() == default


def test_settings_are_process_wide():
    # Documented: a value set in one thread is seen by every thread (not thread-local, not thread-safe).
    seen = []
    with gprf.settings.factor_dtype(torch.float32):
        thread = threading.Thread(target=lambda: seen.append(gprf.settings.factor_dtype.value()))
        thread.start()
        thread.join()
    assert seen == [torch.float32]
    assert gprf.settings.factor_dtype.value() == torch.float64
