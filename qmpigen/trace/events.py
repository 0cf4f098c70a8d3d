"""`qmpigen trace`, pass 2 for one rank file: what its calls become, from their functions'
kinds (semantics.py), with numpy over all of a file's calls at once.

  * message endpoints (sends and receives, world ranks) for matching: blocking sends,
    receives and Sendrecv's two sides, Isend/Irecv/Imrecv and persistent starts, and
    completed receives;
  * per call, its OTF2 operation (otf2_ops's OP_*) and the columns it reads: messages,
    collectives (root, bytes sent and received), nonblocking collectives, MPI-IO
    operations on I/O handles (created at File_open, destroyed at File_close), one-sided
    operations on RMA windows;
  * per completed request, its completion event (otf2_ops's COMPLETE_*), by what its
    start was (completions.py): a send, a receive, a collective, I/O or a one-sided
    operation;
  * the I/O calls, for the timeline's I/O lane and picture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from . import semantics
from .completions import COMPLETION_DTYPE, completion_events, persistent_starts
from .layout import FILE_MODES
from .match import concatenate, take
from .otf2_ops import (
    COMPLETE_RMA,
    IO_FLAG_COLLECTIVE,
    IO_MODE_READ,
    IO_MODE_WRITE,
    OP_COLLECTIVE,
    OP_ICOLLECTIVE,
    OP_IO,
    OP_IO_CREATE,
    OP_IO_DESTROY,
    OP_IO_NONBLOCKING,
    OP_IRECV_REQUEST,
    OP_ISEND,
    OP_RECV,
    OP_RMA_REQUEST,
    OP_SEND,
    OP_SENDRECV,
    RMA_ATOMIC,
    RMA_GET,
    RMA_PUT,
    CallColumns,
)
from .pass2 import BLOCKING_IO, NONE32, Pass2, endpoints, io_handle, local_ranks, shown_ranks, window_ref
from .read import CALL_STATUS_BYTES, RankFile
from .requests import lookup
from .rma import completing_call

FILE_MODE_CREATE, FILE_MODE_EXCLUSIVE = (value for name, value, _ in FILE_MODES[:2])
IO_CREATION_CREATE, IO_CREATION_EXCLUSIVE = 1, 8  # OTF2_IO_CREATION_FLAG_*


@dataclass
class FileEvents:
    sends: np.ndarray
    receives: np.ndarray
    columns: Optional[CallColumns]  # CALL_FIELDS (with OTF2 only)
    completion: np.ndarray  # COMPLETION_FIELDS, by call
    io_rows: np.ndarray  # calls that read or wrote a file
    io_write: np.ndarray  # of those, the writes
    io_bytes: np.ndarray


@dataclass
class Classes:
    """What a file's calls are (time order), by their functions' kinds and whether their
    communicator and peers are known: masks, and the ranks they name in their
    communicators."""

    kinds: Callable[[object], np.ndarray]  # kinds(names) -> the calls of those kinds
    codes: np.ndarray  # the calls' function codes, contiguous (calls["func"] is strided: a pass reads every record)
    comm_gid: np.ndarray
    has_comm: np.ndarray
    peer_local: np.ndarray
    source_local: np.ndarray
    root_local: np.ndarray
    is_send: np.ndarray
    is_recv: np.ndarray
    is_sendrecv: np.ndarray
    started: np.ndarray  # the calls that started a request
    request_id: np.ndarray
    is_isend: np.ndarray
    is_irecv: np.ndarray
    is_icollective: np.ndarray
    is_collective: np.ndarray
    io_write: np.ndarray
    io_rows: np.ndarray  # the calls that read or wrote a file (_with_file)
    io_counted: np.ndarray  # per I/O row: its bytes are the status's count (_counted_reads)


def _counted_reads(rank_file: RankFile, calls: np.ndarray, codes: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Of the calls `rows` (the I/O calls: a few of a file's, and each column of `calls`
    is strided), those whose bytes are the status's count (a short read's: 0 too). A
    split collective's _end reports its _begin's bytes again: the _begin has them, the
    _end moves none."""
    counted = (calls["recv_bytes"][rows] > 0) | (calls["flags"][rows] & CALL_STATUS_BYTES != 0)
    split_end = semantics.per_call(rank_file, codes[rows], lambda name, _: semantics.split_io_end(name), bool)
    return counted & ~split_end


