"""The installed core, as a user outside the repository meets it: `make install` with
PREFIX and DESTDIR, an application built with pkg-config and one with CMake
(find_package(QMPI)), tools built with qmpi_add_tool from C and from a spec, and jobs
started with the installed qmpirun, tools by name, on every available MPI.

The tree is installed with DESTDIR into a staging directory and used from there, which
works because the installed files locate everything relative to themselves."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

import pytest

from qmpigen import __version__

from conftest import RUN_TIMEOUT_S, SAMPLE_TOOLS, Mpi, make

pytestmark = pytest.mark.mpi

CALLBACK_TOOLS = Path(__file__).resolve().parent / "callback_tools"
PREFIX = "/opt/qmpi"
SONAME = f"libqmpi.so.{__version__.split('.')[0]}"
QMPIGEN = Path(sys.executable).parent / "qmpigen"  # beside this Python, as pip installs it


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} is not installed")
    return path


@dataclass
class Installed:
    mpi: Mpi
    root: Path  # DESTDIR + PREFIX: where the tree is used from

    @property
    def qmpirun(self) -> Path:
        return self.root / "bin" / "qmpirun"

    @property
    def tool_dir(self) -> Path:
        return self.root / "lib" / "qmpi" / "tools"

    def env(self, **extra: str) -> Dict[str, str]:
        env = self.mpi.env(PKG_CONFIG_PATH=str(self.root / "lib" / "pkgconfig"))
        env.pop("QMPI_TOOL_PATH", None)
        env.pop("LD_PRELOAD", None)
        env.update(extra)
        return env

    def run(self, *args: str, shell: str = "sh", **extra: str) -> subprocess.CompletedProcess:
        """qmpirun ARGS under `shell` (dash is Debian's /bin/sh)."""
        try:
            return subprocess.run(
                [shell, str(self.qmpirun), *args],
                capture_output=True,
                text=True,
                env=self.env(**extra),
                timeout=RUN_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"qmpirun hung: {args}\n{exc.stdout}\n{exc.stderr}") from None

    def launch(self, ranks: int, argv: Sequence[str]) -> List[str]:
        """The launcher part of a qmpirun command: mpiexec [flags] -n RANKS ARGV."""
        return [self.mpi.mpiexec, *self.mpi.launcher_flags, "-n", str(ranks), *map(str, argv)]


@pytest.fixture(scope="module")
def installed(mpi: Mpi, core: Path, tmp_path_factory) -> Installed:
    stage = tmp_path_factory.mktemp(f"stage-{mpi.name}")
    make(core, "install", f"PREFIX={PREFIX}", f"DESTDIR={stage}", f"MPICC={mpi.mpicc}", env=mpi.env())
    return Installed(mpi, stage / PREFIX.lstrip("/"))


@pytest.fixture(scope="module")
def cmake_project(installed: Installed, tmp_path_factory) -> Path:
    """A CMake project outside the repository: demo_app linked with QMPI::qmpi (and
    with QMPI::qmpi_static), the tools tbcast and cbcount (callback interface) from C
    and counter from its spec with qmpi_add_tool, installed into the core's tool
    directory. Returns the build directory."""
    need("cmake")
    src = tmp_path_factory.mktemp(f"cmake-{installed.mpi.name}")
    for source in (
        SAMPLE_TOOLS / "demo_app.c",
        SAMPLE_TOOLS / "tbcast.c",
        SAMPLE_TOOLS / "counter.qmpi",
        CALLBACK_TOOLS / "cbcount.c",
    ):
        shutil.copy(source, src / source.name)
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\n"
        "project(qmpi_user C)\n"
        f"find_package(QMPI {__version__} REQUIRED)\n"
        "add_executable(demo_app demo_app.c)\n"
        "target_link_libraries(demo_app PRIVATE QMPI::qmpi)\n"
        "add_executable(demo_static demo_app.c)\n"
        "target_link_libraries(demo_static PRIVATE QMPI::qmpi_static)\n"
        "qmpi_add_tool(tbcast SOURCES tbcast.c)\n"
        "qmpi_add_tool(counter SPEC counter.qmpi)\n"
        "qmpi_add_tool(cbcount SOURCES cbcount.c)\n"
        "# A callback tool that includes only <mpi.h> (docs/interfaces.md: the callback interface).\n"
        "target_compile_options(cbcount PRIVATE -D_GNU_SOURCE -include qmpi.h)\n"
        "install(TARGETS tbcast counter cbcount LIBRARY DESTINATION ${QMPI_TOOL_DIR})\n"
    )
    build = src / "build"
    env = installed.env()
    for cmd in (
        # MPI_C_COMPILER: FindMPI's choice of MPI (with Debian's MPIs, /usr/bin/mpicc may be the other one).
        [
            "cmake",
            "-S",
            str(src),
            "-B",
            str(build),
            f"-DCMAKE_PREFIX_PATH={installed.root}",
            f"-DMPI_C_COMPILER={installed.mpi.mpicc}",
            f"-DQMPIGEN_EXECUTABLE={QMPIGEN}",
        ],
        ["cmake", "--build", str(build), "-j2"],
        ["cmake", "--install", str(build)],
    ):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout}{proc.stderr}"
    return build


