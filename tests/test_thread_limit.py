"""The thread level of a stack (as PnMPI's limit-threading and
PNMPI_SupportedThreadingLevel): tools declare the level they support — a thesis-style
tool through QMPI_THREAD_LEVEL (sample_tools/limit_threading.qmpi), a callback tool with
QMPI_Set_thread_level from its init (tests/callback_tools/cbthreads.c) — and an
application asking MPI_Init_thread for MPI_THREAD_MULTIPLE gets the stack's minimum,
said once with QMPI_VERBOSE."""

from __future__ import annotations

import re

import pytest

from conftest import APPS, Mpi

pytestmark = pytest.mark.mpi

CALLBACK_TOOLS = APPS.parent / "callback_tools"
RANKS = 2
SINGLE, FUNNELED, SERIALIZED, MULTIPLE = range(4)  # argv[1] of thread_level_app.c


@pytest.fixture(scope="session")
def thread_app(mpi: Mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"threads-{mpi.name}")
    app = mpi.build_app(APPS / "thread_level_app.c", core, out / "thread_level_app")
    tool = mpi.compile(
        [CALLBACK_TOOLS / "cbthreads.c"],
        out / "libcbthreads.so",
        ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-include", str(core / "qmpi.h")],
    )
    return {"app": app, "cbthreads": tool}


def provided(mpi, thread_app, core, env):
    proc = mpi.run(RANKS, [thread_app["app"], str(MULTIPLE)], env=env)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    got = re.findall(r"^RANK (\d+) provided (-?\d+) query (-?\d+)$", proc.stdout, re.M)
    assert sorted(r for r, _, _ in got) == ["0", "1"], proc.stdout
    return proc, {(int(p), int(q)) for _, p, q in got}


def test_without_tools_the_application_gets_what_it_asks(mpi, thread_app, core):
    """Every MPI the suite runs on provides MPI_THREAD_MULTIPLE: the tests below compare
    a capped level against it, so a lower level here is a failure, not a reason to skip."""
    _, got = provided(mpi, thread_app, core, {})
    assert got == {(MULTIPLE, MULTIPLE)}, f"{mpi.name} provides {got}"


def test_a_thesis_style_tool_caps_the_level(mpi, thread_app, core, sample_tools):
    proc, got = provided(
        mpi,
        thread_app,
        core,
        {"TOOLS": str(sample_tools / "liblimit_threading.so"), "QMPI_THREAD_LIMIT": "serialized", "QMPI_VERBOSE": "1"},
    )
    assert got == {(SERIALIZED, SERIALIZED)}, proc.stdout
    notes = re.findall(r"^qmpi: thread level: .*$", proc.stderr, re.M)
    assert notes == [
        f"qmpi: thread level: MPI_Init_thread asked for MPI_THREAD_MULTIPLE; level 1 "
        f"({sample_tools / 'liblimit_threading.so'}) supports MPI_THREAD_SERIALIZED, so MPI was asked for that"
    ], proc.stderr


def test_the_stack_gets_the_minimum_over_its_tools(mpi, thread_app, core, sample_tools):
    """limit_threading says SERIALIZED, the callback tool below it FUNNELED: FUNNELED;
    the callback tool sees what the application asked for, and the capped result."""
    env = {
        "TOOLS": f"{sample_tools / 'liblimit_threading.so'}:@cbthreads",
        "QMPI_THREAD_LIMIT": "serialized",
        "LD_PRELOAD": f"{core / 'libqmpi.so'}:{thread_app['cbthreads']}",
    }
    proc, got = provided(mpi, thread_app, core, env)
    assert got == {(FUNNELED, FUNNELED)}, proc.stdout
    assert (
        sorted(re.findall(r"^cbthreads rank \d: required (\d) provided (\d)$", proc.stdout, re.M))
        == [("3", "1")] * RANKS
    )
    assert "qmpi: thread level" not in proc.stderr  # only with QMPI_VERBOSE


def test_a_tool_declaring_multiple_changes_nothing(mpi, thread_app, core, sample_tools):
    _, plain = provided(mpi, thread_app, core, {})
    _, got = provided(
        mpi, thread_app, core, {"TOOLS": str(sample_tools / "liblimit_threading.so"), "QMPI_THREAD_LIMIT": "multiple"}
    )
    assert got == plain


def test_a_bad_limit_is_one_line_and_the_job_stops(mpi, thread_app, sample_tools):
    proc = mpi.run(
        RANKS,
        [thread_app["app"], str(MULTIPLE)],
        env={"TOOLS": str(sample_tools / "liblimit_threading.so"), "QMPI_THREAD_LIMIT": "lots"},
    )
    assert proc.returncode != 0 and "RANK" not in proc.stdout
    lines = {line for line in proc.stderr.splitlines() if line.startswith("limit_threading:")}
    assert lines == {"limit_threading: QMPI_THREAD_LIMIT=lots: not single, funneled, serialized or multiple"}, (
        proc.stderr
    )
