"""What each parameter of an MPI function means, and what kind of operation the function is.

A tool that records arguments (the trace tool, a byte counter) needs to know which
parameter is the communicator, the peer, the tag, the count and datatype that make a
message's bytes, the request, the file and its offset, the window and the target. MPI
names its parameters consistently across implementations and versions (MPI 5.0 and every
mpi.h we read: MPICH 4 and 5, Open MPI 4 and 5, Intel MPI), so a parameter's role follows
from its C type and its name, and a function's kind from the roles it has plus a few name
patterns. Both are data (the tables below), matched against whatever the header at hand
declares: a new function with the usual names gets its roles with no change here.

Spec code reaches roles with `before role NAME %{ ... %}` / `after role NAME %{ ... %}`
(docs/spec-language.md) and the function's kind with `$kind`; docs/tracing.md's table of
which functions carry which attributes is generated from the same tables.
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from qmpigen.mpi.model import MpiFunction, Param

# Collectives whose scalar send or receive count is per peer (so many elements to or from
# each process of the communicator, or each neighbour of its topology).
_PER_PEER_SEND = ("MPI_*[Aa]lltoall", "MPI_*[Aa]lltoall_*", "MPI_*[Ss]catter", "MPI_*[Ss]catter_*")
_PER_PEER_RECV = ("MPI_*[Gg]ather", "MPI_*[Gg]ather_*", "MPI_*[Aa]lltoall", "MPI_*[Aa]lltoall_*")

# ---- parameter roles -------------------------------------------------------------------
# (role, base type, shape, parameter names, function globs or ()), first match wins.
# shape: "value" (passed by value), "in" (a pointer to const), "out" (a pointer the call
# may write through), "array".
# The function globs narrow a rule to some functions (a freed handle is an MPI_Comm *
# like a created one; only the function tells them apart).
ROLE_RULES: Tuple[Tuple[str, str, str, Tuple[str, ...], Tuple[str, ...]], ...] = (
    # communicators
    ("comm", "MPI_Comm", "value", ("comm", "comm_old", "local_comm"), ()),
    ("freed_comm", "MPI_Comm", "out", ("comm",), ("MPI_Comm_free", "MPI_Comm_disconnect")),
    (
        "new_comm",
        "MPI_Comm",
        "out",
        ("newcomm", "newintercomm", "comm_cart", "comm_graph", "comm_dist_graph", "intercomm"),
        (),
    ),
    # peers (ranks in the communicator, or in the window's group for target)
    ("dest", "int", "value", ("dest",), ()),
    ("source", "int", "value", ("source",), ()),
    ("root", "int", "value", ("root",), ()),
    ("target", "int", "value", ("target_rank",), ()),
    # tags
    ("tag", "int", "value", ("tag", "sendtag"), ()),
    ("recv_tag", "int", "value", ("recvtag",), ()),
    # data: a count and a datatype make bytes (the send side, the receive side)
    ("count", "int", "value", ("count",), ()),
    ("count", "MPI_Count", "value", ("count",), ()),
    ("datatype", "MPI_Datatype", "value", ("datatype",), ()),
    # a scalar count that MPI repeats for every peer (Alltoall's, Scatter's at the root)
    ("send_count_per_peer", "int", "value", ("sendcount",), _PER_PEER_SEND),
    ("send_count_per_peer", "MPI_Count", "value", ("sendcount",), _PER_PEER_SEND),
    ("recv_count_per_peer", "int", "value", ("recvcount",), _PER_PEER_RECV),
    ("recv_count_per_peer", "MPI_Count", "value", ("recvcount",), _PER_PEER_RECV),
    ("send_count", "int", "value", ("sendcount", "origin_count"), ()),
    ("send_count", "MPI_Count", "value", ("sendcount", "origin_count"), ()),
    ("send_type", "MPI_Datatype", "value", ("sendtype", "origin_datatype"), ()),
    ("recv_count", "int", "value", ("recvcount", "result_count"), ()),
    ("recv_count", "MPI_Count", "value", ("recvcount", "result_count"), ()),
    ("recv_type", "MPI_Datatype", "value", ("recvtype", "result_datatype"), ()),
    ("send_counts", "int", "array", ("sendcounts",), ()),
    ("send_counts", "MPI_Count", "array", ("sendcounts",), ()),
    ("recv_counts", "int", "array", ("recvcounts",), ()),
    ("recv_counts", "MPI_Count", "array", ("recvcounts",), ()),
    ("send_types", "MPI_Datatype", "array", ("sendtypes",), ()),
    ("recv_types", "MPI_Datatype", "array", ("recvtypes",), ()),
    # requests and statuses
    ("request", "MPI_Request", "out", ("request",), ()),
    ("status", "MPI_Status", "out", ("status",), ()),
    ("message", "MPI_Message", "out", ("message",), ()),
    # MPI-IO
    ("file", "MPI_File", "value", ("fh", "file"), ()),
    ("new_file", "MPI_File", "out", ("fh",), ("MPI_File_open",)),
    ("freed_file", "MPI_File", "out", ("fh",), ("MPI_File_close",)),
    ("offset", "MPI_Offset", "value", ("offset", "disp", "size"), ("MPI_File_*",)),
    ("file_name", "char", "in", ("filename",), ()),
    ("access_mode", "int", "value", ("amode",), ()),
    ("whence", "int", "value", ("whence",), ()),
    ("flag", "int", "value", ("flag",), ("MPI_File_set_atomicity",)),
    # one-sided
    ("window", "MPI_Win", "value", ("win",), ()),
    ("new_window", "MPI_Win", "out", ("win",), ("MPI_Win_create*", "MPI_Win_allocate*")),
    ("freed_window", "MPI_Win", "out", ("win",), ("MPI_Win_free",)),
    ("target_disp", "MPI_Aint", "value", ("target_disp",), ()),
    # datatypes: the one made, the one it is made from
    ("new_type", "MPI_Datatype", "out", ("newtype",), ()),
    ("old_type", "MPI_Datatype", "value", ("oldtype",), ()),
    ("committed_type", "MPI_Datatype", "out", ("datatype", "type"), ("MPI_Type_commit",)),
    ("freed_type", "MPI_Datatype", "out", ("datatype", "type"), ("MPI_Type_free",)),
)

ROLES: Tuple[str, ...] = tuple(dict.fromkeys(rule[0] for rule in ROLE_RULES))

# What each role is, for the documentation and `qmpigen functions --roles`.
ROLE_TEXT: Dict[str, str] = {
    "comm": "the communicator the call works on",
    "freed_comm": "a communicator the call frees",
    "new_comm": "the communicator the call creates",
    "dest": "the destination rank",
    "source": "the source rank (or MPI_ANY_SOURCE)",
    "root": "the root rank of a collective",
    "target": "the target rank of a one-sided operation",
    "tag": "the message tag (a send's tag in Sendrecv)",
    "recv_tag": "the receive tag of Sendrecv",
    "count": "the number of elements of `datatype`",
    "datatype": "the element datatype",
    "send_count_per_peer": "elements sent to each peer (Alltoall; Scatter at the root)",
    "recv_count_per_peer": "elements received from each peer (Allgather, Alltoall; Gather at the root)",
    "send_count": "elements sent (origin elements of one-sided calls)",
    "send_type": "the datatype of the elements sent",
    "recv_count": "elements received (result elements of one-sided calls)",
    "recv_type": "the datatype of the elements received",
    "send_counts": "elements sent to each peer (v and w collectives)",
    "recv_counts": "elements received from each peer",
    "send_types": "the datatype sent to each peer (w collectives)",
    "recv_types": "the datatype received from each peer",
    "request": "the request the call starts",
    "status": "the status the call fills",
    "message": "the matched message (Mprobe, Mrecv)",
    "file": "the file handle",
    "new_file": "the file handle the call opens",
    "freed_file": "the file handle the call closes",
    "offset": "a file offset, view displacement or size in bytes",
    "file_name": "the file's name",
    "access_mode": "the access mode (MPI_MODE_*)",
    "whence": "how a seek offset counts (MPI_SEEK_*)",
    "flag": "the atomicity flag",
    "window": "the window",
    "new_window": "the window the call creates",
    "freed_window": "the window the call frees",
    "target_disp": "the displacement in the target's window",
    "new_type": "the datatype the call constructs",
    "old_type": "the datatype it is constructed from",
    "committed_type": "the datatype the call commits",
    "freed_type": "the datatype the call frees",
}


def _shape(param: Param) -> str:
    if param.is_array:
        return "array"
    if param.is_pointer:
        return "in" if param.is_const else "out"
    return "value"


def param_role(function: MpiFunction, param: Param) -> Optional[str]:
    """The role of one parameter of `function`, or None."""
    shape = _shape(param)
    for role, base, rule_shape, names, globs in ROLE_RULES:
        if param.base_type != base or param.name not in names:
            continue
        if shape != rule_shape:
            continue
        if globs and not any(fnmatch.fnmatchcase(function.name, g) for g in globs):
            continue
        return role
    return None


# ---- function kinds --------------------------------------------------------------------
# (kind, roles it needs, roles it must lack, name globs or ()), first match wins. The
# kinds are what a trace makes of a call: docs/tracing.md says which OTF2 events each
# becomes. Wait/Test and friends, which complete requests started elsewhere, are
# "completion" by name: no parameter role says what they do to a request.
KIND_RULES: Tuple[Tuple[str, Tuple[str, ...], Tuple[str, ...], Tuple[str, ...]], ...] = (
    ("completion", (), (), ("MPI_Wait*", "MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome")),
    ("start", (), (), ("MPI_Start", "MPI_Startall")),
    ("request_free", (), (), ("MPI_Request_free", "MPI_Cancel")),
    # point-to-point
    ("sendrecv", ("dest", "source"), (), ()),
    ("send_init", ("dest", "tag", "request"), (), ("*_init", "*_init_c")),
    ("recv_init", ("source", "tag", "request"), (), ("*_init", "*_init_c")),
    ("isend", ("dest", "tag", "request"), (), ()),
    ("send", ("dest", "tag"), ("request",), ()),
    ("probe", ("source", "tag"), ("count",), ()),
    ("irecv", ("source", "tag", "request"), (), ()),
    ("recv", ("source", "tag"), ("request",), ()),
    ("imrecv", ("message", "request"), (), ()),
    ("mrecv", ("message", "status"), ("source",), ()),
    # one-sided
    ("rma_get", ("window", "target"), (), ("MPI_Get", "MPI_Rget", "MPI_Get_c", "MPI_Rget_c")),
    ("rma_put", ("window", "target"), (), ("MPI_Put", "MPI_Rput", "MPI_Put_c", "MPI_Rput_c")),
    ("rma_atomic", ("window", "target"), (), ()),
    ("window_create", ("new_window",), (), ()),
    ("window_free", ("freed_window",), (), ()),
    (
        "rma_sync",
        ("window",),
        (),
        ("MPI_Win_fence", "MPI_Win_lock*", "MPI_Win_unlock*", "MPI_Win_flush*", "MPI_Win_sync", "MPI_Win_start")
        + ("MPI_Win_complete", "MPI_Win_post", "MPI_Win_wait", "MPI_Win_test"),
    ),
    # MPI-IO
    ("file_open", ("new_file",), (), ()),
    ("file_close", ("freed_file",), (), ()),
    ("file_delete", ("file_name",), (), ("MPI_File_delete",)),
    ("file_read", ("file",), (), ("MPI_File_*read*",)),
    ("file_write", ("file",), (), ("MPI_File_*write*",)),
    (
        "file_meta",
        ("file",),
        (),
        ("MPI_File_seek*", "MPI_File_set_*", "MPI_File_preallocate", "MPI_File_sync", "MPI_File_get_size")
        + ("MPI_File_get_position*", "MPI_File_get_byte_offset", "MPI_File_get_view"),
    ),
    # communicators and datatypes
    ("comm_create", ("new_comm",), (), ()),
    ("comm_free", ("freed_comm",), (), ()),
    ("type_create", ("new_type",), (), ()),
    ("type_commit", ("committed_type",), (), ()),
    ("type_free", ("freed_type",), (), ()),
    # collectives: a communicator and data, a root, or a synchronisation; neighbourhood
    # collectives apart, since their per-peer counts are per neighbour of the topology
    ("neighbor_init", ("comm", "request"), (), ("MPI_Neighbor_*_init", "MPI_Neighbor_*_init_c")),
    ("ineighbor", ("comm", "request"), (), ("MPI_Ineighbor_*",)),
    ("neighbor", ("comm",), (), ("MPI_Neighbor_*",)),
    ("collective_init", ("comm", "request"), (), ("*_init", "*_init_c")),
    ("icollective", ("comm", "request"), (), ("MPI_I*", "MPIX_I*")),
    (
        "collective",
        ("comm",),
        (),
        (
            "MPI_Barrier*",
            "MPI_Bcast*",
            "MPI_*[Gg]ather*",
            "MPI_*[Ss]catter*",
            "MPI_*[Aa]lltoall*",
            "MPI_*[Rr]educe*",
            "MPI_*[Ss]can*",
        ),
    ),
)

KINDS: Tuple[str, ...] = tuple(rule[0] for rule in KIND_RULES) + ("other",)


@dataclass(frozen=True)
class Roles:
    """One function's parameter roles (None where a parameter has none) and kind."""

    function: MpiFunction
    params: Tuple[Optional[str], ...]
    kind: str

    @property
    def present(self) -> Tuple[str, ...]:
        return tuple(r for r in self.params if r is not None)

    def param(self, role: str) -> Optional[Param]:
        """The parameter with `role`, or None."""
        for param, r in zip(self.function.params, self.params):
            if r == role:
                return param
        return None


def _kind(function: MpiFunction, present: Tuple[str, ...]) -> str:
    name = function.name
    if function.has_category("conversion"):  # MPI_File_c2f: bookkeeping, whatever its roles
        return "other"
    for kind, needs, lacks, globs in KIND_RULES:
        if any(r not in present for r in needs) or any(r in present for r in lacks):
            continue
        if globs and not any(fnmatch.fnmatchcase(name, g) for g in globs):
            continue
        return kind
    return "other"


@functools.lru_cache(maxsize=4096)  # asked several times per function by resolve, render and trace
def roles_of(function: MpiFunction) -> Roles:
    params = tuple(param_role(function, p) for p in function.params)
    return Roles(function, params, _kind(function, tuple(r for r in params if r is not None)))