@pytest.fixture(scope="module")
def plain_app(installed: Installed, tmp_path_factory) -> Path:
    """demo_app linked with the MPI only: tools reach it only through the preload."""
    out = tmp_path_factory.mktemp(f"plain-{installed.mpi.name}")
    return installed.mpi.compile([SAMPLE_TOOLS / "demo_app.c"], out / "demo_app", ["-O2"])


def counter_lines(stdout: str, level: int) -> Dict[int, str]:
    """rank -> the report line of the counter instance at `level`."""
    found = re.findall(rf"counter@{level} rank (\d+):(.*)$", stdout, re.M)
    return {int(rank): counts for rank, counts in found}


def assert_counter_tbcast_counter_ran(proc: subprocess.CompletedProcess, ranks: int = 2) -> None:
    """counter,tbcast,counter: the outer counter sees MPI_Bcast, the inner one the
    MPI_Send/MPI_Recv TBcast issues instead (thesis 4.5.3)."""
    assert proc.returncode == 0, proc.stderr
    outer, inner = counter_lines(proc.stderr, 1), counter_lines(proc.stderr, 3)
    assert sorted(outer) == sorted(inner) == list(range(ranks)), proc.stdout
    for rank in range(ranks):
        assert "MPI_Bcast=1" in outer[rank] and "MPI_Send" not in outer[rank], outer[rank]
        assert "MPI_Bcast" not in inner[rank], inner[rank]
        assert ("MPI_Send=" if rank == 0 else "MPI_Recv=1") in inner[rank], inner[rank]


# -- the installed tree ---------------------------------------------------------------


def test_install_lays_out_a_versioned_library_headers_and_packages(installed):
    lib = installed.root / "lib"
    real = lib / f"libqmpi.so.{__version__}"
    assert real.is_file() and not real.is_symlink()
    assert os.readlink(lib / SONAME) == real.name
    assert os.readlink(lib / "libqmpi.so") == SONAME
    dynamic = subprocess.run(["readelf", "-d", str(real)], capture_output=True, text=True, check=True).stdout
    assert f"Library soname: [{SONAME}]" in dynamic
    for path in (
        "lib/libqmpi.a",
        "include/qmpi.h",
        "lib/pkgconfig/qmpi.pc",
        "lib/cmake/QMPI/QMPIConfig.cmake",
        "lib/cmake/QMPI/QMPIConfigVersion.cmake",
    ):
        assert (installed.root / path).is_file(), path
    assert installed.tool_dir.is_dir()
    assert os.access(installed.qmpirun, os.X_OK)


def test_installed_files_record_no_prefix_so_the_tree_is_relocatable(installed):
    stage = str(installed.root)[: -len(PREFIX)]
    for path in ("lib/pkgconfig/qmpi.pc", "lib/cmake/QMPI/QMPIConfig.cmake", "bin/qmpirun"):
        text = (installed.root / path).read_text()
        assert PREFIX not in text and stage not in text, path


def test_qmpirun_is_posix_sh(installed):
    for shell in ("sh", "dash"):
        if shutil.which(shell):
            proc = subprocess.run([shell, "-n", str(installed.qmpirun)], capture_output=True, text=True)
            assert proc.returncode == 0, f"{shell} -n: {proc.stderr}"


def test_uninstall_removes_the_core_and_keeps_the_users_tools(mpi, core, tmp_path):
    root = tmp_path / PREFIX.lstrip("/")
    make(core, "install", f"PREFIX={PREFIX}", f"DESTDIR={tmp_path}", f"MPICC={mpi.mpicc}", env=mpi.env())
    (root / "lib" / "qmpi" / "tools" / "libmine.so").write_text("")
    make(core, "uninstall", f"PREFIX={PREFIX}", f"DESTDIR={tmp_path}", env=mpi.env())
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())
    assert left == ["lib/qmpi/tools/libmine.so"]


