"""The whole user workflow from the built wheel alone, outside the
repository: a fresh virtual environment holding only the qmpigen wheel (its
dependencies reached offline through a .pth file into this environment's
site-packages, since no package index is assumed), then in an empty directory:
`qmpigen examples`, `qmpigen build-core`, `make install` with PREFIX and DESTDIR, the
sample TBcast built with the examples' Makefile, a CMake project (find_package(QMPI):
the application with QMPI::qmpi, the counter from its spec with qmpi_add_tool and the
wheel's qmpigen) installing into the core's tool directory, an application built with
`pkg-config --cflags --libs qmpi`, and both applications started with the installed
`qmpirun -v -t counter,tbcast,counter`; on every available MPI."""

from __future__ import annotations

import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import RUN_TIMEOUT_S, Mpi, build_wheel, make

pytestmark = [pytest.mark.mpi, pytest.mark.slow]


def run(cmd, env, cwd) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=str(cwd), timeout=RUN_TIMEOUT_S
    )
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """bin/ of a fresh venv with the qmpigen wheel installed (not editable)."""
    work = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(work)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (fresh_site,) = (venv / "lib").glob("python*/site-packages")
    # Offline: the dependencies (pycparser, click, jinja2, lark) from this environment;
    # qmpigen itself only from the wheel.
    (fresh_site / "deps.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    proc = subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(wheel),
        ],
        capture_output=True,
        text=True,
    )
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
    tools = root / "lib" / "qmpi" / "tools"
    make(
        samples,
        f"CORE={root / 'include'}",
        f"OUT={tmp_path / 'tools'}",
        f"MPICC={mpi.mpicc}",
        f"QMPIGEN={qmpigen}",
        str(tmp_path / "tools" / "libtbcast.so"),
        env=env,
    )
    shutil.copy(tmp_path / "tools" / "libtbcast.so", tools / "libtbcast.so")

    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    project = tmp_path / "project"
    project.mkdir()
    for name in ("demo_app.c", "counter.qmpi"):
        shutil.copy(samples / name, project / name)
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\n"
        "project(uses_qmpi C)\n"
        "find_package(QMPI REQUIRED)\n"
        "add_executable(app demo_app.c)\n"
        "target_link_libraries(app PRIVATE QMPI::qmpi)\n"
        "qmpi_add_tool(counter SPEC counter.qmpi)\n"
        "install(TARGETS counter LIBRARY DESTINATION ${QMPI_TOOL_DIR})\n"
    )
    build = project / "build"
    run(
        ["cmake", "-S", project, "-B", build, f"-DCMAKE_PREFIX_PATH={root}", f"-DMPI_C_COMPILER={mpi.mpicc}"],
        env,
        tmp_path,
    )  # qmpigen: the wheel's, first on PATH
    run(["cmake", "--build", build, "-j2"], env, tmp_path)
    run(["cmake", "--install", build], env, tmp_path)
    assert (tools / "libcounter.so").exists()

    env["PKG_CONFIG_PATH"] = str(root / "lib" / "pkgconfig")
    flags = run(["pkg-config", "--cflags", "--libs", "qmpi"], env, tmp_path).stdout.split()
    run([mpi.mpicc, samples / "demo_app.c", "-o", "pc_app", *flags, f"-Wl,-rpath,{root / 'lib'}"], env, tmp_path)

    for app in (build / "app", tmp_path / "pc_app"):
        job = run(
            [
                "sh",
                root / "bin" / "qmpirun",
                "-v",
                "-t",
                "counter,tbcast,counter",
                "--",
                mpi.mpiexec,
                *mpi.launcher_flags,
                "-n",
                "2",
                app,
            ],
            env,
            tmp_path,
        )
        reports = {
            (int(m.group(1)), int(m.group(2))): m.group(3)
            for m in re.finditer(r"counter@(\d+) rank (\d+):(.*)$", job.stderr, re.M)
        }
        assert set(reports) == {(1, 0), (3, 0), (1, 1), (3, 1)}, job.stdout
        assert all("MPI_Bcast=1" in reports[(1, r)] and "MPI_Bcast" not in reports[(3, r)] for r in (0, 1)), job.stdout
        assert "MPI_Send=1" in reports[(3, 0)] and "MPI_Recv=1" in reports[(3, 1)], job.stdout
        # QMPI_VERBOSE: rank 0 shows the chain once, each tool at its level.
        chain = [
            line
            for line in job.stderr.splitlines()
            if re.search(r"lib(counter|tbcast)\.so", line) and not line.startswith("qmpirun:")
        ]
        assert len(chain) == 3, job.stderr
