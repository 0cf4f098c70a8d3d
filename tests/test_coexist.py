"""The core beside the tools sites deploy, and inside their chains.

tests/pmpi_tools/styletool.c is one small PMPI tool per way deployed tools bind to MPI
(imports, Darshan's PMPI_ aliases, Recorder's own PMPI_Init, dlsym with RTLD_NEXT,
RTLD_DEFAULT or a handle, dlvsym, exported __real_PMPI_X pointers, GOT patching, finalize
from an exit handler). Each is preloaded ahead of the core and after it, and listed in
TOOLS at every position and twice; every instance must count exactly the application's
calls (tests/apps/coexist_app.c), the counter between them too, and no job stops. The
real tools (Darshan, Recorder, IPM, mpitrace, Caliper) are tried by hand:
docs/development.md.
"""

from __future__ import annotations

import functools
import re
import subprocess
from typing import Dict, List

import pytest
from test_pmpi_tools import mpi_library

from conftest import APPS, SANITIZE, qmpi_errors

pytestmark = pytest.mark.mpi

STYLE_SOURCE = APPS.parent / "pmpi_tools" / "styletool.c"
# The styles that are PMPI tools (they define MPI_X): loaded as levels in TOOLS.
LEVEL_STYLES = ("imports", "aliases", "ownpmpi", "default", "handle", "dlvsym", "real", "exitfin")
STYLES = (*LEVEL_STYLES, "gotcha")
RANKS = 2
WRITES, BLOCK = 8, 512  # as in coexist_app.c


@pytest.fixture(scope="session")
def styles(mpi, tmp_path_factory) -> Dict[str, object]:
    """The binding-style tools, built as their authors build them, and the application,
    plain and linked with the core."""
    out = tmp_path_factory.mktemp(f"styles-{mpi.name}")
    return {
        style: mpi.compile(
            [STYLE_SOURCE],
            out / f"libstyle_{style}.so",
            ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", f"-DSTYLE_{style.upper()}", "-ldl"],
            # never instrumented, as a site's Darshan is not: ASan cannot tell the core's
            # private copy of an instrumented library (its globals registered twice) from
            # an overflow when the core relocates the copy
            sanitize=False,
        )
        for style in STYLES
    }


@pytest.fixture(scope="session")
def coexist_apps(mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"coexist-{mpi.name}")
    return {
        "plain": mpi.build_app(APPS / "coexist_app.c", None, out / "plain"),
        "linked": mpi.build_app(APPS / "coexist_app.c", core, out / "linked"),
    }


def style_reports(stderr: str, style: str) -> Dict[int, List[Dict[str, int]]]:
    """{rank: [counts of each instance, in the order they reported]}."""
    found: Dict[int, List[Dict[str, int]]] = {}
    for m in re.finditer(rf"styletool {style} rank (-?\d+):((?: \w+=\d+)+)", stderr):
        counts = {k: int(v) for k, v in (item.split("=") for item in m.group(2).split())}
        found.setdefault(int(m.group(1)), []).append(counts)
    return found


def expected_style(rank: int, style: str, dlvsym_answers: int = 8) -> Dict[str, int]:
    counts = {
        "MPI_Init": 1,
        "MPI_File_open": 1,
        "MPI_File_write_at": WRITES,
        "MPI_File_read_at": WRITES,
        "MPI_File_close": 1,
        "MPI_Bcast": 1,
        "MPI_Allreduce": 1,
        "MPI_Send" if rank == 0 else "MPI_Recv": 1,
        "MPI_Finalize": 1,
        "written": WRITES * BLOCK,
        "read": WRITES * BLOCK,
    }
    if style == "dlvsym":
        # Looked up by the time it reports (from its MPI_Finalize, before it looks that
        # up): Init, File_open/write_at/read_at/close, Bcast, Allreduce, Send or Recv. The
        # MPIs version no symbol: only the core answers, where it re-points the tool.
        counts["dlvsym_answers"] = dlvsym_answers
    return counts


def counter_reports(stderr: str) -> Dict[tuple, Dict[str, int]]:
    return {
        (int(m.group(1)), int(m.group(2))): {k: int(v) for k, v in (i.split("=") for i in m.group(3).split())}
        for m in re.finditer(r"counter@(\d+) rank (\d+):((?: \w+=\d+)+)", stderr)
    }


