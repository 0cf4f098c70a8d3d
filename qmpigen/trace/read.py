"""Reading rank files (docs/trace-format.md): validated, one file at a time, into numpy.

A file is read whole into private memory (snapshot.py: a file rewritten while the merge
reads it cannot change under the walks); its call records become one structured array,
with no Python work per call: runs of consecutive call records (the bulk of any
file) are found and validated with numpy, and only the other records (definitions,
completions, clocks, timers) are walked one by one. A file that ends inside a record,
or holds a record that makes no sense, gives the records before the fault and a
one-line reason; a file without a valid header gives nothing.
"""

from __future__ import annotations

import ctypes
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import layout
from .snapshot import TraceFileError, read_snapshot
from .tail import Ending, join, read_tail

Data = Union[bytes, bytearray]  # a rank file's contents, read into private memory (joined with its tail's)

# the layout's facts (layout.py), as the reader uses them
MAGIC = layout.MAGIC
VERSIONS = layout.READ_VERSIONS
HEADER = layout.HEADER.format
RECORD_HEAD = struct.Struct("<" + "".join(layout.C_TYPES[f.ctype][1] for f in layout.HEAD))
COMPLETION = layout.COMPLETION.layout.format
CLOCK = layout.CLOCK.layout.format
TIMER = layout.TIMER.layout.format
END = layout.END.layout.format
WINDOW = layout.WINDOW.layout.format
(
    R_FUNCTION,
    R_PROCESS,
    R_COMM,
    R_TYPE,
    R_FILE,
    R_CALL,
    R_COMPLETION,
    R_CLOCK,
    R_TIMER,
    R_PACKED_CALL,
    R_END,
    R_WINDOW,
) = (
    layout.BY_NAME[name].kind
    for name in (
        "FUNCTION",
        "PROCESS",
        "COMM",
        "TYPE",
        "FILE",
        "CALL",
        "COMPLETION",
        "CLOCK",
        "TIMER",
        "PACKED_CALL",
        "END",
        "WINDOW",
    )
)
CALL_HAS_REQUEST, CALL_FAILED, CALL_STATUS_BYTES = (value for _, value, _ in layout.FLAGS)
REQUEST_CANCELLED, REQUEST_FREED, REQUEST_STARTED = (value for _, value, _ in layout.REQUEST_FLAGS)
MAX_FUNCTION_CODE = 0xFFFF  # call records hold u16 codes
ALIGNMENT = layout.RECORD_ALIGNMENT
# the fixed part of each variable-size record (after kind and size), and where its tail starts
FIXED = {
    layout.BY_NAME[name].kind: layout.BY_NAME[name].layout.format
    for name in ("FUNCTION", "PROCESS", "COMM", "TYPE", "FILE")
}
# a rank file's name: program_host_rank_thread.L<level>.qtr, and from version 6 its run
# (the run id in hex, or p<pid> for a run without one) before .qtr
FILE_NAME = re.compile(
    r"^(?P<program>.+)_(?P<host>[^_]+)_(?P<rank>\d+)_(?P<thread>\d+)\.L(?P<level>\d+)(?:\.(?:[0-9a-f]{16}|p\d+))?\.qtr$"
)

CALL_DTYPE = layout.CALL.layout.dtype
PACKED_HEAD = layout.PACKED_CALL.size
CALL_DEFAULTS = {f.name: f.default for f in layout.PACKED_FIELDS if f.default}  # the rest 0
# a call record holding nothing (every field at its default): what a packed call fills in
_EMPTY_CALL = np.zeros(1, CALL_DTYPE)
_EMPTY_CALL["kind"], _EMPTY_CALL["size"] = R_CALL, CALL_DTYPE.itemsize
for _name, _value in CALL_DEFAULTS.items():
    _EMPTY_CALL[_name] = _value
EMPTY_CALL = _EMPTY_CALL.tobytes()
# each field a packed call may carry (bit i of `present`): its offset in a CALL, its size
PACKED_SLOTS = tuple((CALL_DTYPE.fields[f.name][1], layout.C_TYPES[f.ctype][2]) for f in layout.PACKED_FIELDS)
# one completed request of a Wait/Waitall/Test: the index of its call in the file's calls
COMPLETION_DTYPE = np.dtype(
    [("call", "<i8"), ("request", "<u8"), ("source", "<i4"), ("tag", "<i4"), ("bytes", "<i8"), ("flags", "<i4")]
)


