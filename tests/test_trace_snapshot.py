"""Rank files that change while `qmpigen trace` reads them, and files that are not rank
files (issue 32, items 2 and 7): a file rewritten between _loops.c's two walks (a heap
overflow before: the arrays sized by the first walk of a shared mapping), a file
truncated during the merge (SIGBUS before, on the C and on the Python walk), a file
truncated between the merge's two passes, a FIFO named *.qtr (the merge hung), a
directory and a device. Now each file is read into private memory (qmpigen.trace.snapshot):
one line per file that changed under the merge, the rest merged. The changes happen at
fixed points of the merge (wrapped functions), not in a racing thread: never flaky.
The C walk runs under ASan in a child Python (tests/trace_asan.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("otf2")
pytest.importorskip("matplotlib")

import trace_asan  # noqa: E402
import trace_writer as w  # noqa: E402

from qmpigen.trace import merge, read, snapshot  # noqa: E402

pytestmark = pytest.mark.trace
HERE = Path(__file__).resolve().parent
REQUIRED = os.environ.get("QMPIGEN_REQUIRE_TRACE") == "1"


def _child(script: str, *args: str, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=HERE,
        env=env,
    )


@pytest.fixture(scope="session")
def asan_loops(tmp_path_factory) -> Path:
    if trace_asan.runtime() is None:
        if REQUIRED:
            pytest.fail(f"{trace_asan.compiler()} has no ASan runtime (libasan)")
        pytest.skip(f"{trace_asan.compiler()} has no ASan runtime")
    return trace_asan.build(tmp_path_factory.mktemp("asan"))


# A file whose bytes change between the two walks of _loops.c (count, then copy): one call,
# then records of an unknown kind the size of a call, rewritten into calls in between.
REWRITTEN = """
    import ctypes, sys
    from pathlib import Path
    import numpy as np
    import trace_asan, trace_writer as w
    from qmpigen.trace import read, walk
    trace_asan.activate(Path(sys.argv[1]))
    victim = Path(sys.argv[2])
    call = w.calls(np.array([w.CODE["MPI_Barrier"]]), np.array([1000]), np.array([2000]))
    filler = w.HEAD.pack(200, len(call)) + bytes(len(call) - 4)
    head = w.header(0, 1) + w.preamble() + w.comm(0, [0]) + call
    victim.write_bytes(head + filler * 64)

    def more_calls(rank_file):  # after the counting walk: 64 more calls
        with open(victim, "r+b") as f:
            f.seek(len(head))
            f.write(call * 64)
    trace_asan.between_the_walks(more_calls)
    got = read.read_rank_file(victim)
    print("calls", len(got.calls))

    # the C walk's own bound: handed buffers for one file's counts and another file's bytes,
    # it stops where they are full
    small, large = np.frombuffer(head + filler * 64, np.uint8), np.frombuffer(head + call * 64, np.uint8)
    lib = ctypes.CDLL(sys.argv[1])
    lib.qmpi_scan_records.restype = ctypes.c_int64
    scan = walk._Scan()
    lib.qmpi_scan_records(small.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(64), ctypes.c_int64(len(small)),
                          ctypes.byref(walk.KINDS), ctypes.byref(scan))
    counts = list(scan.counts)
    arrays = [np.empty(max(counts[0], 1), read.CALL_DTYPE), np.empty(max(counts[0], 1), np.int64),
              np.empty(max(counts[2], 1), walk.RAW_COMPLETION), np.empty((max(counts[2], 1), 2), np.int64),
              np.empty((max(counts[3], 1), 2), np.int64)]
    for name, array in zip(("calls", "call_offset", "completions", "completion_at", "other_at"), arrays):
        setattr(scan, name, array.ctypes.data)
    scan.capacity[:] = (counts[0], counts[2], counts[3])
    stop = lib.qmpi_scan_records(large.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(64),
                                 ctypes.c_int64(len(large)), ctypes.byref(walk.KINDS), ctypes.byref(scan))
    print("bounded", counts[0], scan.counts[0], stop < len(large))
"""


@pytest.mark.slow  # a child Python: in make test-trace, not make test-fast
def test_a_file_rewritten_between_the_c_walks_under_asan(asan_loops, tmp_path):
    """Before: ASan heap-buffer-overflow WRITE in qmpi_scan_records (the 64 calls the
    second walk found copied into an array of one)."""
    proc = _child(REWRITTEN, str(asan_loops), str(tmp_path / "victim.qtr"), env=trace_asan.environment())
    assert proc.returncode == 0 and "Sanitizer" not in proc.stderr, proc.stderr[-4000:]
    assert "calls 1\n" in proc.stdout  # the bytes as read: one call, then a record of no known kind
    assert "bounded 1 1 True" in proc.stdout, proc.stdout


# A merge during which one rank file is cut to its header: after the C walk's count, or
# from inside the Python walk (`how`); prints the merge's lines and returns its status.
TRUNCATED = """
    import os, sys
    from pathlib import Path
    import trace_asan, trace_writer as w
    from qmpigen.trace import merge, records
    run, out, how = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    w.write_run(run, 4, n_calls=300)
    victim = run / "synth_node_2_0.L1.qtr"
    done = []

    def cut(path):
        if path == victim and not done:
            done.append(path)
            os.truncate(victim, 64)

    if how == "c":
        trace_asan.between_the_walks(lambda rank_file: cut(rank_file.path))
    else:
        real_other = records.other_record
        def other(data, pos, kind, size, out):
            cut(out.path)
            return real_other(data, pos, kind, size, out)
        records.other_record = other
    sys.exit(merge.run(run, out, None, print))
