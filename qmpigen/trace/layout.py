"""The rank file layout of sample_tools/trace.c, written once: the file header, every
record kind (code, fields with their C types), the flags, and the tool's table of
function codes. Everything else derives from here:

  * the reader's numpy dtypes and struct formats (read.py);
  * the generated part of sample_tools/trace.c (kinds, structs, the function table,
    written by layout_text.py),
    between GENERATED markers;
  * the generated tables of docs/trace-format.md, between GENERATED markers;
  * the sets of functions the merger treats as collectives (match.py, otf2_out.py).

After editing this file: `python -m qmpigen.trace.layout_text --write` rewrites both
generated parts; tests/test_trace_layout.py fails while either is out of date.

Every struct is laid out without implicit padding (reserved fields say where bytes are
unused), so a struct's C layout, its numpy dtype and its little-endian struct format
are the same bytes; _check() asserts it when this module loads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

MAGIC = b"QMPITRC\0"
VERSION = 3  # written by trace.c; the reader also takes 1 (call times in ns) and 2 (no run id, no END record)
READ_VERSIONS = (1, 2, 3)
RECORD_ALIGNMENT = 8  # every record's size is a multiple of it

# C type -> (numpy type, struct code, size)
C_TYPES: Dict[str, Tuple[str, str, int]] = {
    "uint8_t": ("u1", "B", 1),
    "uint16_t": ("<u2", "H", 2),
    "uint32_t": ("<u4", "I", 4),
    "uint64_t": ("<u8", "Q", 8),
    "int32_t": ("<i4", "i", 4),
    "int64_t": ("<i8", "q", 8),
    "char[8]": ("S8", "8s", 8),
}


@dataclass(frozen=True)
class Field:
    name: str
    ctype: str
    doc: str = ""
    default: int = 0  # in a call record that holds no value for it


@dataclass(frozen=True)
class Struct:
    """A C struct: a whole fixed-size record, the file header, or the fixed part of a
    variable-size record (the bytes after its kind and size)."""

    c_name: str
    fields: Tuple[Field, ...]

    @property
    def size(self) -> int:
        return sum(C_TYPES[f.ctype][2] for f in self.fields)

    def offsets(self) -> List[int]:
        at, out = 0, []
        for f in self.fields:
            out.append(at)
            at += C_TYPES[f.ctype][2]
        return out

    @property
    def dtype(self):
        import numpy as np

        return np.dtype([(f.name, C_TYPES[f.ctype][0]) for f in self.fields])

    @property
    def format(self) -> struct.Struct:
        return struct.Struct("<" + "".join(C_TYPES[f.ctype][1] for f in self.fields))


@dataclass(frozen=True)
class Record:
    kind: int
    name: str
    layout: Struct  # fixed size: the whole record; variable size: its fixed part after kind and size
    variable: bool = False
    tail: str = ""  # what follows the fixed part of a variable-size record
    doc: str = ""

    @property
    def size(self) -> int:
        """The size of a fixed-size record."""
        assert not self.variable
        return self.layout.size


HEAD = (Field("kind", "uint16_t"), Field("size", "uint16_t", "total bytes"))
COMM_CHUNK = 1000  # members per COMM record: with its head, at most 4,020 bytes (trace.c's records are <= 4096)
COMM_V2 = struct.Struct("<ii")  # a version 2 COMM record's fixed part: id, comm_size

HEADER = Struct(
    "file_header",
    (
        Field("magic", "char[8]", "`QMPITRC\\0`"),
        Field("version", "uint16_t", "format version"),
        Field("header_size", "uint16_t", "64"),
        Field("record_alignment", "uint32_t", "8"),
        Field("rank", "int32_t", "rank in `MPI_COMM_WORLD`"),
        Field("thread", "int32_t", "order of the first traced call on this instance"),
        Field("level", "int32_t", "chain level of the instance"),
        Field("world_size", "int32_t", "world size"),
        Field("pid", "uint32_t", "pid"),
        Field("reserved", "uint32_t"),
        Field("clock_origin_ns", "uint64_t", "`CLOCK_MONOTONIC` ns at `MPI_Init`"),
        Field("realtime_origin_ns", "uint64_t", "`CLOCK_REALTIME` ns at the same moment"),
        Field(
            "run_id",
            "uint64_t",
            "the run's identity: world rank 0's random value, sent to every rank at `MPI_Init` (version 3; 0 before)",
        ),
    ),
)

_CALL_HEAD = HEAD + (
    Field("func", "uint16_t", "function code"),
    Field("depth", "uint8_t", "nesting depth"),
    Field("flags", "uint8_t", "CALL_* flags"),
    Field("enter", "uint64_t", "ticks"),
    Field("leave", "uint64_t", "ticks"),
    Field("comm", "int32_t", "communicator id", -1),
)

RECORDS: Tuple[Record, ...] = (
    Record(
        1,
        "FUNCTION",
        Struct("function_fixed", (Field("code", "int32_t"),)),
        True,
        "NUL-terminated name (`MPI_Send`)",
        "the table's codes at the start of every file, any other code before its first call in the file "
        "(see Function codes)",
    ),
    Record(2, "PROCESS", Struct("process_fixed", (Field("reserved", "int32_t"),)), True, "program NUL host NUL"),
    Record(
        3,
        "COMM",
        Struct(
            "comm_fixed",
            (
                Field("id", "int32_t"),
                Field("comm_size", "int32_t"),
                Field("first", "int32_t", "local rank of the first member listed"),
                Field("count", "int32_t", "members listed"),
            ),
        ),
        True,
        "i32 world rank of each member listed, in local rank order",
        f"a communicator of more than {COMM_CHUNK} members spans several records (version 3; version 2: "
        "id and comm_size, then every member)",
    ),
    Record(
        4,
        "TYPE",
        Struct(
            "type_fixed",
            (
                Field("id", "int32_t"),
                Field("type_size", "int32_t", "`MPI_Type_size`"),
                Field("named", "int32_t"),
                Field("nints", "int32_t"),
                Field("naddrs", "int32_t"),
                Field("ntypes", "int32_t", "nints, naddrs, ntypes: `MPI_Type_get_envelope`"),
            ),
        ),
        True,
        "NUL-terminated name",
    ),
    Record(
        5,
        "FILE",
        Struct(
            "file_fixed",
            (Field("id", "int32_t"), Field("reserved", "int32_t"), Field("initial_size", "int64_t", "size at open")),
        ),
        True,
        "NUL-terminated name",
    ),
    Record(
        6,
        "CALL",
        Struct(
            "call_record",
            _CALL_HEAD
            + (
                Field("peer", "int32_t", "world rank; -1 none, -2 any", -1),
                Field("tag", "int32_t", "Comm_split: color"),
                Field("root", "int32_t", "world rank", -1),
                Field("datatype", "int32_t", "datatype id", -1),
                Field("file", "int32_t", "file id", -1),
                Field("count", "int64_t"),
                Field("bytes", "int64_t"),
                Field("offset", "int64_t", "Comm_split/dup: new comm id"),
                Field("request", "uint64_t", "request handle"),
            ),
        ),
        doc="one traced call",
    ),
    Record(
        7,
        "COMPLETION",
        Struct(
            "completion_record",
            HEAD
            + (
                Field("source", "int32_t", "status source: rank in the request's communicator"),
                Field("request", "uint64_t", "request handle"),
                Field("tag", "int32_t", "status tag"),
                Field("flags", "int32_t", "REQUEST_* flags"),
                Field("bytes", "int64_t", "bytes received"),
            ),
        ),
        doc="one request completed (or, with REQUEST_STARTED, started) by the call it follows: a "
        "Wait/Test function, MPI_Request_free, MPI_Start/Startall",
    ),
    Record(
        8,
        "CLOCK",
        Struct(
            "clock_record",
            HEAD
            + (
                Field("phase", "uint32_t", "0 init, 1 finalize"),
                Field("local_ns", "uint64_t"),
                Field("offset_ns", "int64_t", "world rank 0's clock minus ours"),
                Field("round_trip_ns", "uint64_t", "best round trip (PMPI ping-pong, 8 pings)"),
            ),
        ),
    ),
    Record(
        9,
        "TIMER",
        Struct(
            "timer_record",
            HEAD
            + (
                Field("reserved", "uint32_t"),
                Field("ticks", "uint64_t"),
                Field("ns", "uint64_t", "`CLOCK_MONOTONIC` read at the same moment"),
            ),
        ),
        doc="after the thread's preamble, before a flush when the last one is at least 1 ms old, and at finalize",
    ),
    Record(
        10,
        "SHORT_CALL",
        Struct("short_call_record", _CALL_HEAD + (Field("reserved", "int32_t"),)),
        doc="a CALL whose other fields would all be at their defaults (every call of a function outside "
        "the table, with comm -1)",
    ),
    Record(
        11,
        "END",
        Struct(
            "end_record",
            HEAD
            + (
                Field("reserved", "uint32_t"),
                Field("calls", "uint64_t", "call records in the file"),
            ),
        ),
        doc="the file's last record, written at `MPI_Finalize` (version 3): a file without it was cut short",
    ),
)
BY_NAME = {r.name: r for r in RECORDS}
CALL, SHORT_CALL, COMPLETION, CLOCK, TIMER, END = (
    BY_NAME[n] for n in ("CALL", "SHORT_CALL", "COMPLETION", "CLOCK", "TIMER", "END")
)

FLAGS = (
    ("CALL_HAS_REQUEST", 1, "the call carries a request handle"),
    ("CALL_FAILED", 2, "the function returned an MPI error code"),
)
PEERS = (("PEER_NONE", -1), ("PEER_ANY", -2))
REQUEST_FLAGS = (
    ("REQUEST_CANCELLED", 1, "the request was cancelled (`MPI_Test_cancelled`)"),
    ("REQUEST_FREED", 2, "`MPI_Request_free`: the application let go of the request"),
    ("REQUEST_STARTED", 4, "a persistent request started (`MPI_Start`, `MPI_Startall`)"),
)


@dataclass(frozen=True)
class Function:
    code: int
    name: str  # without MPI_
    interesting: bool  # traced always; else only with QMPI_TRACE_FUNCTIONS=all
    collective: Optional[str] = None  # its OTF2 CollectiveOp member, if it is one

    @property
    def mpi_name(self) -> str:
        return "MPI_" + self.name


_TABLE = (
    ("Init", 1, None),
    ("Init_thread", 1, None),
    ("Finalize", 1, None),
    ("Send", 1, None),
    ("Ssend", 1, None),
    ("Recv", 1, None),
    ("Isend", 1, None),
    ("Irecv", 1, None),
    ("Wait", 1, None),
    ("Waitall", 1, None),
    ("Test", 1, None),
    ("Barrier", 1, "BARRIER"),
    ("Bcast", 1, "BCAST"),
    ("Reduce", 1, "REDUCE"),
    ("Allreduce", 1, "ALLREDUCE"),
    ("Comm_split", 1, "CREATE_HANDLE"),
    ("Comm_dup", 1, "CREATE_HANDLE"),
    ("Comm_free", 1, "DESTROY_HANDLE"),
    ("File_open", 1, "CREATE_HANDLE"),
    ("File_close", 1, "DESTROY_HANDLE"),
    ("File_write_at", 1, None),
    ("File_read_at", 1, None),
    ("Comm_rank", 0, None),
    ("Comm_size", 0, None),
    # appended (codes are stable): every other way a request is created, started or completed
    ("Waitany", 1, None),
    ("Waitsome", 1, None),
    ("Testany", 1, None),
    ("Testsome", 1, None),
    ("Testall", 1, None),
    ("Send_init", 1, None),
    ("Ssend_init", 1, None),
    ("Recv_init", 1, None),
    ("Start", 1, None),
    ("Startall", 1, None),
    ("Request_free", 1, None),
    ("Cancel", 1, None),
)
# trace.c's own functions: stable codes, the same for every MPI (others: len + core index)
FUNCTIONS: Tuple[Function, ...] = tuple(
    Function(code, name, bool(interesting), collective) for code, (name, interesting, collective) in enumerate(_TABLE)
)
# MPI name -> OTF2 CollectiveOp member name
COLLECTIVES: Dict[str, str] = {f.mpi_name: f.collective for f in FUNCTIONS if f.collective}


def _check() -> None:
    for s in [HEADER] + [r.layout for r in RECORDS]:
        for f, at in zip(s.fields, s.offsets()):
            assert at % C_TYPES[f.ctype][2] == 0 or f.ctype == "char[8]", (s.c_name, f.name)  # no padding in C
    for r in RECORDS:
        if not r.variable:
            assert r.size % RECORD_ALIGNMENT == 0 and r.layout.fields[:2] == HEAD, r.name
    assert HEADER.size == 64 and CALL.size == 80 and SHORT_CALL.size == 32 and END.size == 16


_check()

# ---- the generated parts ----
