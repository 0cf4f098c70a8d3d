"""The core's run-time inputs as an attacker would give them (docs/security.md):
special files as QMPI_CONF or in TOOLS, bytes that are not UTF-8, and a set-user-ID
program run by an unprivileged user with tool variables set.

Each bad input gives one line on stderr and a non-zero exit (an empty chain from a
file: one warning line, exit 0), and returns: every run has a generous timeout, a hang
fails the test (Mpi.run), no timing is asserted."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import SAMPLE_TOOLS, qmpi_errors

pytestmark = pytest.mark.mpi

TIMEOUT_S = 60


def warnings(stderr: str):
    return [line.strip() for line in stderr.splitlines() if "qmpi: warning: " in line]


def assert_one_error(proc, *fragments):
    assert proc.returncode != 0, proc
    errors = qmpi_errors(proc.stderr)
    assert len(errors) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


# -- special files as QMPI_CONF: one line, never a hang, never "no tools" by accident ------


@pytest.mark.parametrize(
    "kind, message",
    [
        ("fifo", "not a regular file (a FIFO)"),
        ("directory", "not a regular file (a directory)"),
        ("/dev/zero", "not a regular file (a character device)"),
        ("/proc/self/mem", "cannot read the configuration file"),
    ],
)
def test_special_file_as_qmpi_conf_is_one_line(mpi, demo_app, tmp_path, fifo, kind, message):
    conf = {"fifo": str(fifo), "directory": str(tmp_path)}.get(kind, kind)
    proc = mpi.run(1, [demo_app], env={"QMPI_CONF": conf}, timeout=TIMEOUT_S)
    assert_one_error(proc, f"QMPI_CONF={conf}: ", message)
    assert "app rank" not in proc.stdout


@pytest.mark.parametrize("text", ["", "# nothing here\n; nor here\n\n"])
def test_empty_chain_from_a_file_is_said_in_one_line(mpi, demo_app, tmp_path, text):
    conf = tmp_path / "empty.conf"
    conf.write_text(text)
    proc = mpi.run(1, [demo_app], env={"QMPI_CONF": str(conf)}, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    assert "app rank 0 of 1" in proc.stdout
    assert warnings(proc.stderr) == [
        f"qmpi: warning: QMPI_CONF={conf}: the file has no [NAME] section: running with no tools"
    ], proc.stderr


# -- special files in TOOLS: refused before anything opens them ---------------------------


@pytest.mark.parametrize("variable", ["QMPI_TOOLS", "TOOLS"])
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_special_file_in_tools_is_one_line(mpi, demo_app, tmp_path, kind, variable):
    """Named like a tool library (TOOLS is read as a tool list only when it names one;
    QMPI_TOOLS always is), a FIFO or a directory is refused before anything opens it."""
    tool = tmp_path / "libtool.so"
    os.mkfifo(tool) if kind == "fifo" else tool.mkdir()
    proc = mpi.run(1, [demo_app], env={variable: str(tool)}, timeout=TIMEOUT_S)
    assert_one_error(proc, f"{variable} entry 1 ({tool}): not a regular file (a {'FIFO' if kind == 'fifo' else kind})")


def test_a_special_file_not_named_like_a_tool_in_tools_is_another_programs_variable(mpi, demo_app, fifo):
    proc = mpi.run(1, [demo_app], env={"TOOLS": str(fifo)}, timeout=TIMEOUT_S)
    assert proc.returncode == 0 and "app rank 0 of 1" in proc.stdout, proc.stderr
    assert warnings(proc.stderr) == [
        f"qmpi: warning: TOOLS={fifo} names no tool (no shared library, @name or %name): ignored as another "
        "program's variable; QMPI_TOOLS is always read as a tool list"
    ], proc.stderr


def test_bytes_that_are_not_utf8_are_escaped_in_the_error_line(mpi, demo_app):
    # \udcff is byte 0xff once the environment is encoded (surrogateescape).
    proc = mpi.run(1, [demo_app], env={"TOOLS": "/nonexistent/lib\udcff\u00e9.so"}, timeout=TIMEOUT_S)
    assert_one_error(proc, "TOOLS entry 1 (/nonexistent/lib\\xff\u00e9.so): cannot load")


# -- a set-user-ID program: the tool variables are ignored, as ld.so ignores LD_PRELOAD ----

EVIL_TOOL = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void marker(void)
{
    int fd = open(MARKER, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
        char line[64];
        int n = 0, e = (int)geteuid();
        do line[n++] = (char)('0' + e % 10); while ((e /= 10) > 0);
        (void)!write(fd, line, (size_t)n);
        close(fd);
    }
}
"""

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def setuid_app(mpi, core):
    """demo_app linked with a copy of the core by absolute RUNPATH, set-user-ID root, in
    a world-readable directory (pytest's are 0700), with a tool whose constructor
    writes `marker`. The MPI's own files must be readable by nobody too."""
    if os.geteuid() != 0:
        pytest.skip("needs root: to make a set-user-ID root program and run it as nobody (CI runs as root)")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    top = Path(tempfile.mkdtemp(prefix="qmpi-setuid-", dir="/tmp"))
    try:
        top.chmod(0o755)
        lib = top / "lib"
        lib.mkdir(mode=0o755)
        for path in core.glob("libqmpi.so*"):
            shutil.copy(path, lib / path.name, follow_symlinks=False)
        app = mpi.build_app(SAMPLE_TOOLS / "demo_app.c", lib, top / "app")
        evil_c = top / "evil.c"
        evil_c.write_text(EVIL_TOOL)
        out = top / "out"  # the marker's directory: writable by the unprivileged control run too
        out.mkdir()
        out.chmod(0o777)
        subprocess.run(
            ["cc", "-shared", "-fPIC", f'-DMARKER="{out / "marker"}"', str(evil_c), "-o", str(top / "evil.so")],
            check=True,
            timeout=TIMEOUT_S,
        )
        for path in [lib, *lib.iterdir(), top / "evil.so"]:
            path.chmod(0o755)
        os.chown(app, 0, 0)
        app.chmod(0o4755)
        probe = subprocess.run([*NOBODY, "test", "-r", mpi.mpicc], timeout=TIMEOUT_S)
        if probe.returncode != 0:
            pytest.fail(f"nobody cannot read the MPI's files ({mpi.mpicc}): make them world-readable")
        yield app
    finally:
        shutil.rmtree(top, ignore_errors=True)


