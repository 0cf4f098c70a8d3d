"""What a trace keeps of a rank that dies (issue 33), on the real MPIs: with the default
settings every call that returned is in the rank file (its tail file: qmpigen/trace/
tail.py), and a call the rank died in is there as entered and not returned, whatever
killed it: SIGKILL at random points between calls and inside them (a tool below the
trace raises it: tests/tools/killer.c), SIGSEGV and abort() between calls (the signal
recorded, and the process ends as it would without the tool), MPI_Abort on another
rank, a PMPI tool that finalizes from an exit handler above the trace (IPM does), a full
file system (the run goes on; the trace ends where the file system was full), and
threads and stacked instances. The rank files are read with qmpigen.trace.read, as the
merge reads them; tests/test_trace_story.py merges such traces. Marked `trace`."""

from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from conftest import APPS, qmpigen

pytestmark = [pytest.mark.mpi, pytest.mark.trace]
pytest.importorskip("numpy")

from qmpigen.trace.read import CALL_DEFAULTS  # noqa: E402

LOOP = ("MPI_Barrier", "MPI_Allreduce", "MPI_Iprobe")  # tests/apps/trace_death.c's known_call
SMALL_BUFFER = "4096"  # many flushes: rank file and tail file both hold records at a death
KILL_POINTS = 20


