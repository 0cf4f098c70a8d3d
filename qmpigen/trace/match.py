"""Requests and messages: ties each Wait/Test completion to its Isend/Irecv, lists every
send and receive with world ranks, and pairs them (MPI's non-overtaking order per
sender, receiver, communicator and tag)."""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .read import CALL_HAS_REQUEST, Call

SENDS = {"MPI_Send", "MPI_Ssend"}
COLLECTIVES = {"MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Comm_split", "MPI_Comm_dup",
               "MPI_Comm_free", "MPI_File_open", "MPI_File_close"}


@dataclass(frozen=True)
class Endpoint:
    """One side of a message: world ranks, the merged communicator, where and when."""

    sender: int
    receiver: int
    comm: int
    tag: int
    bytes: int
    time: int  # aligned ns: the send call's enter, the receive's completion (leave)
    thread: int


@dataclass
class Pending:
    """An Isend or Irecv whose completion has not been seen yet."""

    call: Call
    comm: int
    thread: int


class Requests:
    """Per rank: request handle -> the Isend/Irecv that made it (handles are reused only
    after completion, so the latest start with a handle is the one a completion ends)."""

    def __init__(self) -> None:
        self.pending: Dict[Tuple[int, int], Pending] = {}
        self.next_id = 1
        self.ids: Dict[int, int] = {}  # id(call) -> request id in the merged trace

    def start(self, rank: int, call: Call, comm: int, thread: int) -> int:
        self.pending[(rank, call.request)] = Pending(call, comm, thread)
        request_id = self.next_id
        self.next_id += 1
        self.ids[id(call)] = request_id
        return request_id

    def finish(self, rank: int, handle: int) -> Optional[Tuple[Pending, int]]:
        pending = self.pending.pop((rank, handle), None)
        if pending is None:
            return None
        return pending, self.ids.pop(id(pending.call))


def starts_request(call: Call) -> bool:
    return bool(call.flags & CALL_HAS_REQUEST) and call.func in ("MPI_Isend", "MPI_Irecv")


def match(sends: List[Endpoint], receives: List[Endpoint]) -> Tuple[List[Tuple[Endpoint, Endpoint]], int, int]:
    """Pairs in order per (sender, receiver, comm, tag); returns pairs, unmatched sends,
    unmatched receives."""
    queues: Dict[tuple, deque] = defaultdict(deque)
    for send in sorted(sends, key=lambda e: e.time):
        queues[(send.sender, send.receiver, send.comm, send.tag)].append(send)
    pairs = []
    unmatched_receives = 0
    for receive in sorted(receives, key=lambda e: e.time):
        queue = queues.get((receive.sender, receive.receiver, receive.comm, receive.tag))
        if queue:
            pairs.append((queue.popleft(), receive))
        else:
            unmatched_receives += 1
    return pairs, sum(len(q) for q in queues.values()), unmatched_receives
