"""The merge's pictures (qmpigen/trace/timeline.py), from Timelines fed by hand: what the
figure draws is checked on its matplotlib artists, without an MPI job. Needs matplotlib
(the trace extra): skipped without it."""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pytest

pytest.importorskip("matplotlib")

# Seconds of matplotlib drawing: in `make test`, not in `make test-fast`.
pytestmark = pytest.mark.slow

from qmpigen.trace.io_picture import draw_io  # noqa: E402
from qmpigen.trace.pictures import plot  # noqa: E402
from qmpigen.trace.timeline import Timeline  # noqa: E402
from qmpigen.trace.timeline_plot import draw  # noqa: E402

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
    fig = draw(timeline, "t")
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
    fig = draw(_timeline(calls), "t")
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    bars = _bars(ax)
    assert lo < 10 and hi > 30 and min(b[1] for b in bars) >= lo and max(b[2] for b in bars) <= hi
    assert "cut" not in ax.get_xlabel()
    _close(fig)


def test_where_a_thread_ended_is_marked():
    """A thread that did not finalize (story.py): a cross where its trace ends, on its
    track, with how it ended, and a legend entry; a thread that finalized has none."""
    calls = {(0, 0): [("MPI_Send", 10 * MS, 20 * MS)], (1, 0): [("MPI_Recv", 15 * MS, 30 * MS)]}
    timeline = _timeline(calls)
    timeline.add_ending(1, 0, 25 * MS, "SIGSEGV in MPI_Recv")
    fig = draw(timeline, "t")
    ax = fig.axes[0]
    crosses = [line for line in ax.get_lines() if line.get_gid() == "ending"]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [25.0] and crosses[0].get_ydata()[0] > 0.5
    assert [t.get_text() for t in ax.texts] == ["SIGSEGV in MPI_Recv"]
    assert "where a thread ended without MPI_Finalize" in [t.get_text() for t in ax.get_legend().get_texts()]
    _close(fig)
    fig = draw(_timeline(calls), "t")
    assert not [line for line in fig.axes[0].get_lines() if line.get_gid() == "ending"]
    _close(fig)


def _pixel_widths(ax, bars) -> np.ndarray:
    x0 = ax.transData.transform(np.stack([[b[1] for b in bars], np.zeros(len(bars))], axis=1))[:, 0]
    x1 = ax.transData.transform(np.stack([[b[2] for b in bars], np.zeros(len(bars))], axis=1))[:, 0]
    return x1 - x0


def test_a_50_ns_call_in_a_2_s_run_is_drawn_and_not_hidden():
    """Every function of the legend has bars at least MIN_BAR_PX wide, the narrow ones
    over the wide ones; a read and a write 100 ns apart share their pixels in stripes
    rather than one hiding the other."""
    from qmpigen.trace.timeline_plot import MIN_BAR_PX

    second = 1_000_000_000
    calls = {
        (0, 0): [
            ("MPI_Init", 0, 10 * MS),
            ("MPI_Barrier", 10 * MS, second),
            ("MPI_Isend", second, second + 50),
            ("MPI_Wait", second + 50, 2 * second),
            ("MPI_Finalize", 2 * second, 2 * second + 10 * MS),
        ],
        (1, 0): [
            ("MPI_Init", 0, 10 * MS),
            ("MPI_Allreduce", 10 * MS, 1500 * MS),
            ("MPI_File_write_at", 1500 * MS, 1500 * MS + 100),
            ("MPI_File_read_at", 1500 * MS + 200, 1500 * MS + 300),
            ("MPI_Allreduce", 1500 * MS + 300, 2 * second),
            ("MPI_Finalize", 2 * second, 2 * second + 10 * MS),
        ],
    }
    fig = draw(_timeline(calls), "t")
    ax = fig.axes[0]
    bars = _bars(ax)
    widths = _pixel_widths(ax, bars)
    assert widths.min() >= MIN_BAR_PX - 1e-6
    legend = {text.get_text() for text in ax.get_legend().get_texts()}
    assert legend == {"MPI_Barrier", "MPI_Isend", "MPI_Wait", "MPI_Allreduce", "MPI_File_write_at", "MPI_File_read_at"}
    assert {gid.split()[1] for gid, *_ in bars} == legend
    layer = {c.get_gid(): c.get_zorder() for c in ax.collections}
    assert (
        layer["calls MPI_Isend narrow"] > layer["calls MPI_Barrier"]
        and layer["calls MPI_Isend narrow"] > layer["calls MPI_Wait"]
    )
    (write,) = [b for b in bars if b[0] == "calls MPI_File_write_at narrow"]
    (read,) = [b for b in bars if b[0] == "calls MPI_File_read_at narrow"]
    assert (write[1], write[2]) == (read[1], read[2])  # the same pixels, in stripes
    assert min(write[4], read[4]) <= max(write[3], read[3]) and write[4] - write[3] > 0.1
    _close(fig)


