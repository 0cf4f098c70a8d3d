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
