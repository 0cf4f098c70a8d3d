"""The events a call makes, as the OTF2 writer's event loop takes them: what each call adds
between its Enter and Leave (OP_*), what a completion-side event is (COMPLETE_*,
START_*, CANCELLED), and the columns of a location's calls, completions and attributes.
One home for the codes that _loops.c's qmpi_write_events (tests/test_trace_layout.py
compares its enums), its ctypes fallback (otf2_fallback.py), the writer (otf2_out.py)
and the merge's events (events.py) share."""

from __future__ import annotations

from typing import Dict

import numpy as np

# What a call adds between its Enter and Leave (the `op` array of _loops.c's qmpi_write_events).
(
    OP_NONE,
    OP_SEND,
    OP_RECV,
    OP_ISEND,
    OP_IRECV_REQUEST,
    OP_COLLECTIVE,
    OP_IO,
    OP_SENDRECV,
    OP_ICOLLECTIVE,
    OP_IO_NONBLOCKING,
    OP_IO_CREATE,
    OP_IO_DESTROY,
    OP_IO_SEEK,
    OP_RMA,
    OP_RMA_REQUEST,
) = range(15)
# what a completion-side event is: a completed Isend or Irecv, a persistent request's
# start (written like Isend and Irecv), a cancelled request, a completed nonblocking
# collective, I/O or one-sided operation, a persistent collective's start
(
    COMPLETE_ISEND,
    COMPLETE_IRECV,
    START_ISEND,
    START_IRECV,
    CANCELLED,
    COMPLETE_COLLECTIVE,
    COMPLETE_IO,
    COMPLETE_RMA,
    START_COLLECTIVE,
) = range(1, 10)
RMA_PUT, RMA_GET, RMA_ATOMIC = 0, 1, 2  # an RMA call's tag: RMA_ATOMIC + OTF2 RmaAtomicType
IO_MODE_READ, IO_MODE_WRITE = 0, 1  # OTF2_IO_OPERATION_MODE_*
IO_FLAG_NON_BLOCKING, IO_FLAG_COLLECTIVE = 1, 2  # OTF2_IO_OPERATION_FLAG_*

CALL_FIELDS = (
    ("enter", "<u8"),
    ("leave", "<u8"),
    ("region", "<u4"),
    ("op", "u1"),
    ("peer", "<u4"),
    ("comm", "<u4"),
    ("tag", "<u4"),
    ("bytes", "<u8"),
    ("request", "<u8"),
    ("recv_peer", "<u4"),
    ("recv_tag", "<u4"),  # I/O: the operation's flags (collective)
    ("recv_bytes", "<u8"),
)
COMPLETION_FIELDS = (
    ("call", "<i8"),
    ("kind", "u1"),
    ("request", "<u8"),
    ("sender", "<u4"),
    ("comm", "<u4"),
    ("tag", "<u4"),
    ("bytes", "<u8"),
    ("recv_bytes", "<u8"),
)


class CallColumns(Dict[str, np.ndarray]):
    """n calls' CALL_FIELDS, each field its own array, which the C loop reads as it is (a
    structured array's fields were copied out first); assigning a field casts into its
    array, as assigning a structured array's field does."""

    def __init__(self, n: int):
        super().__init__((name, np.zeros(n, dtype)) for name, dtype in CALL_FIELDS)

    def __setitem__(self, name: str, value) -> None:
        self[name][...] = value


ATTRIBUTE_FIELDS = (("first", "<i8"), ("ref", "<u4"), ("string", "u1"), ("value", "<i8"))
