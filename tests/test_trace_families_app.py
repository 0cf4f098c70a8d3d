"""tests/apps/trace_families.c without any tool, on each real MPI: the application that
calls every family of MPI function (point-to-point in every mode, probes, persistent
requests, blocking, nonblocking and neighborhood collectives, one-sided, derived
datatypes, MPI-IO in every positioning, synchronism and coordination) must build with
-Wall -Wextra -Werror, run at 4 ranks to exit 0, and report for every rank exactly the
calls and file I/O bytes it is written to make. A tracer's record of the same run is
checked against these reports, so they must be right on their own first.

Runs on the MPIs of the session: both wheels in `make test`, Debian's MPICH and Open MPI
in `make test-debian`."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Dict

import pytest

from conftest import APPS

pytestmark = pytest.mark.mpi

RANKS = 4

# Calls per rank (the same on every rank) as the application makes them, by family:
# "Name count" pairs, MPI_ left out.
CALLS_TABLE = """
    Init 1  Finalize 1  Comm_rank 1  Comm_size 1  Comm_set_errhandler 1  File_set_errhandler 1
    Win_set_errhandler 1  Info_create 1  Info_set 1  Info_free 1

    Type_vector 2  Type_contiguous 1  Type_create_struct 1  Type_commit 4  Type_free 4  Type_size 3

    Send 1  Recv 5  Ssend 1  Bsend 1  Rsend 1  Buffer_attach 1  Buffer_detach 1
    Isend 4  Issend 1  Ibsend 1  Irsend 1  Irecv 4  Sendrecv 1  Sendrecv_replace 1
    Probe 2  Iprobe 1  Mprobe 1  Improbe 1  Mrecv 1  Imrecv 1
    Send_init 1  Bsend_init 1  Rsend_init 1  Ssend_init 1  Recv_init 4  Start 6  Startall 2  Request_free 8
    Wait 20  Waitall 10  Test 1

    Barrier 12  Bcast 1  Gather 2  Gatherv 1  Scatter 1  Scatterv 1  Allgather 1  Allgatherv 1
    Alltoall 1  Alltoallv 1  Reduce 1  Allreduce 1  Reduce_scatter 1  Reduce_scatter_block 1  Scan 1  Exscan 1

    Ibarrier 1  Ibcast 1  Iallreduce 1  Ireduce 1  Iallgather 1  Ialltoall 1  Igather 1  Iscatter 1
    Iscan 1  Iexscan 1

    Cart_create 1  Comm_free 1  Neighbor_allgather 1  Neighbor_allgatherv 1  Neighbor_alltoall 1
    Neighbor_alltoallv 1  Ineighbor_allgather 1  Ineighbor_alltoall 1

    Win_create 1  Win_fence 3  Put 1  Get 1  Accumulate 1  Get_accumulate 1  Fetch_and_op 1
    Compare_and_swap 1  Win_lock 1  Win_unlock 1  Rput 1  Rget 1  Win_free 1

    File_open 2  File_close 2  File_delete 1  File_set_size 1  File_preallocate 1  File_get_size 2
    File_set_atomicity 2  File_set_info 1  File_set_view 1  File_sync 1  File_seek 10  File_seek_shared 8
    File_write_at 1  File_read_at 1  File_write_at_all 1  File_read_at_all 2  File_iwrite_at 1  File_iread_at 1
    File_write_at_all_begin 1  File_write_at_all_end 1  File_read_at_all_begin 1  File_read_at_all_end 1
    File_iwrite_at_all 1  File_iread_at_all 1
    File_write 1  File_read 1  File_iwrite 1  File_iread 1  File_write_all 2  File_read_all 1
    File_write_all_begin 1  File_write_all_end 1  File_read_all_begin 1  File_read_all_end 1
    File_iwrite_all 1  File_iread_all 1
    File_write_shared 1  File_read_shared 1  File_iwrite_shared 1  File_iread_shared 1
    File_write_ordered 1  File_read_ordered 1  File_write_ordered_begin 1  File_write_ordered_end 1
    File_read_ordered_begin 1  File_read_ordered_end 1
