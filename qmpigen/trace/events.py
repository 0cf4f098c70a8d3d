"""`qmpigen trace`, pass 2 for one rank file: what its calls become, from their functions'
kinds (semantics.py), with numpy over all of a file's calls at once.

  * message endpoints (sends and receives, world ranks) for matching: blocking sends,
    receives and Sendrecv's two sides, Isend/Irecv/Imrecv and persistent starts, and
    completed receives;
  * per call, its OTF2 operation (otf2_out's OP_*) and the columns it reads: messages,
    collectives (root, bytes sent and received), nonblocking collectives, MPI-IO
    operations on I/O handles (created at File_open, destroyed at File_close), one-sided
    operations on RMA windows;
  * per completed request, its completion event (otf2_out's COMPLETE_*), by what its
    start was: a send, a receive, a collective, I/O or a one-sided operation;
  * the I/O calls, for the timeline's I/O lane and picture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import semantics
from .gather import Gathered
from .layout import FILE_MODES, KINDS
from .match import ENDPOINT_DTYPE, take
from .otf2_ops import (
    CANCELLED,
    COMPLETE_COLLECTIVE,
    COMPLETE_IO,
    COMPLETE_IRECV,
    COMPLETE_ISEND,
    COMPLETE_RMA,
    COMPLETION_FIELDS,
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
    START_COLLECTIVE,
    START_IRECV,
    START_ISEND,
    CallColumns,
)
from .read import CALL_STATUS_BYTES, REQUEST_CANCELLED, REQUEST_FREED, RankFile
from .requests import lookup
from .rma import completing_call

FILE_MODE_CREATE, FILE_MODE_EXCLUSIVE = (value for name, value, _ in FILE_MODES[:2])
IO_CREATION_CREATE, IO_CREATION_EXCLUSIVE = 1, 8  # OTF2_IO_CREATION_FLAG_*

NONE32 = 0xFFFFFFFF
BLOCKING_IO = np.uint64(1) << np.uint64(63)  # blocking I/O's matching ids, apart from request ids


@dataclass
class Pass2:
    """What pass 2 keeps across files."""

    g: Gathered
    comm_refs: np.ndarray  # merged communicator -> OTF2 Comm ref (index -1: none)
    archive: Any  # Otf2Writer or None
    io_handles: Dict[Tuple[int, int], int] = field(default_factory=dict)  # (rank, file id) -> IoHandle ref
    window_refs: Dict[int, int] = field(default_factory=dict)  # merged window -> RmaWin ref


@dataclass
class FileEvents:
    sends: np.ndarray
    receives: np.ndarray
    columns: Optional[CallColumns]  # CALL_FIELDS (with OTF2 only)
    completion: np.ndarray  # COMPLETION_FIELDS, by call
    io_rows: np.ndarray  # calls that read or wrote a file
    io_write: np.ndarray  # of those, the writes
    io_bytes: np.ndarray


def _local(
    g: Gathered,
    world: np.ndarray,
    gid_of: np.ndarray,
    tables: Optional[Dict[int, Tuple[np.ndarray, np.ndarray]]] = None,
) -> np.ndarray:
    """World ranks -> ranks in each one's communicator (-1: not a member); with
    g.shown_rank, in its OTF2 group (its members with a file)."""
    tables = g.local_rank if tables is None else tables
    world = world.astype(np.int64)
    result = np.full(len(world), -1, np.int64)
    rows = np.flatnonzero((gid_of >= 0) & (world >= 0) & (world < g.world_size))
    gids = gid_of[rows]
    for gid in np.unique(gids).tolist():
        mine = rows[gids == gid]
        result[mine] = lookup(*tables[gid], world[mine])
    return result


def _shown(g: Gathered, world: np.ndarray, gid_of: np.ndarray, local: np.ndarray) -> np.ndarray:
    """What OTF2 events say of world ranks whose ranks in their communicators are
    `local`: their ranks in its OTF2 group, NONE32 for a rank without a file."""
    if g.shown_rank is not g.local_rank:
        local = _local(g, world, gid_of, g.shown_rank)
    return np.where(local >= 0, local, NONE32)


def _endpoints(n: int, **columns) -> np.ndarray:
    e = np.empty(n, ENDPOINT_DTYPE)
    for name, value in columns.items():
        e[name] = value
    return e


def _io_handle(p: Pass2, rank_file: RankFile, file_id: int, comm) -> int:
    key = (rank_file.rank, file_id)
    if key not in p.io_handles:
        name = rank_file.files.get(file_id, (f"file {file_id}", 0))[0]
        p.io_handles[key] = p.archive.io_handle(rank_file.rank, name, comm)._ref
    return p.io_handles[key]


def _window_ref(p: Pass2, gid: int) -> int:
    if gid not in p.window_refs:
        comm = p.g.window_comm[gid]
        p.window_refs[gid] = p.archive.window(gid, p.archive.comms[comm])._ref
    return p.window_refs[gid]


def file_events(
    p: Pass2, info, rank_file: RankFile, calls: np.ndarray, enter: np.ndarray, leave: np.ndarray, position
) -> FileEvents:
    """`calls` in time order, `position`: file index -> time-order index."""
    g = p.g
    rank, thread, n = rank_file.rank, rank_file.thread, len(calls)

    def kinds(wanted) -> np.ndarray:
        return semantics.of_kinds(rank_file, calls["func"], wanted)

    comm_gid = lookup(*g.comm_tables[rank], calls["comm"])
    has_comm = comm_gid >= 0
    peer_local = _local(g, calls["peer"], comm_gid)
    source_local = _local(g, calls["source"], comm_gid)
    root_local = _local(g, calls["root"], comm_gid)
    to_peer = has_comm & (calls["peer"] >= 0) & (peer_local >= 0)
    from_source = has_comm & (calls["source"] >= 0) & (source_local >= 0)
    is_send = kinds(semantics.SENDS) & to_peer
    is_recv = kinds(semantics.RECEIVES) & from_source
    is_sendrecv = kinds({"sendrecv"}) & is_send & is_recv
    started = np.zeros(n, bool)
    started[position[info.starts]] = True
    request_id = np.zeros(n, np.uint64)
    rr = g.requests[rank]
    request_id[position[info.starts]] = rr.request_id[info.start_offset : info.start_offset + len(info.starts)]
    is_isend = started & kinds(semantics.REQUEST_SENDS) & to_peer
    is_irecv = started & kinds(semantics.REQUEST_RECEIVES) & has_comm
    is_icollective = started & kinds(semantics.REQUEST_COLLECTIVES) & has_comm
    is_collective = kinds(semantics.COLLECTIVES) & has_comm
    is_io = kinds(semantics.IO) & (calls["file"] >= 0)
    io_write = kinds(semantics.IO_WRITES)
    # persistent starts (STARTED records after Start/Startall): their init's operation
    done = rank_file.completions
    ps = info.start_offset + len(info.starts) + np.arange(len(info.started))
    p_kind = rr.kind[ps] if len(ps) else np.zeros(0, np.uint8)
    p_ok = rr.valid[ps] & (rr.comm[ps] >= 0)
    p_peer_local = _local(g, rr.peer[ps], rr.comm[ps])
    p_send = p_ok & rr.is_isend[ps] & (p_peer_local >= 0)
    p_recv = p_ok & np.isin(p_kind, [KINDS.index(k) for k in semantics.PERSISTENT_RECEIVES])
    p_coll = p_ok & np.isin(p_kind, [KINDS.index(k) for k in semantics.PERSISTENT_COLLECTIVES])
    p_call = position[done["call"][info.started]]

    # message endpoints, world ranks: a send at its call's enter, a receive at its leave
    s = is_send | is_isend
    sends = _endpoints(
        int(s.sum()) + int(p_send.sum()),
        sender=rank,
        receiver=np.concatenate([calls["peer"][s], rr.peer[ps][p_send]]),
        comm=np.concatenate([comm_gid[s], rr.comm[ps][p_send]]),
        tag=np.concatenate([calls["tag"][s], rr.tag[ps][p_send]]),
        bytes=np.concatenate([calls["bytes"][s], rr.bytes[ps][p_send]]),
        time=np.concatenate([enter[s], leave[p_call[p_send]]]),
        thread=thread,
    )
    sends = take(sends, np.argsort(sends["time"], kind="stable"))
    recv_tag = np.where(is_sendrecv, calls["recv_tag"], calls["tag"])
    receives = [
        _endpoints(
            int(is_recv.sum()),
            sender=calls["source"][is_recv],
            receiver=rank,
            comm=comm_gid[is_recv],
            tag=recv_tag[is_recv],
            bytes=calls["recv_bytes"][is_recv],
            time=leave[is_recv],
            thread=thread,
        )
    ]

    # completions, by what the request's start was
    k = info.done_start
    found = k >= 0
    k = np.where(found, k, 0)
    no_start = len(rr.request_id) == 0
    start_kind = np.where(found, 255 if no_start else rr.kind[k], 255)

    def start_is(wanted) -> np.ndarray:
        return found & np.isin(start_kind, [KINDS.index(w) for w in wanted])

    flags = done["flags"][info.done]
    source = done["source"][info.done].astype(np.int64)
    done_gid = np.where(found, -1 if no_start else rr.comm[k], -1)
    # an I/O request's status says nothing of cancellation: ROMIO cannot cancel I/O, and
    # MPICH 4.0's ROMIO leaves the status's cancelled bit set on completed requests
    cancelled = found & (flags & REQUEST_CANCELLED != 0) & ~start_is(semantics.REQUEST_IO)
    freed = flags & REQUEST_FREED != 0
    live = ~cancelled & ~freed
    send_done = start_is(semantics.REQUEST_SENDS | semantics.PERSISTENT_SENDS) & ~cancelled
    recv_done = (
        start_is(semantics.REQUEST_RECEIVES | semantics.PERSISTENT_RECEIVES)
        & live
        & (source >= 0)
        & (done_gid >= 0)
        & (source < g.comm_size[done_gid])
    )
    coll_done = start_is(semantics.REQUEST_COLLECTIVES | semantics.PERSISTENT_COLLECTIVES) & live & (done_gid >= 0)
    io_done = start_is(semantics.REQUEST_IO) & live
    rma_done = start_is(semantics.REQUEST_RMA) & live
    keep = send_done | recv_done | coll_done | io_done | rma_done | cancelled
    m = int(keep.sum())
    n_started = int((p_send | p_recv | p_coll).sum())
    completion = np.zeros(m + n_started, [(name, dtype) for name, dtype in COMPLETION_FIELDS])
    kk = k[keep]
    completion["call"][:m] = position[done["call"][info.done][keep]]
    completion["request"][:m] = rr.request_id[kk] if m else 0
    kind = np.select(
        [cancelled[keep], send_done[keep], recv_done[keep], coll_done[keep], io_done[keep]],
        [CANCELLED, COMPLETE_ISEND, COMPLETE_IRECV, COMPLETE_COLLECTIVE, COMPLETE_IO],
        COMPLETE_RMA,
    )
    completion["kind"][:m] = kind
    recv_k, coll_k = recv_done[keep], coll_done[keep]
    r = np.flatnonzero(recv_done)
    sender_world = np.full(len(source), -1, np.int64)
    for gid in np.unique(done_gid[r]).tolist():
        mine = r[done_gid[r] == gid]
        sender_world[mine] = g.member_table[gid][source[mine]]
    sender = _shown(g, sender_world, done_gid, np.where(recv_done, source, -1))
    completion["sender"][:m] = np.where(recv_k, sender[keep], 0)
    if m:
        root = _shown(g, rr.peer[kk], rr.comm[kk], _local(g, rr.peer[kk], rr.comm[kk]))
        completion["sender"][:m] = np.where(coll_k, root, completion["sender"][:m])
    completion["comm"][:m] = np.where(recv_k | coll_k, p.comm_refs[done_gid[keep]], 0)
    completion["tag"][:m] = np.where(
        recv_k, done["tag"][info.done][keep].astype(np.int64) & NONE32, np.where(coll_k, rr.op[kk] if m else 0, 0)
    )
    completion["bytes"][:m] = np.where(
        recv_k, np.maximum(done["bytes"][info.done][keep], 0), np.where(coll_k | io_done[keep], rr.bytes[kk], 0)
    )
    completion["recv_bytes"][:m] = np.where(coll_k, np.maximum(rr.recv_bytes[kk], 0), 0)
    if p.archive is not None and m:
        for j in np.flatnonzero(io_done[keep] | rma_done[keep]).tolist():
            obj = int(rr.object[kk[j]])
            if io_done[keep][j]:
                completion["comm"][j] = _io_handle(p, rank_file, obj, None)
            else:
                gid = lookup(*g.window_tables.get(rank, (np.zeros(0), np.zeros(0))), np.array([obj]))[0]
                completion["comm"][j] = _window_ref(p, int(gid)) if gid >= 0 else NONE32
    pstart = p_send | p_recv | p_coll
    completion["call"][m:] = p_call[pstart]
    completion["request"][m:] = rr.request_id[ps[pstart]]
    completion["kind"][m:] = np.select([p_send[pstart], p_recv[pstart]], [START_ISEND, START_IRECV], START_COLLECTIVE)
    completion["sender"][m:] = _shown(g, rr.peer[ps], rr.comm[ps], p_peer_local)[pstart]
    completion["comm"][m:] = p.comm_refs[rr.comm[ps][pstart]]
    completion["tag"][m:] = rr.tag[ps][pstart] & NONE32
    completion["bytes"][m:] = np.maximum(rr.bytes[ps][pstart], 0)
    completion = take(completion, np.argsort(completion["call"], kind="stable"))
    receives.append(
        _endpoints(
            len(r),
            sender=sender_world[r],
            receiver=rank,
            comm=done_gid[r],
            tag=done["tag"][info.done][r],
            bytes=done["bytes"][info.done][r],
            time=leave[position[done["call"][info.done][r]]],
            thread=thread,
        )
    )

    columns = None
    if p.archive is not None:
        columns = CallColumns(n)
        columns["enter"], columns["leave"] = enter, leave
        op = np.zeros(n, np.uint8)
        op[is_send], op[is_recv], op[is_sendrecv] = OP_SEND, OP_RECV, OP_SENDRECV
        op[is_isend], op[is_irecv], op[is_icollective] = OP_ISEND, OP_IRECV_REQUEST, OP_ICOLLECTIVE
        op[is_collective] = OP_COLLECTIVE
        op_of = semantics.per_call(
            rank_file, calls["func"], lambda name, _: semantics.collective_op_value(name), np.int64
        )
        collective = is_collective | is_icollective
        columns["peer"] = np.where(
            collective, _shown(g, calls["root"], comm_gid, root_local), _shown(g, calls["peer"], comm_gid, peer_local)
        )
        columns["comm"] = np.where(has_comm, p.comm_refs[comm_gid], NONE32)
        columns["tag"] = np.where(collective, op_of, calls["tag"].astype(np.int64) & NONE32)
        columns["bytes"] = np.maximum(calls["bytes"], 0)
        columns["request"] = request_id
        columns["recv_peer"] = _shown(g, calls["source"], comm_gid, source_local)
        columns["recv_tag"] = calls["recv_tag"].astype(np.int64) & NONE32
        columns["recv_bytes"] = np.maximum(calls["recv_bytes"], 0)
        receive_only = is_recv & ~is_sendrecv  # OTF2's MpiRecv: the sender, the bytes received
        columns["peer"][receive_only] = columns["recv_peer"][receive_only]
        columns["bytes"][receive_only] = columns["recv_bytes"][receive_only]
        _io_columns(p, rank_file, calls, kinds, comm_gid, started, is_io, io_write, op, columns)
        at_syncs = _rma_columns(p, rank_file, calls, kinds, started, op, columns)
        if len(at_syncs):  # the completions stay ordered by call, as the event loop walks them
            completion = np.concatenate([completion, at_syncs])
            completion = take(completion, np.argsort(completion["call"], kind="stable"))
        columns["op"] = op
    io_rows = np.flatnonzero(is_io)
    io_bytes = np.where(
        io_write, calls["bytes"], np.where(calls["recv_bytes"] > 0, calls["recv_bytes"], calls["bytes"])
    )
    return FileEvents(
        sends,
        np.concatenate(receives),
        columns,
        completion,
        io_rows,
        io_write[io_rows],
        np.maximum(io_bytes[io_rows], 0),
    )


def _io_columns(p: Pass2, rank_file, calls, kinds, comm_gid, started, is_io, io_write, op, columns) -> None:
    """MPI-IO: reads and writes as I/O operations on the rank's handle of the file (defined
    at its first use), File_open and File_close as the handle's creation and destruction."""
    is_open = kinds({"file_open"}) & (calls["file"] >= 0)
    is_close = kinds({"file_close"}) & (calls["file"] >= 0)
    for i in np.flatnonzero(is_io | is_open | is_close).tolist():
        comm = p.archive.comms.get(int(comm_gid[i])) if comm_gid[i] >= 0 else None
        columns["comm"][i] = _io_handle(p, rank_file, int(calls["file"][i]), comm)
    rows = np.flatnonzero(is_io)
    op[rows] = np.where(started[rows], OP_IO_NONBLOCKING, OP_IO)
    columns["tag"][rows] = np.where(io_write[rows], IO_MODE_WRITE, IO_MODE_READ)
    collective = semantics.per_call(rank_file, calls["func"], lambda name, _: semantics.collective_io(name), bool)
    columns["recv_tag"][rows] = np.where(collective[rows], IO_FLAG_COLLECTIVE, 0)
    columns["request"][rows] = np.where(started[rows], columns["request"][rows], BLOCKING_IO | rows.astype(np.uint64))
    counted = (calls["recv_bytes"][rows] > 0) | (calls["flags"][rows] & CALL_STATUS_BYTES != 0)  # a short read: 0 too
    reads = rows[~io_write[rows] & counted]
    columns["bytes"][reads] = calls["recv_bytes"][reads]
    op[is_open], op[is_close] = OP_IO_CREATE, OP_IO_DESTROY
    mode = calls["tag"][is_open].astype(np.int64)
    columns["tag"][is_open] = mode & 0xF  # OTF2's access mode
    columns["recv_tag"][is_open] = np.where(mode & FILE_MODE_CREATE, IO_CREATION_CREATE, 0) | np.where(
        mode & FILE_MODE_EXCLUSIVE, IO_CREATION_EXCLUSIVE, 0
    )


