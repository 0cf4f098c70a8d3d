"""Outputs are replaced as a whole (qmpigen.output.write): a writer killed at any point
leaves the old version or the new one, never a mix, and the next write cleans up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from qmpigen.output.write import write_outputs

OLD = {"a.c": "old a\n", "b.c": "old b\n", "sub/c.h": "old c\n", "same.txt": "same\n"}
NEW = {"a.c": "new a\n", "b.c": "new b\n", "sub/c.h": "new c\n", "same.txt": "same\n"}


def contents(directory: Path):
    return {str(p.relative_to(directory)): p.read_text() for p in sorted(directory.rglob("*")) if p.is_file()}


def strays(parent: Path):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(".qmpigen-"))


@pytest.fixture
def old_core(tmp_path) -> Path:
    out = tmp_path / "core"
    write_outputs(str(out), OLD)
    (out / "libqmpi.so").write_text("a build product\n")
    return out


def test_unchanged_files_and_build_products_stay_as_they_are(old_core, tmp_path):
    same = os.stat(old_core / "same.txt")
    report = write_outputs(str(old_core), NEW)
    assert report.changed == ("a.c", "b.c", "sub/c.h") and report.unchanged == ("same.txt",)
    assert contents(old_core) == dict(NEW, **{"libqmpi.so": "a build product\n"})
    now = os.stat(old_core / "same.txt")
    assert (now.st_ino, now.st_mtime_ns) == (same.st_ino, same.st_mtime_ns)
    assert strays(tmp_path) == []


def test_the_mode_of_an_existing_output_is_kept(old_core):
    os.chmod(old_core, 0o750)
    write_outputs(str(old_core), NEW)
    assert os.stat(old_core).st_mode & 0o777 == 0o750


def test_writing_through_a_link_replaces_the_directory_it_names(old_core, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(old_core)
    write_outputs(str(link), NEW)
    assert link.is_symlink() and contents(old_core)["a.c"] == "new a\n"


# A writer killed at the named step: `point` is the function of qmpigen.output.write
# replaced by one that kills the process (SIGKILL: no cleanup runs).
KILLER = """
import os, signal, sys
import qmpigen.output.write as w
point = sys.argv[2]
real = getattr(w, point)
def die(*args, **kwargs):
    if point == "_link_tree":
        real(*args, **kwargs)  # the staging copy is complete, nothing is written yet
    os.kill(os.getpid(), signal.SIGKILL)
setattr(w, point, die)
w.write_outputs(sys.argv[1], {"a.c": "new a\\n", "b.c": "new b\\n", "sub/c.h": "new c\\n", "same.txt": "same\\n"})
"""


@pytest.mark.parametrize("point", ["_link_tree", "_exchange"])
def test_a_killed_writer_leaves_the_old_version_whole_and_the_next_write_cleans_up(old_core, tmp_path, point):
    before = contents(old_core)
    proc = subprocess.run([sys.executable, "-c", KILLER, str(old_core), point], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert contents(old_core) == before
    assert strays(tmp_path), "the killed writer left its staging directory (the case under test)"
    write_outputs(str(old_core), NEW)
    assert contents(old_core) == dict(NEW, **{"libqmpi.so": "a build product\n"})
    assert strays(tmp_path) == []


def test_a_writer_killed_between_the_fallback_renames_is_recovered(old_core, tmp_path):
    """Where renameat2 cannot exchange, the old directory is moved aside first: a writer
    killed then leaves no output, only `.old`; the next write puts it back and goes on."""
    aside = tmp_path / ".qmpigen-core.x1y2z3.old"
    os.rename(old_core, aside)
    (tmp_path / ".qmpigen-core.x1y2z3").mkdir()  # the unfinished new version
    report = write_outputs(str(old_core), NEW)
    assert report.unchanged == ()  # decided before recovery: every file is written
    assert contents(old_core) == dict(NEW, **{"libqmpi.so": "a build product\n"})
    assert strays(tmp_path) == []
