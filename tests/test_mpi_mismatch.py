"""A core generated for one MPI and compiled with another MPI's mpicc stops with one
line naming both, not with errors deep inside qmpi.h (`unknown type name
'MPI_Session'`): the daily mistake on sites with environment modules.

Real drivers: the MPICH 5.0.2 and Open MPI 5.0.11 wheels, MPICH's standard-ABI driver
(mpicc_abi) where the wheel ships it, Debian's MPICH 4.0.2 where it is installed."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import OPENMPI_RUN_ENV, build_core, built_once, mpi_named, qmpigen

pytestmark = pytest.mark.mpi

MESSAGE = re.compile(
    r"fatal error: qmpi\.h: this compiler's mpi\.h is (?P<other>.+?)'s, but this QMPI core was generated for "
    r"(?P<made>.+?): compile with make MPICC=(?P<driver>\S+) \(the driver it was generated with\), or regenerate "
    r"the core for (?P<that>.+?) \(qmpigen build-core --mpicc DRIVER\); a qmpi\.h for (?P=that): No such file or "
    r"directory$",
    re.M,
)


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
    return [
        line
        for line in proc.stderr.splitlines()
        if re.search(r"\berror\b", line) and ": " in line and not line.startswith(" ")
    ]


def assert_refused(mpicc: Path, core: Path, made_for: str, other: str, made_with: Path) -> None:
    for source in sorted(core.glob("*.c")):
        errors = compile_errors(mpicc, source)
        assert len(errors) == 1, "\n".join(errors)  # one message: the compiler stops at it
        match = MESSAGE.search(errors[0])
        assert match, errors[0]
        assert (match["made"], match["other"], match["driver"]) == (made_for, other, str(made_with))


def test_mpich_core_refuses_open_mpi_and_back(tmp_path):
    mpich, openmpi = driver("mpich"), driver("openmpi")
    mpich_core = generate(mpich, tmp_path / "mpich")
    openmpi_core = generate(openmpi, tmp_path / "openmpi")
    assert_refused(openmpi, mpich_core, "MPICH 5.0.2 (MPI 5.0)", "Open MPI", mpich)
    assert_refused(mpich, openmpi_core, "Open MPI 5.0.11 (MPI 3.1)", "MPICH", openmpi)


def test_a_driver_given_by_name_is_named_by_its_path(tmp_path):
    """`--mpicc mpicc` (or none) with the MPICH wheel first on PATH: compiled with Open
    MPI's driver, qmpi.h names the wheel's mpicc by its path, not `mpicc`, which is
    Open MPI's where this happens."""
    mpich, openmpi = driver("mpich"), driver("openmpi")
    env = {**os.environ, "PATH": f"{mpich.parent}:{os.environ['PATH']}"}
    proc = qmpigen("build-core", "--mpicc", "mpicc", "-o", str(tmp_path / "core"), env=env)
    assert proc.returncode == 0, proc.stderr
    assert_refused(openmpi, tmp_path / "core", "MPICH 5.0.2 (MPI 5.0)", "Open MPI", mpich)


def test_the_makefile_defaults_to_the_driver_the_core_was_generated_with(tmp_path):
    """With another MPI's mpicc first on PATH, `make -C core` still builds with the
    driver given to build-core, and so does a tool's Makefile."""
    mpich, openmpi = driver("mpich"), driver("openmpi")
    core = generate(mpich, tmp_path / "core")
    other_first = {**os.environ, "PATH": f"{openmpi.parent}:{os.environ['PATH']}"}
    # Every command of the whole build, as make would run them; then one of them run (the
    # `core` fixture of the MPICH session builds this core in full with its driver).
    planned = subprocess.run(["make", "-n", "-C", str(core)], capture_output=True, text=True, env=other_first)
    assert planned.returncode == 0, planned.stderr
    compiles = [line for line in planned.stdout.splitlines() if " -c " in line or " -shared " in line]
    assert len(compiles) >= 5 and all(line.startswith(f"{mpich} ") for line in compiles), planned.stdout
    assert "mpicc " not in planned.stdout.replace(f"{mpich} ", "")
    proc = subprocess.run(["make", "-C", str(core), "qmpi_links.o"], capture_output=True, text=True, env=other_first)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(f"{mpich} ") == 1 and (core / "qmpi_links.o").exists(), proc.stdout
    spec = tmp_path / "demo.qmpi"
    spec.write_text("tool demo;\nintercept MPI_Send;\n")
    tool = tmp_path / "demo"
    made = qmpigen("scaffold-tool", str(spec), "--mpicc", str(mpich), "-o", str(tool))
    assert made.returncode == 0, made.stderr
    built = subprocess.run(
        ["make", "-C", str(tool), f"QMPI_CORE={core}"], capture_output=True, text=True, env=other_first
    )
    assert built.returncode == 0, built.stderr


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
    assert re.match(
        r"qmpigen: read MPI ABI 1\.0 \(MPI 5\.0\) from \S+/mpi\.h \(driver \S+/mpicc_abi\): \d+ functions, ",
        proc.stderr,
    )
    assert_refused(mpich, tmp_path / "abi", "MPI ABI 1.0 (MPI 5.0)", "MPICH", abi)
    assert_refused(abi, generate(mpich, tmp_path / "mpich"), "MPICH 5.0.2 (MPI 5.0)", "MPI ABI", mpich)


