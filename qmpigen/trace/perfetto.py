"""Chrome trace JSON for Perfetto (ui.perfetto.dev) and chrome://tracing: a process per
rank, a track per thread, a slice per call, a flow arrow per matched message. Written
as it goes: slices per rank file, arrows at the end."""

from __future__ import annotations

import json
from typing import IO, Dict


class PerfettoWriter:
    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.first = True
        self.stream.write('{"displayTimeUnit": "ns", "traceEvents": [\n')
        self.flow = 0

    def _emit(self, event: Dict) -> None:
        self.stream.write(("" if self.first else ",\n") + json.dumps(event, separators=(",", ":")))
        self.first = False

    def track(self, rank: int, thread: int, host: str) -> None:
        self._emit({"ph": "M", "name": "process_name", "pid": rank, "tid": thread,
                    "args": {"name": f"rank {rank} ({host})"}})
        self._emit({"ph": "M", "name": "process_sort_index", "pid": rank, "args": {"sort_index": rank}})
        self._emit({"ph": "M", "name": "thread_name", "pid": rank, "tid": thread, "args": {"name": f"thread {thread}"}})

    def slice(self, rank: int, thread: int, name: str, enter_ns: int, leave_ns: int, args: Dict) -> None:
        self._emit({"ph": "X", "name": name, "cat": "mpi", "pid": rank, "tid": thread, "ts": enter_ns / 1000,
                    "dur": (leave_ns - enter_ns) / 1000, "args": args})

    def message(self, sender, receiver) -> None:
        """An arrow from the send call to the call that completed the receive."""
        self.flow += 1
        common = {"name": f"message tag {sender.tag}", "cat": "message", "id": self.flow}
        self._emit({**common, "ph": "s", "pid": sender.sender, "tid": sender.thread, "ts": sender.time / 1000})
        self._emit({**common, "ph": "f", "bp": "e", "pid": receiver.receiver, "tid": receiver.thread,
                    "ts": receiver.time / 1000})

    def close(self) -> None:
        self.stream.write("\n]}\n")
