"""Unmodified PMPI tools as members of the stack.

tests/pmpi_tools/pmpicount.c is a classic PMPI tool (MPI_X -> PMPI_X, globals, its own
MPI_Comm_rank after init), built with plain `mpicc -shared -fPIC`, no qmpi.h. Listed
in TOOLS it becomes one level: its MPI_X are that level's wrappers, its PMPI_X go on
below it, its own MPI_X calls enter at the top. Each TOOLS occurrence is a private
copy with its own globals. Refusals are one line and stop the job.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import APPS, MPIS, SAMPLE_TOOLS, qmpi_errors

pytestmark = pytest.mark.mpi

PMPI_TOOLS = APPS.parent / "pmpi_tools"
CALLBACK_TOOLS = APPS.parent / "callback_tools"
ERROR_TIMEOUT_S = 60
THREADS, RANK_CALLS = 4, 8  # as in tests/apps/thread_stress.c


@pytest.fixture(scope="session")
def pmpi(mpi, core, tmp_path_factory):
    """The PMPI tools, built as PMPI tools are: mpicc -shared -fPIC, nothing of QMPI."""
    out = tmp_path_factory.mktemp(f"pmpi-tools-{mpi.name}")
    source = PMPI_TOOLS / "pmpicount.c"
    libs = {
        "count": mpi.compile([source], out / "libpmpicount.so", ["-shared", "-fPIC", "-O2"]),
        "symbolic": mpi.compile([source], out / "libpmpisymbolic.so", ["-shared", "-fPIC", "-O2", "-Wl,-Bsymbolic"]),
        "object": mpi.compile([source], out / "pmpicount.o", ["-c", "-fPIC", "-O2"]),
        "plain_app": mpi.build_app(SAMPLE_TOOLS / "demo_app.c", None, out / "demo_plain"),
        "static_app": mpi.compile(
            [SAMPLE_TOOLS / "demo_app.c"], out / "demo_static", ["-O2", str(core / "libqmpi.a"), "-ldl", "-pthread"]
        ),
    }
    return libs


def app_lines(stdout):
    return sorted(line for line in stdout.splitlines() if line.startswith("app rank"))


def expected_app(ranks):
    return [f"app rank {r} of {ranks}: data 11 22 33 {ranks} wtime_ok 1" for r in range(ranks)]


def pmpi_reports(stdout):
    """{rank: [counts of the first PMPI instance, of the second, ...]} in chain order
    (each instance prints inside its MPI_Finalize, before calling PMPI_Finalize)."""
    found = {}
    for m in re.finditer(r"^pmpicount rank (\d+):(.*) pcontrol_level=(-?\d+)$", stdout, re.M):
        counts = {k: int(v) for k, v in (item.split("=") for item in m.group(2).split())}
        counts["pcontrol_level"] = int(m.group(3))
        found.setdefault(int(m.group(1)), []).append(counts)
    return found


def counter_reports(stdout):
    return {
        (int(m.group(1)), int(m.group(2))): {k: int(v) for k, v in (i.split("=") for i in m.group(3).split())}
        for m in re.finditer(r"counter@(\d+) rank (\d+):(.*)$", stdout, re.M)
    }


# The demo application's calls, plus one MPI_Comm_rank per PMPI instance (its own call
# after init, which enters the chain at the top and passes every level).
def demo_counts(pmpi_instances):
    return {
        "MPI_Init": 1,
        "MPI_Comm_rank": 1 + pmpi_instances,
        "MPI_Comm_size": 1,
        "MPI_Bcast": 1,
        "MPI_Barrier": 1,
        "MPI_Wtime": 2,
        "MPI_Pcontrol": 1,
        "MPI_Finalize": 1,
        "pcontrol_level": 2,
    }


def counter_view(counts):
    """What the counter spec tool counts of the same calls (no Wtime, no Pcontrol)."""
    return {k: v for k, v in counts.items() if k not in ("MPI_Wtime", "MPI_Pcontrol", "pcontrol_level")}


def test_pmpi_tool_twice_around_a_thesis_tool(mpi, demo_app, sample_tools, pmpi):
    """pmpicount:counter:pmpicount: two private copies (separate globals) and the
    counter between them each see every call exactly once; results unchanged."""
    ranks = 3
    chain = f"{pmpi['count']}:{sample_tools / 'libcounter.so'}:{pmpi['count']}"
    proc = mpi.run(ranks, [demo_app], env={"TOOLS": chain, "QMPI_VERBOSE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == expected_app(ranks)
    expected = demo_counts(2)
    reports, counters = pmpi_reports(proc.stdout), counter_reports(proc.stderr)
    for r in range(ranks):
        assert reports[r] == [expected, expected], proc.stdout
        assert counters[(2, r)] == counter_view(expected)
    assert f"qmpi: level 1: {pmpi['count']}, PMPI tool, private copy, slot 1 (" in proc.stderr
    assert f"qmpi: level 3: {pmpi['count']}, PMPI tool, private copy, slot 2 (" in proc.stderr
    assert re.search(r"slot 2 \(\wMPI_, loaded in [\d.]+ ms\), instance 2, intercepts 12 functions", proc.stderr)


def test_pmpi_tool_between_a_thesis_and_a_callback_tool(mpi, core, demo_app, sample_tools, pmpi, tmp_path):
    """counter:pmpicount:@cbcount, the callback tool preloaded."""
    flags = [] if mpi.family == "mpich" else ["-D_GNU_SOURCE", "-include", str(core / "qmpi.h")]
    cbcount = mpi.compile(
        [CALLBACK_TOOLS / "cbcount.c"],
        tmp_path / "libcbcount.so",
        ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", *flags],
    )
    chain = f"{sample_tools / 'libcounter.so'}:{pmpi['count']}:@cbcount"
    proc = mpi.run(2, [demo_app], env={"TOOLS": chain, "LD_PRELOAD": f"{core / 'libqmpi.so'}:{cbcount}"})
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == expected_app(2)
    expected = demo_counts(1)
    for r in range(2):
        assert pmpi_reports(proc.stdout)[r] == [expected]
        assert counter_reports(proc.stderr)[(1, r)] == counter_view(expected)
        assert re.search(rf"^cbcount@3 rank {r}: bcast=1 send=0 recv=0 .*pcontrol=2,", proc.stdout, re.M), proc.stdout


def test_pmpi_tool_below_tbcast_sees_send_and_recv_not_bcast(mpi, demo_app, sample_tools, pmpi):
    ranks = 3
    chain = f"{pmpi['count']}:{sample_tools / 'libtbcast.so'}:{pmpi['count']}"
    proc = mpi.run(ranks, [demo_app], env={"TOOLS": chain})
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == expected_app(ranks)
    for r, (outer, inner) in pmpi_reports(proc.stdout).items():
        assert outer["MPI_Bcast"] == 1 and "MPI_Send" not in outer and "MPI_Recv" not in outer
        assert "MPI_Bcast" not in inner
        if r == 0:
            assert inner["MPI_Send"] == ranks - 1 and "MPI_Recv" not in inner
        else:
            assert inner["MPI_Recv"] == 1 and "MPI_Send" not in inner
        assert outer["pcontrol_level"] == inner["pcontrol_level"] == 2


def test_pmpi_tool_wrapping_pcontrol_is_called_at_its_level(mpi, demo_app, sample_tools, pmpi):
    """The core fans MPI_Pcontrol out: the printer above, the PMPI tool, the printer
    below each get it once, in chain order; the tool's PMPI_Pcontrol returns success."""
    printer = sample_tools / "libprinter.so"
    proc = mpi.run(1, [demo_app], env={"TOOLS": f"{printer}:{pmpi['count']}:{printer}"})
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("printer@") and "Pcontrol" in line] == [
        "printer@1 MPI_Pcontrol level 2",
        "printer@3 MPI_Pcontrol level 2",
    ]
    (report,) = pmpi_reports(proc.stdout)[0]
    assert report["MPI_Pcontrol"] == 1 and report["pcontrol_level"] == 2


