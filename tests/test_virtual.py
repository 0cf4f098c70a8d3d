"""MPI virtualization (sample_tools/virtual.qmpi, PnMPI's `virtual` module):
the application sees the ranks the tool leaves it as MPI_COMM_WORLD — sizes, ranks,
statuses, point-to-point and collectives consistent (tests/apps/virtual_app.c checks
them itself) — while the reserved ranks serve the tool and never enter the application."""

from __future__ import annotations

import re

import pytest

from conftest import APPS, Mpi, qmpi_errors

pytestmark = pytest.mark.mpi

RANKS = 4


@pytest.fixture(scope="session")
def virtual_app(mpi: Mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"virtual-{mpi.name}")
    return mpi.build_app(APPS / "virtual_app.c", core, out / "virtual_app")


def app_calls(rank: int, size: int) -> int:
    """MPI calls virtual_app.c makes on `rank` of `size`, MPI_Init and MPI_Finalize
    included: what the tool's server must add up."""
    common = 13  # Init, Comm_rank, Comm_size, Send, Recv, Bcast, Allreduce, Gather, Comm_group, Group_size, Group_free, Comm_compare, Finalize
    return common + (size - 1 if rank == 0 else 1)  # rank 0 receives from every other rank; they each send


def conf(tmp_path, sample_tools, reserve) -> str:
    """A configuration file giving the tool its `reserve` argument."""
    path = tmp_path / "virtual.conf"
    path.write_text(
        f"# the last {reserve} ranks serve the tool\n[virtual]\ntool = {sample_tools / 'libvirtual.so'}\n"
        f"reserve = {reserve}\n"
    )
    return str(path)


@pytest.mark.parametrize("reserve", [None, 2])
def test_the_application_sees_only_its_own_ranks(mpi, virtual_app, sample_tools, reserve, tmp_path):
    """reserve: the default (1, from TOOLS), or 2 from a configuration file."""
    env = (
        {"TOOLS": str(sample_tools / "libvirtual.so")}
        if reserve is None
        else {"QMPI_CONF": conf(tmp_path, sample_tools, reserve)}
    )
    size = RANKS - (reserve or 1)
    proc = mpi.run(RANKS, [virtual_app, str(size)], env=env)
    assert proc.returncode == 0 and "FAIL" not in proc.stdout, f"{proc.stdout}\n{proc.stderr}"
    assert f"RESULT virtual size={size} sum={size * (size - 1) // 2}" in proc.stdout
    assert sorted(re.findall(r"^RANK (\d+) ok$", proc.stdout, re.M)) == [str(r) for r in range(size)]
    servers = re.findall(r"^virtual@1 server (\d+): (\d+) application ranks, (\d+) MPI calls$", proc.stdout, re.M)
    assert servers == [(str(size), str(size), str(sum(app_calls(r, size) for r in range(size))))], proc.stdout


def test_tools_above_see_the_world_and_tools_below_the_virtual_one(mpi, virtual_app, sample_tools):
    """counter:virtual:counter — both counters count the application's calls on its ranks;
    the inner one also sees the server's own MPI_Finalize (it finalizes through the chain)."""
    chain = ":".join(str(sample_tools / f"lib{n}.so") for n in ("counter", "virtual", "counter"))
    proc = mpi.run(RANKS, [virtual_app, str(RANKS - 1)], env={"TOOLS": chain})
    assert proc.returncode == 0 and "FAIL" not in proc.stdout, f"{proc.stdout}\n{proc.stderr}"
    reports = {(int(level), int(r)) for level, r in re.findall(r"counter@(\d+) rank (\d+):", proc.stderr, re.M)}
    assert reports == {(1, r) for r in range(RANKS - 1)} | {(3, r) for r in range(RANKS)}, proc.stdout


def test_a_reserve_that_leaves_no_application_rank_stops_the_job(mpi, virtual_app, sample_tools, tmp_path):
    """One line naming the file, line and argument (the core's argument error), on each rank."""
    path = conf(tmp_path, sample_tools, 2)
    proc = mpi.run(2, [virtual_app, "1"], env={"QMPI_CONF": path})
    assert proc.returncode != 0
    assert set(qmpi_errors(proc.stderr)) == {
        f"qmpi: error: {path}:4: [virtual] reserve = 2: needs a whole number from 1 to 1 (MPI_COMM_WORLD has 2 ranks)"
    }, proc.stderr
    assert "RANK" not in proc.stdout


def test_the_default_reserve_needs_two_ranks(mpi, virtual_app, sample_tools):
    proc = mpi.run(1, [virtual_app, "0"], env={"TOOLS": str(sample_tools / "libvirtual.so")})
    assert proc.returncode != 0
    assert "virtual: reserve = 1: needs a whole number from 1 to 0 (MPI_COMM_WORLD has 1 ranks)" in proc.stderr
