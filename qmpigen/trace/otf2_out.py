"""The OTF2 archive, written with the otf2 package (the OTF2 library's own bindings): a
system tree node per host, a process per rank, a location per rank and thread, a region
per function, MPI point-to-point and collective events where OTF2 has them, MPI-IO
reads and writes as I/O operations on I/O handles (one per opened file and rank).

Definitions go through the package's Python API. Events are many: the package's Python
writer costs several microseconds per event, so they are written by the OTF2 library the
package bundles, called from a small C loop (_loops.c's qmpi_write_events, built at
install time) over numpy arrays, one call per rank file. Without the built extension the
same loop runs in Python through ctypes (slower; `bulk_mode` says which ran)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

import numpy as np
import otf2
from otf2.enums import (
    GroupType,
    IoParadigmClass,
    IoParadigmFlag,
    LocationGroupType,
    LocationType,
    Paradigm,
    RegionRole,
    Type,
)

from . import loops, semantics
from .otf2_fallback import write_python
from .otf2_ops import ATTRIBUTE_FIELDS, CALL_FIELDS, COMPLETION_FIELDS

# The OTF2 library's event chunk: a location's writer holds one until it is closed,
# which write_events does as soon as the location's events are written (one rank file
# each), so memory does not grow with the number of locations.
CHUNK_BYTES = 256 * 1024
MAX_REGIONS, OTHER_REGION = 2048, "(other functions)"


def definition_chunk_bytes(members: int) -> int:
    """The OTF2 library's definition chunk: the largest definition (a group of every
    rank's location, at most 9 bytes a member) must fit in one, and every location's
    local definition writer holds one while open: the default 4 MiB cost 7 ms a
    location to allocate and clear (a minute at 8,192 ranks). A power of two from the
    library's 256 KiB minimum to its 16 MiB maximum."""
    size = 256 * 1024
    while size < 64 * 1024 + 9 * members and size < 16 * 1024 * 1024:
        size *= 2
    return size


API_FUNCTIONS = (
    "Enter",
    "Leave",
    "MpiSend",
    "MpiRecv",
    "MpiIsend",
    "MpiIrecv",
    "MpiIsendComplete",
    "MpiIrecvRequest",
    "MpiCollectiveBegin",
    "MpiCollectiveEnd",
    "IoOperationBegin",
    "IoOperationComplete",
    "MpiRequestCancelled",
    "NonBlockingCollectiveRequest",
    "NonBlockingCollectiveComplete",
    "IoOperationIssued",
    "IoCreateHandle",
    "IoDestroyHandle",
    "IoSeek",
    "RmaPut",
    "RmaGet",
    "RmaAtomic",
    "RmaOpCompleteBlocking",
    "RmaOpCompleteNonBlocking",
)


class _Api(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_void_p)
        for name in (
            "enter",
            "leave",
            "send",
            "recv",
            "isend",
            "irecv",
            "isend_complete",
            "irecv_request",
            "coll_begin",
            "coll_end",
            "io_begin",
            "io_complete",
            "request_cancelled",
            "coll_request",
            "coll_complete",
            "io_issued",
            "io_create",
            "io_destroy",
            "io_seek",
            "rma_put",
            "rma_get",
            "rma_atomic",
            "rma_complete_blocking",
            "rma_complete_nonblocking",
            "add_int64",
            "add_string",
        )
    ]


class _Calls(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int64)] + [(name, ctypes.c_void_p) for name, _ in CALL_FIELDS]


class _Completions(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int64)] + [(name, ctypes.c_void_p) for name, _ in COMPLETION_FIELDS]


ATTRIBUTE_LISTS = ("AddInt64", "AddStringRef")  # OTF2_AttributeList_*: _Api's add_int64, add_string


class _Attributes(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int64)] + [(name, ctypes.c_void_p) for name, _ in ATTRIBUTE_FIELDS + (("list", ""),)]