def test_pmpi_tools_under_thread_multiple_count_exactly(mpi, core, sample_tools, pmpi, tmp_path):
    app = mpi.build_app(APPS / "thread_stress.c", core, tmp_path / "thread_stress", ["-pthread"])
    n = 200 if mpi.family == "openmpi" else 5000
    chain = f"{pmpi['count']}:{sample_tools / 'libcounter.so'}:{pmpi['count']}"
    proc = mpi.run(2, [app, str(n)], env={"TOOLS": chain}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    calls, rank_calls = THREADS * n, THREADS * n * RANK_CALLS + 1 + 2  # + main thread's, + each copy's own
    expected = {
        "MPI_Init_thread": 1,
        "MPI_Comm_rank": rank_calls,
        "MPI_Comm_size": 1,
        "MPI_Send": calls,
        "MPI_Recv": calls,
        "MPI_Pcontrol": calls + 1,
        "MPI_Finalize": 1,
        "pcontrol_level": 2,
    }
    for r in (0, 1):
        assert f"app rank {r}: threads {THREADS} iterations {n} rank_calls {RANK_CALLS} errors 0" in proc.stdout
        assert pmpi_reports(proc.stdout)[r] == [expected, expected]
        assert counter_reports(proc.stderr)[(2, r)] == counter_view(expected)


def test_unmodified_application_with_the_core_preloaded(mpi, core, pmpi):
    proc = mpi.run(
        2,
        [pmpi["plain_app"]],
        env={"LD_PRELOAD": str(core / "libqmpi.so"), "TOOLS": f"{pmpi['count']}:{pmpi['count']}"},
    )
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == expected_app(2)
    assert all(reports == [demo_counts(2)] * 2 for reports in pmpi_reports(proc.stdout).values())


def test_symbolic_pmpi_tool_runs_with_a_warning(mpi, demo_app, sample_tools, pmpi):
    """-Bsymbolic: its own MPI_Comm_rank stays inside it, so the counter above misses it."""
    chain = f"{sample_tools / 'libcounter.so'}:{pmpi['symbolic']}"
    proc = mpi.run(2, [demo_app], env={"TOOLS": chain})
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "qmpi: warning:" in line]
    assert len(warnings) == 1 and f"level 2 ({pmpi['symbolic']}): a PMPI tool linked with -Bsymbolic" in warnings[0]
    for r in range(2):
        assert pmpi_reports(proc.stdout)[r] == [demo_counts(1)]
        assert counter_reports(proc.stderr)[(1, r)]["MPI_Comm_rank"] == 1


