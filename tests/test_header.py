"""Stage 1 (qmpigen/header.py): mpi.h through the compiler driver's preprocessor.

Unit tests on the fixture header with the system C compiler (no MPI needed): which
driver is used, that flags and GNU annotations are handled, and what the macro table
says about the header.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from qmpigen.errors import QmpigenError
from qmpigen.mpi.header import HeaderRequest, linemarker, read_header, resolve_driver

from conftest import FIXTURES

QUIRKS = FIXTURES / "quirks_mpi.h"
CC = shutil.which("cc") or shutil.which("gcc")

pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler (cc)")


@pytest.fixture(scope="module")
def quirks(quirks_source):
    return quirks_source  # read once per session (conftest)


def fake_mpicc(directory: Path, include_dir: Path) -> Path:
    """An 'mpicc' that is cc plus the -I of an MPI installation, after the user's
    arguments as MPICH's and Open MPI's drivers put it."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "mpicc"
    script.write_text(f'#!/bin/sh\nexec {CC} "$@" -I"{include_dir}"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


# -- the preprocessed text ---------------------------------------------------------


def test_explicit_header_path_is_recorded_absolute(quirks):
    """Error locations and -d dumps name the header the user gave, made absolute."""
    assert quirks.header_path == str(QUIRKS)
    assert os.path.isabs(quirks.header_path)


def test_gnu_annotations_are_neutralised(quirks):
    """pycparser cannot read __attribute__; the -D flags from quirks.py must remove them."""
    assert "__attribute__" not in quirks.text
    assert "pointer_with_type_tag" not in quirks.text
    assert "int MPI_Attr_get(" in quirks.text


def test_text_keeps_linemarkers_of_the_header(quirks):
    """Parse errors are mapped back to header lines through the linemarkers."""
    markers = [linemarker(line) for line in quirks.text.splitlines()]
    assert any(m and m[1] == str(QUIRKS) for m in markers)


@pytest.mark.parametrize(
    "line, expected",
    [
        ('# 12 "/x/mpi.h" 1 3', (12, "/x/mpi.h")),
        ('# 1 "<built-in>"', (1, "<built-in>")),
        ("#define MPI_VERSION 4", None),
        ("#pragma once", None),
        ('# x "file"', None),
        ("int MPI_Send(void);", None),
    ],
)
def test_linemarker(line, expected):
    """Only '# N "file" flags' lines are linemarkers; directives and code are not."""
    assert linemarker(line) == expected


# -- the macro table -----------------------------------------------------------------


def test_object_macros_carry_their_values(quirks):
    """Version facts come from object-like macros, with their replacement text."""
    assert quirks.object_macros["MPI_VERSION"] == "4"
    assert quirks.object_macros["MPI_SUBVERSION"] == "(1)"
    assert quirks.object_macros["MPICH_VERSION"] == '"9.9.9"'


def test_function_macros_are_told_apart_from_object_macros(quirks):
    """A name #defined with parameters is a function-like macro (MPI_Comm_c2f in MPICH)."""
    for name in ("MPI_Comm_c2f", "MPI_Comm_f2c", "MPI_Address", "PMPI_Info_dup"):
        assert name in quirks.function_macros
        assert name not in quirks.object_macros
    assert "MPI_VERSION" not in quirks.function_macros
    assert {"MPI_Comm_c2f", "MPI_VERSION"} <= quirks.macro_names
    assert "MPI_Send" not in quirks.macro_names


# -- flags and drivers ---------------------------------------------------------------


def test_cflags_reach_the_preprocessor(tmp_path):
    """--cflag -D and -I change what is read, as they do for a user's compile."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "extra.h").write_text("int MPI_From_include(void);\n")
    header = tmp_path / "mpi.h"
    header.write_text('#include "extra.h"\n#ifdef WITH_FLAGGED\nint MPI_Flagged(void);\n#endif\n')
    plain = read_header(HeaderRequest(str(header), "cc", (f"-I{tmp_path / 'inc'}",)))
    flagged = read_header(HeaderRequest(str(header), "cc", (f"-I{tmp_path / 'inc'}", "-DWITH_FLAGGED")))
    assert "MPI_From_include" in plain.text and "MPI_Flagged" not in plain.text
    assert "MPI_Flagged" in flagged.text
    assert "WITH_FLAGGED" in flagged.object_macros


def test_header_path_with_spaces(tmp_path):
    """Install prefixes with spaces must not break the generated #include."""
    directory = tmp_path / "my mpi dir"
    directory.mkdir()
    shutil.copy(QUIRKS, directory / "mpi.h")
    pre = read_header(HeaderRequest(str(directory / "mpi.h"), "cc"))
    assert pre.header_path == str(directory / "mpi.h")
    assert "int MPI_Send(" in pre.text


def test_explicit_header_reads_its_own_siblings(tmp_path):
    """MPICH's mpi.h has `#include <mpi_proto.h>`: with --mpi-header PATH the sibling must
    come from PATH's directory, with plain cc and also when another MPI's mpicc (whose
    include directory has its own mpi_proto.h) is the driver."""
    mine = tmp_path / "mine"
    other = tmp_path / "other" / "include"
    mine.mkdir()
    other.mkdir(parents=True)
    (mine / "mpi.h").write_text("#include <mpi_proto.h>\n")
    (mine / "mpi_proto.h").write_text("int MPI_Mine(void);\n")
    (other / "mpi_proto.h").write_text("int MPI_Other(void);\n")
    driver = fake_mpicc(tmp_path / "other" / "bin", other)
    for mpicc in ("cc", str(driver)):
        pre = read_header(HeaderRequest(str(mine / "mpi.h"), mpicc))
        assert "MPI_Mine" in pre.text and "MPI_Other" not in pre.text, mpicc


def test_mpicc_with_arguments_is_split():
    """--mpicc 'cc -std=c99' is a command, not a file name."""
    assert resolve_driver(HeaderRequest(str(QUIRKS), "cc -std=c99")) == ("cc", "-std=c99")


def test_auto_finds_the_mpi_h_the_driver_includes(tmp_path):
    """--mpi-header auto: the header is whatever `mpicc -E` resolves <mpi.h> to."""
    include = tmp_path / "prefix" / "include"
    include.mkdir(parents=True)
    shutil.copy(QUIRKS, include / "mpi.h")
    driver = fake_mpicc(tmp_path / "prefix" / "bin", include)
    pre = read_header(HeaderRequest("auto", str(driver)))
    assert pre.header_path == str(include / "mpi.h")
    assert pre.driver == (str(driver),)
    assert pre.object_macros["MPICH_VERSION"] == '"9.9.9"'


def test_auto_uses_mpicc_from_path(tmp_path, monkeypatch):
    """Without --mpicc, 'mpicc' on PATH is the driver (what `make demo` relies on)."""
    include = tmp_path / "include"
    include.mkdir()
    shutil.copy(QUIRKS, include / "mpi.h")
    bin_dir = tmp_path / "bin"
    fake_mpicc(bin_dir, include)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    assert resolve_driver(HeaderRequest("auto")) == ("mpicc",)
    assert read_header(HeaderRequest("auto")).header_path == str(include / "mpi.h")


def test_explicit_header_falls_back_to_cc_without_mpicc(tmp_path, monkeypatch):
    """A header path needs only a preprocessor: cc is used when no mpicc exists."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cc").symlink_to(CC)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CC", raising=False)
    assert resolve_driver(HeaderRequest(str(QUIRKS))) == ("cc",)


def test_auto_without_any_mpicc_is_an_error(tmp_path, monkeypatch):
    """'auto' must not silently read some other mpi.h with plain cc."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cc").symlink_to(CC)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(QmpigenError, match="no MPI compiler driver 'mpicc' on PATH"):
        resolve_driver(HeaderRequest("auto"))


