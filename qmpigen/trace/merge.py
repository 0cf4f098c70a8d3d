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

import shutil
import tempfile
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

# the rest of the trace extra, imported here so that a missing one fails at once (the CLI
# turns the ImportError into one line)
import matplotlib  # noqa: F401
import numpy as np
import otf2  # noqa: F401

from .clocks import axis_span
from .gather import MergeError, MergeReport, gather, lookup
from .heap import arrays_from_the_heap
from .match import (
    COLLECTIVES,
    ENDPOINT_DTYPE,
    SENDS,
    EndpointSpill,
    match,
    take,
)
from .read import (
    REQUEST_CANCELLED,
    REQUEST_FREED,
    iter_level,
    levels_in,
    read_rank_file,
    trace_files,
)

OUTPUTS = frozenset({"otf2", "json", "timeline"})
RECORD = np.dtype((np.void, 80))  # a call record as 80 opaque bytes


def merge(directory: Path, out: Path, level: Optional[int] = None, outputs: FrozenSet[str] = OUTPUTS) -> MergeReport:
    if not directory.is_dir():
        raise MergeError(f"{directory}: no such directory")
    archive_box: List = []
    try:
        with arrays_from_the_heap():
            return _merge(directory, out, level, outputs, archive_box)
    finally:
        for archive in archive_box:  # after an error: the otf2 package's Writer.__del__ would close it noisily
            archive.abandon()


def _merge(directory: Path, out: Path, level: Optional[int], outputs: FrozenSet[str], archive_box: List) -> MergeReport:
    from .otf2_out import (
        CANCELLED,
        COLLECTIVE_OPS,
        COMPLETE_IRECV,
        COMPLETE_ISEND,
        COMPLETION_FIELDS,
        IO_CALLS,
        OP_COLLECTIVE,
        OP_IRECV_REQUEST,
        OP_ISEND,
        OP_RECV,
        OP_SEND,
        START_IRECV,
        START_ISEND,
        CallColumns,
        Otf2Writer,
        io_events,
    )
    from .perfetto import ARG_FIELDS, PerfettoWriter
    from .timeline import Timeline

    paths = trace_files(directory)
    levels = levels_in(paths)
    if level is None and len(levels) > 1:
        raise MergeError(
            f"{directory} holds traces of the instances at levels {', '.join(map(str, levels))}: "
            "choose one with --level"
        )
    paths = list(iter_level(paths, level))
    report = MergeReport()
    # pass 1: headers, definitions, clocks, timers, requests (qmpigen.trace.gather)
    g = gather(directory, paths, report)
    (
        infos,
        world_size,
        by_rank,
        threads,
        hosts,
        comm_keys,
        members,
        local_rank,
        comm_tables,
        to_ns,
        aligned,
        origin,
        requests,
        member_table,
        comm_size,
    ) = (
        g.infos,
        g.world_size,
        g.by_rank,
        g.threads,
        g.hosts,
        g.comm_keys,
        g.members,
        g.local_rank,
        g.comm_tables,
        g.to_ns,
        g.aligned,
        g.origin,
        g.requests,
        g.member_table,
        g.comm_size,
    )

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
            rank_file.calls = calls[:0]  # the file-order copy freed (a rank file of records less at the peak)
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
            comm_gid = lookup(*comm_tables[rank], calls["comm"])
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
                    result[mine] = lookup(*local_rank[gid], world[mine])
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
            spill.add(0, take(endpoint, np.argsort(endpoint["time"], kind="stable")))
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
            completion = take(completion, np.argsort(completion["call"], kind="stable"))
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
                events = CallColumns(n)
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
                    io_events(
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
                args = {name: calls[name] for name in ARG_FIELDS}
                args["comm"] = comm_gid  # the merged communicator
                json_out.slices(rank, thread, names, func, enter, leave, args, calls["depth"])
            timeline.add(rank, thread, func, enter, leave)
            report.events += n
        # messages, one sender at a time (memory: that sender's messages)
        unmatched_sends = unmatched_receives = 0
        for _, sends, receives in spill.by_sender():
            send_index, receive_index, lost_sends, lost_receives = match(sends, receives)
            senders, receivers = take(sends, send_index), take(receives, receive_index)
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
