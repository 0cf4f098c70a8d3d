"""Crafted rank files whose merge cost far more than their bytes (issue 32, item 7), from
tests/trace_writer.py's CRAFTED shapes: a communicator listed one member per record
(every record sorted all the parts so far: quadratic), a world of 2^31-1 ranks with a
communicator naming thousands (a location and two OTF2 files each), thousands of function
names (a legend entry each: a picture tens of thousands of pixels tall), names that
matplotlib reads as mathtext (the merge aborted), a trace without calls (matplotlib's
UserWarning on the terminal). What each costs against a valid file of the same size is
`make bench`'s crafted-input row (bench/trace_crafted.py); these tests check what
the costs came from, without timing anything."""

from __future__ import annotations

import builtins
import warnings
from pathlib import Path

import pytest

pytest.importorskip("otf2")
pytest.importorskip("matplotlib")

import trace_writer as w  # noqa: E402

from qmpigen.trace import merge, read, records  # noqa: E402
from qmpigen.trace.timeline_plot import DPI  # noqa: E402

# Seconds of merges of crafted traces: in `make test-trace`, not in `make test-fast`.
pytestmark = [pytest.mark.trace, pytest.mark.slow]


def _merge(directory: Path, out: Path):
    lines: list = []
    code = merge.run(directory, out, None, lines.append)
    return code, lines


def _one_file(tmp_path: Path, data: bytes) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "synth_node_0_0.L1.qtr").write_bytes(data)
    return run


def test_a_communicator_listed_one_member_per_record_is_put_together_once(tmp_path, monkeypatch):
    """5,000 COMM records of one communicator: sorted once when complete, not per record
    (20,000 records took 44 s before, 40,000 over a minute)."""
    path = _one_file(tmp_path, w.comm_records(5000)) / "synth_node_0_0.L1.qtr"
    sorts = []

    def counting_sorted(*args, **kwargs):
        sorts.append(1)
        return builtins.sorted(*args, **kwargs)

    monkeypatch.setattr(read, "sorted", counting_sorted, raising=False)
    got = read.read_rank_file(path)
    assert got.comms[0] == tuple(range(5000)) and not got.comm_parts
    assert len(sorts) <= 1


def test_member_lists_are_shared_but_large_ones_are_not_kept(tmp_path):
    """Files that list the same members share one list (8,192 ranks: made and hashed once,
    not per file), through a cache that keeps small lists only and is emptied by each
    merge: a crafted file's million members are not held past its own reading."""
    small = [tmp_path / f"small{i}.qtr" for i in range(2)]
    for path in small:
        path.write_bytes(w.rank_file(0, 4, extra=w.comm(5, range(8192))))
    first, second = (read.read_rank_file(path).comms[5] for path in small)
    assert first is second and first == tuple(range(8192)) and hash(first) == hash(tuple(range(8192)))
    big = tmp_path / "big.qtr"
    big.write_bytes(w.rank_file(0, 4, extra=w.comm(5, range(1, 1_000_001))))
    first, second = (read.read_rank_file(big).comms[5] for _ in range(2))
    assert first == second and first[-1] == 1_000_000 and first is not second  # not kept by the cache
    run = _one_file(tmp_path, w.rank_file(0, 1, extra=w.comm(5, range(8192))))
    merge.merge(run, tmp_path / "out", outputs=frozenset({"json"}))
    assert records._members.cache_info().currsize == 0  # emptied by the merge


def test_a_world_claim_makes_locations_only_for_files(tmp_path):
    """A 32 KB file claiming 2^31-1 ranks, its communicator naming 8,000 of them: 16,002
    files in traces/ before (a location each); now the ranks with a file."""
    run = _one_file(tmp_path, w.world_claim(8000))
    code, lines = _merge(run, tmp_path / "out")
    assert code == 0, lines
    assert sorted(p.name for p in (tmp_path / "out" / "traces").iterdir()) == ["0.def", "0.evt"]
    assert sum("ranks missing" in line for line in lines) == 1


def test_thousands_of_function_names_bound_the_legend_and_the_regions(tmp_path):
    """2,100 functions called once each: a legend of LEGEND_FUNCTIONS names and one entry for
    the rest, the picture's height no longer growing with them (19,600 pixels before); an
    OTF2 region for MAX_REGIONS of them and one for the rest (about 0.3 ms each in the
    otf2 package: 8,192 names cost more than a valid file of their size), said in one line."""
    from PIL import Image

    run = _one_file(tmp_path, w.many_functions(2100))
    code, lines = _merge(run, tmp_path / "out")
    assert code == 0, lines
    width, height = Image.open(tmp_path / "out" / "timeline.png").size
    assert height <= 6 * DPI, (width, height)
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert "MPI_F2099" in summary  # every function still in the summary
    assert lines[:-1] == [
        "qmpigen: the trace names 2100 functions: traces.otf2 has a region for 2048, the calls of the other 52 "
        "are in one, '(other functions)'"
    ]


def test_names_matplotlib_would_read_as_mathtext(tmp_path):
    """A program named app$\\alpha_{$ and functions MPI_$x^$, $\\frac{$: `internal error:
    ValueError` over 4 lines and nothing written before; drawn as they are now."""
    run = _one_file(tmp_path, w.dollar_names())
    code, lines = _merge(run, tmp_path / "out")
    assert code == 0 and len(lines) == 1, lines
    assert (tmp_path / "out" / "timeline.png").stat().st_size > 0
    assert "MPI_$x^$" in (tmp_path / "out" / "summary.txt").read_text()


def test_a_trace_without_calls_warns_nothing(tmp_path):
    """matplotlib's `UserWarning: Attempting to set identical low and high ylims` reached
    the user before."""
    import numpy as np

    run = _one_file(tmp_path, w._file(1, ["MPI_Init"], w.comm(0, [0]), np.zeros(0, np.uint16)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, lines = _merge(run, tmp_path / "out")
    assert code == 0, lines
    assert [str(c.message) for c in caught] == []


def test_communicators_outside_the_world_are_one_line_per_rank(tmp_path):
    """100 communicators naming a rank outside a 4-rank world: 100 lines before."""
    bad = b"".join(w.comm(10 + i, [0, 99]) for i in range(100))
    w.write_run(tmp_path / "run", 4, extra=bad)
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0
    mine = [line for line in lines if "outside the world" in line]
    assert len(mine) == 4 and all("100 communicators (first: 10)" in line for line in mine), lines


def test_messages_to_ranks_without_a_file(tmp_path):
    """Ranks 3, 4 and 6 of 8 without a file: no location for them (an empty one each
    before), and the messages to and from them say so in OTF2 (receiver or sender
    UNDEFINED) rather than naming some other rank."""
    import shutil
    import subprocess

    if shutil.which("otf2-print") is None:
        pytest.skip("otf2-print not installed")
    w.write_run(tmp_path / "run", 8, ranks=[0, 1, 2, 5, 7])
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0, lines
    text = subprocess.run(
        ["otf2-print", "-A", str(tmp_path / "out" / "traces.otf2")], capture_output=True, text=True, check=True
    ).stdout
    assert sum(line.startswith("LOCATION ") for line in text.splitlines()) == 5
    sends = [line for line in text.splitlines() if line.startswith("MPI_SEND ")]
    # rank 2 sends to 3, 5 to 6, 7 to 0: one receiver without a file per send of ranks 2 and 5
    assert sum("Receiver: UNDEFINED" in line for line in sends) == 2 * 11, sends[:4]
    assert not any('"rank 3' in line or '"rank 4' in line or '"rank 6' in line for line in text.splitlines())