@pytest.fixture(scope="module")
def death_app(mpi, core, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp(f"death-{mpi.name}")
    return mpi.build_app(APPS / "trace_death.c", core, out / "trace_death", ["-lpthread"])


def _files(run: Path) -> Dict[Tuple[int, int, int], object]:
    """(rank, level, thread) -> the rank file as the merge reads it."""
    from qmpigen.trace.read import read_rank_file

    found = {}
    for path in sorted(run.glob("*.qtr")):
        f = read_rank_file(path)
        found[(f.rank, f.level, f.thread)] = f
    return found


def _names(f) -> List[str]:
    return [f.functions[int(code)] for code in f.calls["func"]]


def _open_call(f):
    """The name of the call the thread was in when it died, or None."""
    record = f.ending.open_call
    return None if record is None else f.functions[int.from_bytes(record[4:6], "little")]


def _loop(n: int) -> List[str]:
    return [LOOP[i % 3] for i in range(n)]


def _run(mpi, app, tmp_path: Path, tools: str, how: str, n: int, ranks: int = 1, **env: str):
    run = tmp_path / "run"
    proc = mpi.run(ranks, [app, how, n], env={"QMPI_TOOLS": tools, "QMPI_TRACE_DIR": str(run), **env}, cwd=tmp_path)
    return proc, run


def test_sigkill_at_random_points_keeps_every_call_that_returned(mpi, death_app, sample_tools, test_tools, tmp_path):
    """20 deaths by SIGKILL, between two calls (the application raises it after call n)
    or inside one (a tool below the trace raises it in call n): the rank's file holds the
    n calls that returned, in order, and the call it was in; a 4 KiB buffer, so that the
    calls are split between the rank file and its tail file."""
    rng = random.Random(33)
    points = [("between", 1), ("inside", 1)] + [
        (rng.choice(("between", "inside")), rng.randint(1, 400)) for _ in range(KILL_POINTS - 2)
    ]
    trace = f"{sample_tools}/libtrace.so"

    def die(k: int):
        where, n = points[k]
        work = tmp_path / str(k)
        work.mkdir()
        if where == "between":
            return _run(mpi, death_app, work, trace, "kill", n, QMPI_TRACE_BUFFER=SMALL_BUFFER)
        tools = f"{trace}:{test_tools}/libkiller.so"
        return _run(mpi, death_app, work, tools, "finish", n + 5, QMPI_TRACE_BUFFER=SMALL_BUFFER, KILLER_AT=str(n))

    with ThreadPoolExecutor(2) as pool:  # a launcher mostly waits: two jobs at a time
        deaths = list(pool.map(die, range(len(points))))
    for (where, n), (proc, run) in zip(points, deaths):
        returned, entered = (n, None) if where == "between" else (n - 1, LOOP[(n - 1) % 3])
        assert proc.returncode != 0, (where, n, proc.stdout)
        (f,) = _files(run).values()
        assert _names(f) == ["MPI_Init"] + _loop(returned), (where, n)
        assert _open_call(f) == entered and f.ending.signal is None and f.end_calls is None, (where, n)
        assert f.problem is None and list(run.glob("*.qtr.tail")), (where, n, f.problem)


def test_calls_longer_than_a_records_duration(mpi, death_app, sample_tools, test_tools, tmp_path):
    """Two calls of 2.5 s (a tool below the trace sleeps in them): the loop's 5th, an
    MPI_Allreduce with its roles' record, and MPI_Comm_rank, a bare record of
    QMPI_TRACE_FUNCTIONS=all. That is more ticks than a COMPACT_CALL's 32-bit duration
    holds (2**32 ticks: 1.76 s at 2.4 GHz), so each record carries its leave in full
    (bit 15 of `present`); read back, each lasted its 2.5 s, and every call is there."""
    tools = f"{sample_tools}/libtrace.so:{test_tools}/libkiller.so"
    env = {"KILLER_AT": "5", "KILLER_SLEEP_MS": "2500", "QMPI_TRACE_FUNCTIONS": "all"}
    proc, run = _run(mpi, death_app, tmp_path, tools, "finish", 8, **env)
    assert proc.returncode == 0, proc.stderr
    (f,) = _files(run).values()
    names = _names(f)
    assert [n for n in names if n in LOOP] == _loop(8) and f.problem is None and f.end_calls == len(names)
    long_calls = [names.index("MPI_Comm_rank"), [i for i, n in enumerate(names) if n in LOOP][4]]
    (t0, ns0), (t1, ns1) = f.timers[0], f.timers[-1]
    ticks = [int(leave) - int(enter) for enter, leave in zip(f.calls["enter"], f.calls["leave"])]
    ns = [t * (ns1 - ns0) / (t1 - t0) for t in ticks]
    assert all(2.5e9 <= ns[i] < 3.5e9 for i in long_calls), ns
    assert all(ns[i] < 1.25e9 for i in range(len(names)) if i not in long_calls), ns  # none slept
    long_ticks = [ticks[i] for i in long_calls]
    bare = f.calls[long_calls[0]]  # a bare record written again whole: every argument at its default
    fields = [name for name in bare.dtype.names if name not in ("kind", "size", "func", "depth", "enter", "leave")]
    defaults = {"comm": -1, **CALL_DEFAULTS}
    assert {name: int(bare[name]) for name in fields} == {name: defaults.get(name, 0) for name in fields}
    if min(long_ticks) < 1 << 32:
        pytest.skip(f"the tick counter counts fewer than 2**32 ticks in 2.5 s ({min(long_ticks)})")
    data, pos, wide = next(run.glob("*.qtr")).read_bytes(), 64, 0
    while pos + 24 <= len(data):
        kind, size = struct.unpack_from("<HH", data, pos)
        if kind == 14 and struct.unpack_from("<H", data, pos + 22)[0] >> 15:
            wide += 1
        pos += size
    assert wide == 2


@pytest.mark.parametrize("how, signal", [("segv", 11), ("abort", 6), ("reraise", 15), ("resethand", 15)])
def test_a_fatal_signal_between_calls(mpi, death_app, sample_tools, tmp_path, how, signal):
    """SIGSEGV (a store through a null pointer), SIGABRT (abort()) or SIGTERM caught by the
    application's handler, which raises it again with the default handling back (restored
    by the handler, or by SA_RESETHAND), after 50 calls: the 50 calls and the signal are
    in the trace; the process ends as it does without the tool (the launcher's exit
    status the same)."""
    plain = mpi.run(1, [death_app, how, 50], cwd=tmp_path)
    proc, run = _run(mpi, death_app, tmp_path, f"{sample_tools}/libtrace.so", how, 50)
    assert proc.returncode == plain.returncode != 0, (proc.stderr, plain.stderr)
    (f,) = _files(run).values()
    assert _names(f) == ["MPI_Init"] + _loop(50) and _open_call(f) is None
    assert f.ending.signal is not None and f.ending.signal[0] == signal and f.end_calls is None


def test_an_applications_handler_is_called_and_the_run_goes_on(mpi, death_app, sample_tools, tmp_path):
    """A SIGTERM handler the application installed before MPI_Init still runs (the tool's
    chains to it), and the run goes on: the trace is whole, every call in it, no signal."""
    proc, run = _run(mpi, death_app, tmp_path, f"{sample_tools}/libtrace.so", "handled", 30, QMPI_VERBOSE="1")
    assert proc.returncode == 0 and "handled 1" in proc.stdout, proc.stdout + proc.stderr
    assert "each thread's buffer its tail file mapped shared" in proc.stderr, proc.stderr
    (f,) = _files(run).values()
    assert _names(f) == ["MPI_Init"] + _loop(30) * 2 + ["MPI_Finalize"]
    assert f.end_calls == 62 and f.ending.signal is None and f.ending.open_call is None
    assert not list(run.glob("*.tail"))  # removed once the rank file is whole


@pytest.mark.parametrize("how", ["storm", "storm-pending", "storm-elsewhere"])
def test_signals_inside_the_wrappers_change_no_record(mpi, death_app, sample_tools, tmp_path, how):
    """3,000 SIGTERMs sent to a thread while it makes traced calls, caught by the
    application's handler, which returns: each lands somewhere in the trace's wrappers,
    some inside a record being written, where the signal's record covers that record's
    first fields until it is taken back (signals.c); `storm-pending` sends them in pairs,
    the second while the handler of the first runs, so that it waits as that handler
    returns; in `storm-elsewhere` each handler sends one to the process, which another
    thread may take. Every call is there, and every call of a function with the
    arguments it was made with."""
    import numpy as np
    from numpy.lib import recfunctions

    signals = 3000
    proc, run = _run(mpi, death_app, tmp_path, f"{sample_tools}/libtrace.so", how, signals)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls, handled = map(int, re.search(r"^storm (\d+) (\d+)$", proc.stdout, re.M).groups())
    assert handled >= signals, proc.stdout
    (f,) = _files(run).values()
    code = {name: number for number, name in f.functions.items()}
    expected = [code["MPI_Init_thread"], *(code[LOOP[i % 3]] for i in range(calls)), code["MPI_Finalize"]]
    assert f.problem is None and f.ending.signal is None and f.end_calls == calls + 2, f.problem
    assert np.array_equal(f.calls["func"], expected)
    arguments = [name for name in f.calls.dtype.names if name not in ("kind", "size", "depth", "enter", "leave")]
    for name in LOOP:
        made = recfunctions.structured_to_unstructured(
            f.calls[f.calls["func"] == code[name]][arguments], dtype=np.int64
        )
        assert len(np.unique(made, axis=0)) == 1, (name, np.unique(made, axis=0))


def test_mpi_abort_on_another_rank(mpi, death_app, sample_tools, tmp_path):
    """Rank 1 calls MPI_Abort after 40 calls, once rank 0 waits in MPI_Recv (it said so):
    rank 0 is killed by the launcher; its 40 calls, its MPI_Send and the MPI_Recv it was
    in are kept; rank 1's MPI_Abort, with its error code, is in its file."""
    proc, run = _run(mpi, death_app, tmp_path, f"{sample_tools}/libtrace.so", "abort-other", 40, ranks=2)
    assert proc.returncode != 0
    files = _files(run)
    waiting, aborting = files[(0, 1, 0)], files[(1, 1, 0)]
    assert _names(waiting) == ["MPI_Init"] + _loop(40) + ["MPI_Send"] and _open_call(waiting) == "MPI_Recv"
    assert _names(aborting)[:42] == ["MPI_Init"] + _loop(40) + ["MPI_Recv"]
    abort = [i for i, name in enumerate(_names(aborting)) if name == "MPI_Abort"]
    if abort:  # returned to the tool (MPICH's does, before the launcher ends the rank)
        assert abort == [42] and aborting.calls["tag"][42] == 3
    else:
        assert _open_call(aborting) == "MPI_Abort"


def test_below_a_tool_that_finalizes_at_exit(mpi, death_app, sample_tools, test_tools, tmp_path):
    """TOOLS=late_finalize:trace:killer: the PMPI tool on top finalizes from an exit
    handler (IPM does), and each rank dies inside MPI_Finalize, below the trace (where on
    the MPICH wheel a rank may never return): every call is kept, and the MPI_Finalize
    each rank was in."""
    late = mpi.compile(
        [APPS.parent / "pmpi_tools" / "late_finalize.c"], tmp_path / "liblate_finalize.so", ["-shared", "-fPIC", "-O2"]
    )
    tools = f"{late}:{sample_tools}/libtrace.so:{test_tools}/libkiller.so"
    proc, run = _run(mpi, death_app, tmp_path, tools, "finish", 40, ranks=2, KILLER_FINALIZE="1")
    assert proc.returncode != 0
    files = _files(run)
    assert sorted(files) == [(0, 2, 0), (1, 2, 0)]
    for f in files.values():
        assert _names(f) == ["MPI_Init"] + _loop(40) and _open_call(f) == "MPI_Finalize"


def test_above_a_tool_that_works_in_its_finalize(mpi, death_app, sample_tools, tmp_path):
    """TOOLS=trace:finalize_work: the PMPI tool below makes a communicator and reduces on
    it in its MPI_Finalize (Darshan writing its log), calls that come back through the
    trace while its own MPI_Finalize is under way: the job ends well (the trace once let
    its world group go before the finalize, and MPICH stopped the job in
    MPI_Group_translate_ranks), and the trace holds those calls inside MPI_Finalize."""
    below = mpi.compile(
        [APPS.parent / "pmpi_tools" / "finalize_work.c"], tmp_path / "libfinalize_work.so", ["-shared", "-fPIC", "-O2"]
    )
    proc, run = _run(mpi, death_app, tmp_path, f"{sample_tools}/libtrace.so:{below}", "finish", 40, ranks=2)
    assert proc.returncode == 0, proc.stderr
    files = _files(run)
    assert sorted(files) == [(0, 1, 0), (1, 1, 0)]
    for f in files.values():
        names = _names(f)
        assert names[:41] == ["MPI_Init"] + _loop(40) and _open_call(f) is None, names
        assert {"MPI_Comm_dup", "MPI_Allreduce", "MPI_Comm_free", "MPI_Finalize"} <= set(names[41:]), names
    merged = qmpigen("trace", str(run), "-o", str(tmp_path / "merged"))
    assert merged.returncode == 0, merged.stderr


def test_threads_and_instances_each_keep_their_calls(mpi, death_app, sample_tools, tmp_path):
    """trace:trace, 3 threads of 200 MPI_Allreduce each, then SIGKILL: each instance has a
    file per thread, every thread's calls in it."""
    trace = f"{sample_tools}/libtrace.so"
    proc, run = _run(mpi, death_app, tmp_path, f"{trace}:{trace}", "threads", 200, QMPI_TRACE_BUFFER=SMALL_BUFFER)
    assert proc.returncode != 0 and "threads 3 200" in proc.stdout, proc.stdout + proc.stderr
    files = _files(run)
    for level in (1, 2):
        assert sorted(thread for (_, lv, thread) in files if lv == level) == [0, 1, 2, 3], files
        assert all(_names(files[(0, level, t)]) == ["MPI_Allreduce"] * 200 for t in (1, 2, 3)), level
        assert _names(files[(0, level, 0)]) == ["MPI_Init_thread"] + ["MPI_Comm_dup"] * 3


@pytest.fixture
def small_file_system(tmp_path):
    """A 512 KiB tmpfs (root only: mount)."""
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs (root only): {proc.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_file_system(mpi, death_app, sample_tools, tmp_path, small_file_system):
    """The trace directory on a 512 KiB tmpfs, a 64 KiB buffer, 30,000 calls: the file
    system fills mid-run; the application finishes (no SIGBUS: the tail file's space is
    reserved when it is made), one line says where the thread's trace stops, and the trace
    ends there: every call until then, then END (reason: stopped)."""
    from qmpigen.trace import layout

    run = small_file_system / "run"
    env = {"QMPI_TOOLS": f"{sample_tools}/libtrace.so", "QMPI_TRACE_DIR": str(run), "QMPI_TRACE_BUFFER": "65536"}
    proc = mpi.run(1, [death_app, "finish", 30000], env=env, cwd=tmp_path)
    assert proc.returncode == 0 and "calls 0 30000" in proc.stdout, proc.stderr
    stops = re.findall(
        r"^qmpi trace \(level 1, rank 0, thread 0\): cannot write .*: No space left on device; tracing "
        r"of this thread stops after (\d+) calls \(the run goes on\)$",
        proc.stderr,
        re.M,
    )
    assert len(stops) == 1, proc.stderr
    (f,) = _files(run).values()
    kept = int(stops[0])
    assert (
        1000 < kept < 30000
        and f.end_calls == kept
        and f.end_reason == dict((name, value) for name, value, _ in layout.END_REASONS)["END_STOPPED"]
    )
    assert _names(f) == ["MPI_Init"] + _loop(kept - 1)


def test_the_merge_tells_how_a_rank_ended(mpi, death_app, sample_tools, test_tools, tmp_path):
    """A rank that dies of SIGSEGV inside its 41st call (raised by a tool below the trace):
    the merge's note says it did not finalize, summary.txt says its last call that
    returned, the call it was in and the signal, and its OTF2 location ends with a
    ProgramEnd (exit status 128 + 11) carrying the same as attributes."""
    tools = f"{sample_tools}/libtrace.so:{test_tools}/libkiller.so"
    proc, run = _run(mpi, death_app, tmp_path, tools, "finish", 60, KILLER_AT="41", KILLER_SIGNAL="11")
    assert proc.returncode != 0
    merged = qmpigen("trace", str(run), "-o", str(tmp_path / "merged"))
    assert merged.returncode == 0, merged.stderr
    assert re.search(
        r"\.qtr: did not finalize \(41 calls merged; summary\.txt says how it ended\)$", merged.stderr, re.M
    )
    summary = (tmp_path / "merged" / "summary.txt").read_text()
    line = re.search(r"^  rank 0 thread 0: (.*)$", summary.split("did not finalize", 1)[1], re.M)[1]
    assert line.startswith("last call returned: MPI_Barrier at ") and "; in call: MPI_Allreduce, entered at " in line
    assert re.search(r"; signal: SIGSEGV \(signal 11, sent by pid \d+\)$", line), line
    if shutil.which("otf2-print") is None:
        return
    shown = subprocess.run(["otf2-print", str(tmp_path / "merged" / "traces.otf2")], capture_output=True, text=True)
    end = shown.stdout[shown.stdout.index("PROGRAM_END") :]
    assert "Exit status: 139" in end and '"qmpi: in call"' in end and "MPI_Allreduce, entered at" in end, end
