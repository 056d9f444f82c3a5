"""benchmarks.bench_thompson: the Thompson-sampling sub-benchmark without its exact route, the candidates each path
picks, and the memory check that refuses a dense update that cannot fit."""

from __future__ import annotations

import pytest
import torch

from benchmarks.bench import main
from benchmarks.bench_thompson import dense_update_bytes, thompson_candidates
from tests.benchmarks.conftest import run_json

pytestmark = pytest.mark.usefixtures("single_thread")


def test_thompson_without_the_small_exact_route(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, "--what", "thompson", "--thompson-exact-n", "0")
    assert set(report["thompson"]["median_s"]) == {"gprf-large"}
    assert "ratio gprf/botorch" not in text and "would need" in text


def test_thompson_candidates_are_each_paths_pick_among_the_candidates(generator):
    from gprf.botorch import RandomFeatureSingleTaskGP

    x = torch.rand(30, 2, generator=generator, dtype=torch.float64)
    y = torch.sin(6 * x).sum(-1, keepdim=True)
    candidates = torch.rand(25, 2, generator=generator, dtype=torch.float64)
    model = RandomFeatureSingleTaskGP(x, y, num_features=32, seed=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        picks = thompson_candidates(model, 9, candidates)
    assert picks.shape == (9, 2)
    assert all((candidates == pick).all(-1).any() for pick in picks)


def test_a_dense_update_that_cannot_fit_is_a_clear_error(capsys):
    """N = 10^6 with 100 paths needs 102 * 10^12 * 8 bytes (about 742 TiB): refused before anything runs."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--what", "thompson", "--thompson-exact-n", "1000000", "--quiet"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --thompson-exact-n: BoTorch's dense update at N=1000000 with 100 paths needs" in err
    assert "lower --thompson-exact-n (0 skips the exact route) or --paths" in err


def test_dense_update_bytes_count_the_factor_and_the_broadcast_over_paths():
    """BoTorch's update holds the N x N Cholesky factor, K + noise, and one N x N solve per path: (S + 2) N^2 items."""
    assert dense_update_bytes(1000, 100) == 102 * 1000**2 * 8
    assert dense_update_bytes(10, 1, itemsize=4) == 3 * 100 * 4
