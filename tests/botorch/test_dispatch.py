"""gprf's entries in BoTorch's pathwise dispatchers hand every model without a gprf kernel to BoTorch unchanged."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = pytest.mark.botorch

_EXACT_PATHS = """
    import sys
    import torch
    from botorch.models import SingleTaskGP
    from botorch.sampling.pathwise import draw_matheron_paths
    if sys.argv[2] == "with-gprf":
        import gprf.botorch  # noqa: F401
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(30, 3, generator=generator, dtype=torch.float64)
    y = torch.stack([torch.sin(5 * x).sum(-1), x.prod(-1)], -1)
    test_x = torch.rand(8, 3, generator=generator, dtype=torch.float64)
    values = []
    for model in (SingleTaskGP(x, y[:, :1]), SingleTaskGP(x, y), SingleTaskGP(x, y[:, :1], train_Yvar=torch.full_like(y[:, :1], 0.01))):
        model.eval()
        torch.manual_seed(1)
        values.append(draw_matheron_paths(model, torch.Size([16]))(test_x.unsqueeze(-3) if model.num_outputs > 1 else test_x))
    torch.save(values, sys.argv[1])
"""


def test_exact_kernel_models_get_bit_identical_paths_with_and_without_gprf(tmp_path):
    results = {}
    for mode in ("without-gprf", "with-gprf"):
        path = tmp_path / f"{mode}.pt"
        completed = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_EXACT_PATHS), str(path), mode],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        results[mode] = torch.load(path)
    for ours, theirs in zip(results["with-gprf"], results["without-gprf"]):
        assert torch.equal(ours, theirs)