def _rma_columns(p: Pass2, rank_file, calls, kinds, started, op, columns) -> np.ndarray:
    """One-sided operations on their merged window (an OTF2 RmaWin): put, get or atomic;
    the completions (COMPLETION_FIELDS) of those without a request, in the calls that
    complete them (qmpigen.trace.rma; none where the trace shows no such call)."""
    done = np.zeros(0, [(name, dtype) for name, dtype in COMPLETION_FIELDS])
    rows = np.flatnonzero(kinds(semantics.RMA) & (calls["window"] >= 0) & (calls["peer"] >= 0))
    if not len(rows):
        return done
    tables = p.g.window_tables.get(rank_file.rank, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    gid = lookup(*tables, calls["window"][rows])
    rows, gid = rows[gid >= 0], gid[gid >= 0]
    if not len(rows):
        return done
    comm = np.array([p.g.window_comm[int(w)] for w in gid.tolist()], np.int64)
    target = _shown(p.g, calls["peer"][rows], comm, _local(p.g, calls["peer"][rows], comm))
    columns["comm"][rows] = [_window_ref(p, int(w)) for w in gid.tolist()]
    columns["peer"][rows] = target
    put, get = kinds({"rma_put"})[rows], kinds({"rma_get"})[rows]
    atomic = semantics.per_call(
        rank_file, calls["func"][rows], lambda name, _: RMA_ATOMIC + semantics.rma_atomic_type(name), np.int64
    )
    columns["tag"][rows] = np.select([put, get], [RMA_PUT, RMA_GET], atomic)
    columns["request"][rows] = np.where(started[rows], columns["request"][rows], BLOCKING_IO | rows.astype(np.uint64))
    op[rows] = OP_RMA_REQUEST  # its completion, if any, where it completes
    scope = semantics.per_call(rank_file, calls["func"], lambda name, _: semantics.RMA_COMPLETES.get(name, 0), np.int64)
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
