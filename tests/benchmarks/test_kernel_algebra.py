"""benchmarks.kernel_algebra: both spellings of each expression, timed, with the same marginal likelihood."""

from __future__ import annotations

from benchmarks.kernel_algebra import main, run


def test_both_spellings_give_the_same_marginal_likelihood_and_are_timed():
    rows = run(n=60, d=2, f=8, repeats=1, warmup=0)
    assert [row["expression"] for row in rows] == ["sum", "product"]
    for row in rows:
        assert row["mll_difference"] <= 1e-8
        assert row["gprf_s"] > 0 and row["gpytorch_s"] > 0
        assert row["ratio"] == row["gpytorch_s"] / row["gprf_s"]


def test_the_command_prints_one_row_per_expression(capsys):
    main(["--n", "40", "--d", "2", "--features", "8", "--repeats", "1", "--warmup", "0"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("MLL forward + backward, N = 40")
    assert [line.split()[0] for line in lines[3:]] == ["sum", "product"]