@dataclass(frozen=True)
class CallAttributes:
    """OTF2 attributes of a location's calls (their Enter events), ordered by call: call i's
    are first[i] to first[i + 1] (first: one more than the calls); each an Attribute ref, a
    value (an int64, or an OTF2 String ref where `string`)."""

    first: np.ndarray
    ref: np.ndarray
    string: np.ndarray
    value: np.ndarray


def _otf2_library() -> ctypes.CDLL:
    from _otf2.Config import conf

    return ctypes.CDLL(conf.lib._name)


class _ClosedWriter:
    """A location's event writer after Otf2Writer._close_location."""

    def close(self) -> None:
        pass


class Otf2Writer:
    def __init__(self, path: Path, ranks: List[int], hosts: Dict[int, str], threads: Dict[int, list]):
        """`ranks`: those with a file or a communicator naming them (not every rank of the
        world: a rank without a file has nothing to show, and a header's world size is
        only a claim)."""
        self.writer = otf2.writer.Writer(
            str(path),
            timer_resolution=1_000_000_000,
            chunk_size_events=CHUNK_BYTES,
            chunk_size_definitions=definition_chunk_bytes(len(ranks)),
        )
        defs = self.writer.definitions
        machine = defs.system_tree_node("machine")
        nodes = {host: defs.system_tree_node(host, parent=machine) for host in sorted(set(hosts.values()))}
        self.scope = {rank: nodes.get(hosts.get(rank, "unknown")) or machine for rank in ranks}
        self.locations: Dict[Tuple[int, int], Any] = {}
        for rank in ranks:
            group = defs.location_group(
                f"rank {rank}", location_group_type=LocationGroupType.PROCESS, system_tree_parent=self.scope[rank]
            )
            for thread in sorted(threads.get(rank, [0])):
                self.locations[(rank, thread)] = defs.location(
                    f"rank {rank} thread {thread}", type=LocationType.CPU_THREAD, group=group
                )
        self.rank_locations = {
            rank: self.locations.get((rank, 0)) or self.locations[(rank, min(threads[rank]))] for rank in ranks
        }
        defs.group(
            "MPI_COMM_WORLD locations",
            group_type=GroupType.COMM_LOCATIONS,
            paradigm=Paradigm.MPI,
            members=[self.rank_locations[rank] for rank in ranks],
        )
        self.regions: Dict[str, object] = {}
        self.regions_shared: Set[str] = set()  # the functions past MAX_REGIONS, in OTHER_REGION
        self.comms: Dict[int, object] = {}
        self.io_paradigm = None
        self.io_files: Dict[Tuple[str, object], object] = {}
        self.defs = defs
        self.lib = _otf2_library()
        self.bulk = loops.load()
        self.bulk_mode = "C loop" if self.bulk is not None else "ctypes loop"
        self.api = _Api(
            *(
                ctypes.cast(getattr(self.lib, f"OTF2_EvtWriter_{name}"), ctypes.c_void_p).value
                for name in API_FUNCTIONS
            ),
            *(
                ctypes.cast(getattr(self.lib, f"OTF2_AttributeList_{name}"), ctypes.c_void_p).value
                for name in ATTRIBUTE_LISTS
            ),
        )
        self.lib.OTF2_AttributeList_New.restype = ctypes.c_void_p
        self.lib.OTF2_AttributeList_Delete.argtypes = [ctypes.c_void_p]
        self.attribute_list: Optional[int] = self.lib.OTF2_AttributeList_New()
        self.attributes: Dict[str, int] = {}
        self.first: Optional[int] = None
        self.last: Optional[int] = None
        self.events_written = 0

    def comm(self, comm_id: int, members: Tuple[int, ...], name: str):
        if comm_id not in self.comms:
            group = self.defs.group(
                f"{name} group",
                group_type=GroupType.COMM_GROUP,
                paradigm=Paradigm.MPI,
                members=[self.rank_locations[r] for r in members],
            )
            self.comms[comm_id] = self.defs.comm(name, group=group)
        return self.comms[comm_id]

    def window(self, gid: int, comm):
        """A one-sided window (merged across ranks) on its communicator."""
        return self.defs.rma_win(f"window {gid}", comm=comm)

    def region(self, func: str, kind: str):
        """`func`'s region; its role from its kind (semantics.REGION_ROLES). Past MAX_REGIONS
        names (an MPI has fewer than a thousand functions: a crafted file), one region
        for the rest (each costs the otf2 package about 0.3 ms)."""
        if func not in self.regions:
            if len(self.regions) >= MAX_REGIONS:
                self.regions_shared.add(func)
                func = OTHER_REGION
                if func in self.regions:
                    return self.regions[func]
            role = semantics.region_role(func, kind)
            self.regions[func] = self.defs.region(func, paradigm=Paradigm.MPI, region_role=getattr(RegionRole, role))
        return self.regions[func]

    def io_handle(self, rank: int, name: str, comm):
        """The I/O handle of the file `name` opened on `comm` (an IoRegularFile per name and
        host; the package gives every rank that opened it collectively the same handle)."""
        if self.io_paradigm is None:
            self.io_paradigm = self.defs.io_paradigm(
                "MPI-IO", "MPI I/O", io_paradigm_class=IoParadigmClass.PARALLEL, io_paradigm_flags=IoParadigmFlag.NONE
            )
        scope = self.scope[rank]
        io_file = self.io_files.get((name, scope))
        if io_file is None:
            io_file = self.io_files[(name, scope)] = self.defs.io_regular_file(name, scope=scope)
        return self.defs.io_handle(name, file=io_file, io_paradigm=self.io_paradigm, comm=comm)

    def attribute(self, name: str, description: str, string: bool = False) -> int:
        """The ref of the OTF2 Attribute `name` (int64 values, or strings), defined at its first use."""
        if name not in self.attributes:
            kind = Type.STRING if string else Type.INT64
            self.attributes[name] = self.defs.attribute(name, description=description, type=kind)._ref
        return self.attributes[name]

    def string(self, text: str) -> int:
        """The ref of an OTF2 String (an attribute's value)."""
        return self.defs.strings.get_ref(text)

    def write_events(
        self,
        rank: int,
        thread: int,
        calls: Mapping[str, np.ndarray],
        completions: np.ndarray,
        attributes: Optional[CallAttributes] = None,
        unfinished=None,
    ) -> int:
        """One location's events: `calls` with CALL_FIELDS (CallColumns, time order),
        `completions` with COMPLETION_FIELDS (ordered by call), their Enter events'
        `attributes`; for a thread that did not finalize (story.Unfinished), a last event
        that says how it ended."""
        n = len(calls["enter"])
        if n == 0:
            return 0
        location = self.locations[(rank, thread)]
        writer = self.writer.event_writer_from_location(location)
        handle = ctypes.cast(writer._handle, ctypes.c_void_p).value or 0  # never NULL: the package checks
        columns = [np.ascontiguousarray(calls[name], dtype) for name, dtype in CALL_FIELDS]
        done = [np.ascontiguousarray(completions[name], dtype) for name, dtype in COMPLETION_FIELDS]
        given = (
            []
            if attributes is None
            else [np.ascontiguousarray(getattr(attributes, name), dtype) for name, dtype in ATTRIBUTE_FIELDS]
        )
        if self.bulk is not None:
            c = _Calls(n, *(col.ctypes.data for col in columns))
            k = _Completions(len(completions), *(col.ctypes.data for col in done))
            a = (
                _Attributes(len(given[1]), *(col.ctypes.data for col in given), self.attribute_list)
                if given
                else _Attributes()
            )
            function = self.bulk.qmpi_write_events
            function.restype = ctypes.c_int64
            function.argtypes = [
                ctypes.POINTER(_Api),
                ctypes.c_void_p,
                ctypes.POINTER(_Calls),
                ctypes.POINTER(_Completions),
                ctypes.POINTER(_Attributes),
            ]
            written = function(ctypes.byref(self.api), handle, ctypes.byref(c), ctypes.byref(k), ctypes.byref(a))
        else:
            written = self._write_python(handle, columns, done, given)
        if written < 0:
            raise RuntimeError(
                f"the OTF2 library refused the events of call {-1 - written} of rank {rank} thread {thread}"
            )
        last = int(columns[1].max())
        if unfinished is not None:
            last = max(last, unfinished.time)
            written += self._program_end(handle, unfinished, last)
        # the location's definition carries its event count (the package counts only the
        # events it writes itself)
        location._number_of_events_written = written
        self._close_location(location)
        first = int(columns[0].min())
        self.first = first if self.first is None else min(self.first, first)
        self.last = last if self.last is None else max(self.last, last)
        self.events_written += written
        return written

    def _program_end(self, handle: int, unfinished, time: int) -> int:
        """A location's last event for a thread that did not finalize: OTF2's ProgramEnd,
        its exit status 128 + the signal's number (-1: not known), its attributes (strings,
        "qmpi: ...") the last call that returned, the call it was in, the signal."""
        add = self.lib.OTF2_AttributeList_AddStringRef
        add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32]
        for what, text in unfinished.parts():
            ref = self.attribute(f"qmpi: {what}", "how a thread that did not finalize ended", string=True)
            add(self.attribute_list, ref, self.string(text))
        end = self.lib.OTF2_EvtWriter_ProgramEnd
        end.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64]
        if end(handle, self.attribute_list, time, unfinished.exit_status) != 0:
            raise RuntimeError(f"the OTF2 library refused rank {unfinished.rank} thread {unfinished.thread}'s end")
        return 1

    def _close_location(self, location) -> None:
        """The location's event writer closed now, not when the archive closes: an open
        writer keeps its chunk (about 230 KiB resident per location, 1.9 GB at 8,192
        ranks). A location is written once (one rank file per rank and thread). The
        package's list keeps a closed stand-in: at the end it closes every writer in it
        and opens one for each location missing there, which would overwrite the file."""
        writers = self.writer._event_writers
        writer = writers.get(location._ref) or self.writer.event_writer_from_location(location)
        writer.close()
        writers[location._ref] = _ClosedWriter()

    def _write_python(self, handle: int, columns, done, given) -> int:
        """The C loop's work through ctypes (otf2_fallback.py), without the extension."""
        return write_python(self.lib, handle, columns, done, given, self.attribute_list)

    def _free_attribute_list(self) -> None:
        if self.attribute_list is not None:
            self.lib.OTF2_AttributeList_Delete(self.attribute_list)
            self.attribute_list = None

    def abandon(self) -> None:
        """After an error: the archive closed quietly (the otf2 package's Writer closes
        itself again when collected, and prints a traceback if that fails)."""
        self._free_attribute_list()
        writer, self.writer = self.writer, None
        if writer is None:
            return
        try:
            writer.close()
        except Exception:  # the merge's own error is the one to report
            pass
        writer.close = lambda: None

    def close(self, realtime_s: float) -> None:
        """`realtime_s`: CLOCK_REALTIME at the first MPI_Init (the archive's clock
        properties: from the trace, not from when the merge ran)."""
        for location in self.locations.values():  # those without events: an empty file each, one at a time
            if not isinstance(self.writer._event_writers.get(location._ref), _ClosedWriter):
                self._close_location(location)
        if self.first is not None:
            self.writer._update_timestamps(self.first)
            self.writer._update_timestamps(self.last)
            self.writer._realtime_timestamp = realtime_s
        self.writer.close()
        self.writer = None
        self._free_attribute_list()
