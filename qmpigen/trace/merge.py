"""`qmpigen trace DIR -o OUT`: the per-rank files of one tool instance merged into
OUT/traces.otf2 (+ OUT/traces/, OUT/traces.def), OUT/trace.json, OUT/timeline.png and
OUT/summary.txt. Two streaming passes over the files, one file in memory at a time:
pass 1 keeps each file's definitions, clocks, timers, requests and the span of its
calls; pass 2 reads the calls again and writes them out. A file's calls are numpy
arrays: times converted and aligned, requests and messages found, and OTF2, JSON and the
timeline fed per file, with no Python work per call. Message endpoints wait on disk
(match.EndpointSpill) and are paired one sender at a time; the timeline keeps pixel
columns, not calls: what stays in memory besides one file is its definitions and
requests (Isend/Irecv calls, about 50 bytes each). Faulty files: one line each, the rest
merged; written all-or-nothing into a staging directory moved into place."""

from __future__ import annotations

import ctypes
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

# the rest of the trace extra, imported here so that a missing one fails at once (the CLI
# turns the ImportError into one line)
import matplotlib  # noqa: F401
import numpy as np
import otf2  # noqa: F401

from .clocks import aligned_ns, axis_span, clock_alignment, ticks_to_ns
from .match import (
    COLLECTIVES,
    ENDPOINT_DTYPE,
    PERSISTENT_INITS,
    REQUEST_STARTS,
    SENDS,
    EndpointSpill,
    match,
    match_requests,
)
from .read import (
    CALL_HAS_REQUEST,
    REQUEST_CANCELLED,
    REQUEST_FREED,
    REQUEST_STARTED,
    RankFile,
    TraceFileError,
    iter_level,
    levels_in,
    read_rank_file,
    trace_files,
)

OUTPUTS = frozenset({"otf2", "json", "timeline"})
RECORD = np.dtype((np.void, 80))  # a call record as 80 opaque bytes
IO_CALLS = {"MPI_File_write_at": 1, "MPI_File_read_at": 0}  # name -> OTF2 I/O operation mode
M_MMAP_THRESHOLD = -3  # glibc's <malloc.h>


class MergeError(Exception):
    """Nothing could be merged; the message is one line, `notes` say which files failed."""

    def __init__(self, message: str, notes: Optional[List[str]] = None):
        super().__init__(message)
        self.notes = notes or []


@dataclass
class MergeReport:
    notes: List[str] = field(default_factory=list)  # one line per skipped or cut file
    files: int = 0
    events: int = 0  # calls
    messages: int = 0
    otf2_events: int = 0
    json_events: int = 0
    otf2_mode: str = ""
    summary: str = ""
    _line_of: Dict[str, int] = field(default_factory=dict)

    def note(self, name: str, text: str) -> None:
        """One line per file: a second note on a file joins its line."""
        if name in self._line_of:
            self.notes[self._line_of[name]] += f"; {text}"
        else:
            self._line_of[name] = len(self.notes)
            self.notes.append(f"{name}: {text}")


def _nothing() -> np.ndarray:
    return np.empty(0, np.int64)


@dataclass
class FileInfo:
    """What pass 1 keeps of a rank file: definitions and its requests."""

    head: RankFile
    calls: int = 0
    first_enter: int = 0  # ticks
    # the timeline's axis (ticks): the last leave, the end of MPI_Init and the start of
    # MPI_Finalize (None if the file has none)
    last_leave: int = 0
    init_leave: Optional[int] = None
    finalize_enter: Optional[int] = None
    # the file's request starts: its Isend/Irecv calls (call index) then the persistent
    # requests its Start/Startall calls started (index in its completion records), with
    # handle, leave ticks, whether a send, the local communicator, world peer, tag, bytes
    starts: np.ndarray = field(default_factory=_nothing)
    started: np.ndarray = field(default_factory=_nothing)  # indices of the STARTED completion records
    start: np.ndarray = field(default_factory=_nothing)  # START_DTYPE, starts then started
    inits: np.ndarray = field(default_factory=_nothing)  # START_DTYPE: the file's Send_init/Recv_init calls
    done: np.ndarray = field(default_factory=_nothing)  # indices of the other completion records
    done_handle: np.ndarray = field(default_factory=_nothing)
    done_time: np.ndarray = field(default_factory=_nothing)
    # filled after pass 1: where the file's starts begin in its rank's RankRequests, and
    # per completion the index of its start there (-1: none seen)
    start_offset: int = 0
    done_start: np.ndarray = field(default_factory=_nothing)