def _messages(timeline: Timeline, rows) -> None:
    """(sender, receiver, send ns, receive ns) rows as matched pairs."""
    from qmpigen.trace.match import ENDPOINT_DTYPE

    senders = np.zeros(len(rows), ENDPOINT_DTYPE)
    receivers = np.zeros(len(rows), ENDPOINT_DTYPE)
    for i, (s, r, t0, t1) in enumerate(rows):
        senders[i] = (s, r, 0, 0, 8, t0, 0)
        receivers[i] = (s, r, 0, 0, 8, t1, 0)
    timeline.add_messages(senders, receivers, len(rows))


def test_messages_have_arrowheads_at_the_receiver():
    calls = {
        (rank, 0): [("MPI_Init", 0, 1 * MS), ("MPI_Send", 1 * MS, 9 * MS), ("MPI_Finalize", 9 * MS, 10 * MS)]
        for rank in range(3)
    }
    timeline = _timeline(calls)
    sent = [(0, 2, 2 * MS, 3 * MS), (2, 1, 4 * MS, 4 * MS), (1, 0, 6 * MS, 8 * MS)]
    _messages(timeline, sent)
    fig = draw(timeline, "t")
    ax = fig.axes[0]
    (lines,) = [c for c in ax.collections if c.get_gid() == "messages"]
    (arrows,) = [c for c in ax.collections if c.get_gid() == "message arrows"]
    segments = lines.get_segments()
    heads = [path.vertices[:3] for path in arrows.get_paths()]
    assert len(segments) == len(heads) == 3
    for (s, r, t0, t1), segment, head in zip(sent, segments, heads):
        (x0, y0), (x1, y1) = segment
        assert (x0, x1) == (t0 / MS, t1 / MS)
        assert (y0 < y1) == (r > s)  # rank r's row is row r
        tip, base = head[0], (head[1] + head[2]) / 2
        assert np.allclose(tip, (x1, y1))
        # the head points from the sender to the receiver: its base lies towards the sender
        assert np.hypot(*(base - (x0, y0))) < np.hypot(*(tip - (x0, y0)))
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "message, sender → receiver" in labels
    _close(fig)


def _io(timeline: Timeline, rank: int, rows) -> None:
    """(enter ns, leave ns, bytes, is_write) I/O calls of `rank`'s thread 0."""
    enter, leave, nbytes, write = (np.array(column) for column in zip(*rows))
    timeline.add_io(
        rank, 0, enter.astype(np.int64), leave.astype(np.int64), nbytes.astype(np.int64), write.astype(bool)
    )


def _io_run() -> Timeline:
    """Rank 1 writes 3 times and reads once, rank 0 does no I/O, rank 2 reads once."""
    io = {
        1: [("MPI_File_write_at", 20, 30, 1000), ("MPI_File_write_at", 40, 41, 24), ("MPI_File_read_at", 60, 70, 512)]
        + [("MPI_File_write_at", 80, 90, 4096)],
        2: [("MPI_File_read_at", 50, 95, 300)],
    }
    calls = {}
    for rank in range(3):
        rows = [(name, e * MS, v * MS) for name, e, v, _ in io.get(rank, [])]
        rows += [("MPI_Init", 0, 10 * MS), ("MPI_Finalize", 100 * MS, 110 * MS)]
        calls[(rank, 0)] = sorted(rows, key=lambda row: row[1])
    timeline = _timeline(calls)
    for rank, rows in io.items():
        _io(timeline, rank, [(e * MS, v * MS, b, "write" in name) for name, e, v, b in rows])
    return timeline


