"""What a user finds from the command line alone: the built-in groups for their MPI,
examples in --help, the docs and sample tools shipped in the package (`qmpigen examples`),
and which MPI build-core read. In process: click's CliRunner on the command group where
the exit is clean; user errors through the entry point with its one-line errors
(conftest.run_cli)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from qmpigen.cli.commands import cli
from qmpigen.mpi.groups import BY_NAME, GROUPS

from conftest import FIXTURES, REPO, SAMPLE_TOOLS, run_cli, shipped_samples

QUIRKS = FIXTURES / "quirks_mpi.h"
FIXTURE_ARGS = ("--mpi-header", str(QUIRKS), "--mpicc", "cc")

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")


@pytest.fixture(scope="module")
def enumeration(quirks_enumeration):
    return quirks_enumeration  # read and parsed once per session (conftest)


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


# -- groups ----------------------------------------------------------------------------------


def test_groups_lists_every_group_with_its_count_here(enumeration):
    lines = invoke("groups", *FIXTURE_ARGS).stdout.splitlines()
    assert lines[0].startswith("# MPICH 9.9.9 (MPI 4.1): 23 groups")
    rows = {line.split()[0]: int(line.split()[1]) for line in lines[1:]}
    assert list(rows) == [g.name for g in GROUPS]
    for group in GROUPS:
        assert rows[group.name] == sum(1 for f in enumeration if group.matches(f)), group.name
    assert rows["all"] == len(enumeration)
    assert 0 < rows["point-to-point"] < rows["all"]


def test_groups_name_lists_the_members_as_a_spec_selects_them(enumeration):
    lines = invoke("groups", "timing", "point-to-point", *FIXTURE_ARGS).stdout.splitlines()
    headings = [i for i, line in enumerate(lines) if line.startswith("# ")]
    assert [lines[i].split(":")[0] for i in headings] == ["# timing", "# point-to-point"]
    timing = lines[headings[0] + 1 : headings[1]]
    assert timing == ["MPI_Wtick", "MPI_Wtime"]
    p2p = lines[headings[1] + 1 :]
    assert p2p == [f.name for f in enumeration if BY_NAME["point-to-point"].matches(f)]
    assert "MPI_Send" in p2p and "MPI_Bcast" not in p2p


def test_functions_group_filters_the_listing(enumeration):
    lines = invoke("functions", "--group", "timing", *FIXTURE_ARGS).stdout.splitlines()
    assert lines[0].startswith("# MPICH 9.9.9")
    assert [line.split()[-1] for line in lines[1:]] == ["MPI_Wtick(void)", "MPI_Wtime(void)"]
    index = {f.name: i for i, f in enumerate(enumeration)}
    assert [int(line.split()[0]) for line in lines[1:]] == [index["MPI_Wtick"], index["MPI_Wtime"]]


def test_unknown_group_is_one_line_naming_the_groups():
    proc = run_cli("groups", "collective", *FIXTURE_ARGS)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("qmpigen: error: no built-in group named 'collective' (groups: all, ")
    assert "collectives" in proc.stderr
    proc = run_cli("functions", "--group", "nope", *FIXTURE_ARGS)
    assert proc.returncode == 2 and proc.stderr.startswith("qmpigen: error: no built-in group named 'nope'")


# -- help -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["", "functions", "groups", "build-core", "scaffold-tool", "examples"])
def test_help_carries_examples(command):
    text = invoke(*([command] if command else []), "--help").stdout
    block = text[text.index("Examples:") :].splitlines()[1:]
    examples = [line.strip() for line in block if line.startswith("    qmpigen") or line.startswith("  qmpigen")]
    assert examples, text
    if command:
        assert any(line.startswith(f"qmpigen {command}") for line in examples), text


# -- examples: the docs and samples a wheel user gets ------------------------------------------


def test_examples_writes_the_shipped_docs_and_samples(tmp_path):
    out = tmp_path / "ex"
    result = invoke("examples", str(out))
    docs = REPO / "docs"
    manual = [*docs.rglob("*.md"), *docs.glob("*.png"), *docs.glob("design/pmpi-bench/*.[cp]*")]  # what pages link
    shipped = sorted(
        [f"docs/{p.relative_to(docs).as_posix()}" for p in manual]
        + [f"sample_tools/{name}" for name in shipped_samples()]
    )
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == shipped
    assert "docs/spec-language.md" in written and "sample_tools/printer.c" in written
    for name in written:
        source = (REPO / name) if name.startswith("docs/") else SAMPLE_TOOLS / name.split("/", 1)[1]
        assert (out / name).read_bytes() == source.read_bytes(), name
    assert result.stdout.strip() == f"{out}: {len(written)} written, 0 unchanged"
    assert invoke("examples", str(out)).stdout.strip() == f"{out}: 0 written, {len(written)} unchanged"


def test_examples_never_overwrites_an_edit_without_force(tmp_path):
    out = tmp_path / "ex"
    invoke("examples", str(out))
    printer = out / "sample_tools" / "printer.c"
    printer.write_text("/* mine */\n")
    proc = run_cli("examples", str(out))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"{printer} exists and differs from the shipped file (use --force" in proc.stderr
    assert printer.read_text() == "/* mine */\n"
    invoke("examples", "--force", str(out))
    assert printer.read_bytes() == (SAMPLE_TOOLS / "printer.c").read_bytes()


# -- build-core names the MPI it read --------------------------------------------------------


def test_build_core_names_the_mpi_it_read_and_from_where(tmp_path, enumeration):
    result = CliRunner().invoke(cli, ["build-core", *FIXTURE_ARGS, "-o", str(tmp_path / "core")])
    assert result.exit_code == 0, result.output
    cc = shutil.which("cc")
    assert result.stderr == (
        f"qmpigen: read MPICH 9.9.9 (MPI 4.1) from {QUIRKS} (driver {cc}): "
        f"{len(enumeration)} functions, enumeration {enumeration.hash}\n"
    )
    assert result.stdout.startswith(f"{tmp_path / 'core'}: ")


# -- shell completion (click's, as docs/cli.md documents it) ----------------------------------


def complete(words: str) -> list:
    """What click's bash completion offers for the last word of `words` (in process)."""
    env = {"COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1), "_QMPIGEN_COMPLETE": "bash_complete"}
    proc = run_cli(env=env)
    assert proc.returncode == 0, proc.stderr
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines()]


