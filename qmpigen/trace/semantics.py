"""What the merger makes of each function kind (qmpigen.mpi.roles, carried by the FUNCTION
records): which calls are messages, requests, collectives, I/O or one-sided operations,
and which OTF2 collective operation a collective is. The one place that says it:
gather.py, merge.py, otf2_out.py and docs/tracing.md's table read these sets."""

from __future__ import annotations

import functools
import weakref
from typing import Callable, Dict, FrozenSet, Iterable

import numpy as np

from .layout import KINDS
from .read import RankFile
from .rma import SCOPE_TARGET, SCOPE_WINDOW

# blocking point-to-point: the send side at the call's enter, the receive side at its leave
SENDS: FrozenSet[str] = frozenset({"send", "sendrecv"})
RECEIVES: FrozenSet[str] = frozenset({"recv", "mrecv", "sendrecv"})
# calls that start a request a Wait/Test completes later, by what the request is
REQUEST_SENDS: FrozenSet[str] = frozenset({"isend"})
REQUEST_RECEIVES: FrozenSet[str] = frozenset({"irecv", "imrecv"})
REQUEST_COLLECTIVES: FrozenSet[str] = frozenset({"icollective", "ineighbor"})
REQUEST_IO: FrozenSet[str] = frozenset({"file_read", "file_write"})
REQUEST_RMA: FrozenSet[str] = frozenset({"rma_put", "rma_get", "rma_atomic"})
REQUEST_STARTS: FrozenSet[str] = REQUEST_SENDS | REQUEST_RECEIVES | REQUEST_COLLECTIVES | REQUEST_IO | REQUEST_RMA
# persistent requests: each MPI_Start starts one instance of the init's operation
PERSISTENT_SENDS: FrozenSet[str] = frozenset({"send_init"})
PERSISTENT_RECEIVES: FrozenSet[str] = frozenset({"recv_init"})
PERSISTENT_COLLECTIVES: FrozenSet[str] = frozenset({"collective_init", "neighbor_init"})
PERSISTENT_INITS: FrozenSet[str] = PERSISTENT_SENDS | PERSISTENT_RECEIVES | PERSISTENT_COLLECTIVES
COLLECTIVES: FrozenSet[str] = frozenset({"collective", "neighbor"})
IO_READS: FrozenSet[str] = frozenset({"file_read"})
IO_WRITES: FrozenSet[str] = frozenset({"file_write"})
IO: FrozenSet[str] = IO_READS | IO_WRITES
RMA: FrozenSet[str] = frozenset({"rma_put", "rma_get", "rma_atomic"})

# Kinds whose counts and datatypes are bytes moved (trace_record.h's moves_data), and those
# whose status says what arrived (record_status: not MPI-IO's, whose status only repeats
# the count). The documentation's attribute table follows them.
DATA_KINDS: FrozenSet[str] = frozenset(
    {"sendrecv", "send_init", "recv_init", "isend", "send", "irecv", "recv", "imrecv", "mrecv"}
    | {"rma_get", "rma_put", "rma_atomic", "file_read", "file_write"}
    | {"neighbor_init", "ineighbor", "neighbor", "collective_init", "icollective", "collective"}
)
STATUS_KINDS: FrozenSet[str] = frozenset({"sendrecv", "recv", "mrecv", "probe"})
# What trace_requests.c records for the kinds it wraps by hand (no role describes them).
HAND_RECORDED: Dict[str, str] = {
    "completion": "count, request; a COMPLETION record per request completed (source, tag, bytes, cancelled)",
    "start": "count; a COMPLETION record per request started",
    "request_free": "request; a COMPLETION record (freed) for Request_free",
}