START_DTYPE = np.dtype(
    [
        ("handle", "<u8"),
        ("time", "<i8"),
        ("send", "?"),
        ("comm", "<i4"),
        ("peer", "<i4"),
        ("tag", "<i4"),
        ("bytes", "<i8"),
    ]
)


@dataclass
class RankRequests:
    """A rank's request starts over all its files (file order)."""

    request_id: np.ndarray  # numbered across the merged trace
    is_isend: np.ndarray
    comm: np.ndarray  # merged communicator id
    peer: np.ndarray  # world rank (persistent starts: from their Send_init/Recv_init)
    tag: np.ndarray
    bytes: np.ndarray
    valid: np.ndarray  # False: a persistent start whose init was not seen


def _codes(rank_file: RankFile, names: set) -> np.ndarray:
    return np.array([code for code, name in rank_file.functions.items() if name in names], np.uint16)


def _pass1(path: Path, report: MergeReport, members: Dict[Tuple[int, ...], Tuple[int, ...]]) -> Optional[FileInfo]:
    """`members`: the communicators' member tuples seen so far. Every rank file lists
    MPI_COMM_WORLD's members: one shared tuple per distinct list keeps pass 1's memory
    from growing with files x world size (2.7 GB at 8,192 ranks)."""
    try:
        rank_file = read_rank_file(path)
    except TraceFileError as exc:
        report.note(path.name, f"skipped: {exc}")
        return None
    rank_file.comms = {comm_id: members.setdefault(ranks, ranks) for comm_id, ranks in rank_file.comms.items()}
    calls = rank_file.calls
    if rank_file.problem:
        report.note(path.name, f"{rank_file.problem}; merged the {len(calls)} calls before it")
    info = FileInfo(
        rank_file,
        len(calls),
        int(calls["enter"].min()) if len(calls) else 0,
        int(calls["leave"].max()) if len(calls) else 0,
    )
    init = np.isin(calls["func"], _codes(rank_file, {"MPI_Init", "MPI_Init_thread"}))
    finalize = np.isin(calls["func"], _codes(rank_file, {"MPI_Finalize"}))
    info.init_leave = int(calls["leave"][init].max()) if init.any() else None
    info.finalize_enter = int(calls["enter"][finalize].min()) if finalize.any() else None
    has_request = calls["flags"] & CALL_HAS_REQUEST != 0
    starts = np.flatnonzero(np.isin(calls["func"], _codes(rank_file, REQUEST_STARTS)) & has_request)
    done = rank_file.completions
    started = np.flatnonzero(done["flags"] & REQUEST_STARTED != 0)
    info.starts, info.started = starts, started
    send_codes = _codes(rank_file, {"MPI_Isend"} | {n for n, send in PERSISTENT_INITS.items() if send})
    start = np.zeros(len(starts) + len(started), START_DTYPE)
    start["handle"][: len(starts)] = calls["request"][starts]
    start["time"][: len(starts)] = calls["leave"][starts].astype(np.int64)
    start["send"][: len(starts)] = np.isin(calls["func"][starts], send_codes)
    for name in ("comm", "peer", "tag", "bytes"):
        start[name][: len(starts)] = calls[name][starts]
    start["handle"][len(starts) :] = done["request"][started]
    start["time"][len(starts) :] = calls["leave"][done["call"][started]].astype(np.int64)
    info.start = start
    inits = np.flatnonzero(np.isin(calls["func"], _codes(rank_file, set(PERSISTENT_INITS))) & has_request)
    info.inits = np.zeros(len(inits), START_DTYPE)
    info.inits["handle"], info.inits["time"] = calls["request"][inits], calls["leave"][inits].astype(np.int64)
    info.inits["send"] = np.isin(calls["func"][inits], send_codes)
    for name in ("comm", "peer", "tag", "bytes"):
        info.inits[name] = calls[name][inits]
    info.done = np.flatnonzero(done["flags"] & REQUEST_STARTED == 0)
    info.done_handle = done["request"][info.done]
    info.done_time = calls["leave"][done["call"][info.done]].astype(np.int64)
    rank_file.drop_events()
    return info


def _persistent(start: np.ndarray, inits: np.ndarray) -> np.ndarray:
    """Per persistent start, the index of its request's Send_init/Recv_init in `inits`:
    the latest one of its handle before it (-1: none seen)."""
    handle = np.concatenate([inits["handle"], start["handle"]])
    time = np.concatenate([inits["time"], start["time"]])
    is_start = np.concatenate([np.zeros(len(inits), bool), np.ones(len(start), bool)])
    order = np.lexsort((is_start, time, handle))
    place = np.where(~is_start[order], np.arange(len(order)), -1)
    latest = np.maximum.accumulate(place) if len(place) else place  # the latest init so far, in this order
    result = np.full(len(start), -1, np.int64)
    at = np.flatnonzero(is_start[order])
    found = latest[at]
    ok = found >= 0
    found = np.where(ok, order[np.maximum(found, 0)], -1)
    ok[ok] &= handle[found[ok]] == handle[order[at[ok]]]
    result[order[at[ok]] - len(inits)] = found[ok]
    return result