def test_shell_completion_offers_commands_and_group_names():
    assert complete("qmpigen gr") == ["groups"]
    assert complete("qmpigen groups co") == [g.name for g in GROUPS if g.name.startswith("co")]
    assert complete("qmpigen functions --group ti") == ["timing"]


def test_intercept_lists_complete_group_names_item_by_item():
    """--intercept takes a comma-separated list: its last item completes (docs/cli.md)."""
    assert complete("qmpigen scaffold-tool --name t --intercept coll") == ["collectives"]
    assert complete("qmpigen scaffold-tool --intercept MPI_Send,one") == ["MPI_Send,one-sided"]
    assert complete("qmpigen scaffold-tool --intercept io,co") == [
        "io," + g.name for g in GROUPS if g.name.startswith("co")
    ]


@pytest.mark.slow  # a bash and a qmpigen process: `make test`, not `make test-fast`
def test_completion_in_bash_as_documented():
    """The line docs/cli.md gives for ~/.bashrc, in a real bash: Tab after --intercept."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    script = (
        'eval "$(_QMPIGEN_COMPLETE=bash_source qmpigen)"\n'
        "COMP_WORDS=(qmpigen scaffold-tool --name t --intercept MPI_Send,point); COMP_CWORD=5\n"
        "_qmpigen_completion qmpigen; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run([bash, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["MPI_Send,point-to-point"], proc.stdout + proc.stderr


@pytest.mark.slow  # seconds: `make test`, not `make test-fast`
def test_quiet_prints_results_and_errors_only(tmp_path):
    """`qmpigen --quiet` (what `make demo` runs the sample tools' specs with): no line
    naming the MPI, none saying what was written; errors still one line."""
    spec = tmp_path / "t.qmpi"
    spec.write_text("tool t;\nintercept MPI_Send;\n")
    args = ("--mpi-header", str(FIXTURES / "quirks_mpi.h"), "--mpicc", "cc")
    proc = run_cli("--quiet", "scaffold-tool", str(spec), *args, "-o", str(tmp_path / "t"))
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc.stdout + proc.stderr
    assert (tmp_path / "t" / "t.c").exists()
    proc = run_cli("-q", "build-core", *args, "-o", str(tmp_path / "core"))
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
    proc = run_cli("-q", "build-core", *args, "-o", str(tmp_path / "core"), "--check")
    assert proc.returncode == 0 and proc.stdout.startswith(f"{tmp_path / 'core'}: up to date")  # a result
    proc = run_cli("-q", "scaffold-tool", str(tmp_path / "missing.qmpi"), *args, "-o", str(tmp_path / "u"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_no_command_module_grows_past_450_lines():
    """The command line split by concern (options, scaffold-tool, the rest): each reads
    whole, none past the size the team keeps modules under."""
    for module in sorted((REPO / "qmpigen" / "cli").glob("*.py")):
        assert len(module.read_text().splitlines()) <= 450, module.name
