"""Stacked tools under MPI_THREAD_MULTIPLE: tests/apps/thread_stress.c on 2
ranks, 4 threads each, racing the first MPI calls (chain build, context creation),
MPI_Pcontrol, MPI_Comm_rank and Send/Recv through a stack of every kind of tool:

  TOOLS=counter:profiler:tally:counter QMPI_TOOL_LIST=counter:cbcount

counter and profiler are the spec-generated samples (thesis interface; counter once
more generated for the callback interface), tally a hand-written thesis tool
(tests/tools/tally.c), cbcount a hand-written callback tool. Every instance must count
exactly, run after run. `make test-threads` repeats it more and adds a ThreadSanitizer
build of core, tools and app (QMPIGEN_TSAN=1) that must report nothing in our code.
"""

from __future__ import annotations

import os
import re

import pytest

from conftest import APPS, SAMPLE_TOOLS, TEST_TOOLS, make, qmpigen

pytestmark = pytest.mark.mpi

THREADS, RANK_CALLS = 4, 8  # as in thread_stress.c
REPEAT = int(os.environ.get("QMPIGEN_THREAD_REPEAT", "2"))
TSAN = os.environ.get("QMPIGEN_TSAN") == "1"
TSAN_FLAGS = "-O1 -g -fsanitize=thread"
# Both wheels ship UCX, whose memory hooks crash under TSan; Open MPI's PMIx shared
# memory wants a fixed address TSan's layout does not give. Reports go to one file per
# process (log_path), as the ranks' stderr would interleave them.
TSAN_ENV = {"UCX_MEM_EVENTS": "no", "PMIX_MCA_gds": "hash"}
CALLBACK_TOOLS = APPS.parent / "callback_tools"
# Modules of the core and the tools: a TSan report whose racing access is in one of
# them is ours. Reports inside the MPI library (whose lock-free shared memory and
# atomics TSan cannot see) are not, nor the app's reads of its receive buffers, which
# Open MPI fills from whichever thread drives its progress.
OURS = re.compile(r"\((libqmpi|libcounter|libprofiler|libtally|libcbcount)\.so[.\d]*\+")
# The parts of a report that name a racing access or a lock taken (not the ones that
# say where a thread was created or memory allocated).
ACCESS = re.compile(r"(Read|Write|Atomic|Previous|Mutex) ")


def iterations(mpi) -> int:
    # Open MPI 5's progress with 4 threads blocked in MPI_Recv on 2 shared cores takes
    # ~10 ms a round; MPICH's a few microseconds.
    default = 200 if mpi.family == "openmpi" else 5000
    return int(os.environ.get("QMPIGEN_THREAD_ITERATIONS", default))


def build_stack(mpi, core, out, cflags=None, sample_tools=None):
    """Every tool of the stack and the app, against `core`: {"tools": {name: path}, "app": path}.
    counter and profiler come from `sample_tools` (the session's sample tools: same core,
    same flags) when given, else they are built into `out` with `cflags`."""
    flags = [f"CFLAGS={cflags}", "LDFLAGS=-fsanitize=thread"] if cflags else []
    cc = cflags.split() if cflags else ["-O2"]
    if sample_tools is None:
        sample_tools = out
        make(
            SAMPLE_TOOLS,
            f"CORE={core}",
            f"OUT={out}",
            f"MPICC={mpi.mpicc}",
            *flags,
            *(str(out / f"lib{name}.so") for name in ("counter", "profiler")),
            env=mpi.env(),
        )
    tools = {name: sample_tools / f"lib{name}.so" for name in ("counter", "profiler")}
    tools["tally"] = mpi.compile(
        [TEST_TOOLS / "tally.c"],
        out / "libtally.so",
        ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", *cc, f"-I{core}"],
    )
    include = [] if mpi.family == "mpich" else ["-D_GNU_SOURCE", "-include", str(core / "qmpi.h")]
    mpi.compile(
        [CALLBACK_TOOLS / "cbcount.c"],
        out / "libcbcount.so",
        ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", *cc, *include],
    )
    callback = out / "callback"
    proc = qmpigen(
        "scaffold-tool",
        str(SAMPLE_TOOLS / "counter.qmpi"),
        "--interface",
        "callback",
        "--mpi-header",
        "auto",
        "--mpicc",
        mpi.mpicc,
        "-o",
        str(callback),
        env=mpi.env(),
    )
    assert proc.returncode == 0, proc.stderr
    make(callback, f"QMPI_CORE={core}", f"MPICC={mpi.mpicc}", *flags, env=mpi.env())
    linked = [
        "-pthread",
        "-rdynamic",
        "-Wl,--no-as-needed",
        str(out / "libcbcount.so"),
        str(callback / "libcounter.so"),
        f"-Wl,-rpath,{out}:{callback}",
        "-Wl,--as-needed",
        *(cflags.split() if cflags else []),
    ]
    app = mpi.build_app(APPS / "thread_stress.c", core, out / "thread_stress", linked)
    return {"tools": tools, "app": app}


