"""One-sided operations complete where MPI completes them (issue 32, item 9): an MPI_Put
returns with its data maybe still in flight; it completes at the MPI_Win_fence,
MPI_Win_complete, MPI_Win_unlock(_all) or MPI_Win_flush(_all, _local) that follows it on
its window. In the OTF2 archive: RmaPut in MPI_Put, its RmaOpCompleteNonBlocking (same
matching id) in that call. Before: RmaOpCompleteBlocking in MPI_Put itself. Synthetic
rank files (tests/trace_writer.py), read back with otf2-print."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

pytest.importorskip("otf2")
pytest.importorskip("matplotlib")

import trace_writer as w  # noqa: E402

from qmpigen.trace import merge  # noqa: E402

pytestmark = pytest.mark.trace

NAMES = (
    ("MPI_Init", "other"),
    ("MPI_Win_create", "window_create"),
    ("MPI_Put", "rma_put"),
    ("MPI_Get", "rma_get"),
    ("MPI_Accumulate", "rma_atomic"),
    ("MPI_Win_flush", "rma_sync"),
    ("MPI_Win_unlock", "rma_sync"),
    ("MPI_Win_unlock_all", "rma_sync"),
    ("MPI_Win_fence", "rma_sync"),
    ("MPI_Win_sync", "rma_sync"),
    ("MPI_Finalize", "other"),
)
CODE = {name: code for code, (name, _) in enumerate(NAMES)}


def _rank(rank: int, sequence) -> bytes:
    """Rank `rank` of 2: its window 5 (on MPI_COMM_WORLD, id 0), then `sequence`: (function,
    target rank or -1) per call."""
    calls = [("MPI_Init", -1), ("MPI_Win_create", -1), *sequence, ("MPI_Finalize", -1)]
    window = [-1 if name in ("MPI_Init", "MPI_Finalize") else 5 for name, _ in calls]
    func = [CODE[name] for name, _ in calls]
    body = w.call_rows(func, peer=[t for _, t in calls], window=window, comm=[0] * len(calls), bytes=[8] * len(calls))
    window_record = w.fixed_record("WINDOW", 5, 0, 0)
    return w.synthetic(rank, 2, NAMES, w.comm(0, [0, 1]) + window_record, body, len(calls), program="rma")


def _events_by_call(archive) -> list:
    """Rank 0's events as (event, the call it is in, matching id or None)."""
    text = subprocess.run(["otf2-print", "-L", "0", str(archive)], capture_output=True, text=True, check=True).stdout
    out, region = [], None
    for line in text.splitlines():
        fields = line.split()
        if not fields or not fields[-1:] or len(fields) < 3 or not fields[1].isdigit():
            continue
        if fields[0] == "ENTER":
            region = re.search(r'Region: "([^"]+)"', line)[1]
        elif fields[0] == "LEAVE":
            region = None
        else:
            match = re.search(r"Matching ID: (\d+)", line)
            out.append((fields[0], region, match[1] if match else None))
    return out


@pytest.mark.slow  # seconds: `make test-trace`, not `make test-fast`
def test_one_sided_operations_complete_at_their_synchronisation(tmp_path):
    if shutil.which("otf2-print") is None:
        pytest.skip("otf2-print not installed")
    rank0 = [
        ("MPI_Win_fence", -1),
        ("MPI_Put", 1),
        ("MPI_Get", 1),
        ("MPI_Win_sync", -1),  # completes nothing
        ("MPI_Win_fence", -1),  # completes the Put and the Get
        ("MPI_Put", 1),
        ("MPI_Put", 0),
        ("MPI_Win_unlock", 1),  # a target the trace knows: the Put to 1 only
        ("MPI_Accumulate", 1),
        ("MPI_Win_flush", -1),  # no target known (today's tool): every operation on the window
        ("MPI_Win_unlock_all", -1),  # nothing left on the window
        ("MPI_Put", 1),  # never completed in the trace
    ]
    run = tmp_path / "run"
    run.mkdir()
    (run / "rma_node_0_0.L1.qtr").write_bytes(_rank(0, rank0))
    (run / "rma_node_1_0.L1.qtr").write_bytes(_rank(1, [("MPI_Win_fence", -1), ("MPI_Win_fence", -1)]))
    lines: list = []
    assert merge.run(run, tmp_path / "out", None, lines.append) == 0, lines
    events = _events_by_call(tmp_path / "out" / "traces.otf2")
    issued = [(event, call, mid) for event, call, mid in events if event in ("RMA_PUT", "RMA_GET", "RMA_ATOMIC")]
    completed = [(call, mid) for event, call, mid in events if event.startswith("RMA_OP_COMPLETE")]
    assert [event for event, _, _ in events if event.startswith("RMA_OP_COMPLETE")] == [
        "RMA_OP_COMPLETE_NON_BLOCKING"
    ] * 5
    ids = [mid for _, _, mid in issued]
    assert [call for _, call, _ in issued] == ["MPI_Put", "MPI_Get", "MPI_Put", "MPI_Put", "MPI_Accumulate", "MPI_Put"]
    assert completed == [
        ("MPI_Win_fence", ids[0]),
        ("MPI_Win_fence", ids[1]),
        ("MPI_Win_unlock", ids[2]),
        ("MPI_Win_flush", ids[3]),
        ("MPI_Win_flush", ids[4]),
    ], events
