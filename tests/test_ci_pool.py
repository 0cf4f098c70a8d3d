""".ci/run runs the CI targets' jobs from its own list (`pool`: job:target entries), two
at a time; the Makefile says which sessions each target runs side by side. A session
added to a target in the Makefile and not to the pool would silently leave CI: the two
must name the same jobs."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent


def _ci_run() -> Tuple[Set[str], Set[Tuple[str, ...]]]:
    """.ci/run's targets and its pool's (job, target) entries."""
    text = (ROOT / ".ci" / "run").read_text()
    targets = set(re.search(r"^targets=\(([^)]*)\)", text, re.M).group(1).split())
    body = re.search(r"^pool=\(\n(.*?)^\)", text, re.M | re.S).group(1)
    words = (line.split("#")[0].strip() for line in body.splitlines())
    return targets, {tuple(word.split(":")) for word in words if word}


def _makefile_jobs(targets: Set[str]) -> Dict[str, Set[str]]:
    """Per target, the sessions its recipe runs side by side, or the target itself."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    jobs: Dict[str, Set[str]] = {}
    for target in targets:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
        recipe = []
        for line in lines[at + 1 :]:
            if not line.startswith("\t"):
                break
            recipe.append(line)
        side = [line.split("$(SIDE_BY_SIDE)", 1)[1].split() for line in recipe if "$(SIDE_BY_SIDE)" in line]
        jobs[target] = set(side[0]) if side else {target}
    return jobs


def test_the_pool_runs_every_session_of_every_ci_target():
    targets, entries = _ci_run()
    assert {"test", "test-debian", "test-sanitize", "test-trace", "lint", "docs"} <= targets
    expected = {(job, target) for target, jobs in _makefile_jobs(targets).items() for job in jobs}
    assert entries == expected, f"in the pool only: {entries - expected}; in the Makefile only: {expected - entries}"


def test_a_session_missing_from_the_pool_is_found(tmp_path, monkeypatch):
    """The check above fails when the two differ (a pool without test-on-openmpi)."""
    (tmp_path / ".ci").mkdir()
    text = (ROOT / ".ci" / "run").read_text()
    (tmp_path / ".ci" / "run").write_text(re.sub(r"^ *test-on-openmpi:test .*\n", "", text, flags=re.M))
    (tmp_path / "Makefile").write_text((ROOT / "Makefile").read_text())
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    targets, entries = _ci_run()
    expected = {(job, target) for target, jobs in _makefile_jobs(targets).items() for job in jobs}
    assert expected - entries == {("test-on-openmpi", "test")}