def _classify(p: Pass2, info, rank_file: RankFile, calls, codes, comm_gid, position) -> Classes:
    """What file_events' calls are (its arguments)."""
    g, rank, n = p.g, rank_file.rank, len(calls)

    per_call_kind = semantics.call_kinds(rank_file, codes)

    def kinds(wanted) -> np.ndarray:
        return semantics.kinds_in(per_call_kind, wanted)

    has_comm = comm_gid >= 0
    peer_local = local_ranks(g, calls["peer"], comm_gid)
    source_local = local_ranks(g, calls["source"], comm_gid)
    to_peer = peer_local >= 0  # local_ranks: a rank only for a known communicator and a rank >= 0
    from_source = source_local >= 0
    is_send = kinds(semantics.SENDS) & to_peer
    is_recv = kinds(semantics.RECEIVES) & from_source
    started = np.zeros(n, bool)
    started[position[info.starts]] = True
    request_id = np.zeros(n, np.uint64)
    rr = g.requests[rank]
    request_id[position[info.starts]] = rr.request_id[info.start_offset : info.start_offset + len(info.starts)]
    io_rows = _with_file(calls, kinds(semantics.IO))
    return Classes(
        kinds,
        codes,
        comm_gid,
        has_comm,
        peer_local,
        source_local,
        local_ranks(g, calls["root"], comm_gid),
        is_send,
        is_recv,
        kinds({"sendrecv"}) & is_send & is_recv,
        started,
        request_id,
        started & kinds(semantics.REQUEST_SENDS) & to_peer,
        started & kinds(semantics.REQUEST_RECEIVES) & has_comm,
        started & kinds(semantics.REQUEST_COLLECTIVES) & has_comm,
        kinds(semantics.COLLECTIVES) & has_comm,
        kinds(semantics.IO_WRITES),
        io_rows,
        _counted_reads(rank_file, calls, codes, io_rows),
    )


def file_events(
    p: Pass2,
    info,
    rank_file: RankFile,
    calls: np.ndarray,
    codes: np.ndarray,
    comm_gid: np.ndarray,
    enter: np.ndarray,
    leave: np.ndarray,
    position,
) -> FileEvents:
    """`calls` in time order, `codes` their function codes (contiguous), `comm_gid` their
    merged communicators (-1: none); `position`: file index -> time-order index."""
    c = _classify(p, info, rank_file, calls, codes, comm_gid, position)
    persistent = persistent_starts(p, info, rank_file, position)
    completion, completed_receives = completion_events(p, info, rank_file, position, leave, persistent)
    sends, receives = _messages(p, rank_file, calls, c, persistent, enter, leave)
    columns = None
    if p.archive is not None:
        columns, at_syncs = _call_columns(p, rank_file, calls, c, enter, leave)
        if len(at_syncs):  # the completions stay ordered by call, as the event loop walks them
            completion = concatenate([completion, at_syncs])
            completion = take(completion, np.argsort(completion["call"], kind="stable"))
    io_rows, io_write = c.io_rows, c.io_write[c.io_rows]
    io_bytes = np.where(io_write | ~c.io_counted, calls["bytes"][io_rows], calls["recv_bytes"][io_rows])
    return FileEvents(
        sends,
        concatenate([receives, completed_receives]),
        columns,
        completion,
        io_rows,
        io_write,
        np.maximum(io_bytes, 0),
    )