def run_as_nobody(mpi, app, **variables):
    env = mpi.env(**variables)
    env.pop("QMPI_TOOLS", None)
    env.pop("QMPI_VERBOSE", None)
    env.update(variables)
    try:
        proc = subprocess.run(
            [*NOBODY, str(app)], capture_output=True, text=True, env=env, cwd=str(app.parent), timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"set-user-ID app hung: {variables}\n{exc.stdout}\n{exc.stderr}") from None
    return proc


def test_setuid_program_ignores_every_tool_variable(mpi, setuid_app):
    """Run by nobody, a set-user-ID root program linked with the core loads no tool and
    reads no configuration file; one line says which variables were ignored."""
    # Run as an MPI singleton, without a launcher (MPICH and Open MPI wheels both start one).
    top = setuid_app.parent
    marker = top / "out" / "marker"
    evil = str(top / "evil.so")

    # The control: not set-user-ID, the same variable loads the tool (its constructor runs).
    plain = top / "plain"
    shutil.copy(setuid_app, plain)
    plain.chmod(0o755)
    proc = run_as_nobody(mpi, plain, TOOLS=evil)
    assert marker.exists(), proc.stderr
    marker.unlink()

    runs = [
        (
            {"TOOLS": evil, "QMPI_TOOL_LIST": "nosuch", "MPIR_CVAR_QMPI_TOOL_LIST": "nosuch"},
            "TOOLS, QMPI_TOOL_LIST, MPIR_CVAR_QMPI_TOOL_LIST",
        ),
        ({"QMPI_TOOLS": evil}, "QMPI_TOOLS"),
        ({"QMPI_CONF": "/etc/shadow"}, "QMPI_CONF"),
        ({"QMPI_CONF": evil}, "QMPI_CONF"),
    ]
    shadow = Path("/etc/shadow").read_text().splitlines()[0]
    for variables, names in runs:
        proc = run_as_nobody(mpi, setuid_app, **variables)
        assert not marker.exists(), f"{variables}: the tool's constructor ran with euid {marker.read_text()}"
        assert shadow not in proc.stderr and shadow not in proc.stdout, "a line of /etc/shadow was echoed"
        assert proc.returncode == 0, (variables, proc.stderr)
        assert "app rank 0 of 1" in proc.stdout, (variables, proc.stdout, proc.stderr)
        assert qmpi_errors(proc.stderr) == [], proc.stderr
        assert warnings(proc.stderr) == [
            f"qmpi: warning: secure-execution mode (set-user-ID, set-group-ID or file capabilities): {names} "
            "ignored, as the dynamic linker ignores LD_PRELOAD: running with no tools"
        ], (variables, proc.stderr)
        for value in variables.values():
            assert value not in proc.stderr, "a value must not be echoed"

    proc = run_as_nobody(mpi, setuid_app)
    assert proc.returncode == 0 and "app rank 0 of 1" in proc.stdout, proc.stderr
    assert warnings(proc.stderr) == [], "no variable set: nothing to say"
    assert stat.S_IMODE(setuid_app.stat().st_mode) & stat.S_ISUID


def test_chain_report_escapes_paths(mpi, demo_app, test_tools, tmp_path):
    """QMPI_VERBOSE's chain lines quote the tool paths as error lines do."""
    tool = tmp_path / "pass\udcff.so"  # byte 0xff in the file name
    shutil.copy(test_tools / "libpassthrough.so", tool)
    proc = mpi.run(1, [demo_app], env={"TOOLS": str(tool), "QMPI_VERBOSE": "1"}, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    assert f"qmpi: level 1: {tmp_path}/pass\\xff.so, " in proc.stderr, proc.stderr
