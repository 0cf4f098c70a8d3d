"""The trace tool (sample_tools/trace.c) and `qmpigen trace`, on the real MPIs: a 4-rank
application traced above and below TBcast, merged; otf2-print (OTF2's own reader) must
read the archive with one ENTER per call the application made, per rank and function,
and every send must have its receive (rank, tag, bytes). Skipped with a reason when
otf2-print or the otf2/matplotlib packages are missing, a failure when
QMPIGEN_REQUIRE_TRACE=1 (as in `make test-trace`, which installs otf2-tools). Marked
`trace`: not in `make test`."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from conftest import APPS, qmpigen

pytestmark = [pytest.mark.mpi, pytest.mark.trace]


def _need_trace_tools() -> None:
    missing = []
    if shutil.which("otf2-print") is None:
        missing.append("otf2-print (apt-get install otf2-tools)")
    for module in ("otf2", "matplotlib"):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"the {module} package (pip install 'qmpigen[trace]')")
    if missing:
        if os.environ.get("QMPIGEN_REQUIRE_TRACE") == "1":
            pytest.fail("missing: " + ", ".join(missing))
        pytest.skip("missing: " + ", ".join(missing))


def _app_calls(stdout: str) -> Counter:
    return Counter({(int(r), f): int(n) for r, f, n in re.findall(r"^calls (\d+) (\S+) (\d+)$", stdout, re.M) if int(n)})


def _otf2_io(archive: Path) -> tuple:
    """MPI-IO as OTF2 I/O: operations per (location, mode) with their bytes, and the
    I/O handle and file definitions, as otf2-print shows them."""
    import subprocess

    proc = subprocess.run(["otf2-print", str(archive)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    begins, completes = Counter(), Counter()
    for line in proc.stdout.splitlines():
        m = re.match(r"IO_OPERATION_BEGIN\s+(\d+)\s+\d+\s+Handle: .*Mode: (\w+), .*Bytes Request: (\d+), Matching Id: (\d+)",
                     line)
        if m:
            begins[(int(m[1]), m[2], int(m[3]))] += 1
        m = re.match(r"IO_OPERATION_COMPLETE\s+(\d+)\s+\d+\s+Handle: .*Bytes Result: (\d+)", line)
        if m:
            completes[(int(m[1]), int(m[2]))] += 1
    definitions = subprocess.run(["otf2-print", "-G", str(archive)], capture_output=True, text=True, timeout=120)
    handles = re.findall(r'^IO_HANDLE\s+\d+\s+Name: "([^"]+)".*Communicator: "([^"]+)"', definitions.stdout, re.M)
    files = re.findall(r'^IO_REGULAR_FILE\s+\d+\s+Name: "([^"]+)"', definitions.stdout, re.M)
    return begins, completes, handles, files


def _otf2_enters(archive: Path) -> tuple:
    import subprocess

    proc = subprocess.run(["otf2-print", str(archive)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    definitions = subprocess.run(["otf2-print", "-G", str(archive)], capture_output=True, text=True, timeout=120)
    rank_of = {int(m[1]): int(m[2]) for m in re.finditer(r'^LOCATION\s+(\d+)\s+Name: "rank (\d+) thread', definitions.stdout, re.M)}
    enters, sends, receives = Counter(), Counter(), Counter()
    for line in proc.stdout.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "ENTER":
            region = re.search(r'Region: "([^"]+)"', line).group(1)
            enters[(int(fields[1]), region)] += 1
        elif fields[0] in ("MPI_SEND", "MPI_ISEND"):
            m = re.search(r'Receiver: \d+ \("rank (\d+) thread \d+" <\d+>\).*Tag: (\d+), Length: (\d+)', line)
            sends[(rank_of[int(fields[1])], int(m[1]), int(m[2]), int(m[3]))] += 1
        elif fields[0] in ("MPI_RECV", "MPI_IRECV"):
            m = re.search(r'Sender: \d+ \("rank (\d+) thread \d+" <\d+>\).*Tag: (\d+), Length: (\d+)', line)
            receives[(int(m[1]), rank_of[int(fields[1])], int(m[2]), int(m[3]))] += 1
    return enters, sends, receives


@pytest.fixture(scope="module")
def traced_run(mpi, core, sample_tools, tmp_path_factory):
    """trace_app at 4 ranks under trace:tbcast:trace (levels 1 and 3)."""
    _need_trace_tools()
    work = tmp_path_factory.mktemp(f"trace-{mpi.name}")
    app = mpi.build_app(APPS / "trace_app.c", core, work / "trace_app")
    tools = f"{sample_tools}/libtrace.so:{sample_tools}/libtbcast.so:{sample_tools}/libtrace.so"
    proc = mpi.run(4, [app, work / "data.bin"], env={"QMPI_TOOLS": tools, "QMPI_TRACE_DIR": str(work / "run")},
                   cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert sorted(re.findall(r"^check (\d+) 1 1$", proc.stdout, re.M)) == ["0", "1", "2", "3"], proc.stdout
    return work, _app_calls(proc.stdout)


def _merge(work: Path, level: int) -> Path:
    out = work / f"merged-{level}"
    proc = qmpigen("trace", str(work / "run"), "--level", str(level), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_above_tbcast_counts_and_messages(traced_run):
    work, calls = traced_run
    out = _merge(work, 1)
    enters, sends, receives = _otf2_enters(out / "traces.otf2")
    app_functions = {f for _, f in calls}
    assert Counter({k: n for k, n in enters.items() if k[1] in app_functions}) == calls
    assert {k[1] for k in enters} - app_functions == {"MPI_Init", "MPI_Finalize"}
    assert sends == receives and sum(sends.values()) == 18
    trace = json.loads((out / "trace.json").read_text())
    tracks = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "X"}
    assert tracks == {(rank, 0) for rank in range(4)}
    assert sum(1 for e in trace["traceEvents"] if e["ph"] == "s") == 18
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # MPI-IO: an I/O operation per File_write_at / File_read_at (64 bytes each, trace_app.c)
    # on the file's I/O handle, opened collectively on MPI_COMM_WORLD (one handle for the 4 ranks)
    begins, completes, handles, files = _otf2_io(out / "traces.otf2")
    expected = Counter()
    for rank in range(4):
        expected[(rank, "WRITE", 64)] += calls[(rank, "MPI_File_write_at")]
        expected[(rank, "READ", 64)] += calls[(rank, "MPI_File_read_at")]
    assert begins == +expected and sum(expected.values()) == 8
    assert completes == Counter({(rank, 64): 2 for rank in range(4)})
    data = str(work / "data.bin")
    assert handles == [(data, "MPI_COMM_WORLD")] and files == [data]


def test_below_tbcast_sees_its_sends(traced_run):
    """Below TBcast there is no Bcast: the root sends to each other rank, the others receive."""
    work, calls = traced_run
    enters, sends, receives = _otf2_enters(_merge(work, 3) / "traces.otf2")
    expected = Counter(calls)
    for rank in range(4):
        del expected[(rank, "MPI_Bcast")]
        # world Bcast from 0 to 3 ranks; each half's Bcast from its last rank to the other
        expected[(rank, "MPI_Send")] += (3 if rank == 0 else 0) + (1 if rank >= 2 else 0)
        expected[(rank, "MPI_Recv")] += (0 if rank == 0 else 1) + (1 if rank < 2 else 0)
    assert Counter({k: n for k, n in enters.items() if k[1] not in ("MPI_Init", "MPI_Finalize")}) == +expected
    assert sends == receives and sum(sends.values()) == 23


def test_merge_is_deterministic_with_and_without_the_c_loops(traced_run):
    """The same files merged twice, and once with the C loops of qmpigen/trace/native.py
    replaced by their Python fallback: byte-identical JSON, summary and PNG, and the same
    OTF2 events and definitions as otf2-print shows them."""
    import subprocess

    work, _ = traced_run
    outs = []
    for name, extra in (("a", {}), ("b", {}), ("python", {"QMPIGEN_TRACE_NO_NATIVE": "1"})):
        out = work / f"merged-det-{name}"
        proc = qmpigen("trace", str(work / "run"), "--level", "1", "-o", str(out), env={**os.environ, **extra})
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    for out in outs[1:]:
        for name in ("trace.json", "summary.txt", "timeline.png"):
            assert (out / name).read_bytes() == (outs[0] / name).read_bytes(), (out, name)
        for flags in ([], ["-G"]):
            shown = [subprocess.run(["otf2-print", *flags, str(o / "traces.otf2")], capture_output=True, text=True,
                                    timeout=120).stdout for o in (outs[0], out)]
            assert shown[0] == shown[1] and shown[0].count("\n") > 50


def test_truncated_and_corrupt_rank_files(traced_run):
    work, _ = traced_run
    cut = work / "cut"
    shutil.copytree(work / "run", cut)
    victim = sorted(cut.glob("*_2_0.L1.qtr"))[0]
    # cut in the middle of a record (records are 8-byte aligned: a cut on a boundary is
    # just a shorter, valid file)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 16 * 8 + 12])
    (sorted(cut.glob("*_1_0.L1.qtr"))[0]).write_bytes(b"garbage")
    proc = qmpigen("trace", str(cut), "--level", "1", "-o", str(work / "merged-cut"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(victim.name in line and "truncated" in line for line in lines), proc.stderr
    assert any("_1_0.L1.qtr: skipped" in line for line in lines), proc.stderr
    assert "Traceback" not in proc.stderr
    enters, _, _ = _otf2_enters(work / "merged-cut" / "traces.otf2")
    assert {rank for rank, _ in enters} == {0, 2, 3}
    empty = work / "nothing"
    empty.mkdir()
    (empty / "a_h_0_0.L1.qtr").write_bytes(b"QMPITRC")
    proc = qmpigen("trace", str(empty), "-o", str(work / "merged-nothing"))
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 2 and "Traceback" not in proc.stderr
    assert not (work / "merged-nothing").exists()


def test_thread_multiple_counts_exact(mpi, core, sample_tools, tmp_path):
    _need_trace_tools()
    app = mpi.build_app(APPS / "trace_threads.c", core, tmp_path / "trace_threads", ["-lpthread"])
    proc = mpi.run(2, [app], env={"QMPI_TOOLS": f"{sample_tools}/libtrace.so", "QMPI_TRACE_DIR": str(tmp_path / "run"),
                                  "QMPI_TRACE_BUFFER": "4096"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = _app_calls(proc.stdout)
    out = tmp_path / "merged"
    merged = qmpigen("trace", str(tmp_path / "run"), "-o", str(out))
    assert merged.returncode == 0, merged.stderr
    enters, sends, receives = _otf2_enters(out / "traces.otf2")
    # locations are per rank and thread: 4 threads per rank, each its own file
    totals = Counter()
    for (_location, region), n in enters.items():
        if region in ("MPI_Send", "MPI_Recv"):
            totals[region] += n
    expected = Counter()
    for (_rank, function), n in calls.items():
        expected[function] += n
    assert totals == expected and len({loc for loc, _ in enters}) >= 2 * 4
    assert sends == receives and sum(sends.values()) == 2 * 4 * 250


def test_nested_off_leaves_out_calls_inside_an_outer_call(mpi, core, sample_tools, tmp_path):
    """QMPI_TRACE_NESTED=0: the inner instance no longer records TBcast's Send/Recv (made
    while the outer instance's MPI_Bcast is open); the application's own calls stay."""
    _need_trace_tools()
    app = mpi.build_app(APPS / "trace_app.c", core, tmp_path / "trace_app")
    tools = f"{sample_tools}/libtrace.so:{sample_tools}/libtbcast.so:{sample_tools}/libtrace.so"
    proc = mpi.run(4, [app, tmp_path / "data.bin"], env={"QMPI_TOOLS": tools, "QMPI_TRACE_DIR": str(tmp_path / "run"),
                                                         "QMPI_TRACE_NESTED": "0"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = _app_calls(proc.stdout)
    for level in (1, 3):
        enters, sends, receives = _otf2_enters(_merge(tmp_path, level) / "traces.otf2")
        expected = Counter(calls)
        if level == 3:  # no Bcast below TBcast, and its Sends and Recvs are nested
            for rank in range(4):
                del expected[(rank, "MPI_Bcast")]
        assert Counter({k: n for k, n in enters.items() if k[1] not in ("MPI_Init", "MPI_Finalize")}) == +expected
        assert sends == receives and sum(sends.values()) == 18


@pytest.mark.parametrize("flush", ["record", "full"])
def test_flush_record_keeps_every_call_of_a_killed_rank(mpi, core, sample_tools, tmp_path, flush):
    """QMPI_TRACE_FLUSH=record writes each record at once: a rank killed by SIGKILL leaves
    all its calls; with the default (a full buffer) the same run leaves none of them."""
    _need_trace_tools()
    app = mpi.build_app(APPS / "trace_crash.c", core, tmp_path / "trace_crash")
    proc = mpi.run(1, [app, "100"], env={"QMPI_TOOLS": f"{sample_tools}/libtrace.so",
                                         "QMPI_TRACE_DIR": str(tmp_path / "run"), "QMPI_TRACE_FLUSH": flush},
                   cwd=tmp_path)
    assert "barriers 100" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode != 0  # killed
    out = tmp_path / "merged"
    merged = qmpigen("trace", str(tmp_path / "run"), "-o", str(out))
    assert merged.returncode == 0, merged.stderr
    enters, _, _ = _otf2_enters(out / "traces.otf2")
    assert enters[(0, "MPI_Barrier")] == (100 if flush == "record" else 0)
    assert enters[(0, "MPI_Init")] == (1 if flush == "record" else 0)
