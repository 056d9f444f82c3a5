"""sum_over_ranks: sums (symmetric batches as triangles), rank 0's shared values, and the comparison of the ranks'
fingerprints, transforms and device types before a sum is used."""

from __future__ import annotations

import torch

from gprf.distributed.exchange import ShardExchange
from gprf.distributed.sums import ShardParts, sum_over_ranks
from tests.distributed.conftest import run_ranks


def _parts(rank, dtype=torch.float64, device="cpu"):
    generator = torch.Generator().manual_seed(rank)
    root = torch.randn(2, 7, 4, generator=generator, dtype=dtype)
    gram = root.mT @ root  # a batch of two symmetric 4 x 4 matrices
    projection = torch.randn(2, 4, generator=generator, dtype=dtype)
    return [gram.to(device), projection.to(device)]


def _sums(rank, world_size):
    fingerprint = torch.tensor([[1.0, 2.0, 3.0, 0.5, 0.25]], dtype=torch.float64)
    shared = [torch.full((3,), float(rank)), torch.full((2, 2), 10.0 + rank, dtype=torch.float64)]
    parts = ShardParts(_parts(rank), (True, False), rows=rank + 1, fingerprint=fingerprint, root_dim=3, shared=shared)
    exchange = ShardExchange()
    totals = sum_over_ranks(exchange, "posterior statistics", parts)
    return {"sums": totals.sums, "shared": totals.shared, "rows": totals.rows, "bytes": exchange.log.bytes()}


def test_sums_shared_values_and_row_counts(tmp_path):
    world_size = 3
    results = run_ranks(_sums, world_size, tmp_path)
    expected = [sum(parts) for parts in zip(*(_parts(rank) for rank in range(world_size)), strict=True)]
    for result in results:
        for summed, value in zip(result["sums"], expected, strict=True):
            torch.testing.assert_close(summed, value, rtol=0, atol=1e-12)
        assert result["shared"][0].dtype == torch.float32
        torch.testing.assert_close(result["shared"][0], torch.zeros(3))  # rank 0's, in its dtype
        torch.testing.assert_close(result["shared"][1], torch.full((2, 2), 10.0, dtype=torch.float64))
        assert result["rows"] == [1, 2, 3]
        # The all-reduce: 2 lower triangles of 4 x 4 (10 each), 8 projections, 3 slots of 5, 3 + 4 shared values.
        assert result["bytes"] == 8 * (16 + 2 * 10 + 8 + 3 * 5 + 7)


def _disagreeing(rank, world_size, case):
    fingerprint = torch.tensor([[1.0, 2.0, 3.0, 0.5, 0.25]], dtype=torch.float64)
    transforms = torch.tensor([0.0, 1.0], dtype=torch.float64)
    device = "cpu"
    if rank == 1 and case == "mean":
        fingerprint[..., -1] = 0.3  # the prior mean part, relative to its own magnitude
    if rank == 1 and case == "tiny features":
        fingerprint[..., :3] *= 1 + 1e-3
    if rank == 1 and case == "rounding":
        fingerprint = fingerprint * (1 + 1e-12)
    if rank == 1 and case == "transforms":
        transforms = torch.tensor([0.1, 1.0], dtype=torch.float64)
    if rank == 1 and case == "device":
        device = "meta"  # never reaches the collective: the header tells the device types apart first
    parts = ShardParts(_parts(rank, device=device), (True, False), 1, fingerprint, 3, transforms)
    try:
        sum_over_ranks(ShardExchange(), "scale refit", parts)
    except Exception as error:
        return {"kind": type(error).__name__, "message": str(error)}
    return {"kind": None, "message": ""}


def test_disagreements_are_found_before_the_sums_are_used(tmp_path):
    cases = {
        "mean": "rank 1 has other prior mean than rank 0",
        "tiny features": "rank 1 has other random features or kernel hyperparameters than rank 0",
        "transforms": "rank 1 has other input or outcome transforms than rank 0",
        "device": "the model's device type is meta on rank 1 but cpu on rank 0",
        "rounding": None,
    }
    for case, fragment in cases.items():
        for result in run_ranks(_disagreeing, 2, tmp_path / case.replace(" ", "-"), case):
            if fragment is None:  # rounding-level differences (another device, another summation order) pass
                assert result["kind"] is None
            else:
                assert result["kind"] == "ShardMismatchError" and fragment in result["message"]