# The OTF2 events a call of each kind becomes (the documentation's; events.py writes them).
OTF2_EVENTS: Dict[str, str] = {
    "send": "MpiSend",
    "recv": "MpiRecv",
    "mrecv": "MpiRecv",
    "sendrecv": "MpiSend, MpiRecv",
    "isend": "MpiIsend; MpiIsendComplete in the Wait/Test that completes it",
    "irecv": "MpiIrecvRequest; MpiIrecv in the Wait/Test that completes it",
    "imrecv": "MpiIrecvRequest; MpiIrecv in the Wait/Test that completes it",
    "send_init": "at each Start: MpiIsend (completed as an Isend)",
    "recv_init": "at each Start: MpiIrecvRequest (completed as an Irecv)",
    "collective": "MpiCollectiveBegin, MpiCollectiveEnd (operation, root, bytes sent and received)",
    "neighbor": "MpiCollectiveBegin, MpiCollectiveEnd",
    "icollective": "NonBlockingCollectiveRequest; NonBlockingCollectiveComplete in its Wait/Test",
    "ineighbor": "NonBlockingCollectiveRequest; NonBlockingCollectiveComplete in its Wait/Test",
    "collective_init": "at each Start: NonBlockingCollectiveRequest (completed as a nonblocking one)",
    "neighbor_init": "at each Start: NonBlockingCollectiveRequest",
    "file_read": "IoOperationBegin (READ), IoOperationComplete; nonblocking: IoOperationIssued, Complete in its Wait/Test",
    "file_write": "IoOperationBegin (WRITE), IoOperationComplete; nonblocking: IoOperationIssued, Complete in its Wait/Test",
    "file_open": "IoCreateHandle (access mode, creation flags)",
    "file_close": "IoDestroyHandle",
    "file_meta": "a region; its arguments as attributes (offset and whence, size, displacement, atomicity)",
    "type_create": "a region; the datatype's shape as attributes (name, size, lower bound, extent), also on "
    "each call that names it",
    "rma_put": "RmaPut; RmaOpCompleteNonBlocking in the synchronisation that completes it (Rput: its Wait/Test)",
    "rma_get": "RmaGet; RmaOpCompleteNonBlocking in the synchronisation that completes it (Rget: its Wait/Test)",
    "rma_atomic": "RmaAtomic (type, bytes sent and received); RmaOpCompleteNonBlocking in the synchronisation "
    "that completes it",
    "rma_sync": "fence, complete, unlock, flush: RmaOpCompleteNonBlocking of the one-sided operations it completes",
    "completion": "the completion events of the requests it completes",
    "start": "the start events of the persistent requests it starts",
    "request_free": "Cancel: MpiRequestCancelled in the Wait/Test that completes the request",
}

# OTF2 CollectiveOp member per collective, by the function's base name: the name without
# MPI_, the nonblocking I, Neighbor_, _init and _c (MPI_Ialltoallv_c -> Alltoallv).
# Neighbourhood collectives are their non-neighbourhood namesakes: OTF2 has no
# members of their own.
COLLECTIVE_OPS: Dict[str, str] = {
    "Barrier": "BARRIER",
    "Bcast": "BCAST",
    "Gather": "GATHER",
    "Gatherv": "GATHERV",
    "Scatter": "SCATTER",
    "Scatterv": "SCATTERV",
    "Allgather": "ALLGATHER",
    "Allgatherv": "ALLGATHERV",
    "Alltoall": "ALLTOALL",
    "Alltoallv": "ALLTOALLV",
    "Alltoallw": "ALLTOALLW",
    "Allreduce": "ALLREDUCE",
    "Reduce": "REDUCE",
    "Reduce_scatter": "REDUCE_SCATTER",
    "Reduce_scatter_block": "REDUCE_SCATTER_BLOCK",
    "Scan": "SCAN",
    "Exscan": "EXSCAN",
}


def collective_base(name: str) -> str:
    """MPI_Ialltoallv_c -> Alltoallv; MPI_Neighbor_allgather_init -> Allgather. Any text
    (a rank file's names are not trusted) gives some string."""
    short = name.split("_", 1)[-1] or "?"
    for suffix in ("_c", "_init"):
        if short.endswith(suffix):
            short = short[: -len(suffix)]
    if short.startswith("Ineighbor_") or short.startswith("Neighbor_"):
        short = short.split("_", 1)[1]
    elif short.startswith("I") and short[1:].capitalize() in COLLECTIVE_OPS:
        short = short[1:]
    return short[:1].upper() + short[1:]


