"""otf2_out.py's event loop in Python through ctypes, for an install without the C
extension (_loops.c's qmpi_write_events, which it mirrors call for call): slower, the
same events."""

from __future__ import annotations

import ctypes
from typing import Tuple

from .otf2_ops import (
    CALL_FIELDS,
    COMPLETE_COLLECTIVE,
    COMPLETE_IO,
    COMPLETE_IRECV,
    COMPLETE_ISEND,
    COMPLETE_RMA,
    COMPLETION_FIELDS,
    IO_FLAG_NON_BLOCKING,
    OP_COLLECTIVE,
    OP_ICOLLECTIVE,
    OP_IO,
    OP_IO_CREATE,
    OP_IO_DESTROY,
    OP_IO_NONBLOCKING,
    OP_IO_SEEK,
    OP_IRECV_REQUEST,
    OP_ISEND,
    OP_RECV,
    OP_RMA,
    OP_RMA_REQUEST,
    OP_SEND,
    OP_SENDRECV,
    RMA_ATOMIC,
    RMA_GET,
    RMA_PUT,
    START_COLLECTIVE,
    START_IRECV,
    START_ISEND,
)


def write_python(lib, handle: int, columns, done, given=(), attribute_list=None) -> int:
    """_loops.c's loop through ctypes, where the extension was not built. `given`: the
    ATTRIBUTE_FIELDS arrays of the calls' attributes (empty: none), put in attribute_list."""
    u32, u64, u8, i64, vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint8, ctypes.c_int64, ctypes.c_void_p
    p2p, ip2p = [vp, vp, u64, u32, u32, u32, u64], [vp, vp, u64, u32, u32, u32, u64, u64]
    signatures = {
        "Enter": [vp, vp, u64, u32],
        "Leave": [vp, vp, u64, u32],
        "MpiSend": p2p,
        "MpiRecv": p2p,
        "MpiIsend": ip2p,
        "MpiIrecv": ip2p,
        "MpiIsendComplete": [vp, vp, u64, u64],
        "MpiIrecvRequest": [vp, vp, u64, u64],
        "MpiCollectiveBegin": [vp, vp, u64],
        "MpiCollectiveEnd": [vp, vp, u64, u8, u32, u32, u64, u64],
        "IoOperationBegin": [vp, vp, u64, u32, u8, u32, u64, u64],
        "IoOperationComplete": [vp, vp, u64, u32, u64, u64],
        "MpiRequestCancelled": [vp, vp, u64, u64],
        "NonBlockingCollectiveRequest": [vp, vp, u64, u64],
        "NonBlockingCollectiveComplete": [vp, vp, u64, u8, u32, u32, u64, u64, u64],
        "IoOperationIssued": [vp, vp, u64, u32, u64],
        "IoCreateHandle": [vp, vp, u64, u32, u8, u32, u32],
        "IoDestroyHandle": [vp, vp, u64, u32],
        "IoSeek": [vp, vp, u64, u32, i64, u8, u64],
        "RmaPut": [vp, vp, u64, u32, u32, u64, u64],
        "RmaGet": [vp, vp, u64, u32, u32, u64, u64],
        "RmaAtomic": [vp, vp, u64, u32, u32, u8, u64, u64, u64],
        "RmaOpCompleteBlocking": [vp, vp, u64, u32, u64],
        "RmaOpCompleteNonBlocking": [vp, vp, u64, u32, u64],
    }
    f = {}
    for name, argtypes in signatures.items():
        function = getattr(lib, f"OTF2_EvtWriter_{name}")
        function.argtypes, function.restype = argtypes, ctypes.c_int
        f[name] = function
    add_int64, add_string = lib.OTF2_AttributeList_AddInt64, lib.OTF2_AttributeList_AddStringRef
    add_int64.argtypes, add_string.argtypes = [vp, u32, i64], [vp, u32, u32]
    first, ref, string, value = (col.tolist() for col in given) if len(given) else ([], [], [], [])

    def attributes(i: int) -> Tuple[int, object]:
        """Call i's attributes put in the list: a status and the list, or None when it has none."""
        if not first or first[i] == first[i + 1]:
            return 0, None
        rc = 0
        for j in range(first[i], first[i + 1]):
            rc |= (add_string if string[j] else add_int64)(attribute_list, ref[j], value[j])
        return rc, attribute_list

    c = dict(zip([name for name, _ in CALL_FIELDS], (col.tolist() for col in columns)))
    k = dict(zip([name for name, _ in COMPLETION_FIELDS], (col.tolist() for col in done)))

    def rma(i: int, t: int) -> int:
        what = c["tag"][i]
        if what in (RMA_PUT, RMA_GET):
            call = f["RmaPut"] if what == RMA_PUT else f["RmaGet"]
            return call(handle, None, t, c["comm"][i], c["peer"][i], c["bytes"][i], c["request"][i])
        return f["RmaAtomic"](
            handle,
            None,
            t,
            c["comm"][i],
            c["peer"][i],
            what - RMA_ATOMIC,
            c["bytes"][i],
            c["recv_bytes"][i],
            c["request"][i],
        )

    def call_events(i: int) -> Tuple[int, int]:
        t0, t1, op = c["enter"][i], c["leave"][i], c["op"][i]
        peer, comm, tag, nbytes, request = c["peer"][i], c["comm"][i], c["tag"][i], c["bytes"][i], c["request"][i]
        if op == OP_SEND:
            return f["MpiSend"](handle, None, t0, peer, comm, tag, nbytes), 1
        if op == OP_RECV:
            return f["MpiRecv"](handle, None, t1, peer, comm, tag, nbytes), 1
        if op == OP_SENDRECV:
            rc = f["MpiSend"](handle, None, t0, peer, comm, tag, nbytes)
            return rc | f["MpiRecv"](handle, None, t1, c["recv_peer"][i], comm, c["recv_tag"][i], c["recv_bytes"][i]), 2
        if op == OP_ISEND:
            return f["MpiIsend"](handle, None, t0, peer, comm, tag, nbytes, request), 1
        if op == OP_IRECV_REQUEST:
            return f["MpiIrecvRequest"](handle, None, t0, request), 1
        if op == OP_COLLECTIVE:
            rc = f["MpiCollectiveBegin"](handle, None, t0)
            return rc | f["MpiCollectiveEnd"](handle, None, t1, tag, comm, peer, nbytes, c["recv_bytes"][i]), 2
        if op == OP_ICOLLECTIVE:
            return f["NonBlockingCollectiveRequest"](handle, None, t0, request), 1
        if op in (OP_IO, OP_IO_NONBLOCKING):
            flags = c["recv_tag"][i] | (IO_FLAG_NON_BLOCKING if op == OP_IO_NONBLOCKING else 0)
            rc = f["IoOperationBegin"](handle, None, t0, comm, tag, flags, nbytes, request)
            if op == OP_IO:
                return rc | f["IoOperationComplete"](handle, None, t1, comm, nbytes, request), 2
            return rc | f["IoOperationIssued"](handle, None, t1, comm, request), 2
        if op == OP_IO_CREATE:
            return f["IoCreateHandle"](handle, None, t1, comm, tag, c["recv_tag"][i], 0), 1
        if op == OP_IO_DESTROY:
            return f["IoDestroyHandle"](handle, None, t1, comm), 1
        if op == OP_IO_SEEK:
            return f["IoSeek"](handle, None, t1, comm, nbytes, tag, c["recv_bytes"][i]), 1
        if op == OP_RMA:
            return rma(i, t0) | f["RmaOpCompleteBlocking"](handle, None, t1, comm, request), 2
        if op == OP_RMA_REQUEST:
            return rma(i, t0), 1
        return 0, 0

    def completion_event(j: int, t1: int) -> int:
        kind, request, comm = k["kind"][j], k["request"][j], k["comm"][j]
        if kind == COMPLETE_ISEND:
            return f["MpiIsendComplete"](handle, None, t1, request)
        if kind in (COMPLETE_IRECV, START_ISEND):
            call = f["MpiIrecv"] if kind == COMPLETE_IRECV else f["MpiIsend"]
            return call(handle, None, t1, k["sender"][j], comm, k["tag"][j], k["bytes"][j], request)
        if kind == START_IRECV:
            return f["MpiIrecvRequest"](handle, None, t1, request)
        if kind == COMPLETE_COLLECTIVE:
            return f["NonBlockingCollectiveComplete"](
                handle, None, t1, k["tag"][j], comm, k["sender"][j], k["bytes"][j], k["recv_bytes"][j], request
            )
        if kind == START_COLLECTIVE:
            return f["NonBlockingCollectiveRequest"](handle, None, t1, request)
        if kind == COMPLETE_IO:
            return f["IoOperationComplete"](handle, None, t1, comm, k["bytes"][j], request)
        if kind == COMPLETE_RMA:
            return f["RmaOpCompleteNonBlocking"](handle, None, t1, comm, request)
        return f["MpiRequestCancelled"](handle, None, t1, request)

    events, j, m = 0, 0, len(k["call"])
    for i in range(len(c["enter"])):
        t1 = c["leave"][i]
        rc, listed = attributes(i)
        rc |= f["Enter"](handle, listed, c["enter"][i], c["region"][i])
        rc_call, n = call_events(i)
        rc |= rc_call
        events += n
        while j < m and k["call"][j] == i:
            rc |= completion_event(j, t1)
            events += 1
            j += 1
        rc |= f["Leave"](handle, None, t1, c["region"][i])
        events += 2
        if rc:
            return -1 - i
    return events
