"""`qmpigen trace DIR -o OUT`: the per-rank files of one tool instance merged into
OUT/traces.otf2 (+ OUT/traces/, OUT/traces.def), OUT/trace.json, OUT/timeline.png and
OUT/summary.txt. Two streaming passes over the files (definitions and clocks, then
events), one file in memory at a time. Faulty files: one line each, the rest merged;
written all-or-nothing into a staging directory moved into place."""

from __future__ import annotations

import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .match import COLLECTIVES, SENDS, Endpoint, Requests, match, starts_request
from .read import FILE_NAME, RankFile, TraceFileError, iter_level, levels_in, read_rank_file, trace_files


class MergeError(Exception):
    """Nothing could be merged; the message is one line, `notes` say which files failed."""

    def __init__(self, message: str, notes: Optional[List[str]] = None):
        super().__init__(message)
        self.notes = notes or []


@dataclass
class MergeReport:
    notes: List[str] = field(default_factory=list)  # one line per skipped or cut file
    files: int = 0
    events: int = 0
    messages: int = 0
    summary: str = ""


def _clock(rank_file: RankFile):
    """Local ns -> rank 0's ns, interpolating the offsets measured at init and finalize."""
    if 0 not in rank_file.clocks:
        return lambda t: t
    local0, offset0 = rank_file.clocks[0]
    local1, offset1 = rank_file.clocks.get(1, rank_file.clocks[0])
    if local1 == local0:
        return lambda t: t + offset0
    slope = (offset1 - offset0) / (local1 - local0)
    return lambda t: t + offset0 + int(slope * (t - local0))