"""


@pytest.mark.slow  # a child Python each: in make test-trace, not make test-fast
@pytest.mark.parametrize("how", ["c", "python"])
def test_a_file_truncated_while_the_merge_walks_it(tmp_path, how):
    """Before: SIGBUS (the walk touched pages of a mapping past the file's new end)."""
    env = dict(os.environ, QMPIGEN_TRACE_NO_NATIVE="0" if how == "c" else "1")
    proc = _child(TRUNCATED, str(tmp_path / "run"), str(tmp_path / "out"), how, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    lines = proc.stdout.splitlines()
    mine = [line for line in lines if "synth_node_2_0" in line]
    assert len(mine) == 1 and "changed since the merge first read it (" in mine[0] and "now 64;" in mine[0], lines
    assert "its 300 calls not merged" in mine[0] and "merged 3 trace files" in lines[-1], lines


@pytest.mark.slow  # seconds: `make test-trace`, not `make test-fast`
def test_a_file_truncated_between_the_passes(tmp_path, monkeypatch):
    """Pass 2 read a shorter file than pass 1 had counted: IndexError before."""
    w.write_run(tmp_path / "run", 3, n_calls=60)
    victim = tmp_path / "run" / "synth_node_1_0.L1.qtr"
    real = merge.read_rank_file

    def pass2_read(path):
        if path == victim:
            os.truncate(victim, victim.stat().st_size // 2)
        return real(path)

    monkeypatch.setattr(merge, "read_rank_file", pass2_read)
    lines: list = []
    assert merge.run(tmp_path / "run", tmp_path / "out", None, lines.append) == 0
    mine = [line for line in lines if victim.name in line]
    assert len(mine) == 1 and "changed since the merge first read it" in mine[0], lines
    assert "merged 2 trace files, 120 calls" in lines[-1]


def test_a_file_that_changes_while_it_is_read_is_read_again(tmp_path, monkeypatch):
    w.write_run(tmp_path / "run", 1, n_calls=40)
    victim = tmp_path / "run" / "synth_node_0_0.L1.qtr"
    real, appends = snapshot.read_all, []

    def read_all(fd, size):
        data = real(fd, size)
        if len(appends) < times:
            appends.append(size)
            with open(victim, "ab") as stream:
                stream.write(bytes(8))
        return data

    monkeypatch.setattr(snapshot, "read_all", read_all)
    times = 1
    got = read.read_rank_file(victim)
    assert got.changed is not None and "changed while the merge read it" in got.changed and "read again" in got.changed
    assert len(got.calls) == 40 and got.identity[2] == victim.stat().st_size
    times, appends[:] = snapshot.READ_TRIES, []
    with pytest.raises(read.TraceFileError, match="changed each time the merge read it"):
        read.read_rank_file(victim)


@pytest.mark.slow  # a child Python: in make test-trace, not make test-fast
def test_special_files_named_qtr_are_skipped(tmp_path):
    """A FIFO named *.qtr hung the merge (open blocks until a writer comes); a directory
    and a device are no rank files either. Through the command, in a child with a bound."""
    w.write_run(tmp_path / "run", 2)
    os.mkfifo(tmp_path / "run" / "fifo_node_5_0.L1.qtr")
    (tmp_path / "run" / "dir_node_6_0.L1.qtr").mkdir()
    (tmp_path / "run" / "dev_node_7_0.L1.qtr").symlink_to("/dev/zero")
    proc = subprocess.run(
        [sys.executable, "-m", "qmpigen", "trace", str(tmp_path / "run"), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    for name, what in (("fifo_node_5", "a FIFO"), ("dir_node_6", "a directory"), ("dev_node_7", "a character device")):
        assert [line for line in lines if name in line] == [
            f"qmpigen: {name}_0.L1.qtr: skipped: not a regular file ({what})"
        ], lines
    assert "merged 2 trace files" in lines[-1]


@pytest.mark.slow  # seconds: `make test-trace`, not `make test-fast`
def test_a_file_read_again_up_to_a_bad_call_keeps_its_identity(tmp_path):
    """A call of a function the file never defined: the reader reads the file again up to
    it, which dropped the identity pass 2 compares (an IndexError, found by the fuzzer)."""
    import numpy as np

    bad = w.calls(np.array([999]), np.array([1_000_100]), np.array([1_000_200]))
    w.write_run(tmp_path / "run", 2)
    data = w.rank_file(1, 2, extra=bad)
    (tmp_path / "run" / "synth_node_1_0.L1.qtr").write_bytes(data)
    lines: list = []
    assert merge.run(tmp_path / "run", tmp_path / "out", None, lines.append) == 0, lines
    assert [line for line in lines if "synth_node_1_0" in line] == [
        f"qmpigen: synth_node_1_0.L1.qtr: corrupt call record at byte {data.index(bad)}; merged the 24 calls before it"
    ], lines