def _messages(p: Pass2, rank_file: RankFile, calls, c: Classes, persistent, enter, leave):
    """Message endpoints, world ranks: a send at its call's enter (blocking, Isend, a
    persistent send's start), a receive at its leave (blocking, Sendrecv's receive)."""
    rank, thread, rr, ps = rank_file.rank, rank_file.thread, p.g.requests[rank_file.rank], persistent.ps
    s = np.flatnonzero(c.is_send | c.is_isend)
    p_send = persistent.send
    sends = endpoints(
        len(s) + int(p_send.sum()),
        sender=rank,
        receiver=np.concatenate([calls["peer"][s], rr.peer[ps][p_send]]),
        comm=np.concatenate([c.comm_gid[s], rr.comm[ps][p_send]]),
        tag=np.concatenate([calls["tag"][s], rr.tag[ps][p_send]]),
        bytes=np.concatenate([calls["bytes"][s], rr.bytes[ps][p_send]]),
        time=np.concatenate([enter[s], leave[persistent.call[p_send]]]),
        thread=thread,
    )
    time = sends["time"]
    if len(sends) > 1 and not (time[1:] >= time[:-1]).all():  # persistent starts among them (else in order)
        sends = take(sends, np.argsort(time, kind="stable"))
    r = np.flatnonzero(c.is_recv)  # rows, found once for the columns below (each strided in `calls`)
    receives = endpoints(
        len(r),
        sender=calls["source"][r],
        receiver=rank,
        comm=c.comm_gid[r],
        tag=np.where(c.is_sendrecv[r], calls["recv_tag"][r], calls["tag"][r]),
        bytes=calls["recv_bytes"][r],
        time=leave[r],
        thread=thread,
    )
    return sends, receives


def _call_columns(p: Pass2, rank_file: RankFile, calls, c: Classes, enter, leave):
    """Per call, its OTF2 operation and the columns it reads (CallColumns), and the
    completions of one-sided operations in the calls that complete them."""
    g, n = p.g, len(calls)
    columns = CallColumns(n)
    columns["enter"], columns["leave"] = enter, leave
    op = np.zeros(n, np.uint8)
    op[c.is_send], op[c.is_recv], op[c.is_sendrecv] = OP_SEND, OP_RECV, OP_SENDRECV
    op[c.is_isend], op[c.is_irecv], op[c.is_icollective] = OP_ISEND, OP_IRECV_REQUEST, OP_ICOLLECTIVE
    op[c.is_collective] = OP_COLLECTIVE
    op_of = semantics.per_call(rank_file, c.codes, lambda name, _: semantics.collective_op_value(name), np.int64)
    collective = c.is_collective | c.is_icollective
    columns["peer"] = np.where(
        collective,
        shown_ranks(g, calls["root"], c.comm_gid, c.root_local),
        shown_ranks(g, calls["peer"], c.comm_gid, c.peer_local),
    )
    columns["comm"] = np.where(c.has_comm, p.comm_refs[c.comm_gid], NONE32)
    columns["tag"] = np.where(collective, op_of, calls["tag"].astype(np.int64) & NONE32)
    columns["bytes"] = np.maximum(calls["bytes"], 0)
    columns["request"] = c.request_id
    columns["recv_peer"] = shown_ranks(g, calls["source"], c.comm_gid, c.source_local)
    columns["recv_tag"] = calls["recv_tag"].astype(np.int64) & NONE32
    columns["recv_bytes"] = np.maximum(calls["recv_bytes"], 0)
    receive_only = c.is_recv & ~c.is_sendrecv  # OTF2's MpiRecv: the sender, the bytes received
    columns["peer"][receive_only] = columns["recv_peer"][receive_only]
    columns["bytes"][receive_only] = columns["recv_bytes"][receive_only]
    _io_columns(p, rank_file, calls, c, op, columns)
    at_syncs = _rma_columns(p, rank_file, calls, c, op, columns)
    columns["op"] = op
    return columns, at_syncs


