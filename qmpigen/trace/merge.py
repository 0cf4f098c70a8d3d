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
merged; written all-or-nothing into a staging directory moved into place. OUT/io.png
joins them when the trace has I/O."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

# the rest of the trace extra, imported here so that a missing one fails at once (the CLI
# turns the ImportError into one line)
import matplotlib  # noqa: F401
import numpy as np
import otf2  # noqa: F401

from qmpigen.output.write import current_umask

from .attributes import call_attributes
from .clocks import aligned_ns, axis_span
from .gather import MergeError, MergeReport, gather
from .heap import arrays_from_the_heap
from .layout import CALL
from .match import EndpointSpill, match, take
from .otf2_out import OTHER_REGION
from .outdir import check_output, swap_in, write_marker
from .read import (
    RankFile,
    TraceFileError,
    iter_level,
    levels_in,
    read_rank_file,
    trace_files,
)
from .records import forget_member_lists
from .requests import lookup
from .story import ending_of, summary_text

OUTPUTS = frozenset({"otf2", "json", "timeline"})
RECORD = np.dtype((np.void, CALL.size))  # a call record as opaque bytes


def _namer(rank_file: RankFile):
    return lambda code: rank_file.functions.get(code, f"function {code}")


def _to_axis(aligned, to_ns, origin: int):
    """A rank's ticks -> ns on the merged axis."""
    return lambda ticks: max(aligned_ns(ticks, aligned, to_ns) - origin, 0)


def _datatype_lines(datatypes: Dict[Tuple[str, int, int, int], Set[int]]) -> str:
    """The derived datatypes the ranks defined: constructor, size, lower bound, extent."""
    if not datatypes:
        return ""
    lines = ["derived datatypes (constructor, size, lb, extent: ranks):"]
    for (name, size, lb, extent), ranks in sorted(datatypes.items()):
        lines.append(f"  {name:<40} {size:>10} {lb:>8} {extent:>10}: {len(ranks)} ranks")
    return "\n".join(lines) + "\n"


def merge(directory: Path, out: Path, level: Optional[int] = None, outputs: FrozenSet[str] = OUTPUTS) -> MergeReport:
    if not directory.is_dir():
        raise MergeError(f"{directory}: no such directory")
    check_output(directory, out)  # before any work: what OUT may be (qmpigen.trace.outdir)
    archive_box: List = []
    try:
        with arrays_from_the_heap():
            return _merge(directory, out, level, outputs, archive_box)
    finally:
        for archive in archive_box:  # after an error: the otf2 package's Writer.__del__ would close it noisily
            archive.abandon()
        forget_member_lists()