@dataclass
class RankFile:
    """One thread's file of one rank: its header, definitions and calls (file order)."""

    path: Path
    rank: int
    thread: int
    level: int
    world_size: int
    version: int = layout.VERSION
    realtime_origin_ns: int = 0
    run_id: int = 0  # the run's identity
    pid: int = 0
    end_calls: Optional[int] = None  # the END record's count of call records (None: no END record)
    end_reason: int = 0  # the END record's reason (layout.END_REASONS)
    ending: Ending = Ending()  # from its tail file: the call it was in, the signal it died of
    program: str = ""
    host: str = ""
    functions: Dict[int, str] = field(default_factory=dict)  # code -> name
    kinds: Dict[int, str] = field(default_factory=dict)  # code -> kind (layout.KINDS)
    comms: Dict[int, Tuple[int, ...]] = field(default_factory=dict)  # id -> world ranks
    comm_parts: Dict[int, Dict[int, Tuple[int, ...]]] = field(default_factory=dict)  # id -> first -> members
    comm_listed: Dict[int, int] = field(default_factory=dict)  # id -> members in its parts so far
    types: Dict[int, Tuple[int, str]] = field(default_factory=dict)  # id -> (size, name or constructor)
    type_shapes: Dict[int, Tuple[str, int, int]] = field(default_factory=dict)  # id -> (constructor, lb, extent)
    windows: Dict[int, int] = field(default_factory=dict)  # id -> communicator id (-1: unknown)
    files: Dict[int, Tuple[str, int]] = field(default_factory=dict)  # id -> (name, initial size)
    clocks: Dict[int, Tuple[int, int]] = field(default_factory=dict)  # phase -> (local ns, offset ns)
    timers: List[Tuple[int, int]] = field(default_factory=list)  # (ticks, ns)
    calls: np.ndarray = field(default_factory=lambda: np.empty(0, CALL_DTYPE))
    completions: np.ndarray = field(default_factory=lambda: np.empty(0, COMPLETION_DTYPE))
    problem: Optional[str] = None  # why reading stopped early
    identity: Tuple[int, ...] = ()  # the file as read (device, inode, size, times): a later read must find it the same
    changed: Optional[str] = None  # it changed while it was read, and was read again

    def drop_events(self) -> None:
        """Keeps the definitions only (pass 1 of the merge)."""
        self.calls = np.empty(0, CALL_DTYPE)
        self.completions = np.empty(0, COMPLETION_DTYPE)


def read_header(data: Data) -> Tuple[int, int, int, int, int, int, int, int]:
    """version, rank, thread, level, world size, CLOCK_REALTIME ns at init, pid, run id;
    TraceFileError if the header is bad."""
    if len(data) < HEADER.size:
        raise TraceFileError(f"{len(data)} bytes, shorter than the {HEADER.size}-byte header")
    (magic, version, header_size, _align, rank, thread, level, world_size, pid, _, _origin, realtime, run_id) = (
        HEADER.unpack_from(data)
    )
    if magic != MAGIC:
        raise TraceFileError("not a qmpi trace file (bad magic)")
    if version not in VERSIONS:
        raise TraceFileError(
            f"format version {version}; this qmpigen reads version {', '.join(map(str, VERSIONS))} "
            "(merge older files with the qmpigen whose trace tool wrote them)"
        )
    if header_size != HEADER.size or not (0 <= rank < world_size) or thread < 0 or level < 0:
        raise TraceFileError("corrupt header")
    return version, rank, thread, level, world_size, realtime, pid, run_id


def read_rank_file(path: Path) -> RankFile:
    """The file's contents up to its first fault (with its tail file's, if it has one:
    tail.py); TraceFileError if its header is bad, if it is not a regular file, or if it
    kept changing while it was read."""
    tail, tail_note = read_tail(path)  # first: the rank file only grows
    snapshot, identity, changed = read_snapshot(path)
    data, ending = join(path, tail, snapshot)
    version, rank, thread, level, world_size, realtime, pid, run_id = read_header(data)
    rank_file = RankFile(path, rank, thread, level, world_size, version, realtime, run_id, pid)
    rank_file.ending = Ending(ending.open_call, ending.signal, tail_note or ending.note)
    rank_file.problem = _read_records(data, HEADER.size, rank_file)
    if ending.signal is not None:  # its ticks and ns: one more timer pair
        rank_file.timers.append(ending.signal[3:5])
    rank_file.identity, rank_file.changed = identity, changed  # after: a read again up to a bad call starts afresh
    return rank_file


def trace_files(directory: Path) -> List[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(".qtr"))


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


