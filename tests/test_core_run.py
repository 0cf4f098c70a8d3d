"""The generated core on real MPIs: built with mpicc, run with mpiexec at 2-4 ranks.

Reproduces the thesis's tests (section 4.5) and the behaviour the core promises:
zero tools, stacked tools in order, TBcast with two counter instances, Pcontrol
fan-out, exact non-int returns, init/finalize queries, LD_PRELOAD, 1,000 tools.
"""

from __future__ import annotations

import re

import pytest

from conftest import APPS, SAMPLE_TOOLS

pytestmark = pytest.mark.mpi


def app_lines(stdout: str):
    return sorted(line for line in stdout.splitlines() if line.startswith("app rank"))


def test_zero_tools_runs_the_application_unchanged(mpi, demo_app):
    proc = mpi.run(2, [demo_app])
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == [
        "app rank 0 of 2: data 11 22 33 2 wtime_ok 1",
        "app rank 1 of 2: data 11 22 33 2 wtime_ok 1",
    ]


def test_one_printer_sees_pre_and_post_of_every_intercepted_call(mpi, demo_app, sample_tools):
    proc = mpi.run(1, [demo_app], env={"TOOLS": str(sample_tools / "libprinter.so")})
    assert proc.returncode == 0, proc.stderr
    events = [line for line in proc.stdout.splitlines() if line.startswith("printer@")]
    assert events[:2] == ["printer@1 pre MPI_Init", "printer@1 post MPI_Init"]
    assert "printer@1 MPI_Pcontrol level 2" in events
    assert events[-2:] == ["printer@1 pre MPI_Finalize", "printer@1 post MPI_Finalize"]


def test_three_stacked_tools_nest_in_chain_order(mpi, demo_app, sample_tools):
    lib = str(sample_tools / "libprinter.so")
    proc = mpi.run(1, [demo_app], env={"TOOLS": f"{lib}:{lib}:{lib}"})
    assert proc.returncode == 0, proc.stderr
    events = [line for line in proc.stdout.splitlines() if "MPI_Bcast" in line]
    assert events == [
        "printer@1 pre MPI_Bcast",
        "printer@2 pre MPI_Bcast",
        "printer@3 pre MPI_Bcast",
        "printer@3 post MPI_Bcast",
        "printer@2 post MPI_Bcast",
        "printer@1 post MPI_Bcast",
    ]
    # Pcontrol reaches every tool, in chain order, each at its own level.
    assert [line for line in proc.stdout.splitlines() if "Pcontrol" in line] == [
        f"printer@{k} MPI_Pcontrol level 2" for k in (1, 2, 3)
    ]


def counter_reports(stdout: str):
    """{(level, rank): {function: count}} from the counter's report lines."""
    reports = {}
    for match in re.finditer(r"counter@(\d+) rank (\d+):(.*)$", stdout, re.M):
        counts = dict(item.split("=") for item in match.group(3).split())
        reports[(int(match.group(1)), int(match.group(2)))] = {k: int(v) for k, v in counts.items()}
    return reports


def test_tbcast_between_two_counters_gives_two_different_reports(mpi, demo_app, sample_tools):
    """Thesis 4.5.3: the outer instance sees MPI_Bcast; the inner one sees the Send/Recv
    that TBcast issued instead, and no Bcast. One library, two contexts."""
    counter, tbcast = sample_tools / "libcounter.so", sample_tools / "libtbcast.so"
    ranks = 3
    proc = mpi.run(ranks, [demo_app], env={"TOOLS": f"{counter}:{tbcast}:{counter}"})
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == [f"app rank {r} of 3: data 11 22 33 3 wtime_ok 1" for r in range(ranks)]
    reports = counter_reports(proc.stderr)
    assert set(reports) == {(level, r) for level in (1, 3) for r in range(ranks)}
    for r in range(ranks):
        outer, inner = reports[(1, r)], reports[(3, r)]
        assert outer.get("MPI_Bcast") == 1 and "MPI_Send" not in outer and "MPI_Recv" not in outer
        assert "MPI_Bcast" not in inner
        if r == 0:
            assert inner.get("MPI_Send") == ranks - 1 and "MPI_Recv" not in inner
        else:
            assert inner.get("MPI_Recv") == 1 and "MPI_Send" not in inner


