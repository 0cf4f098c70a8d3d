"""The trace tool writes where it is told and nowhere else (issue 32, items 3-5), on the
real MPIs: a trace directory another user owns, or one others can write without the
sticky bit, is refused with one line (the run goes on untraced); /tmp-like (sticky)
directories are taken; rank files are created exclusively under names that carry the
run, so a link or FIFO planted under the name a rank file had before is neither
followed nor opened (a FIFO hung the rank), and two runs in one directory write
distinct files (the merge takes the newest and names the other's); the values of
QMPI_TRACE_BUFFER and QMPI_TRACE_DIR in the tool's lines are escaped. Marked `trace`."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from conftest import APPS, qmpigen

pytestmark = [pytest.mark.mpi, pytest.mark.trace]
NOBODY = 65534


@pytest.fixture(scope="module")
def app(mpi, core, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp(f"where-{mpi.name}")
    return mpi.build_app(APPS / "trace_death.c", core, out / "trace_death", ["-lpthread"])


def _traced(mpi, app, sample_tools, cwd: Path, directory: Path, ranks: int = 1, **env: str):
    env = {"QMPI_TOOLS": f"{sample_tools}/libtrace.so", "QMPI_TRACE_DIR": str(directory), **env}
    proc = mpi.run(ranks, [app, "finish", 30], env=env, cwd=cwd)
    assert proc.returncode == 0 and "calls 0 30" in proc.stdout, proc.stdout + proc.stderr
    return proc


def _refusals(stderr: str):
    return re.findall(r"^qmpi trace \(level 1, rank 0\): refused .*; tracing stops for this instance$", stderr, re.M)


@pytest.mark.parametrize(
    "owner, mode, refused",
    [(NOBODY, 0o755, True), (0, 0o777, True), (0, 0o1777, False), (None, 0o775, False)],
    ids=["another-users", "world-writable", "sticky", "group-writable"],
)
def test_the_trace_directory_must_be_trustworthy(mpi, app, sample_tools, tmp_path, owner, mode, refused):
    """Owned by another user (as root here: nobody's), or writable by others without the
    sticky bit: one line, no file, the run goes on. Sticky (as /tmp) or only group-writable:
    traced."""
    if os.geteuid() != 0 and owner is not None:
        pytest.skip("needs root to give the directory to another owner")
    directory = tmp_path / "run"
    directory.mkdir()
    if owner is not None:
        os.chown(directory, owner, -1)
    directory.chmod(mode)
    proc = _traced(mpi, app, sample_tools, tmp_path, directory)
    assert len(_refusals(proc.stderr)) == (1 if refused else 0), proc.stderr
    assert bool(list(directory.glob("*.qtr"))) != refused


def test_a_link_or_fifo_under_a_rank_files_old_name_is_not_touched(mpi, app, sample_tools, tmp_path):
    """Before, rank 0's file was always trace_death_<host>_0_0.L1.qtr, opened O_TRUNC: a
    link there made the run overwrite what it pointed to, a FIFO there hung the rank. Now
    the name carries the run and files are created exclusively: neither is opened."""
    directory = tmp_path / "run"
    directory.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    host = socket.gethostname()
    (directory / f"trace_death_{host}_0_0.L1.qtr").symlink_to(victim)
    os.mkfifo(directory / f"trace_death_{host}_1_0.L1.qtr")
    _traced(mpi, app, sample_tools, tmp_path, directory, ranks=2)
    assert victim.read_text() == "keep me\n"
    assert len([p for p in directory.glob("*.qtr") if p.is_file() and not p.is_symlink()]) == 2


def test_two_runs_in_one_directory_write_distinct_files(mpi, app, sample_tools, tmp_path):
    """The same program twice into one directory: both runs' files are there (before, the
    second overwrote the first's); the merge takes the newest run and names the other's
    files."""
    directory = tmp_path / "run"
    for _ in range(2):
        _traced(mpi, app, sample_tools, tmp_path, directory, ranks=2)
    files = sorted(directory.glob("*.qtr"))
    assert len(files) == 4 and len({f.name.split(".")[-2] for f in files}) == 2, files
    proc = qmpigen("trace", str(directory), "-o", str(tmp_path / "merged"))
    assert proc.returncode == 0, proc.stderr
    others = [line for line in proc.stderr.splitlines() if "not merged: other run" in line]
    assert len(others) == 2 and "merged 2 trace files, 64 calls" in proc.stderr, proc.stderr


def test_values_in_lines_are_escaped(mpi, app, sample_tools, tmp_path):
    """A newline in QMPI_TRACE_BUFFER or QMPI_TRACE_DIR forged a `qmpi: error:` line and a
    terminal escape went through: each value is escaped in its one line."""
    forged = "\nqmpi: error: forged\x1b[2J"
    directory = f"/proc/no-such-dir{forged}"
    env = {"QMPI_TOOLS": f"{sample_tools}/libtrace.so", "QMPI_TRACE_DIR": directory, "QMPI_TRACE_BUFFER": f"1{forged}"}
    proc = mpi.run(1, [app, "finish", 30], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stderr and not re.search(r"^qmpi: error: forged", proc.stderr, re.M), proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("qmpi trace")]
    assert len(lines) == 2 and all("\\x0aqmpi: error: forged\\x1b[2J" in line for line in lines), lines
