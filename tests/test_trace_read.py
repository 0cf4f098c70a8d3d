"""Reading rank files (qmpigen/trace/read.py) without an MPI: synthetic files with every
record kind, read by the C walk of qmpigen/trace/_loops.c (built at install time) and by
the Python fallback, must give the same calls, completions, definitions and one-line
problem — also when the file is cut or holds a corrupt record, where only what comes
before the fault counts."""

from __future__ import annotations

import os
import struct

import pytest

np = pytest.importorskip("numpy")

import trace_writer  # noqa: E402

from qmpigen.trace import loops, read, records  # noqa: E402
from qmpigen.trace.layout import KINDS as KINDS_ORDER  # noqa: E402

FUNCS = {0: "MPI_Init", 1: "MPI_Send", 2: "MPI_Wait", 3: "MPI_Comm_rank"}
KINDS = {0: "other", 1: "send", 2: "completion", 3: "other"}


def record(kind: int, body: bytes) -> bytes:
    size = 4 + len(body)
    body += b"\0" * (-size % 8)
    return struct.pack("<HH", kind, 4 + len(body)) + body


def long_call(func: int, enter: int, peer: int = 1) -> bytes:
    fields = struct.pack(
        "<HBBQQiiiiiiqqqQiiiiq", func, 0, 0, enter, enter + 5, 0, peer, 7, -1, 3, -1, 2, 8, 0, 0, -1, 0, -1, -1, 0
    )
    return struct.pack("<HH", read.R_CALL, 104) + fields


def packed_call(func: int, enter: int, peer: int = -1, offset: int = 0) -> bytes:
    """A PACKED_CALL: its head, then peer (bit 0) and offset (bit 7) when not at their defaults."""
    present = (peer != -1) | (offset != 0) << 7
    tail = (struct.pack("<i", peer) if peer != -1 else b"") + (struct.pack("<q", offset) if offset else b"")
    tail += b"\0" * (-len(tail) % 8)
    return (
        struct.pack("<HHHBBQQiI", read.R_PACKED_CALL, 32 + len(tail), func, 0, 0, enter, enter + 2, 0, present) + tail
    )


PACKED_FIELDS = ((), (5,), (6, 1 << 40))  # peer, offset: none, peer alone, both


def compact_call(func: int, enter: int, duration: int, comm: int = 0, peer: int = -1, offset: int = 0) -> bytes:
    """The COMPACT_CALL (version 7) of a call with these fields, as tests/trace_writer.py
    makes it from docs/trace-format.md: comm in full (bit 14) when it does not fit the
    head's 16 bits, leave in full (bit 15) when the duration does not fit 32, a narrow
    offset when it fits 4 bytes."""
    call = np.frombuffer(records.EMPTY_CALL, read.CALL_DTYPE).copy()
    call["func"], call["enter"], call["leave"] = func, enter, (enter + duration) % (1 << 64)
    call["comm"], call["peer"], call["offset"] = comm, peer, offset
    return trace_writer.compact(call.tobytes())


# func, duration, comm, peer, offset: the head alone; narrow and wide offsets, one negative;
# a communicator id and a duration too large for the head
COMPACT_CASES = (
    (3, 2, 0, -1, 0),
    (3, 5, 0, 4, -9),
    (3, 7, 0, 1, 1 << 40),
    (3, 1 << 33, 70000, 2, 16),
    (3, 3, -32768, -1, 0),
)


def completion(request: int) -> bytes:
    return read.COMPLETION.pack(read.R_COMPLETION, 32, 1, request, 7, 0, 8)


def rank_file(tail: bytes = b"") -> bytes:
    header = read.HEADER.pack(read.MAGIC, 4, read.HEADER.size, 0, 0, 0, 1, 2, 1, 0, 0, 0, 0)
    body = b"".join(
        record(read.R_FUNCTION, struct.pack("<ii", code, KINDS_ORDER.index(KINDS[code])) + name.encode() + b"\0")
        for code, name in FUNCS.items()
    )
    body += record(read.R_COMM, struct.pack("<iiii", 0, 2, 0, 2) + struct.pack("<ii", 0, 1))
    body += read.TIMER.pack(read.R_TIMER, read.TIMER.size, 0, 100, 1000)
    calls = []
    for i in range(300):  # runs of long calls broken by packed ones (some with fields) and completions
        calls.append(long_call(1, 1000 + 10 * i) if i % 7 else packed_call(3, 1000 + 10 * i, *PACKED_FIELDS[i % 3]))
        if i % 50 == 49:
            calls.append(long_call(2, 1000 + 10 * i + 6) + completion(0xABC + i))
    return header + body + b"".join(calls) + tail