def test_io_calls_are_drawn_on_the_lane_under_their_track():
    timeline = _io_run()
    fig = draw(timeline, "t")
    ax = fig.axes[0]
    from qmpigen.trace.timeline_plot import Rows

    rows = Rows(True)
    lane = {rank: (rank + rows.io[0], rank + rows.io[0] + rows.io[1]) for rank in range(3)}
    calls = {rank: (rank + rows.calls[0], rank + rows.calls[0] + rows.calls[1]) for rank in range(3)}
    io_bars = [b for b in _bars(ax) if b[0].startswith("io ")]
    drawn = {(b[0], round(b[1]), round(b[2]), next(r for r in lane if lane[r] == (b[3], b[4]))) for b in io_bars}
    assert drawn == {
        ("io write", 20, 30, 1),
        ("io write", 40, 41, 1),
        ("io write", 80, 90, 1),
        ("io read", 60, 70, 1),
        ("io read", 50, 95, 2),
    }
    for gid, _, _, y0, y1 in _bars(ax):
        if gid.startswith("calls "):  # the calls themselves stay on the track, above its lane
            assert any(calls[r][0] <= y0 and y1 <= calls[r][1] for r in calls)
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "I/O lane: read" in labels and "I/O lane: write" in labels
    assert [t.get_text() for t in ax.get_yticklabels(minor=True)] == ["I/O"] * 3
    _close(fig)
    summary = timeline.summary(0, 0)
    assert "rank 1           1 /            512        3 /           5120" in summary
    assert "rank 2           1 /            300        0 /              0" in summary
    assert "rank 0 " not in summary.split("I/O per rank")[1].split("messages")[0]


def test_no_io_no_lane():
    calls = {(0, 0): [("MPI_Init", 0, MS), ("MPI_Barrier", MS, 2 * MS), ("MPI_Finalize", 2 * MS, 3 * MS)]}
    fig = draw(_timeline(calls), "t")
    ax = fig.axes[0]
    assert not ax.get_yticklabels(minor=True) and not [b for b in _bars(ax) if b[0].startswith("io ")]
    assert "I/O per rank" not in _timeline(calls).summary(0, 0)
    _close(fig)


def _stacks(fig) -> Dict[Tuple[str, int], float]:
    """(direction, rank) -> the rank's own bytes at the end of the axis, from the bands
    io.png stacks (a StepPatch's values minus its baseline)."""
    out = {}
    for ax in fig.axes:
        for patch in ax.patches:
            gid = patch.get_gid() or ""
            if gid.startswith("io ") and " rank " in gid:
                values, _, baseline = patch.get_data()
                out[(gid.split()[1], int(gid.split()[-1]))] = float(values[-1] - baseline[-1])
    return out


def test_io_picture_stacks_each_ranks_bytes():
    timeline = _io_run()
    fig = draw_io(timeline, "t")
    assert _stacks(fig) == {("written", 1): 5120.0, ("read", 1): 512.0, ("read", 2): 300.0}
    for ax in fig.axes:
        assert ax.get_xlim() == (timeline.lo, timeline.hi)  # the timeline's axis
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels == ["rank 2: 0 B written, 300 B read", "rank 1: 5 KiB written, 512 B read"]  # as stacked
    # the steps rise where the calls complete: rank 1 has written 1024 bytes by 41 ms
    for patch in fig.axes[0].patches:
        if patch.get_gid() == "io written rank 1":
            values, edges, baseline = patch.get_data()

            def at(ms: float, values=values, edges=edges) -> float:
                return values[np.searchsorted(edges, ms, side="right") - 1]

            assert (at(25.0), at(35.0), at(60.0), at(95.0)) == (0, 1000, 1024, 5120)
            assert not baseline.any()  # rank 1 is the lowest band
    _close(fig)


