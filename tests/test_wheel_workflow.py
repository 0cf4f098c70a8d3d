"""The whole user workflow of issue 14 from the built wheel alone, outside the
repository: a fresh virtual environment holding only the qmpigen wheel (its
dependencies reached offline through a .pth file into this environment's
site-packages, since no package index is assumed), then in an empty directory:
`qmpigen examples`, `qmpigen build-core`, `make install` with PREFIX and DESTDIR,
the sample counter built with the examples' Makefile and installed as a tool, an
application built with `pkg-config --cflags --libs qmpi`, and a job started with the
installed `qmpirun -v -t counter,counter`; on every available MPI."""

from __future__ import annotations

import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, RUN_TIMEOUT_S, Mpi, make

pytestmark = [pytest.mark.mpi, pytest.mark.slow]


def run(cmd, env, cwd) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=str(cwd),
                          timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """bin/ of a fresh venv with the qmpigen wheel installed (not editable)."""
    work = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(work / "dist"),
         str(REPO)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (work / "dist").glob("qmpigen-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (fresh_site,) = (venv / "lib").glob("python*/site-packages")
    # Offline: the dependencies (pycparser, click, jinja2, lark) from this environment;
    # qmpigen itself only from the wheel.
    (fresh_site / "deps.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--no-index",
                           "--disable-pip-version-check", str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return venv / "bin"


def test_wheel_to_installed_core_to_a_stacked_job(mpi: Mpi, wheel_venv: Path, tmp_path):
    env = mpi.env()
    env["PATH"] = f"{wheel_venv}:{env['PATH']}"
    for variable in ("QMPI_TOOLS", "QMPI_VERBOSE", "QMPI_TOOL_PATH", "LD_PRELOAD", "PYTHONPATH"):
        env.pop(variable, None)
    qmpigen = wheel_venv / "qmpigen"
    where = run([wheel_venv / "python", "-c", "import qmpigen; print(qmpigen.__file__)"], env, tmp_path)
    assert where.stdout.startswith(str(wheel_venv.parent)), where.stdout  # the wheel's copy, not the checkout

    run([qmpigen, "examples", "examples"], env, tmp_path)
    run([qmpigen, "build-core", "--mpi-header", "auto", "--mpicc", mpi.mpicc, "-o", "core"], env, tmp_path)
    make(tmp_path / "core", f"MPICC={mpi.mpicc}", env=env)
    stage, prefix = tmp_path / "stage", "/opt/qmpi"
    make(tmp_path / "core", "install", f"PREFIX={prefix}", f"DESTDIR={stage}", f"MPICC={mpi.mpicc}", env=env)
    root = stage / prefix.lstrip("/")

    samples = tmp_path / "examples" / "sample_tools"
    make(samples, f"CORE={root / 'include'}", f"OUT={tmp_path / 'tools'}", f"MPICC={mpi.mpicc}",
         f"QMPIGEN={qmpigen}", str(tmp_path / "tools" / "libcounter.so"), env=env)
    (root / "lib" / "qmpi" / "tools" / "libcounter.so").write_bytes((tmp_path / "tools" / "libcounter.so").read_bytes())

    env["PKG_CONFIG_PATH"] = str(root / "lib" / "pkgconfig")
    flags = run(["pkg-config", "--cflags", "--libs", "qmpi"], env, tmp_path).stdout.split()
    run([mpi.mpicc, samples / "demo_app.c", "-o", "app", *flags, f"-Wl,-rpath,{root / 'lib'}"], env, tmp_path)

    job = run(["sh", root / "bin" / "qmpirun", "-v", "-t", "counter,counter", "--", mpi.mpiexec,
               *mpi.launcher_flags, "-n", "2", "./app"], env, tmp_path)
    reports = {(int(m.group(1)), int(m.group(2))) for m in re.finditer(r"^counter@(\d+) rank (\d+):", job.stdout, re.M)}
    assert reports == {(1, 0), (2, 0), (1, 1), (2, 1)}, job.stdout
    assert "MPI_Bcast=1" in job.stdout
    chain = [line for line in job.stderr.splitlines() if "libcounter.so" in line and not line.startswith("qmpirun:")]
    assert len(chain) == 2, job.stderr  # QMPI_VERBOSE: rank 0 shows both levels, once
