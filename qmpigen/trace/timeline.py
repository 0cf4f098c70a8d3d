"""What the timeline picture (ranks x time, calls coloured by function, messages as
arrows, I/O on a lane per track; drawn by timeline_plot.py), the I/O picture (bytes per
rank over time; io_picture.py) and the text summary (time per function per rank, I/O
per rank, message matrix) need, gathered while the merge runs (pictures.py draws them)."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Optional, Tuple

import numpy as np

COLUMNS = 2400  # pixel columns of the time axis the calls are drawn into
MAX_LINES = 50_000  # message lines drawn: more only darken the same pixels
MAX_TRACKS = 64  # tracks drawn: beyond, an evenly spaced sample (a picture 8,192 tracks tall shows nothing)
MATRIX_RANKS = 16  # the summary shows the message matrix up to this many ranks, else the busiest pairs
BUSIEST_PAIRS = 50


class Timeline:
    """What the pictures and the summary need, in memory that does not grow with the
    trace: per track and function, the pixel columns its calls occupy (the axis is known
    before the calls come, from pass 1), and per track the columns of its reads and
    writes; calls and time per rank and function; I/O calls and bytes per rank, and per
    drawn rank its bytes per column; the message matrix; an evenly spaced sample of at
    most MAX_LINES messages to draw."""

    def __init__(self, world_size: int, tracks: Optional[List[Tuple[int, int]]] = None) -> None:
        self.functions: List[str] = []  # index -> name
        self.index: Dict[str, int] = {}
        self.lo, self.hi, self.xlabel = 0.0, 1.0, ""  # the axis drawn, ms
        self.start_ns, self.end_ns, self.clipped = 0, 1_000_000, False  # the calls drawn: those inside
        self.columns: Dict[Tuple[int, int], Dict[int, np.ndarray]] = defaultdict(dict)  # track -> func -> used
        self.io_columns: Dict[Tuple[int, int], Dict[bool, np.ndarray]] = {}  # track -> is_write -> used
        self.io_totals: Dict[int, List[int]] = {}  # rank -> read calls, bytes read, write calls, bytes written
        # io.png: bytes read [0] and written [1] per column by the calls completed there, per
        # drawn rank and for all ranks; calls completed outside the axis counted at its edges
        self.io_bytes: Dict[int, np.ndarray] = {}
        self.io_all = np.zeros((2, COLUMNS), np.int64)
        self.io_outside = 0
        self.time_per_function: Dict[Tuple[int, str], List[int]] = defaultdict(lambda: [0, 0])  # calls, ns
        self.world_size = world_size
        # message pairs, sparse: (sender, receiver) -> [count, bytes] (a pair per message at most)
        self.pairs: Dict[Tuple[int, int], List[int]] = {}
        self.tracks = sorted(set(tracks)) if tracks is not None else None
        if self.tracks is not None and len(self.tracks) > MAX_TRACKS:
            at = np.linspace(0, len(self.tracks) - 1, MAX_TRACKS).round().astype(int)
            self.tracks = [self.tracks[i] for i in sorted(set(at.tolist()))]
        self.drawn = None if self.tracks is None else set(self.tracks)
        self.drawn_ranks = None if self.tracks is None else {rank for rank, _ in self.tracks}
        self.track_count = None if tracks is None else len(set(tracks))
        self.matched = 0
        self.lines: List[np.ndarray] = []  # (x0, track0, x1, track1) rows, ms and (rank, thread) keys
        self.endings: List[Tuple[int, int, float, str]] = []  # where a track ended without MPI_Finalize: ms, words

    def function_index(self, name: str) -> int:
        if name not in self.index:
            self.index[name] = len(self.functions)
            self.functions.append(name)
        return self.index[name]

    def set_axis(self, spans: List[Tuple[int, int, Optional[int], Optional[int]]]) -> None:
        """The time axis, from each track's (first enter, last leave, end of its MPI_Init,
        start of its MPI_Finalize), aligned ns. MPI_Init and MPI_Finalize take far longer
        than the work between them: the axis shows from the end of the last Init to the
        start of the first Finalize when there are both, and calls are cut at its edges
        (drawn only where they are inside it). Without that window the axis holds every
        call, with a margin."""
        self.start_ns = min((s[0] for s in spans), default=0)
        self.end_ns = max((s[1] for s in spans), default=1_000_000)
        self.xlabel = "time (ms, aligned to rank 0's clock)"
        init_ends = [s[2] for s in spans if s[2] is not None]
        finalize_starts = [s[3] for s in spans if s[3] is not None]
        self.clipped = bool(init_ends and finalize_starts and min(finalize_starts) > max(init_ends))
        if self.clipped:
            self.start_ns, self.end_ns = max(init_ends), min(finalize_starts)
            self.xlabel += (
                "; from the end of the last MPI_Init to the start of the first MPI_Finalize, calls cut at both edges"
            )
        if self.end_ns <= self.start_ns:
            self.end_ns = self.start_ns + 1_000_000
        lo, hi = self.start_ns / 1e6, self.end_ns / 1e6
        # a margin only where nothing lies beyond it: in a cut axis, bars drawn in a margin
        # would contradict the label
        margin = 0.0 if self.clipped else 0.03 * (hi - lo)
        self.lo, self.hi = lo - margin, hi + margin

    def visible(self, enter_ns: np.ndarray, leave_ns: np.ndarray) -> np.ndarray:
        """Calls with some time inside [start_ns, end_ns] (an instant call on an edge
        counts; a call ending exactly where the axis starts does not: the last MPI_Init)."""
        start, end = self.start_ns, self.end_ns
        inside = (leave_ns > start) & (enter_ns < end)
        return (enter_ns <= end) & (leave_ns >= start) & (inside | (enter_ns == leave_ns))

    def column(self, t_ns: np.ndarray) -> np.ndarray:
        """The pixel column holding each time, cut to the axis. Floats: a wild clock value
        must not overflow."""
        at = np.floor((t_ns.astype(np.float64) - self.start_ns) * (COLUMNS / (self.end_ns - self.start_ns)))
        return np.clip(at, 0, COLUMNS - 1).astype(np.int64)

    def column_span(self, enter_ns: np.ndarray, leave_ns: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """First and last pixel column of visible calls (those holding their first and
        last ns)."""
        return self.column(enter_ns), self.column(np.maximum(leave_ns - 1, enter_ns))

    def add(self, rank: int, thread: int, func: np.ndarray, enter_ns: np.ndarray, leave_ns: np.ndarray) -> None:
        """A track's calls (`func` holds function_index values): counted, and those inside
        the axis drawn into the columns each function occupies."""
        duration = leave_ns - enter_ns
        counts = np.bincount(func, minlength=len(self.functions))
        times = np.bincount(func, weights=duration, minlength=len(self.functions))
        for f in np.flatnonzero(counts).tolist():
            entry = self.time_per_function[(rank, self.functions[f])]
            entry[0] += int(counts[f])
            entry[1] += int(times[f])
        if self.drawn is not None and (rank, thread) not in self.drawn:
            return
        shown = self.visible(enter_ns, leave_ns)
        func = func[shown]
        first, last = self.column_span(enter_ns[shown], leave_ns[shown])
        track = self.columns[(rank, thread)]
        # grouped by function in one sort (a file may have thousands); numpy sorts 16-bit
        # keys stably by radix, in a third of the time of 8-byte ones
        keys = func.astype(np.uint16) if len(self.functions) <= 1 << 16 else func
        order = np.argsort(keys, kind="stable")
        for mine in np.split(order, np.flatnonzero(np.diff(func[order])) + 1) if len(order) else ():
            f = int(func[mine[0]])
            used = _cover(first[mine], last[mine])
            track[f] = track[f] | used if f in track else used

    def add_io(
        self,
        rank: int,
        thread: int,
        enter_ns: np.ndarray,
        leave_ns: np.ndarray,
        nbytes: np.ndarray,
        is_write: np.ndarray,
    ) -> None:
        """A track's I/O calls, reads and writes (which calls those are is the merge's
        decision): counted per rank, drawn on the track's I/O lane and their bytes kept per
        column of their completion for io.png."""
        if not len(enter_ns):
            return
        nbytes = np.maximum(nbytes, 0)  # a count unknown or corrupt: no bytes, as in OTF2
        entry = self.io_totals.setdefault(rank, [0, 0, 0, 0])
        for write in (False, True):
            mine = is_write == write
            entry[2 * write] += int(mine.sum())
            entry[2 * write + 1] += int(nbytes[mine].sum())
        done = self.column(leave_ns)
        self.io_outside += int(((leave_ns < self.start_ns) | (leave_ns > self.end_ns)).sum())
        ranks = self.drawn_ranks
        for write in (False, True):
            mine = is_write == write
            # float weights hold bytes exactly up to 2^53 per column
            binned = np.bincount(done[mine], weights=nbytes[mine].astype(np.float64), minlength=COLUMNS)
            binned = np.rint(binned).astype(np.int64)
            self.io_all[int(write)] += binned
            if ranks is None or rank in ranks:
                self.io_bytes.setdefault(rank, np.zeros((2, COLUMNS), np.int64))[int(write)] += binned
        if self.drawn is not None and (rank, thread) not in self.drawn:
            return
        shown = self.visible(enter_ns, leave_ns)
        first, last = self.column_span(enter_ns[shown], leave_ns[shown])
        lanes = self.io_columns.setdefault((rank, thread), {})
        for write in (False, True):
            mine = is_write[shown] == write
            if mine.any():
                used = _cover(first[mine], last[mine])
                lanes[write] = lanes[write] | used if write in lanes else used

    def add_ending(self, rank: int, thread: int, time_ns: int, label: str) -> None:
        """Where a track's thread ended without MPI_Finalize (story.py), and how."""
        if self.drawn is None or (rank, thread) in self.drawn:
            self.endings.append((rank, thread, time_ns / 1e6, label))

    def add_messages(self, senders: np.ndarray, receivers: np.ndarray, total_hint: int) -> None:
        """Matched pairs (ENDPOINT_DTYPE, pairwise), one sender's at a time: counted, and
        every k-th kept to draw, k such that about MAX_LINES of `total_hint` are kept."""
        sender, receiver = senders["sender"].astype(np.int64), senders["receiver"].astype(np.int64)
        if len(sender):
            pair = sender << 32 | (receiver & 0xFFFFFFFF)
            keys, inverse, counts = np.unique(pair, return_inverse=True, return_counts=True)
            volume = np.bincount(inverse.reshape(-1), weights=senders["bytes"].astype(np.float64), minlength=len(keys))
            for key, count, nbytes in zip(keys.tolist(), counts.tolist(), np.rint(volume).astype(np.int64).tolist()):
                cell = self.pairs.setdefault((key >> 32, key & 0xFFFFFFFF), [0, 0])
                cell[0] += count
                cell[1] += nbytes
        self.matched += len(senders)
        step = max(1, -(-total_hint // MAX_LINES))
        keep = slice(0, len(senders), step)
        s, r = senders[keep], receivers[keep]
        line = np.empty(
            len(s),
            [("x0", "<f8"), ("rank0", "<i4"), ("thread0", "<i4"), ("x1", "<f8"), ("rank1", "<i4"), ("thread1", "<i4")],
        )
        line["x0"], line["rank0"], line["thread0"] = s["time"] / 1e6, s["sender"], s["thread"]
        line["x1"], line["rank1"], line["thread1"] = r["time"] / 1e6, r["receiver"], r["thread"]
        self.lines.append(line)

    def summary(self, unmatched_sends: int, unmatched_receives: int) -> str:
        lines = ["time per function per rank (calls, total ms):"]
        for (rank, func), (calls, ns) in sorted(self.time_per_function.items()):
            lines.append(f"  rank {rank:<4} {func:<22} {calls:>8} {ns / 1e6:>12.3f}")
        if self.io_totals:
            lines.append("I/O per rank (calls / bytes read, calls / bytes written):")
            for rank, (reads, read, writes, written) in sorted(self.io_totals.items()):
                lines.append(f"  rank {rank:<4} {reads:>8} / {read:>14} {writes:>8} / {written:>14}")
        ranks = sorted({r for pair in self.pairs for r in pair})
        if self.world_size <= MATRIX_RANKS:
            lines.append("messages sender -> receiver (count / bytes):")
            lines.append("        " + "".join(f"{'to ' + str(r):>14}" for r in range(self.world_size)))
            for s in range(self.world_size):
                cells = "".join("{:>6} /{:>6}".format(*self.pairs.get((s, r), (0, 0))) for r in range(self.world_size))
                lines.append(f"  {'from ' + str(s):<6}{cells}")
        else:  # a world_size x world_size matrix grows past any use: the busiest pairs by bytes
            busiest = sorted(self.pairs.items(), key=lambda item: (-item[1][1], -item[1][0], item[0]))[:BUSIEST_PAIRS]
            lines.append(
                f"messages: {len(self.pairs)} sender -> receiver pairs among {len(ranks)} ranks; the "
                f"{len(busiest)} busiest by bytes (count / bytes):"
            )
            lines += [f"  {s:>8} -> {r:<8} {count:>10} / {nbytes}" for (s, r), (count, nbytes) in busiest]
        lines.append(
            f"{self.matched} messages matched, {unmatched_sends} sends and {unmatched_receives} receives unmatched"
        )
        return "\n".join(lines) + "\n"


def _cover(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The columns of calls from column `first` to `last` (inclusive) as a bool array:
    +1 where a call's columns begin, -1 after they end, summed."""
    cover = np.bincount(first, minlength=COLUMNS + 1) - np.bincount(last + 1, minlength=COLUMNS + 1)
    return np.cumsum(cover)[:COLUMNS] > 0