def read_both(tmp_path, data: bytes, monkeypatch):
    path = tmp_path / "app_h_0_0.L1.qtr"
    path.write_bytes(data)
    if loops.load() is None:
        why = "qmpigen/trace/libqmpigen_loops.so was not built (no C compiler when qmpigen was installed)"
        if os.environ.get("QMPIGEN_REQUIRE_TRACE") == "1":
            pytest.fail(why)
        pytest.skip(why)
    with_c = read.read_rank_file(path)
    monkeypatch.setenv("QMPIGEN_TRACE_NO_NATIVE", "1")
    loops._loaded.clear()
    try:
        without = read.read_rank_file(path)
    finally:
        monkeypatch.delenv("QMPIGEN_TRACE_NO_NATIVE")
        loops._loaded.clear()
    for name in ("functions", "kinds", "comms", "timers", "problem"):
        assert getattr(with_c, name) == getattr(without, name), name
    assert with_c.calls.tobytes() == without.calls.tobytes()
    assert with_c.completions.tobytes() == without.completions.tobytes()
    return with_c


def test_a_whole_file_reads_the_same_both_ways(tmp_path, monkeypatch):
    got = read_both(tmp_path, rank_file(), monkeypatch)
    assert got.problem is None and len(got.calls) == 306 and len(got.completions) == 6
    assert got.functions == FUNCS and got.comms == {0: (0, 1)}
    packed = got.calls[got.calls["func"] == 3]
    assert len(packed) == 43 and (packed["size"] == 104).all() and (packed["comm"] == 0).all()
    expected = [PACKED_FIELDS[i % 3] for i in range(0, 300, 7)]
    assert packed["peer"].tolist() == [f[0] if f else -1 for f in expected]
    assert packed["offset"].tolist() == [f[1] if len(f) > 1 else 0 for f in expected]
    assert (
        (packed["datatype"] == -1).all() and (packed["count"] == 0).all() and (packed["leave"] > packed["enter"]).all()
    )
    assert got.kinds == KINDS
    assert got.completions["request"].tolist() == [0xABC + i for i in range(49, 300, 50)]


def test_compact_calls_read_the_same_both_ways(tmp_path, monkeypatch):
    """Version 7's COMPACT_CALL among whole CALLs: every case read as the CALL it stands for."""
    data = rank_file()
    calls = b"".join(compact_call(func, 5000 + 100 * i, *rest) for i, (func, *rest) in enumerate(COMPACT_CASES * 4))
    got = read_both(tmp_path, data + calls + long_call(1, 9000), monkeypatch)
    assert got.problem is None and len(got.calls) == 306 + 20 + 1
    compact = got.calls[306:326]
    cases = COMPACT_CASES * 4
    assert compact["enter"].tolist() == [5000 + 100 * i for i in range(20)]
    assert (compact["leave"] - compact["enter"]).tolist() == [c[1] for c in cases]
    assert compact["comm"].tolist() == [c[2] for c in cases]
    assert compact["peer"].tolist() == [c[3] for c in cases]
    assert compact["offset"].tolist() == [c[4] for c in cases]
    assert (compact["flags"] == 0).all() and (compact["size"] == 104).all()


@pytest.mark.parametrize("cut", [3, 12, 40, 81])
def test_a_cut_file_keeps_the_records_before_the_cut(tmp_path, monkeypatch, cut):
    data = rank_file()
    got = read_both(tmp_path, data[: len(data) - cut], monkeypatch)
    # the file ends with a call and its completion: a cut of up to 32 bytes loses the
    # completion, a longer one the call too
    assert got.problem.startswith("truncated at byte")
    assert len(got.calls) == (306 if cut <= 32 else 305) and len(got.completions) == 5


def test_a_corrupt_record_ends_what_counts(tmp_path, monkeypatch):
    bad = struct.pack("<HHi", 99, 8, 0)  # an unknown kind
    got = read_both(tmp_path, rank_file(bad + long_call(1, 99999) + completion(1)), monkeypatch)
    assert got.problem.startswith("corrupt record at byte") and len(got.calls) == 306
    assert len(got.completions) == 6  # the completion after the bad record does not count


@pytest.mark.parametrize(
    "bad",
    [
        struct.pack("<HHHBBQQiI", 10, 32, 3, 0, 0, 5, 6, 0, 1 << 20),  # a bit naming no field
        struct.pack("<HHHBBQQiI", 10, 32, 3, 0, 0, 5, 6, 0, 1 << 6),  # a field past its size
        struct.pack("<HHHBBQQiI", 10, 48, 3, 0, 0, 5, 6, 0, 1) + bytes(16),  # a size its fields do not fill
    ],
)
def test_a_packed_call_that_does_not_unpack_ends_what_counts(tmp_path, monkeypatch, bad):
    got = read_both(tmp_path, rank_file(bad + long_call(1, 99999)), monkeypatch)
    assert got.problem.startswith("corrupt call record at byte") and len(got.calls) == 306


def _compact_with(call: bytes, at: int, fmt: str, value: int) -> bytes:
    return call[:at] + struct.pack(fmt, value) + call[at + struct.calcsize(fmt) :]