def collective_op(name: str) -> str:
    """The OTF2 CollectiveOp member name of a collective function ("BARRIER" when none fits)."""
    return COLLECTIVE_OPS.get(collective_base(name), "BARRIER")


# One-sided atomics as OTF2 RmaAtomicType, by base name; the rest of the accumulate family
# is ACCUMULATE, and a fetching one (Get_accumulate, Fetch_and_op) FETCH_AND_ACCUMULATE.
# The synchronisations that complete one-sided operations (qmpigen.trace.rma): every
# operation on the window, or those to the target rank the call names.
RMA_COMPLETES: Dict[str, int] = {
    **dict.fromkeys(
        ("MPI_Win_fence", "MPI_Win_complete", "MPI_Win_unlock_all", "MPI_Win_flush_all", "MPI_Win_flush_local_all"),
        SCOPE_WINDOW,
    ),
    **dict.fromkeys(("MPI_Win_unlock", "MPI_Win_flush", "MPI_Win_flush_local"), SCOPE_TARGET),
}

RMA_ATOMIC_TYPES = {
    "Accumulate": "ACCUMULATE",
    "Raccumulate": "ACCUMULATE",
    "Get_accumulate": "FETCH_AND_ACCUMULATE",
    "Rget_accumulate": "FETCH_AND_ACCUMULATE",
    "Fetch_and_op": "FETCH_AND_ACCUMULATE",
    "Compare_and_swap": "COMPARE_AND_SWAP",
}
# Collective MPI-IO (OTF2's COLLECTIVE operation flag): the _all and _ordered families.
COLLECTIVE_IO = ("_all", "_ordered")


# OTF2 RegionRole per kind (FUNCTION for the rest).
REGION_ROLES = {
    **dict.fromkeys(("send", "recv", "sendrecv", "isend", "irecv", "imrecv", "mrecv", "probe"), "POINT2POINT"),
    **dict.fromkeys(("send_init", "recv_init", "start", "completion", "request_free"), "POINT2POINT"),
    **dict.fromkeys(("file_read", "file_write"), "FILE_IO"),
    **dict.fromkeys(("file_open", "file_close", "file_delete", "file_meta"), "FILE_IO_METADATA"),
    **dict.fromkeys(("rma_put", "rma_get", "rma_atomic", "rma_sync", "window_create", "window_free"), "RMA"),
}


COLLECTIVE_KINDS = COLLECTIVES | REQUEST_COLLECTIVES | PERSISTENT_COLLECTIVES
# a collective's role by its OTF2 operation: who sends to whom
COLLECTIVE_ROLES = {
    "BARRIER": "BARRIER",
    **dict.fromkeys(("BCAST", "SCATTER", "SCATTERV"), "COLL_ONE2ALL"),
    **dict.fromkeys(("GATHER", "GATHERV", "REDUCE"), "COLL_ALL2ONE"),
    **dict.fromkeys(("ALLGATHER", "ALLGATHERV", "ALLTOALL", "ALLTOALLV", "ALLTOALLW", "ALLREDUCE"), "COLL_ALL2ALL"),
    **dict.fromkeys(("REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK"), "COLL_ALL2ALL"),
}


def region_role(name: str, kind: str) -> str:
    """The OTF2 RegionRole member of a function of `kind`."""
    if kind in COLLECTIVE_KINDS:
        return COLLECTIVE_ROLES.get(collective_op(name), "COLL_OTHER")
    return REGION_ROLES.get(kind, "FUNCTION")


def rma_atomic_type(name: str) -> int:
    from otf2.enums import RmaAtomicType

    base = name.split("_", 1)[-1].removesuffix("_c")
    return int(getattr(RmaAtomicType, RMA_ATOMIC_TYPES.get(base, "ACCUMULATE")).value)


