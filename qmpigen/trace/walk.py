"""The walks over a rank file's records (read.py reads the file): its call records become
one structured array, with no Python work per call: _loops.c's walk sorts the records
out (calls and completions copied, packed calls unpacked); without it, runs of
consecutive call records are found and validated with numpy. Only the other records
(definitions, clocks, timers) are read one by one (records.other_record). A file that
ends inside a record, or holds a record that makes no sense, gives the records before
the fault and a one-line reason."""

from __future__ import annotations

import ctypes
from typing import List, Optional, Tuple

import numpy as np

from . import layout, records
from .records import (
    ALIGNMENT,
    CALL_DTYPE,
    COMPACT_HEAD,
    COMPACT_NARROW,
    COMPACT_RECV_IS_BYTES,
    COMPACT_SLOTS,
    COMPLETION,
    COMPLETION_DTYPE,
    EMPTY_CALL,
    HEADER,
    PACKED_HEAD,
    PACKED_SLOTS,
    R_CALL,
    R_COMPACT_CALL,
    R_COMPLETION,
    R_PACKED_CALL,
    RAW_COMPLETION,
    RECORD_HEAD,
    ZERO_EXTENDED,
    Data,
    RankFile,
)


def _call_run(data: Data, pos: int, end: int) -> int:
    """How many whole CALL records follow each other from `pos` (at least 1)."""
    size = CALL_DTYPE.itemsize
    head = R_CALL | size << 16  # kind and size read as one little-endian u32
    limit = (end - pos) // size
    found, step = 0, 64
    while found < limit:
        take = min(step, limit - found)
        heads = np.ndarray((take,), "<u4", data, pos + found * size, (size,))
        other = np.flatnonzero(heads != head)
        if other.size:
            return found + int(other[0])
        found += take
        step *= 4
    return found


def _walk_problem(data: Data, pos: int, end: int) -> str:
    """Why the record at `pos` cannot be walked (its header, or it runs past the end)."""
    if end - pos < 4:
        return f"truncated at byte {pos} (a record header cut short)"
    kind, size = RECORD_HEAD.unpack_from(data, pos)
    if size < ALIGNMENT or size % ALIGNMENT:
        return f"corrupt record at byte {pos} (size {size})"
    return f"truncated at byte {pos} (a {size}-byte record, {end - pos} bytes left)"


def read_records(data: Data, pos: int, out: RankFile, end: Optional[int] = None) -> Optional[str]:
    """Reads records from `pos` to `end`; the reason it stopped early, or None."""
    from . import loops

    end = len(data) if end is None else end
    lib = loops.load()
    if lib is not None:
        calls, offsets, completions, problem = _scan_native(lib, data, pos, end, out)
    else:
        calls, offsets, completions, problem = _scan_python(data, pos, end, out)
    first_bad = _first_bad_call(lib, calls, out.functions)
    if first_bad < len(calls):  # read again up to the first bad call, so nothing after it counts
        at = int(offsets[first_bad])
        fresh = RankFile(
            out.path,
            out.rank,
            out.thread,
            out.level,
            out.world_size,
            out.version,
            out.realtime_origin_ns,
            out.run_id,
            out.pid,
        )
        read_records(data, HEADER.size, fresh, at)
        fresh.problem = f"corrupt call record at byte {at}"
        fresh.ending = out.ending
        out.__dict__.update(fresh.__dict__)
        return fresh.problem
    out.calls = calls
    if len(completions):
        out.completions = completions
    return problem


def _first_bad_call(lib, calls: np.ndarray, functions) -> int:
    """The index of the first call that left before it entered or whose function code the
    file does not name; len(calls) if none."""
    if lib is None or not len(calls) or not calls.flags.c_contiguous or calls.dtype != CALL_DTYPE:
        bad = (calls["leave"] < calls["enter"]) | ~records.codes_in(calls["func"], functions)
        return int(np.argmax(bad)) if bad.any() else len(calls)
    valid = records.code_table(functions)
    first_bad = lib.qmpi_first_bad_call
    first_bad.restype = ctypes.c_int64
    return first_bad(
        ctypes.c_void_p(calls.ctypes.data),
        ctypes.c_int64(len(calls)),
        ctypes.c_int64(CALL_DTYPE.itemsize),
        ctypes.c_void_p(valid.ctypes.data),
        ctypes.c_void_p(_HEAD_AT.ctypes.data),
    )


