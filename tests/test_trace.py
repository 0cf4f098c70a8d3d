"""The trace tool (sample_tools/trace/) and `qmpigen trace`, on the real MPIs: a 4-rank
application traced above and below TBcast, merged; otf2-print (OTF2's own reader) must
read the archive with one ENTER per call the application made, per rank and function,
and every send must have its receive (rank, tag, bytes); QMPI_TRACE_FUNCTIONS=all must
record every other MPI function too (their depth and failed flag read from the rank
files as docs/trace-format.md describes them). Skipped with a reason when
otf2-print or the otf2/matplotlib packages are missing, a failure when
QMPIGEN_REQUIRE_TRACE=1 (as in `make test-trace`, which installs otf2-tools). Marked
`trace`: not in `make test`."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from collections import Counter
from pathlib import Path

import pytest

from conftest import APPS, SAMPLE_TOOLS, qmpigen

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
    return Counter(
        {(int(r), f): int(n) for r, f, n in re.findall(r"^calls (\d+) (\S+) (\d+)$", stdout, re.M) if int(n)}
    )


def _otf2_io(archive: Path) -> tuple:
    """MPI-IO as OTF2 I/O: operations per (location, mode) with their bytes, and the
    I/O handle and file definitions, as otf2-print shows them."""
    import subprocess

    proc = subprocess.run(["otf2-print", str(archive)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    begins, completes = Counter(), Counter()
    for line in proc.stdout.splitlines():
        m = re.match(
            r"IO_OPERATION_BEGIN\s+(\d+)\s+\d+\s+Handle: .*Mode: (\w+), .*Bytes Request: (\d+), Matching Id: (\d+)",
            line,
        )
        if m:
            begins[(int(m[1]), m[2], int(m[3]))] += 1
        m = re.match(r"IO_OPERATION_COMPLETE\s+(\d+)\s+\d+\s+Handle: .*Bytes Result: (\d+)", line)
        if m:
            completes[(int(m[1]), int(m[2]))] += 1
    definitions = subprocess.run(["otf2-print", "-G", str(archive)], capture_output=True, text=True, timeout=120)
    handles = re.findall(r'^IO_HANDLE\s+\d+\s+Name: "([^"]+)".*Communicator: "([^"]+)"', definitions.stdout, re.M)
    files = re.findall(r'^IO_REGULAR_FILE\s+\d+\s+Name: "([^"]+)"', definitions.stdout, re.M)
    return begins, completes, handles, files


def otf2_events(archive: Path) -> tuple:
    """otf2-print's event lines, and each location's rank (from the definitions)."""
    import subprocess

    proc = subprocess.run(["otf2-print", str(archive)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    definitions = subprocess.run(["otf2-print", "-G", str(archive)], capture_output=True, text=True, timeout=300)
    rank_of = {
        int(m[1]): int(m[2])
        for m in re.finditer(r'^LOCATION\s+(\d+)\s+Name: "rank (\d+) thread', definitions.stdout, re.M)
    }
    return proc.stdout.splitlines(), rank_of


PEER = r'{}: (?:\d+ \("rank (\d+) thread \d+" <\d+>\)|UNDEFINED).*Tag: (\d+), Length: (\d+)'


def _otf2_enters(archive: Path) -> tuple:
    lines, rank_of = otf2_events(archive)
    enters, sends, receives = Counter(), Counter(), Counter()
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "ENTER":
            region = re.search(r'Region: "([^"]+)"', line).group(1)
            enters[(int(fields[1]), region)] += 1
        elif fields[0] in ("MPI_SEND", "MPI_ISEND"):  # a peer without a rank file (no location): -1
            m = re.search(PEER.format("Receiver"), line)
            sends[(rank_of[int(fields[1])], int(m[1] or -1), int(m[2]), int(m[3]))] += 1
        elif fields[0] in ("MPI_RECV", "MPI_IRECV"):
            m = re.search(PEER.format("Sender"), line)
            receives[(int(m[1] or -1), rank_of[int(fields[1])], int(m[2]), int(m[3]))] += 1
    return enters, sends, receives


@pytest.fixture(scope="module")
def traced_run(mpi, core, sample_tools, tmp_path_factory):
    """trace_app at 4 ranks under trace:tbcast:trace (levels 1 and 3)."""
    _need_trace_tools()
    work = tmp_path_factory.mktemp(f"trace-{mpi.name}")
    app = mpi.build_app(APPS / "trace_app.c", core, work / "trace_app")
    tools = f"{sample_tools}/libtrace.so:{sample_tools}/libtbcast.so:{sample_tools}/libtrace.so"
    proc = mpi.run(
        4, [app, work / "data.bin"], env={"QMPI_TOOLS": tools, "QMPI_TRACE_DIR": str(work / "run")}, cwd=work
    )
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
    # the same I/O in the summary, per rank, and drawn beside the timeline in io.png
    summary = (out / "summary.txt").read_text()
    for rank in range(4):
        reads, writes = calls[(rank, "MPI_File_read_at")], calls[(rank, "MPI_File_write_at")]
        assert f"rank {rank:<4} {reads:>8} / {64 * reads:>14} {writes:>8} / {64 * writes:>14}\n" in summary
    assert (out / "io.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


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
    """The same files merged twice, and once with the C loops of qmpigen/trace/_loops.c
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
        for name in ("trace.json", "summary.txt", "timeline.png", "io.png"):
            assert (out / name).read_bytes() == (outs[0] / name).read_bytes(), (out, name)
        for flags in ([], ["-G"]):
            shown = [
                subprocess.run(
                    ["otf2-print", *flags, str(o / "traces.otf2")], capture_output=True, text=True, timeout=120
                ).stdout
                for o in (outs[0], out)
            ]
            assert shown[0] == shown[1] and shown[0].count("\n") > 50