# -- refusals: one line, the job stops ---------------------------------------------------------


def assert_refused(proc, *fragments):
    assert proc.returncode != 0
    errors = qmpi_errors(proc.stderr)
    assert errors, proc.stderr
    assert all(f in errors[0] for f in fragments), errors[0]


def run_refused(mpi, app, tools):
    return mpi.run(2, [app], env={"TOOLS": tools}, timeout=ERROR_TIMEOUT_S)


def test_refuses_a_file_that_is_not_elf(mpi, demo_app, tmp_path):
    junk = tmp_path / "libjunk.so"
    junk.write_text("not an ELF file\n")
    assert_refused(run_refused(mpi, demo_app, str(junk)), f"TOOLS entry 1 ({junk}): cannot load: not an ELF file")


def test_refuses_an_object_file_and_an_executable(mpi, demo_app, pmpi):
    assert_refused(run_refused(mpi, demo_app, str(pmpi["object"])), "an object file, not a shared object")
    assert_refused(run_refused(mpi, demo_app, str(demo_app)), "executable, not a shared object")


def test_refuses_a_pmpi_tool_built_for_another_mpi(mpi, demo_app, tmp_path):
    other = next((m for m in MPIS if m.family != mpi.family), None)
    if other is None:
        pytest.skip("needs a second MPI")
    lib = other.compile([PMPI_TOOLS / "pmpicount.c"], tmp_path / "libother.so", ["-shared", "-fPIC"])
    assert_refused(
        run_refused(mpi, demo_app, str(lib)), f"({lib}): built for another MPI", "rebuild it with this MPI's mpicc"
    )


def test_refuses_a_library_that_is_neither_kind_of_tool(mpi, demo_app, test_tools):
    lib = test_tools / "libno_interceptions.so"
    assert_refused(
        run_refused(mpi, demo_app, str(lib)),
        "neither a QMPI tool (it has no get_interceptions function) nor a PMPI tool",
    )


def mpi_library(app) -> str:
    """The MPI library an application loads (libmpi.so.N, or Debian's MPICH libmpich.so.N)."""
    ldd = subprocess.run(["ldd", str(app)], capture_output=True, text=True, check=True).stdout
    return re.search(r"^\s*lib(?:mpi|mpich)\.so\S* => (\S+)", ldd, re.M).group(1)


def test_refuses_the_mpi_library_itself(mpi, demo_app):
    libmpi = mpi_library(demo_app)
    assert_refused(run_refused(mpi, demo_app, str(libmpi)), "an MPI library (it defines", "PMPI_ functions), not a tool")


def test_refuses_more_pmpi_instances_than_slots(mpi, demo_app, pmpi):
    proc = run_refused(mpi, demo_app, ":".join([str(pmpi["count"])] * 9))
    assert_refused(proc, "TOOLS entry 9", "as many as this core has slots")


def test_refuses_pmpi_tools_under_the_static_core(mpi, pmpi):
    assert_refused(run_refused(mpi, pmpi["static_app"], str(pmpi["count"])), "PMPI tools need libqmpi.so")
