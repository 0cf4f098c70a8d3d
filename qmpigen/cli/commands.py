"""The command line (click) over qmpigen.api. Every user error becomes one line on stderr and exit 2."""

from __future__ import annotations

import json
import os
import sys
from typing import Dict, Optional, Sequence, Union

import click

from qmpigen import __version__, api
from qmpigen.cli.listing import (
    dump_api,
    fortran_line,
    fortran_listing,
    fortran_manifest,
    group_members,
    groups_listing,
    groups_table,
    manifest,
    named_groups,
    roles_listing,
    source_line,
)
from qmpigen.cli.options import (
    complete_group,
    fortran_option,
    header_options,
    inform,
    mpi_source,
    regeneration_command,
    report_writes,
    selection_options,
)
from qmpigen.cli.scaffold import scaffold_tool
from qmpigen.errors import QmpigenError
from qmpigen.escape import EscapeError, printable

EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="qmpigen")
@click.option(
    "-q", "--quiet", is_flag=True, help="Print results and errors only: not which MPI was read, nor what was written."
)
def cli(quiet: bool) -> None:
    """Generate QMPI, the multi-tool MPI interception layer, for the installed MPI.

    \b
    Examples:
      qmpigen build-core -o core && make -C core -j2
      qmpigen scaffold-tool --name mytool --intercept 'MPI_Send,collectives' -o mytool
      qmpigen groups collectives        # what a spec's group names select
      qmpigen examples qmpi-examples    # the docs, sample tools and demo app
    Run 'qmpigen COMMAND --help' for a command's options and examples.
    """


@cli.command()
@header_options
@selection_options
@click.option("--json", "as_json", is_flag=True, help="Print the enumeration manifest as JSON.")
@click.option("-d", "--dump", is_flag=True, help="Print everything parsed from mpi.h (for debugging a new MPI).")
@click.option(
    "--group",
    "group_names",
    multiple=True,
    metavar="NAME",
    shell_complete=complete_group,
    help="Only functions of a built-in group ('qmpigen groups' lists them); repeatable.",
)
@click.option("--roles", is_flag=True, help="Print each function's kind and its parameters' roles instead.")
@fortran_option
def functions(
    mpi_header, mpicc, cflags, include, exclude, mpix, as_json, dump, group_names, roles, fortran_mode
) -> None:
    """List the MPI function enumeration: index, enum name, return type, signature.

    \b
    Examples:
      qmpigen functions                          # the MPI of the mpicc on PATH
      qmpigen functions --mpicc /opt/mpich/bin/mpicc --group io
      qmpigen functions --json > manifest.json   # for CI: diff when the MPI changes
      qmpigen functions -d                       # everything parsed from mpi.h
      qmpigen functions --mpicc mpicc.openmpi    # with its Fortran routes (mpif90.openmpi)
      qmpigen functions --roles --group io       # what each parameter is: file, offset, count, ...

    Where the MPI has Fortran bindings, a last section tells per function whether its
    Fortran routines (mpif.h / use mpi, use mpi_f08) go through the core's entries and
    the chain, or stay with the MPI's own binding, and why.
    """
    source = mpi_source(mpi_header, mpicc, cflags, include, exclude, mpix)
    if dump:  # the model as parsed, before any selection
        click.echo(dump_api(api.read_model(source)[1]), nl=False)
        return
    enumeration, fortran = api.functions(api.read_mpi(source), fortran_mode)
    if as_json:
        click.echo(json.dumps(dict(manifest(enumeration), fortran=fortran_manifest(fortran)), indent=1))
        return
    selected = None
    if group_names:
        selected = {name for group in named_groups(group_names) for name in group_members(group, enumeration)}
    click.echo(f"# {enumeration.facts.title}: {len(enumeration)} functions, enumeration {enumeration.hash}")
    if roles:
        click.echo(roles_listing(enumeration, selected), nl=False)
        return
    width = max(len(f.enum) for f in enumeration)
    rwidth = max(len(f.return_type) for f in enumeration)
    for index, function in enumerate(enumeration):
        if selected is None or function.name in selected:
            click.echo(
                f"{index:4d}  {function.enum:<{width}}  {function.return_type:<{rwidth}}  "
                f"{function.name}({function.params_c})"
            )
    if fortran is not None:
        click.echo(fortran_listing(fortran, selected), nl=False)


@cli.command()
@click.argument("names", nargs=-1, metavar="[NAME]...", shell_complete=complete_group)
@header_options
@selection_options
def groups(names, mpi_header, mpicc, cflags, include, exclude, mpix) -> None:
    """List the built-in function groups of the tool spec language for this MPI.

    Without NAME: every group, its number of functions here and what it holds. With
    NAMEs: the functions of each group, one per line, as a spec would select them.

    \b
    Examples:
      qmpigen groups
      qmpigen groups collectives one-sided
      qmpigen groups io --mpicc mpicc.openmpi
    """
    enumeration = api.read_mpi(mpi_source(mpi_header, mpicc, cflags, include, exclude, mpix)).enumeration
    click.echo(groups_listing(names, enumeration) if names else groups_table(enumeration), nl=False)


