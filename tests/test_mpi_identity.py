"""Which MPI a header is, and the preprocessor condition qmpi.h uses to refuse any other:
unit tests on small headers (plain cc). The compile-and-refuse tests with real mpiccs
are in test_mpi_mismatch.py."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from qmpigen.mpi.header import HeaderRequest, read_header
from qmpigen.mpi.parse import parse_header

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")

BODY = "typedef int MPI_Comm;\nint MPI_Barrier(MPI_Comm c);\n"
MPICH = '#define MPI_VERSION 5\n#define MPI_SUBVERSION 0\n#define MPICH_VERSION "5.0.2"\n#define MPICH_NUMVERSION 50002300\n'
# What MPICH's mpicc_abi gives: mpi_abi.h, none of MPICH's own macros.
ABI = "#define MPI_VERSION 5\n#define MPI_SUBVERSION 0\n#define MPI_ABI_VERSION 1\n#define MPI_ABI_SUBVERSION 0\n"
OPEN_MPI = (
    "#define MPI_VERSION 3\n#define MPI_SUBVERSION 1\n"
    "#define OMPI_MAJOR_VERSION 5\n#define OMPI_MINOR_VERSION 0\n#define OMPI_RELEASE_VERSION 11\n"
)


def facts(tmp_path, macros: str):
    header = tmp_path / "mpi.h"
    header.write_text(macros + BODY)
    return parse_header(read_header(HeaderRequest(str(header), "cc"))).facts


def test_the_standard_abi_is_named(tmp_path):
    """MPICH's standard-ABI mode read as implementation 'unknown' before."""
    abi = facts(tmp_path, ABI)
    assert (abi.implementation, abi.version) == ("MPI ABI", "1.0")
    assert (abi.mpi_version, abi.mpi_subversion) == (5, 0)


def test_identity_pins_the_release_and_excludes_other_implementations(tmp_path):
    assert facts(tmp_path, MPICH).identity_clauses == (
        "defined(MPI_VERSION) && MPI_VERSION == 5",
        "defined(MPI_SUBVERSION) && MPI_SUBVERSION == 0",
        "defined(MPICH_NUMVERSION) && MPICH_NUMVERSION == 50002300",
        "!defined(MPI_ABI_VERSION)",
        "!defined(I_MPI_VERSION)",
        "!defined(OMPI_MAJOR_VERSION)",
    )
    assert facts(tmp_path, "").identity_clauses == ()  # nothing to pin down: no check


@pytest.mark.parametrize("made_for", ["MPICH", "ABI", "OPEN_MPI"])
def test_the_condition_holds_for_its_own_header_only(tmp_path, made_for):
    """Evaluated by the real preprocessor against each header."""
    headers = {"MPICH": MPICH, "ABI": ABI, "OPEN_MPI": OPEN_MPI}
    condition = " && ".join(facts(tmp_path, headers[made_for]).identity_clauses)
    for name, macros in headers.items():
        probe = tmp_path / f"probe_{name}.c"
        probe.write_text(f"{macros}#if {condition}\nint same;\n#else\nint other;\n#endif\n")
        text = subprocess.run(["cc", "-E", "-P", str(probe)], capture_output=True, text=True, check=True).stdout
        assert ("int same;" in text) == (name == made_for), (made_for, name)
