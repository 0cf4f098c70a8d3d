"""A core generated for one MPI and compiled with another MPI's mpicc stops with one
line naming both, not with errors deep inside qmpi.h (`unknown type name
'MPI_Session'`): the daily mistake on sites with environment modules.

Real drivers: the MPICH 5.0.2 and Open MPI 5.0.11 wheels, MPICH's standard-ABI driver
(mpicc_abi) where the wheel ships it, Debian's MPICH 4.0.2 where it is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import mpi_named, qmpigen

pytestmark = pytest.mark.mpi

MESSAGE = re.compile(
    r"error: #error \"qmpi\.h: this QMPI core was generated for (?P<made>[^\"]+?), but this compiler's mpi\.h is "
    r"(?P<other>[^\"]+?)'s: regenerate the core with this MPI \(qmpigen build-core --mpicc DRIVER\) "
    r"or compile with the MPI it was made for\""
)
FATAL_STOP = "fatal error: qmpi.h: stopped after the MPI mismatch above"


def driver(mpi_name: str, name: str = "mpicc") -> Path:
    mpi = mpi_named(mpi_name)
    if mpi is None:
        pytest.skip(f"needs the {mpi_name} MPI")
    path = Path(mpi.mpicc).parent / name
    if not path.exists():
        pytest.skip(f"{path} is not installed")
    return path


def generate(mpicc: Path, out: Path) -> Path:
    proc = qmpigen("build-core", "--mpicc", str(mpicc), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def compile_errors(mpicc: Path, source: Path) -> list:
    """The error lines of compiling `source` (its caret and context lines left out)."""
    proc = subprocess.run([str(mpicc), "-c", str(source), "-o", "/dev/null"], capture_output=True, text=True)
    assert proc.returncode != 0, f"{mpicc} compiled {source}"
    return [line for line in proc.stderr.splitlines() if re.search(r"\berror\b", line) and ": " in line and not line.startswith(" ")]


def assert_refused(mpicc: Path, core: Path, made_for: str, other: str) -> None:
    for source in sorted(core.glob("*.c")):
        errors = compile_errors(mpicc, source)
        assert len(errors) == 2, "\n".join(errors)
        match = MESSAGE.search(errors[0])
        assert match, errors[0]
        assert (match["made"], match["other"]) == (made_for, other)
        assert errors[1].endswith(FATAL_STOP + ": No such file or directory"), errors[1]


def test_mpich_core_refuses_open_mpi_and_back(tmp_path):
    mpich, openmpi = driver("mpich"), driver("openmpi")
    mpich_core = generate(mpich, tmp_path / "mpich")
    openmpi_core = generate(openmpi, tmp_path / "openmpi")
    assert_refused(openmpi, mpich_core, "MPICH 5.0.2 (MPI 5.0)", "Open MPI")
    assert_refused(mpich, openmpi_core, "Open MPI 5.0.11 (MPI 3.1)", "MPICH")


def test_the_core_builds_with_its_own_mpi_and_the_makefile_refuses_another(tmp_path):
    mpich, openmpi = driver("mpich"), driver("openmpi")
    core = generate(mpich, tmp_path / "core")
    proc = subprocess.run(["make", "-j1", "-C", str(core), f"MPICC={openmpi}"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert len(MESSAGE.findall(proc.stderr)) == 1, proc.stderr
    assert "MPI_Session" not in proc.stderr and "unknown type name" not in proc.stderr
    # The check lets the MPI the core was made for through. It is a preprocessor #error,
    # so preprocessing each source shows it; compiling this core with its own MPI is
    # what the `core` fixture of the MPICH session does.
    for source in sorted(core.glob("*.c")):
        ok = subprocess.run([str(mpich), "-E", str(source), "-o", "/dev/null"], capture_output=True, text=True)
        assert ok.returncode == 0, ok.stderr


def test_standard_abi_is_named_and_kept_apart_from_mpich(tmp_path):
    """MPICH's mpicc_abi compiles against the MPI 5.0 standard ABI (mpi_abi.h): a
    different MPI from MPICH's own mpi.h, in both directions."""
    mpich, abi = driver("mpich"), driver("mpich", "mpicc_abi")
    proc = qmpigen("build-core", "--mpicc", str(abi), "-o", str(tmp_path / "abi"))
    assert proc.returncode == 0, proc.stderr
    assert re.match(r"qmpigen: read MPI ABI 1\.0 \(MPI 5\.0\) from \S+/mpi\.h \(driver \S+/mpicc_abi\): \d+ functions, ", proc.stderr)
    assert_refused(mpich, tmp_path / "abi", "MPI ABI 1.0 (MPI 5.0)", "MPICH")
    assert_refused(abi, generate(mpich, tmp_path / "mpich"), "MPICH 5.0.2 (MPI 5.0)", "MPI ABI")


def test_another_version_of_the_same_mpi_is_named_so(tmp_path):
    debian = Path("/usr/bin/mpicc.mpich")
    if not debian.exists() or shutil.which(str(debian)) is None:
        pytest.skip("Debian's MPICH (libmpich-dev) is not installed")
    core = generate(driver("mpich"), tmp_path / "core")
    assert_refused(debian, core, "MPICH 5.0.2 (MPI 5.0)", "another MPICH version")
