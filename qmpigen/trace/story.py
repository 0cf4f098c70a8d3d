"""How each thread that did not finalize ended (issue 33), as the merge tells it in
summary.txt, on its OTF2 location (a ProgramEnd event with attributes) and on the
timeline: the last call that returned, the call it was in (entered, not returned), the
fatal signal the trace tool's handler saw, or that its tracing stopped (its rank file
could not be written: a full file system). What a rank file says of it: its END record
(none: it did not finalize; reason END_STOPPED), and what its tail file holds after its
records (tail.py: the call entered, the SIGNAL record)."""

from __future__ import annotations

import signal as signals
import struct
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .read import END_STOPPED, RankFile

OPEN_HEAD = struct.Struct("<HHHBBQ")  # a PACKED_CALL's or COMPACT_CALL's kind, size, func, depth, flags, enter
# what a fault's si_code says (Linux's <signal.h>), for the signals that have them
FAULT_CODES: Dict[int, Dict[int, str]] = {
    signals.SIGSEGV: {1: "address not mapped", 2: "invalid permissions for the address"},
    signals.SIGBUS: {1: "misaligned address", 2: "nonexistent physical address", 3: "object-specific error"},
    signals.SIGFPE: {1: "integer divide by zero", 2: "integer overflow", 3: "floating-point divide by zero"},
    signals.SIGILL: {1: "illegal opcode", 2: "illegal operand", 4: "illegal addressing mode"},
}
EXIT_UNKNOWN = -1  # a ProgramEnd's exit status when the signal is not known (SIGKILL cannot be seen)


@dataclass(frozen=True)
class Unfinished:
    """How one thread's trace ended without MPI_Finalize. Times are ns on the merged axis."""

    rank: int
    thread: int
    last: Optional[Tuple[str, int]]  # the last call that returned: its function, its leave
    entered: Optional[Tuple[str, int]]  # the call it was in: its function, its enter
    signal: Optional[Tuple[int, int, int, int]]  # number, si_code, the sending pid (0: the kernel), ns
    stopped: bool  # its tracing stopped (END reason END_STOPPED): the rank went on

    @property
    def time(self) -> int:
        """Where the trace of the thread ends."""
        times = [t for t in (self.last and self.last[1], self.entered and self.entered[1]) if t is not None]
        if self.signal is not None:
            times.append(self.signal[3])
        return max(times, default=0)

    @property
    def exit_status(self) -> int:
        """As a shell shows a process killed by a signal (128 + its number), else EXIT_UNKNOWN."""
        return 128 + self.signal[0] if self.signal is not None else EXIT_UNKNOWN

    @property
    def label(self) -> str:
        """A few words for the timeline: SIGSEGV in MPI_Recv, killed in MPI_Barrier, ..."""
        if self.stopped:
            return "tracing stopped"
        what = signal_text(*self.signal[:3]).split(" ")[0] if self.signal is not None else "ended"
        return (
            f"{what} in {self.entered[0]}"
            if self.entered is not None
            else f"{what} after {self.last[0] if self.last else 'no call'}"
        )

    def parts(self) -> List[Tuple[str, str]]:
        """(what, text) pairs: the summary's and the OTF2 attributes' words."""
        out = []
        if self.stopped:
            out.append(
                ("tracing stopped", "its rank file could not be written (a full file system?); the rank went on")
            )
        if self.last is not None:
            out.append(("last call returned", f"{self.last[0]} at {self.last[1] / 1e6:.3f} ms"))
        if self.entered is not None:
            out.append(("in call", f"{self.entered[0]}, entered at {self.entered[1] / 1e6:.3f} ms, not returned"))
        if self.signal is not None:
            out.append(("signal", signal_text(*self.signal[:3])))
        elif not self.stopped:
            out.append(("signal", "none seen (SIGKILL, a launcher's kill, or an exit without MPI_Finalize)"))
        return out


def signal_text(number: int, code: int, sender: int) -> str:
    """SIGSEGV (signal 11, address not mapped), SIGTERM (signal 15, sent by pid 1234)."""
    try:
        name = signals.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    why = FAULT_CODES.get(number, {}).get(code) if code > 0 else (f"sent by pid {sender}" if sender > 0 else None)
    return f"{name} (signal {number}" + (f", {why})" if why else ")")


def ending_of(
    rank_file: RankFile,
    calls: np.ndarray,
    leave: np.ndarray,
    name_of: Callable[[int], str],
    to_axis: Callable[[int], int],
) -> Optional[Unfinished]:
    """How the thread of `rank_file` ended, or None if it finalized. `calls` and `leave`:
    its calls (any order) and their leave times on the axis; `name_of`: a function code's
    name; `to_axis`: ticks -> ns on the axis."""
    if rank_file.end_calls is not None and rank_file.end_reason != END_STOPPED:
        return None
    last = None
    if len(calls):
        i = int(np.argmax(leave))
        last = (name_of(int(calls["func"][i])), int(leave[i]))
    entered = None
    if rank_file.ending.open_call is not None:
        _, _, func, _, _, enter = OPEN_HEAD.unpack_from(rank_file.ending.open_call)
        at = to_axis(enter) if enter else (last[1] if last else 0)  # enter 0: killed as it was written
        entered = (name_of(func), max(at, last[1] if last else at))
    sig = rank_file.ending.signal
    return Unfinished(
        rank_file.rank,
        rank_file.thread,
        last,
        entered,
        None if sig is None else (sig[0], sig[1], sig[2], to_axis(sig[3])),
        rank_file.end_reason == END_STOPPED and rank_file.end_calls is not None,
    )


def summary_text(endings: Sequence[Unfinished]) -> str:
    """summary.txt's section, one line per thread that did not finalize."""
    if not endings:
        return ""
    lines = ["threads that did not finalize (their last call returned; the call they were in; the signal):"]
    for e in sorted(endings, key=lambda e: (e.rank, e.thread)):
        lines.append(f"  rank {e.rank} thread {e.thread}: " + "; ".join(f"{what}: {text}" for what, text in e.parts()))
    return "\n".join(lines) + "\n"
