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

import numpy as np
# the rest of the trace extra, imported here so that a missing one fails at once (the CLI
# turns the ImportError into one line)
import matplotlib  # noqa: F401
import otf2  # noqa: F401

from .clocks import aligned_ns, axis_span, clock_alignment, ticks_to_ns
from .match import COLLECTIVES, ENDPOINT_DTYPE, REQUEST_STARTS, SENDS, EndpointSpill, match, match_requests
from .read import CALL_HAS_REQUEST, RankFile, TraceFileError, iter_level, levels_in, read_rank_file, trace_files

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
    # the file's Isend/Irecv calls (index, handle, leave ticks) and completions
    starts: Optional[np.ndarray] = None
    start_func: Optional[np.ndarray] = None  # function codes
    start_comm_local: Optional[np.ndarray] = None
    start_handle: Optional[np.ndarray] = None
    start_time: Optional[np.ndarray] = None
    done_handle: Optional[np.ndarray] = None
    done_time: Optional[np.ndarray] = None
    # filled after pass 1: where the file's starts begin in its rank's RankRequests, and
    # per completion the index of its start there (-1: none seen)
    start_offset: int = 0
    done_start: Optional[np.ndarray] = None


@dataclass
class RankRequests:
    """A rank's Isend/Irecv calls over all its files (file order)."""

    request_id: np.ndarray  # numbered across the merged trace
    is_isend: np.ndarray
    comm: np.ndarray  # merged communicator id


def _codes(rank_file: RankFile, names: set) -> np.ndarray:
    return np.array([code for code, name in rank_file.functions.items() if name in names], np.uint16)


def _pass1(path: Path, report: MergeReport) -> Optional[FileInfo]:
    try:
        rank_file = read_rank_file(path)
    except TraceFileError as exc:
        report.notes.append(f"{path.name}: skipped: {exc}")
        return None
    calls = rank_file.calls
    if rank_file.problem:
        report.notes.append(f"{path.name}: {rank_file.problem}; merged the {len(calls)} calls before it")
    info = FileInfo(rank_file, len(calls), int(calls["enter"].min()) if len(calls) else 0,
                    int(calls["leave"].max()) if len(calls) else 0)
    init = np.isin(calls["func"], _codes(rank_file, {"MPI_Init", "MPI_Init_thread"}))
    finalize = np.isin(calls["func"], _codes(rank_file, {"MPI_Finalize"}))
    info.init_leave = int(calls["leave"][init].max()) if init.any() else None
    info.finalize_enter = int(calls["enter"][finalize].min()) if finalize.any() else None
    starts = np.flatnonzero(np.isin(calls["func"], _codes(rank_file, REQUEST_STARTS)) &
                            (calls["flags"] & CALL_HAS_REQUEST != 0))
    info.starts = starts
    info.start_func = calls["func"][starts]
    info.start_comm_local = calls["comm"][starts]
    info.start_handle = calls["request"][starts]
    info.start_time = calls["leave"][starts].astype(np.int64)
    done = rank_file.completions
    info.done_handle = done["request"]
    info.done_time = calls["leave"][done["call"]].astype(np.int64)
    rank_file.drop_events()
    return info


def _match_rank_requests(files: List[FileInfo], next_id: int, global_comm: Dict[Tuple[int, int], int]) -> RankRequests:
    """Numbers the rank's requests from `next_id` (file order) and ties completions to them."""
    offsets = np.cumsum([0] + [len(f.starts) for f in files])
    start_handle = np.concatenate([f.start_handle for f in files])
    start_time = np.concatenate([f.start_time for f in files])
    is_isend, comm = [], []
    for f, offset in zip(files, offsets.tolist()):
        f.start_offset = offset
        f.done_start = match_requests(start_handle, start_time, f.done_handle, f.done_time)
        isend_codes = [code for code, name in f.head.functions.items() if name == "MPI_Isend"]
        is_isend.append(np.isin(f.start_func, isend_codes))
        local = f.start_comm_local.astype(np.int64)
        table = np.array([global_comm.get((f.head.rank, c), -1) for c in range(int(local.max(initial=-1)) + 1)]
                         + [-1], np.int64)
        comm.append(table[local])
    return RankRequests(np.arange(next_id, next_id + int(offsets[-1]), dtype=np.uint64),
                        np.concatenate(is_isend), np.concatenate(comm))