def merge(directory: Path, out: Path, level: Optional[int] = None) -> MergeReport:
    from .otf2_out import COLLECTIVE_OPS, Otf2Writer
    from .perfetto import PerfettoWriter
    from .timeline import Timeline

    if not directory.is_dir():
        raise MergeError(f"{directory}: no such directory")
    paths = trace_files(directory)
    levels = levels_in(paths)
    if level is None and len(levels) > 1:
        raise MergeError(f"{directory} holds traces of the instances at levels {', '.join(map(str, levels))}: "
                         "choose one with --level")
    paths = list(iter_level(paths, level))
    report = MergeReport()
    # pass 1: headers, definitions, clocks
    headers: Dict[Path, RankFile] = {}
    for path in paths:
        try:
            rank_file = read_rank_file(path)
        except TraceFileError as exc:
            report.notes.append(f"{path.name}: skipped: {exc}")
            continue
        if rank_file.problem:
            report.notes.append(f"{path.name}: {rank_file.problem}; merged the {len(rank_file.calls)} calls before it")
        headers[path] = rank_file
    if not headers:
        raise MergeError(f"{directory}: no readable trace files" + (f" ({len(paths)} skipped)" if paths else ""),
                         report.notes)
    world_size = max(f.world_size for f in headers.values())
    threads: Dict[int, List[int]] = defaultdict(list)
    hosts: Dict[int, str] = {}
    comm_defs: Dict[int, Dict[int, Tuple[int, ...]]] = defaultdict(dict)
    clocks: Dict[int, RankFile] = {}
    for f in headers.values():
        threads[f.rank].append(f.thread)
        hosts[f.rank] = f.host
        comm_defs[f.rank].update(f.comms)
        if 0 in f.clocks:
            clocks[f.rank] = f
    # the same communicator on every rank: its members, and which of the rank's
    # communicators with those members it is (a Comm_dup of world is the second)
    global_comm: Dict[Tuple[int, int], int] = {}
    comm_keys: Dict[Tuple[Tuple[int, ...], int], int] = {}
    for rank, comms in comm_defs.items():
        seen: Dict[Tuple[int, ...], int] = defaultdict(int)
        for local_id in sorted(comms):
            key = (comms[local_id], seen[comms[local_id]])
            seen[comms[local_id]] += 1
            global_comm[(rank, local_id)] = comm_keys.setdefault(key, len(comm_keys))
    members = {gid: key[0] for key, gid in comm_keys.items()}
    aligned = {rank: _clock(clocks[rank]) if rank in clocks else (lambda t: t) for rank in threads}
    origin = min((aligned[f.rank](f.calls[0].enter) for f in headers.values() if f.calls), default=0)
    for f in headers.values():
        f.calls = []  # pass 2 reads them again, one file at a time

    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=str(out.parent.resolve())))
    try:
        archive = Otf2Writer(staging, world_size, hosts, threads)
        comm_names = {gid: ("MPI_COMM_WORLD" if m == tuple(range(world_size)) and k == 0 else f"comm {gid}")
                      for (m, k), gid in comm_keys.items()}
        with open(staging / "trace.json", "w") as stream:
            json_out = PerfettoWriter(stream)
            timeline = Timeline()
            requests = Requests()
            sends: List[Endpoint] = []
            receives: List[Endpoint] = []
            # pass 2: events, one file at a time, in rank order
            for path, head in sorted(headers.items(), key=lambda item: (item[1].rank, item[1].thread)):
                rank_file = read_rank_file(path)
                rank, thread, align = rank_file.rank, rank_file.thread, aligned[rank_file.rank]
                json_out.track(rank, thread, rank_file.host)
                writer = archive.events(rank, thread)
                last = 0
                for call in sorted(rank_file.calls, key=lambda c: c.enter):
                    enter = max(align(call.enter) - origin, last)
                    leave = max(align(call.leave) - origin, enter)
                    last = leave
                    comm_id = global_comm.get((rank, call.comm), -1)
                    comm = archive.comm(comm_id, members[comm_id], comm_names[comm_id]) if comm_id >= 0 else None
                    region = archive.region(call.func)
                    writer.enter(enter, region)
                    report.events += 1
                    local = members[comm_id].index if comm_id >= 0 else None
                    if call.func in SENDS and call.peer >= 0 and comm is not None:
                        writer.mpi_send(enter, local(call.peer), comm, call.tag, call.bytes)
                        sends.append(Endpoint(rank, call.peer, comm_id, call.tag, call.bytes, enter, thread))
                    elif call.func == "MPI_Recv" and call.peer >= 0 and comm is not None:
                        writer.mpi_recv(leave, local(call.peer), comm, call.tag, call.bytes)
                        receives.append(Endpoint(call.peer, rank, comm_id, call.tag, call.bytes, leave, thread))
                    elif starts_request(call) and comm is not None:
                        request_id = requests.start(rank, call, comm_id, thread)
                        if call.func == "MPI_Isend" and call.peer >= 0:
                            writer.mpi_isend(enter, local(call.peer), comm, call.tag, call.bytes, request_id)
                            sends.append(Endpoint(rank, call.peer, comm_id, call.tag, call.bytes, enter, thread))
                        elif call.func == "MPI_Irecv":
                            writer.mpi_irecv_request(enter, request_id)
                    elif call.func in COLLECTIVES and comm is not None:
                        writer.mpi_collective_begin(enter)
                        root = local(call.root) if call.root >= 0 else 0xFFFFFFFF
                        writer.mpi_collective_end(leave, COLLECTIVE_OPS[call.func], comm, root, call.bytes, call.bytes)
                    for handle, source, tag, nbytes in call.completions:
                        started = requests.finish(rank, handle)
                        if started is None:
                            continue
                        pending, request_id = started
                        if pending.call.func == "MPI_Isend":
                            writer.mpi_isend_complete(leave, request_id)
                        elif source >= 0:
                            sender = members[pending.comm][source]
                            writer.mpi_irecv(leave, source, archive.comms[pending.comm], tag, nbytes, request_id)
                            receives.append(Endpoint(sender, rank, pending.comm, tag, nbytes, leave, thread))
                    writer.leave(leave, region)
                    args = {k: getattr(call, k) for k in ("comm", "peer", "tag", "root", "count", "bytes", "file",
                                                          "offset") if getattr(call, k) not in (-1, 0)}
                    if call.depth:
                        args["nested"] = call.depth
                    json_out.slice(rank, thread, call.func, enter, leave, args)
                    timeline.add(rank, thread, call.func, enter, leave)
                report.files += 1
            pairs, unmatched_sends, unmatched_receives = match(sends, receives)
            for send, receive in pairs:
                json_out.message(send, receive)
            json_out.close()
        archive.close()
        report.messages = len(pairs)
        report.summary = timeline.summary(pairs, unmatched_sends, unmatched_receives, world_size)
        (staging / "summary.txt").write_text(report.summary)
        program = next(iter(headers.values())).program
        timeline.plot(staging / "timeline.png", pairs, f"{program}: {world_size} ranks, {report.events} calls, "
                                                         f"{len(pairs)} messages")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return report


MISSING_EXTRA = "qmpigen trace needs the otf2 and matplotlib packages: pip install 'qmpigen[trace]'"


def run(directory: Path, out: Path, level: Optional[int], echo) -> int:
    """The command: notes and the output's place on stderr; 1 if nothing was merged."""
    try:
        import matplotlib  # noqa: F401
        import otf2  # noqa: F401
    except ImportError:
        echo(f"qmpigen: error: {MISSING_EXTRA}")
        return 1
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