def run_stack(mpi, stack, n, env=None):
    tools = stack["tools"]
    chain = ":".join(str(tools[name]) for name in ("counter", "profiler", "tally", "counter"))
    return mpi.run(
        2, [stack["app"], str(n)], env={"TOOLS": chain, "QMPI_TOOL_LIST": "counter:cbcount", **(env or {})}, timeout=600
    )


def check_counts(proc, n):
    """The tools' reports: the counter's on stderr, the others' on stdout."""
    stdout, stderr = proc.stdout, proc.stderr
    reports = [line[line.index("counter@") :] for line in stderr.splitlines() if "counter@" in line]
    calls, rank_calls = THREADS * n, THREADS * n * RANK_CALLS + 1  # + the main thread's last one
    for rank in (0, 1):
        assert f"app rank {rank}: threads {THREADS} iterations {n} rank_calls {RANK_CALLS} errors 0" in stdout, stdout
        counter = (
            f"rank {rank}: MPI_Comm_rank={rank_calls} MPI_Comm_size=1 MPI_Finalize=1 MPI_Init_thread=1 "
            f"MPI_Recv={calls} MPI_Send={calls}"
        )
        for level in (1, 4, 5):  # thesis, thesis, callback
            assert f"counter@{level} {counter}" in reports, stderr
        assert (
            f"tally@3 rank {rank}: initialized={THREADS} comm_rank={rank_calls} send={calls} recv={calls} "
            f"pcontrol={calls + 1}"
        ) in stdout.splitlines()
        assert re.search(rf"^cbcount@6 rank {rank}: bcast=0 send={calls} recv={calls} site=- pcontrol=2,", stdout, re.M)
        table = {
            m[0]: (int(m[1]), int(m[2]))
            for m in re.findall(rf"^profiler@2 rank {rank}:   (MPI_\w+) +(\d+) +[\d.]+ +(\d+)$", stdout, re.M)
        }
        assert table == {
            "MPI_Initialized": (THREADS, 0),
            "MPI_Init_thread": (1, 0),
            "MPI_Comm_size": (1, 0),
            "MPI_Comm_rank": (rank_calls, 0),
            "MPI_Pcontrol": (calls + 1, 0),
            "MPI_Send": (calls, 4 * calls),
            "MPI_Recv": (calls, 4 * calls),
        }
        assert re.search(rf"^profiler@2 rank {rank}: .* pcontrol level 2$", stdout, re.M)


@pytest.fixture(scope="session")
def stack(mpi, core, sample_tools, tmp_path_factory):
    return build_stack(mpi, core, tmp_path_factory.mktemp(f"threads-{mpi.name}"), sample_tools=sample_tools)


@pytest.mark.parametrize("run", range(REPEAT))
def test_every_kind_of_tool_counts_exactly_under_thread_multiple(mpi, stack, run):
    n = iterations(mpi)
    proc = run_stack(mpi, stack, n)
    assert proc.returncode == 0, proc.stderr
    check_counts(proc, n)


def our_reports(stderr):
    """TSan reports whose racing accesses (or locks) are in our code, not in the MPI."""
    found = []
    for report in stderr.split("WARNING: ThreadSanitizer:")[1:]:
        report = report.split("SUMMARY: ThreadSanitizer")[0]
        for section in re.split(r"\n  (?=\S)", report):
            if not ACCESS.match(section):
                continue
            frames = [line for line in section.splitlines() if re.match(r"\s+#\d+ ", line) and "libtsan.so" not in line]
            if frames and OURS.search(frames[0]):
                found.append("WARNING: ThreadSanitizer:" + report)
                break
    return found


@pytest.mark.skipif(not TSAN, reason="ThreadSanitizer build: make test-threads (QMPIGEN_TSAN=1)")
def test_thread_sanitizer_reports_nothing_in_core_or_tools(mpi, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"tsan-{mpi.name}")
    proc = qmpigen("build-core", "--mpi-header", "auto", "--mpicc", mpi.mpicc, "-o", str(out / "core"), env=mpi.env())
    assert proc.returncode == 0, proc.stderr
    make(out / "core", f"MPICC={mpi.mpicc}", f"CFLAGS={TSAN_FLAGS}", "LDFLAGS=-fsanitize=thread", env=mpi.env())
    stack = build_stack(mpi, out / "core", out, TSAN_FLAGS)
    n = min(iterations(mpi), 200)  # TSan is slow; every racing pair shows up in the first rounds
    logs = out / "tsan-logs"
    logs.mkdir()
    proc = run_stack(mpi, stack, n, {**TSAN_ENV, "TSAN_OPTIONS": f"exitcode=0 log_path={logs}/tsan"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    check_counts(proc, n)
    ours = [r for log in sorted(logs.iterdir()) for r in our_reports(log.read_text())]
    assert not ours, f"{len(ours)} ThreadSanitizer reports in core or tool code; the first:\n{ours[0]}"