# -- integration: pkg-config, CMake, qmpirun ----------------------------------------------


def test_pkg_config_app_runs_tools_found_in_qmpi_tool_path(installed, cmake_project, tmp_path):
    need("pkg-config")
    env = installed.env()
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "qmpi"], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    libdir = subprocess.run(
        ["pkg-config", "--variable=libdir", "qmpi"], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()
    app = installed.mpi.compile([SAMPLE_TOOLS / "demo_app.c"], tmp_path / "app", [*flags, f"-Wl,-rpath,{libdir}"])
    dynamic = subprocess.run(["readelf", "-d", str(app)], capture_output=True, text=True, check=True).stdout
    assert f"Shared library: [{SONAME}]" in dynamic

    # By name from QMPI_TOOL_PATH (the CMake build directory), before the prefix's tools.
    proc = installed.run(
        "-v",
        "-t",
        "counter,tbcast,counter",
        "--",
        *installed.launch(2, [app]),
        QMPI_TOOL_PATH=f"{tmp_path / 'nothing-here'}:{cmake_project}",
    )
    assert_counter_tbcast_counter_ran(proc)
    assert f"{cmake_project / 'libtbcast.so'}:{cmake_project / 'libcounter.so'}" in proc.stderr


def test_cmake_app_runs_tools_installed_in_the_prefix(installed, cmake_project):
    # The tools qmpi_add_tool built (tbcast from C, counter from its spec), installed
    # into QMPI_TOOL_DIR, found by name with no QMPI_TOOL_PATH.
    assert sorted(p.name for p in installed.tool_dir.iterdir()) == ["libcbcount.so", "libcounter.so", "libtbcast.so"]
    proc = installed.run(
        "-t",
        "counter,tbcast,counter",
        "--",
        *installed.launch(2, [cmake_project / "demo_app"]),
        shell=shutil.which("dash") or "sh",
    )
    assert_counter_tbcast_counter_ran(proc)


def test_cmake_spec_error_stops_configuration_with_qmpigens_line(installed, tmp_path):
    need("cmake")
    (tmp_path / "bad.qmpi").write_text("tool bad prefix B;\nintercept MPI_NoSuchFunction { before %{ %} }\n")
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(bad C)\nfind_package(QMPI REQUIRED)\n"
        "qmpi_add_tool(bad SPEC bad.qmpi)\n"
    )
    proc = subprocess.run(
        [
            "cmake",
            "-S",
            str(tmp_path),
            "-B",
            str(tmp_path / "build"),
            f"-DCMAKE_PREFIX_PATH={installed.root}",
            f"-DQMPIGEN_EXECUTABLE={QMPIGEN}",
        ],
        capture_output=True,
        text=True,
        env=installed.env(),
        timeout=600,
    )
    assert proc.returncode != 0
    message = " ".join(proc.stderr.split())  # CMake wraps messages
    assert re.search(
        r"qmpi_add_tool\(bad\): qmpigen: error: \S*bad.qmpi:2:\d+: unknown MPI function MPI_NoSuchFunction", message
    ), proc.stderr
    assert not (tmp_path / "build" / "qmpi_tool_bad" / "bad.c").exists()


def test_cmake_static_app_runs_tools_under_qmpirun(installed, cmake_project):
    dynamic = subprocess.run(
        ["readelf", "-d", str(cmake_project / "demo_static")], capture_output=True, text=True, check=True
    ).stdout
    assert "libqmpi" not in dynamic
    proc = installed.run("-t", "counter,tbcast,counter", "--", *installed.launch(2, [cmake_project / "demo_static"]))
    assert_counter_tbcast_counter_ran(proc)


def test_qmpirun_runs_the_chain_of_a_configuration_file(installed, cmake_project, plain_app, tmp_path):
    """qmpirun -c: the ranks read the file (QMPI_CONF, absolute) and build its chain."""
    conf = tmp_path / "stack.conf"
    conf.write_text(
        "".join(
            f"[{name}]\ntool = {installed.tool_dir / f'lib{lib}.so'}\n"
            for name, lib in (("outer", "counter"), ("tb", "tbcast"), ("inner", "counter"))
        )
    )
    proc = installed.run("-c", str(conf), "--", *installed.launch(2, [plain_app]))
    assert_counter_tbcast_counter_ran(proc)