"""


def _table(text: str) -> Dict[str, int]:
    words = text.split()
    assert len(words) % 2 == 0, "the table holds name-count pairs"
    calls = {f"MPI_{name}": int(count) for name, count in zip(words[::2], words[1::2])}
    assert len(calls) == len(words) // 2, "a function named twice in the table"
    return calls


EXPECTED_CALLS = _table(CALLS_TABLE)

# What the tracer must record with arguments (PIOsim's list of MPI functions): each is
# called, with the count above.
PIOSIM = """
    Allgather Allgatherv Allreduce Alltoall Alltoallv Barrier Bcast Bsend Buffer_attach Buffer_detach Exscan
    File_close File_delete File_get_size File_iread File_iread_at File_iread_shared File_iwrite File_iwrite_at
    File_iwrite_shared File_open File_preallocate File_read File_read_all File_read_all_begin File_read_all_end
    File_read_at File_read_at_all File_read_at_all_begin File_read_at_all_end File_read_ordered
    File_read_ordered_begin File_read_ordered_end File_read_shared File_seek File_seek_shared File_set_atomicity
    File_set_info File_set_size File_set_view File_sync File_write File_write_all File_write_all_begin
    File_write_all_end File_write_at File_write_at_all File_write_at_all_begin File_write_at_all_end
    File_write_ordered File_write_ordered_begin File_write_ordered_end File_write_shared Gather Gatherv Ibsend
    Iprobe Irecv Irsend Isend Issend Recv Reduce Reduce_scatter Rsend Scan Scatter Scatterv Send Sendrecv
    Sendrecv_replace Ssend Type_commit Type_vector
""".split()

# Every data-moving file call moves 32 bytes (8 ints, 4 doubles or one 8-int contiguous
# type); a split collective's bytes belong to its _begin, as the application counts them.
BYTES_PER_CALL = 32
WRITES = [
    f"MPI_File_{op}"
    for op in (
        "write_at write_at_all iwrite_at write_at_all_begin iwrite_at_all write iwrite write_all "
        "write_all_begin iwrite_all write_shared iwrite_shared write_ordered write_ordered_begin"
    ).split()
]
READS = [name.replace("write", "read") for name in WRITES]
EXPECTED_BYTES = {
    "read": BYTES_PER_CALL * sum(EXPECTED_CALLS[name] for name in READS),
    "written": BYTES_PER_CALL * sum(EXPECTED_CALLS[name] for name in WRITES),
}
# The file the ranks share: 15 regions of 32 bytes per rank, preallocated.
FILE_SIZE = 15 * RANKS * BYTES_PER_CALL


def test_the_table_covers_every_piosim_function():
    assert not [name for name in PIOSIM if f"MPI_{name}" not in EXPECTED_CALLS]
    assert all(EXPECTED_CALLS[f"MPI_{name}"] >= 1 for name in PIOSIM)
    assert EXPECTED_BYTES == {"read": 480, "written": 480}


@pytest.fixture(scope="module")
def families_app(mpi, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"families-{mpi.name}")
    return mpi.build_app(APPS / "trace_families.c", None, out / "trace_families", ["-Wextra", "-Werror"])


def _reports(stdout: str):
    calls: Dict[int, Dict[str, int]] = defaultdict(dict)
    io: Dict[int, Dict[str, int]] = defaultdict(dict)
    for line in stdout.splitlines():
        m = re.fullmatch(r"count (\d+) (MPI_\w+) (\d+)", line)
        if m:
            assert m[2] not in calls[int(m[1])], f"reported twice: {line}"
            calls[int(m[1])][m[2]] = int(m[3])
            continue
        m = re.fullmatch(r"bytes (\d+) (read|written) (\d+)", line)
        assert m, f"not a report line: {line!r}"
        io[int(m[1])][m[2]] = int(m[3])
    return calls, io


def test_every_family_called_as_written(mpi, families_app, tmp_path):
    proc = mpi.run(RANKS, [families_app, tmp_path])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "trace_families:" not in proc.stderr, proc.stderr
    calls, io = _reports(proc.stdout)
    assert sorted(calls) == list(range(RANKS)), proc.stdout
    for rank in range(RANKS):
        got = calls[rank]
        assert not [name for name in PIOSIM if f"MPI_{name}" not in got], f"rank {rank}"
        differences = {
            name: (got.get(name), EXPECTED_CALLS.get(name))
            for name in sorted(set(got) | set(EXPECTED_CALLS))
            if got.get(name) != EXPECTED_CALLS.get(name)
        }
        assert not differences, f"rank {rank}: (reported, expected) {differences}"
        assert io[rank] == EXPECTED_BYTES, f"rank {rank}"
    # the shared file is whole, the per-rank files deleted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["families.dat"]
    assert (tmp_path / "families.dat").stat().st_size == FILE_SIZE