def expected_counter(rank: int, own_calls: int) -> Dict[str, int]:
    """What the counter sees of the application, plus each style instance's own
    PMPI_Comm_rank (in its report) that reaches it."""
    return {
        "MPI_Init": 1,
        "MPI_Comm_rank": 1 + own_calls,
        "MPI_Comm_size": 1,
        "MPI_Bcast": 1,
        "MPI_Allreduce": 1,
        "MPI_Send" if rank == 0 else "MPI_Recv": 1,
        "MPI_Finalize": 1,
    }


def sanitized(mpi, env: Dict[str, str]) -> Dict[str, str]:
    """Under `make test-sanitize`: the ASan runtime preloaded first, as ASan requires, when
    an uninstrumented library (the MPI itself, a site's tool) is preloaded ahead of the
    instrumented program (else it runs before ASan is set up: a jump to address 0)."""
    if not SANITIZE or "LD_PRELOAD" not in env:
        return env
    return {**env, "LD_PRELOAD": f"{asan_runtime(mpi.mpicc)}:{env['LD_PRELOAD']}"}


@functools.lru_cache(maxsize=None)  # asked once per driver, not per run
def asan_runtime(mpicc: str) -> str:
    return subprocess.run([mpicc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()


def run_app(mpi, app, tmp_path, env):
    proc = mpi.run(RANKS, [app, tmp_path / "shared.dat"], env=sanitized(mpi, env))
    assert proc.returncode == 0 and not qmpi_errors(proc.stderr), proc.stdout + proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("coexist rank")) == [
        f"coexist rank {r} of {RANKS}: sum 1 read_ok 1" for r in range(RANKS)
    ], proc.stdout
    return proc


def style_env(app, **extra: str) -> Dict[str, str]:
    """The HANDLE style dlopens the MPI library by the name its users give it."""
    return {"STYLETOOL_MPI_LIBRARY": mpi_library(app), **extra}


@pytest.mark.parametrize("style", LEVEL_STYLES)
def test_preloaded_ahead_of_the_core_and_at_the_top_and_bottom_of_tools(
    mpi, core, sample_tools, styles, coexist_apps, tmp_path, style
):
    """Preloaded ahead of a core linked into the application, the tool is the outermost
    level: its PMPI calls (imports, aliases, look-ups) enter the chain, where the same
    library runs twice more, at the top and the bottom of TOOLS."""
    app, tool = coexist_apps["linked"], styles[style]
    env = style_env(
        app,
        LD_PRELOAD=str(tool),
        TOOLS=f"{tool}:{sample_tools / 'libcounter.so'}:{tool}",
        QMPI_VERBOSE="1",
    )
    proc = run_app(mpi, app, tmp_path, env)
    for rank in range(RANKS):
        assert style_reports(proc.stderr, style)[rank] == [expected_style(rank, style)] * 3, proc.stderr
        # each instance's own PMPI_Comm_rank passes the levels below it: the outer's and the top's
        assert counter_reports(proc.stderr)[(2, rank)] == expected_counter(rank, 2), proc.stderr
    assert f"qmpi: ahead of the chain: {tool}, preloaded ahead of the core" in proc.stderr, proc.stderr


@pytest.mark.parametrize("style", LEVEL_STYLES)
def test_preloaded_after_the_core_and_in_the_middle_of_tools(
    mpi, core, sample_tools, styles, coexist_apps, tmp_path, style
):
    """Preloaded after the core (an unmodified application, both preloaded), the tool is
    the chain's last link; the same library in the middle of TOOLS is one more level."""
    app, tool, counter = coexist_apps["plain"], styles[style], sample_tools / "libcounter.so"
    env = style_env(
        app, LD_PRELOAD=f"{core / 'libqmpi.so'}:{tool}", TOOLS=f"{counter}:{tool}:{counter}", QMPI_VERBOSE="1"
    )
    proc = run_app(mpi, app, tmp_path, env)
    for rank in range(RANKS):
        # the middle copy, then the tool after the core, whose look-ups are the MPI's
        assert style_reports(proc.stderr, style)[rank] == [
            expected_style(rank, style),
            expected_style(rank, style, dlvsym_answers=0),
        ], proc.stderr
        assert counter_reports(proc.stderr)[(1, rank)] == expected_counter(rank, 0), proc.stderr
        assert counter_reports(proc.stderr)[(3, rank)] == expected_counter(rank, 1), proc.stderr
    assert re.search(rf"qmpi: level 4: {re.escape(str(tool))}, preloaded after the core", proc.stderr), proc.stderr


def test_a_gotcha_tool_wraps_the_core_either_way_and_is_refused_in_tools(
    mpi, core, sample_tools, styles, coexist_apps, tmp_path
):
    """A tool that patches GOT slots at run time (Caliper's GOTCHA) defines no MPI
    function: preloaded ahead of the core or after it, it wraps the application's calls,
    which go on into the chain; listed in TOOLS it is refused with one line."""
    tool, counter = styles["gotcha"], sample_tools / "libcounter.so"
    for app, preload in (
        (coexist_apps["linked"], str(tool)),
        (coexist_apps["plain"], f"{core / 'libqmpi.so'}:{tool}"),
    ):
        proc = run_app(mpi, app, tmp_path, {"LD_PRELOAD": preload, "TOOLS": str(counter)})
        for rank in range(RANKS):
            assert style_reports(proc.stderr, "gotcha")[rank] == [expected_style(rank, "gotcha")], proc.stderr
            assert counter_reports(proc.stderr)[(1, rank)] == expected_counter(rank, 0), proc.stderr
    refused = mpi.run(RANKS, [coexist_apps["linked"], tmp_path / "x.dat"], env={"TOOLS": str(tool)}, timeout=60)
    errors = qmpi_errors(refused.stderr)
    assert refused.returncode != 0 and errors, refused.stderr
    assert f"TOOLS entry 1 ({tool}): neither a QMPI tool" in errors[0], errors


VERSION_SHIM = r"""
#include <mpi.h>
#include <string.h>
/* What MPI_Get_library_version says in MPICH's derivatives and others: the wording
 * must not decide which MPI a library is. */
static int say(char *version, int *length)
{
    strcpy(version, WORDS);
    *length = (int)strlen(WORDS);
    return MPI_SUCCESS;
}
int MPI_Get_library_version(char *version, int *length) { return say(version, length); }
int PMPI_Get_library_version(char *version, int *length) { return say(version, length); }
"""


@pytest.mark.parametrize("words", ["MVAPICH2 Version :\t2.3.7", "Open MPI v9.9.9, package: any"])
def test_the_library_version_wording_stops_no_job(mpi, demo_app, tmp_path, words):
    """MVAPICH's MPI_Get_library_version starts "MVAPICH2 Version" (Intel MPI, Cray MPICH
    and others word it their own way): the core judges the library by its ABI, not by
    the words; a library of the core's own ABI runs whatever it says."""
    source = tmp_path / "version_shim.c"
    source.write_text(VERSION_SHIM)
    shim = mpi.compile([source], tmp_path / "libversion.so", ["-shared", "-fPIC", f'-DWORDS="{words}"'])
    proc = mpi.run(2, [demo_app], env=sanitized(mpi, {"LD_PRELOAD": str(shim)}))
    assert proc.returncode == 0 and not qmpi_errors(proc.stderr), proc.stderr
    assert proc.stdout.count("app rank") == 2


def test_a_generic_tools_variable_is_ignored_with_one_line(mpi, demo_app, tmp_path):
    """Other software sets TOOLS for its own use: a value that names no tool (no shared
    library, @name or %name) is not a tool list. One warning for the job, not one per
    rank; a real tool list with a typo still stops the job."""
    proc = mpi.run(2, [demo_app], env={"TOOLS": "/usr/local/bin:/opt/tools"})
    assert proc.returncode == 0 and proc.stdout.count("app rank") == 2, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "qmpi:" in line]
    assert len(warnings) == 1 and "TOOLS=/usr/local/bin:/opt/tools names no tool" in warnings[0], proc.stderr
    typo = mpi.run(2, [demo_app], env={"TOOLS": f"/usr/local/bin:{tmp_path / 'libcountr.so'}"}, timeout=60)
    assert typo.returncode != 0 and "TOOLS entry 1 (/usr/local/bin): not a regular file" in typo.stderr, typo.stderr


def test_an_mpi_library_ahead_of_the_core_is_said(mpi, core, coexist_apps, tmp_path):
    """-lmpi before -lqmpi (here: the MPI preloaded ahead of the core) gives every call
    to the MPI and none to the core: said once, the job runs."""
    app = coexist_apps["plain"]
    proc = run_app(mpi, app, tmp_path, {"LD_PRELOAD": f"{mpi_library(app)}:{core / 'libqmpi.so'}"})
    lines = [line for line in proc.stderr.splitlines() if "qmpi:" in line]
    assert len(lines) == 1 and "is loaded ahead of the QMPI core" in lines[0], proc.stderr
