"""A test-side writer of rank files (docs/trace-format.md), every struct taken from
qmpigen/trace/layout.py, the format's one home: synthetic traces of any size without an
MPI job, for the merge's scale, corrupt-input and fuzz tests and bench/trace_merge.py."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterable, Optional, Sequence, Tuple

import numpy as np

from qmpigen.trace import layout

KIND = {r.name: r.kind for r in layout.RECORDS}
# the functions synthetic files call: (name, kind); codes are their places here (a real
# file's are the core's indices)
FUNCTIONS = (
    ("MPI_Init", "other"),
    ("MPI_Finalize", "other"),
    ("MPI_Send", "send"),
    ("MPI_Recv", "recv"),
    ("MPI_Isend", "isend"),
    ("MPI_Irecv", "irecv"),
    ("MPI_Wait", "completion"),
    ("MPI_Waitall", "completion"),
    ("MPI_Barrier", "collective"),
    ("MPI_Bcast", "collective"),
    ("MPI_File_open", "file_open"),
    ("MPI_File_close", "file_close"),
    ("MPI_File_write_at", "file_write"),
    ("MPI_File_read_at", "file_read"),
    ("MPI_File_iwrite_at", "file_write"),
)
CODE = {name: code for code, (name, _) in enumerate(FUNCTIONS)}
HEAD = struct.Struct("<HH")


def record(kind: str, fixed: Sequence[int], layout_struct: layout.Struct, tail: bytes = b"") -> bytes:
    body = layout_struct.format.pack(*fixed) + tail
    body += b"\0" * (-(4 + len(body)) % layout.RECORD_ALIGNMENT)
    return HEAD.pack(KIND[kind], 4 + len(body)) + body


def fixed_record(kind: str, *values: int) -> bytes:
    r = layout.BY_NAME[kind]
    return r.layout.format.pack(r.kind, r.size, *values)


def header(
    rank: int,
    world_size: int,
    run_id: int = 0x1234,
    thread: int = 0,
    level: int = 1,
    version: int = layout.VERSION,
    realtime: int = 1_700_000_000_000_000_000,
) -> bytes:
    return layout.HEADER.format.pack(
        layout.MAGIC,
        version,
        layout.HEADER.size,
        layout.RECORD_ALIGNMENT,
        rank,
        thread,
        level,
        world_size,
        1000 + rank,
        0,
        0,
        realtime,
        run_id,
    )


def function_records(functions: Sequence[Tuple[str, str]] = FUNCTIONS) -> bytes:
    """A FUNCTION record per (name, kind), its code its place."""
    return b"".join(
        record("FUNCTION", (code, layout.KINDS.index(kind)), layout.BY_NAME["FUNCTION"].layout, name.encode() + b"\0")
        for code, (name, kind) in enumerate(functions)
    )


def preamble(program: str = "synth", host: str = "node", functions: Sequence[Tuple[str, str]] = FUNCTIONS) -> bytes:
    process = record(
        "PROCESS", (0,), layout.BY_NAME["PROCESS"].layout, program.encode() + b"\0" + host.encode() + b"\0"
    )
    return function_records(functions) + process


def comm(comm_id: int, members: Sequence[int]) -> bytes:
    out = []
    for first in range(0, max(len(members), 1), layout.COMM_CHUNK):
        part = members[first : first + layout.COMM_CHUNK]
        out.append(
            record(
                "COMM",
                (comm_id, len(members), first, len(part)),
                layout.BY_NAME["COMM"].layout,
                struct.pack(f"<{len(part)}i", *part),
            )
        )
    return b"".join(out)


def calls(
    func: np.ndarray,
    enter: np.ndarray,
    leave: np.ndarray,
    comm_id: int = 0,
    peer: Optional[np.ndarray] = None,
    tag: int = 0,
    nbytes: int = 8,
    receive: Optional[np.ndarray] = None,
) -> bytes:
    """CALL records (layout.CALL's dtype), one per row; `peer` is a receive's source
    where `receive` is set (its bytes received)."""
    rows = np.zeros(len(func), layout.CALL.layout.dtype)
    for f in layout.CALL.layout.fields:
        if f.default:
            rows[f.name] = f.default
    rows["kind"], rows["size"] = layout.CALL.kind, layout.CALL.size
    rows["func"], rows["enter"], rows["leave"], rows["comm"] = func, enter, leave, comm_id
    if peer is not None:
        rows["peer"], rows["tag"], rows["bytes"], rows["count"] = peer, tag, nbytes, nbytes
        if receive is not None:
            rows["source"] = np.where(receive, peer, -1)
            rows["peer"] = np.where(receive, -1, peer)
            rows["recv_bytes"] = np.where(receive, nbytes, 0)
    return rows.tobytes()


def compact(call_records: bytes) -> bytes:
    """CALL records as the COMPACT_CALL records the trace tool writes (format 7, as
    docs/trace-format.md describes them): each field not at its default, the 64-bit ones
    in 4 bytes when all of a record's fit, recv_bytes left out when it equals bytes."""
    rows = np.frombuffer(call_records, layout.CALL.layout.dtype)
    narrow_flag, recv_flag = (value for _, value, _ in layout.COMPACT_FLAGS)
    out = []
    for row in rows:
        value = {f.name: int(row[f.name]) for f in layout.CALL.layout.fields}
        wide = [f for f in layout.PACKED_FIELDS if layout.C_TYPES[f.ctype][2] == 8]
        narrow = all(
            0 <= value[f.name] < 1 << 32 if f.ctype.startswith("u") else -(1 << 31) <= value[f.name] < 1 << 31
            for f in wide
        )
        recv_is_bytes = value["recv_bytes"] != 0 and value["recv_bytes"] == value["bytes"]
        present, tail = 0, b""
        for bit, f in enumerate(layout.PACKED_FIELDS):
            if value[f.name] == f.default or (f.name == "recv_bytes" and recv_is_bytes):
                continue
            code = layout.C_TYPES[f.ctype][1]
            if f in wide and narrow:
                code = "I" if f.ctype.startswith("u") else "i"
            tail += struct.pack("<" + code, value[f.name])
            present |= 1 << bit
        # as the packer: u64 ticks, 0 if entered (leave 0), at least 1, else leave in full
        duration = (value["leave"] - value["enter"]) % (1 << 64) if value["leave"] else 0
        duration += value["leave"] != 0 and duration == 0
        comm_wide, leave_wide = not -32767 <= value["comm"] <= 32767, duration >= layout.COMPACT_DURATION_WIDE
        if comm_wide:
            tail += struct.pack("<i", value["comm"])
        if leave_wide:
            tail += struct.pack("<Q", value["leave"])
        tail += b"\0" * (-len(tail) % layout.RECORD_ALIGNMENT)
        flags = (
            value["flags"] & layout.CALL_FLAGS | (narrow_flag if narrow else 0) | (recv_flag if recv_is_bytes else 0)
        )
        out.append(
            layout.COMPACT_CALL.layout.format.pack(
                layout.COMPACT_CALL.kind,
                layout.COMPACT_CALL.size + len(tail),
                value["func"],
                value["depth"],
                flags,
                value["enter"],
                layout.COMPACT_DURATION_WIDE if leave_wide else duration,
                layout.COMPACT_COMM_WIDE if comm_wide else value["comm"],
                present | comm_wide << 14 | leave_wide << 15,
            )
            + tail
        )
    return b"".join(out)


def rank_file(
    rank: int,
    world_size: int,
    n_calls: int = 24,
    run_id: int = 0x1234,
    end: bool = True,
    extra: bytes = b"",
    t0: int = 1_000_000,
    compact_calls: bool = False,
    **head,
) -> bytes:
    """A rank of a ring: MPI_Init, n_calls - 2 calls alternating MPI_Send to the right and
    MPI_Recv from the left (tag 7, 8 bytes), MPI_Finalize; timers, clocks, END. The calls
    are whole CALL records, or with `compact_calls` COMPACT_CALL records (the tool's)."""
    middle = max(n_calls - 2, 0)
    func = np.empty(middle + 2, np.uint16)
    func[0], func[-1] = CODE["MPI_Init"], CODE["MPI_Finalize"]
    is_send = np.arange(middle) % 2 == (rank % 2)
    func[1:-1] = np.where(is_send, CODE["MPI_Send"], CODE["MPI_Recv"])
    enter = t0 + 1000 * np.arange(middle + 2, dtype=np.uint64)
    peer = np.full(middle + 2, -1, np.int32)
    peer[1:-1] = np.where(is_send, (rank + 1) % world_size, (rank - 1) % world_size)
    body = [
        header(rank, world_size, run_id, **head),
        preamble(),
        comm(0, [] if world_size > 100_000 else list(range(world_size))),
        fixed_record("TIMER", 0, t0, t0),
        fixed_record("CLOCK", 0, t0, 0, 0),
        (compact if compact_calls else bytes)(
            calls(func, enter, enter + 500, 0, peer, 7, 8, receive=func == CODE["MPI_Recv"])
        ),
        extra,
        fixed_record("CLOCK", 1, int(enter[-1]), 0, 0),
        fixed_record("TIMER", 0, int(enter[-1]) + 600, int(enter[-1]) + 600),
    ]
    if end:
        body.append(fixed_record("END", 0, middle + 2 + extra_calls(extra)))
    return b"".join(body)


def extra_calls(extra: bytes) -> int:
    return 0  # extra bytes are never call records in these tests


def write_run(
    directory: Path, world_size: int, n_calls: int = 24, ranks: Optional[Iterable[int]] = None, **kwargs
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for rank in range(world_size) if ranks is None else ranks:
        (directory / f"synth_node_{rank}_0.L1.qtr").write_bytes(rank_file(rank, world_size, n_calls, **kwargs))


# ---- crafted files: few bytes that cost a merge far more than their size did (issue 32,
# item 7); tests/test_trace_crafted.py, the fuzzer (trace_fuzz.py) and bench/trace_crafted.py


def synthetic(
    rank: int,
    world_size: int,
    functions: Sequence[Tuple[str, str]],
    definitions: bytes,
    body: bytes,
    n_calls: int,
    program: str = "synth",
) -> bytes:
    """A rank file: header, a FUNCTION record per (name, kind), PROCESS, `definitions`, a
    TIMER, `body` (its n_calls call records), END."""
    return b"".join(
        [
            header(rank, world_size),
            preamble(program, functions=functions),
            definitions,
            fixed_record("TIMER", 0, 1_000_000, 1_000_000),
            body,
            fixed_record("END", 0, n_calls),
        ]
    )


def _file(world_size: int, names: Sequence[str], definitions: bytes, rows: np.ndarray, program: str = "synth") -> bytes:
    """Rank 0's file: functions of kind other, a call of function rows[i] per row (1 us apart)."""
    enter = 1_000_000 + 1000 * np.arange(len(rows), dtype=np.uint64)
    body = calls(rows.astype(np.uint16), enter, enter + 500, 0)
    return synthetic(0, world_size, [(name, "other") for name in names], definitions, body, len(rows), program)


def comm_records(n: int) -> bytes:
    """One communicator of n members listed one member per COMM record (quadratic before:
    every record sorted all the parts so far)."""
    tail = layout.BY_NAME["COMM"].layout
    parts = b"".join(record("COMM", (0, n, i, 1), tail, struct.pack("<i", i)) for i in range(n))
    return _file(n, ["MPI_Init", "MPI_Barrier", "MPI_Finalize"], parts, np.array([0, 1, 2]))


def world_claim(members: int) -> bytes:
    """One file claiming a world of 2^31-1 ranks, its communicator naming `members` of them
    (a location and two OTF2 files each before)."""
    ranks = [0] + [1 + i * 1000 for i in range(members - 1)]
    return _file(2**31 - 1, ["MPI_Init", "MPI_Barrier", "MPI_Finalize"], comm(0, ranks), np.array([0, 1, 2]))


def many_functions(n: int, name: str = "MPI_F{}") -> bytes:
    """n functions, each called once (a legend entry each before: 8,192 made a picture
    76,694 pixels tall)."""
    return _file(1, [name.format(i) for i in range(n)], comm(0, [0]), np.arange(n))


def dollar_names() -> bytes:
    """A program and functions whose names matplotlib would read as mathtext (it aborted
    the merge)."""
    names = ["MPI_Init", "MPI_$x^$", r"$\frac{$", "MPI_Finalize"]
    return _file(1, names, comm(0, [0]), np.arange(4), program=r"app$\alpha_{$")


# a crafted shape -> its file at a scale (records, ranks or functions)
CRAFTED = {
    "comm_records": comm_records,
    "world_claim": world_claim,
    "many_functions": many_functions,
}


def valid_of_size(size: int) -> bytes:
    """A valid rank file (rank_file's ring, one rank) of about `size` bytes."""
    per_call, rest = layout.CALL.size, len(rank_file(0, 1, 2))
    return rank_file(0, 1, max(2, 2 + (size - rest) // per_call))


def call_rows(func: Sequence[int], **fields: Sequence[int]) -> bytes:
    """CALL records, one per function code, 1 us apart from t = 2 ms (each 500 ns long),
    every other field at its default unless given (a column per field)."""
    rows = np.zeros(len(func), layout.CALL.layout.dtype)
    for f in layout.CALL.layout.fields:
        if f.default:
            rows[f.name] = f.default
    rows["kind"], rows["size"], rows["func"] = layout.CALL.kind, layout.CALL.size, func
    rows["enter"] = 2_000_000 + 1000 * np.arange(len(func), dtype=np.uint64)
    rows["leave"] = rows["enter"] + 500
    for name, values in fields.items():
        rows[name] = values
    return rows.tobytes()