def test_missing_driver_is_an_error():
    """A typo in --mpicc is named as such, not reported as a failed preprocessor run."""
    with pytest.raises(QmpigenError, match=r"compiler driver '/nonexistent/mpicc' not found \(from --mpicc\)"):
        read_header(HeaderRequest(str(QUIRKS), "/nonexistent/mpicc"))


def test_missing_header_is_an_error(tmp_path):
    """Checked before any driver runs, so the message names the file the user gave."""
    with pytest.raises(QmpigenError, match="MPI header not found"):
        read_header(HeaderRequest(str(tmp_path / "nope.h"), "cc"))


def test_preprocessor_failure_carries_its_stderr():
    """The user must see why cc -E failed, not only that it did."""
    with pytest.raises(QmpigenError) as info:
        read_header(HeaderRequest(str(FIXTURES / "missing_include_mpi.h"), "cc"))
    message = info.value.one_line()
    assert "failed (exit 1)" in message
    assert "qmpigen_no_such_header.h" in message
    assert "No such file or directory" in message
    assert "\n" not in message


# -- one preprocessor run --------------------------------------------------------------


def test_the_driver_runs_once_and_the_macro_table_is_the_final_one(tmp_path):
    """One `-E -dD` run gives the text and the macro table (a second `-dM` run cost as
    much again, about a tenth of a cached command): the table is the macros as they stand at the header's
    end (a #undef removes one, a redefinition replaces it), without the -D flags that
    neutralise GNU annotations, and the directive lines never reach the C text, whose
    line numbers still follow its linemarkers."""
    header = tmp_path / "mpi.h"
    header.write_text(
        "#define MPI_GONE 1\n#undef MPI_GONE\n#define MPI_TWICE 1\n#undef MPI_TWICE\n#define MPI_TWICE 2\n"
        "#define MPI_CALL(x) (x)\n#define MPI_KEPT 3\nint MPI_Line7(void);\n"
    )
    log = tmp_path / "runs"
    driver = tmp_path / "counting-cc"
    driver.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec {CC} "$@"\n')
    driver.chmod(0o755)
    pre = read_header(HeaderRequest(str(header), str(driver)))
    assert log.read_text().count("run") == 1
    assert "MPI_GONE" not in pre.macro_names
    assert pre.object_macros["MPI_TWICE"] == "2" and pre.object_macros["MPI_KEPT"] == "3"
    assert "MPI_CALL" in pre.function_macros and "MPI_CALL" not in pre.object_macros
    assert "__attribute__" not in pre.macro_names and "__extension__" not in pre.macro_names
    assert "__STDC__" in pre.object_macros  # the compiler's own, as -dM lists them
    assert "#define" not in pre.text and "#undef" not in pre.text
    line, current = 0, ""
    for text_line in pre.text.splitlines():
        marker = linemarker(text_line)
        if marker:
            line, current = marker
            continue
        if "MPI_Line7" in text_line:
            assert (current, line) == (str(header), 8)
        line += 1