def test_qmpirun_preloads_a_callback_tool_found_by_name(installed, cmake_project, plain_app):
    # tbcast above the callback tool cbcount: cbcount sees TBcast's Send/Recv, no Bcast.
    proc = installed.run("-t", "tbcast,@cbcount", "--", *installed.launch(2, [plain_app]))
    assert proc.returncode == 0, proc.stderr
    found = dict(re.findall(r"^cbcount@2 rank (\d+): (bcast=0 send=\d+ recv=\d+)", proc.stdout, re.M))
    assert found == {"0": "bcast=0 send=1 recv=0", "1": "bcast=0 send=0 recv=1"}, proc.stdout


def test_qmpirun_preloads_the_core_into_an_unlinked_app_through_the_launcher(installed, cmake_project, plain_app):
    """qmpirun passes the variables on the launcher's command line (Open MPI: -x, hydra:
    -genv) rather than exporting them, so tools running here proves they arrived."""
    proc = installed.run(
        "-v", "-t", f"counter,{installed.tool_dir / 'libtbcast.so'},counter", "--", *installed.launch(2, [plain_app])
    )
    assert_counter_tbcast_counter_ran(proc)
    command = [line for line in proc.stderr.splitlines() if line.startswith("qmpirun: ")]
    assert len(command) == 1, proc.stderr
    expected = {
        "openmpi": f" -x LD_PRELOAD={installed.root / 'lib' / SONAME}",
        "mpich": f" -genv LD_PRELOAD {installed.root / 'lib' / SONAME}",
    }.get(installed.mpi.family, "")
    assert expected in command[0]


def test_qmpirun_sets_tools_verbose_and_conf_for_every_rank(installed, cmake_project, tmp_path):
    conf = tmp_path / "tools.conf"
    conf.write_text("")
    report = 'echo "rank QMPI_TOOLS=$QMPI_TOOLS VERBOSE=$QMPI_VERBOSE CONF=$QMPI_CONF PRELOAD=$LD_PRELOAD"'
    proc = installed.run("-v", "-t", "counter,@cbtool,%static", "--", *installed.launch(2, ["sh", "-c", report]))
    assert proc.returncode == 0, proc.stderr
    expected = (
        f"rank QMPI_TOOLS={installed.tool_dir / 'libcounter.so'}:@cbtool:%static VERBOSE=1 CONF= "
        f"PRELOAD={installed.root / 'lib' / SONAME}"
    )
    assert proc.stdout.splitlines() == [expected, expected], proc.stdout
    # -c: the configuration file is the chain (the core reads QMPI_CONF, not QMPI_TOOLS).
    proc = installed.run("-v", "-c", str(conf), "--", *installed.launch(2, ["sh", "-c", report]))
    assert proc.returncode == 0, proc.stderr
    expected = f"rank QMPI_TOOLS= VERBOSE=1 CONF={conf} PRELOAD={installed.root / 'lib' / SONAME}"
    assert proc.stdout.splitlines() == [expected, expected], proc.stdout


def test_qmpirun_exports_the_variables_for_other_launchers(installed, cmake_project, plain_app):
    # A singleton run: the program itself is the launcher.
    proc = installed.run("-v", "-t", "counter", "--", str(plain_app))
    assert proc.returncode == 0, proc.stderr
    assert (
        f"qmpirun: LD_PRELOAD={installed.root / 'lib' / SONAME} QMPI_TOOLS={installed.tool_dir / 'libcounter.so'} "
        f"{plain_app}" in proc.stderr.splitlines()
    )
    assert sorted(counter_lines(proc.stderr, 1)) == [0], proc.stdout