def _comm_tables(ranks, global_comm: Dict[Tuple[int, int], int]) -> Dict[int, Tuple[np.ndarray, np.ndarray]]:
    """Per rank, its communicator ids and their merged ids, sorted by id."""
    pairs: Dict[int, List[Tuple[int, int]]] = {rank: [] for rank in ranks}
    for (rank, local), gid in global_comm.items():
        if rank in pairs:
            pairs[rank].append((local, gid))
    return {
        rank: (np.array([p[0] for p in sorted(ps)], np.int64), np.array([p[1] for p in sorted(ps)], np.int64))
        for rank, ps in pairs.items()
    }


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[i] where keys[i] == query (keys sorted), else -1: costs follow the ids
    defined, not an id's value."""
    query = np.asarray(query, np.int64)
    if len(keys) == 0:
        return np.full(len(query), -1, np.int64)
    at = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[at] == query, values[at], -1)


def _match_rank_requests(
    files: List[FileInfo], next_id: int, comm_table: Tuple[np.ndarray, np.ndarray]
) -> RankRequests:
    """Numbers the rank's request starts from `next_id` (file order), gives persistent
    starts their Send_init/Recv_init's message, and ties completions to starts."""
    offsets: np.ndarray = np.cumsum(np.array([0] + [len(f.start) for f in files], np.int64))
    start = np.concatenate([f.start for f in files])
    inits = np.concatenate([f.inits for f in files])
    persistent = np.concatenate(
        [np.arange(len(f.starts), len(f.start)) + offset for f, offset in zip(files, offsets.tolist())]
    )
    valid = np.ones(len(start), bool)
    if len(persistent):
        init = _persistent(start[persistent], inits)
        valid[persistent] = init >= 0
        for name in ("send", "comm", "peer", "tag", "bytes"):
            start[name][persistent] = np.where(init >= 0, inits[name][np.maximum(init, 0)], 0) if len(inits) else 0
    for f, offset in zip(files, offsets.tolist()):
        f.start_offset = offset
        f.done_start = match_requests(start["handle"][valid], start["time"][valid], f.done_handle, f.done_time)
        f.done_start = np.where(
            f.done_start >= 0, np.flatnonzero(valid)[np.maximum(f.done_start, 0)] if valid.any() else -1, -1
        )
    return RankRequests(
        np.arange(next_id, next_id + int(offsets[-1]), dtype=np.uint64),
        start["send"].copy(),
        _lookup(*comm_table, start["comm"]),
        start["peer"].astype(np.int64),
        start["tag"].astype(np.int64),
        start["bytes"].astype(np.int64),
        valid,
    )


def _io_events(
    archive,
    rank_file: RankFile,
    rank: int,
    calls: np.ndarray,
    func: np.ndarray,
    timeline,
    events: np.ndarray,
    op: np.ndarray,
    is_io: np.ndarray,
    comm_gid: np.ndarray,
    comm_refs: np.ndarray,
    io_handles: Dict[Tuple[int, int], int],
) -> None:
    """MPI-IO reads and writes as OTF2 I/O operations on the rank's handle of the file
    (defined at its first use: name from the FILE record, communicator from File_open)."""
    from .otf2_out import OP_IO

    opened = is_io | np.isin(func, [timeline.index.get("MPI_File_open", -1)])
    for i in np.flatnonzero(opened).tolist():
        file_id = int(calls["file"][i])
        if file_id < 0 or (rank, file_id) in io_handles:
            continue
        name = rank_file.files.get(file_id, (f"file {file_id}", 0))[0]
        comm = archive.comms.get(int(comm_gid[i])) if comm_gid[i] >= 0 else None
        io_handles[(rank, file_id)] = archive.io_handle(rank, name, comm)._ref
    mode = np.zeros(len(timeline.functions), np.int64)
    for name, value in IO_CALLS.items():
        if name in timeline.index:
            mode[timeline.index[name]] = value
    rows = np.flatnonzero(is_io)
    op[rows] = OP_IO
    events["comm"][rows] = [io_handles[(rank, int(f))] for f in calls["file"][rows].tolist()]
    events["tag"][rows] = mode[func[rows]]
    events["request"][rows] = rows  # the matching id: unique per location


