"""The merge's pictures, timeline.png and, when the trace has I/O, io.png beside it, drawn
from a Timeline (timeline.py) by timeline_plot.py and io_picture.py."""

from __future__ import annotations

from pathlib import Path

from .io_picture import draw_io
from .timeline import Timeline
from .timeline_plot import DPI, draw, plain


def plot(timeline: Timeline, path: Path, title: str) -> None:
    """timeline.png at `path`, and io.png beside it when the trace has I/O: its time axis
    under the timeline's (same width and place) when both fit; text drawn as it is, never
    by LaTeX (a matplotlibrc's usetex would need it installed)."""
    import matplotlib
    import matplotlib.pyplot as plt

    title = plain(title)
    with matplotlib.rc_context({"text.usetex": False}):
        io = draw_io(timeline, title) if timeline.io_totals else None
        fig = draw(timeline, title, None if io is None else (io.subplotpars.left, io.subplotpars.right))
        fig.savefig(path, dpi=DPI, metadata={"Software": None})
        if io is not None:
            io.subplots_adjust(left=fig.subplotpars.left, right=fig.subplotpars.right)
            io.savefig(path.with_name("io.png"), dpi=DPI, metadata={"Software": None})
            plt.close(io)
        plt.close(fig)
