"""A rank file as the reader sees it (docs/trace-format.md): the layout's facts as the walks
use them (record kinds, flags, the CALL dtype a packed call unpacks into), RankFile (one
thread's file: header, definitions, calls, how it ended), and the reading of a record
that is not a call or a completion: a definition, clock, timer, END or window."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from . import layout
from .tail import Ending

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
    R_COMPACT_CALL,
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
        "COMPACT_CALL",
    )
)
CALL_HAS_REQUEST, CALL_FAILED, CALL_STATUS_BYTES = (value for _, value, _ in layout.FLAGS)
REQUEST_CANCELLED, REQUEST_FREED, REQUEST_STARTED = (value for _, value, _ in layout.REQUEST_FLAGS)
END_FINALIZED, END_STOPPED = (value for _, value, _ in layout.END_REASONS)
MAX_FUNCTION_CODE = 0xFFFF  # call records hold u16 codes
ALIGNMENT = layout.RECORD_ALIGNMENT
# the fixed part of each variable-size record (after kind and size), and where its tail starts
FIXED = {
    layout.BY_NAME[name].kind: layout.BY_NAME[name].layout.format
    for name in ("FUNCTION", "PROCESS", "COMM", "TYPE", "FILE")
}
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
# a COMPACT_CALL's (version 7): PACKED_CALL's, then comm and leave in full; its head
COMPACT_SLOTS = tuple((CALL_DTYPE.fields[f.name][1], layout.C_TYPES[f.ctype][2]) for f in layout.COMPACT_FIELDS)
COMPACT_HEAD = layout.COMPACT_CALL.layout.format  # kind, size, func, depth, flags, enter, duration, comm, present
COMPACT_NARROW, COMPACT_RECV_IS_BYTES = (value for _, value, _ in layout.COMPACT_FLAGS)
# the fields whose narrow 4 bytes are unsigned (zero-extended): the request handle
ZERO_EXTENDED = tuple(f.ctype.startswith("u") for f in layout.COMPACT_FIELDS)
# one completed request of a Wait/Waitall/Test: the index of its call in the file's calls
COMPLETION_DTYPE = np.dtype(
    [("call", "<i8"), ("request", "<u8"), ("source", "<i4"), ("tag", "<i4"), ("bytes", "<i8"), ("flags", "<i4")]
)
RAW_COMPLETION = layout.COMPLETION.layout.dtype


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
    comm_parts: Dict[int, Dict[int, bytes]] = field(default_factory=dict)  # id -> first -> members (int32s)
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


def codes_in(func: np.ndarray, codes: Iterable[int]) -> np.ndarray:
    """Per call (its u16 function code), whether the code is one of `codes`: a table
    lookup (np.isin's setup costs more than the lookup on a file of few calls, and a
    merge of 8,192 files asks 30,000 times)."""
    return np.take(code_table(codes), func, mode="clip")  # a u16 code is always in the table: clip skips the check


def code_table(codes: Iterable[int]) -> np.ndarray:
    """Per u16 function code, whether it is one of `codes`."""
    table = np.zeros(MAX_FUNCTION_CODE + 1, bool)
    table[np.fromiter(codes, np.int64)] = True
    return table


def other_record(data: Data, pos: int, kind: int, size: int, out: RankFile) -> Optional[str]:
    """Reads a definition, clock, timer, END or window record into `out`; why it is
    corrupt, or None."""
    fixed = FIXED.get(kind)
    if fixed is not None:
        if RECORD_HEAD.size + fixed.size > size:
            return f"corrupt record at byte {pos} (kind {kind}, size {size})"
        values = fixed.unpack_from(data, pos + RECORD_HEAD.size)
        tail = (pos + RECORD_HEAD.size + fixed.size, pos + size)  # where the variable part is
        return _definition(data, pos, kind, values, tail, out)
    if kind in (R_PACKED_CALL, R_COMPACT_CALL):  # one that the walk's unpacking refused
        return f"corrupt call record at byte {pos} (a packed call whose fields do not match its {size} bytes)"
    return _fixed_size(data, pos, kind, size, out)


def _definition(data: Data, pos: int, kind: int, values: tuple, tail: Tuple[int, int], out: RankFile) -> Optional[str]:
    """A variable-size record: its fixed part's `values`, its tail's bytes at `tail`."""
    if kind == R_FUNCTION:
        code, function_kind = values
        if not 0 <= code <= MAX_FUNCTION_CODE or not 0 <= function_kind < len(layout.KINDS):
            return f"corrupt function record at byte {pos} (code {code}, kind {function_kind})"
        out.functions[code] = _string(data, *tail)
        out.kinds[code] = layout.KINDS[function_kind]
    elif kind == R_PROCESS:
        program, _, rest = data[tail[0] : tail[1]].partition(b"\0")
        out.program = program.decode(errors="replace")
        out.host = rest.split(b"\0", 1)[0].decode(errors="replace")
    elif kind == R_COMM:
        return _comm(data, pos, values, tail, out)
    elif kind == R_TYPE:
        _type(_string(data, *tail), values, out)
    else:  # R_FILE
        file_id, _, initial = values
        out.files[file_id] = (_string(data, *tail), initial)
    return None


def _comm(data: Data, pos: int, values: tuple, tail: Tuple[int, int], out: RankFile) -> Optional[str]:
    """Some members of a communicator; whole once its records have listed them all."""
    comm_id, comm_size, first, count = values
    if min(comm_id, comm_size, first, count) < 0 or first + count > comm_size or tail[0] + 4 * count > tail[1]:
        return f"corrupt communicator record at byte {pos}"
    parts = out.comm_parts.setdefault(comm_id, {})
    listed = out.comm_listed.get(comm_id, 0) - len(parts.get(first, b"")) // 4 + count
    parts[first] = bytes(data[tail[0] : tail[0] + 4 * count])  # the members as they are in the file
    out.comm_listed[comm_id] = listed
    if listed == comm_size:  # complete (its records follow each other): put together once, not per record
        ordered = sorted(parts.items())
        if [f for f, _ in ordered] == list(np.cumsum([0] + [len(m) // 4 for _, m in ordered[:-1]])):
            raw = b"".join(m for _, m in ordered)
            out.comms[comm_id] = _members(raw) if len(raw) <= SHARED_LIST_BYTES else Members(_ints(raw))
        del out.comm_parts[comm_id], out.comm_listed[comm_id]
    return None


class Members(tuple):
    """A communicator's world ranks, in local rank order: a tuple that computes its hash
    once. Every rank file lists MPI_COMM_WORLD's members, and the merge keys its tables
    by member lists: at 8,192 ranks, hashing the 8,192 members again for each file and
    table was a tenth of the merge."""

    def __hash__(self) -> int:
        cached = self.__dict__.get("hash")
        if cached is None:
            cached = self.__dict__["hash"] = tuple.__hash__(self)
        return cached


# Lists of up to 65,536 members are shared through the cache below (the last 16, cleared
# by forget_member_lists after each merge): at most 16 x 2.6 MB held, never a large list
# of a crafted file past its own.
SHARED_LIST_BYTES = 4 * 65536


@lru_cache(maxsize=16)
def _members(raw: bytes) -> Members:
    """The member list of `raw` (little-endian int32s), one object for the files that
    list the same members (each would make 8,192 ints anew)."""
    return Members(_ints(raw))


def _ints(raw: bytes) -> list:
    return np.frombuffer(raw, "<i4").tolist()


def forget_member_lists() -> None:
    """The shared member lists let go (the end of a merge: a process may run many)."""
    _members.cache_clear()


def _type(name: str, values: tuple, out: RankFile) -> None:
    type_id, type_size, named, nints, naddrs, ntypes, combiner, _, lb, extent = values
    constructor = layout.COMBINERS[combiner] if 0 <= combiner < len(layout.COMBINERS) else "unknown"
    out.types[type_id] = (
        type_size,
        name if named or name else f"{constructor.lower()}(ints={nints},addrs={naddrs},types={ntypes})",
    )
    out.type_shapes[type_id] = (constructor, lb, extent)


def _fixed_size(data: Data, pos: int, kind: int, size: int, out: RankFile) -> Optional[str]:
    """A clock, timer, END or window record (of its own size); any other is corrupt."""
    if kind == R_CLOCK and size == CLOCK.size:
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
    else:
        return f"corrupt record at byte {pos} (kind {kind}, size {size})"
    return None


def _string(data: Data, start: int, stop: int) -> str:
    return data[start:stop].split(b"\0", 1)[0].decode(errors="replace")