def _big_arrays_from_mmap() -> None:
    """glibc raises its mmap threshold to the size of the largest block freed so far (up
    to 32 MiB), after which a rank file's arrays come from the heap, where the OTF2
    library's chunks between them keep it from shrinking: the merge's peak memory then
    grew with the number of files. A fixed 1 MiB threshold keeps every large array in its
    own mapping, returned when freed. Elsewhere than glibc, nothing to do."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, 1 << 20)


def _ranges(ranks: List[int]) -> str:
    """0, 2-5, 9 (one line however many)."""
    out: List[List[int]] = []
    for rank in ranks:
        if out and out[-1][1] == rank - 1:
            out[-1][1] = rank
        else:
            out.append([rank, rank])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out[:20])
    return text + (f" and {len(out) - 20} more ranges" if len(out) > 20 else "")


def _one_run(infos: List[FileInfo], report: MergeReport) -> List[FileInfo]:
    """The files of one run: a directory may hold several (a new run over stale files of
    an older one). Version 3 files name their run (an id rank 0 drew at MPI_Init);
    older ones are told apart by world size. The newest run is merged (CLOCK_REALTIME at
    MPI_Init: files left over from an earlier run in the same directory are stale, however
    many), the one with more files among equals; every other file gets a line. Of
    two files for the same rank and thread (two hosts, or a copy), the first by name."""
    runs: Dict[Tuple[int, int], List[FileInfo]] = defaultdict(list)
    for f in infos:
        runs[(f.head.run_id, f.head.world_size if f.head.run_id == 0 else 0)].append(f)
    chosen = max(runs, key=lambda key: (max(f.head.realtime_origin_ns for f in runs[key]), len(runs[key]), key))
    for key, files in sorted(runs.items()):
        if key == chosen:
            continue
        for f in files:
            what = f"run {f.head.run_id:016x}" if f.head.run_id else f"an older-format run of {f.head.world_size} ranks"
            report.note(f.head.path.name, f"not merged: other run ({what}; merged: the newest run)")
    seen: Dict[Tuple[int, int], FileInfo] = {}
    kept = []
    for f in sorted(runs[chosen], key=lambda f: f.head.path.name):
        key = (f.head.rank, f.head.thread)
        if key in seen:
            first = seen[key].head
            report.note(
                f.head.path.name,
                f"not merged: rank {key[0]} thread {key[1]} again (host "
                f"{f.head.host or '?'}, pid {f.head.pid}; merged: {first.path.name})",
            )
            continue
        seen[key] = f
        kept.append(f)
    return kept


def _file_notes(f: FileInfo, report: MergeReport) -> None:
    """A version 3 file that did not reach MPI_Finalize (no END record), or lost calls."""
    head = f.head
    if head.version < 3 or head.problem:
        return
    if head.end_calls is None:
        report.note(
            head.path.name,
            f"missing finalize record: the rank ended before MPI_Finalize; its "
            f"calls after its last flush are lost ({f.calls} calls merged)",
        )
    elif head.end_calls != f.calls:
        report.note(head.path.name, f"cut short: {f.calls} of {head.end_calls} calls")


def _sane_clocks(f: FileInfo, report: MergeReport) -> None:
    """A finalize clock record before the init one (or the same): the init offset alone."""
    clocks = f.head.clocks
    if 1 in clocks and 0 in clocks and clocks[1][0] <= clocks[0][0]:
        report.note(f.head.path.name, "finalize clock record runs backwards; the init offset used alone")
        del clocks[1]


def merge(directory: Path, out: Path, level: Optional[int] = None, outputs: FrozenSet[str] = OUTPUTS) -> MergeReport:
    if not directory.is_dir():
        raise MergeError(f"{directory}: no such directory")
    archive_box: List = []
    try:
        return _merge(directory, out, level, outputs, archive_box)
    finally:
        for archive in archive_box:  # after an error: the otf2 package's Writer.__del__ would close it noisily
            archive.abandon()


def _merge(directory: Path, out: Path, level: Optional[int], outputs: FrozenSet[str], archive_box: List) -> MergeReport:
    from .otf2_out import (
        CALL_FIELDS,
        CANCELLED,
        COLLECTIVE_OPS,
        COMPLETE_IRECV,
        COMPLETE_ISEND,
        COMPLETION_FIELDS,
        OP_COLLECTIVE,
        OP_IRECV_REQUEST,
        OP_ISEND,
        OP_RECV,
        OP_SEND,
        START_IRECV,
        START_ISEND,
        Otf2Writer,
    )
    from .perfetto import ARG_FIELDS, PerfettoWriter
    from .timeline import Timeline

    _big_arrays_from_mmap()
    paths = trace_files(directory)
    levels = levels_in(paths)
    if level is None and len(levels) > 1:
        raise MergeError(
            f"{directory} holds traces of the instances at levels {', '.join(map(str, levels))}: "
            "choose one with --level"
        )
    paths = list(iter_level(paths, level))
    report = MergeReport()
    # pass 1: headers, definitions, clocks, timers, requests
    infos: List[FileInfo] = []
    member_lists: Dict[Tuple[int, ...], Tuple[int, ...]] = {}
    for path in paths:
        info = _pass1(path, report, member_lists)
        if info is not None:
            infos.append(info)
    if not infos:
        raise MergeError(
            f"{directory}: no readable trace files" + (f" ({len(paths)} skipped)" if paths else ""), report.notes
        )
    infos = _one_run(infos, report)
    for f in infos:
        _file_notes(f, report)
        _sane_clocks(f, report)
    infos.sort(key=lambda f: (f.head.rank, f.head.thread))
    world_size = max(f.head.world_size for f in infos)
    by_rank: Dict[int, List[FileInfo]] = defaultdict(list)
    for f in infos:
        by_rank[f.head.rank].append(f)
    missing = world_size - len(by_rank)
    if missing:
        absent = [r for r in range(world_size) if r not in by_rank] if missing <= 100_000 else []
        report.notes.append(
            f"ranks missing: {missing} of {world_size} have no file"
            + (f" ({_ranges(absent)})" if absent else "")
            + "; the others merged"
        )
    threads = {rank: [f.head.thread for f in files] for rank, files in by_rank.items()}
    hosts = {rank: files[0].head.host for rank, files in by_rank.items()}
    comm_defs: Dict[int, Dict[int, Tuple[int, ...]]] = defaultdict(dict)
    for f in infos:
        comm_defs[f.head.rank].update(f.head.comms)
    # the same communicator on every rank: its members, and which of the rank's
    # communicators with those members it is (a Comm_dup of world is the second); a
    # communicator naming ranks outside the world, or one twice, is left out
    global_comm: Dict[Tuple[int, int], int] = {}
    comm_keys: Dict[Tuple[Tuple[int, ...], int], int] = {}
    # each distinct member list checked once (world's is in every file: world_size^2 work otherwise)
    checked: Dict[Tuple[int, ...], FrozenSet[int]] = {}
    for rank in sorted(comm_defs):
        comms = comm_defs[rank]
        seen: Dict[Tuple[int, ...], int] = defaultdict(int)
        for local_id in sorted(comms):
            ranks = comms[local_id]
            if ranks not in checked:
                unique = frozenset(ranks)
                checked[ranks] = (
                    unique if len(unique) == len(ranks) and all(0 <= r < world_size for r in unique) else frozenset()
                )
            if rank not in checked[ranks]:
                report.notes.append(
                    f"rank {rank}: communicator {local_id} names ranks outside the world or twice; "
                    "its calls merged without it"
                )
                continue
            key = (ranks, seen[ranks])
            seen[ranks] += 1
            global_comm[(rank, local_id)] = comm_keys.setdefault(key, len(comm_keys))
    members = {gid: key[0] for key, gid in comm_keys.items()}
    # world rank -> rank in the communicator, per merged communicator: sorted members
    local_rank = {}
    for gid, ranks in members.items():
        world = np.array(ranks, np.int64)
        order = np.argsort(world, kind="stable")
        local_rank[gid] = (world[order], order.astype(np.int64))
    comm_tables = _comm_tables(by_rank, global_comm)
    to_ns = {rank: ticks_to_ns(files) for rank, files in by_rank.items()}
    aligned = {}
    for rank, files in by_rank.items():
        with_clock = [f.head for f in files if 0 in f.head.clocks]
        aligned[rank] = clock_alignment(with_clock[0]) if with_clock else (lambda t: t)
    origin = min(
        (aligned_ns(f.first_enter, aligned[f.head.rank], to_ns[f.head.rank]) for f in infos if f.calls), default=0
    )
    requests: Dict[int, RankRequests] = {}
    next_request = 1
    for rank in sorted(by_rank):
        requests[rank] = _match_rank_requests(by_rank[rank], next_request, comm_tables[rank])
        next_request += len(requests[rank].request_id)
    member_table = {gid: np.array(ranks, np.int64) for gid, ranks in members.items()}
    comm_size = np.array([len(members[gid]) for gid in range(len(members))] + [0], np.int64)

    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=str(out.parent.resolve())))
    try:
        located = sorted(set(by_rank) | {r for ranks in members.values() for r in ranks})
        archive = Otf2Writer(staging, located, hosts, threads) if "otf2" in outputs else None
        if archive is not None:
            archive_box.append(archive)
        whole_world = tuple(range(world_size)) if len(by_rank) == world_size else None
        comm_names = {
            gid: ("MPI_COMM_WORLD" if m == whole_world and k == 0 else f"comm {gid}")
            for (m, k), gid in comm_keys.items()
        }
        comm_refs = np.full(len(members) + 1, 0xFFFFFFFF, np.int64)  # index -1: none
        if archive is not None:
            for gid in sorted(members):
                comm_refs[gid] = archive.comm(gid, members[gid], comm_names[gid])._ref
        stream = open(staging / "trace.json", "wb") if "json" in outputs else None
        json_out = PerfettoWriter(stream) if stream is not None else None
        timeline = Timeline(world_size, [(f.head.rank, f.head.thread) for f in infos if f.calls])
        timeline.set_axis([axis_span(f, aligned[f.head.rank], to_ns[f.head.rank], origin) for f in infos if f.calls])
        spill = EndpointSpill(staging / ".messages")
        io_handles: Dict[Tuple[int, int], int] = {}
        # pass 2: events, one file at a time, in rank order
        for info in infos:
            rank_file = read_rank_file(info.head.path)
            calls = rank_file.calls[: info.calls]
            rank, thread = rank_file.rank, rank_file.thread
            n = len(calls)
            report.files += 1
            if n == 0:  # e.g. a rank killed before its first buffer was written
                continue
            # times from the merged trace's start (never before it: a wild clock record
            # could put a call there, and OTF2 takes unsigned times)
            enter = np.maximum(aligned[rank](to_ns[rank](calls["enter"])) - origin, 0)
            leave = np.maximum(aligned[rank](to_ns[rank](calls["leave"])) - origin, 0)
            order = np.argsort(enter, kind="stable")
            calls = calls.view(RECORD)[order].view(calls.dtype)  # rows as bytes: fields one by one is slow
            enter, leave = enter[order], leave[order]
            position = np.empty(n, np.int64)
            position[order] = np.arange(n)  # file index -> time-order index
            # a thread's calls never overlap in the output: each starts after the previous ends
            if n > 1:
                enter[1:] = np.maximum(enter[1:], np.maximum.accumulate(leave)[:-1])
            leave = np.maximum(leave, enter)
            # functions: the file's codes -> timeline indices (one name table for all)
            code_max = max(rank_file.functions) + 1
            to_index = np.zeros(code_max, np.int64)
            for code, name in rank_file.functions.items():
                to_index[code] = timeline.function_index(name)
            func = to_index[calls["func"]]
            names = timeline.functions
            comm_gid = _lookup(*comm_tables[rank], calls["comm"])
            has_comm = comm_gid >= 0
            undefined = (calls["comm"] != -1) & ~has_comm
            if undefined.any():
                report.note(
                    info.head.path.name,
                    f"{int(undefined.sum())} calls name a communicator the "
                    f"rank does not define (first: {int(calls['comm'][undefined][0])}); merged "
                    "without it",
                )

            def is_func(wanted, names=names, func=func) -> np.ndarray:
                table = np.zeros(len(names), bool)  # a lookup per call: isin sorts
                table[[timeline.index[w] for w in wanted if w in timeline.index]] = True
                return table[func]

            def local(world: np.ndarray, gid_of: np.ndarray) -> np.ndarray:
                """World ranks -> ranks in each one's communicator (-1: not a member)."""
                result = np.full(len(world), -1, np.int64)
                rows = np.flatnonzero((gid_of >= 0) & (world >= 0) & (world < world_size))
                gids = gid_of[rows]
                for gid in np.unique(gids).tolist():
                    mine = rows[gids == gid]
                    result[mine] = _lookup(*local_rank[gid], world[mine])
                return result

            peer_local = local(calls["peer"].astype(np.int64), comm_gid)
            root_local = local(calls["root"].astype(np.int64), comm_gid)
            p2p_ok = has_comm & (calls["peer"] >= 0) & (peer_local >= 0)
            is_send = is_func(SENDS) & p2p_ok
            is_recv = is_func({"MPI_Recv"}) & p2p_ok
            started = np.zeros(n, bool)
            started[position[info.starts]] = True
            request_id = np.zeros(n, np.uint64)
            rank_requests = requests[rank]
            request_id[position[info.starts]] = rank_requests.request_id[
                info.start_offset : info.start_offset + len(info.starts)
            ]
            is_isend = started & is_func({"MPI_Isend"}) & p2p_ok
            is_irecv = started & is_func({"MPI_Irecv"}) & has_comm
            is_collective = is_func(COLLECTIVES) & has_comm
            is_io = is_func(IO_CALLS) & (calls["file"] >= 0)
            # persistent starts (STARTED records after Start/Startall): their request's message
            done = rank_file.completions
            p = info.start_offset + len(info.starts) + np.arange(len(info.started))
            p_ok = rank_requests.valid[p] & (rank_requests.comm[p] >= 0)
            p_peer_local = local(rank_requests.peer[p], rank_requests.comm[p])
            p_send = p_ok & rank_requests.is_isend[p] & (p_peer_local >= 0)
            p_recv = p_ok & ~rank_requests.is_isend[p]
            p_call = position[done["call"][info.started]]
            # messages, world ranks
            s = is_send | is_isend
            endpoint = np.empty(int(s.sum()) + int(p_send.sum()), ENDPOINT_DTYPE)
            endpoint["sender"] = rank
            endpoint["receiver"] = np.concatenate([calls["peer"][s], rank_requests.peer[p][p_send]])
            endpoint["comm"] = np.concatenate([comm_gid[s], rank_requests.comm[p][p_send]])
            endpoint["tag"] = np.concatenate([calls["tag"][s], rank_requests.tag[p][p_send]])
            endpoint["bytes"] = np.concatenate([calls["bytes"][s], rank_requests.bytes[p][p_send]])
            endpoint["time"] = np.concatenate([enter[s], leave[p_call[p_send]]])
            endpoint["thread"] = thread
            spill.add(0, endpoint[np.argsort(endpoint["time"], kind="stable")])
            endpoint = np.empty(int(is_recv.sum()), ENDPOINT_DTYPE)
            endpoint["sender"], endpoint["receiver"], endpoint["comm"] = calls["peer"][is_recv], rank, comm_gid[is_recv]
            endpoint["tag"], endpoint["bytes"], endpoint["time"], endpoint["thread"] = (
                calls["tag"][is_recv],
                calls["bytes"][is_recv],
                leave[is_recv],
                thread,
            )
            spill.add(1, endpoint)
            # completions: of a send (OTF2 IsendComplete), of a receive (OTF2 Irecv), cancelled
            # (OTF2 RequestCancelled); an Irecv let go by MPI_Request_free has no event (what
            # arrives, if anything, is not known)
            k = info.done_start
            found = k >= 0
            k = np.where(found, k, 0)
            no_start = len(rank_requests.request_id) == 0
            is_send_done = found & (False if no_start else rank_requests.is_isend[k])
            done_gid = np.where(found, -1 if no_start else rank_requests.comm[k], -1)
            flags = done["flags"][info.done]
            source = done["source"][info.done].astype(np.int64)
            cancelled = found & (flags & REQUEST_CANCELLED != 0)
            freed = flags & REQUEST_FREED != 0
            is_recv_done = (
                found
                & ~is_send_done
                & ~cancelled
                & ~freed
                & (source >= 0)
                & (done_gid >= 0)
                & (source < comm_size[done_gid])
            )
            is_send_done &= ~cancelled
            keep = is_send_done | is_recv_done | cancelled
            n_started = int(p_send.sum() + p_recv.sum())
            completion = np.zeros(int(keep.sum()) + n_started, [(name, dtype) for name, dtype in COMPLETION_FIELDS])
            m = int(keep.sum())
            completion["call"][:m] = position[done["call"][info.done][keep]]
            completion["request"][:m] = rank_requests.request_id[k[keep]] if m else 0
            completion["kind"][:m] = np.where(
                cancelled[keep], CANCELLED, np.where(is_send_done[keep], COMPLETE_ISEND, COMPLETE_IRECV)
            )
            completion["sender"][:m] = np.where(is_recv_done[keep], source[keep], 0)
            completion["comm"][:m] = np.where(is_recv_done[keep], comm_refs[done_gid[keep]], 0)
            completion["tag"][:m] = np.where(
                is_recv_done[keep], done["tag"][info.done][keep].astype(np.int64) & 0xFFFFFFFF, 0
            )
            completion["bytes"][:m] = np.where(is_recv_done[keep], np.maximum(done["bytes"][info.done][keep], 0), 0)
            ps = p_send | p_recv
            completion["call"][m:] = p_call[ps]
            completion["request"][m:] = rank_requests.request_id[p[ps]]
            completion["kind"][m:] = np.where(p_send[ps], START_ISEND, START_IRECV)
            completion["sender"][m:] = np.maximum(p_peer_local[ps], 0)
            completion["comm"][m:] = comm_refs[rank_requests.comm[p][ps]]
            completion["tag"][m:] = rank_requests.tag[p][ps] & 0xFFFFFFFF
            completion["bytes"][m:] = np.maximum(rank_requests.bytes[p][ps], 0)
            completion = completion[np.argsort(completion["call"], kind="stable")]
            r = np.flatnonzero(is_recv_done)
            endpoint = np.empty(len(r), ENDPOINT_DTYPE)
            sender_world = np.empty(len(r), np.int64)
            for g in np.unique(done_gid[r]).tolist():
                mine = done_gid[r] == g
                sender_world[mine] = member_table[g][source[r][mine]]
            endpoint["sender"], endpoint["receiver"], endpoint["comm"] = sender_world, rank, done_gid[r]
            endpoint["tag"], endpoint["bytes"], endpoint["time"], endpoint["thread"] = (
                done["tag"][info.done][r],
                done["bytes"][info.done][r],
                leave[position[done["call"][info.done][r]]],
                thread,
            )
            spill.add(1, endpoint)
            if archive is not None:
                events = np.zeros(n, [(name, dtype) for name, dtype in CALL_FIELDS])
                events["enter"], events["leave"] = enter, leave
                region_of = np.zeros(len(names), np.int64)
                for f in np.unique(func).tolist():  # regions of the functions called only
                    region_of[f] = archive.region(names[f])._ref
                events["region"] = region_of[func]
                op = np.zeros(n, np.uint8)
                op[is_send], op[is_recv], op[is_isend], op[is_irecv] = OP_SEND, OP_RECV, OP_ISEND, OP_IRECV_REQUEST
                op[is_collective & ~(is_send | is_recv)] = OP_COLLECTIVE
                events["peer"] = np.where(
                    is_collective, np.where(root_local >= 0, root_local, 0xFFFFFFFF), np.maximum(peer_local, 0)
                )
                events["comm"] = np.where(has_comm, comm_refs[comm_gid], 0xFFFFFFFF)
                collective_op = np.zeros(len(names), np.int64)
                for name, value in COLLECTIVE_OPS.items():
                    if name in timeline.index:
                        collective_op[timeline.index[name]] = value.value
                events["tag"] = np.where(is_collective, collective_op[func], calls["tag"].astype(np.int64) & 0xFFFFFFFF)
                events["bytes"] = np.maximum(calls["bytes"], 0)
                events["request"] = request_id
                if is_io.any():
                    _io_events(
                        archive,
                        rank_file,
                        rank,
                        calls,
                        func,
                        timeline,
                        events,
                        op,
                        is_io,
                        comm_gid,
                        comm_refs,
                        io_handles,
                    )
                events["op"] = op
                report.otf2_events += archive.write_events(rank, thread, events, completion)
            if json_out is not None:
                json_out.track(rank, thread, rank_file.host)
                args = {name: calls[name].astype(np.int64) for name in ARG_FIELDS}
                args["comm"] = comm_gid  # the merged communicator
                json_out.slices(rank, thread, names, func, enter, leave, args, calls["depth"])
            timeline.add(rank, thread, func, enter, leave)
            report.events += n
        # messages, one sender at a time (memory: that sender's messages)
        unmatched_sends = unmatched_receives = 0
        for _, sends, receives in spill.by_sender():
            send_index, receive_index, lost_sends, lost_receives = match(sends, receives)
            senders, receivers = sends[send_index], receives[receive_index]
            unmatched_sends += lost_sends
            unmatched_receives += lost_receives
            if json_out is not None:
                json_out.messages(senders, receivers)
            timeline.add_messages(senders, receivers, spill.sizes[0])
        shutil.rmtree(staging / ".messages")
        if json_out is not None and stream is not None:
            json_out.close()
            stream.close()
            report.json_events = json_out.events
        if archive is not None:
            archive.close(min(f.head.realtime_origin_ns for f in infos) / 1e9)
            report.otf2_mode = archive.bulk_mode
        report.messages = timeline.matched
        report.summary = timeline.summary(unmatched_sends, unmatched_receives)
        (staging / "summary.txt").write_text(report.summary)
        if "timeline" in outputs:
            program = infos[0].head.program
            timeline.plot(
                staging / "timeline.png",
                f"{program}: {world_size} ranks, {report.events} calls, {report.messages} messages",
            )
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return report


def run(directory: Path, out: Path, level: Optional[int], echo) -> int:
    """The command: notes and the output's place on stderr; 1 if nothing was merged."""
    try:
        report = merge(directory, out, level)
    except MergeError as exc:
        for note in exc.notes:
            echo(f"qmpigen: {note}")
        echo(f"qmpigen: error: {exc}")
        return 1
    for note in report.notes:
        echo(f"qmpigen: {note}")
    echo(
        f"qmpigen: merged {report.files} trace files, {report.events} calls, {report.messages} messages into "
        f"{out}/ (traces.otf2, trace.json, timeline.png, summary.txt)"
    )
    return 0
