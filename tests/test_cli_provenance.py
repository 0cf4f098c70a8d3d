"""Which MPI an output was generated for, said where a user on a machine with several
MPIs looks: the banner's regeneration command keeps the compiler driver as given, and
scaffold-tool names the MPI it read, as build-core does."""

from __future__ import annotations

import shutil

import pytest

from conftest import FIXTURES, needs_cc, run_cli

HEADER = FIXTURES / "mpich_like_mpi.h"

pytestmark = needs_cc


@pytest.fixture(scope="module")
def cc_path() -> str:
    path = shutil.which("cc")
    assert path is not None
    return path


def test_a_driver_given_by_path_stays_that_path_in_the_banner(tmp_path, cc_path):
    out = tmp_path / "core"
    proc = run_cli("build-core", "--mpi-header", str(HEADER), "--mpicc", cc_path, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    head = "\n".join((out / "Makefile").read_text().splitlines()[:8])
    assert f"qmpigen build-core --mpi-header mpich_like_mpi.h --mpicc {cc_path} -o core" in head


def test_scaffold_tool_names_the_mpi_it_read(tmp_path):
    spec = tmp_path / "demo.qmpi"
    spec.write_text("tool demo;\nintercept MPI_Send;\n")
    proc = run_cli(
        "scaffold-tool", str(spec), "--mpi-header", str(HEADER), "--mpicc", "cc", "-o", str(tmp_path / "out")
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("qmpigen: read MPICH "), proc.stderr
    assert f"from {HEADER}" in lines[0] and "functions, enumeration " in lines[0]
