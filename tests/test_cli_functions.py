"""`qmpigen functions` on the fixture header, through the console script's entry point
(qmpigen.cli.commands.main) in this process; the last tests run it as a separate process, as a
user does.

The listing, the JSON manifest and the -d dump are what people read to see what will be
intercepted; every user error is one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from qmpigen.mpi.header import HeaderRequest, read_header
from qmpigen.mpi.select import enumerate_functions
from qmpigen.output.render import runtime_files

from conftest import FIXTURES, qmpigen, run_cli

QUIRKS = FIXTURES / "quirks_mpi.h"
FIXTURE_ARGS = ("--mpi-header", str(QUIRKS), "--mpicc", "cc")

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")


@pytest.fixture(scope="module")
def api(quirks_api):
    return quirks_api  # read and parsed once per session (conftest)


def run_ok(*args):
    proc = run_cli("functions", *FIXTURE_ARGS, *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


# -- listing ---------------------------------------------------------------------------


def test_listing_header_line_and_rows(api):
    """One row per enumerated function: index, enum name, return type, prototype."""
    enumeration = enumerate_functions(api)
    lines = run_ok().splitlines()
    assert lines[0] == f"# MPICH 9.9.9 (MPI 4.1): 20 functions, enumeration {enumeration.hash}"
    rows = lines[1:]
    assert len(rows) == len(enumeration)
    for index, (row, function) in enumerate(zip(rows, enumeration)):
        fields = row.split()
        assert fields[:3] == [str(index), function.enum, function.return_type]
        assert row.endswith(f"{function.name}({function.params_c})")
    assert any(r.split()[1:] == ["_MPI_Wtime", "double", "MPI_Wtime(void)"] for r in rows)


# -- JSON manifest ---------------------------------------------------------------------------

FUNCTION_KEYS = [
    "index",
    "name",
    "enum",
    "forum_enum",
    "return_type",
    "signature",
    "params",
    "variadic",
    "categories",
]
PARAM_KEYS = ["name", "type", "declaration", "pointer", "array", "const", "function_pointer"]


def test_json_manifest_shape(api):
    """Exactly these keys: the manifest is read by scripts and tools' build systems."""
    enumeration = enumerate_functions(api)
    data = json.loads(run_ok("--json"))
    assert list(data) == ["mpi", "functions", "fortran"]
    assert data["fortran"] is None  # a bare header read with cc: no Fortran bindings
    assert data["mpi"] == {
        "implementation": "MPICH",
        "version": "9.9.9",
        "mpi_version": "4.1",
        "declares_qmpi": True,
        "count": 20,
        "enumeration": enumeration.hash,
    }
    assert [f["name"] for f in data["functions"]] == list(enumeration.names)
    for index, entry in enumerate(data["functions"]):
        assert list(entry) == FUNCTION_KEYS
        assert entry["index"] == index
        assert entry["enum"] == "_" + entry["name"]
        assert entry["forum_enum"] == entry["name"].upper() + "_T"
        for p in entry["params"]:
            assert list(p) == PARAM_KEYS


def test_json_manifest_values_for_quirks():
    """The manifest carries the quirks a tool author needs (variadic, arrays, const)."""
    functions = {f["name"]: f for f in json.loads(run_ok("--json"))["functions"]}
    pcontrol = functions["MPI_Pcontrol"]
    assert pcontrol["variadic"] is True
    assert pcontrol["signature"] == "int MPI_Pcontrol(const int level, ...)"
    assert functions["MPI_Send"]["variadic"] is False
    ranges = functions["MPI_Group_range_incl"]["params"][2]
    assert ranges == {
        "name": "ranges",
        "type": "int [][3]",
        "declaration": "int ranges[][3]",
        "pointer": True,
        "array": True,
        "const": False,
        "function_pointer": False,
    }
    assert functions["MPI_Send"]["params"][0]["const"] is True
    assert functions["MPI_T_event_handle_free"]["params"][2]["function_pointer"] is True
    assert functions["MPI_Comm_c2f"]["categories"] == ["conversion", "macro"]
    assert functions["MPI_Aint_add"]["return_type"] == "MPI_Aint"