def _io_events(archive, rank_file: RankFile, rank: int, calls: np.ndarray, func: np.ndarray, timeline,
               events: np.ndarray, op: np.ndarray, is_io: np.ndarray, comm_gid: np.ndarray, comm_refs: np.ndarray,
               io_handles: Dict[Tuple[int, int], int]) -> None:
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


def merge(directory: Path, out: Path, level: Optional[int] = None, outputs: FrozenSet[str] = OUTPUTS) -> MergeReport:
    from .otf2_out import (COLLECTIVE_OPS, COMPLETE_IRECV, COMPLETE_ISEND, COMPLETION_FIELDS, CALL_FIELDS, OP_COLLECTIVE,
                           OP_IO, OP_IRECV_REQUEST, OP_ISEND, OP_RECV, OP_SEND, Otf2Writer)
    from .perfetto import ARG_FIELDS, PerfettoWriter
    from .timeline import Timeline

    if not directory.is_dir():
        raise MergeError(f"{directory}: no such directory")
    _big_arrays_from_mmap()
    paths = trace_files(directory)
    levels = levels_in(paths)
    if level is None and len(levels) > 1:
        raise MergeError(f"{directory} holds traces of the instances at levels {', '.join(map(str, levels))}: "
                         "choose one with --level")
    paths = list(iter_level(paths, level))
    report = MergeReport()
    # pass 1: headers, definitions, clocks, timers, requests
    infos: List[FileInfo] = []
    for path in paths:
        info = _pass1(path, report)
        if info is not None:
            infos.append(info)
    if not infos:
        raise MergeError(f"{directory}: no readable trace files" + (f" ({len(paths)} skipped)" if paths else ""),
                         report.notes)
    infos.sort(key=lambda f: (f.head.rank, f.head.thread))
    world_size = max(f.head.world_size for f in infos)
    by_rank: Dict[int, List[FileInfo]] = defaultdict(list)
    for f in infos:
        by_rank[f.head.rank].append(f)
    threads = {rank: [f.head.thread for f in files] for rank, files in by_rank.items()}
    hosts = {rank: files[0].head.host for rank, files in by_rank.items()}
    comm_defs: Dict[int, Dict[int, Tuple[int, ...]]] = defaultdict(dict)
    for f in infos:
        comm_defs[f.head.rank].update(f.head.comms)
    # the same communicator on every rank: its members, and which of the rank's
    # communicators with those members it is (a Comm_dup of world is the second)
    global_comm: Dict[Tuple[int, int], int] = {}
    comm_keys: Dict[Tuple[Tuple[int, ...], int], int] = {}
    for rank in sorted(comm_defs):
        comms = comm_defs[rank]
        seen: Dict[Tuple[int, ...], int] = defaultdict(int)
        for local_id in sorted(comms):
            key = (comms[local_id], seen[comms[local_id]])
            seen[comms[local_id]] += 1
            global_comm[(rank, local_id)] = comm_keys.setdefault(key, len(comm_keys))
    members = {gid: key[0] for key, gid in comm_keys.items()}
    # world rank -> rank in the communicator, per merged communicator
    local_rank = {}
    for gid, ranks in members.items():
        table = np.full(world_size + 1, -1, np.int64)
        valid = [r for r in ranks if 0 <= r < world_size]
        table[valid] = [ranks.index(r) for r in valid]
        local_rank[gid] = table
    to_ns = {rank: ticks_to_ns(files) for rank, files in by_rank.items()}
    aligned = {}
    for rank, files in by_rank.items():
        with_clock = [f.head for f in files if 0 in f.head.clocks]
        aligned[rank] = clock_alignment(with_clock[0]) if with_clock else (lambda t: t)
    origin = min((aligned_ns(f.first_enter, aligned[f.head.rank], to_ns[f.head.rank]) for f in infos if f.calls),
                 default=0)
    requests: Dict[int, RankRequests] = {}
    next_request = 1
    for rank in sorted(by_rank):
        requests[rank] = _match_rank_requests(by_rank[rank], next_request, global_comm)
        next_request += len(requests[rank].request_id)
    member_table = {gid: np.array(ranks, np.int64) for gid, ranks in members.items()}
    comm_size = np.array([len(members[gid]) for gid in range(len(members))] + [0], np.int64)

    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=str(out.parent.resolve())))
    try:
        archive = Otf2Writer(staging, world_size, hosts, threads) if "otf2" in outputs else None
        comm_names = {gid: ("MPI_COMM_WORLD" if m == tuple(range(world_size)) and k == 0 else f"comm {gid}")
                      for (m, k), gid in comm_keys.items()}
        comm_refs = np.full(len(members) + 1, 0xFFFFFFFF, np.int64)  # index -1: none
        if archive is not None:
            for gid in sorted(members):
                comm_refs[gid] = archive.comm(gid, members[gid], comm_names[gid])._ref
        stream = open(staging / "trace.json", "wb") if "json" in outputs else None
        json_out = PerfettoWriter(stream) if stream is not None else None
        timeline = Timeline(world_size)
        timeline.set_axis([axis_span(f, aligned[f.head.rank], to_ns[f.head.rank], origin) for f in infos if f.calls])
        spill = EndpointSpill(staging / ".messages")
        io_handles: Dict[Tuple[int, int], int] = {}
        # pass 2: events, one file at a time, in rank order
        for info in infos:
            rank_file = read_rank_file(info.head.path)
            calls = rank_file.calls[:info.calls]
            rank, thread = rank_file.rank, rank_file.thread
            n = len(calls)
            report.files += 1
            if n == 0:  # e.g. a rank killed before its first buffer was written
                continue
            enter = aligned[rank](to_ns[rank](calls["enter"])) - origin
            leave = aligned[rank](to_ns[rank](calls["leave"])) - origin
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
            comm_gid = np.array([global_comm.get((rank, c), -1) for c in range(int(calls["comm"].max(initial=-1)) + 1)]
                                + [-1], np.int64)[calls["comm"]] if n else np.empty(0, np.int64)
            has_comm = comm_gid >= 0

            def is_func(wanted) -> np.ndarray:
                table = np.zeros(len(names), bool)  # a lookup per call: isin sorts
                table[[timeline.index[w] for w in wanted if w in timeline.index]] = True
                return table[func]

            def local(world: np.ndarray) -> np.ndarray:
                """World ranks -> ranks in each call's communicator (-1: not a member)."""
                result = np.full(len(world), -1, np.int64)
                rows = np.flatnonzero(has_comm & (world >= 0) & (world < world_size))  # calls with a peer or root
                gids = comm_gid[rows]
                for gid in np.unique(gids).tolist():
                    mine = rows[gids == gid]
                    result[mine] = local_rank[gid][world[mine]]
                return result

            peer_local = local(calls["peer"].astype(np.int64))
            root_local = local(calls["root"].astype(np.int64))
            p2p_ok = has_comm & (calls["peer"] >= 0) & (peer_local >= 0)
            is_send = is_func(SENDS) & p2p_ok
            is_recv = is_func({"MPI_Recv"}) & p2p_ok
            started = np.zeros(n, bool)
            started[position[info.starts]] = True
            request_id = np.zeros(n, np.uint64)
            request_id[position[info.starts]] = requests[rank].request_id[
                info.start_offset:info.start_offset + len(info.starts)]
            is_isend = started & is_func({"MPI_Isend"}) & p2p_ok
            is_irecv = started & is_func({"MPI_Irecv"}) & has_comm
            is_collective = is_func(COLLECTIVES) & has_comm
            is_io = is_func(IO_CALLS) & (calls["file"] >= 0)
            # messages, world ranks
            s = is_send | is_isend
            endpoint = np.empty(int(s.sum()), ENDPOINT_DTYPE)
            endpoint["sender"], endpoint["receiver"], endpoint["comm"] = rank, calls["peer"][s], comm_gid[s]
            endpoint["tag"], endpoint["bytes"], endpoint["time"], endpoint["thread"] = (calls["tag"][s],
                                                                                       calls["bytes"][s], enter[s], thread)
            spill.add(0, endpoint)
            endpoint = np.empty(int(is_recv.sum()), ENDPOINT_DTYPE)
            endpoint["sender"], endpoint["receiver"], endpoint["comm"] = calls["peer"][is_recv], rank, comm_gid[is_recv]
            endpoint["tag"], endpoint["bytes"], endpoint["time"], endpoint["thread"] = (
                calls["tag"][is_recv], calls["bytes"][is_recv], leave[is_recv], thread)
            spill.add(1, endpoint)
            # completions: of an Isend (OTF2 IsendComplete) or an Irecv (OTF2 Irecv, a receive)
            done, rank_requests = rank_file.completions, requests[rank]
            k = info.done_start
            found = k >= 0
            k = np.where(found, k, 0)
            is_isend_done = found & rank_requests.is_isend[k] if len(k) else found
            gid = np.where(found, rank_requests.comm[k], -1) if len(k) else k
            source = done["source"].astype(np.int64)
            is_irecv_done = found & ~is_isend_done & (source >= 0) & (gid >= 0) & (source < comm_size[gid])
            keep = is_isend_done | is_irecv_done
            completion = np.zeros(int(keep.sum()), [(name, dtype) for name, dtype in COMPLETION_FIELDS])
            completion["call"] = position[done["call"][keep]]
            completion["request"] = rank_requests.request_id[k[keep]]
            completion["kind"] = np.where(is_isend_done[keep], COMPLETE_ISEND, COMPLETE_IRECV)
            completion["sender"] = np.where(is_irecv_done[keep], source[keep], 0)
            completion["comm"] = np.where(is_irecv_done[keep], comm_refs[gid[keep]], 0)
            completion["tag"] = np.where(is_irecv_done[keep], done["tag"][keep].astype(np.int64) & 0xFFFFFFFF, 0)
            completion["bytes"] = np.where(is_irecv_done[keep], np.maximum(done["bytes"][keep], 0), 0)
            completion = completion[np.argsort(completion["call"], kind="stable")]
            r = np.flatnonzero(is_irecv_done)
            endpoint = np.empty(len(r), ENDPOINT_DTYPE)
            sender_world = np.empty(len(r), np.int64)
            for g in np.unique(gid[r]).tolist():
                mine = gid[r] == g
                sender_world[mine] = member_table[g][source[r][mine]]
            endpoint["sender"], endpoint["receiver"], endpoint["comm"] = sender_world, rank, gid[r]
            endpoint["tag"], endpoint["bytes"], endpoint["time"], endpoint["thread"] = (
                done["tag"][r], done["bytes"][r], leave[position[done["call"][r]]], thread)
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
                events["peer"] = np.where(is_collective, np.where(root_local >= 0, root_local, 0xFFFFFFFF),
                                          np.maximum(peer_local, 0))
                events["comm"] = np.where(has_comm, comm_refs[comm_gid], 0xFFFFFFFF)
                collective_op = np.zeros(len(names), np.int64)
                for name, value in COLLECTIVE_OPS.items():
                    if name in timeline.index:
                        collective_op[timeline.index[name]] = value.value
                events["tag"] = np.where(is_collective, collective_op[func], calls["tag"].astype(np.int64) & 0xFFFFFFFF)
                events["bytes"] = np.maximum(calls["bytes"], 0)
                events["request"] = request_id
                if is_io.any():
                    _io_events(archive, rank_file, rank, calls, func, timeline, events, op, is_io, comm_gid, comm_refs,
                               io_handles)
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
        if json_out is not None:
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
            timeline.plot(staging / "timeline.png",
                          f"{program}: {world_size} ranks, {report.events} calls, {report.messages} messages")
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
    echo(f"qmpigen: merged {report.files} trace files, {report.events} calls, {report.messages} messages into "
         f"{out}/ (traces.otf2, trace.json, timeline.png, summary.txt)")
    return 0