def test_another_version_of_the_same_mpi_is_named_so(tmp_path):
    debian = Path("/usr/bin/mpicc.mpich")
    if not debian.exists() or shutil.which(str(debian)) is None:
        pytest.skip("Debian's MPICH (libmpich-dev) is not installed")
    mpich = driver("mpich")
    core = generate(mpich, tmp_path / "core")
    assert_refused(debian, core, "MPICH 5.0.2 (MPI 5.0)", "another MPICH version", mpich)


IDENTITY = re.compile(
    r"^qmpi: error: this QMPI core was generated for (?P<made>.+?), but its MPI calls reach (?P<library>\S+) "
    r"\((?P<abi>[^:]+): (?P<version>[^\n]*)\): build the application with (?P<driver>\S+), the driver the core was "
    r"generated with, or generate a core for this MPI$"
)
OTHER_LOADED = re.compile(
    r"^qmpi: error: this QMPI core was generated for (?P<made>.+?) and calls it in (?P<library>\S+), but another "
    r"MPI library, (?P<other>\S+), is loaded too: build the application with (?P<driver>\S+), the driver the core "
    r"was generated with$"
)


def app_with(mpicc: Path, core: Path, out: Path, *extra: str) -> Path:
    """demo_app built with `mpicc` and linked with -lqmpi of `core` (as the install docs' pkg-config line)."""
    demo = Path(__file__).resolve().parent.parent / "sample_tools" / "demo_app.c"
    proc = subprocess.run(
        [str(mpicc), "-O2", str(demo), "-o", str(out), f"-L{core}", "-lqmpi", f"-Wl,-rpath,{core}", *extra],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def mpich_core(tmp_path_factory) -> Path:
    """The MPICH wheel's core for the run-time identity tests: the `core` fixture's, which
    a run with QMPIGEN_BUILD_CACHE (.ci/run) has built already."""
    mpich = mpi_named("mpich")
    if mpich is None:
        pytest.skip("needs the mpich MPI")
    return built_once("core-mpich", tmp_path_factory, functools.partial(build_core, mpich)) / "core"


def test_an_application_built_with_another_mpi_stops_at_its_first_call(tmp_path, mpich_core):
    """Linked with Open MPI's driver against an MPICH core, the application's MPI calls
    reach Open MPI: one line naming both, exit 1, before MPI is touched (it crashed in
    MPI_Comm_rank before)."""
    openmpi, core = driver("openmpi"), mpich_core
    app = app_with(openmpi, core, tmp_path / "app")
    proc = subprocess.run([str(app)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    match = IDENTITY.match(lines[0])
    assert match, lines[0]
    assert match["made"] == "MPICH 5.0.2 (MPI 5.0)"
    assert Path(match["library"]).resolve().parent == (openmpi.parent.parent / "lib").resolve()
    assert match["abi"] == "Open MPI" and match["version"].startswith("Open MPI v5.0.11")
    assert match["driver"] == str(driver("mpich"))
    # Under the application's launcher too: the job ends (the launcher may kill the other
    # rank before it writes its line), and every qmpi line is that one.
    job = subprocess.run(
        [str(openmpi.parent / "mpiexec"), "-n", "2", str(app)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **OPENMPI_RUN_ENV},
    )
    assert job.returncode != 0 and "app rank" not in job.stdout
    qmpi_lines = [line for line in job.stderr.splitlines() if line.startswith("qmpi:")]
    assert 1 <= len(qmpi_lines) <= 2 and all(IDENTITY.match(line) for line in qmpi_lines), job.stderr


TWO_MPIS = """
#include <dlfcn.h>
#include <stdio.h>
#include <mpi.h>
int main(int argc, char **argv)
{
    /* Another MPI library in the process (as a plugin or a second binding may load
     * one), local: the core's calls still reach its own MPI. */
    if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
        fprintf(stderr, "dlopen: %s\\n", dlerror());
        return 2;
    }
    MPI_Init(&argc, &argv);
    puts("not reached");
    MPI_Finalize();
    return 0;
}
"""


def test_a_second_mpi_library_loaded_beside_the_right_one_stops_the_job(tmp_path, mpich_core):
    mpich, openmpi, core = driver("mpich"), driver("openmpi"), mpich_core
    other = next((openmpi.parent.parent / "lib").glob("libmpi.so.*[0-9]"))
    source = tmp_path / "two_mpis.c"
    source.write_text(TWO_MPIS)
    app = tmp_path / "two_mpis"
    built = subprocess.run(
        [str(mpich), str(source), "-o", str(app), f"-L{core}", "-lqmpi", f"-Wl,-rpath,{core}", "-ldl"],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    proc = subprocess.run([str(app), str(other)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and OTHER_LOADED.match(lines[0]), proc.stderr
    assert Path(OTHER_LOADED.match(lines[0])["other"]).resolve() == other.resolve()
    assert OTHER_LOADED.match(lines[0])["driver"] == str(mpich)


def test_the_right_mpi_passes_the_check(tmp_path, mpich_core):
    mpich, core = driver("mpich"), mpich_core
    app = app_with(mpich, core, tmp_path / "app")
    proc = subprocess.run(
        [str(mpich.parent / "mpiexec"), "-n", "2", str(app)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "qmpi: error" not in proc.stderr and proc.stdout.count("app rank") == 2
