"""Reading rank files (docs/trace-format.md): validated, one file at a time.

A file is read whole (memory is bounded by the largest rank file, not their sum). A file
that ends inside a record, or holds a record that makes no sense, gives the records
before the fault and a one-line reason; a file without a valid header gives nothing.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

MAGIC = b"QMPITRC\0"
VERSION = 1
HEADER = struct.Struct("<8sHHIiiiiIIQQQ")
RECORD_HEAD = struct.Struct("<HH")
CALL = struct.Struct("<HHHBBQQiiiiiiqqqQ")
COMPLETION = struct.Struct("<HHiQiiq")
CLOCK = struct.Struct("<HHIQqQ")
R_FUNCTION, R_PROCESS, R_COMM, R_TYPE, R_FILE, R_CALL, R_COMPLETION, R_CLOCK = range(1, 9)
CALL_HAS_REQUEST, CALL_FAILED = 1, 2
FILE_NAME = re.compile(r"^(?P<program>.+)_(?P<host>[^_]+)_(?P<rank>\d+)_(?P<thread>\d+)\.L(?P<level>\d+)\.qtr$")


class TraceFileError(Exception):
    """A rank file that cannot be used at all; the message is one line."""


@dataclass
class Call:
    func: str
    depth: int
    flags: int
    enter: int
    leave: int
    comm: int
    peer: int
    tag: int
    root: int
    datatype: int
    file: int
    count: int
    bytes: int
    offset: int
    request: int
    completions: List[Tuple[int, int, int, int]] = field(default_factory=list)  # request, source, tag, bytes


@dataclass
class RankFile:
    """One thread's file of one rank: its header, definitions and calls (file order)."""

    path: Path
    rank: int
    thread: int
    level: int
    world_size: int
    program: str = ""
    host: str = ""
    comms: Dict[int, Tuple[int, ...]] = field(default_factory=dict)  # id -> world ranks
    types: Dict[int, Tuple[int, str]] = field(default_factory=dict)  # id -> (size, name or envelope)
    files: Dict[int, Tuple[str, int]] = field(default_factory=dict)  # id -> (name, initial size)
    clocks: Dict[int, Tuple[int, int]] = field(default_factory=dict)  # phase -> (local ns, offset ns)
    calls: List[Call] = field(default_factory=list)
    problem: Optional[str] = None  # why reading stopped early


def trace_files(directory: Path) -> List[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(".qtr"))


def read_rank_file(path: Path) -> RankFile:
    """The file's contents up to its first fault; TraceFileError if its header is bad."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFileError(f"cannot read: {exc.strerror}")
    if len(data) < HEADER.size:
        raise TraceFileError(f"{len(data)} bytes, shorter than the {HEADER.size}-byte header")
    magic, version, header_size, _align, rank, thread, level, world_size, *_ = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise TraceFileError("not a qmpi trace file (bad magic)")
    if version != VERSION:
        raise TraceFileError(f"format version {version}, this qmpigen reads version {VERSION}")
    if header_size != HEADER.size or not (0 <= rank < world_size):
        raise TraceFileError("corrupt header")
    rank_file = RankFile(path, rank, thread, level, world_size)
    rank_file.problem = _read_records(data, HEADER.size, rank_file)
    return rank_file


def _read_records(data: bytes, pos: int, out: RankFile) -> Optional[str]:
    functions: Dict[int, str] = {}
    last_call: Optional[Call] = None
    end = len(data)
    unpack_call, unpack_head = CALL.unpack_from, RECORD_HEAD.unpack_from
    while pos < end:
        if end - pos < 4:
            return f"truncated at byte {pos} (a record header cut short)"
        kind, size = unpack_head(data, pos)
        if size < 8 or size % 8:
            return f"corrupt record at byte {pos} (size {size})"
        if pos + size > end:
            return f"truncated at byte {pos} (a {size}-byte record, {end - pos} bytes left)"
        if kind == R_CALL and size == CALL.size:
            (_, _, func, depth, flags, enter, leave, comm, peer, tag, root, datatype, file_id, count, nbytes, offset,
             request) = unpack_call(data, pos)
            name = functions.get(func)
            if name is None or leave < enter:
                return f"corrupt call record at byte {pos}"
            last_call = Call(name, depth, flags, enter, leave, comm, peer, tag, root, datatype, file_id, count, nbytes,
                             offset, request)
            out.calls.append(last_call)
        elif kind == R_COMPLETION and size == COMPLETION.size and last_call is not None:
            _, _, source, request, tag, _, nbytes = COMPLETION.unpack_from(data, pos)
            last_call.completions.append((request, source, tag, nbytes))
        elif kind == R_FUNCTION:
            (code,) = struct.unpack_from("<i", data, pos + 4)
            functions[code] = _string(data, pos + 8, pos + size)
        elif kind == R_PROCESS:
            out.program, _, rest = data[pos + 8:pos + size].partition(b"\0")
            out.program = out.program.decode(errors="replace")
            out.host = rest.split(b"\0", 1)[0].decode(errors="replace")
        elif kind == R_COMM:
            comm_id, comm_size = struct.unpack_from("<ii", data, pos + 4)
            if comm_size < 0 or 12 + 4 * comm_size > size:
                return f"corrupt communicator record at byte {pos}"
            out.comms[comm_id] = struct.unpack_from(f"<{comm_size}i", data, pos + 12)
        elif kind == R_TYPE:
            type_id, type_size, named, nints, naddrs, ntypes = struct.unpack_from("<6i", data, pos + 4)
            name = _string(data, pos + 28, pos + size)
            out.types[type_id] = (type_size, name if named or name else f"derived(ints={nints},addrs={naddrs},types={ntypes})")
        elif kind == R_FILE:
            file_id, _, initial = struct.unpack_from("<iiq", data, pos + 4)
            out.files[file_id] = (_string(data, pos + 20, pos + size), initial)
        elif kind == R_CLOCK and size == CLOCK.size:
            _, _, phase, local, offset, _rtt = CLOCK.unpack_from(data, pos)
            out.clocks[phase] = (local, offset)
        else:
            return f"corrupt record at byte {pos} (kind {kind}, size {size})"
        pos += size
    return None


def _string(data: bytes, start: int, stop: int) -> str:
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