def test_qmpirun_without_tools_runs_the_bare_core(installed, plain_app):
    # Tool lists in qmpirun's own environment do not reach the ranks: -t is the chain.
    proc = installed.run(
        "--", *installed.launch(2, [plain_app]), TOOLS="/nonexistent/libx.so", QMPI_TOOLS="/nonexistent/liby.so"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("app rank") == 2 and "counter@" not in proc.stderr


def test_qmpirun_runs_from_the_core_build_directory(installed, core, cmake_project, plain_app):
    proc = subprocess.run(
        [
            "sh",
            str(core / "qmpirun"),
            "-t",
            str(cmake_project / "libcounter.so"),
            "--",
            *installed.launch(2, [plain_app]),
        ],
        capture_output=True,
        text=True,
        env=installed.env(),
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(counter_lines(proc.stderr, 1)) == [0, 1], proc.stdout


def test_qmpirun_with_cdpath_exported_finds_relative_tools_and_files(installed, cmake_project, plain_app, tmp_path):
    """With CDPATH exported, `cd DIR` prints the directory when CDPATH finds DIR: every
    relative -t, QMPI_TOOL_PATH entry and -c file was "DIR\n/abs/DIR/..."."""
    (tmp_path / "tools").mkdir()
    shutil.copy(cmake_project / "libcounter.so", tmp_path / "tools" / "libcounter.so")
    (tmp_path / "confs").mkdir()
    (tmp_path / "confs" / "qmpi.conf").write_text(f"[c]\ntool = {cmake_project / 'libcounter.so'}\n")
    env = installed.env(CDPATH=str(tmp_path))
    for args, extra in [
        (["-t", "tools/libcounter.so"], {}),
        (["-t", "counter"], {"QMPI_TOOL_PATH": "tools"}),
        (["-c", "confs/qmpi.conf"], {}),
    ]:
        proc = subprocess.run(
            [shutil.which("dash") or "sh", str(installed.qmpirun), *args, "--", *installed.launch(1, [plain_app])],
            capture_output=True,
            text=True,
            env={**env, **extra},
            cwd=str(tmp_path),
            timeout=RUN_TIMEOUT_S,
        )
        assert proc.returncode == 0, (args, proc.stderr)
        assert sorted(counter_lines(proc.stderr, 1)) == [0], (args, proc.stdout, proc.stderr)


# -- qmpirun's errors: one line, exit 2, nothing launched ---------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["-t", "nosuchtool", "--", "MPIEXEC"], "tool 'nosuchtool' not found: no libnosuchtool.so in QMPI_TOOL_PATH"),
        (["-t", "./missing/libx.so", "--", "MPIEXEC"], "tool './missing/libx.so': no such file"),
        (["-t", "counter,,counter", "--", "MPIEXEC"], "-t: empty tool name in 'counter,,counter'"),
        (["-t", "@", "--", "MPIEXEC"], "a callback tool needs its registered name"),
        (["-t", "counter", "MPIEXEC"], "missing '--' before the launcher command"),
        (["-t", "counter"], "missing '--' and a launcher command"),
        (["-t", "counter", "--"], "no launcher command after '--'"),
        (["-c", "/nonexistent/qmpi.conf", "--", "MPIEXEC"], "configuration file '/nonexistent/qmpi.conf' not found"),
        (["-c", "/nonexistent/qmpi.conf", "-t", "counter", "--", "MPIEXEC"], "-c and -t exclude each other"),
        (["-t", "%", "--", "MPIEXEC"], "a statically linked tool needs its name"),
        (["-x", "--", "MPIEXEC"], "unknown option '-x'"),
        (["--", "/nonexistent/mpiexec"], "launcher '/nonexistent/mpiexec' not found"),
        (["-t", "count\ner", "--", "MPIEXEC"], "-t 'count?er' holds a control character"),
        (["-t", "./lib\ncounter.so", "--", "MPIEXEC"], "-t './lib?counter.so' holds a control character"),
        (["-c", "qmpi\n.conf", "--", "MPIEXEC"], "-c 'qmpi?.conf' holds a control character"),
        (["-x\ny", "--", "MPIEXEC"], "unknown option '-x?y'"),
    ],
)
def test_qmpirun_errors_are_one_line_and_exit_2(installed, cmake_project, args, message, tmp_path):
    marker = tmp_path / "launched"
    launcher = [installed.mpi.mpiexec, "-n", "1", "touch", str(marker)]
    argv = [a for arg in args for a in (launcher if arg == "MPIEXEC" else [arg])]
    proc = installed.run(*argv, shell=shutil.which("dash") or "sh")
    assert proc.returncode == 2, proc
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and proc.stderr.startswith("qmpirun: error: "), proc.stderr
    assert message in proc.stderr
    assert proc.stdout == "" and not marker.exists()


def test_qmpirun_help_and_version(installed):
    help_text = installed.run("-h")
    assert help_text.returncode == 0 and "qmpirun -t counter,tbcast,counter -- mpiexec -n 4 ./app" in help_text.stdout
    assert str(installed.tool_dir) in help_text.stdout
    version = installed.run("--version")
    assert version.returncode == 0 and version.stdout.startswith(f"qmpirun (qmpigen {__version__}) for ")
