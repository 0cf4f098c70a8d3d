"""The timeline picture (ranks x time, calls coloured by function, messages as lines)
and the text summary (time per function per rank, message matrix)."""

from __future__ import annotations

import warnings
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

COLUMNS = 2400  # pixel columns of the time axis the calls are drawn into


class Timeline:
    """Collects what the picture and the summary need: spans per track (numpy arrays, a
    function index each), calls and time per rank and function."""

    def __init__(self) -> None:
        self.functions: List[str] = []  # index -> name
        self.index: Dict[str, int] = {}
        self.spans: Dict[Tuple[int, int], List[Tuple[np.ndarray, np.ndarray, np.ndarray]]] = defaultdict(list)
        self.time_per_function: Dict[Tuple[int, str], List[int]] = defaultdict(lambda: [0, 0])  # calls, ns

    def function_index(self, name: str) -> int:
        if name not in self.index:
            self.index[name] = len(self.functions)
            self.functions.append(name)
        return self.index[name]

    def add(self, rank: int, thread: int, func: np.ndarray, enter_ns: np.ndarray, leave_ns: np.ndarray) -> None:
        """A track's calls: `func` holds function_index values."""
        duration = leave_ns - enter_ns
        self.spans[(rank, thread)].append((enter_ns / 1e6, np.maximum(duration, 1).astype(np.float32) / 1e6,
                                           func.astype(np.int16)))
        counts = np.bincount(func, minlength=len(self.functions))
        times = np.bincount(func, weights=duration, minlength=len(self.functions))
        for f in np.flatnonzero(counts).tolist():
            entry = self.time_per_function[(rank, self.functions[f])]
            entry[0] += int(counts[f])
            entry[1] += int(times[f])

    def summary(self, pairs: np.ndarray, unmatched_sends: int, unmatched_receives: int, world_size: int) -> str:
        lines = ["time per function per rank (calls, total ms):"]
        for (rank, func), (calls, ns) in sorted(self.time_per_function.items()):
            lines.append(f"  rank {rank:<4} {func:<22} {calls:>8} {ns / 1e6:>12.3f}")
        counts = np.zeros((world_size, world_size), np.int64)
        volume = np.zeros((world_size, world_size), np.int64)
        np.add.at(counts, (pairs["sender"], pairs["receiver"]), 1)
        np.add.at(volume, (pairs["sender"], pairs["receiver"]), pairs["bytes"])
        lines.append("messages sender -> receiver (count / bytes):")
        lines.append("        " + "".join(f"{'to ' + str(r):>14}" for r in range(world_size)))
        for s in range(world_size):
            cells = "".join(f"{counts[s, r]:>6} /{volume[s, r]:>6}" for r in range(world_size))
            lines.append(f"  {'from ' + str(s):<6}{cells}")
        lines.append(f"{len(pairs)} messages matched, {unmatched_sends} sends and {unmatched_receives} receives unmatched")
        return "\n".join(lines) + "\n"

    def plot(self, path: Path, senders: np.ndarray, receivers: np.ndarray, title: str) -> None:
        """Calls drawn per pixel column (COLUMNS across the axis): a column shows each
        function that occupies it, so a million calls draw as fast as a thousand."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.collections import LineCollection

        tracks = sorted(self.spans)
        row = {track: i for i, track in enumerate(tracks)}
        spans = {track: tuple(np.concatenate(part) for part in zip(*self.spans[track])) for track in tracks}
        order = sorted(range(len(self.functions)), key=lambda f: self.functions[f])
        colour_of = {f: i for i, f in enumerate(order)}
        colours = plt.get_cmap("tab20")
        # MPI_Init and MPI_Finalize take far longer than the work between them: the axis
        # shows from the end of the last Init to the start of the first Finalize
        init = [self.index[f] for f in ("MPI_Init", "MPI_Init_thread") if f in self.index]
        final = self.index.get("MPI_Finalize")
        init_ends = [float((s + d)[np.isin(f, init)].max()) for s, d, f in spans.values() if np.isin(f, init).any()]
        finalize_starts = [float(s[f == final].min()) for s, d, f in spans.values() if final is not None and
                           (f == final).any()]
        lo = min((float(s.min()) for s, _, _ in spans.values() if len(s)), default=0.0)
        hi = max((float((s + d).max()) for s, d, _ in spans.values() if len(s)), default=1.0)
        xlabel = "time (ms, aligned to rank 0's clock)"
        if init_ends and finalize_starts and min(finalize_starts) > max(init_ends):
            lo, hi = max(init_ends), min(finalize_starts)
            xlabel += "; from the end of the last MPI_Init to the start of the first MPI_Finalize"
        lo, hi = lo - 0.03 * (hi - lo), hi + 0.03 * (hi - lo)
        width = (hi - lo) / COLUMNS or 1.0
        fig, ax = plt.subplots(figsize=(12, 1.2 + 0.5 * len(tracks)))
        for track in tracks:
            start, duration, func = spans[track]
            first = np.clip(((start - lo) / width).astype(np.int64), -1, COLUMNS)
            last = np.clip(((start + duration - lo) / width).astype(np.int64), -1, COLUMNS)
            for f in np.unique(func).tolist():
                mine = func == f
                cover = np.zeros(COLUMNS + 3, np.int64)  # columns -1 .. COLUMNS, shifted by one
                np.add.at(cover, first[mine] + 1, 1)
                np.add.at(cover, last[mine] + 2, -1)
                used = np.cumsum(cover)[1:COLUMNS + 1] > 0
                edges = np.diff(np.concatenate([[0], used.astype(np.int8), [0]]))
                begins, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
                if len(begins):
                    bars = list(zip((lo + begins * width).tolist(), ((ends - begins) * width).tolist()))
                    ax.broken_barh(bars, (row[track] - 0.4, 0.8), color=colours(colour_of[f] % 20))
        # one artist for all the messages (one Line2D each took minutes for 100,000)
        y0 = np.array([row.get(t, -1) for t in zip(senders["sender"].tolist(), senders["thread"].tolist())], float)
        y1 = np.array([row.get(t, -1) for t in zip(receivers["receiver"].tolist(), receivers["thread"].tolist())],
                      float)
        keep = (y0 >= 0) & (y1 >= 0)
        if keep.any():
            lines = np.stack([np.stack([senders["time"][keep] / 1e6, y0[keep]], axis=1),
                              np.stack([receivers["time"][keep] / 1e6, y1[keep]], axis=1)], axis=1)
            ax.add_collection(LineCollection(lines, colors="black", linewidths=0.6, alpha=0.7))
        ax.set_xlim(lo, hi)
        ax.set_yticks(range(len(tracks)))
        ax.set_yticklabels([f"rank {r}" + (f" t{t}" if t else "") for r, t in tracks])
        ax.set_ylim(len(tracks) - 0.5, -0.5)
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        handles = [plt.Rectangle((0, 0), 1, 1, color=colours(colour_of[f] % 20)) for f in order]
        ax.legend(handles, [self.functions[f] for f in order], loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  fontsize=7)
        with warnings.catch_warnings():  # a tall legend beside few tracks: no tight layout, no matter
            warnings.simplefilter("ignore", UserWarning)
            fig.tight_layout()
        fig.savefig(path, dpi=110, metadata={"Software": None})
        plt.close(fig)
