"""The fast-variance benchmark on a small synthetic data set: every candidate is reported, and the Rayleigh-Ritz
variances of the preconditioned kernel never fall below the exact ones (the Ritz inverse is a lower bound of K^-1)."""

from __future__ import annotations

import re

from benchmarks.fast_variances import main
from tests.benchmarks.test_cg_iterations import synthetic_npz


def test_reports_every_candidate_and_ritz_variances_bound_the_exact_ones(tmp_path, capsys):
    synthetic_npz(tmp_path, 400)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    main(["--data-dir", str(tmp_path), "--datasets", "toy", "--rows", "120", "--test-rows", "15",
          "--features", "16,64", "--state-dir", str(state_dir)])  # fmt: skip
    output = capsys.readouterr().out
    rows = dict(re.findall(r"^\s+(.+?)\s+max \|error\| .*min\(fast - exact\) ([-+0-9.e]+)", output, flags=re.M))
    assert set(rows) == {
        "GPyTorch LOVE (Lanczos)",
        "Ritz on random_features, F = 16",
        "Ritz on random_features, F = 64",
        "Ritz on nystrom, F = 16",
        "Ritz on nystrom, F = 64",
    }
    for label, lowest in rows.items():
        if label.startswith("Ritz"):
            assert float(lowest) >= -1e-8, label
    assert (state_dir / "toy_state.pt").is_file()
