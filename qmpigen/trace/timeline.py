"""The timeline picture (ranks x time, calls coloured by function, messages as lines)
and the text summary (time per function per rank, message matrix)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Tuple


class Timeline:
    """Collects what the picture and the summary need: spans per track, messages."""

    def __init__(self) -> None:
        self.spans: Dict[Tuple[int, int], Dict[str, List[Tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
        self.time_per_function: Dict[Tuple[int, str], List[int]] = defaultdict(lambda: [0, 0])  # calls, ns

    def add(self, rank: int, thread: int, func: str, enter_ns: int, leave_ns: int) -> None:
        self.spans[(rank, thread)][func].append((enter_ns / 1e6, max(leave_ns - enter_ns, 1) / 1e6))
        entry = self.time_per_function[(rank, func)]
        entry[0] += 1
        entry[1] += leave_ns - enter_ns

    def summary(self, pairs, unmatched_sends: int, unmatched_receives: int, world_size: int) -> str:
        lines = ["time per function per rank (calls, total ms):"]
        for (rank, func), (calls, ns) in sorted(self.time_per_function.items()):
            lines.append(f"  rank {rank:<4} {func:<22} {calls:>8} {ns / 1e6:>12.3f}")
        counts = defaultdict(int)
        volume = defaultdict(int)
        for send, _receive in pairs:
            counts[(send.sender, send.receiver)] += 1
            volume[(send.sender, send.receiver)] += send.bytes
        lines.append("messages sender -> receiver (count / bytes):")
        lines.append("        " + "".join(f"{'to ' + str(r):>14}" for r in range(world_size)))
        for s in range(world_size):
            cells = "".join(f"{counts[(s, r)]:>6} /{volume[(s, r)]:>6}" for r in range(world_size))
            lines.append(f"  {'from ' + str(s):<6}{cells}")
        lines.append(f"{len(pairs)} messages matched, {unmatched_sends} sends and {unmatched_receives} receives unmatched")
        return "\n".join(lines) + "\n"

    def plot(self, path: Path, pairs, title: str) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.collections import LineCollection

        tracks = sorted(self.spans)
        row = {track: i for i, track in enumerate(tracks)}
        functions = sorted({f for spans in self.spans.values() for f in spans})
        colours = plt.get_cmap("tab20")
        fig, ax = plt.subplots(figsize=(12, 1.2 + 0.5 * len(tracks)))
        for track in tracks:
            for func, spans in self.spans[track].items():
                ax.broken_barh(spans, (row[track] - 0.4, 0.8), color=colours(functions.index(func) % 20))
        # one artist for all the messages (one Line2D each took minutes for 100,000)
        lines = []
        for send, receive in pairs:
            y0, y1 = row.get((send.sender, send.thread)), row.get((receive.receiver, receive.thread))
            if y0 is not None and y1 is not None:
                lines.append(((send.time / 1e6, y0), (receive.time / 1e6, y1)))
        ax.add_collection(LineCollection(lines, colors="black", linewidths=0.6, alpha=0.7))
        # MPI_Init and MPI_Finalize take far longer than the work between them: the axis
        # shows from the end of the last Init to the start of the first Finalize
        init_ends = [s + d for spans in self.spans.values() for f in ("MPI_Init", "MPI_Init_thread")
                     for s, d in spans.get(f, ())]
        finalize_starts = [s for spans in self.spans.values() for s, _ in spans.get("MPI_Finalize", ())]
        xlabel = "time (ms, aligned to rank 0's clock)"
        if init_ends and finalize_starts and min(finalize_starts) > max(init_ends):
            lo, hi = max(init_ends), min(finalize_starts)
            ax.set_xlim(lo - 0.03 * (hi - lo), hi + 0.03 * (hi - lo))
            xlabel += "; from the end of the last MPI_Init to the start of the first MPI_Finalize"
        ax.set_yticks(range(len(tracks)))
        ax.set_yticklabels([f"rank {r}" + (f" t{t}" if t else "") for r, t in tracks])
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        handles = [plt.Rectangle((0, 0), 1, 1, color=colours(i % 20)) for i in range(len(functions))]
        ax.legend(handles, functions, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
