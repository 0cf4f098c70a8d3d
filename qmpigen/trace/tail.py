"""A rank file's tail file (format versions 6 and 7, docs/trace-format.md): the records
a thread had not yet written to its rank file when its process died, and how its records
end.

The trace tool keeps each thread's buffer in NAME.qtr.tail, mapped shared, and removes
the file once the rank file is whole (MPI_Finalize). A tail file left beside a rank file
holds, after its header page, the records that follow the rank file's first `flushed`
bytes (when `staged_from` equals `flushed`; else the buffer was written out already),
up to a zero word; or up to the record of the call the thread was in (a COMPACT_CALL
with duration 0, in version 6 a PACKED_CALL with leave 0: entered, not returned), then
perhaps a SIGNAL record (the fatal signal the tool's handler saw). `join` gives the rank
file's bytes as if the buffer had been written out, without the call in progress and
the signal, which it returns apart: the reader's walks see only whole records. The tail
is read before the rank file, which only grows: the rank file's first `flushed` bytes
are then there whatever the thread did since."""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple, Union

from . import layout

HEAD = struct.Struct("<HH")
TAIL = layout.TAIL_HEADER.format
SIGNAL = layout.SIGNAL.layout.format
TAIL_VERSIONS = tuple(v for v in layout.READ_VERSIONS if v >= 6)  # the versions that have them
MAX_BUFFER = 1 << 30  # the tool's largest buffer (QMPI_TRACE_BUFFER)
WORD = struct.Struct("<Q")
# where a call record says it was entered and not returned (its field there is 0), by kind
OPEN_MARK = {
    layout.PACKED_CALL.kind: (layout.PACKED_CALL.layout.offset("leave"), WORD),
    layout.COMPACT_CALL.kind: (layout.COMPACT_CALL.layout.offset("duration"), struct.Struct("<I")),
}
Data = Union[bytes, bytearray]  # a rank file's bytes, as read.py has them


@dataclass(frozen=True)
class Ending:
    """What a tail file says about how a thread's records end."""

    open_call: Optional[bytes] = None  # the record of the call entered and not returned (OPEN_MARK 0)
    signal: Optional[Tuple[int, int, int, int, int]] = None  # signal, code, sender, ticks, ns (SIGNAL)
    note: Optional[str] = None  # why a tail file beside the rank file was not used


@dataclass(frozen=True)
class Tail:
    """A tail file as read: its header's fields and its buffer."""

    header: Tuple
    buffer: bytes


def tail_path(path: Path) -> Path:
    return path.with_name(path.name + layout.TAIL_SUFFIX)


def read_tail(path: Path) -> Tuple[Optional[Tail], Optional[str]]:
    """The tail file of rank file `path`, if there is one (None, and why not if there is
    one that cannot be used: not a regular file, a bad header, a size that does not match)."""
    tail = tail_path(path)
    try:
        fd = os.open(tail, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{tail.name}: cannot read: {exc.strerror}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, f"{tail.name}: not a regular file"
        head = os.pread(fd, TAIL.size, 0)
        if len(head) < TAIL.size:
            return None, f"{tail.name}: shorter than its header"
        header = TAIL.unpack(head)
        (magic, version, header_size, offset, size) = header[:5]
        if magic != layout.TAIL_MAGIC or version not in TAIL_VERSIONS or header_size != TAIL.size:
            return None, f"{tail.name}: not a tail file of format version {' or '.join(map(str, TAIL_VERSIONS))}"
        if offset != layout.TAIL_BUFFER_OFFSET or not 0 < size <= MAX_BUFFER or info.st_size != offset + size:
            return None, f"{tail.name}: its buffer is not where its header says"
        buffer = os.pread(fd, size, offset)
    except OSError as exc:
        return None, f"{tail.name}: cannot read: {exc.strerror}"
    finally:
        os.close(fd)
    return (Tail(header, buffer), None) if len(buffer) == size else (None, f"{tail.name}: cut short")


def join(path: Path, tail: Optional[Tail], data: Data) -> Tuple[Data, Ending]:
    """Rank file `path`'s bytes `data` with its tail file's records after its first
    `flushed` bytes; the call in progress and the signal apart."""
    if tail is None:
        return data, Ending()
    rank, thread, level, run_id, flushed, staged_from = tail.header[5:11]
    if flushed > len(data):
        return data, Ending(
            note=f"{tail_path(path).name}: not used (it says {flushed} bytes were written, the rank "
            f"file has {len(data)})"
        )
    if staged_from != flushed:  # the buffer was written out: the rank file holds it
        return data[:flushed], Ending()
    records, ending = _buffer_records(tail.buffer)
    joined = bytes(data[:flushed]) + records
    if len(joined) >= layout.HEADER.size:
        header = layout.HEADER.format.unpack_from(joined)
        if (header[4], header[5], header[6], header[12]) != (rank, thread, level, run_id):
            return data, Ending(note=f"{tail_path(path).name}: not used (it is another rank file's)")
    return joined, ending


def _buffer_records(buffer: bytes) -> Tuple[bytes, Ending]:
    """The whole records at the start of a tail's buffer, and how they end."""
    pos, end = 0, len(buffer)
    while pos + HEAD.size <= end:
        kind, size = HEAD.unpack_from(buffer, pos)
        if kind == 0 or size < 8 or size % layout.RECORD_ALIGNMENT or pos + size > end:
            break  # the end of what was written (a zero word), or a record being written
        mark = OPEN_MARK.get(kind)
        if mark is not None and size >= mark[0] + mark[1].size and mark[1].unpack_from(buffer, pos + mark[0])[0] == 0:
            signal = _signal(buffer, pos + size, end)
            if signal is not None and signal[3] < WORD.unpack_from(buffer, pos + 8)[0]:
                signal = None  # one written before this call began: the process went on after it
            return buffer[:pos], Ending(buffer[pos : pos + size], signal)
        if kind == layout.SIGNAL.kind:
            return buffer[:pos], Ending(None, _signal(buffer, pos, end))
        pos += size
    return buffer[:pos], Ending()


def _signal(buffer: bytes, pos: int, end: int) -> Optional[Tuple[int, int, int, int, int]]:
    """The SIGNAL record at `pos`, if one is there."""
    if pos + SIGNAL.size > end:
        return None
    kind, size, number, code, sender, ticks, ns = SIGNAL.unpack_from(buffer, pos)
    if kind != layout.SIGNAL.kind or size != SIGNAL.size or not 0 < number < 128:
        return None
    return number, code, sender, ticks, ns