def test_truncated_and_corrupt_rank_files(traced_run):
    work, _ = traced_run
    cut = work / "cut"
    shutil.copytree(work / "run", cut)
    victim = sorted(cut.glob("*_2_0.L1.*qtr"))[0]
    # cut in the middle of a record (records are 8-byte aligned: a cut on a boundary is
    # just a shorter, valid file)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 16 * 8 + 12])
    garbage = sorted(cut.glob("*_1_0.L1.*qtr"))[0]
    garbage.write_bytes(b"garbage")
    proc = qmpigen("trace", str(cut), "--level", "1", "-o", str(work / "merged-cut"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(victim.name in line and "truncated" in line for line in lines), proc.stderr
    assert any(f"{garbage.name}: skipped" in line for line in lines), proc.stderr
    assert "Traceback" not in proc.stderr
    enters, _, _ = _otf2_enters(work / "merged-cut" / "traces.otf2")
    _, rank_of = otf2_events(work / "merged-cut" / "traces.otf2")
    assert (
        {rank_of[location] for location, _ in enters} == {0, 2, 3} == set(rank_of.values())
    )  # rank 1: no file, no location
    empty = work / "nothing"
    empty.mkdir()
    (empty / "a_h_0_0.L1.qtr").write_bytes(b"QMPITRC")
    proc = qmpigen("trace", str(empty), "-o", str(work / "merged-nothing"))
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 2 and "Traceback" not in proc.stderr
    assert not (work / "merged-nothing").exists()


def test_thread_multiple_counts_exact(mpi, core, sample_tools, tmp_path):
    _need_trace_tools()
    app = mpi.build_app(APPS / "trace_threads.c", core, tmp_path / "trace_threads", ["-lpthread"])
    proc = mpi.run(
        2,
        [app],
        env={
            "QMPI_TOOLS": f"{sample_tools}/libtrace.so",
            "QMPI_TRACE_DIR": str(tmp_path / "run"),
            "QMPI_TRACE_BUFFER": "4096",
        },
        cwd=tmp_path,
    )
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
    proc = mpi.run(
        4,
        [app, tmp_path / "data.bin"],
        env={"QMPI_TOOLS": tools, "QMPI_TRACE_DIR": str(tmp_path / "run"), "QMPI_TRACE_NESTED": "0"},
        cwd=tmp_path,
    )
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
    proc = mpi.run(
        1,
        [app, "100"],
        env={
            "QMPI_TOOLS": f"{sample_tools}/libtrace.so",
            "QMPI_TRACE_DIR": str(tmp_path / "run"),
            "QMPI_TRACE_FLUSH": flush,
        },
        cwd=tmp_path,
    )
    assert "barriers 100" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode != 0  # killed
    out = tmp_path / "merged"
    merged = qmpigen("trace", str(tmp_path / "run"), "-o", str(out))
    assert merged.returncode == 0, merged.stderr
    enters, _, _ = _otf2_enters(out / "traces.otf2")
    assert enters[(0, "MPI_Barrier")] == (100 if flush == "record" else 0)
    assert enters[(0, "MPI_Init")] == (1 if flush == "record" else 0)


# -- QMPI_TRACE_FUNCTIONS=all: every MPI function ----------------------------------------------------


def _otf2_enters_per_rank(archive: Path) -> Counter:
    """ENTERs per (rank, region), over the rank's threads (a location each)."""
    import subprocess

    enters, _, _ = _otf2_enters(archive)
    definitions = subprocess.run(["otf2-print", "-G", str(archive)], capture_output=True, text=True, timeout=120)
    rank_of = {
        int(m[1]): int(m[2])
        for m in re.finditer(r'^LOCATION\s+(\d+)\s+Name: "rank (\d+) thread', definitions.stdout, re.M)
    }
    per_rank = Counter()
    for (location, region), n in enters.items():
        per_rank[(rank_of[location], region)] += n
    return per_rank


def _raw_calls(run: Path, level: int) -> tuple:
    """The call records of one instance's rank files, read as docs/trace-format.md
    describes them (not through qmpigen.trace): (rank, function, depth, failed) -> count,
    and each file's functions (name -> kind). Every call's code must be named by a
    FUNCTION record earlier in its own file, and every FUNCTION record's function called."""
    from qmpigen.trace.layout import KINDS

    calls, codes = Counter(), []
    for path in sorted(run.glob(f"*.L{level}.*qtr")):
        data = path.read_bytes()
        assert data[:8] == b"QMPITRC\0", path
        rank = struct.unpack_from("<i", data, 16)[0]
        names, kinds, used, pos = {}, {}, set(), 64
        while pos < len(data):
            kind, size = struct.unpack_from("<HH", data, pos)
            assert size >= 8 and size % 8 == 0 and pos + size <= len(data), (path, pos)
            if kind == 1:  # FUNCTION: i32 code, i32 kind, name
                code, function_kind = struct.unpack_from("<ii", data, pos + 4)
                names[code] = data[pos + 12 : pos + size].split(b"\0", 1)[0].decode()
                kinds[names[code]] = KINDS[function_kind]
            elif kind in (6, 10, 14):  # CALL, PACKED_CALL, COMPACT_CALL: u16 function, u8 depth, u8 flags
                func, depth, flags = struct.unpack_from("<HBB", data, pos + 4)
                assert func in names, (path, pos, func)
                used.add(names[func])
                calls[(rank, names[func], depth, bool(flags & 2))] += 1
            pos += size
        assert used == set(kinds), path
        codes.append(kinds)
    return calls, codes


def _kinds(mpi) -> dict:
    """Every function's kind, from qmpigen's model of this MPI's mpi.h."""
    from qmpigen import api
    from qmpigen.mpi.roles import roles_of

    model = api.read_mpi(api.MpiSource(mpicc=str(mpi.mpicc)))
    return {f.name: roles_of(f).kind for f in model.enumeration.functions}


def _run_all_app(mpi, core, tools: str, work: Path, **env: str):
    app = mpi.build_app(APPS / "trace_all_app.c", core, work / "trace_all_app", ["-lpthread"])
    proc = mpi.run(2, [app], env={"QMPI_TOOLS": tools, "QMPI_TRACE_DIR": str(work / "run"), **env}, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert sorted(re.findall(r"^failed (\d+) 1$", proc.stdout, re.M)) == ["0", "1"], proc.stdout
    return _app_calls(proc.stdout)


@pytest.mark.parametrize("nested", ["1", "0"])
def test_all_functions_records_every_call(mpi, core, sample_tools, tmp_path, nested):
    """QMPI_TRACE_FUNCTIONS=all, two instances (trace:trace), 2 ranks of 4 threads, a
    4096-byte buffer (many flushes): each instance records every MPI call of the
    application, the functions outside the tool's own wrappers included (MPI_Wtime,
    MPI_Type_size, MPI_Comm_group, MPI_Sendrecv, MPI_Get_count, ...): one ENTER per call,
    per rank and function. MPI_Error_class, called by an error handler inside
    MPI_Comm_call_errhandler, is nested (depth 1; dropped with QMPI_TRACE_NESTED=0); the
    call passing down to the second instance keeps its depth; only the failing
    MPI_Type_size has the failed flag (MPI_Wtime's double result is no error code)."""
    _need_trace_tools()
    tools = f"{sample_tools}/libtrace.so:{sample_tools}/libtrace.so"
    calls = _run_all_app(
        mpi, core, tools, tmp_path, QMPI_TRACE_FUNCTIONS="all", QMPI_TRACE_BUFFER="4096", QMPI_TRACE_NESTED=nested
    )
    assert calls[(0, "MPI_Wtime")] == 3 * 20 and calls[(1, "MPI_Type_size")] == 3 * 27 + 1
    expected = Counter(calls)
    for rank in range(2):
        expected[(rank, "MPI_Init_thread")] = expected[(rank, "MPI_Finalize")] = 1
        if nested == "0":
            del expected[(rank, "MPI_Error_class")]
    for level in (1, 2):
        out = _merge(tmp_path, level)
        assert _otf2_enters_per_rank(out / "traces.otf2") == expected, level
        raw, codes = _raw_calls(tmp_path / "run", level)
        per_function = Counter()
        for (rank, name, _, _), n in raw.items():
            per_function[(rank, name)] += n
        assert per_function == expected
        assert {key for key in raw if key[2] != 0} == (
            {(rank, "MPI_Error_class", 1, False) for rank in range(2)} if nested == "1" else set()
        )
        assert {key for key in raw if key[3]} == {(rank, "MPI_Type_size", 0, True) for rank in range(2)}
        assert raw[(0, "MPI_Type_size", 0, True)] == raw[(1, "MPI_Type_size", 0, True)] == 1
        # every file names the functions it calls, with their kinds from the model
        assert len(codes) == 2 * 4
        kinds = _kinds(mpi)
        for file_kinds in codes:
            assert file_kinds and all(kinds[name] == kind for name, kind in file_kinds.items())
        named = {name: kind for c in codes for name, kind in c.items()}
        assert named["MPI_Wtime"] == named["MPI_Group_free"] == "other"
        assert named["MPI_Sendrecv"] == "sendrecv"


@pytest.mark.parametrize("functions", [None, "default"])
def test_default_mode_records_the_operations(mpi, core, sample_tools, tmp_path, functions):
    """Unset or `default`: the same application leaves the calls of every function whose
    kind (from the model) is not `other`, with MPI_Init_thread and MPI_Finalize, and no
    other call."""
    _need_trace_tools()
    env = {} if functions is None else {"QMPI_TRACE_FUNCTIONS": functions}
    calls = _run_all_app(mpi, core, f"{sample_tools}/libtrace.so", tmp_path, **env)
    kinds = _kinds(mpi)
    expected = Counter({key: n for key, n in calls.items() if kinds[key[1]] != "other"})
    assert {name for _, name in expected} >= {"MPI_Sendrecv", "MPI_Type_commit"}
    for rank in range(2):
        expected[(rank, "MPI_Init_thread")] = expected[(rank, "MPI_Finalize")] = 1
    enters = _otf2_enters_per_rank(_merge(tmp_path, 1) / "traces.otf2")
    assert enters == expected


def test_trace_without_generated_wrappers(mpi, core, tmp_path):
    """The C files alone, without the wrappers qmpigen generates (trace_roles.qmpi,
    trace_all.qmpi): the weak references are NULL and only their own functions are
    traced, MPI_Init_thread and MPI_Finalize here, even with `all`."""
    _need_trace_tools()
    sources = sorted((SAMPLE_TOOLS / "trace").glob("*.c"))
    tool = mpi.build_tool(sources, core, tmp_path / "libtrace.so", ["-lpthread"])
    _run_all_app(mpi, core, str(tool), tmp_path, QMPI_TRACE_FUNCTIONS="all")
    enters = _otf2_enters_per_rank(_merge(tmp_path, 1) / "traces.otf2")
    assert enters == Counter({(rank, f): 1 for rank in range(2) for f in ("MPI_Init_thread", "MPI_Finalize")})


def test_a_probe_that_matched_nothing_is_no_message(mpi, core, sample_tools, tmp_path):
    """MPI_Iprobe finding nothing leaves the status untouched (stale values, or the
    tracer's own uninitialised one under MPI_STATUS_IGNORE): its records keep the tag
    asked for, the source asked for (MPI_ANY_SOURCE: -2) and no bytes."""
    _need_trace_tools()
    app = mpi.build_app(APPS / "trace_probe_nothing.c", core, tmp_path / "trace_probe_nothing")
    env = {"QMPI_TOOLS": f"{sample_tools}/libtrace.so", "QMPI_TRACE_DIR": str(tmp_path / "run")}
    proc = mpi.run(2, [app], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "matched 0 0" in proc.stdout
    trace = json.loads((_merge(tmp_path, 1) / "trace.json").read_text())
    probes = [e["args"] for e in trace["traceEvents"] if e.get("name") == "MPI_Iprobe"]
    assert len(probes) == 2
    for args in probes:
        assert args.get("tag") == 99 and args.get("source") == -2 and "recv_bytes" not in args, args
