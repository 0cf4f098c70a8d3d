"""The merge's pictures (qmpigen/trace/timeline.py), from Timelines fed by hand: what the
figure draws is checked on its matplotlib artists, without an MPI job. Needs matplotlib
(the trace extra): skipped without it."""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from qmpigen.trace.timeline import Timeline  # noqa: E402

MS = 1_000_000


def _timeline(calls: Dict[Tuple[int, int], List[Tuple[str, int, int]]], spans=None) -> Timeline:
    """A Timeline of `calls` per track: (function, enter ns, leave ns). `spans` default:
    each track's first enter and last leave, its MPI_Init's leave and MPI_Finalize's enter."""
    timeline = Timeline(max(r for r, _ in calls) + 1, sorted(calls))
    if spans is None:
        spans = []
        for rows in calls.values():
            init = [leave for name, _, leave in rows if name == "MPI_Init"]
            finalize = [enter for name, enter, _ in rows if name == "MPI_Finalize"]
            spans.append(
                (
                    min(e for _, e, _ in rows),
                    max(v for _, _, v in rows),
                    max(init) if init else None,
                    min(finalize) if finalize else None,
                )
            )
    timeline.set_axis(spans)
    for (rank, thread), rows in sorted(calls.items()):
        func = np.array([timeline.function_index(name) for name, _, _ in rows], np.int64)
        enter = np.array([e for _, e, _ in rows], np.int64)
        leave = np.array([v for _, _, v in rows], np.int64)
        timeline.add(rank, thread, func, enter, leave)
    return timeline


def _bars(ax) -> List[Tuple[str, float, float, float, float]]:
    """Every drawn bar as (the collection's gid, x0, x1, y0, y1) in data coordinates."""
    from matplotlib.collections import PolyCollection

    out = []
    for collection in ax.collections:
        if type(collection) is not PolyCollection:
            continue
        for path in collection.get_paths():
            xs, ys = path.vertices[:, 0], path.vertices[:, 1]
            out.append((collection.get_gid() or "", xs.min(), xs.max(), ys.min(), ys.max()))
    return out


def _close(fig) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_the_axis_starts_where_the_bars_start():
    """Ranks leave MPI_Init at different times: the axis runs from the last one's end, so
    no MPI_Init is drawn (a margin before it used to show three ranks' Init bars) and no
    bar lies left of the axis; a call begun before it is cut at its edge."""
    calls = {
        (0, 0): [("MPI_Init", 0, 80 * MS), ("MPI_Send", 80 * MS, 81 * MS), ("MPI_Finalize", 140 * MS, 150 * MS)],
        (1, 0): [("MPI_Init", 5 * MS, 82 * MS), ("MPI_Recv", 82 * MS, 90 * MS), ("MPI_Finalize", 141 * MS, 150 * MS)],
        (2, 0): [
            ("MPI_Init", 5 * MS, 83 * MS),
            ("MPI_Barrier", 83 * MS, 139 * MS),
            ("MPI_Finalize", 139 * MS, 150 * MS),
        ],
    }
    timeline = _timeline(calls)
    fig = timeline.figure("t")
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert (lo, hi) == (83.0, 139.0)
    assert "from the end of the last MPI_Init" in ax.get_xlabel() and "cut" in ax.get_xlabel()
    bars = _bars(ax)
    assert bars and min(b[1] for b in bars) >= lo and max(b[2] for b in bars) <= hi
    drawn = {text.get_text() for text in ax.get_legend().get_texts()}
    assert drawn == {"MPI_Recv", "MPI_Barrier"}  # MPI_Send ended before the axis; Init, Finalize outside
    _close(fig)


def test_without_init_and_finalize_the_axis_holds_every_call():
    calls = {(0, 0): [("MPI_Send", 10 * MS, 20 * MS)], (1, 0): [("MPI_Recv", 15 * MS, 30 * MS)]}
    fig = _timeline(calls).figure("t")
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    bars = _bars(ax)
    assert lo < 10 and hi > 30 and min(b[1] for b in bars) >= lo and max(b[2] for b in bars) <= hi
    assert "cut" not in ax.get_xlabel()
    _close(fig)
