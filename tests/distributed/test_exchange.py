"""ShardExchange: every rank raises the same clear error when the ranks disagree, when one fails, and when a
collective times out; what it hands to collectives is counted."""

from __future__ import annotations

import datetime
import time

import pytest
import torch

from gprf.distributed.exchange import (
    HEADER_SIZE,
    STEPS,
    CommunicationLog,
    ShardExchange,
    describe_field,
    device_code,
    dtype_code,
)
from gprf.exceptions import CollectiveError
from tests.distributed.conftest import run_ranks


def _error(call) -> tuple[str, str, list[str]]:
    try:
        call()
    except Exception as error:
        return type(error).__name__, str(error), list(getattr(error, "__notes__", []))
    return "", "", []


def _disagreements(rank, world_size):
    exchange = ShardExchange()
    result = {
        # Every rank's own numbers come back to every rank.
        "own": exchange.agree("row counts", [("the number of features", 8)], own=(10.0 * rank, -1.5)),
        "steps": _error(lambda: exchange.agree("row counts" if rank == 0 else "fit clock")),
        "layout": _error(lambda: exchange.agree("scale refit", [("the number of features", 8 + 8 * (rank == 1))])),
        "dtype": _error(
            lambda: exchange.agree(
                "scale refit",
                [("the sums' dtype", dtype_code(torch.float32))]
                if rank
                else [("the sums' dtype", dtype_code(torch.float64))],
            )
        ),
    }
    failure = ValueError("bad shard") if rank == world_size - 1 else None
    result["failure"] = _error(lambda: exchange.agree("posterior statistics", [("x", 1)], failure=failure))
    # The group is still usable after every one of these errors.
    result["after"] = exchange.all_reduce("row counts", torch.ones(3, dtype=torch.float64))
    result["log"] = (exchange.log.calls(), exchange.log.numbers(), exchange.log.bytes(), exchange.log.seconds())
    return result


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_rank_raises_the_same_error_and_the_group_survives(world_size, tmp_path):
    results = run_ranks(_disagreements, world_size, tmp_path)
    last = world_size - 1
    for rank, result in enumerate(results):
        torch.testing.assert_close(
            result["own"], torch.tensor([[10.0 * r, -1.5] for r in range(world_size)], dtype=torch.float64)
        )
        kind, message, _ = result["steps"]
        assert kind == "ShardMismatchError"
        assert "rank 0 at 'row counts', rank 1 at 'fit clock'" in message
        kind, message, _ = result["layout"]
        assert kind == "ShardMismatchError"
        assert "the number of features is 16 on rank 1 but 8 on rank 0" in message
        kind, message, _ = result["dtype"]
        assert "the sums' dtype is torch.float32 on rank 1 but torch.float64 on rank 0" in message
        # The failing rank raises its own exception, the others a copy naming where it came from.
        kind, message, notes = result["failure"]
        assert (kind, message) == ("ValueError", "bad shard")
        if rank != last:
            assert notes == [f"Raised on rank {last} in the step 'posterior statistics'; rank {rank} stops with it."]
        torch.testing.assert_close(result["after"], torch.full((3,), float(world_size), dtype=torch.float64))
        # 5 headers and 1 all-reduce of 3 float64 numbers, each timed.
        assert result["log"][:3] == (6, 5 * HEADER_SIZE + 3, 8 * (5 * HEADER_SIZE + 3))
        assert result["log"][3] > 0


def _timeout(rank, world_size):
    exchange = ShardExchange()
    if rank == 1:
        time.sleep(2.5)  # never joins: rank 0 waits past the group's 1 s timeout
        return {}
    return {"error": _error(lambda: exchange.agree("fit clock", own=(1.0,)))}


def test_a_collective_that_times_out_names_the_rank_and_the_step(tmp_path):
    results = run_ranks(_timeout, 2, tmp_path, group_timeout=datetime.timedelta(seconds=1))
    kind, message, _ = results[0]["error"]
    assert kind == "CollectiveError"
    assert message.startswith("Rank 0 of 2: the collective of the step 'fit clock' did not complete")
    assert issubclass(CollectiveError, TimeoutError) and not issubclass(CollectiveError, RuntimeError)


def test_header_fields_read_back_by_name():
    assert describe_field("the model dtype", dtype_code(torch.float32)) == "torch.float32"
    assert describe_field("the model's device type", device_code(torch.device("cpu"))) == "cpu"
    assert describe_field("the number of features", 64.0) == "64"
    assert describe_field("the number of features", float("nan")) == "unknown"
    assert dtype_code(torch.int8) == 6 and describe_field("the sums' dtype", 6.0) == "another dtype"
    assert len(STEPS) == len(set(STEPS))


def test_communication_log_counts_numbers_and_bytes_per_step():
    log = CommunicationLog()
    log.record("fit clock", torch.zeros(16, dtype=torch.float64), 0.5)
    log.record("scale refit", torch.zeros(10, dtype=torch.float32), 0.25)
    log.record("scale refit", torch.zeros(2, dtype=torch.float32))
    assert (log.calls(), log.calls("scale refit"), log.numbers("scale refit"), log.bytes()) == (3, 2, 12, 176)
    assert (log.seconds(), log.seconds("scale refit")) == (0.75, 0.25)
    assert log.steps() == ["fit clock", "scale refit"]
    log.reset()
    assert log.bytes() == 0 and log.steps() == []


def test_needs_an_initialised_process_group():
    with pytest.raises(RuntimeError, match="init_process_group"):
        ShardExchange()


def _too_long(rank, world_size):
    return {"error": _error(lambda: ShardExchange().agree("fit clock", own=tuple(range(HEADER_SIZE))))}


def test_a_header_refuses_more_numbers_than_it_holds(tmp_path):
    (result,) = run_ranks(_too_long, 1, tmp_path)
    assert result["error"][:2] == (
        "ValueError",
        f"A header holds {HEADER_SIZE} numbers; the step 'fit clock' needs 18.",
    )
