"""`qmpigen trace`, pass 1: every rank file's header, definitions, clocks, timers and
requests read, one file at a time; the files of one run chosen (the newest), every file
not used fully named in one line; communicators merged across ranks (each distinct member
list checked once); clocks aligned; each rank's requests matched. What pass 2
(qmpigen.trace.merge) writes events from."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

# the rest of the trace extra, imported here so that a missing one fails at once (the CLI
# turns the ImportError into one line)
import matplotlib  # noqa: F401
import numpy as np
import otf2  # noqa: F401

from . import semantics
from .clocks import aligned_ns, clock_alignment, ticks_to_ns
from .read import (
    CALL_HAS_REQUEST,
    END_STOPPED,
    REQUEST_STARTED,
    RankFile,
    TraceFileError,
    read_rank_file,
)
from .records import codes_in
from .requests import START_DTYPE, RankRequests, fill_start, match_rank_requests


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
    completions: int = 0  # pass 2 reads the file again: the same counts, or it changed since
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

    @property
    def span_ticks(self) -> Tuple[int, int, Optional[int], Optional[int]]:
        """The timeline's axis from this file (clocks.axis_span)."""
        return self.first_enter, self.last_leave, self.init_leave, self.finalize_enter


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
    if rank_file.changed:
        report.note(path.name, rank_file.changed)
    if rank_file.problem:
        report.note(path.name, f"{rank_file.problem}; merged the {len(calls)} calls before it")
    info = FileInfo(
        rank_file,
        len(calls),
        int(calls["enter"].min()) if len(calls) else 0,
        int(calls["leave"].max()) if len(calls) else 0,
    )
    codes = np.ascontiguousarray(calls["func"])  # once: each pass over a column reads every record
    init = codes_in(codes, _codes(rank_file, {"MPI_Init", "MPI_Init_thread"}))
    finalize = codes_in(codes, _codes(rank_file, {"MPI_Finalize"}))
    info.init_leave = int(calls["leave"][init].max()) if init.any() else None
    info.finalize_enter = int(calls["enter"][finalize].min()) if finalize.any() else None
    has_request = calls["flags"] & CALL_HAS_REQUEST != 0
    kind = semantics.call_kinds(rank_file, codes)
    starts = np.flatnonzero(semantics.kinds_in(kind, semantics.REQUEST_STARTS) & has_request)
    done = rank_file.completions
    started = np.flatnonzero(done["flags"] & REQUEST_STARTED != 0)
    info.starts, info.started = starts, started
    start = np.zeros(len(starts) + len(started), START_DTYPE)
    start["handle"][: len(starts)] = calls["request"][starts]
    start["time"][: len(starts)] = calls["leave"][starts].astype(np.int64)
    fill_start(start[: len(starts)], rank_file, calls, starts)
    start["handle"][len(starts) :] = done["request"][started]
    start["time"][len(starts) :] = calls["leave"][done["call"][started]].astype(np.int64)
    info.start = start
    inits = np.flatnonzero(semantics.kinds_in(kind, semantics.PERSISTENT_INITS) & has_request)
    info.inits = np.zeros(len(inits), START_DTYPE)
    info.inits["handle"], info.inits["time"] = calls["request"][inits], calls["leave"][inits].astype(np.int64)
    fill_start(info.inits, rank_file, calls, inits)
    info.completions = len(done)
    info.done = np.flatnonzero(done["flags"] & REQUEST_STARTED == 0)
    info.done_handle = done["request"][info.done]
    info.done_time = calls["leave"][done["call"][info.done]].astype(np.int64)
    rank_file.drop_events()
    return info


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
    """A file that did not reach MPI_Finalize (no END record), or lost calls."""
    head = f.head
    if head.problem:
        return
    if head.end_calls is None and head.version >= 6:  # what a crash leaves is there (tail files)
        report.note(head.path.name, f"did not finalize ({f.calls} calls merged; summary.txt says how it ended)")
    elif head.end_calls is None:
        report.note(
            head.path.name,
            f"missing finalize record: the rank ended before MPI_Finalize; its "
            f"calls after its last flush are lost ({f.calls} calls merged)",
        )
    elif head.end_calls != f.calls:
        report.note(head.path.name, f"cut short: {f.calls} of {head.end_calls} calls")
    elif head.end_reason == END_STOPPED:
        report.note(head.path.name, f"its tracing stopped: its rank file could not be written ({f.calls} calls merged)")


def _sane_clocks(f: FileInfo, report: MergeReport) -> None:
    """A finalize clock record before the init one (or the same): the init offset alone."""
    clocks = f.head.clocks
    if 1 in clocks and 0 in clocks and clocks[1][0] <= clocks[0][0]:
        report.note(f.head.path.name, "finalize clock record runs backwards; the init offset used alone")
        del clocks[1]