@cli.command("build-core")
@header_options
@selection_options
@click.option("-o", "--output", required=True, metavar="DIR", help="Directory for the core's sources and Makefile.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the files that would change.")
@fortran_option
@click.pass_context
def build_core(ctx, mpi_header, mpicc, cflags, include, exclude, mpix, output, check, fortran_mode) -> None:
    """Generate the QMPI core (qmpi.h, C sources, Makefile) for the installed MPI.

    Prints on stderr which MPI it read (implementation, version, number of functions)
    and from where (header, compiler driver); the generated qmpi.h refuses any other
    MPI's mpi.h at compile time.

    \b
    Examples:
      qmpigen build-core -o core && make -C core -j2
      qmpigen build-core --mpicc /opt/openmpi/bin/mpicc -o core-openmpi
      qmpigen build-core --exclude 'MPI_T_*' -o core
      qmpigen build-core -o core --check     # CI: exit 1 if core/ is stale
    """
    mpi = api.read_mpi(mpi_source(mpi_header, mpicc, cflags, include, exclude, mpix))
    core = api.build_core(mpi, regeneration_command(ctx), fortran_mode)
    inform(source_line(mpi.source, mpi.enumeration), err=True)
    if core.fortran is not None or fortran_mode != "auto":
        inform(fortran_line(core.fortran, fortran_mode), err=True)
    report_writes(output, api.write(output, core.files, check=check), check)


@cli.command()
@click.argument("directory", metavar="DIR")
@click.option("--force", is_flag=True, help="Overwrite files in DIR that differ from the shipped ones.")
def examples(directory, force) -> None:
    """Write the documentation and the sample tools shipped with qmpigen into DIR.

    DIR/docs/ holds the manual (Markdown pages: installing, the core, the spec
    language, tracing, performance, ...); DIR/sample_tools/ the hand-written tools
    (printer.c, tbcast.c, the trace tool in trace/), the tool specs (*.qmpi), the demo application
    and the Makefile that builds them against a core.

    \b
    Examples:
      qmpigen examples qmpi-examples
      qmpigen build-core -o qmpi-examples/build/core && make -C qmpi-examples/build/core
      make -C qmpi-examples/sample_tools CORE=../build/core
    """
    from qmpigen.output.examples import shipped_examples

    files = shipped_examples()
    if not force:
        refuse_overwrite(directory, files)
    report_writes(directory, api.write(directory, files), check=False)


@cli.command()
@click.argument("directory", metavar="DIR")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="OUT",
    help="Directory for the merged trace: made, or an earlier merge's output replaced (nothing else is).",
)
@click.option("--level", type=int, default=None, metavar="N", help="The trace tool instance at chain level N.")
def trace(directory, output, level) -> None:
    """Merge the rank files of the trace tool (sample_tools/trace/) in DIR into OUT: an OTF2 archive
    (traces.otf2), Perfetto JSON (trace.json), a timeline (timeline.png), summary.txt.

    \b
    Examples:
      QMPI_TOOLS=./libtrace.so QMPI_TRACE_DIR=run mpiexec -n 4 ./app
      qmpigen trace run -o run-merged && otf2-print run-merged/traces.otf2
    """
    from pathlib import Path

    try:
        from qmpigen.trace.merge import run
    except ModuleNotFoundError as exc:  # numpy, otf2 or matplotlib: the trace extra is not installed
        if (exc.name or "").split(".")[0] not in ("numpy", "otf2", "_otf2", "matplotlib"):
            raise
        raise click.UsageError("qmpigen trace needs its extra: pip install 'qmpigen[trace]'") from None

    sys.exit(run(Path(directory), Path(output), level, lambda line: click.echo(line, err=True)))


cli.add_command(scaffold_tool)


def refuse_overwrite(directory: str, files: Dict[str, Union[str, bytes]]) -> None:
    """Examples are the user's to edit once written: never overwrite an edit silently."""
    for name in sorted(files):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            shipped = files[name]
            with open(path, "rb") as handle:
                if handle.read() != (shipped if isinstance(shipped, bytes) else shipped.encode("utf-8")):
                    raise QmpigenError(f"{path} exists and differs from the shipped file (use --force to overwrite)")


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Entry point: one line per error, never a traceback for bad input."""
    try:
        cli.main(args=argv, prog_name="qmpigen", standalone_mode=False)
    except QmpigenError as exc:
        click.echo(f"qmpigen: error: {exc.one_line()}", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(
            f"qmpigen: error: {' '.join(printable(exc.format_message().replace(chr(10), ' ')).split())}", err=True
        )
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("qmpigen: error: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
    except EscapeError as exc:  # a value a generated file cannot hold (a line break in a Makefile value)
        click.echo(f"qmpigen: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except OSError as exc:
        where = f": {printable(exc.filename)}" if exc.filename else ""
        click.echo(f"qmpigen: error: {exc.strerror or exc}{where}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a bug in qmpigen: still one line, traceback on request
        if os.environ.get("QMPIGEN_DEBUG"):
            raise
        click.echo(
            f"qmpigen: internal error: {type(exc).__name__}: {exc} (set QMPIGEN_DEBUG=1 for a traceback)", err=True
        )
        sys.exit(3)
    sys.exit(0)