def test_selection_options_reach_the_enumeration():
    """--include/--exclude are repeatable and combine; --mpix adds MPIX_ (sorted first)."""

    def listed(*args):
        return [f["name"] for f in json.loads(run_ok("--json", *args))["functions"]]

    assert listed("--include", "MPI_Send*", "--include", "MPI_Wt*", "--exclude", "MPI_Wtick") == [
        "MPI_Send",
        "MPI_Send_c",
        "MPI_Wtime",
    ]
    assert listed("--mpix")[0] == "MPIX_Comm_revoke"
    assert "MPIX_Comm_revoke" not in listed()


def test_cflag_reaches_the_preprocessor(tmp_path):
    """--cflag -D changes the declarations read, as it would for the user's compile."""
    header = tmp_path / "mpi.h"
    header.write_text(
        "#ifdef WITH_SECOND\nint MPI_Second(void); int PMPI_Second(void);\n#endif\n"
        "int MPI_First(void); int PMPI_First(void);\n"
    )
    base = ("functions", "--mpi-header", str(header), "--mpicc", "cc", "--json")
    plain = json.loads(run_cli(*base).stdout)
    flagged = json.loads(run_cli(*base, "--cflag", "-DWITH_SECOND").stdout)
    assert [f["name"] for f in plain["functions"]] == ["MPI_First"]
    assert [f["name"] for f in flagged["functions"]] == ["MPI_First", "MPI_Second"]


# -- the -d dump -------------------------------------------------------------------------------


def test_dump_shows_every_parsed_function(api):
    """-d lists all MPI_/MPIX_ declarations, selected or not, with location and flags."""
    dump = run_ok("-d")
    lines = dump.splitlines()
    assert lines[0] == "header: MPICH 9.9.9, MPI 4.1, declares QMPI: yes, forum enum members: 5"
    assert lines[1] == f"functions declared (MPI_/MPIX_): {len(api)}"
    for function in api:
        assert f"{function.location}: {function.signature}" in lines
    assert "PMPI_" not in dump
    source = QUIRKS.read_text().splitlines()
    line = 1 + next(i for i, text in enumerate(source) if text.startswith("int MPI_Type_get_value_index("))
    assert f"{QUIRKS}:{line}:5: int MPI_Type_get_value_index(" in dump  # never selected, still shown
    assert "    flags: pmpi macro; categories: conversion macro" in lines
    assert "    flags: pmpi variadic; categories: -" in lines
    assert "    flags: -; categories: -" in lines  # MPI_Type_get_value_index: no PMPI twin
    assert "    ranges: type 'int [][3]', passed as 'int (*)[3]', base 'int', pointer array" in lines
    assert "    f: type 'float', passed as 'float', base 'float', promoted to double" in lines


# -- errors ------------------------------------------------------------------------------------------