def test_unmodified_application_under_ld_preload(mpi, core, sample_tools, tmp_path):
    app = mpi.build_app(SAMPLE_TOOLS / "demo_app.c", None, tmp_path / "plain_app")
    lib = sample_tools / "libprinter.so"
    proc = mpi.run(2, [app], env={"LD_PRELOAD": str(core / "libqmpi.so"), "TOOLS": str(lib)})
    assert proc.returncode == 0, proc.stderr
    assert len(app_lines(proc.stdout)) == 2
    assert proc.stdout.count("printer@1 pre MPI_Bcast") == 2


@pytest.fixture(scope="session")
def lifecycle_app(mpi, core, tmp_path_factory):
    return mpi.build_app(APPS / "lifecycle_app.c", core, tmp_path_factory.mktemp(f"lc-{mpi.name}") / "lifecycle_app")


def test_pcontrol_level_and_varargs_reach_every_tool_in_chain_order(mpi, lifecycle_app, test_tools):
    lib = test_tools / "libpcontrol_args.so"
    expected = [f"pcontrol@{k} level 5 args 42 hello" for k in (1, 2, 3)]
    expected += [f"pcontrol@{k} level 0" for k in (1, 2, 3)]
    # One rank: one ordered stream, so chain order is visible.
    proc = mpi.run(1, [lifecycle_app], env={"TOOLS": f"{lib}:{lib}:{lib}"})
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("pcontrol@")] == expected
    # Two ranks: every rank's tools get everything.
    proc = mpi.run(2, [lifecycle_app], env={"TOOLS": f"{lib}:{lib}:{lib}"})
    assert proc.returncode == 0, proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("pcontrol@")) == sorted(expected * 2)


def test_wtime_is_an_exact_double_through_three_tools(mpi, lifecycle_app, test_tools):
    """relay uses exec_func_r, then a second relay instance, then fake_clock answers."""
    relay, clock = test_tools / "librelay.so", test_tools / "libfake_clock.so"
    proc = mpi.run(2, [lifecycle_app], env={"TOOLS": f"{relay}:{relay}:{clock}"})
    assert proc.returncode == 0, proc.stderr
    expected = (1.0 / 3.0 + 1e6).hex()
    values = re.findall(r"wtime (\S+)", proc.stdout)
    assert len(values) == 2
    assert all(float.fromhex(v) == float.fromhex(expected) for v in values), values


def test_initialized_before_init_and_finalized_after_finalize(mpi, lifecycle_app, test_tools):
    relay = test_tools / "librelay.so"
    proc = mpi.run(2, [lifecycle_app], env={"TOOLS": f"{relay}:{relay}"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("initialized before init 0") == 2
    assert out.count("finalized after finalize 1") == 2
    # The chain was built by MPI_Initialized (the first call) and is intact after
    # MPI_Finalize: both instances saw both calls on both ranks.
    for level in (1, 2):
        assert out.count(f"relay@{level} MPI_Initialized") == 2
        assert out.count(f"relay@{level} MPI_Finalized") == 2


def test_one_thousand_stacked_tools(mpi, demo_app, test_tools):
    lib = str(test_tools / "libpassthrough.so")
    proc = mpi.run(2, [demo_app], env={"TOOLS": ":".join([lib] * 1000)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == [
        "app rank 0 of 2: data 11 22 33 2 wtime_ok 1",
        "app rank 1 of 2: data 11 22 33 2 wtime_ok 1",
    ]


def test_static_libqmpi_works_too(mpi, core, sample_tools, tmp_path):
    """Tools need no symbol from the core at link time, so libqmpi.a serves as well."""
    app = mpi.compile(
        [SAMPLE_TOOLS / "demo_app.c"], tmp_path / "static_app", ["-O2", f"{core}/libqmpi.a", "-ldl", "-pthread"]
    )
    lib = sample_tools / "libprinter.so"
    proc = mpi.run(2, [app], env={"TOOLS": f"{lib}:{lib}"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("printer@2 post MPI_Bcast") == 2