_HEAD_AT = np.array([CALL_DTYPE.fields[name][1] for name in ("func", "enter", "leave")], np.int64)


_FIELD_NAMES = [f.name for f in layout.COMPACT_FIELDS]
# a COMPACT_CALL's bits: comm and leave in full (its last two fields); bytes and recv_bytes
_COMM_BIT, _LEAVE_BIT = len(COMPACT_SLOTS) - 2, len(COMPACT_SLOTS) - 1
_BYTES_BIT, _RECV_BYTES_BIT = _FIELD_NAMES.index("bytes"), _FIELD_NAMES.index("recv_bytes")
assert COMPACT_SLOTS[: len(PACKED_SLOTS)] == PACKED_SLOTS  # _loops.c's field tables serve both


class _Kinds(ctypes.Structure):
    """_loops.c's struct kinds: what its walk sorts out, from the layout."""

    _fields_ = [
        ("call", ctypes.c_uint16),
        ("call_size", ctypes.c_uint16),
        ("packed", ctypes.c_uint16),
        ("packed_size", ctypes.c_uint16),
        ("completion", ctypes.c_uint16),
        ("completion_size", ctypes.c_uint16),
        ("alignment", ctypes.c_uint16),
        ("packed_fields", ctypes.c_uint16),
        ("field_at", ctypes.c_uint16 * 32),
        ("field_size", ctypes.c_uint16 * 32),
        ("defaults", ctypes.c_char_p),
        ("compact", ctypes.c_uint16),
        ("compact_size", ctypes.c_uint16),
        ("compact_fields", ctypes.c_uint16),
        ("duration_at", ctypes.c_uint16),
        ("comm_at", ctypes.c_uint16),
        ("present_at", ctypes.c_uint16),
        ("bytes_field", ctypes.c_uint16),
        ("recv_bytes_field", ctypes.c_uint16),
        ("zero_extended", ctypes.c_uint32),
        ("narrow", ctypes.c_uint8),
        ("recv_is_bytes", ctypes.c_uint8),
        ("comm_wide", ctypes.c_int16),
        ("duration_wide", ctypes.c_uint32),
    ]


KINDS = _Kinds(
    R_CALL,
    CALL_DTYPE.itemsize,
    R_PACKED_CALL,
    PACKED_HEAD,
    R_COMPLETION,
    RAW_COMPLETION.itemsize,
    ALIGNMENT,
    len(PACKED_SLOTS),
    (ctypes.c_uint16 * 32)(*(at for at, _ in COMPACT_SLOTS)),  # PACKED_SLOTS, then comm and leave
    (ctypes.c_uint16 * 32)(*(size for _, size in COMPACT_SLOTS)),
    EMPTY_CALL,  # a bytes object of this module's: alive as long as KINDS
    R_COMPACT_CALL,
    COMPACT_HEAD.size,
    len(COMPACT_SLOTS),
    *(layout.COMPACT_CALL.layout.offset(name) for name in ("duration", "comm", "present")),
    _BYTES_BIT,
    _RECV_BYTES_BIT,
    sum(1 << i for i, unsigned in enumerate(ZERO_EXTENDED) if unsigned),
    COMPACT_NARROW,
    COMPACT_RECV_IS_BYTES,
    layout.COMPACT_COMM_WIDE,
    layout.COMPACT_DURATION_WIDE,
)


class _Scan(ctypes.Structure):
    _fields_ = [
        ("calls", ctypes.c_void_p),
        ("call_offset", ctypes.c_void_p),
        ("completions", ctypes.c_void_p),
        ("completion_at", ctypes.c_void_p),
        ("other_at", ctypes.c_void_p),
        ("counts", ctypes.c_int64 * 4),
        ("capacity", ctypes.c_int64 * 3),
    ]