def test_io_png_only_with_io(tmp_path):
    with_io, without = tmp_path / "a", tmp_path / "b"
    with_io.mkdir()
    without.mkdir()
    plot(_io_run(), with_io / "timeline.png", "t")
    calls = {(0, 0): [("MPI_Init", 0, MS), ("MPI_Barrier", MS, 2 * MS), ("MPI_Finalize", 2 * MS, 3 * MS)]}
    plot(_timeline(calls), without / "timeline.png", "t")
    assert sorted(p.name for p in with_io.iterdir()) == ["io.png", "timeline.png"]
    assert sorted(p.name for p in without.iterdir()) == ["timeline.png"]
    assert (with_io / "io.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_io_picture_of_many_ranks_sampled():
    """100 ranks with I/O, 64 tracks drawn: 8 of them in the legend, the dashed line of
    all ranks' bytes over the sampled ranks' stack."""
    calls = {
        (rank, 0): [("MPI_Init", 0, MS), ("MPI_File_write_at", 2 * MS, 3 * MS), ("MPI_Finalize", 9 * MS, 10 * MS)]
        for rank in range(100)
    }
    timeline = _timeline(calls)
    for rank in range(100):
        _io(timeline, rank, [(2 * MS, 3 * MS, 10, True)])
    fig = draw_io(timeline, "t")
    stacks = _stacks(fig)
    assert len(stacks) == 64 and set(stacks.values()) == {10.0}
    (everyone,) = [p for p in fig.axes[0].patches if p.get_gid() == "io written all ranks"]
    assert everyone.get_data()[0][-1] == 1000
    legend = fig.axes[0].get_legend()
    assert legend.get_title().get_text() == "8 of the 64 ranks drawn" and len(legend.get_texts()) == 8
    assert "no reads" in [t.get_text() for t in fig.axes[1].texts]
    _close(fig)


def _io_rank_file(rank: int, world_size: int, io: bool) -> bytes:
    """A rank of tests/trace_writer.py's kind that opens a file and writes (100 x (rank
    + 1) bytes) and reads (50 bytes) it when `io`, else calls MPI_Barrier twice."""
    import trace_writer as w

    from qmpigen.trace import layout

    names = ["MPI_Init", "MPI_File_open", "MPI_File_write_at", "MPI_File_read_at", "MPI_File_close", "MPI_Finalize"]
    if not io:
        names[1:5] = ["MPI_Barrier", "MPI_Barrier"]
    t0 = 1_000_000
    rows = np.zeros(len(names), layout.CALL.layout.dtype)
    for f in layout.CALL.layout.fields:
        if f.default:
            rows[f.name] = f.default
    rows["kind"], rows["size"], rows["comm"] = layout.CALL.kind, layout.CALL.size, 0
    rows["func"] = [w.CODE[name] for name in names]
    rows["enter"] = t0 + 1000 * np.arange(len(names), dtype=np.uint64)
    rows["leave"] = rows["enter"] + 500
    for i, name in enumerate(names):
        if name.startswith("MPI_File_"):
            rows["file"][i] = 0
        if name in ("MPI_File_write_at", "MPI_File_read_at"):
            rows["bytes"][i] = rows["count"][i] = 100 * (rank + 1) if "write" in name else 50
    file_record = w.record("FILE", (0, 0, 0), layout.BY_NAME["FILE"].layout, b"data.bin\0")
    end = int(rows["leave"][-1])
    return b"".join(
        [
            w.header(rank, world_size),
            w.preamble(),
            w.comm(0, list(range(world_size))),
            file_record,
            w.fixed_record("TIMER", 0, t0, t0),
            w.fixed_record("CLOCK", 0, t0, 0, 0),
            rows.tobytes(),
            w.fixed_record("CLOCK", 1, end, 0, 0),
            w.fixed_record("TIMER", 0, end + 600, end + 600),
            w.fixed_record("END", 0, len(names)),
        ]
    )


@pytest.mark.parametrize("io", [True, False])
def test_merge_writes_io_png_only_for_a_trace_with_io(tmp_path, io):
    """The merge end to end on rank files without an MPI job: merge.py hands the I/O calls
    to the timeline (read or write by kind), io.png and the summary's I/O table follow."""
    pytest.importorskip("otf2")
    from qmpigen.trace import merge

    run = tmp_path / "run"
    run.mkdir()
    for rank in range(3):
        (run / f"synth_node_{rank}_0.L1.qtr").write_bytes(_io_rank_file(rank, 3, io))
    lines: list = []
    assert merge.run(run, tmp_path / "out", None, lines.append) == 0, lines
    out = tmp_path / "out"
    assert (out / "io.png").exists() == io
    assert ("io.png, summary.txt)" in lines[-1]) == io and lines[-1].endswith("summary.txt)")
    summary = (out / "summary.txt").read_text()
    if io:
        for rank in range(3):
            assert f"rank {rank:<4} {1:>8} / {50:>14} {1:>8} / {100 * (rank + 1):>14}\n" in summary
    else:
        assert "I/O per rank" not in summary
