"""The example scripts run as their docs say (repository content, not a module of gprf).

``examples/distributed_training.py`` runs under ``torchrun`` exactly as ``docs/distributed.rst`` shows, and rank 0's
checkpoint, restored in one process holding every rank's rows, gives the test RMSE the sharded run printed.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTED_TRAINING = ROOT / "examples" / "distributed_training.py"
#: Seconds the torchrun run may take (two processes on two busy cores: about 25 s).
RUN_TIMEOUT = 300


def _load_example(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torchrun(script: Path, processes: int, *arguments: str) -> subprocess.CompletedProcess:
    # This checkout's gprf, one thread per process (the processes share the machine's cores).
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    return subprocess.run(
        [*command, str(script), *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize(
    ("backend", "processes"),
    [
        pytest.param("gloo", 2, id="gloo-cpu"),
        pytest.param(
            "nccl",
            min(2, torch.cuda.device_count()),
            id="nccl-cuda",
            marks=pytest.mark.skipif(
                not (torch.cuda.is_available() and dist.is_nccl_available()),
                reason="the NCCL variant needs a CUDA GPU and a torch built with NCCL",
            ),
        ),
    ],
)
def test_distributed_training_under_torchrun_matches_one_process(backend, processes, tmp_path):
    completed = _torchrun(DISTRIBUTED_TRAINING, processes, "--quick", "--backend", backend, "--out", str(tmp_path))
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    example = _load_example(DISTRIBUTED_TRAINING)
    args = example.parse_arguments(["--quick"])
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["processes"] == processes
    assert result["training_rows"] == processes * args.rows_per_process
    printed = f"{processes} process(es), {result['training_rows']} training rows in all: test RMSE "
    assert f"{printed}{result['test_rmse']:.4f}, learned noise {result['noise']:.4f}" in completed.stdout

    # One process holding every rank's rows, with rank 0's checkpoint: the same posterior, so the same test RMSE.
    shards = [
        example.shard(rank, args.rows_per_process + args.test_rows_per_process, args.dims, args.seed)
        for rank in range(processes)
    ]
    train_x = torch.cat([x[: args.rows_per_process] for x, _ in shards])
    train_y = torch.cat([y[: args.rows_per_process] for _, y in shards])
    test_x = torch.cat([x[args.rows_per_process :] for x, _ in shards])
    test_y = torch.cat([y[args.rows_per_process :] for _, y in shards])
    model = example.ShardGP(train_x, train_y, args.features).double()
    model.load_state_dict(torch.load(tmp_path / "model.pt", map_location="cpu"))
    model.eval()
    with torch.no_grad():
        mean = model(test_x).mean
    assert model.likelihood.noise.item() == pytest.approx(result["noise"], rel=1e-12)
    # The sharded run summed the F x F statistics over ranks, this one over rows: equal to float64 rounding.
    assert math.sqrt((mean - test_y).square().mean().item()) == pytest.approx(result["test_rmse"], rel=1e-9)