def _scan_native(lib, data: Data, pos: int, end: int, out: RankFile):
    """The records sorted out by _loops.c's walk (one count, one copy; packed calls
    unpacked); the few others (definitions, clocks, timers) read here. Calls and
    completions after a corrupt record do not count."""
    scan_records = lib.qmpi_scan_records
    scan_records.restype = ctypes.c_int64
    buffer = ctypes.c_void_p(np.frombuffer(data, np.uint8).ctypes.data if len(data) else None)
    scan = _Scan()
    kinds = ctypes.byref(KINDS)
    scan_records(buffer, ctypes.c_int64(pos), ctypes.c_int64(end), kinds, ctypes.byref(scan))
    n_calls, _, n_completions, n_others = scan.counts
    calls = np.empty(n_calls, CALL_DTYPE)
    offsets = np.empty(n_calls, np.int64)
    raw_completions = np.empty(n_completions, RAW_COMPLETION)
    completion_at = np.empty((n_completions, 2), np.int64)
    other_at = np.empty((n_others, 2), np.int64)
    for name, array in (
        ("calls", calls),
        ("call_offset", offsets),
        ("completions", raw_completions),
        ("completion_at", completion_at),
        ("other_at", other_at),
    ):
        setattr(scan, name, array.ctypes.data if array.size else ctypes.addressof(scan))  # not NULL: copy
    scan.capacity[:] = (n_calls, n_completions, n_others)
    stop = scan_records(buffer, ctypes.c_int64(pos), ctypes.c_int64(end), kinds, ctypes.byref(scan))
    # the same bytes (a snapshot) walked again give the same records; the capacities guard the buffers
    n_calls, _, n_completions, n_others = scan.counts
    raw_completions, completion_at, other_at = (
        raw_completions[:n_completions],
        completion_at[:n_completions],
        other_at[:n_others],
    )
    problem, cut, cut_at = (_walk_problem(data, stop, end), n_calls, stop) if stop < end else (None, n_calls, end)
    for at, calls_before in other_at.tolist():
        kind, size = RECORD_HEAD.unpack_from(data, at)
        problem_here = records.other_record(data, at, kind, size, out)
        if problem_here is not None:
            problem, cut, cut_at = problem_here, calls_before, at
            break
    keep = completion_at[:, 0] < cut_at
    completions = np.empty(int(keep.sum()), COMPLETION_DTYPE)
    completions["call"] = completion_at[keep, 1]
    for name in ("request", "source", "tag", "bytes", "flags"):
        completions[name] = raw_completions[name][keep]
    return calls[:cut], offsets[:cut], completions, problem