def collective_io(name: str) -> bool:
    return any(part in name for part in COLLECTIVE_IO)


def split_io_end(name: str) -> bool:
    """MPI_File_read_all_end and the like: the second half of a split collective."""
    return name.startswith("MPI_File_") and name.endswith("_end")


@functools.lru_cache(maxsize=None)  # asked per function of each file, for several tables
def collective_op_value(name: str) -> int:
    """collective_op as OTF2's number (0 for a function that is not a collective)."""
    from otf2.enums import CollectiveOp

    return int(getattr(CollectiveOp, collective_op(name)).value)


def codes(rank_file: RankFile, kinds: Iterable[str]) -> np.ndarray:
    """The file's function codes of these kinds."""
    wanted = frozenset(kinds)
    return np.array([code for code, kind in rank_file.kinds.items() if kind in wanted], np.uint16)


def per_call(rank_file: RankFile, func: np.ndarray, value_of: Callable[[str, str], int], dtype) -> np.ndarray:
    """Per call (its function code), value_of(the function's name, its kind): computed once
    per function of the file, then looked up (a code the file does not name gives 0)."""
    table = np.zeros(max(rank_file.functions, default=0) + 1, dtype)
    for code, name in rank_file.functions.items():
        table[code] = value_of(name, rank_file.kinds.get(code, "other"))
    return by_code(table, func, 0)


def by_code(table: np.ndarray, func: np.ndarray, missing: int) -> np.ndarray:
    """Per call, table[its function code] (u16), `missing` for a code past the table:
    one gather in the table's own type, `missing` placed after the table for np.take's
    clipping to find (a third of the time of a clip, a gather and a mask)."""
    return np.take(np.append(table, np.array(missing, table.dtype)), func, mode="clip")


_KIND_TABLE: list = [lambda: None, None]  # the last file's (weak reference, table): one file at a time


def _kind_table(rank_file: RankFile) -> np.ndarray:
    """Code -> the index in KINDS of its function's kind (len(KINDS): a code the file does
    not name), made once per file rather than per question: a file may name thousands."""
    if _KIND_TABLE[0]() is not rank_file:
        table = np.full(max(rank_file.functions, default=0) + 1, len(KINDS), np.int64)
        for code in rank_file.functions:
            table[code] = KINDS.index(rank_file.kinds.get(code, "other"))
        _KIND_TABLE[:] = [weakref.ref(rank_file), table]
    return _KIND_TABLE[1]


def call_kinds(rank_file: RankFile, func: np.ndarray) -> np.ndarray:
    """Per call (its function code), the index in KINDS of its function's kind, one byte
    each (len(KINDS): a code the file does not name). A caller that asks of_kinds many
    questions of the same calls makes this once and asks kinds_in: one byte gather per
    question instead of two gathers and a clip of 8-byte indexes."""
    return by_code(_kind_table(rank_file).astype(np.uint8), func, len(KINDS))


def kinds_in(per_call: np.ndarray, kinds: Iterable[str]) -> np.ndarray:
    """Per call (call_kinds' index, or any kind index below 256: 255 is none), whether its
    function is of one of these kinds: a table lookup (np.isin's setup costs more than
    the lookup on a file of few calls, and a merge of 8,192 files asks 80,000 times)."""
    return np.take(_kinds_table(frozenset(kinds)), per_call, mode="clip")  # every u8 index is in the table


@functools.lru_cache(maxsize=64)
def _kinds_table(kinds: FrozenSet[str]) -> np.ndarray:
    wanted = np.zeros(256, bool)
    wanted[[KINDS.index(k) for k in kinds if k in KINDS]] = True
    wanted.flags.writeable = False  # shared by every call with these kinds
    return wanted


def of_kinds(rank_file: RankFile, func: np.ndarray, kinds: Iterable[str]) -> np.ndarray:
    """Per call (its function code), whether its function is of one of these kinds."""
    return kinds_in(call_kinds(rank_file, func), kinds)