def _other_record(data: Data, pos: int, kind: int, size: int, out: RankFile) -> Optional[str]:
    """Reads a definition, clock or timer record into `out`; why it is corrupt, or None."""
    fixed = FIXED.get(kind)
    if fixed is not None:
        if RECORD_HEAD.size + fixed.size > size:
            return f"corrupt record at byte {pos} (kind {kind}, size {size})"
        values = fixed.unpack_from(data, pos + RECORD_HEAD.size)
        tail = pos + RECORD_HEAD.size + fixed.size  # where the variable part starts
    if kind == R_FUNCTION:
        code, function_kind = values
        if not 0 <= code <= MAX_FUNCTION_CODE or not 0 <= function_kind < len(layout.KINDS):
            return f"corrupt function record at byte {pos} (code {code}, kind {function_kind})"
        out.functions[code] = _string(data, tail, pos + size)
        out.kinds[code] = layout.KINDS[function_kind]
    elif kind == R_PROCESS:
        program, _, rest = data[tail : pos + size].partition(b"\0")
        out.program = program.decode(errors="replace")
        out.host = rest.split(b"\0", 1)[0].decode(errors="replace")
    elif kind == R_COMM:
        comm_id, comm_size, first, count = values
        if (
            comm_id < 0
            or comm_size < 0
            or first < 0
            or count < 0
            or first + count > comm_size
            or tail + 4 * count > pos + size
        ):
            return f"corrupt communicator record at byte {pos}"
        parts = out.comm_parts.setdefault(comm_id, {})
        listed = out.comm_listed.get(comm_id, 0) - len(parts.get(first, ())) + count
        parts[first] = struct.unpack_from(f"<{count}i", data, tail)
        out.comm_listed[comm_id] = listed
        if listed == comm_size:  # complete (its records follow each other): put together once, not per record
            ordered = sorted(parts.items())
            if [f for f, _ in ordered] == list(np.cumsum([0] + [len(m) for _, m in ordered[:-1]])):
                out.comms[comm_id] = tuple(r for _, m in ordered for r in m)
            del out.comm_parts[comm_id], out.comm_listed[comm_id]
    elif kind == R_TYPE:
        type_id, type_size, named, nints, naddrs, ntypes, combiner, _, lb, extent = values
        name = _string(data, tail, pos + size)
        constructor = layout.COMBINERS[combiner] if 0 <= combiner < len(layout.COMBINERS) else "unknown"
        out.types[type_id] = (
            type_size,
            name if named or name else f"{constructor.lower()}(ints={nints},addrs={naddrs},types={ntypes})",
        )
        out.type_shapes[type_id] = (constructor, lb, extent)
    elif kind == R_FILE:
        file_id, _, initial = values
        out.files[file_id] = (_string(data, tail, pos + size), initial)
    elif kind == R_CLOCK and size == CLOCK.size:
        _, _, phase, local, offset, _rtt = CLOCK.unpack_from(data, pos)
        out.clocks[phase] = (local, offset)
    elif kind == R_TIMER and size == TIMER.size:
        _, _, _, ticks, ns = TIMER.unpack_from(data, pos)
        out.timers.append((ticks, ns))
    elif kind == R_END and size == END.size:
        _, _, out.end_reason, out.end_calls = END.unpack_from(data, pos)
    elif kind == R_WINDOW and size == WINDOW.size:
        _, _, window_id, comm_id, _ = WINDOW.unpack_from(data, pos)
        if window_id < 0:
            return f"corrupt window record at byte {pos}"
        out.windows[window_id] = comm_id
    elif kind == R_PACKED_CALL:  # one that _unpack_call refused
        return f"corrupt call record at byte {pos} (a packed call whose fields do not match its {size} bytes)"
    else:
        return f"corrupt record at byte {pos} (kind {kind}, size {size})"
    return None


def _read_records(data: Data, pos: int, out: RankFile, end: Optional[int] = None) -> Optional[str]:
    """Reads records from `pos` to `end`; the reason it stopped early, or None."""
    from . import loops

    end = len(data) if end is None else end
    lib = loops.load()
    if lib is not None:
        calls, offsets, completions, problem = _scan_native(lib, data, pos, end, out)
    else:
        calls, offsets, completions, problem = _scan_python(data, pos, end, out)
    bad = (calls["leave"] < calls["enter"]) | ~np.isin(calls["func"], list(out.functions))
    if bad.any():  # read again up to the first bad call, so nothing after it counts
        at = int(offsets[int(np.argmax(bad))])
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
        _read_records(data, HEADER.size, fresh, at)
        fresh.problem = f"corrupt call record at byte {at}"
        fresh.ending = out.ending
        out.__dict__.update(fresh.__dict__)
        return fresh.problem
    out.calls = calls
    if len(completions):
        out.completions = completions
    return problem


RAW_COMPLETION = layout.COMPLETION.layout.dtype


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
    (ctypes.c_uint16 * 32)(*(at for at, _ in PACKED_SLOTS)),
    (ctypes.c_uint16 * 32)(*(size for _, size in PACKED_SLOTS)),
    EMPTY_CALL,  # a bytes object of this module's: alive as long as KINDS
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
        problem_here = _other_record(data, at, kind, size, out)
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
        row = _unpack_call(data, pos, size) if kind == R_PACKED_CALL else None
        if row is not None:
            runs.append((pos, 1, row))
            ncalls += 1
        elif kind == R_COMPLETION and size == COMPLETION.size and ncalls > 0:
            _, _, source, request, tag, flags, nbytes = COMPLETION.unpack_from(data, pos)
            completions.append((ncalls - 1, request, source, tag, nbytes, flags))
        else:
            problem = _other_record(data, pos, kind, size, out)
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


def _string(data: Data, start: int, stop: int) -> str:
    return data[start:stop].split(b"\0", 1)[0].decode(errors="replace")


def levels_in(paths: List[Path]) -> List[int]:
    found = set()
    for path in paths:
        match = FILE_NAME.match(path.name)
        if match:
            found.add(int(match["level"]))
    return sorted(found)


def iter_level(paths: List[Path], level: Optional[int]) -> Iterator[Path]:
    for path in paths:
        match = FILE_NAME.match(path.name)
        if level is None or (match and int(match["level"]) == level):
            yield path
