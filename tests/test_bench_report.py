"""`make bench`'s reports (bench/report.py and bench/templates/) from a results.json of a
real `make bench BENCH_FLAGS=--quick` run on the MPICH wheel. The golden files were
written by the report code before it moved into templates: the move changed no byte."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO

sys.path.insert(0, str(REPO / "bench"))
import report  # noqa: E402  (bench/ is this repository's: a missing module is a failure, not a skip)

RESULTS = FIXTURES / "bench" / "results.json"
GOLDEN = Path(__file__).resolve().parent / "golden" / "bench"


@pytest.fixture(scope="module")
def results():
    return json.loads(RESULTS.read_text())


def test_results_md_matches_golden(results):
    assert report.markdown(results) == (GOLDEN / "results.md").read_text()


def test_brief_report_matches_golden(results):
    assert report.markdown(results, brief=True) == (GOLDEN / "brief.md").read_text()


def test_combined_table_matches_golden():
    assert report.combine([str(RESULTS), str(RESULTS)]) == (GOLDEN / "combined.md").read_text()


def test_failures_and_missing_parts_are_reported(results):
    changed = dict(results, failures={"typed/1000": ["exit 139"]}, pingpong_ns={}, header_stages=None)
    text = report.markdown(changed)
    assert "## Failures\n\n- typed/1000: exit 139\n" in text
    assert "## Ping-pong" not in text and "Reading the header alone" not in text


def _row(samples):
    return {"median_ns": sorted(samples)[len(samples) // 2], "samples_ns": samples}


def test_trace_call_rows_are_paired_with_pmpi_and_reported(results, tmp_path):
    import trace_bench

    rows = {
        # the floor's process ran slower than the traced one: its PMPI samples, taken in
        # turn, show it; the paired difference does not see it, the plain medians' does
        "trace-io/floor": _row([852.0, 752.0, 952.0]),
        "pair-pmpi/trace-io/floor": _row([850.0, 750.0, 950.0]),
        "trace-io/traced": _row([990.0, 790.0, 890.0]),
        "pair-pmpi/trace-io/traced": _row([900.0, 700.0, 800.0]),
        "trace-io/baseline": _row([1000.0, 800.0, 900.0]),  # the tool before issue 33, in the same rounds
        "pair-pmpi/trace-io/baseline": _row([900.0, 700.0, 800.0]),
        "trace-io/clock": _row([870.0, 770.0, 820.0]),  # two tick reads and a record (bench/tool_clock.c)
        "pair-pmpi/trace-io/clock": _row([850.0, 750.0, 800.0]),
        "trace-io/discard": _row([950.0, 750.0, 850.0]),  # the tool throwing its buffers away
        "pair-pmpi/trace-io/discard": _row([900.0, 700.0, 800.0]),
        "trace/floor": _row([6.0, 6.0, 6.0]),
        "trace/traced": _row([40.0, 41.0, 42.0]),
    }
    summary = trace_bench.trace_call_summary(rows)
    assert set(summary) == {"io", "other"}
    io = summary["io"]
    assert (io["added_paired_ns"], io["added_ns"]) == (pytest.approx(88.0), pytest.approx(38.0))
    assert io["variants"]["baseline"]["added_paired_ns"] == pytest.approx(98.0) and "buffered" not in io["variants"]
    assert summary["other"]["added_ns"] == pytest.approx(35.0) and summary["other"]["added_paired_ns"] is None
    targets = []
    trace_bench.trace_call_targets(summary, lambda *a: targets.append(a), lambda v, d=2: f"{v:.{d}f}")
    verdicts = {
        t[0].split(", ")[2].split(" ")[0]: t[3] for t in targets if "against" not in t[0] and "where" not in t[0]
    }
    assert verdicts == {"p2p": None, "collective": None, "io": True}  # the rows not run have no verdict
    assert [t[3] for t in targets if "against" in t[0]] == [True]  # 88 ns: no more than the baseline's 98
    # where the 88 ns go, for information (no verdict): the clock tool 20 - 2, the file
    # 88 - (50 - 2), the rest (50 - 2) - 18
    assert [(t[1], t[3]) for t in targets if "where" in t[0]] == [
        (
            "two tick reads and a record 18.00, the rank file's writes 40.00, the rest 30.00 ns "
            "(of 88.00, paired, same rounds)",
            None,
        )
    ]
    text = report.markdown(dict(results, trace_calls=summary))
    assert "## Tracing: ns per traced call, per role mix" in text
    assert "| io | MPI_File_write_at" in text and "| **88.00** |" in text
    assert "| io | 88.00 | — | 98.00 | -10.00 | 48.00 | 40.00 | 18.00 | 70.00 |" in text
    assert "| other | MPI_Comm_rank" in text
    with_calls = tmp_path / "results.json"
    with_calls.write_text(json.dumps(dict(results, trace_calls=summary)))
    combined = report.combine([str(with_calls), str(RESULTS)])
    assert "| io | 88.00 (890.00 − 852.00; 1.04x) | — |" in combined
    assert "| other | 35.00 unpaired (41.00 − 6.00; 6.83x) | — |" in combined


def test_trace_dir_probe_times_its_writes_and_leaves_nothing(tmp_path):
    import trace_bench

    probe = trace_bench.probe_trace_dir(tmp_path, mib=2, rounds=2)
    assert list(tmp_path.iterdir()) == []  # its file removed
    assert probe["directory_fs"] not in ("", "?")  # from /proc/self/mounts
    assert probe["append_ns_per_byte"] > 0 and probe["rewrite_ns_per_byte"] > 0
    assert probe["record_append_ns"] == pytest.approx(probe["append_ns_per_byte"] * 40)
    targets = []
    trace_bench.trace_call_targets({}, lambda *a: targets.append(a), lambda v, d=2: f"{v:.{d}f}", probe)
    (line,) = [t for t in targets if "trace directory" in t[0]]
    assert line[1].startswith(f"{probe['directory_fs']}: appended ") and line[3] is None  # for information
    (tmp_path / "fs-probe.dat").write_bytes(b"not the probe's")
    with pytest.raises(FileExistsError):  # a file it did not make is never written over
        trace_bench.probe_trace_dir(tmp_path, mib=1, rounds=1)
    assert (tmp_path / "fs-probe.dat").read_bytes() == b"not the probe's"


def test_instruction_rows_count_an_objects_self_cost_from_callgrind(tmp_path):
    """bench/trace_instructions.py: an object's own cost, compressed names resolved (also
    when first named by a call's cob=), a call's inclusive cost not counted twice."""
    import trace_instructions

    out = tmp_path / "callgrind.out"
    out.write_text(
        "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\n"
        "ob=(1) /lib/app\nfl=(1) app.c\nfn=(1) main\n10 5\n"
        "cob=(2) /lib/libtool.so\ncfi=(2) tool.c\ncfn=(2) tool_Send\ncalls=3 20\n11 900\n"  # inclusive: skipped
        "+1 7\n"
        "ob=(2)\nfl=(2)\nfn=(2)\n20 40\n+1 2\n*  3\n"
        "fi=(3) inlined.h\n-1 10\n"
        "ob=(1)\nfn=(1)\n12 1\n"
    )
    assert trace_instructions.object_instructions(out, "/lib/libtool.so") == 40 + 2 + 3 + 10
    assert trace_instructions.object_instructions(out, "/lib/app") == 5 + 7 + 1

    rows = []

    def target(what, measured, bound, ok, note=""):
        rows.append((what, measured, ok))

    counts = {
        "per_call": {
            "p2p": {"empty": 11.0, "traced": 216.0, "baseline": 315.0, "clock": 19.0},
            "io": {"traced": 320.0, "baseline": 304.0},
        }
    }
    trace_instructions.instruction_targets(counts, target, lambda v, d=2: "—" if v is None else f"{v:.{d}f}", "486cabe")
    assert [(r[1], r[2]) for r in rows] == [
        ("216 vs 315 (one empty tool: 11; two tick reads and a record, bench/tool_clock.c: 19)", True),
        ("320 vs 304 (one empty tool: —)", False),
    ]
    rows.clear()
    trace_instructions.instruction_targets({"skipped": "valgrind not found"}, target, str, "486cabe")
    assert rows == [("tracing, instructions per traced call (callgrind)", "not measured", None)]