@pytest.mark.parametrize(
    "bad",
    [
        _compact_with(compact_call(3, 5, 2), 16, "<I", 0xFFFFFFFF),  # a wide duration without its leave
        _compact_with(compact_call(3, 5, 2), 20, "<h", -32768),  # a wide comm without its id
        _compact_with(compact_call(3, 5, 2, 0, 4, -9), 7, "<B", 0),  # narrow fields not said narrow
        _compact_with(compact_call(3, 5, 2), 22, "<H", 1 << 6),  # a field past its size
        _compact_with(compact_call(3, 5, 2), 2, "<H", 48) + bytes(24),  # a size its fields do not fill
    ],
)
def test_a_compact_call_that_does_not_unpack_ends_what_counts(tmp_path, monkeypatch, bad):
    got = read_both(tmp_path, rank_file(bad + long_call(1, 99999)), monkeypatch)
    assert got.problem.startswith("corrupt call record at byte") and len(got.calls) == 306


def test_a_call_with_an_unknown_function_is_where_reading_stops(tmp_path, monkeypatch):
    got = read_both(tmp_path, rank_file(long_call(42, 99999)), monkeypatch)
    assert got.problem.startswith("corrupt call record at byte") and len(got.calls) == 306


@pytest.mark.parametrize(
    "packed", ["CALL", "PACKED_CALL", "COMPACT_CALL", "COMPACT_CALL entered", "COMPACT_CALL wrapping"]
)
def test_a_call_that_left_before_it_entered_is_where_reading_stops(tmp_path, monkeypatch, packed):
    """The C check (qmpi_first_bad_call) and numpy's find the same first bad call, in a
    long record, a packed one or a compact one (its leave in full before its enter, or its
    duration 0, a call entered, which only a tail file's last record may be), with good
    calls after it that must not count."""
    if packed == "CALL":
        bad = long_call(1, 99999)
        bad = bad[:16] + struct.pack("<Q", 99990) + bad[24:]  # the leave before the enter
    elif packed == "PACKED_CALL":
        bad = packed_call(3, 99999)
        bad = bad[:16] + struct.pack("<Q", 99990) + bad[24:]
    elif packed == "COMPACT_CALL":  # a duration of 2**64 - 9 ticks: the leave in full, 99990
        bad = compact_call(3, 99999, (1 << 64) - 9)
    elif packed == "COMPACT_CALL entered":
        bad = _compact_with(compact_call(3, 99999, 5), 16, "<I", 0)
    else:  # an enter so late that enter + duration passes 2**64: u64 ticks wrap, as in C
        bad = _compact_with(compact_call(3, 99999, 5), 8, "<Q", (1 << 64) - 3)
    got = read_both(tmp_path, rank_file(long_call(1, 99000) + bad + long_call(1, 100000)), monkeypatch)
    assert got.problem.startswith("corrupt call record at byte") and len(got.calls) == 307
    assert got.calls["enter"][-1] == 99000


def test_a_c_loops_build_of_another_version_is_not_used(monkeypatch, capsys):
    """A stale _loops build (its structs laid out for other Python) would read out of
    bounds: one of another ABI, or without an ABI number (before it had one), is refused
    with one line, and the Python walk reads instead."""
    from pathlib import Path

    maps = Path("/proc/self/maps").read_text().split()
    libc = next((word for word in maps if os.path.basename(word).startswith("libc.so")), None)  # loaded already
    if libc is None:
        pytest.skip("no libc to stand in for a stale build")
    monkeypatch.setattr(loops, "library_path", lambda: Path(libc))
    assert loops._find() is None
    assert f"C loops ABI 1, not {loops.LOOPS_ABI}" in capsys.readouterr().err
    monkeypatch.undo()
    if os.environ.get("QMPIGEN_REQUIRE_TRACE") == "1":  # the real build is this version's
        assert loops._find() is not None and loops._find().qmpi_loops_abi() == loops.LOOPS_ABI


def test_a_run_of_compact_calls_merges_as_its_whole_calls(tmp_path):
    """The same ring written with whole CALL records and with COMPACT_CALL records (the
    tool's, from tests/trace_writer.py's reading of docs/trace-format.md) merges into the
    same summary.txt and trace.json, byte for byte."""
    from qmpigen.trace import merge

    outputs = []
    for compact in (False, True):
        run, out = tmp_path / f"run{compact:d}", tmp_path / f"out{compact:d}"
        run.mkdir()
        for rank in range(4):
            data = trace_writer.rank_file(rank, 4, 40, compact_calls=compact)
            (run / f"synth_node_{rank}_0.L1.qtr").write_bytes(data)
        sizes = sum(path.stat().st_size for path in run.iterdir())
        lines: list = []
        assert merge.run(run, out, None, lines.append) == 0, lines
        outputs.append(((out / "summary.txt").read_bytes(), (out / "trace.json").read_bytes(), sizes))
    (summary, json_text, whole_bytes), (summary_c, json_c, compact_bytes) = outputs
    assert summary == summary_c and json_text == json_c
    assert compact_bytes < whole_bytes - 4 * 38 * (104 - 40)  # each send and receive in 40 bytes or less
