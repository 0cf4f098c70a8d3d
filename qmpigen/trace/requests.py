"""`qmpigen trace`, pass 1's requests: every call that starts a request (a nonblocking
operation of any kind) or defines a persistent one, per rank; persistent starts given
their init's operation; each Wait/Test completion tied to its start (match.match_requests).
What pass 2 (events.py) writes completions from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Tuple

import numpy as np

from . import semantics
from .layout import KINDS
from .match import match_requests
from .read import RankFile

START_DTYPE = np.dtype(
    [
        ("handle", "<u8"),
        ("time", "<i8"),
        ("kind", "u1"),  # the starting call's kind (index in layout.KINDS)
        ("send", "?"),
        ("comm", "<i4"),
        ("peer", "<i4"),  # a receive's source; a collective's root
        ("tag", "<i4"),
        ("bytes", "<i8"),
        ("recv_bytes", "<i8"),
        ("object", "<i4"),  # I/O: the file id; one-sided: the window id
        ("op", "u1"),  # a collective's OTF2 CollectiveOp
    ]
)


@dataclass
class RankRequests:
    """A rank's request starts over all its files (file order)."""

    request_id: np.ndarray  # numbered across the merged trace
    kind: np.ndarray  # the starting call's kind (persistent starts: their init's)
    op: np.ndarray  # collectives: OTF2 CollectiveOp
    recv_bytes: np.ndarray
    object: np.ndarray  # file or window id (the rank's own)
    is_isend: np.ndarray
    comm: np.ndarray  # merged communicator id
    peer: np.ndarray  # world rank (persistent starts: from their Send_init/Recv_init)
    tag: np.ndarray
    bytes: np.ndarray
    valid: np.ndarray  # False: a persistent start whose init was not seen


def fill_start(start: np.ndarray, rank_file: RankFile, calls: np.ndarray, rows: np.ndarray) -> None:
    """A request start (or persistent init) per call of `rows`: its kind, whether it is a
    send, and its message (a receive's peer is its source)."""
    func = calls["func"][rows]
    start["kind"] = semantics.per_call(rank_file, func, lambda _, kind: KINDS.index(kind), np.uint8)
    start["send"] = semantics.of_kinds(rank_file, func, semantics.REQUEST_SENDS | semantics.PERSISTENT_SENDS)
    receive = semantics.of_kinds(rank_file, func, semantics.REQUEST_RECEIVES | semantics.PERSISTENT_RECEIVES)
    collective = semantics.of_kinds(rank_file, func, semantics.REQUEST_COLLECTIVES | semantics.PERSISTENT_COLLECTIVES)
    start["comm"], start["tag"] = calls["comm"][rows], calls["tag"][rows]
    start["peer"] = np.where(
        receive, calls["source"][rows], np.where(collective, calls["root"][rows], calls["peer"][rows])
    )
    start["recv_bytes"] = calls["recv_bytes"][rows]
    start["object"] = np.where(calls["window"][rows] >= 0, calls["window"][rows], calls["file"][rows])
    start["op"] = semantics.per_call(rank_file, func, lambda name, _: semantics.collective_op_value(name), np.uint8)
    start["bytes"] = np.where(
        semantics.of_kinds(rank_file, func, semantics.IO_READS) & (calls["recv_bytes"][rows] > 0),
        calls["recv_bytes"][rows],
        calls["bytes"][rows],
    )


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


def lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[i] where keys[i] == query (keys sorted), else -1: costs follow the ids
    defined, not an id's value."""
    query = np.asarray(query, np.int64)
    if len(keys) == 0:
        return np.full(len(query), -1, np.int64)
    at = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[at] == query, values[at], -1)


def match_rank_requests(files: List[Any], next_id: int, comm_table: Tuple[np.ndarray, np.ndarray]) -> RankRequests:
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
        for name in ("kind", "send", "comm", "peer", "tag", "bytes", "recv_bytes", "object", "op"):
            start[name][persistent] = np.where(init >= 0, inits[name][np.maximum(init, 0)], 0) if len(inits) else 0
    for f, offset in zip(files, offsets.tolist()):
        f.start_offset = offset
        f.done_start = match_requests(start["handle"][valid], start["time"][valid], f.done_handle, f.done_time)
        f.done_start = np.where(
            f.done_start >= 0, np.flatnonzero(valid)[np.maximum(f.done_start, 0)] if valid.any() else -1, -1
        )
    return RankRequests(
        np.arange(next_id, next_id + int(offsets[-1]), dtype=np.uint64),
        start["kind"].copy(),
        start["op"].copy(),
        start["recv_bytes"].astype(np.int64),
        start["object"].astype(np.int64),
        start["send"].copy(),
        lookup(*comm_table, start["comm"]),
        start["peer"].astype(np.int64),
        start["tag"].astype(np.int64),
        start["bytes"].astype(np.int64),
        valid,
    )
