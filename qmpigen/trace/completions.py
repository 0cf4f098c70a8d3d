"""`qmpigen trace`, pass 2 for one rank file: its completion-side events, from its
COMPLETION records, by what each request's start was (its rank's RankRequests): a
completed send, receive (whose sender the status says: a message endpoint too),
collective, I/O or one-sided operation, a cancelled request; and the starts of
persistent requests (STARTED records after Start/Startall), with their init's
operation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from . import semantics
from .match import concatenate, take
from .otf2_ops import (
    CANCELLED,
    COMPLETE_COLLECTIVE,
    COMPLETE_IO,
    COMPLETE_IRECV,
    COMPLETE_ISEND,
    COMPLETE_RMA,
    COMPLETION_FIELDS,
    START_COLLECTIVE,
    START_IRECV,
    START_ISEND,
)
from .pass2 import NONE32, Pass2, endpoints, io_handle, local_ranks, shown_ranks, window_ref
from .read import REQUEST_CANCELLED, REQUEST_FREED, RankFile
from .requests import lookup

COMPLETION_DTYPE = [(name, dtype) for name, dtype in COMPLETION_FIELDS]


@dataclass(frozen=True)
class Persistent:
    """A file's persistent starts (its STARTED completion records), with their init's
    operation: index `ps` in its rank's RankRequests, the call that started each (time
    order), and which are sends, receives, collectives."""

    ps: np.ndarray
    call: np.ndarray
    peer_local: np.ndarray
    send: np.ndarray
    recv: np.ndarray
    coll: np.ndarray


def persistent_starts(p: Pass2, info, rank_file: RankFile, position: np.ndarray) -> Persistent:
    g, rr = p.g, p.g.requests[rank_file.rank]
    ps = info.start_offset + len(info.starts) + np.arange(len(info.started))
    kind = rr.kind[ps] if len(ps) else np.zeros(0, np.uint8)
    ok = rr.valid[ps] & (rr.comm[ps] >= 0)
    peer_local = local_ranks(g, rr.peer[ps], rr.comm[ps])
    return Persistent(
        ps,
        position[rank_file.completions["call"][info.started]],
        peer_local,
        ok & rr.is_isend[ps] & (peer_local >= 0),
        ok & semantics.kinds_in(kind, semantics.PERSISTENT_RECEIVES),
        ok & semantics.kinds_in(kind, semantics.PERSISTENT_COLLECTIVES),
    )


def completion_events(
    p: Pass2, info, rank_file: RankFile, position: np.ndarray, leave: np.ndarray, persistent: Persistent
) -> Tuple[np.ndarray, np.ndarray]:
    """The file's completion-side events (COMPLETION_FIELDS, ordered by call), and its
    completed receives as message endpoints."""
    g, rr, done = p.g, p.g.requests[rank_file.rank], rank_file.completions
    k = info.done_start
    found = k >= 0
    k = np.where(found, k, 0)
    no_start = len(rr.request_id) == 0
    start_kind = np.where(found, 255 if no_start else rr.kind[k], 255)

    def start_is(wanted) -> np.ndarray:
        return found & semantics.kinds_in(start_kind, wanted)

    flags = done["flags"][info.done]
    source = done["source"][info.done].astype(np.int64)
    done_gid = np.where(found, -1 if no_start else rr.comm[k], -1)
    # an I/O request's status says nothing of cancellation: ROMIO cannot cancel I/O, and
    # MPICH 4.0's ROMIO leaves the status's cancelled bit set on completed requests
    cancelled = found & (flags & REQUEST_CANCELLED != 0) & ~start_is(semantics.REQUEST_IO)
    live = ~cancelled & (flags & REQUEST_FREED == 0)
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
    kind = np.select(
        [cancelled[keep], send_done[keep], recv_done[keep], coll_done[keep], io_done[keep]],
        [CANCELLED, COMPLETE_ISEND, COMPLETE_IRECV, COMPLETE_COLLECTIVE, COMPLETE_IO],
        COMPLETE_RMA,
    )
    r = np.flatnonzero(recv_done)
    sender_world = np.full(len(source), -1, np.int64)
    for gid in np.unique(done_gid[r]).tolist():
        mine = r[done_gid[r] == gid]
        sender_world[mine] = g.member_table[gid][source[mine]]
    sender = shown_ranks(g, sender_world, done_gid, np.where(recv_done, source, -1))
    completed = _completed(p, info, rank_file, position, keep, kind, k, sender, done_gid, recv_done, coll_done)
    _on_objects(p, rank_file, completed, k[keep], io_done[keep], rma_done[keep])
    completion = concatenate([completed, _started(p, rank_file.rank, persistent)])
    receives = endpoints(
        len(r),
        sender=sender_world[r],
        receiver=rank_file.rank,
        comm=done_gid[r],
        tag=done["tag"][info.done][r],
        bytes=done["bytes"][info.done][r],
        time=leave[position[done["call"][info.done][r]]],
        thread=rank_file.thread,
    )
    return take(completion, np.argsort(completion["call"], kind="stable")), receives


def _completed(
    p: Pass2, info, rank_file, position, keep, kind, k, sender, done_gid, recv_done, coll_done
) -> np.ndarray:
    """The events of the completions kept (`keep` of the file's other completion records)."""
    g, rr, done = p.g, p.g.requests[rank_file.rank], rank_file.completions
    m = int(keep.sum())
    out = np.zeros(m, COMPLETION_DTYPE)
    kk = k[keep]
    out["call"] = position[done["call"][info.done][keep]]
    out["request"] = rr.request_id[kk] if m else 0
    out["kind"] = kind
    recv_k, coll_k = recv_done[keep], coll_done[keep]
    out["sender"] = np.where(recv_k, sender[keep], 0)
    if m:
        root = shown_ranks(g, rr.peer[kk], rr.comm[kk], local_ranks(g, rr.peer[kk], rr.comm[kk]))
        out["sender"] = np.where(coll_k, root, out["sender"])
    out["comm"] = np.where(recv_k | coll_k, p.comm_refs[done_gid[keep]], 0)
    out["tag"] = np.where(
        recv_k, done["tag"][info.done][keep].astype(np.int64) & NONE32, np.where(coll_k, rr.op[kk] if m else 0, 0)
    )
    io_k = kind == COMPLETE_IO
    out["bytes"] = np.where(
        recv_k, np.maximum(done["bytes"][info.done][keep], 0), np.where(coll_k | io_k, rr.bytes[kk], 0)
    )
    out["recv_bytes"] = np.where(coll_k, np.maximum(rr.recv_bytes[kk], 0), 0)
    return out


def _on_objects(p: Pass2, rank_file, completed, kk, io_done, rma_done) -> None:
    """Completed I/O on its file's handle, one-sided operations on their window."""
    if p.archive is None or not len(completed):
        return
    rr = p.g.requests[rank_file.rank]
    for j in np.flatnonzero(io_done | rma_done).tolist():
        obj = int(rr.object[kk[j]])
        if io_done[j]:
            completed["comm"][j] = io_handle(p, rank_file, obj, None)
        else:
            gid = lookup(*p.g.window_tables.get(rank_file.rank, (np.zeros(0), np.zeros(0))), np.array([obj]))[0]
            completed["comm"][j] = window_ref(p, int(gid)) if gid >= 0 else NONE32


def _started(p: Pass2, rank: int, s: Persistent) -> np.ndarray:
    """The persistent starts, written as their init's operation starts."""
    rr = p.g.requests[rank]
    mine = s.send | s.recv | s.coll
    out = np.zeros(int(mine.sum()), COMPLETION_DTYPE)
    out["call"] = s.call[mine]
    out["request"] = rr.request_id[s.ps[mine]]
    out["kind"] = np.select([s.send[mine], s.recv[mine]], [START_ISEND, START_IRECV], START_COLLECTIVE)
    out["sender"] = shown_ranks(p.g, rr.peer[s.ps], rr.comm[s.ps], s.peer_local)[mine]
    out["comm"] = p.comm_refs[rr.comm[s.ps][mine]]
    out["tag"] = rr.tag[s.ps][mine] & NONE32
    out["bytes"] = np.maximum(rr.bytes[s.ps][mine], 0)
    return out
