"""Reading rank files (docs/trace-format.md): one file at a time, validated, into numpy.
A file is read whole into private memory (snapshot.py: a file rewritten while the merge
reads it cannot change under the walks), with what its tail file holds after it
(tail.py), and walked (walk.py) into a RankFile (records.py). A file without a valid
header gives nothing. The names the rest of the merge reads rank files by are here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from .records import (  # noqa: F401 (the reader's names, for the merge's modules and tests)
    CALL_DEFAULTS,
    CALL_DTYPE,
    CALL_FAILED,
    CALL_HAS_REQUEST,
    CALL_STATUS_BYTES,
    COMPLETION,
    COMPLETION_DTYPE,
    END_STOPPED,
    HEADER,
    MAGIC,
    R_CALL,
    R_COMM,
    R_COMPLETION,
    R_FUNCTION,
    R_PACKED_CALL,
    R_TIMER,
    REQUEST_CANCELLED,
    REQUEST_FREED,
    REQUEST_STARTED,
    TIMER,
    VERSIONS,
    Data,
    RankFile,
)
from .snapshot import TraceFileError, read_snapshot
from .tail import Ending, join, read_tail
from .walk import read_records

# a rank file's name: program_host_rank_thread.L<level>.qtr, and from version 6 its run
# (the run id in hex, or p<pid> for a run without one) before .qtr
FILE_NAME = re.compile(
    r"^(?P<program>.+)_(?P<host>[^_]+)_(?P<rank>\d+)_(?P<thread>\d+)\.L(?P<level>\d+)(?:\.(?:[0-9a-f]{16}|p\d+))?\.qtr$"
)


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
    rank_file.problem = read_records(data, HEADER.size, rank_file)
    if ending.signal is not None:  # its ticks and ns: one more timer pair
        rank_file.timers.append(ending.signal[3:5])
    rank_file.identity, rank_file.changed = identity, changed  # after: a read again up to a bad call starts afresh
    return rank_file


def trace_files(directory: Path) -> List[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(".qtr"))


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
