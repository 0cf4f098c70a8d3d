"""A rank file's tail file (format version 6, qmpigen/trace/tail.py), without an MPI job
(files from tests/trace_writer.py and layout.py): the reader takes the rank file's first
`flushed` bytes, then the tail buffer's records up to a zero word, the call entered and
not returned, and a SIGNAL record after it; a buffer already written out, a tail ahead of
its rank file, another file's tail, a stale signal and a tail that is not a regular file
are told apart. tests/test_trace_death.py reads the tails the tool leaves."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

import trace_writer as w  # noqa: E402

from qmpigen.trace import layout  # noqa: E402
from qmpigen.trace.read import read_rank_file  # noqa: E402

pytestmark = pytest.mark.trace
BUFFER = 4096


def _calls(first: int, n: int) -> bytes:
    codes = np.full(n, w.CODE["MPI_Barrier"])
    enter = 1_000_000 + 1000 * np.arange(first, first + n)
    return w.calls(codes, enter, enter + 500)


def _entered(enter: int, kind: str = "COMPACT_CALL") -> bytes:
    """A call of MPI_Recv entered and not returned: a COMPACT_CALL with duration 0 (the
    tool's since version 7), or a PACKED_CALL with leave 0 (version 6's)."""
    record = layout.BY_NAME[kind]
    return record.layout.format.pack(record.kind, record.size, w.CODE["MPI_Recv"], 0, 0, enter, 0, -1, 0)


def _signal(ticks: int) -> bytes:
    return layout.SIGNAL.layout.format.pack(layout.SIGNAL.kind, layout.SIGNAL.size, 11, 1, 0, ticks, 5)


def _files(tmp_path: Path, buffer: bytes, flushed_calls: int = 5, **header) -> Path:
    """A rank file of a header, definitions and `flushed_calls` calls; its tail file with
    `buffer` (zero-filled to BUFFER) after them."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    main = w.header(0, 1) + w.preamble() + w.comm(0, [0]) + _calls(0, flushed_calls)
    path = tmp_path / "synth_node_0_0.L1.0000000000001234.qtr"
    path.write_bytes(main)
    fields = {"rank": 0, "thread": 0, "level": 1, "run_id": 0x1234, "flushed": len(main), "staged_from": len(main)}
    fields.update(header)
    tail = layout.TAIL_HEADER.format.pack(
        layout.TAIL_MAGIC,
        6,
        layout.TAIL_HEADER.size,
        layout.TAIL_BUFFER_OFFSET,
        BUFFER,
        *(fields[f.name] for f in layout.TAIL_HEADER.fields[5:11]),
        0,
    )
    tail = tail.ljust(layout.TAIL_BUFFER_OFFSET, b"\0") + buffer.ljust(BUFFER, b"\0")
    path.with_name(path.name + ".tail").write_bytes(tail)
    return path


def _names(f) -> list:
    return [f.functions[int(code)] for code in f.calls["func"]]


@pytest.mark.parametrize("kind", ["COMPACT_CALL", "PACKED_CALL"])
def test_the_buffer_continues_the_rank_file(tmp_path, kind):
    """5 calls written out, 3 in the buffer, then the call entered and the signal."""
    f = read_rank_file(_files(tmp_path, _calls(5, 3) + _entered(2_000_000, kind) + _signal(2_000_100)))
    assert _names(f) == ["MPI_Barrier"] * 8 and f.problem is None and f.end_calls is None
    assert struct.unpack_from("<H", f.ending.open_call, 4)[0] == w.CODE["MPI_Recv"]
    assert f.ending.signal == (11, 1, 0, 2_000_100, 5) and (2_000_100, 5) in f.timers


def test_a_buffer_written_out_already_is_not_read_again(tmp_path):
    """staged_from behind flushed: the rank file holds the buffer (killed between the two)."""
    path = _files(tmp_path, _calls(5, 3), staged_from=10)
    assert len(read_rank_file(path).calls) == 5


def test_a_stale_signal_and_a_tail_that_does_not_fit_are_left_out(tmp_path):
    """A SIGNAL record older than the call entered (the process went on after it); a tail
    saying more was written than the rank file holds; another rank file's tail."""
    f = read_rank_file(_files(tmp_path / "a", _entered(2_000_000) + _signal(1_999_000), flushed_calls=1))
    assert f.ending.open_call is not None and f.ending.signal is None
    f = read_rank_file(_files(tmp_path / "b", _calls(5, 3), flushed=1 << 20))
    assert len(f.calls) == 5 and "not used" in f.ending.note
    f = read_rank_file(_files(tmp_path / "c", _calls(5, 3), rank=3))
    assert len(f.calls) == 5 and "another rank file's" in f.ending.note


def test_a_tail_that_is_not_a_regular_file_is_not_opened(tmp_path):
    path = _files(tmp_path, _calls(5, 3))
    tail = path.with_name(path.name + ".tail")
    tail.unlink()
    os.mkfifo(tail)  # opening it for reading would block
    f = read_rank_file(path)
    assert len(f.calls) == 5 and "not a regular file" in f.ending.note


@pytest.mark.parametrize("kind", ["COMPACT_CALL", "PACKED_CALL"])
def test_a_call_record_too_short_for_its_mark_ends_the_buffer(kind):
    """A call record of 8 bytes (hostile: its head says less than its kind's head) is not
    read past: it is where the buffer's records end, not a call entered."""
    from qmpigen.trace import tail

    short = struct.pack("<HHI", layout.BY_NAME[kind].kind, 8, 0)
    records, ending = tail._buffer_records(_calls(0, 2) + short)
    assert records == _calls(0, 2) + short and ending.open_call is None
