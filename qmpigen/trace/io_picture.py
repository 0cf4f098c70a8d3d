"""io.png, beside timeline.png when the trace has I/O: the bytes each rank has written
and read so far, over the timeline's time axis (two panels, the ranks' amounts stacked as
steps: the top of the stack is their sum, and no rank's curve hides another's)."""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from .timeline import COLUMNS, Timeline
from .timeline_plot import DPI

LEGEND_RANKS = 16  # a legend entry per rank up to this many, else for 8 evenly spaced ones
DIRECTIONS = ((1, "written", "no writes"), (0, "read", "no reads"))  # io_bytes row, label, when none


def size(nbytes: float) -> str:
    """Bytes with a binary prefix: 64 B, 5 KiB, 1.5 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def steps(values: np.ndarray, edges: np.ndarray, baseline: Optional[np.ndarray], **style):
    """A StepPatch of the columns where `values` or `baseline` change only (the bytes
    change where I/O completes), added without Axes.stairs: its data-limit update walks
    every step in Python (20 s for 64 ranks of 2,400 columns); the limits are set anyway."""
    from matplotlib.patches import StepPatch

    change = np.diff(values) != 0
    if baseline is not None:
        change |= np.diff(baseline) != 0
    keep = np.concatenate([[0], np.flatnonzero(change) + 1])  # columns that begin a step
    kept_edges = np.concatenate([edges[keep], edges[-1:]])
    style["baseline"] = None if baseline is None else baseline[keep]  # None: a line, no edges down to 0
    return StepPatch(values[keep], kept_edges, **{"fill": True, **style})


def draw_io(timeline: Timeline, title: str):
    """The figure: per direction, each drawn rank's cumulative bytes as a band stacked on
    the ranks before it (a StepPatch, gid 'io written rank R' or 'io read rank R', whose
    values minus its baseline are the rank's own bytes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    tl = timeline
    ranks = sorted(tl.io_bytes)
    sampled = tl.track_count is not None and tl.tracks is not None and tl.track_count > len(tl.tracks)
    if len(ranks) <= 10:
        colours = [plt.get_cmap("tab10")(i) for i in range(len(ranks))]
    else:
        colours = [plt.get_cmap("viridis")(i / (len(ranks) - 1)) for i in range(len(ranks))]
    edges = tl.start_ns / 1e6 + np.arange(COLUMNS + 1) * ((tl.end_ns - tl.start_ns) / 1e6 / COLUMNS)
    few = len(ranks) <= LEGEND_RANKS
    listed = ranks if few else [ranks[i] for i in sorted(set(np.linspace(0, len(ranks) - 1, 8).round().astype(int)))]
    # white edges part a few bands; between 64 they would be all one sees
    edge = {"edgecolor": "white", "linewidth": 0.4} if few else {"edgecolor": "none"}
    fig, axes = plt.subplots(2, 1, sharex=True, figsize=(12, max(5.0, 1.6 + 0.17 * len(listed))), dpi=DPI)
    for ax, (row, label, none) in zip(axes, DIRECTIONS):
        below = np.zeros(COLUMNS, np.int64)
        for rank, colour in zip(ranks, colours):
            mine = np.cumsum(tl.io_bytes[rank][row])
            if mine[-1]:
                ax.add_artist(steps(below + mine, edges, below, facecolor=colour, **edge)).set_gid(
                    f"io {label} rank {rank}"
                )
            below = below + mine
        everyone = np.cumsum(tl.io_all[row])
        if sampled and everyone[-1]:  # the sampled ranks' stack is not the whole: the whole beside it
            ax.add_artist(
                steps(everyone, edges, None, fill=False, edgecolor="black", linestyle="--", linewidth=1.0)
            ).set_gid(f"io {label} all ranks")
        if not everyone[-1]:
            ax.text(0.5, 0.5, none, transform=ax.transAxes, ha="center", va="center", color="#808080")
        ax.set_ylabel(f"bytes {label}")
        top = max(1, int(everyone[-1]) if sampled else int(below[-1]))
        ax.set_ylim(0, top * 1.05)
        # ticks at round numbers of the largest binary unit that fits (1, 2, 3 GiB rather than 1.07e9 bytes)
        unit = 1024 ** min(4, max(0, (top.bit_length() - 1) // 10))
        ticks = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(0, top / unit) * unit
        ax.yaxis.set_major_locator(FixedLocator(ticks[ticks <= top * 1.05]))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: size(value)))
        ax.grid(axis="y", color="#e0e0e0", linewidth=0.6)
        ax.set_axisbelow(True)
    axes[-1].set_xlim(tl.lo, tl.hi)
    xlabel = tl.xlabel
    if tl.io_outside:
        xlabel += f"\n{tl.io_outside} I/O calls completed outside the axis are counted at its edges"
    axes[-1].set_xlabel(xlabel)
    heading = f"{title}\ncumulative bytes written and read per rank"
    if sampled:
        heading += f" ({len(ranks)} ranks of the tracks shown; dashed: all ranks)"
    axes[0].set_title(heading)
    if ranks:
        colour_of = dict(zip(ranks, colours))
        totals = tl.io_totals
        handles: List = [Patch(facecolor=colour_of[r]) for r in listed]
        labels = [f"rank {r}: {size(totals[r][3])} written, {size(totals[r][1])} read" for r in listed]
        # listed top down as the bands are stacked
        axes[0].legend(
            handles[::-1],
            labels[::-1],
            loc="upper left",
            bbox_to_anchor=(1.0, 1.0),
            fontsize=7,
            title=None if few else f"{len(listed)} of the {len(ranks)} ranks drawn",
            title_fontsize=7,
        )
    fig.tight_layout()
    return fig