@dataclass(frozen=True)
class Gathered:
    """What pass 1 learnt of the files, for pass 2 (names as in qmpigen.trace.merge)."""

    infos: Any
    world_size: Any
    by_rank: Any
    threads: Any
    hosts: Any
    comm_keys: Any
    members: Any
    local_rank: Dict[int, Tuple[np.ndarray, np.ndarray]]
    # per merged communicator, its members with a file (its OTF2 group) and the table of
    # their ranks in it (local_rank itself when every member has a file)
    shown: Dict[int, Tuple[int, ...]]
    shown_rank: Dict[int, Tuple[np.ndarray, np.ndarray]]
    comm_tables: Dict[int, Tuple[np.ndarray, np.ndarray]]
    to_ns: Any
    aligned: Any
    origin: Any
    requests: Any
    member_table: Any
    comm_size: Any
    # one-sided windows: per rank, its window ids and their merged ids (sorted by id); per
    # merged window, its merged communicator
    window_tables: Dict[int, Tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    window_comm: Dict[int, int] = field(default_factory=dict)


def _windows(by_rank, global_comm: Dict[Tuple[int, int], int]) -> Tuple[Dict, Dict[int, int]]:
    """Windows merged across ranks: a window is created collectively on a communicator,
    so the n-th window a rank created on a communicator is the n-th of every member."""
    keys: Dict[Tuple[int, int], int] = {}
    window_comm: Dict[int, int] = {}
    tables = {}
    for rank, files in sorted(by_rank.items()):
        defined: Dict[int, int] = {}
        for f in files:
            defined.update(f.head.windows)
        seen: Dict[int, int] = defaultdict(int)
        pairs = []
        for local_id in sorted(defined):
            comm = global_comm.get((rank, defined[local_id]), -1)
            if comm < 0:
                continue
            gid = keys.setdefault((comm, seen[comm]), len(keys))
            seen[comm] += 1
            window_comm[gid] = comm
            pairs.append((local_id, gid))
        tables[rank] = (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))
    return tables, window_comm


def _rank_tables(members: Dict[int, Tuple[int, ...]]) -> Dict[int, Tuple[np.ndarray, np.ndarray]]:
    """World rank -> rank in the communicator, per merged communicator: sorted members."""
    tables = {}
    for gid, ranks in members.items():
        world = np.array(ranks, np.int64)
        order = np.argsort(world, kind="stable")
        tables[gid] = (world[order], order.astype(np.int64))
    return tables


def gather(directory: Path, paths: List[Path], report: MergeReport) -> Gathered:
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
        bad = []
        for local_id in sorted(comms):
            ranks = comms[local_id]
            if ranks not in checked:
                unique = frozenset(ranks)
                checked[ranks] = (
                    unique if len(unique) == len(ranks) and all(0 <= r < world_size for r in unique) else frozenset()
                )
            if rank not in checked[ranks]:
                bad.append(local_id)
                continue
            key = (ranks, seen[ranks])
            seen[ranks] += 1
            global_comm[(rank, local_id)] = comm_keys.setdefault(key, len(comm_keys))
        if bad:  # one line per rank, however many
            report.notes.append(
                f"rank {rank}: {len(bad)} communicator{'s' if len(bad) > 1 else ''} (first: {bad[0]}) "
                "name ranks outside the world or twice; their calls merged without them"
            )
    members = {gid: key[0] for key, gid in comm_keys.items()}
    local_rank = _rank_tables(members)
    # the OTF2 archive has a location for each rank with a file, not for every rank a
    # communicator names (a claim: 8,000 of them cost 16,000 files): its groups list the
    # members with a file, and its events count ranks among those
    shown = {gid: tuple(r for r in ranks if r in by_rank) for gid, ranks in members.items()}
    shown_rank = local_rank if shown == members else _rank_tables(shown)
    comm_tables = _comm_tables(by_rank, global_comm)
    to_ns = {rank: ticks_to_ns(p for f in files for p in f.head.timers) for rank, files in by_rank.items()}
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
        requests[rank] = match_rank_requests(by_rank[rank], next_request, comm_tables[rank])
        next_request += len(requests[rank].request_id)
    member_table = {gid: np.array(ranks, np.int64) for gid, ranks in members.items()}
    comm_size = np.array([len(members[gid]) for gid in range(len(members))] + [0], np.int64)
    window_tables, window_comm = _windows(by_rank, global_comm)
    return Gathered(
        infos=infos,
        world_size=world_size,
        by_rank=by_rank,
        threads=threads,
        hosts=hosts,
        comm_keys=comm_keys,
        members=members,
        local_rank=local_rank,
        shown=shown,
        shown_rank=shown_rank,
        comm_tables=comm_tables,
        to_ns=to_ns,
        aligned=aligned,
        origin=origin,
        requests=requests,
        member_table=member_table,
        comm_size=comm_size,
        window_tables=window_tables,
        window_comm=window_comm,
    )