def _io_columns(p: Pass2, rank_file, calls, c: Classes, op, columns) -> None:
    """MPI-IO: reads and writes as I/O operations on the rank's handle of the file (defined
    at its first use), File_open and File_close as the handle's creation and destruction."""
    kinds, comm_gid, started, io_write = c.kinds, c.comm_gid, c.started, c.io_write
    open_rows, close_rows = (_with_file(calls, kinds({kind})) for kind in ("file_open", "file_close"))
    for i in np.union1d(c.io_rows, np.concatenate([open_rows, close_rows])).tolist():
        comm = p.archive.comms.get(int(comm_gid[i])) if comm_gid[i] >= 0 else None
        columns["comm"][i] = io_handle(p, rank_file, int(calls["file"][i]), comm)
    rows = c.io_rows
    op[rows] = np.where(started[rows], OP_IO_NONBLOCKING, OP_IO)
    columns["tag"][rows] = np.where(io_write[rows], IO_MODE_WRITE, IO_MODE_READ)
    collective = semantics.per_call(rank_file, c.codes[rows], lambda name, _: semantics.collective_io(name), bool)
    columns["recv_tag"][rows] = np.where(collective, IO_FLAG_COLLECTIVE, 0)
    columns["request"][rows] = np.where(started[rows], columns["request"][rows], BLOCKING_IO | rows.astype(np.uint64))
    reads = rows[~io_write[rows] & c.io_counted]
    columns["bytes"][reads] = calls["recv_bytes"][reads]
    op[open_rows], op[close_rows] = OP_IO_CREATE, OP_IO_DESTROY
    mode = calls["tag"][open_rows].astype(np.int64)
    columns["tag"][open_rows] = mode & 0xF  # OTF2's access mode
    columns["recv_tag"][open_rows] = np.where(mode & FILE_MODE_CREATE, IO_CREATION_CREATE, 0) | np.where(
        mode & FILE_MODE_EXCLUSIVE, IO_CREATION_EXCLUSIVE, 0
    )


def _with_file(calls: np.ndarray, of_kind: np.ndarray) -> np.ndarray:
    """The rows of the calls of a kind (a mask) that name a file, ascending: the file
    column read at those rows only (a pass over a column reads every record)."""
    rows = np.flatnonzero(of_kind)
    return rows[calls["file"][rows] >= 0]


def _rma_columns(p: Pass2, rank_file, calls, c: Classes, op, columns) -> np.ndarray:
    """One-sided operations on their merged window (an OTF2 RmaWin): put, get or atomic;
    the completions (COMPLETION_FIELDS) of those without a request, in the calls that
    complete them (qmpigen.trace.rma; none where the trace shows no such call)."""
    kinds, started, done = c.kinds, c.started, np.zeros(0, COMPLETION_DTYPE)
    rows = np.flatnonzero(kinds(semantics.RMA))
    rows = rows[(calls["window"][rows] >= 0) & (calls["peer"][rows] >= 0)]
    if not len(rows):
        return done
    tables = p.g.window_tables.get(rank_file.rank, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    gid = lookup(*tables, calls["window"][rows])
    rows, gid = rows[gid >= 0], gid[gid >= 0]
    if not len(rows):
        return done
    comm = np.array([p.g.window_comm[int(w)] for w in gid.tolist()], np.int64)
    target = shown_ranks(p.g, calls["peer"][rows], comm, local_ranks(p.g, calls["peer"][rows], comm))
    columns["comm"][rows] = [window_ref(p, int(w)) for w in gid.tolist()]
    columns["peer"][rows] = target
    put, get = kinds({"rma_put"})[rows], kinds({"rma_get"})[rows]
    atomic = semantics.per_call(
        rank_file, c.codes[rows], lambda name, _: RMA_ATOMIC + semantics.rma_atomic_type(name), np.int64
    )
    columns["tag"][rows] = np.select([put, get], [RMA_PUT, RMA_GET], atomic)
    columns["request"][rows] = np.where(started[rows], columns["request"][rows], BLOCKING_IO | rows.astype(np.uint64))
    op[rows] = OP_RMA_REQUEST  # its completion, if any, where it completes
    scope = semantics.per_call(rank_file, c.codes, lambda name, _: semantics.RMA_COMPLETES.get(name, 0), np.int64)
    syncs = np.flatnonzero((scope > 0) & (calls["window"] >= 0))
    blocking = ~started[rows]
    at = completing_call(
        rows[blocking],
        calls["window"][rows[blocking]],
        calls["peer"][rows[blocking]],
        syncs,
        calls["window"][syncs],
        calls["peer"][syncs],
        scope[syncs],
    )
    completed = rows[blocking][at >= 0]
    done = np.zeros(len(completed), done.dtype)
    done["call"], done["kind"] = at[at >= 0], COMPLETE_RMA
    done["request"], done["comm"] = columns["request"][completed], columns["comm"][completed]
    return done
