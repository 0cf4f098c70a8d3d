"""Chrome trace JSON for Perfetto (ui.perfetto.dev) and chrome://tracing: a process per
rank, a track per thread, a slice per call, a flow arrow per matched message. Written
as it goes, in bulk: the slices of a rank file by _loops.c's C loop (or, where that
extension was not built, by groups of calls with the same function and arguments present, one
%-template each), arrows at the end. Times are microseconds with three decimals (exact
ns)."""

from __future__ import annotations

import ctypes
import json
from typing import IO, Dict, List, Sequence

import numpy as np

from . import loops

# a call record's fields shown as a slice's args, unless -1 or 0 (docs/trace-format.md says
# what each holds per kind)
ARG_FIELDS = (
    "comm",
    "peer",
    "source",
    "tag",
    "recv_tag",
    "root",
    "count",
    "bytes",
    "recv_bytes",
    "file",
    "window",
    "offset",
    "datatype",
    "created",
)
SLICE_TEXT = 1024  # the most a slice's text takes besides its name: 14 args of at most 40 bytes, and the rest


def _us(ns: np.ndarray) -> np.ndarray:
    """ns (int64) as JSON microseconds with three decimals (an object array of str)."""
    whole, frac = np.divmod(np.abs(ns), 1000)
    sign = np.where(ns < 0, "-", "")
    out = np.empty(len(ns), object)
    out[:] = [f"{s}{w}.{f:03d}" for s, w, f in zip(sign.tolist(), whole.tolist(), frac.tolist())]
    return out


CHUNK = 1 << 14  # calls or messages formatted per C call: the text in memory stays small (and in cache)


