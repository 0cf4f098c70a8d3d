"""timeline.png drawn from a Timeline: per track, a bar per run of pixel columns a
function occupies, never narrower than MIN_BAR_PX (a 50 ns call in a 2 s run still
shows), the narrow ones drawn over the wide ones; messages as lines with an arrowhead at
the receiver; an I/O lane under each track, reads and writes in their own colours, when
the trace has I/O."""

from __future__ import annotations

import warnings
from typing import Dict, List, Optional, Sequence, Set, Tuple, cast

import numpy as np

from .timeline import COLUMNS, Timeline

DPI = 110  # the figure's and the PNG's: pixel sizes below are the PNG's pixels
MIN_BAR_PX = 2.0
ARROW_LENGTH_PX, ARROW_HALF_WIDTH_PX = 7.0, 2.5
MESSAGE_COLOUR = "#202020"
ENDING_COLOUR = "#d00000"  # where a thread ended without MPI_Finalize
IO_COLOURS = {False: "#2166ac", True: "#b2182b"}  # is_write -> colour
IO_LABELS = {False: "I/O lane: read", True: "I/O lane: write"}
LANE_BACKGROUND = "#f2f2f2"
# the legend names this many functions at most (those drawn widest); the others share one
# colour and one entry: 8,192 names made a picture 76,694 pixels tall
LEGEND_FUNCTIONS = 40
OTHERS, OTHERS_COLOUR = -1, "#7f7f7f"
# Init and Finalize bracket the run, long and uninteresting: greys, kept out of the palette
BOOKENDS = {"MPI_Init": "#d9d9d9", "MPI_Init_thread": "#d9d9d9", "MPI_Finalize": "#b0b0b0"}
# distinct colours first (tab10, then tab20's light ones, then tab20b and tab20c), greys left out
PALETTE = (
    ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
    + ["#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5"]
    + ["#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3", "#8ca252", "#bd9e39", "#ad494a"]
    + ["#a55194", "#6b6ecf", "#b5cf6b", "#e7ba52", "#d6616b", "#ce6dbd", "#9c9ede", "#cedb9c", "#e7cb94"]
    + ["#e7969c", "#de9ed6", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#6baed6", "#fd8d3c", "#74c476"]
)


def function_colours(names: Sequence[str]) -> Dict[str, str]:
    """A colour per drawn function, by name: the palette's first colours go to the
    functions actually drawn (indices over every function known made neighbours collide)."""
    colours = {name: BOOKENDS[name] for name in names if name in BOOKENDS}
    others = sorted(name for name in names if name not in BOOKENDS)
    colours.update({name: PALETTE[i % len(PALETTE)] for i, name in enumerate(others)})
    return colours


def plain(text: str) -> str:
    """Text from a trace (a program's or a function's name) as matplotlib draws it
    literally: a pair of `$` would be mathtext, which aborts on what it cannot parse."""
    return text.replace("$", r"\$")


def legend_functions(tl: Timeline) -> Tuple[List[int], List[int]]:
    """The drawn functions the legend names (by name) and the others: at most
    LEGEND_FUNCTIONS, those that cover the most pixel columns."""
    width: Dict[int, int] = {}
    for columns in tl.columns.values():
        for f, used in columns.items():
            width[f] = width.get(f, 0) + int(used.sum())
    drawn = sorted(width, key=lambda f: tl.functions[f])
    if len(drawn) <= LEGEND_FUNCTIONS:
        return drawn, []
    widest = set(sorted(drawn, key=lambda f: (-width[f], tl.functions[f]))[:LEGEND_FUNCTIONS])
    return [f for f in drawn if f in widest], [f for f in drawn if f not in widest]


class Rows:
    """Where a track's bars go on the (inverted) y axis: track i around y = i; with I/O
    lanes, the calls above and the track's I/O lane under them."""

    def __init__(self, lanes: bool) -> None:
        self.lanes = lanes
        self.calls = (-0.42, 0.58) if lanes else (-0.4, 0.8)  # offset from i, height
        self.io = (0.2, 0.22)
        self.message = self.calls[0] + self.calls[1] / 2  # messages meet the calls' middle


def runs(used: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Begin and end (exclusive) column of each run of used columns."""
    edges = np.diff(np.concatenate([[0], used.astype(np.int8), [0]]))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def bars(
    spans: List[Tuple[int, float, float, np.ndarray, np.ndarray]],
    origin: float,
    column: float,
    lo: float,
    hi: float,
    least: float,
) -> Dict[int, Tuple[np.ndarray, np.ndarray]]:
    """(key, y, height, begins, ends) runs of columns -> per key, wide and narrow
    rectangles (n x 4 corners x 2) in data coordinates. A run narrower than `least` becomes a bar
    `least` wide on a grid of that width (inside the axis, which would cut it back); the
    keys meeting in one cell of a track share it in stripes, so that no call hides another
    (a read and a write 0.5 pixel apart)."""
    wide: Dict[int, List[np.ndarray]] = {}
    cells = max(int((hi - lo) / least), 1)
    narrow_rows = [np.zeros((0, 4))]
    for key, y, height, begins, ends in spans:
        x0, width = origin + begins * column, (ends - begins) * column
        thin = width < least
        wide.setdefault(key, []).append(_boxes(x0[~thin], x0[~thin] + width[~thin], np.full((~thin).sum(), y), height))
        cell = np.clip(np.floor((x0[thin] - lo) / least), 0, cells - 1)
        narrow_rows.append(
            np.stack([np.full(len(cell), y), cell, np.full(len(cell), key), np.full(len(cell), height)], 1)
        )
    rows = np.unique(np.concatenate(narrow_rows), axis=0)  # sorted by track, cell, key
    place = rows[:, :2]
    first = np.ones(len(rows), bool)  # where a (track, cell) group begins
    first[1:] = (place[1:] != place[:-1]).any(axis=1)
    group = np.cumsum(first) - 1
    begin = np.flatnonzero(first)
    stripe = np.arange(len(rows)) - begin[group]
    share = np.diff(np.concatenate([begin, [len(rows)]]))[group]
    height = rows[:, 3] / share
    x0 = lo + rows[:, 1] * least
    boxes = _boxes(x0, x0 + least, rows[:, 0] + stripe * height, height)
    return {key: (np.concatenate(chunks), boxes[rows[:, 2] == key]) for key, chunks in wide.items()}


def _boxes(x0: np.ndarray, x1: np.ndarray, y: np.ndarray, height) -> np.ndarray:
    boxes = np.empty((len(x0), 4, 2))
    boxes[:, :, 0] = np.stack([x0, x0, x1, x1], axis=1)
    boxes[:, :, 1] = np.stack([y, y + height, y + height, y], axis=1)
    return boxes


def arrowheads(ax, x0: np.ndarray, y0: np.ndarray, x1: np.ndarray, y1: np.ndarray) -> np.ndarray:
    """A triangle per message, tip at the receiver's end (x1, y1), pointing along the line
    from the sender: made in pixels (the axes' x and y scales differ by orders of
    magnitude), returned in data coordinates (n, 3, 2). Messages shorter than a pixel have
    no direction to show."""
    to_px = ax.transData
    p0 = to_px.transform(np.stack([x0, y0], axis=1))
    p1 = to_px.transform(np.stack([x1, y1], axis=1))
    d = p1 - p0
    length = np.hypot(d[:, 0], d[:, 1])
    keep = length >= 1.0
    p1, d, length = p1[keep], d[keep], length[keep]
    u = d / length[:, None]
    head = np.minimum(ARROW_LENGTH_PX, 0.6 * length)[:, None]
    base = p1 - u * head
    across = np.stack([-u[:, 1], u[:, 0]], axis=1) * ARROW_HALF_WIDTH_PX
    corners = np.stack([p1, base + across, base - across], axis=1)
    return to_px.inverted().transform(corners.reshape(-1, 2)).reshape(-1, 3, 2)


def draw(timeline: Timeline, title: str, margins: Optional[Tuple[float, float]] = None):
    """The figure: layout first (tick labels, legend), then what depends on the axes'
    size in pixels (the narrowest bar, arrowheads). `margins`: another figure's left and
    right axes edges (io.png's), the narrower of the two taken so that both axes line up."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    tl = timeline
    io_columns = tl.io_columns
    tracks = sorted(set(tl.columns) | set(io_columns))
    row = {track: i for i, track in enumerate(tracks)}
    rows = Rows(bool(io_columns))
    drawn, others = legend_functions(tl)
    colour = function_colours([tl.functions[f] for f in drawn])
    handles: List = [Rectangle((0, 0), 1, 1, color=colour[tl.functions[f]]) for f in drawn]
    labels = [plain(tl.functions[f]) for f in drawn]
    if others:
        handles.append(Rectangle((0, 0), 1, 1, color=OTHERS_COLOUR))
        labels.append(f"{len(others)} other functions (summary.txt names them)")
    writes = sorted({w for lanes in io_columns.values() for w in lanes})
    handles += [Rectangle((0, 0), 1, 1, color=IO_COLOURS[w]) for w in writes]
    labels += [IO_LABELS[w] for w in writes]
    if tl.lines:
        handles.append(Line2D([], [], color=MESSAGE_COLOUR, linewidth=0.8, marker=">", markersize=4))
        labels.append("message, sender → receiver")
    if tl.endings:
        handles.append(Line2D([], [], color=ENDING_COLOUR, linestyle="none", marker="X", markersize=6))
        labels.append("where a thread ended without MPI_Finalize")
    columns = 1 if len(labels) <= 24 else 2
    height = max(1.2 + (0.6 if rows.lanes else 0.5) * len(tracks), 0.9 + 0.17 * -(-len(labels) // columns))
    if tl.track_count is not None and tl.track_count > len(tl.tracks or ()):
        title += f" ({len(tracks)} of {tl.track_count} tracks shown, evenly spaced)"
    fig, ax = plt.subplots(figsize=(12, height), dpi=DPI)
    lo, hi = tl.lo, tl.hi
    ax.set_xlim(lo, hi)
    ax.set_ylim(max(len(tracks), 1) - 0.5, -0.5)  # no tracks (no calls): still an axis, not a warning
    ax.set_yticks([i + rows.message for i in range(len(tracks))])
    ax.set_yticklabels([f"rank {r}" + (f" t{t}" if t else "") for r, t in tracks])
    if rows.lanes:
        ax.set_yticks([i + rows.io[0] + rows.io[1] / 2 for i in range(len(tracks))], minor=True)
        ax.set_yticklabels(["I/O"] * len(tracks), minor=True, fontsize=6, color="#606060")
        ax.tick_params(axis="y", which="minor", length=0)
    ax.set_xlabel(tl.xlabel)
    ax.set_title(title)
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, ncol=columns)
    with warnings.catch_warnings():  # a tall legend beside few tracks: no tight layout, no matter
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()
    if margins is not None:
        fig.subplots_adjust(left=max(fig.subplotpars.left, margins[0]), right=min(fig.subplotpars.right, margins[1]))
    least = MIN_BAR_PX * (hi - lo) / ax.get_window_extent().width  # in ms, now that the axes' size is known
    origin, column = tl.start_ns / 1e6, (tl.end_ns - tl.start_ns) / 1e6 / COLUMNS

    def add_bars(spans, face: Dict[int, str], gid: Dict[int, str]) -> None:
        for key, (wide, narrow) in sorted(bars(spans, origin, column, lo, hi, least).items()):
            for boxes, layer, suffix in ((wide, 1.0, ""), (narrow, 1.5, " narrow")):
                if len(boxes):  # narrow bars over wide ones: a short call next to a long one stays seen
                    ax.add_collection(
                        PolyCollection(
                            cast(Sequence, boxes),  # an (n, 4, 2) array: the stubs want a sequence
                            facecolors=face[key],
                            edgecolors="none",
                            zorder=layer,
                            gid=gid[key] + suffix,
                        )
                    )

    add_bars(
        call_spans(tl, tracks, rows.calls, set(others)),
        {f: colour[tl.functions[f]] for f in drawn} | {OTHERS: OTHERS_COLOUR},
        {f: f"calls {tl.functions[f]}" for f in drawn} | {OTHERS: "calls other functions"},
    )
    if rows.lanes:
        for i in range(len(tracks)):
            ax.axhspan(i + rows.io[0], i + rows.io[0] + rows.io[1], color=LANE_BACKGROUND, zorder=0, linewidth=0)
        add_bars(
            [
                (int(w), row[t] + rows.io[0], rows.io[1], *runs(io_columns[t][w]))
                for t in io_columns
                for w in io_columns[t]
            ],
            {int(w): IO_COLOURS[w] for w in (False, True)},
            {0: "io read", 1: "io write"},
        )
    draw_messages(tl, ax, row, rows.message)
    draw_endings(tl, ax, row, rows.message)
    return fig


def draw_endings(tl: Timeline, ax, row: Dict[Tuple[int, int], int], offset: float) -> None:
    """A cross where each thread that did not finalize ended, and how (story.py)."""
    for rank, thread, x, label in tl.endings:
        if (rank, thread) not in row:
            continue
        x = min(max(x, tl.lo), tl.hi)
        y = row[(rank, thread)] + offset
        ax.plot([x], [y], linestyle="none", marker="X", markersize=7, color=ENDING_COLOUR, zorder=4, gid="ending")
        ax.annotate(
            plain(label),
            (x, y),
            xytext=(-4, -8),
            textcoords="offset points",
            ha="right",
            fontsize=6,
            color=ENDING_COLOUR,
            zorder=4,
        )


def call_spans(tl: Timeline, tracks, place: Tuple[float, float], others: Set[int]) -> List[Tuple]:
    """bars()'s spans of the calls: per track, a key per function the legend names, and
    OTHERS for the columns any of the other functions covers (one span, however many)."""
    y, height = place
    spans: List[Tuple] = []
    for i, track in enumerate(tracks):
        rest = None
        for f, used in tl.columns.get(track, {}).items():
            if f in others:
                rest = used if rest is None else rest | used
            else:
                spans.append((f, i + y, height, *runs(used)))
        if rest is not None:
            spans.append((OTHERS, i + y, height, *runs(rest)))
    return spans


def draw_messages(tl: Timeline, ax, row: Dict[Tuple[int, int], int], offset: float) -> None:
    """The sampled messages as one LineCollection (one Line2D each took minutes for
    100,000) and their arrowheads as one PolyCollection."""
    from matplotlib.collections import LineCollection, PolyCollection

    if not tl.lines:
        return
    line = np.concatenate(tl.lines)
    y0 = np.array([row.get(t, -1) for t in zip(line["rank0"].tolist(), line["thread0"].tolist())], float)
    y1 = np.array([row.get(t, -1) for t in zip(line["rank1"].tolist(), line["thread1"].tolist())], float)
    keep = (y0 >= 0) & (y1 >= 0)
    if not keep.any():
        return
    x0, x1, y0, y1 = line["x0"][keep], line["x1"][keep], y0[keep] + offset, y1[keep] + offset
    segments = np.stack([np.stack([x0, y0], axis=1), np.stack([x1, y1], axis=1)], axis=1)
    ax.add_collection(
        LineCollection(
            cast(Sequence, segments), colors=MESSAGE_COLOUR, linewidths=0.7, alpha=0.75, zorder=3, gid="messages"
        )
    )
    heads = arrowheads(ax, x0, y0, x1, y1)
    if len(heads):
        ax.add_collection(
            PolyCollection(
                cast(Sequence, heads), facecolors=MESSAGE_COLOUR, edgecolors="none", zorder=3.5, gid="message arrows"
            )
        )
