"""Golden merges (tests/golden/trace/): the rank files of real runs, kept, and what
`qmpigen trace` makes of them, byte for byte: summary.txt, trace.json, and the OTF2
archive as otf2-print shows it (its events, and with -G its definitions). Any change to
what the merge writes shows here, meant or not: the fixes of the merge's speed were
checked this way by hand, now kept. The pictures are only checked to exist: matplotlib's
drawing changes between its versions.

Regenerate the expected outputs with QMPIGEN_REGEN_GOLDEN=1 make test-trace-on-mpich
(then review the diff; otf2-print 3.0.2, Debian's). The runs, on the MPICH wheel with the sample tools of this
repository (make -C sample_tools CORE=... OUT=T), from tests/apps/:
  app    TOOLS=T/libtrace.so:T/libtbcast.so:T/libtrace.so QMPI_TRACE_DIR=app
         mpiexec -n 4 ./trace_app data.bin: merged at each level;
  death  QMPI_TRACE_BUFFER=16384 TOOLS=T/libtrace.so QMPI_TRACE_DIR=death
         mpiexec -n 2 ./trace_death abort-other 40: no rank finalizes, each leaves its
         rank file's header and its tail file (16 KiB of buffer, so the files are small).
app and death are format 6's (b9f1002's tool), app7 and death7 the same runs with format
7's. A new rank-file format needs the runs again (kept beside the older ones)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import qmpigen

pytestmark = [pytest.mark.trace, pytest.mark.slow]

GOLDEN = Path(__file__).resolve().parent / "golden" / "trace"
REGENERATE = bool(os.environ.get("QMPIGEN_REGEN_GOLDEN"))
# case -> (run directory under GOLDEN, the merge's options, the pictures it draws)
CASES = {
    "app-level1": ("app", ["--level", "1"], ["timeline.png", "io.png"]),
    "app-level3": ("app", ["--level", "3"], ["timeline.png", "io.png"]),
    "death": ("death", [], ["timeline.png"]),
    # the same runs again with the tool of format 7 (COMPACT_CALL): app and death are
    # format 6's, kept so that its files go on merging the same
    "app7-level1": ("app7", ["--level", "1"], ["timeline.png", "io.png"]),
    "death7": ("death7", [], ["timeline.png"]),
}


def _otf2_print(archive: Path, *options: str) -> str:
    """otf2-print's text (the clock's date in UTC: it prints local time)."""
    env = {**os.environ, "TZ": "UTC"}
    return subprocess.run(
        ["otf2-print", *options, str(archive)], capture_output=True, text=True, check=True, env=env
    ).stdout


def _merged(case: str, tmp_path: Path) -> dict:
    """The merge of the case's run (a copy: nothing under tests/ is touched): output file
    name -> its text."""
    run, options, pictures = CASES[case]
    source = tmp_path / run
    shutil.copytree(GOLDEN / run, source)
    out = tmp_path / "merged"
    proc = qmpigen("trace", str(source), *options, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert all((out / name).is_file() and (out / name).stat().st_size > 0 for name in pictures), sorted(out.iterdir())
    texts = {name: (out / name).read_text() for name in ("summary.txt", "trace.json")}
    if shutil.which("otf2-print") is not None:
        texts["otf2-print.txt"] = _otf2_print(out / "traces.otf2")
        texts["otf2-print-G.txt"] = _otf2_print(out / "traces.otf2", "-G")
    return texts


@pytest.mark.parametrize("case", sorted(CASES))
def test_merge_writes_its_golden_outputs(case, tmp_path):
    pytest.importorskip("otf2")
    pytest.importorskip("matplotlib")  # the merge draws its pictures
    if shutil.which("otf2-print") is None and (REGENERATE or os.environ.get("QMPIGEN_REQUIRE_TRACE") == "1"):
        pytest.fail("missing: otf2-print (apt-get install otf2-tools)")
    texts = _merged(case, tmp_path)
    expected = GOLDEN / f"{case}.merged"
    if REGENERATE:
        expected.mkdir(exist_ok=True)
        for name, text in texts.items():
            (expected / name).write_text(text)
    for name, text in texts.items():
        assert text == (expected / name).read_text(), f"{case}: {name} differs from {expected / name}"
    if "otf2-print.txt" not in texts:  # the text outputs were compared; the archive was not
        pytest.skip("the OTF2 archive not compared: no otf2-print (apt-get install otf2-tools)")
