"""A spec is data, never code: every string from outside (a spec's strings, the spec's
and the output's file names, the compiler driver's path, the MPI's version text) reaches
C, comments, Makefiles and shells escaped for that context, or is refused with its
file:line:col. Hostile strings: `*/`, `\\`, newline, `$(...)`, `{{ }}`, `#include`.

Real consumers: cc compiles the tool (-Werror) and a program printing the core's
strings, make reads both Makefiles (`make -n` expands `$(shell ...)` too), pkg-config and
cmake read the core's package files, sh parses qmpirun and bash the banner's command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES, QUIRKS, needs_cc, run_cli

pytestmark = needs_cc

SHIM = FIXTURES / "compile_shim"
# The hostile values of the tool's arguments, each a C string in the tool when it works.
DEFAULTS = {
    "closer": "*/ __attribute__((constructor)) static void evil_ctor(void) { } /*",
    "slash": "\\",
    "shell": "$(touch pwned) `touch pwned`",
    "jinja": "{{ 7*7 }} {% raw %}",
    "include": "#include <stdio.h>",
    "trigraph": "??/",
    "opener": "/* nested",
}
SPEC = "tool evil;\n" + "".join(f'argument {name} = "{value}";\n' for name, value in DEFAULTS.items())
SPEC += 'core "../core-dir";\nintercept MPI_Send;\n'
SPEC_NAME = "evil\n$(touch pwned)\n#include <x>\n*\\ {{ y }}.qmpi"
OUT_NAME = "out\n$(touch pwned) #x"
DRIVER_NAME = "cc$(id)#x"
VERSION = "9*/ $(touch pwned) {{ 7*7 }} #include <x> ${X};\\"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """A core from an mpi.h whose version text is hostile, read with a driver whose path
    is, and a tool from a spec whose strings and file name are, written into an output
    directory whose name is: all relative to one directory, as a user would run it."""
    here = tmp_path_factory.mktemp("hostile")
    (here / "bin").mkdir()
    os.symlink(shutil.which("cc"), here / "bin" / DRIVER_NAME)
    header = here / "hostile_mpi.h"
    header.write_text(f'#include "{QUIRKS}"\n#undef MPICH_VERSION\n#define MPICH_VERSION "{VERSION}"\n')
    (here / SPEC_NAME).write_text(SPEC)
    driver = str(here / "bin" / DRIVER_NAME)
    common = ("--mpi-header", "hostile_mpi.h", "--mpicc", driver)
    proc = run_cli("build-core", *common, "-o", "core-dir", cwd=here)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("scaffold-tool", SPEC_NAME, *common, "-o", OUT_NAME, cwd=here)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "out\\n$(touch pwned) #x: 2 written, 0 unchanged\n"  # one line, the newline escaped
    return here


def no_file_made(here: Path) -> None:
    assert not list(here.rglob("pwned")), "a spec string ran as a command"


def test_the_tool_builds_with_its_strings_as_data(hostile):
    """The tool's Makefile and C: make runs the driver by its path, cc compiles the
    hostile defaults under -Werror as strings, no injected constructor exists."""
    out = hostile / OUT_NAME
    proc = subprocess.run(
        ["make", "-C", str(out), f"CFLAGS=-O0 -Wno-attributes -Wno-deprecated-declarations -I{SHIM}"],
        capture_output=True,
        text=True,
        cwd=hostile,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{hostile / 'bin' / DRIVER_NAME}" in proc.stdout  # the driver as given, whatever make reads in it
    no_file_made(hostile)
    library = (out / "libevil.so").read_bytes()
    for value in DEFAULTS.values():
        assert b"\0" + value.encode() + b"\0" in library, value
    symbols = subprocess.run(["nm", str(out / "libevil.so")], capture_output=True, text=True, check=True).stdout
    assert "evil_ctor" not in symbols and "evil_argument_closer" in symbols
    source = (out / "evil.c").read_text()
    assert '"{{ 7*7 }} {% raw %}"' in source  # a C string, not a template


def test_make_n_expands_nothing_from_the_strings(hostile):
    """`make -n` evaluates every variable and $(shell ...): both Makefiles run nothing."""
    for directory in (hostile / OUT_NAME, hostile / "core-dir"):
        proc = subprocess.run(["make", "-n", "-B", "-C", str(directory)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert f"'{hostile / 'bin' / DRIVER_NAME}'" in proc.stdout  # one shell word, as the driver is named
    no_file_made(hostile)


def test_the_cores_strings_reach_c_pkg_config_cmake_and_sh_as_data(hostile):
    core = hostile / "core-dir"
    title = f"MPICH {VERSION} (MPI 4.1)"
    program = hostile / "print.c"
    program.write_text('#include <stdio.h>\n#include "qmpi.h"\nint main(void) { puts(QMPI_MPI_LIBRARY); return 0; }\n')
    flags = ["-std=gnu99", "-Wall", "-Wextra", "-Werror", "-Wno-deprecated-declarations", "-Wno-attributes"]
    build = subprocess.run(
        ["cc", *flags, f"-I{SHIM}", f"-I{core}", str(program), "-o", str(hostile / "print")],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    assert subprocess.run([str(hostile / "print")], capture_output=True, text=True).stdout == title + "\n"
    syntax = subprocess.run(
        ["cc", *flags, "-fsyntax-only", f"-I{SHIM}", f"-I{core}", str(core / "qmpi_exec.c")],
        capture_output=True,
        text=True,
    )
    assert syntax.returncode == 0, syntax.stderr  # its banners: the version and the command in C comments
    pc = subprocess.run(
        ["pkg-config", "--print-variables", "--modversion", str(core / "qmpi.pc")], capture_output=True, text=True
    )
    assert pc.returncode == 0, pc.stderr
    # QMPIConfig.cmake's line (the whole file needs a project with MPI), read by cmake.
    line = next(
        line for line in (core / "QMPIConfig.cmake").read_text().splitlines() if line.startswith("set(QMPI_MPI ")
    )
    (hostile / "mpi.cmake").write_text(f'{line}\nmessage("[${{QMPI_MPI}}]")\n')
    cmake = subprocess.run(["cmake", "-P", str(hostile / "mpi.cmake")], capture_output=True, text=True)
    assert cmake.returncode == 0 and cmake.stderr == f"[{title}]\n", cmake.stderr
    assert subprocess.run(["sh", "-n", str(core / "qmpirun")]).returncode == 0
    assignment = next(line for line in (core / "qmpirun").read_text().splitlines() if line.startswith("qmpi_version="))
    version = subprocess.run(["sh", "-c", f'{assignment}\nprintf %s "$qmpi_version"'], capture_output=True, text=True)
    assert title in version.stdout, version.stdout
    no_file_made(hostile)


def test_banner_commands_are_one_line_bash_gives_back(hostile):
    """The banner's command quotes the output's newline as $'...': one comment line, and
    bash reads it back as the name."""
    text = (hostile / OUT_NAME / "Makefile").read_text()
    command = next(line[len("#   ") :] for line in text.splitlines() if line.startswith("#   qmpigen "))
    words = subprocess.run(
        ["bash", "-c", f"set -- {command}; printf '%s\\0' \"$@\""], capture_output=True, check=True
    ).stdout.split(b"\0")
    assert OUT_NAME.encode() in words and SPEC_NAME.encode() in words


@pytest.mark.parametrize(
    "core, column",
    [("$(shell touch pwned)", 7), ("a b", 8), ("c#d", 8), ("e\\", 8), ("`x`", 7), ("f;g", 8), ("h:i", 8)],
)
def test_a_core_path_make_or_the_shell_would_read_is_refused(tmp_path, core, column):
    spec = tmp_path / "t.qmpi"
    spec.write_text(f'tool t;\ncore "{core}";\nintercept MPI_Send;\n')
    proc = run_cli("scaffold-tool", str(spec), "--mpi-header", str(QUIRKS), "--mpicc", "cc", "-o", str(tmp_path / "o"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert re.fullmatch(
        rf"qmpigen: error: {re.escape(str(spec))}:2:{column}: core path: .* would be read by make or the shell; .*\n",
        proc.stderr,
    ), proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_line_break_in_a_spec_string_is_refused_where_it_is(tmp_path):
    spec = tmp_path / "t.qmpi"
    spec.write_text('tool t;\nargument a = "x\n#include <y>";\nintercept MPI_Send;\n')
    proc = run_cli("scaffold-tool", str(spec), "--mpi-header", str(QUIRKS), "--mpicc", "cc", "-o", str(tmp_path / "o"))
    assert proc.returncode == 2 and proc.stderr.startswith(f"qmpigen: error: {spec}:2:"), proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_header_that_is_no_file_is_named_for_what_it_is(tmp_path):
    fifo = tmp_path / "fifo.h"
    os.mkfifo(fifo)
    for path, what in (
        ("/dev/zero", "a character device"),
        (str(fifo), "a FIFO (named pipe)"),
        (str(tmp_path), "a directory"),
    ):
        proc = run_cli("functions", "--mpi-header", path, "--mpicc", "cc")
        assert proc.returncode == 2
        assert proc.stderr == f"qmpigen: error: MPI header {path} is {what}, not a file\n"


def test_the_quick_forms_spec_keeps_the_command_in_its_comment(tmp_path):
    """The starter spec names the command that regenerates from it in a `#` comment:
    an output name with a line break and spec syntax stays inside it."""
    out = "o\nintercept MPI_Recv;\ncode %{ int injected; %}"
    args = ("--mpi-header", str(QUIRKS), "--mpicc", "cc", "-o", out)
    proc = run_cli("scaffold-tool", "--name", "q", "--intercept", "MPI_Send", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    spec = tmp_path / out / "q.qmpi"
    assert [line for line in spec.read_text().splitlines() if "injected" in line][0].startswith("#   qmpigen ")
    again = run_cli("scaffold-tool", os.path.join(out, "q.qmpi"), *args, "--check", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr  # the spec as written regenerates the same files
    assert "injected" not in (tmp_path / out / "q.c").read_text().replace("int injected; %}", "")


def test_an_mpi_version_with_terminal_escapes_is_printed_escaped(tmp_path):
    """The line naming the MPI read prints its version text from mpi.h: control
    characters there (an ESC sequence) come out as escapes, never to the terminal."""
    header = tmp_path / "esc_mpi.h"
    header.write_bytes(f'#include "{QUIRKS}"\n#undef MPICH_VERSION\n#define MPICH_VERSION "9\x1b[2J"\n'.encode())
    proc = run_cli("build-core", "--mpi-header", str(header), "--mpicc", "cc", "-o", str(tmp_path / "core"))
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stderr and "MPICH 9\\x1b[2J (MPI 4.1)" in proc.stderr
    assert "\x1b" not in (tmp_path / "core" / "qmpi.h").read_text()  # its banner and macros too
