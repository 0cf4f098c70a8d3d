"""The rank file layout of the trace tool (sample_tools/trace/), written once: the file header, every
record kind (code, fields with their C types), the flags, and the tool's table of
function codes. Everything else derives from here:

  * the reader's numpy dtypes and struct formats (read.py);
  * sample_tools/trace/format.h (kinds, structs, the call packer; layout_text.py writes it);
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
from typing import Dict, List, Tuple

from qmpigen.mpi import roles as _roles

MAGIC = b"QMPITRC\0"
VERSION = 7  # written by the trace tool (sample_tools/trace/); 5 packs calls (PACKED_CALL),
# whose head is version 4's SHORT_CALL with `present` for its reserved 0: version 4 files
# read as they are. 6 adds what a crash leaves: a rank file's tail file (TAIL_HEADER, the
# records not yet written to the rank file), a call entered and not returned (a
# PACKED_CALL whose leave is 0, the last record), the SIGNAL record, and END's reason;
# a zero head word ends a version 6 file's records. 7 writes calls as COMPACT_CALL: a
# 24-byte head (a 32-bit duration for leave, a 16-bit comm) and 64-bit fields in 4 bytes
# when all fit: a call's bytes are most of what it costs (docs/performance.md). Files of
# versions 1-3 are refused (merge them with the qmpigen that wrote them: their calls
# carried a fixed table's codes, no kinds)
READ_VERSIONS = (4, 5, 6, 7)
RECORD_ALIGNMENT = 8  # every record's size is a multiple of it

# C type -> (numpy type, struct code, size)
C_TYPES: Dict[str, Tuple[str, str, int]] = {
    "uint8_t": ("u1", "B", 1),
    "uint16_t": ("<u2", "H", 2),
    "int16_t": ("<i2", "h", 2),
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

    def offset(self, name: str) -> int:
        """Where field `name` starts."""
        return self.offsets()[[f.name for f in self.fields].index(name)]

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
COMM_CHUNK = 1000  # members per COMM record: with its head, at most 4,020 bytes (the tool's records are <= 4096)

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
        Struct(
            "function_fixed",
            (
                Field("code", "int32_t", "the code its calls carry"),
                Field("kind", "int32_t", "what the function does: its index in KINDS"),
            ),
        ),
        True,
        "NUL-terminated name (`MPI_Send`)",
        "before the function's first call in the file",
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
        f"a communicator of more than {COMM_CHUNK} members spans several records",
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
                Field("combiner", "int32_t", "the constructor: `MPI_COMBINER_*`'s index in COMBINERS"),
                Field("reserved", "int32_t"),
                Field("lb", "int64_t", "`MPI_Type_get_extent`"),
                Field("extent", "int64_t"),
            ),
        ),
        True,
        "NUL-terminated name",
        "datatypes are defined at their first use or creation (`MPI_Type_vector`: the CALL's `created`)",
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
                Field("peer", "int32_t", "dest or target: world rank; -1 none", -1),
                Field("tag", "int32_t", "tag (a send's in Sendrecv); File_open: access mode (FILE_MODE); whence"),
                Field("root", "int32_t", "world rank", -1),
                Field("datatype", "int32_t", "datatype id (the send side's)", -1),
                Field("file", "int32_t", "file id", -1),
                Field("count", "int64_t", "elements (the send side's)"),
                Field("bytes", "int64_t", "count x datatype size: bytes sent, written, put, or of `count`"),
                Field("offset", "int64_t", "file offset, view displacement, size; target displacement"),
                Field("request", "uint64_t", "request handle"),
                Field("source", "int32_t", "source: world rank; -1 none, -2 MPI_ANY_SOURCE", -1),
                Field("recv_tag", "int32_t", "the receive tag of Sendrecv"),
                Field("window", "int32_t", "window id", -1),
                Field("created", "int32_t", "the id of the communicator, file, window or datatype made", -1),
                Field("recv_bytes", "int64_t", "bytes received, read or fetched (the receive side)"),
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
        "PACKED_CALL",
        Struct(
            "packed_call_record",
            _CALL_HEAD + (Field("present", "uint32_t", "bit i: the i-th CALL field after comm follows"),),
        ),
        tail="the CALL fields after comm whose bit is set in `present`, in CALL's order, each at its "
        "size (unaligned), then zero bytes to a multiple of 8",
        doc="one traced call, as the trace tool writes them: a CALL without its fields at their defaults "
        "(32 bytes for a call without arguments, 64 for MPI_File_write_at's, against CALL's 104); "
        "leave 0: the call was entered and had not returned (version 6: the thread's last record)",
    ),
    Record(
        11,
        "END",
        Struct(
            "end_record",
            HEAD
            + (
                Field("reason", "uint32_t", "END_* reason (version 6; 0 before)"),
                Field("calls", "uint64_t", "call records in the file"),
            ),
        ),
        doc="the file's last record, written at `MPI_Finalize` (or where the thread's tracing stopped: "
        "`reason`): a file without it was cut short",
    ),
    Record(
        12,
        "WINDOW",
        Struct(
            "window_record",
            HEAD
            + (
                Field("id", "int32_t"),
                Field("comm", "int32_t", "the communicator it was created on (target ranks are its ranks)"),
                Field("reserved", "int32_t"),
            ),
        ),
        doc="a one-sided window, defined where it is created",
    ),
    Record(
        13,
        "SIGNAL",
        Struct(
            "signal_record",
            HEAD
            + (
                Field("signal", "int32_t", "the signal's number"),
                Field("code", "int32_t", "its `si_code`"),
                Field("sender", "int32_t", "the pid that sent it (`si_pid`), 0 if the kernel did"),
                Field("ticks", "uint64_t", "when it arrived"),
                Field("ns", "uint64_t", "`CLOCK_MONOTONIC` read at the same moment"),
            ),
        ),
        doc="a fatal signal the tool's handler saw (version 6), the last record of the thread that "
        "received it, right after the call it interrupted if one was open",
    ),
    Record(
        14,
        "COMPACT_CALL",
        Struct(
            "compact_call_record",
            HEAD
            + (
                Field("func", "uint16_t", "function code"),
                Field("depth", "uint8_t", "nesting depth"),
                Field("flags", "uint8_t", "CALL_* and COMPACT_* flags"),
                Field("enter", "uint64_t", "ticks"),
                Field(
                    "duration",
                    "uint32_t",
                    "leave - enter, ticks (at least 1); 0: entered, not returned; 0xFFFFFFFF: leave follows (bit 15)",
                ),
                Field("comm", "int16_t", "communicator id, -1 none; -32768: it follows (bit 14)", -1),
                Field("present", "uint16_t", "bit i: the i-th CALL field after comm follows; 14: comm; 15: leave"),
            ),
        ),
        tail="the CALL fields after comm whose bit is set in `present`, in CALL's order, each at its "
        "size (unaligned; a 64-bit one in 4 bytes with COMPACT_NARROW, sign-extended, a request "
        "zero-extended), then comm (i32) and leave (u64) if their bits are set, then zero bytes "
        "to a multiple of 8",
        doc="one traced call, as the trace tool writes them (version 7): a CALL without its fields at "
        "their defaults (24 bytes for a call without arguments, 40 for MPI_File_write_at's at "
        "offset 0, 48 for MPI_Send's, against CALL's 104); duration 0: the call was entered and had "
        "not returned (the thread's last record)",
    ),
)
BY_NAME = {r.name: r for r in RECORDS}
CALL, PACKED_CALL, COMPACT_CALL, COMPLETION, CLOCK, TIMER, END, WINDOW, SIGNAL = (
    BY_NAME[n]
    for n in ("CALL", "PACKED_CALL", "COMPACT_CALL", "COMPLETION", "CLOCK", "TIMER", "END", "WINDOW", "SIGNAL")
)
# The fields a PACKED_CALL may carry after its head, bit i of `present` for the i-th.
PACKED_FIELDS: Tuple[Field, ...] = CALL.layout.fields[len(_CALL_HEAD) :]
# A COMPACT_CALL's fields: PACKED_CALL's, then the two its head holds short, in full.
COMPACT_FIELDS: Tuple[Field, ...] = PACKED_FIELDS + (
    Field("comm", "int32_t", "communicator id, when it does not fit the head's 16 bits"),
    Field("leave", "uint64_t", "ticks, when leave - enter does not fit the head's 32 bits"),
)
COMPACT_COMM_WIDE = -32768  # a COMPACT_CALL head's comm when the id follows
COMPACT_DURATION_WIDE = 0xFFFFFFFF  # a COMPACT_CALL head's duration when leave follows
COMPACT_CALL_MAX = RECORD_ALIGNMENT * -(
    -(COMPACT_CALL.size + sum(C_TYPES[f.ctype][2] for f in COMPACT_FIELDS)) // RECORD_ALIGNMENT
)
# A COMPACT_CALL's flags beside CALL's: how its fields are stored (an unpacked call has none)
COMPACT_FLAGS = (
    ("COMPACT_NARROW", 8, "every 64-bit field present is stored in 4 bytes"),
    ("COMPACT_RECV_IS_BYTES", 16, "recv_bytes equals bytes (not stored): Bcast, Allreduce, Fetch_and_op"),
)
# MPI's datatype constructors (MPI 5.0 table 5.1), in this order in TYPE records: the tool
# maps the MPI's MPI_COMBINER_ values (which differ per MPI) to these indices.
COMBINERS: Tuple[str, ...] = tuple(
    "NAMED DUP CONTIGUOUS VECTOR HVECTOR INDEXED HINDEXED INDEXED_BLOCK HINDEXED_BLOCK STRUCT SUBARRAY DARRAY "
    "F90_REAL F90_COMPLEX F90_INTEGER RESIZED".split()
)

FLAGS = (
    ("CALL_HAS_REQUEST", 1, "the call carries a request handle"),
    ("CALL_FAILED", 2, "the function returned an MPI error code"),
    ("CALL_STATUS_BYTES", 4, "recv_bytes is what the call's status counts (a file read's bytes read; version 6)"),
)
CALL_FLAGS = sum(value for _, value, _ in FLAGS)  # every CALL_ flag: what a COMPACT_CALL keeps of a CALL's
PEERS = (("PEER_NONE", -1), ("PEER_ANY", -2))
# MPI_File_open's access mode in a CALL's tag: OTF2's access mode (0 read-only, 1 write-only,
# 2 read-write) in the low bits, and these (the MPI's own MPI_MODE_ values differ per MPI)
FILE_MODES = (
    ("FILE_MODE_CREATE", 0x100, "MPI_MODE_CREATE"),
    ("FILE_MODE_EXCLUSIVE", 0x200, "MPI_MODE_EXCL"),
    ("FILE_MODE_DELETE_ON_CLOSE", 0x400, "MPI_MODE_DELETE_ON_CLOSE"),
    ("FILE_MODE_APPEND", 0x800, "MPI_MODE_APPEND"),
)
END_REASONS = (
    ("END_FINALIZED", 0, "`MPI_Finalize`: the file is whole"),
    ("END_STOPPED", 1, "the thread's tracing stopped (its rank file could not be written: a full file system)"),
)

# A rank file's tail file (version 6): NAME.qtr.tail beside NAME.qtr, created with it and
# removed once the rank file is whole. The tool's buffer for the thread is this file's
# page at TAIL_BUFFER_OFFSET, mapped shared, so the records not yet written to the rank
# file survive the process's death. The records of the thread are the rank file's first
# `flushed` bytes, then the buffer's records (up to a zero head word), when
# `staged_from` equals `flushed` (else the buffer was written out already).
TAIL_MAGIC = b"QMPITAL\0"
TAIL_SUFFIX = ".tail"
TAIL_BUFFER_OFFSET = 4096
TAIL_HEADER = Struct(
    "tail_header",
    (
        Field("magic", "char[8]", "`QMPITAL\\0`"),
        Field("version", "uint16_t", "the rank file's format version"),
        Field("header_size", "uint16_t", "64"),
        Field("buffer_offset", "uint32_t", f"where the buffer starts ({TAIL_BUFFER_OFFSET})"),
        Field("buffer_size", "uint32_t", "its bytes"),
        Field("rank", "int32_t", "the rank file's rank, thread and level"),
        Field("thread", "int32_t"),
        Field("level", "int32_t"),
        Field("run_id", "uint64_t", "the rank file's run"),
        Field("flushed", "uint64_t", "bytes of the rank file written"),
        Field("staged_from", "uint64_t", "the rank file offset of the buffer's first record"),
        Field("reserved", "uint64_t"),
    ),
)

REQUEST_FLAGS = (
    ("REQUEST_CANCELLED", 1, "the request was cancelled (`MPI_Test_cancelled`)"),
    ("REQUEST_FREED", 2, "`MPI_Request_free`: the application let go of the request"),
    ("REQUEST_STARTED", 4, "a persistent request started (`MPI_Start`, `MPI_Startall`)"),
)


# What a function does, from the function model (qmpigen.mpi.roles): a FUNCTION record
# carries its index here, so the merger knows a call's events without a list of names.
KINDS: Tuple[str, ...] = _roles.KINDS


def _check() -> None:
    for s in [HEADER, TAIL_HEADER] + [r.layout for r in RECORDS]:
        for f, at in zip(s.fields, s.offsets()):
            assert at % C_TYPES[f.ctype][2] == 0 or f.ctype == "char[8]", (s.c_name, f.name)  # no padding in C
    for r in RECORDS:
        if not r.variable:
            assert r.size % RECORD_ALIGNMENT == 0 and r.layout.fields[:2] == HEAD, r.name
    assert HEADER.size == 64 and CALL.size == 104 and PACKED_CALL.size == 32 and END.size == 16
    assert TAIL_HEADER.size == 64 and SIGNAL.size == 32
    assert PACKED_CALL.layout.fields[: len(_CALL_HEAD)] == CALL.layout.fields[: len(_CALL_HEAD)]
    assert len(PACKED_FIELDS) < 32 and all(f.default in (0, -1) for f in PACKED_FIELDS)
    assert COMPACT_CALL.size == 24 and len(COMPACT_FIELDS) == 16  # `present` is 16 bits
    same_head = [(f.name, f.ctype) for f in CALL.layout.fields[:6]]  # kind, size, func, depth, flags, enter
    assert [(f.name, f.ctype) for f in COMPACT_CALL.layout.fields[:6]] == same_head  # the readers copy it
    assert [f.name for f in COMPACT_FIELDS[-2:]] == ["comm", "leave"]
    assert not {value for _, value, _ in FLAGS} & {value for _, value, _ in COMPACT_FLAGS}


_check()

# ---- the generated parts ----
