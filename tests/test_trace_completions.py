"""Every completion of every request kind tied in the merged OTF2 (issue: a Waitall over
10 Isends showed one MPI_ISEND_COMPLETE, and Waitany/Waitsome/Testany/Testsome/Testall,
persistent requests, MPI_Request_free and cancelled requests were not tied at all; a
request from an untraced call crashed the merge). tests/apps/trace_requests.c at 4
ranks, one run per completion function, the events counted with otf2-print."""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest
from test_trace import _need_trace_tools

from conftest import APPS, qmpigen

pytestmark = [pytest.mark.mpi, pytest.mark.trace]

RANKS, N = 4, 10
RING = {"MPI_ISEND": RANKS * N, "MPI_ISEND_COMPLETE": RANKS * N, "MPI_IRECV_REQUEST": RANKS * N, "MPI_IRECV": RANKS * N}
EXPECTED = {
    mode: RING for mode in ("wait", "waitall", "waitany", "waitsome", "test", "testall", "testany", "testsome", "free")
}
EXPECTED["persistent"] = {name: 3 * n for name, n in RING.items()}  # Startall twice, then Start each
EXPECTED["cancel"] = {"MPI_IRECV_REQUEST": RANKS * N, "MPI_REQUEST_CANCELLED": RANKS * N}
EXPECTED["iwrite"] = {}


def _events(archive) -> Counter:
    proc = subprocess.run(["otf2-print", str(archive)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    names = (line.split(None, 1)[0] for line in proc.stdout.splitlines() if line.startswith("MPI_"))
    return Counter(name for name in names if name.startswith(("MPI_I", "MPI_REQUEST")))


@pytest.fixture(scope="module")
def requests_app(mpi, core, tmp_path_factory):
    _need_trace_tools()
    work = tmp_path_factory.mktemp(f"requests-{mpi.name}")
    return mpi.build_app(APPS / "trace_requests.c", core, work / "trace_requests")


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_every_completion_is_tied(mpi, sample_tools, requests_app, tmp_path, mode):
    proc = mpi.run(
        RANKS,
        [requests_app, mode, tmp_path / "data.bin"],
        env={"QMPI_TOOLS": f"{sample_tools}/libtrace.so", "QMPI_TRACE_DIR": str(tmp_path / "run")},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(f" {mode}\n") == RANKS and "bad value" not in proc.stdout, proc.stdout
    out = tmp_path / "merged"
    merged = qmpigen("trace", str(tmp_path / "run"), "-o", str(out))
    assert merged.returncode == 0 and "Traceback" not in merged.stderr and "error" not in merged.stderr, merged.stderr
    assert _events(out / "traces.otf2") == Counter(EXPECTED[mode])
    if "MPI_ISEND" in EXPECTED[mode]:
        assert f"{EXPECTED[mode]['MPI_ISEND']} messages" in merged.stderr, merged.stderr


@pytest.mark.parametrize("value", ["-1", "18446744073709551616", "1e9", "abc"])
def test_bad_trace_buffer_is_one_line(mpi, sample_tools, requests_app, tmp_path, value):
    """QMPI_TRACE_BUFFER=-1 (or >= 2^64) wrapped calloc's size (heap overflow); 1e9 and abc
    were silently 4096. Now: one line from rank 0, the default buffer, a whole trace."""
    proc = mpi.run(
        2,
        [requests_app, "waitall"],
        env={
            "QMPI_TOOLS": f"{sample_tools}/libtrace.so",
            "QMPI_TRACE_DIR": str(tmp_path / "run"),
            "QMPI_TRACE_BUFFER": value,
        },
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.splitlines() if "QMPI_TRACE_BUFFER" in line] == [
        f"qmpi trace: QMPI_TRACE_BUFFER={value} is not a number of bytes from 4096 to 1073741824; using 1048576"
    ]
    merged = qmpigen("trace", str(tmp_path / "run"), "-o", str(tmp_path / "merged"))
    assert merged.returncode == 0 and merged.stderr.count("\n") == 1, merged.stderr