class PerfettoWriter:
    def __init__(self, stream: IO[bytes]):
        self.stream = stream
        self.first = True
        self.stream.write(b'{"displayTimeUnit": "ns", "traceEvents": [\n')
        self.flow = 0
        self.events = 0  # trace events written: slices, flow starts and ends, metadata
        self.buffer = np.empty(0, np.uint8)  # the C loops' text, reused
        self.native = loops.load()
        # the function names as JSON strings for the C loop, encoded as they come (the list
        # only grows; encoding all of it per chunk cost files x names)
        self.encoded: List[bytes] = []
        self.c_names = (ctypes.c_char_p * 0)()
        self.longest = 0

    def _native_write(self, function: str, n: int, per_call: int, *args) -> None:
        """Runs a C loop of _loops.c over n items and writes its text."""
        cap = n * per_call + 64
        if len(self.buffer) < cap:  # one buffer for the whole merge: fresh pages cost faults
            self.buffer = np.empty(cap, np.uint8)  # not zeroed: the C loop says how much it wrote
        out = self.buffer
        c_function = getattr(self.native, function)
        c_function.restype = ctypes.c_int64
        size = c_function(ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(cap), ctypes.c_int64(n), *args)
        if size < 0:
            raise RuntimeError(f"{function}: output buffer too small")
        if not self.first:
            self.stream.write(b",\n")
        self.stream.write(out[:size].data)
        self.first = False

    def _write(self, lines: Sequence[str]) -> None:
        if not lines:
            return
        self.stream.write((("" if self.first else ",\n") + ",\n".join(lines)).encode())
        self.first = False

    def track(self, rank: int, thread: int, host: str) -> None:
        self.events += 3
        self._write(
            [
                json.dumps(e, separators=(",", ":"))
                for e in (
                    {
                        "ph": "M",
                        "name": "process_name",
                        "pid": rank,
                        "tid": thread,
                        "args": {"name": f"rank {rank} ({host})"},
                    },
                    {"ph": "M", "name": "process_sort_index", "pid": rank, "args": {"sort_index": rank}},
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": rank,
                        "tid": thread,
                        "args": {"name": f"thread {thread}"},
                    },
                )
            ]
        )

    def slices(
        self,
        rank: int,
        thread: int,
        names: Sequence[str],
        func: np.ndarray,
        enter: np.ndarray,
        leave: np.ndarray,
        args: Dict[str, np.ndarray],
        depth: np.ndarray,
    ) -> None:
        """One slice per call (time order): `func` indexes `names`; `args` holds ARG_FIELDS,
        any integer type (the C loop's chunks are made int64 one at a time, while in cache)."""
        n = len(func)
        if n == 0:
            return
        self.events += n
        if self.native is not None:
            for at in range(0, n, CHUNK):
                part = slice(at, at + CHUNK)
                self._native_slices(
                    rank,
                    thread,
                    names,
                    func[part],
                    enter[part],
                    leave[part],
                    {name: args[name][part] for name in ARG_FIELDS},
                    depth[part],
                )
            return
        args = {name: args[name].astype(np.int64) for name in ARG_FIELDS}
        mask = np.zeros(n, np.int64)
        for bit, name in enumerate(ARG_FIELDS):
            mask |= (~np.isin(args[name], (-1, 0))).astype(np.int64) << bit
        mask |= (depth > 0).astype(np.int64) << len(ARG_FIELDS)
        ts, dur = _us(enter), _us(leave - enter)
        columns = dict(args)
        columns["nested"] = depth
        out = np.empty(n, object)
        group = func.astype(np.int64) << 16 | mask
        keys, inverse = np.unique(group, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(keys) + 1))
        for g, key in enumerate(keys.tolist()):
            rows = order[bounds[g] : bounds[g + 1]]
            fields = [name for bit, name in enumerate(ARG_FIELDS + ("nested",)) if (key & 0xFFFF) >> bit & 1]
            template = (
                '{"ph":"X","name":'
                + json.dumps(names[key >> 16]).replace("%", "%%")
                + f',"cat":"mpi","pid":{rank},"tid":{thread},"ts":%s,"dur":%s,"args":{{'
                + ",".join(f'"{name}":%d' for name in fields)
                + "}}"
            )
            values = [ts[rows].tolist(), dur[rows].tolist()] + [columns[name][rows].tolist() for name in fields]
            out[rows] = [template % row for row in zip(*values)]
        self._write(out.tolist())

    def _native_slices(self, rank, thread, names, func, enter, leave, args, depth) -> None:
        if len(self.encoded) < len(names):
            self.encoded += [json.dumps(name).encode() for name in names[len(self.encoded) :]]
            self.c_names = (ctypes.c_char_p * len(self.encoded))(*self.encoded)
            self.longest = max(map(len, self.encoded))
        columns = [np.ascontiguousarray(args[name], np.int64) for name in ARG_FIELDS]
        arg_arrays = (ctypes.c_void_p * len(columns))(*(c.ctypes.data for c in columns))
        arg_names = (ctypes.c_char_p * len(ARG_FIELDS))(*(name.encode() for name in ARG_FIELDS))
        func, enter, leave = (np.ascontiguousarray(a, np.int64) for a in (func, enter, leave))
        depth = np.ascontiguousarray(depth, np.uint8)
        self._native_write(
            "qmpi_json_slices",
            len(func),
            SLICE_TEXT + self.longest,
            self.c_names,
            ctypes.c_void_p(func.ctypes.data),
            ctypes.c_void_p(enter.ctypes.data),
            ctypes.c_void_p(leave.ctypes.data),
            arg_arrays,
            arg_names,
            ctypes.c_int(len(columns)),
            ctypes.c_void_p(depth.ctypes.data),
            ctypes.c_int(rank),
            ctypes.c_int(thread),
        )

    def messages(self, senders: np.ndarray, receivers: np.ndarray) -> None:
        """An arrow per pair (ENDPOINT_DTYPE arrays, pairwise): from the send call to the
        call that completed the receive."""
        n = len(senders)
        if n == 0:
            return
        first_id = self.flow + 1
        self.events += 2 * n
        ids = range(self.flow + 1, self.flow + n + 1)
        self.flow += n
        if self.native is not None:
            for at in range(0, n, CHUNK):
                s, r = senders[at : at + CHUNK], receivers[at : at + CHUNK]
                columns = [
                    np.ascontiguousarray(a, np.int64)
                    for a in (s["tag"], s["sender"], s["thread"], s["time"], r["receiver"], r["thread"], r["time"])
                ]
                self._native_write(
                    "qmpi_json_flows",
                    len(s),
                    400,
                    ctypes.c_int64(first_id + at),
                    *(ctypes.c_void_p(c.ctypes.data) for c in columns),
                )
            return
        lines = []
        for flow, tag, s_rank, s_thread, s_time, r_rank, r_thread, r_time in zip(
            ids,
            senders["tag"].tolist(),
            senders["sender"].tolist(),
            senders["thread"].tolist(),
            _us(senders["time"]).tolist(),
            receivers["receiver"].tolist(),
            receivers["thread"].tolist(),
            _us(receivers["time"]).tolist(),
        ):
            common = f'"name":"message tag {tag}","cat":"message","id":{flow}'
            lines.append(f'{{{common},"ph":"s","pid":{s_rank},"tid":{s_thread},"ts":{s_time}}}')
            lines.append(f'{{{common},"ph":"f","bp":"e","pid":{r_rank},"tid":{r_thread},"ts":{r_time}}}')
        self._write(lines)

    def close(self) -> None:
        self.stream.write(b"\n]}\n")