def assert_one_line_error(proc, *fragments):
    """Exit 2, exactly one 'qmpigen: error:' line on stderr, no traceback, no stdout."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("qmpigen: error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert proc.stdout == ""


def test_error_no_driver_on_path():
    if shutil.which("mpicc", path="/usr/bin:/bin"):
        pytest.skip("this machine has an mpicc in /usr/bin")
    proc = run_cli("functions", "--mpi-header", "auto", env={"PATH": "/usr/bin:/bin"})
    assert_one_line_error(proc, "no MPI compiler driver 'mpicc' on PATH", "--mpicc")


def test_error_driver_does_not_exist():
    proc = run_cli("functions", "--mpicc", "/nonexistent/bin/mpicc")
    assert_one_line_error(proc, "compiler driver '/nonexistent/bin/mpicc' not found")


def test_error_header_missing(tmp_path):
    proc = run_cli("functions", "--mpi-header", str(tmp_path / "nope" / "mpi.h"), "--mpicc", "cc")
    assert_one_line_error(proc, "MPI header not found", "nope/mpi.h")


@pytest.mark.parametrize("command", ["functions", "build-core"])
def test_error_binary_header_is_one_line(tmp_path, command):
    # Review finding: a binary file as the header gave exit 3, "internal error: UnicodeDecodeError".
    binary = tmp_path / "mpi.h"
    binary.write_bytes(bytes(range(256)) * 4)
    extra = ("-o", str(tmp_path / "core")) if command == "build-core" else ()
    proc = run_cli(command, "--mpi-header", str(binary), "--mpicc", "cc", *extra)
    assert_one_line_error(proc, str(binary), "is not a C header")
    assert not (tmp_path / "core").exists()


def test_error_preprocessor_failure_shows_its_stderr():
    header = FIXTURES / "missing_include_mpi.h"
    proc = run_cli("functions", "--mpi-header", str(header), "--mpicc", "cc")
    assert_one_line_error(
        proc,
        "preprocessing",
        "'cc -E' failed",
        f"{header}:2",
        "qmpigen_no_such_header.h: No such file or directory",
    )


def test_error_parse_failure_names_header_line_and_preprocessed_line():
    broken = FIXTURES / "broken_mpi.h"
    text = read_header(HeaderRequest(str(broken), "cc")).text.splitlines()
    pre_line = 1 + next(i for i, line in enumerate(text) if "MPI_Comm_size(MPI_Comm comm int" in line)
    proc = run_cli("functions", "--mpi-header", str(broken), "--mpicc", "cc")
    assert_one_line_error(
        proc, f"qmpigen: error: {broken}:5:", "cannot parse the MPI header", f"(preprocessed output line {pre_line})"
    )


@pytest.mark.parametrize(
    "args, fragments",
    [
        (("--no-such-option",), ("No such option", "--no-such-option")),
        (("--include", "MPI_Nothing*"), ("--include 'MPI_Nothing*' matches no interceptable function",)),
        (("--exclude", "MPI_*"), ("the selection leaves no MPI function to intercept",)),
        (("--include", "MPIX_*"), ("add --mpix",)),
    ],
)
def test_error_usage(args, fragments):
    assert_one_line_error(run_cli("functions", *FIXTURE_ARGS, *args), *fragments)


def test_error_unknown_command():
    assert_one_line_error(run_cli("no-such-command"), "No such command")


# -- as a separate process, as a user runs it ------------------------------------------------------


@pytest.mark.slow  # seconds: `make test`, not `make test-fast`
def test_the_process_reports_an_error_in_one_line():
    broken = FIXTURES / "broken_mpi.h"
    assert_one_line_error(qmpigen("functions", "--mpi-header", str(broken), "--mpicc", "cc"), f"{broken}:5:")


SPEC = "tool t; context { int n; } intercept all except MPI_Wtime { before %{ $ctx->n++; %} } on init %{ %}"
GENERATE = [
    [*args, *FIXTURE_ARGS]
    for args in (
        ["functions", "--json", "--mpix"],
        ["functions"],
        ["functions", "-d"],
        ["groups"],
        ["build-core", "-o", "core"],
        ["scaffold-tool", "t.qmpi", "-o", "tool"],
        ["scaffold-tool", "t.qmpi", "--interface", "callback", "-o", "cbtool"],
    )
]
# `python -m qmpigen ARGS` for each ARGS in turn, in one process (one start, not seven),
# after its hash of a string.
GENERATE_THERE = """
import json, runpy, sys

print(hash("qmpigen"), flush=True)
for args in json.loads(sys.argv[1]):
    sys.argv = ["qmpigen", *args]
    try:
        runpy.run_module("qmpigen", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code != 0:
            raise
"""


@pytest.mark.slow  # seconds: `make test`, not `make test-fast`
def test_the_process_generates_what_this_one_does_whatever_the_hash_seed(tmp_path):
    """`python -m qmpigen` in another process, with another hash seed (so that any
    reliance on set or dict iteration order shows), prints and writes the same bytes as
    the entry point in this one. The two run side by side."""
    here, there = tmp_path / "here", tmp_path / "there"
    for directory in (here, there):
        directory.mkdir()
        (directory / "t.qmpi").write_text(SPEC)
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    child = subprocess.Popen(
        [sys.executable, "-c", GENERATE_THERE, json.dumps(GENERATE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=there,
        env=dict(os.environ, PYTHONHASHSEED=seed),
    )
    runs = [run_cli(*args, cwd=here) for args in GENERATE]
    stdout, stderr = child.communicate(timeout=300)
    assert child.returncode == 0, stderr
    child_hash, child_stdout = stdout.split("\n", 1)
    assert child_hash != str(hash("qmpigen"))  # the seeds differ indeed
    assert [run.returncode for run in runs] == [0] * len(GENERATE), [run.stderr for run in runs]
    assert child_stdout == "".join(run.stdout for run in runs)
    assert stderr == "".join(run.stderr for run in runs)  # build-core's line naming the MPI read
    written = [
        {p.relative_to(d).as_posix(): p.read_bytes() for p in d.rglob("*") if p.is_file()} for d in (here, there)
    ]
    assert len(written[0]) == 1 + 11 + len(runtime_files()) + 2 + 2  # the spec, the core and its runtime, two tools
    assert written[0] == written[1]
