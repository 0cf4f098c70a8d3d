"""`qmpigen scaffold-tool` without a real MPI: the command line, what it writes, and the
rule that protects user code (qmpigen/scaffold.py, templates/tool/).

A small MPICH-like mpi.h (tests/fixtures/mpich_like_mpi.h) read with `cc` stands for the
MPI; the command runs in this process (conftest.run_cli). Compile-and-run checks on real
MPIs are in test_scaffold_mpi.py; golden files of generated tools in test_tool_golden.py.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from qmpigen.output.checksum import intact, stamp

from conftest import MPICH_LIKE, run_cli

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")

SPEC = """\
# demo spec
tool demo prefix D;

code %{
#include <stdio.h>
%}

context {
    unsigned long long calls[NUM_MPI_FUNCS];
}

intercept MPI_Send, MPI_Recv {
    before %{
        /* plain line */
        $ctx->calls[$index]++;
    %}
    after %{
        if ($ret != MPI_SUCCESS)
            puts("failed");
    %}
}

intercept MPI_Wtime, MPI_Aint_add { call exec_func; }

on finalize %{
    puts("bye");
%}
"""


@pytest.fixture(scope="module")
def header() -> Path:
    return MPICH_LIKE


def scaffold(header: Path, *args: str):
    return run_cli("scaffold-tool", *args, "--mpi-header", str(header), "--mpicc", "cc")


def generate(header: Path, tmp_path: Path, spec_text: str = SPEC, *extra: str):
    spec = tmp_path / "demo.qmpi"
    spec.write_text(spec_text)
    out = tmp_path / "out"
    proc = scaffold(header, str(spec), "-o", str(out), *extra)
    return proc, out


def test_writes_the_tool_and_its_makefile(header, tmp_path):
    proc, out = generate(header, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{out}: 2 written, 0 unchanged\n"
    assert sorted(p.name for p in out.iterdir()) == ["Makefile", "demo.c"]
    source = (out / "demo.c").read_text()
    assert source.startswith("/* demo.c: the QMPI tool 'demo', generated from demo.qmpi.\n")
    assert "qmpigen scaffold-tool demo.qmpi --mpi-header mpich_like_mpi.h --mpicc cc -o out\n" in source
    assert str(tmp_path) not in source  # no absolute paths
    for name in ("Send", "Recv", "Wtime", "Aint_add", "Finalize", "Init", "Init_thread", "Session_init"):
        assert f'    [_MPI_{name}] = "D_{name}",\n' in source
    assert "_EXTERN_C_ double D_Wtime(int qmpi_level, vector *qmpi_v)" in source
    assert "exec_func_r(&qmpi_ret, qmpi_f, qmpi_level, _MPI_Wtime, qmpi_v);" in source
    assert "exec_func_r(&qmpi_ret, qmpi_f, qmpi_level, _MPI_Aint_add, qmpi_v, base, disp);" in source
    assert "qmpi_ret = QMPI_Next_Send(buf, count, datatype, dest, tag, comm, qmpi_level, qmpi_v);" in source
    makefile = (out / "Makefile").read_text()
    assert "QMPI_CORE ?= ../core\n" in makefile
    assert "libdemo.so: demo.c $(QMPI_CORE)/qmpi.h\n" in makefile
    assert intact(source) is True and intact(makefile) is True


def test_core_statement_sets_the_makefile_default(header, tmp_path):
    proc, out = generate(
        header, tmp_path, SPEC.replace("tool demo prefix D;", 'tool demo prefix D;\ncore "../../core";')
    )
    assert proc.returncode == 0, proc.stderr
    assert "QMPI_CORE ?= ../../core\n" in (out / "Makefile").read_text()


def test_line_directives_point_into_the_spec_and_back(header, tmp_path):
    proc, out = generate(header, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = (out / "demo.c").read_text().split("\n")
    spec_lines = SPEC.split("\n")
    back = into = 0
    for number, line in enumerate(lines, start=1):
        match = re.fullmatch(r'#line (\d+) "(.*)"', line)
        if not match:
            continue
        target = int(match.group(1))
        if match.group(2) == "demo.c":
            assert target == number + 1
            back += 1
        else:
            assert match.group(2) == "demo.qmpi"
            into += 1
            following = lines[number]  # the line after the directive is spec line `target`
            if "$" not in spec_lines[target - 1]:
                assert following.strip() == spec_lines[target - 1].strip()
    assert into >= 6 and 1 <= back <= into


def test_generation_is_deterministic(header, tmp_path):
    proc, out = generate(header, tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    proc, out = generate(header, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{out}: 0 written, 2 unchanged\n"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    # Another directory, the same command text: byte-identical.
    other = tmp_path / "again"
    other.mkdir()
    (other / "demo.qmpi").write_text(SPEC)
    proc = run_cli("scaffold-tool", "demo.qmpi", "--mpi-header", str(header), "--mpicc", "cc", "-o", "out", cwd=other)
    assert proc.returncode == 0, proc.stderr
    assert {p.name: p.read_bytes() for p in (other / "out").iterdir()} == first


def test_checksums():
    text = "/* banner */\n/* qmpigen-checksum: " + "0" * 64 + " (note) */\nint x;\n"
    stamped = stamp(text)
    assert intact(stamped) is True
    assert intact(stamped.replace("int x;", "int y;")) is False
    assert intact("int x;\n") is None


# -- the user-code rule ----------------------------------------------------------------------


def test_edited_output_is_never_overwritten_without_force(header, tmp_path):
    proc, out = generate(header, tmp_path)
    assert proc.returncode == 0, proc.stderr
    edited = (out / "demo.c").read_text().replace('puts("bye");', 'puts("my change");')
    (out / "demo.c").write_text(edited)
    changed_spec = SPEC.replace("bye", "ciao")
    proc, out = generate(header, tmp_path, changed_spec)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"qmpigen: error: {out}/demo.c: refusing to overwrite {out}/demo.c (edited since qmpigen wrote it): "
        "put your code in the spec and regenerate, or pass --force to overwrite\n"
    )
    assert (out / "demo.c").read_text() == edited  # nothing written, not even the Makefile
    proc, out = generate(header, tmp_path, changed_spec, "--force")
    assert proc.returncode == 0, proc.stderr
    assert 'puts("ciao");' in (out / "demo.c").read_text()


def test_foreign_files_are_never_overwritten_without_force(header, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "Makefile").write_text("all:\n\techo mine\n")
    proc, out = generate(header, tmp_path)
    assert proc.returncode == 2
    assert "(not written by qmpigen: no checksum line)" in proc.stderr
    assert (out / "Makefile").read_text() == "all:\n\techo mine\n"
    assert not (out / "demo.c").exists()


@pytest.mark.parametrize("force", [(), ("--force",)])
def test_an_output_that_is_a_file_is_a_path_error(header, tmp_path, force):
    # Review finding: without --force this read "refusing to overwrite f/Makefile
    # (unreadable)"; the cause is the path, with or without --force.
    (tmp_path / "out").write_text("my notes\n")
    proc, out = generate(header, tmp_path, SPEC, *force)
    assert proc.returncode == 2
    assert proc.stderr == f"qmpigen: error: cannot write {out}: output {out} exists and is not a directory\n"
    assert out.read_text() == "my notes\n"


def test_unedited_outputs_are_regenerated_from_a_changed_spec(header, tmp_path):
    proc, out = generate(header, tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc, out = generate(header, tmp_path, SPEC.replace("bye", "ciao"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{out}: 1 written, 1 unchanged\n"
    assert 'puts("ciao");' in (out / "demo.c").read_text()


def test_check_mode(header, tmp_path):
    proc, out = generate(header, tmp_path, SPEC, "--check")
    assert proc.returncode == 1 and not out.exists()
    assert proc.stdout == f"{out}/Makefile: would change\n{out}/demo.c: would change\n"
    generate(header, tmp_path)
    proc, out = generate(header, tmp_path, SPEC, "--check")
    assert proc.returncode == 0 and proc.stdout == f"{out}: up to date (2 files)\n"


# -- the quick form --------------------------------------------------------------------------


def quick(header, out, *args):
    return scaffold(header, "--name", "trace", "--intercept", "MPI_Send,MPI_Recv,MPI_File_*", *args, "-o", str(out))


def test_quick_form_writes_the_equivalent_spec(header, tmp_path):
    out = tmp_path / "trace"
    proc = quick(header, out)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["Makefile", "trace.c", "trace.qmpi"]
    spec = (out / "trace.qmpi").read_text()
    assert "\ntool trace;\n" in spec and "\nintercept MPI_Send, MPI_Recv, MPI_File_* {\n" in spec
    assert "#   qmpigen scaffold-tool trace.qmpi --mpi-header mpich_like_mpi.h --mpicc cc -o trace\n" in spec
    source = (out / "trace.c").read_text()
    for name in ("Send", "Recv", "File_open", "File_close", "File_c2f"):
        assert f'[_MPI_{name}] = "trace_{name}"' in source
    # The written spec regenerates exactly the same files: the user carries on from it.
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    proc = scaffold(header, str(out / "trace.qmpi"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{out}: 0 written, 2 unchanged\n"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # The quick form again: nothing changes.
    proc = quick(header, out)
    assert proc.returncode == 0 and proc.stdout == f"{out}: 0 written, 3 unchanged\n"


def test_quick_form_never_overwrites_an_edited_spec(header, tmp_path):
    out = tmp_path / "trace"
    assert quick(header, out).returncode == 0
    spec = out / "trace.qmpi"
    spec.write_text(spec.read_text() + "\non init %{ %}\n")
    proc = quick(header, out)
    assert proc.returncode == 2
    assert "(a spec that differs from the one this command would write)" in proc.stderr
    assert spec.read_text().endswith("\non init %{ %}\n")
    assert quick(header, out, "--force").returncode == 0
    assert not spec.read_text().endswith("\non init %{ %}\n")


def test_quick_form_prefix(header, tmp_path):
    proc = quick(header, tmp_path / "t", "--prefix", "TR")
    assert proc.returncode == 0, proc.stderr
    assert "\ntool trace prefix TR;\n" in (tmp_path / "t" / "trace.qmpi").read_text()
    assert '[_MPI_Send] = "TR_Send"' in (tmp_path / "t" / "trace.c").read_text()


# -- errors: one line, exit 2, nothing written -------------------------------------------------


@pytest.mark.parametrize(
    "spec_text, message",
    [
        ("tool demo\nintercept MPI_Send;", "demo.qmpi:2:1: expected ';' or 'prefix', found 'intercept'"),
        (
            "tool demo;\nintercept MPI_Sendd;",
            "demo.qmpi:2:11: unknown MPI function MPI_Sendd; did you mean MPI_Send or MPI_Send_c or MPI_Isend?",
        ),
        (
            "tool demo;\nintercept MPI_Send;\nintercept MPI_Send, MPI_Recv;",
            "demo.qmpi:3:11: MPI_Send is already intercepted ('MPI_Send' at {dir}/demo.qmpi:2:11)",
        ),
        (
            "tool demo;\nintercept MPI_File_x*;",
            "demo.qmpi:2:11: 'MPI_File_x*' matches no function of MPICH 9.9.9 (MPI 4.1)",
        ),
    ],
)
def test_spec_errors(header, tmp_path, spec_text, message):
    proc, out = generate(header, tmp_path, spec_text)
    assert proc.returncode == 2
    assert proc.stderr == f"qmpigen: error: {tmp_path}/{message.format(dir=tmp_path)}\n"
    assert proc.stdout == "" and not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--name", "trace", "--intercept", "MPI_Send,MPI_Recvv"],
            "--intercept:1:10: unknown MPI function MPI_Recvv; did you mean MPI_Recv?",
        ),
        (
            ["--name", "trace", "--intercept", "MPI_Send,,MPI_Recv"],
            "--intercept:1:10: expected a function name, glob or group, found ','",
        ),
        (
            ["--name", "trace", "--intercept", "collectives except MPI_Send"],
            "--intercept:1:20: 'MPI_Send' excludes nothing: it matches none of the functions of 'collectives'",
        ),
        (
            ["--name", "my tool", "--intercept", "MPI_Send"],
            "--name 'my tool': a tool name is a C identifier (letters, digits, _)",
        ),
        (
            ["--name", "t", "--prefix", "MPI", "--intercept", "MPI_Send"],
            "--prefix: prefix 'MPI' would make the wrappers MPI_Send, ...: names MPI or QMPI already use; "
            "choose another prefix",
        ),
        (
            ["--name", "t", "--intercept", "MPI_Send; code %{ x %}"],
            "--intercept 'MPI_Send; code %{ x %}': a comma-separated list of functions, globs and groups",
        ),
        (["--name", "trace"], "give a SPEC file, or --name NAME and --intercept LIST (quick form)"),
        (
            ["spec.qmpi", "--name", "trace", "--intercept", "MPI_Send"],
            "give a SPEC file or --name/--intercept, not both",
        ),
        (["missing.qmpi"], "missing.qmpi: cannot read spec: No such file or directory"),
    ],
)
def test_command_line_errors(header, tmp_path, args, message):
    out = tmp_path / "out"
    proc = run_cli("scaffold-tool", *args, "--mpi-header", str(header), "--mpicc", "cc", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"qmpigen: error: {message}\n"
    assert not out.exists()
