"""Fortran programs through the core's generated Fortran entries, on the MPIs
that have Fortran bindings (Debian's MPICH 4.0.2 and Open MPI 4.1.4: `make test-fortran`,
also part of `make test-debian`). The wheels have none: these tests skip there.

The programs (tests/apps/fortran/: `use mpi`, `include 'mpif.h'`, `use mpi_f08`) check
their own results and print a checksum per rank; expected_calls.txt holds the calls
each rank makes. Tools must see exactly those calls, with real C arguments (cbargs
checks communicators, counts, tags, MPI_IN_PLACE, MPI_STATUS_IGNORE), and the output
must be the same with and without tools."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

from conftest import APPS, RUN_TIMEOUT_S, Mpi, make, qmpigen

pytestmark = [pytest.mark.mpi, pytest.mark.fortran]

FORTRAN_APPS = APPS / "fortran"
PROGRAMS = ("use_mpi", "mpif_h", "use_mpi_f08")
# use mpi and include 'mpif.h' are one source, preprocessed (gfortran does for .F90).
SOURCES = {
    "use_mpi": ("use_mpi.F90", ()),
    "mpif_h": ("use_mpi.F90", ("-DMPIF_H",)),
    "use_mpi_f08": ("use_mpi_f08.f90", ()),
}
CALLBACK_TOOLS = APPS.parent / "callback_tools"
RANKS = 3
# What the sample counter (sample_tools/counter.qmpi) intercepts.
COUNTER_FUNCTIONS = {
    "MPI_Init",
    "MPI_Init_thread",
    "MPI_Comm_rank",
    "MPI_Comm_size",
    "MPI_Send",
    "MPI_Recv",
    "MPI_Bcast",
    "MPI_Barrier",
    "MPI_Allreduce",
    "MPI_Finalize",
}


def expected_calls(init: str) -> Dict[str, int]:
    calls = {}
    for line in (FORTRAN_APPS / "expected_calls.txt").read_text().splitlines():
        name, count = line.split()
        calls[name] = int(count)
    if init == "thread":
        del calls["MPI_Init"]
        calls["MPI_Init_thread"] = 1
    return calls


@pytest.fixture(scope="session")
def fortran_mpi(mpi: Mpi, core: Path) -> Mpi:
    if mpi.mpif90 is None:
        # make test-debian / test-fortran install gfortran: a Debian MPI without it there is a failure.
        if os.environ.get("QMPIGEN_REQUIRE_FORTRAN") and mpi.name.startswith("debian-"):
            pytest.fail(f"{mpi.name}: no working Fortran driver (mpif90{mpi.suffix} and gfortran)")
        pytest.skip(f"{mpi.name} has no Fortran driver (the PyPI wheels ship no Fortran bindings)")
    assert (core / "qmpi_fortran.c").exists(), "build-core generated no Fortran entries for an MPI with mpif90"
    return mpi


def fortran_build(mpi: Mpi, source: Path, output: Path, core: Optional[Path], flags: Sequence[str] = ()) -> Path:
    # --as-needed spelled out: the program references only Fortran names, so the core
    # must be the library that defines them, or the linker drops it.
    link = ["-Wl,--as-needed", f"-L{core}", "-lqmpi", f"-Wl,-rpath,{core}"] if core else []
    cmd = [mpi.mpif90, "-O2", *mpi.fortran_flags, *flags, str(source), "-o", str(output), *link]
    # In the output's directory: gfortran writes the modules a program defines (.mod) there.
    proc = subprocess.run(cmd, capture_output=True, text=True, env=mpi.env(), timeout=RUN_TIMEOUT_S, cwd=output.parent)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    return output


@pytest.fixture(scope="session")
def fortran_apps(fortran_mpi: Mpi, core: Path, tmp_path_factory) -> Dict[str, Path]:
    """Each program linked with -lqmpi, and use_mpi without it (for LD_PRELOAD)."""
    out = tmp_path_factory.mktemp(f"fortran-{fortran_mpi.name}")
    apps = {
        name: fortran_build(fortran_mpi, FORTRAN_APPS / SOURCES[name][0], out / name, core, SOURCES[name][1])
        for name in PROGRAMS
        if not (name.endswith("_f08") and fortran_mpi.no_mpi_f08)
    }
    apps["use_mpi_plain"] = fortran_build(fortran_mpi, FORTRAN_APPS / "use_mpi.F90", out / "use_mpi_plain", None)
    return apps


@pytest.fixture(scope="session")
def cbargs(fortran_mpi: Mpi, core: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp(f"cbargs-{fortran_mpi.name}")
    flags = ["-D_GNU_SOURCE", "-include", str(core / "qmpi.h")]
    return fortran_mpi.compile(
        [CALLBACK_TOOLS / "cbargs.c"], out / "libcbargs.so", ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", *flags]
    )


def skip_without_mpi_f08(mpi: Mpi, program: str) -> None:
    if program.endswith("_f08") and mpi.no_mpi_f08:
        pytest.skip(f"{mpi.name}: {mpi.no_mpi_f08}")


def app_of(mpi: Mpi, apps: Dict[str, Path], program: str) -> Path:
    skip_without_mpi_f08(mpi, program)
    return apps[program]


def results(stdout: str) -> List[str]:
    """The program's own lines (checksums), in rank order: what tools must not change."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip().startswith(("RESULT ", "RANK "))]
    return sorted(lines)


