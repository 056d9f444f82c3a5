"""The CG-iteration benchmark on a small synthetic data set: every preconditioner is reported, and the counts obey
what the preconditioners guarantee."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel

from benchmarks.cg_iterations import TOLERANCES, main, pivoted_cholesky_preconditioner, print_spectrum
from gprf.cli.options import CLIError


def synthetic_npz(tmp_path, rows: int, name: str = "toy") -> None:
    generator = np.random.default_rng(0)
    x = generator.uniform(-2, 2, size=(rows, 3))
    y = np.sin(2 * x[:, 0]) + 0.5 * np.cos(3 * x[:, 1]) + 0.05 * generator.standard_normal(rows)
    np.savez(tmp_path / f"{name}.npz", x=x, y=y)


def counts_by_label(output: str) -> dict[str, list[int]]:
    """``{label: [iterations at each tolerance]}`` from the printed report."""
    counts = {}
    for line in output.splitlines():
        match = re.match(r"\s+(.+?)\s+(tol .*?)\s+\(\d+ s\)$", line)
        if match:
            values = re.findall(r"tol [^:]+: (>?\d+)", match.group(2))
            counts[match.group(1)] = [int(value.lstrip(">")) for value in values]
    return counts


def test_reports_every_preconditioner_and_exact_nystrom_converges_at_once(tmp_path, capsys):
    synthetic_npz(tmp_path, 300)
    main(["--data-dir", str(tmp_path), "--datasets", "toy", "--rows", "300", "--tune-rows", "100",
          "--tune-steps", "5", "--features", "64,512", "--kinds", "iid,nystrom", "--max-iter", "400"])  # fmt: skip
    counts = counts_by_label(capsys.readouterr().out)
    assert set(counts) == {
        "none",
        "pivoted Cholesky, rank 15",
        "iid features, F = 64",
        "iid features, F = 512",
        "Nystrom, 64 points",
        "Nystrom, 512 points",
    }
    for label, values in counts.items():
        assert len(values) == len(TOLERANCES), label
        assert values == sorted(values), f"{label}: a tighter tolerance cannot need fewer iterations"
    # 512 Nystrom points cover all 270 training rows: the preconditioner is the covariance itself.
    assert counts["Nystrom, 512 points"][-1] <= 2


def test_unknown_data_set_is_a_clear_error(tmp_path):
    with pytest.raises(CLIError, match="cannot read missing.npz"):
        main(["--data-dir", str(tmp_path), "--datasets", "missing"])


def test_a_pivoted_cholesky_of_full_rank_inverts_the_training_covariance():
    """At rank N the preconditioner is the training covariance itself (a lengthscale short enough that every pivot
    stays above linear_operator's stopping tolerance)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(40, 2, generator=generator, dtype=torch.float64)
    kernel = RBFKernel().double()
    kernel.lengthscale = 0.1
    kernel_matrix = kernel(x).to_dense().detach()
    noise = torch.tensor([0.05], dtype=torch.float64)
    rhs = torch.randn(40, 3, generator=generator, dtype=torch.float64)
    solve = pivoted_cholesky_preconditioner(kernel_matrix, noise, rank=40)
    expected = torch.linalg.solve(kernel_matrix + noise * torch.eye(40, dtype=torch.float64), rhs)
    torch.testing.assert_close(solve(rhs), expected, rtol=1e-6, atol=1e-8)


def test_the_spectrum_of_a_kernel_matrix_of_known_eigenvalues(capsys):
    """Eigenvalues 8, 4, 2, 1, 0.5 (and zeros) at noise 1: statistical dimension 8/9 + 4/5 + 2/3 + 1/2 + 1/3, three
    eigenvalues above the noise, and the best rank-F preconditioner leaves (lambda_{F+1} + 1) / 1."""
    basis, _ = torch.linalg.qr(torch.randn(12, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    eigenvalues = torch.tensor([8.0, 4.0, 2.0, 1.0, 0.5] + [0.0] * 7, dtype=torch.float64)
    print_spectrum(basis @ torch.diag(eigenvalues) @ basis.T, 1.0, [1, 3])
    output = capsys.readouterr().out
    expected = round(8 / 9 + 4 / 5 + 2 / 3 + 1 / 2 + 1 / 3)
    assert f"statistical dimension {expected};" in output and "3 eigenvalues above the noise" in output
    assert "F = 1: 5," in output and "F = 3: 2" in output
