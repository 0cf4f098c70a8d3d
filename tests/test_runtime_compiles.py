"""Each file of the core's fixed runtime (qmpigen/runtime) compiles on its own, warning
free (-Wall -Wextra -Werror), against the headers generated for every fixture mpi.h
and for the real MPIs; the files that need no MPI compile with no mpi.h at all.
`make test-c` runs this and the C unit tests (tests/c)."""

from __future__ import annotations

import subprocess

import pytest

from qmpigen.output.render import RUNTIME_SUBDIR
from qmpigen.output.resources import runtime_dir

from conftest import FIXTURES, qmpigen, run_cli

WARNINGS = ("-std=gnu99", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-Wno-deprecated-declarations")
# The fixture headers are declarations only; what the runtime uses besides the
# functions (constants, PMPI calls it makes itself) is added here, as
# tests/fixtures/compile_shim does for quirks_mpi.h.
SHIM = """#include "{header}"
#ifndef MPI_SUCCESS
#define MPI_SUCCESS 0
#endif
#ifndef MPI_ERR_ARG
#define MPI_ERR_ARG 12
#endif
#ifndef MPI_ERR_OTHER
#define MPI_ERR_OTHER 15
#endif
#ifndef MPI_ERR_NO_MEM
#define MPI_ERR_NO_MEM 34
#endif
#ifndef MPI_COMM_WORLD
#define MPI_COMM_WORLD ((MPI_Comm)(long)0x44000000)
#endif
#ifndef MPI_THREAD_SINGLE
#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3
#endif
int PMPI_Init(int *argc, char ***argv);
int PMPI_Initialized(int *flag);
int PMPI_Finalized(int *flag);
int PMPI_Abort(MPI_Comm comm, int errorcode);
int PMPI_Comm_rank(MPI_Comm comm, int *rank);
"""
FIXTURE_HEADERS = ("quirks_mpi.h", "mpich_like_mpi.h", "ompi_like_mpi.h", "tools_mpi.h", "fortran_mpi.h")
# The fixtures' own quirks, not the runtime's: GCC ignores clang's type-tag attributes
# (quirks_mpi.h), and tools_mpi.h has a "/*" inside a comment.
FIXTURE_ALLOWANCES = ("-Wno-attributes", "-Wno-comment")
WITHOUT_MPI = ("errors.c", "conf.c", "elf.c", "elf_copy.c")  # include qmpi_runtime.h alone


def runtime_sources():
    return sorted(p.name for p in runtime_dir().glob("*.c"))


def compile_all(jobs):
    """Runs the compilers side by side; returns the failures as text."""
    procs = [
        (name, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)) for name, cmd in jobs
    ]
    failures = []
    for name, proc in procs:
        out = proc.communicate()[0]
        if proc.returncode != 0:
            failures.append(f"== {name}\n{out}")
    return "\n".join(failures)


@pytest.mark.slow  # five cores' worth of compiles: make test-c and make test, not make test-fast
def test_every_runtime_file_compiles_alone_against_every_fixture_header(tmp_path):
    jobs = []
    for header in FIXTURE_HEADERS:
        core = tmp_path / header / "core"
        proc = run_cli("build-core", "--mpi-header", str(FIXTURES / header), "--mpicc", "cc", "-o", str(core))
        assert proc.returncode == 0, proc.stderr
        shim = tmp_path / header / "shim"
        shim.mkdir()
        (shim / "mpi.h").write_text(SHIM.format(header=FIXTURES / header))
        # One driver, one translation unit per file (cheaper than a driver per file).
        sources = [str(core / RUNTIME_SUBDIR / name) for name in runtime_sources()]
        jobs.append((header, ["cc", *WARNINGS, *FIXTURE_ALLOWANCES, f"-I{shim}", f"-I{core}", *sources]))
    assert not (failures := compile_all(jobs)), failures


def test_the_files_without_mpi_compile_with_no_mpi_header():
    jobs = [(name, ["cc", *WARNINGS, str(runtime_dir() / name)]) for name in WITHOUT_MPI]
    assert not (failures := compile_all(jobs)), failures
    for name in WITHOUT_MPI:
        text = (runtime_dir() / name).read_text()
        assert '#include "qmpi_runtime.h"' in text and "qmpi_internal.h" not in text and "mpi.h" not in text, name


@pytest.mark.mpi
def test_every_runtime_file_compiles_alone_with_the_mpis_own_driver(mpi, tmp_path):
    core = tmp_path / "core"
    proc = qmpigen("build-core", "--mpi-header", "auto", "--mpicc", mpi.mpicc, "-o", str(core), env=mpi.env())
    assert proc.returncode == 0, proc.stderr
    jobs = [
        (name, [mpi.mpicc, *WARNINGS, f"-I{core}", str(core / RUNTIME_SUBDIR / name)]) for name in runtime_sources()
    ]
    assert not (failures := compile_all(jobs)), failures
