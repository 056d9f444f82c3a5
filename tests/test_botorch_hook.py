"""Importing gprf changes nothing in GPyTorch, linear_operator or BoTorch, never imports BoTorch, and still hands
BoTorch gprf's kernels whichever package the user imports first (fresh interpreters: imports are process-wide)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("botorch")


def _run(script: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_import_gprf_leaves_other_libraries_alone():
    output = _run(
        """
        import sys
        import gpytorch, linear_operator.settings as s
        before = (gpytorch.distributions.MultivariateNormal.log_prob, s._fast_log_prob._default,
                  s._fast_solves._default, s._fast_covar_root_decomposition._default)
        import gprf, gprf.kernels, gprf.prediction, gprf.streaming, gprf.likelihoods
        after = (gpytorch.distributions.MultivariateNormal.log_prob, s._fast_log_prob._default,
                 s._fast_solves._default, s._fast_covar_root_decomposition._default)
        print(all(a is b for a, b in zip(before, after)), "botorch" in sys.modules)
        """
    )
    assert output.split() == ["True", "False"]


_PATHS = """
    import torch
    from gpytorch.kernels import ScaleKernel
    from botorch.models import SingleTaskGP
    from botorch.sampling.pathwise import draw_matheron_paths
    from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
    x = torch.rand(20, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = SingleTaskGP(x, torch.sin(4 * x).sum(-1, keepdim=True),
                         covar_module=ScaleKernel(RandomFourierKernel(32, num_dims=2, seed=0))).eval()
    paths = draw_matheron_paths(model, torch.Size([4]))
    print(type(paths.paths["prior_paths"].feature_map).__name__, type(paths.paths["update_paths"].feature_map).__name__)
    print(tuple(PathwiseThompsonSampling(model)(x[:3].unsqueeze(1)).shape))
"""


def test_botorch_finds_gprf_kernels_after_import_gprf_when_botorch_came_first():
    output = _run(
        "import botorch\nimport gprf\nfrom gprf.kernels import RandomFourierKernel\n" + textwrap.dedent(_PATHS)
    )
    assert output.split() == ["KernelRootFeatureMap", "KernelRootFeatureMap", "(3,)"]


def test_botorch_finds_gprf_kernels_built_after_botorch_was_imported():
    output = _run(
        "import gprf\nfrom gprf.kernels import RandomFourierKernel\nimport botorch\n" + textwrap.dedent(_PATHS)
    )
    assert output.split() == ["KernelRootFeatureMap", "KernelRootFeatureMap", "(3,)"]