def _merge(directory: Path, out: Path, level: Optional[int], outputs: FrozenSet[str], archive_box: List) -> MergeReport:
    from .events import file_events
    from .otf2_out import Otf2Writer
    from .pass2 import Pass2
    from .perfetto import ARG_FIELDS, PerfettoWriter
    from .pictures import plot
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
    infos, world_size, by_rank, threads, hosts = g.infos, g.world_size, g.by_rank, g.threads, g.hosts
    comm_keys, members, comm_tables = g.comm_keys, g.members, g.comm_tables
    to_ns, aligned, origin = g.to_ns, g.aligned, g.origin

    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=str(out.parent.resolve())))
    try:
        os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp's is private; the output is the user's like any directory
        write_marker(staging)
        located = sorted(by_rank)  # a location per rank with a file (qmpigen.trace.gather: Gathered.shown)
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
                comm_refs[gid] = archive.comm(gid, g.shown[gid], comm_names[gid])._ref
        stream = open(staging / "trace.json", "wb") if "json" in outputs else None
        json_out = PerfettoWriter(stream) if stream is not None else None
        timeline = Timeline(world_size, [(f.head.rank, f.head.thread) for f in infos if f.calls])
        timeline.set_axis(
            [axis_span(f.span_ticks, aligned[f.head.rank], to_ns[f.head.rank], origin) for f in infos if f.calls]
        )
        spill = EndpointSpill(staging / ".messages")
        pass2 = Pass2(g, comm_refs, archive)
        datatypes: Dict[Tuple[str, int, int, int], Set[int]] = defaultdict(set)
        endings: List = []  # story.Unfinished: the threads that did not finalize
        # pass 2: events, one file at a time, in rank order
        for info in infos:
            rank_file = _read_again(info, report)
            if rank_file is None:
                continue
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
            # position: file index -> time-order index
            if n > 1 and not (enter[1:] >= enter[:-1]).all():  # not in time order (rare: a call rewritten)
                order = np.argsort(enter, kind="stable")
                calls = calls.view(RECORD)[order].view(calls.dtype)  # rows as bytes: fields one by one is slow
                enter, leave = enter[order], leave[order]
                position = np.empty(n, np.int64)
                position[order] = np.arange(n)
            else:  # what the stable sort would give: the copy of every record (a seventh of a merge) saved
                position = np.arange(n, dtype=np.int64)
            rank_file.calls = calls[:0]  # the file-order copy freed (a rank file of records less at the peak)
            unfinished = ending_of(
                rank_file, calls, leave, _namer(rank_file), _to_axis(aligned[rank], to_ns[rank], origin)
            )
            if unfinished is not None:  # it did not finalize: how it ended (story.py)
                endings.append(unfinished)
                timeline.add_ending(rank, thread, unfinished.time, unfinished.label)
            # a thread's calls never overlap in the output: each starts after the previous ends
            if n > 1:
                enter[1:] = np.maximum(enter[1:], np.maximum.accumulate(leave)[:-1])
            leave = np.maximum(leave, enter)
            # functions: the file's codes -> timeline indices (one name table for all), for
            # the functions called only (a file may define thousands it never calls)
            codes = np.ascontiguousarray(calls["func"])  # once: each pass over a column reads every record
            called = np.flatnonzero(np.bincount(codes)).tolist()  # ascending, as np.unique (which sorts)
            to_index = np.zeros(max(rank_file.functions) + 1, np.int64)
            for code in called:
                to_index[code] = timeline.function_index(rank_file.functions[code])
            func = to_index[codes]
            names = timeline.functions
            comm_gid = lookup(*comm_tables[rank], calls["comm"])
            undefined = (calls["comm"] != -1) & (comm_gid < 0)
            if undefined.any():
                report.note(
                    info.head.path.name,
                    f"{int(undefined.sum())} calls name a communicator the "
                    f"rank does not define (first: {int(calls['comm'][undefined][0])}); merged "
                    "without it",
                )
            found = file_events(pass2, info, rank_file, calls, codes, comm_gid, enter, leave, position)
            for type_id, (size, name) in rank_file.types.items():
                constructor, lb, extent = rank_file.type_shapes.get(type_id, ("unknown", 0, 0))
                if constructor != "NAMED":  # a derived datatype: what a simulator needs to replay volumes
                    datatypes[(name, size, lb, extent)].add(rank)
            spill.add(0, found.sends)
            spill.add(1, found.receives)
            if archive is not None and found.columns is not None:
                region_of = np.zeros(len(names), np.int64)
                for code in called:  # regions of the functions called only
                    region = archive.region(rank_file.functions[code], rank_file.kinds.get(code, "other"))
                    region_of[to_index[code]] = region._ref
                found.columns["region"] = region_of[func]
                attributes = call_attributes(archive, rank_file, calls)
                report.otf2_events += archive.write_events(
                    rank, thread, found.columns, found.completion, attributes, unfinished
                )
            if json_out is not None:
                json_out.track(rank, thread, rank_file.host)
                args = {name: calls[name] for name in ARG_FIELDS}
                args["comm"] = comm_gid  # the merged communicator
                json_out.slices(rank, thread, names, func, enter, leave, args, calls["depth"])
            timeline.add_io(rank, thread, enter[found.io_rows], leave[found.io_rows], found.io_bytes, found.io_write)
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
            if archive.regions_shared:
                report.notes.append(
                    f"the trace names {len(archive.regions) - 1 + len(archive.regions_shared)} functions: traces.otf2 "
                    f"has a region for {len(archive.regions) - 1}, the calls of the other "
                    f"{len(archive.regions_shared)} are in one, {OTHER_REGION!r}"
                )
            archive.close(min(f.head.realtime_origin_ns for f in infos) / 1e9)
            report.otf2_mode = archive.bulk_mode
        report.messages = timeline.matched
        report.summary = (
            timeline.summary(unmatched_sends, unmatched_receives) + _datatype_lines(datatypes) + summary_text(endings)
        )
        (staging / "summary.txt").write_text(report.summary)
        if "timeline" in outputs:
            program = infos[0].head.program
            plot(
                timeline,
                staging / "timeline.png",
                f"{program}: {world_size} ranks, {report.events} calls, {report.messages} messages",
            )
        swap_in(staging, directory, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return report


def _read_again(info, report: MergeReport) -> Optional[RankFile]:
    """Pass 2's read of a file: the one pass 1 read (same identity and records), or None
    and a line (a run writing into the directory: the file must not change between the
    passes, pass 1's counts index pass 2's calls)."""
    try:
        rank_file = read_rank_file(info.head.path)
    except TraceFileError as exc:
        why = str(exc)
    else:
        size, now = info.head.identity[2], rank_file.identity[2]
        if rank_file.identity != info.head.identity:
            why = f"{size} bytes, now {now}" if size != now else "written again"
        elif len(rank_file.calls) < info.calls or len(rank_file.completions) != info.completions:
            why = "its records differ"
        else:
            return rank_file
    report.note(
        info.head.path.name,
        f"changed since the merge first read it ({why}; a run writing into the directory?): "
        f"its {info.calls} calls not merged",
    )
    return None


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
        f"{out}/ (traces.otf2, trace.json, timeline.png, {'io.png, ' if (out / 'io.png').exists() else ''}summary.txt)"
    )
    return 0