def _unpack_call(data: Data, pos: int, size: int) -> Optional[bytes]:
    """A PACKED_CALL as a whole CALL record (_loops.c's unpack_call); None if its bits
    name no field or its fields do not fill its size."""
    present = int.from_bytes(data[pos + PACKED_HEAD - 4 : pos + PACKED_HEAD], "little")
    if size < PACKED_HEAD or present >> len(PACKED_SLOTS):
        return None
    row = bytearray(EMPTY_CALL)
    row[4 : PACKED_HEAD - 4] = data[pos + 4 : pos + PACKED_HEAD - 4]  # the head, after kind and size
    at = pos + PACKED_HEAD
    for bit, (offset, width) in enumerate(PACKED_SLOTS):
        if present >> bit & 1:
            if at + width > pos + size:
                return None
            row[offset : offset + width] = data[at : at + width]
            at += width
    return bytes(row) if -(-(at - pos) // ALIGNMENT) * ALIGNMENT == size else None


def _unpack_compact(data: Data, pos: int, size: int) -> Optional[bytes]:
    """A COMPACT_CALL as a whole CALL record (_loops.c's unpack_compact); None if its head
    and bits disagree or its fields do not fill its size."""
    if size < COMPACT_HEAD.size:
        return None
    _, _, _, _, flags, enter, duration, comm, present = COMPACT_HEAD.unpack_from(data, pos)
    if (duration == layout.COMPACT_DURATION_WIDE) != bool(present >> _LEAVE_BIT & 1) or (
        comm == layout.COMPACT_COMM_WIDE
    ) != bool(present >> _COMM_BIT & 1):
        return None
    call = np.frombuffer(EMPTY_CALL, CALL_DTYPE).copy()
    call["func"], call["depth"], call["enter"], call["comm"] = (
        int.from_bytes(data[pos + 4 : pos + 6], "little"),
        data[pos + 6],
        enter,
        comm,
    )
    call["flags"] = flags & ~(COMPACT_NARROW | COMPACT_RECV_IS_BYTES)
    # u64 arithmetic, as _loops.c's (a hostile enter near 2**64 wraps; the walk's check of
    # leave against enter then finds the call bad)
    call["leave"] = (enter + duration) & 0xFFFF_FFFF_FFFF_FFFF if 0 < duration < layout.COMPACT_DURATION_WIDE else 0
    row = bytearray(call.tobytes())
    at = pos + COMPACT_HEAD.size
    for bit, (offset, width) in enumerate(COMPACT_SLOTS):
        if present >> bit & 1:
            stored = 4 if flags & COMPACT_NARROW and bit < len(PACKED_SLOTS) and width == 8 else width
            if at + stored > pos + size:
                return None
            value = data[at : at + stored]
            if stored < width:  # a narrow 64-bit field: sign- or zero-extended
                signed = not ZERO_EXTENDED[bit]
                value = int.from_bytes(value, "little", signed=signed).to_bytes(8, "little", signed=signed)
            row[offset : offset + width] = value
            at += stored
    if flags & COMPACT_RECV_IS_BYTES:
        (bytes_at, _), (recv_at, _) = COMPACT_SLOTS[_BYTES_BIT], COMPACT_SLOTS[_RECV_BYTES_BIT]
        row[recv_at : recv_at + 8] = row[bytes_at : bytes_at + 8]
    return bytes(row) if -(-(at - pos) // ALIGNMENT) * ALIGNMENT == size else None


def _scan_python(data: Data, pos: int, end: int, out: RankFile):
    """The same without a C compiler: runs of call records found with numpy, the other
    records one by one."""
    runs: List[Tuple[int, int, Optional[bytes]]] = []  # start, count; a packed call: its record unpacked
    ncalls = 0
    completions: List[Tuple[int, int, int, int, int, int]] = []
    unpack_head = RECORD_HEAD.unpack_from
    problem = None
    while pos < end:
        if end - pos < 4:
            problem = _walk_problem(data, pos, end)
            break
        kind, size = unpack_head(data, pos)
        if size < ALIGNMENT or size % ALIGNMENT or pos + size > end:
            problem = _walk_problem(data, pos, end)
            break
        if kind == R_CALL and size == CALL_DTYPE.itemsize:
            n = _call_run(data, pos, end)
            runs.append((pos, n, None))
            ncalls += n
            pos += n * size
            continue
        unpack = _unpack_call if kind == R_PACKED_CALL else _unpack_compact if kind == R_COMPACT_CALL else None
        row = unpack(data, pos, size) if unpack is not None else None
        if row is not None:
            runs.append((pos, 1, row))
            ncalls += 1
        elif kind == R_COMPLETION and size == COMPLETION.size and ncalls > 0:
            _, _, source, request, tag, flags, nbytes = COMPLETION.unpack_from(data, pos)
            completions.append((ncalls - 1, request, source, tag, nbytes, flags))
        else:
            problem = records.other_record(data, pos, kind, size, out)
            if problem is not None:
                break
        pos += size
    # the call records, copied run by run into one array
    calls = np.empty(ncalls, CALL_DTYPE)
    raw = calls.view(np.uint8)  # copied as bytes: a structured copy goes field by field
    offsets = np.empty(ncalls, np.int64)  # where each call record starts in the file
    done, size = 0, CALL_DTYPE.itemsize
    for start, n, row in runs:
        if row is None:
            raw[done * size : (done + n) * size] = np.frombuffer(data, np.uint8, n * size, start)
            offsets[done : done + n] = np.arange(start, start + n * size, size)
        else:
            raw[done * size : (done + 1) * size] = np.frombuffer(row, np.uint8)
            offsets[done] = start
        done += n
    return calls, offsets, np.array(completions, COMPLETION_DTYPE), problem