def reports(stdout: str, tool: str) -> Dict[tuple, Dict[str, int]]:
    """{(level, rank): {function: count}} from a counter's or cbargs' final lines."""
    found = {}
    for m in re.finditer(rf"{tool}@(\d+) rank (\d+):([^\n]*)", stdout):
        found[(int(m.group(1)), int(m.group(2)))] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(3))}
    return found


def run_ok(mpi: Mpi, app: Path, init: str, env: Optional[Dict[str, str]] = None):
    proc = mpi.run(RANKS, [app, init] if init else [app], env=env)
    assert proc.returncode == 0 and "FAIL" not in proc.stdout, f"{proc.stdout}\n{proc.stderr}"
    assert len(results(proc.stdout)) == RANKS + 1, proc.stdout
    return proc


@pytest.mark.parametrize("init", ["", "thread"])
@pytest.mark.parametrize("program", PROGRAMS)
def test_counter_tbcast_counter_sees_every_fortran_call_once(fortran_mpi, fortran_apps, sample_tools, program, init):
    """Outer counter: exactly the program's calls. TBcast below the Fortran MPI_Bcast
    turns it into Send/Recv that only the inner counter sees. Results unchanged."""
    app = app_of(fortran_mpi, fortran_apps, program)
    baseline = results(run_ok(fortran_mpi, app, init).stdout)
    chain = ":".join(str(sample_tools / f"lib{t}.so") for t in ("counter", "tbcast", "counter"))
    proc = run_ok(fortran_mpi, app, init, {"TOOLS": chain})
    assert results(proc.stdout) == baseline
    counted = reports(proc.stderr, "counter")  # the counter reports on stderr
    assert sorted(counted) == [(level, rank) for level in (1, 3) for rank in range(RANKS)], proc.stderr
    want = {k: v for k, v in expected_calls(init).items() if k in COUNTER_FUNCTIONS}
    extra: Counter = Counter()
    for rank in range(RANKS):
        outer, inner = counted[(1, rank)], counted[(3, rank)]
        assert outer == want, f"rank {rank}: {outer}"
        assert "MPI_Bcast" not in inner
        for name in ("MPI_Send", "MPI_Recv"):
            extra[name] += inner.get(name, 0) - outer[name]
    # TBcast's Bcast of the root's data: one message to each other rank.
    assert extra == {"MPI_Send": RANKS - 1, "MPI_Recv": RANKS - 1}


@pytest.mark.parametrize("init", ["", "thread"])
@pytest.mark.parametrize("program", PROGRAMS)
def test_callback_tool_sees_every_call_with_c_arguments(fortran_mpi, core, fortran_apps, cbargs, program, init):
    """cbargs (callback interface) counts every function and checks its C arguments
    (handles compare MPI_IDENT to MPI_COMM_WORLD, counts, tags, MPI_IN_PLACE,
    MPI_STATUS_IGNORE): no bad argument, every call once, results unchanged."""
    app = app_of(fortran_mpi, fortran_apps, program)
    baseline = results(run_ok(fortran_mpi, app, init).stdout)
    # The core preloaded too: mpiexec itself loads LD_PRELOAD, and the tool needs the core.
    proc = run_ok(fortran_mpi, app, init, {"LD_PRELOAD": f"{core / 'libqmpi.so'}:{cbargs}", "QMPI_TOOL_LIST": "cbargs"})
    assert results(proc.stdout) == baseline
    seen = reports(proc.stdout, "cbargs")
    assert sorted(seen) == [(1, rank) for rank in range(RANKS)], f"{proc.stdout}\n{proc.stderr}"
    for rank in range(RANKS):
        counts = dict(seen[(1, rank)])
        assert counts.pop("bad") == 0, proc.stderr
        assert counts == expected_calls(init), f"rank {rank}"


def test_ld_preload_without_linking_the_core(fortran_mpi, core, fortran_apps, cbargs):
    """A Fortran program built without -lqmpi, the core and a tool preloaded."""
    app = fortran_apps["use_mpi_plain"]
    env = {"LD_PRELOAD": f"{core / 'libqmpi.so'}:{cbargs}", "QMPI_TOOL_LIST": "cbargs:cbargs"}
    proc = run_ok(fortran_mpi, app, "", env)
    seen = reports(proc.stdout, "cbargs")
    assert sorted(seen) == [(level, rank) for level in (1, 2) for rank in range(RANKS)]
    for counts in seen.values():
        assert counts.pop("bad") == 0 and counts == expected_calls("")


EXTRAS = ("extras", "extras_f08")


