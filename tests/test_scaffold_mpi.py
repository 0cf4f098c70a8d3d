"""scaffold-tool on real MPIs: generated tools compile with -Wall -Wextra -Werror (through
their own Makefile) and run stacked twice in one chain, on MPICH and Open MPI.

Tools: the quick form, the complete example of docs/spec-language.md, and a tool that
intercepts every function through exec_func with code before, around each argument and
after (non-int results, MPI_Pcontrol, names that are macros in the MPI).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import SAMPLE_TOOLS, make, qmpigen

pytestmark = pytest.mark.mpi

REPO = Path(__file__).resolve().parent.parent
DOCS_EXAMPLE = re.findall(r"```qmpi\n(.*?)```", (REPO / "docs" / "spec-language.md").read_text(), re.S)[0]

EVERYTHING = """\
# Every function, through exec_func, with code around each call.
tool every prefix EV;

code %{
#include <stdio.h>
%}

context {
    unsigned long long calls[NUM_MPI_FUNCS];
    unsigned long long handles;
}

intercept all {
    call exec_func;
    before %{ $ctx->calls[$index]++; (void)"$name $args"; %}
    before each MPI_Comm %{ $ctx->handles += $arg == MPI_COMM_NULL ? 0 : 1; %}
    after each MPI_Request * %{ (void)$ret; (void)$arg; %}
    after %{ (void)$ret; %}
}

on pcontrol %{ (void)$va; %}

on finalize %{
    int rank = 0;
    unsigned long long total = 0;
    int k;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (k = 0; k < NUM_MPI_FUNCS; k++)
        total += $ctx->calls[k];
    printf("every@%d rank %d: %llu calls, %llu communicators\\n", $level, rank, total, $ctx->handles);
    fflush(stdout);
%}
"""


def scaffold(mpi, *args):
    proc = qmpigen("scaffold-tool", *args, "--mpi-header", "auto", "--mpicc", mpi.mpicc, env=mpi.env())
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="session")
def spec_tools(mpi, core, tmp_path_factory):
    """Generated and built once per MPI: {name: path of libNAME.so}."""
    out = tmp_path_factory.mktemp(f"spec-tools-{mpi.name}")
    (out / "msgstat.qmpi").write_text(DOCS_EXAMPLE)
    (out / "every.qmpi").write_text(EVERYTHING)
    scaffold(
        mpi, "--name", "quick", "--intercept", "MPI_Send,MPI_Recv,MPI_File_*,collectives", "-o", str(out / "quick")
    )
    scaffold(mpi, str(out / "msgstat.qmpi"), "-o", str(out / "msgstat"))
    scaffold(mpi, str(out / "every.qmpi"), "-o", str(out / "every"))
    libs = {}
    for name in ("quick", "msgstat", "every"):
        make(out / name, f"QMPI_CORE={core}", f"MPICC={mpi.mpicc}", env=mpi.env())
        libs[name] = out / name / f"lib{name}.so"
        assert libs[name].exists()
    return libs


@pytest.fixture(scope="session")
def tbcast(mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"tbcast-{mpi.name}")
    return mpi.build_tool(SAMPLE_TOOLS / "tbcast.c", core, out / "libtbcast.so")


def app_lines(stdout):
    return sorted(line for line in stdout.splitlines() if line.startswith("app rank"))


def expected_app(ranks):
    return [f"app rank {r} of {ranks}: data 11 22 33 {ranks} wtime_ok 1" for r in range(ranks)]


def test_quick_form_tool_runs_stacked_twice(mpi, demo_app, spec_tools):
    """The quick form's starter counts and times what it intercepts: a table per rank and
    instance on stderr at MPI_Finalize, the application's stdout as without it."""
    lib = spec_tools["quick"]
    assert (lib.parent / "quick.qmpi").exists()
    proc = mpi.run(2, [demo_app], env={"TOOLS": f"{lib}:{lib}"})
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == expected_app(2) and "quick@" not in proc.stdout
    heads = re.findall(r"^quick@(\d) rank (\d): (\d+) functions, (\d+) calls, [\d.]+ ms in them$", proc.stderr, re.M)
    assert sorted((int(level), int(rank)) for level, rank, _, _ in heads) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert all((functions, calls) == ("2", "2") for _, _, functions, calls in heads)  # MPI_Bcast, MPI_Barrier
    rows = re.findall(r"^  (MPI_\w+) +(\d+) +[\d.]+ +[\d.]+$", proc.stderr, re.M)
    assert sorted(rows) == sorted([("MPI_Barrier", "1"), ("MPI_Bcast", "1")] * 4), proc.stderr


def msgstat_reports(stdout):
    found = re.findall(
        r"^msgstat@(\d+) rank (\d+): (\d+) calls, (\d+) communicator arguments, (\d+) requests", stdout, re.M
    )
    return {(int(level), int(r)): (int(c), int(a), int(q)) for level, r, c, a, q in found}