@pytest.fixture(scope="session")
def fcount(fortran_mpi: Mpi, core: Path, tmp_path_factory) -> Path:
    """tests/apps/fortran/fcount.qmpi: counts every function, checks converted arrays and handlers."""
    out = tmp_path_factory.mktemp(f"fcount-{fortran_mpi.name}")
    proc = qmpigen(
        "scaffold-tool",
        str(FORTRAN_APPS / "fcount.qmpi"),
        "--mpicc",
        fortran_mpi.mpicc,
        "-o",
        str(out),
        env=fortran_mpi.env(),
    )
    assert proc.returncode == 0, proc.stderr
    make(out, f"QMPI_CORE={core}", f"MPICC={fortran_mpi.mpicc}", env=fortran_mpi.env())
    return out / "libfcount.so"


def calls_file(name: str) -> Dict[str, int]:
    return {line.split()[0]: int(line.split()[1]) for line in (FORTRAN_APPS / name).read_text().splitlines()}


@pytest.mark.parametrize("program", EXTRAS)
def test_implied_lengths_addresses_and_error_handlers(fortran_mpi, core, fcount, tmp_path, program):
    """MPI_Alltoallw / MPI_Neighbor_alltoallw (handle arrays as long as the communicator
    or its topology), MPI_UNWEIGHTED, MPI_Alloc_mem / MPI_Win_allocate (an address in
    INTEGER(KIND=MPI_ADDRESS_KIND) or TYPE(C_PTR)) and Fortran error handlers called
    through the core's C handler: results unchanged under two fcount instances, which
    see every call once with C datatypes and a C handler."""
    skip_without_mpi_f08(fortran_mpi, program)
    app = fortran_build(fortran_mpi, FORTRAN_APPS / f"{program}.f90", tmp_path / program, core)
    baseline = results(run_ok(fortran_mpi, app, "").stdout)
    proc = run_ok(fortran_mpi, app, "", {"TOOLS": f"{fcount}:{fcount}"})
    assert results(proc.stdout) == baseline
    seen = reports(proc.stdout, "fcount")
    assert sorted(seen) == [(level, rank) for level in (1, 2) for rank in range(RANKS)], proc.stdout
    for counts in seen.values():
        assert counts.pop("bad") == 0, proc.stdout
        assert counts == calls_file("extras_calls.txt")


def functions_json(mpi: Mpi) -> dict:
    proc = qmpigen("functions", "--mpicc", mpi.mpicc, "--json", env=mpi.env())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["fortran"]


def test_functions_reports_fortran_routes_and_coverage(fortran_mpi):
    fortran = functions_json(fortran_mpi)
    routes = fortran["functions"]
    assert routes["MPI_Send"]["f77"]["route"] == "chain" and routes["MPI_Send"]["reason"] is None
    assert {"mpi_send_", "MPI_SEND"} <= set(routes["MPI_Send"]["f77"]["symbols"])
    # A user callback stays with the MPI's binding, and says why.
    assert routes["MPI_Op_create"]["f77"]["route"] != "chain"
    assert "callback" in routes["MPI_Op_create"]["reason"]
    f77 = fortran["coverage"]["f77"]
    assert f77["core_entries"] / f77["functions"] >= 0.95, f77  # the coverage target, both Debian MPIs
    # Routed although the argument is no plain conversion: implied array lengths,
    # addresses in INTEGER(KIND=MPI_ADDRESS_KIND), Fortran error handlers.
    for name in (
        "MPI_Alltoallw",
        "MPI_Neighbor_alltoallw",
        "MPI_Alloc_mem",
        "MPI_Win_allocate",
        "MPI_Comm_create_errhandler",
    ):
        assert routes[name]["f77"]["route"] == "chain", (name, routes[name])
    text = qmpigen("functions", "--mpicc", fortran_mpi.mpicc, env=fortran_mpi.env()).stdout
    assert re.search(r"^# mpif.h / use mpi: \d+/\d+ \([\d.]+ %\) through core entries", text, re.M)
    assert re.search(r"^MPI_Op_create +f77: .*# \w+: a user callback", text, re.M)


def test_fortran_none_generates_no_fortran_entries(fortran_mpi, tmp_path):
    proc = qmpigen(
        "build-core",
        "--mpicc",
        fortran_mpi.mpicc,
        "--fortran",
        "none",
        "-o",
        str(tmp_path / "c"),
        env=fortran_mpi.env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "c" / "qmpi_fortran.c").exists()
    assert "Fortran entries: none, turned off (--fortran none)" in proc.stderr


def test_a_fortran_driver_that_does_not_exist_is_one_line(fortran_mpi, tmp_path):
    proc = qmpigen(
        "build-core",
        "--mpicc",
        fortran_mpi.mpicc,
        "--fortran",
        "/no/such/mpif90",
        "-o",
        str(tmp_path / "c"),
        env=fortran_mpi.env(),
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("qmpigen: error: Fortran compiler driver '/no/such/mpif90' not found")
    assert not (tmp_path / "c").exists()