def test_docs_example_stacked_twice_around_tbcast(mpi, demo_app, spec_tools, tbcast):
    lib = spec_tools["msgstat"]
    ranks = 3
    proc = mpi.run(ranks, [demo_app], env={"TOOLS": f"{lib}:{tbcast}:{lib}"})
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == expected_app(ranks)
    reports = msgstat_reports(proc.stdout)
    for r in range(ranks):
        assert reports[(1, r)] == (2, 0, 0)  # MPI_Bcast (exec_func) and MPI_Barrier (instead)
        # Below TBcast: the root's two MPI_Send (one communicator argument each), the barrier.
        assert reports[(3, r)] == ((3, 2, 0) if r == 0 else (1, 0, 0))


def test_every_function_through_exec_func_runs_stacked_twice(mpi, demo_app, spec_tools, tbcast):
    lib = spec_tools["every"]
    proc = mpi.run(2, [demo_app], env={"TOOLS": f"{lib}:{tbcast}:{lib}"})
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == expected_app(2)
    reports = dict(re.findall(r"^every@(\d+ rank \d+): (.*)$", proc.stdout, re.M))
    assert set(reports) == {"1 rank 0", "1 rank 1", "3 rank 0", "3 rank 1"}
    assert reports["1 rank 0"] != reports["3 rank 0"]


def test_a_function_this_mpi_lacks(mpi, tmp_path):
    (tmp_path / "big.qmpi").write_text("tool big;\nintercept MPI_Send, MPI_Send_c;\n")
    proc = qmpigen(
        "scaffold-tool", str(tmp_path / "big.qmpi"), "--mpicc", mpi.mpicc, "-o", str(tmp_path / "out"), env=mpi.env()
    )
    lacks = re.fullmatch(
        rf"qmpigen: error: {re.escape(str(tmp_path))}/big.qmpi:2:21: [\w ]+ [\d.]+ \(MPI [\d.]+\) lacks MPI_Send_c: "
        r"its mpi.h does not declare it \(it declares no large-count _c functions\)\n",
        proc.stderr,
    )
    if mpi.name == "mpich":  # MPI 5.0: large-count functions
        assert proc.returncode == 0, proc.stderr
    elif mpi.name == "openmpi" or proc.returncode != 0:  # Open MPI 5 (MPI 3.1) has none
        assert proc.returncode == 2 and lacks, proc.stderr
        assert mpi.name != "openmpi" or ": Open MPI " in proc.stderr
        assert not (tmp_path / "out").exists()


HOOKS = """\
tool hooks;
code %{
#include <stdio.h>
%}
on init %{ printf("hooks@%d init\\n", $level); fflush(stdout); %}
on finalize %{ printf("hooks@%d finalize\\n", $level); fflush(stdout); %}
"""

SESSIONS_APP = """\
/* The sessions model only: two sessions, never MPI_Init. */
#include <mpi.h>
#include <stdio.h>

int main(void)
{
    MPI_Session a, b;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &a);
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &b);
    printf("app: two sessions\\n");
    fflush(stdout);
    MPI_Session_finalize(&a);
    printf("app: one session left\\n");
    fflush(stdout);
    MPI_Session_finalize(&b);
    printf("app: done\\n");
    fflush(stdout);
    return 0;
}
"""


@pytest.fixture(scope="session")
def hooks_tool(mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"hooks-{mpi.name}")
    (out / "hooks.qmpi").write_text(HOOKS)
    scaffold(mpi, str(out / "hooks.qmpi"), "-o", str(out / "hooks"))
    make(out / "hooks", f"QMPI_CORE={core}", f"MPICC={mpi.mpicc}", env=mpi.env())
    return out / "hooks" / "libhooks.so"


def test_init_and_finalize_hooks_run_once_per_instance_in_the_world_model(mpi, demo_app, hooks_tool):
    proc = mpi.run(1, [demo_app], env={"TOOLS": f"{hooks_tool}:{hooks_tool}"})
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("hooks@", "app rank"))]
    # Init: the inner instance's hook runs first (its MPI_Init returns first);
    # finalize: the outer one's runs first (before calling on).
    assert lines == [
        "hooks@2 init",
        "hooks@1 init",
        "app rank 0 of 1: data 11 22 33 1 wtime_ok 1",
        "hooks@1 finalize",
        "hooks@2 finalize",
    ]


def test_init_and_finalize_hooks_in_the_sessions_model(mpi, core, hooks_tool, tmp_path):
    if "_MPI_Session_init" not in (core / "qmpi.h").read_text():
        pytest.skip(f"{mpi.name} has no Sessions (MPI < 4.0)")
    source = tmp_path / "sessions_app.c"
    source.write_text(SESSIONS_APP)
    app = mpi.build_app(source, core, tmp_path / "sessions_app")
    proc = mpi.run(1, [app], env={"TOOLS": str(hooks_tool)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "hooks@1 init",
        "app: two sessions",
        "app: one session left",
        "hooks@1 finalize",
        "app: done",
    ]
