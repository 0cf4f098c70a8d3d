"""The command line (click) over qmpigen.api. Every user error becomes one line on stderr and exit 2."""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Dict, List, Optional, Sequence

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
from qmpigen.errors import QmpigenError
from qmpigen.mpi.groups import GROUPS
from qmpigen.mpi.select import Selection
from qmpigen.output.write import WriteReport
from qmpigen.spec.tool import Interface

EXIT_USAGE = 2


def mpi_source(
    mpi_header: str, mpicc: Optional[str], cflags: Sequence[str], include=(), exclude=(), mpix=False
) -> api.MpiSource:
    return api.MpiSource(mpi_header, mpicc, tuple(cflags), Selection(tuple(include), tuple(exclude), mpix))


def header_options(func):
    """Options shared by every command that reads mpi.h."""
    options = [
        click.option(
            "--mpi-header",
            default="auto",
            show_default=True,
            metavar="auto|PATH",
            help="mpi.h to read; 'auto' asks the compiler driver for its own.",
        ),
        click.option("--mpicc", default=None, metavar="DRIVER", help="MPI compiler driver (default: mpicc on PATH)."),
        click.option(
            "--cflag", "cflags", multiple=True, metavar="FLAG", help="Extra preprocessor flag (-I, -D); repeatable."
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def fortran_option(func):
    return click.option(
        "--fortran",
        "fortran_mode",
        default="auto",
        show_default=True,
        metavar="auto|none|DRIVER",
        help="Fortran entry points: 'auto' reads the Fortran driver beside mpicc (mpif90), "
        "'none' generates none, or name the driver (mpif90.mpich).",
    )(func)


def selection_options(func):
    options = [
        click.option("--include", multiple=True, metavar="GLOB", help="Only functions matching GLOB; repeatable."),
        click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out functions matching GLOB; repeatable."),
        click.option("--mpix", is_flag=True, help="Also intercept MPIX_ extensions."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def complete_group(ctx, param, incomplete):
    """Shell completion of group names (they are data, the same for every MPI)."""
    return [g.name for g in GROUPS if g.name.startswith(incomplete)]


# Options that say how to run, not what to generate: left out of banners.
NOT_IN_BANNER = frozenset({"check", "quiet"})
# Defaults that the banner still spells out, because they say where the model came from.
SHOWN_WHEN_DEFAULT = frozenset({"mpi_header"})
# Compiler drivers are recorded as given: `--mpicc /opt/mpich/bin/mpicc` names another MPI
# than `--mpicc mpicc` on a machine whose PATH finds a system MPI first.
AS_GIVEN = frozenset({"mpicc", "fortran_mode"})


def regeneration_command(ctx: click.Context) -> str:
    """The command that regenerates an output, for its banner: canonical (same options,
    same text, whatever their order) and free of absolute paths, but for compiler
    drivers, which are recorded as given (AS_GIVEN)."""
    words: List[str] = ["qmpigen", ctx.info_name or ""]

    def text(value, as_given: bool = False) -> str:
        value = str(value)
        return shlex.quote(os.path.basename(value) if os.path.isabs(value) and not as_given else value)

    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name in NOT_IN_BANNER or value is None or value == () or value is False:
            continue
        if isinstance(param, click.Option) and value == param.default and param.name not in SHOWN_WHEN_DEFAULT:
            continue
        if isinstance(param, click.Argument):
            words.extend(text(v) for v in (value if isinstance(value, tuple) else (value,)))
            continue
        flag = max(param.opts, key=len) if param.name != "output" else "-o"
        if getattr(param, "is_flag", False):
            words.append(flag)
        elif isinstance(value, tuple):
            for item in value:
                words += [flag, text(item)]
        else:
            words += [flag, text(value, param.name in AS_GIVEN)]
    return " ".join(words)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="qmpigen")
def cli() -> None:
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
    click.echo(source_line(mpi.source, mpi.enumeration), err=True)
    if core.fortran is not None or fortran_mode != "auto":
        click.echo(fortran_line(core.fortran, fortran_mode), err=True)
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
@click.option("-o", "--output", required=True, metavar="OUT", help="Directory for the merged trace (replaced).")
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


@cli.command("scaffold-tool")
@click.argument("spec", required=False, metavar="[SPEC]")
@click.option("--name", default=None, metavar="NAME", help="Quick form: the tool's name (writes DIR/NAME.qmpi too).")
@click.option(
    "--intercept",
    default=None,
    metavar="LIST",
    help="Quick form: functions, globs and groups, e.g. 'MPI_Send,MPI_File_*'.",
)
@click.option("--prefix", default=None, metavar="PREFIX", help="Quick form: wrapper symbol prefix (default: NAME).")
@header_options
@selection_options
@click.option("-o", "--output", required=True, metavar="DIR", help="Directory for NAME.c and its Makefile.")
@click.option(
    "--interface",
    type=click.Choice([i.value for i in Interface]),
    default=Interface.THESIS.value,
    show_default=True,
    help="thesis: wrappers found through get_interceptions (TOOLS=); callback: the MPI Forum / MPICH "
    "interface, registered from a constructor (QMPI_TOOL_LIST=).",
)
@click.option("--force", is_flag=True, help="Overwrite files that were edited or not written by qmpigen.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the files that would change.")
@click.pass_context
def scaffold_tool(
    ctx,
    spec,
    name,
    intercept,
    prefix,
    mpi_header,
    mpicc,
    cflags,
    include,
    exclude,
    mpix,
    output,
    interface,
    force,
    check,
) -> None:
    """Generate a QMPI tool (NAME.c, Makefile) from a spec, or from --name/--intercept.

    The outputs are generated from the spec alone: edit the spec and rerun. A file that
    was edited since qmpigen wrote it is never overwritten without --force. The
    --include/--exclude/--mpix options must match those the core was built with.

    \b
    Examples:
      qmpigen scaffold-tool --name sendcount --intercept 'MPI_Send,MPI_Isend' -o sendcount
      qmpigen scaffold-tool sendcount/sendcount.qmpi -o sendcount   # after editing the spec
      qmpigen scaffold-tool counter.qmpi --interface callback -o cbcounter
      make -C sendcount QMPI_CORE=../core && TOOLS=./sendcount/libsendcount.so mpiexec -n 2 ./app
    The spec language: docs/spec-language.md ('qmpigen examples DIR' writes it out).
    """
    from qmpigen.output.scaffold import guard, quick_error, quick_spec
    from qmpigen.spec.parse import load_spec
    from qmpigen.spec.values import SPEC_SUFFIX

    quick = name is not None or intercept is not None or prefix is not None
    if spec is not None and quick:
        raise click.UsageError("give a SPEC file or --name/--intercept, not both")
    if spec is None and not (name and intercept):
        raise click.UsageError("give a SPEC file, or --name NAME and --intercept LIST (quick form)")

    user_files = []
    files = {}
    if quick:
        spec_name = name + SPEC_SUFFIX
        # The banner's regeneration command is the spec form: the user carries on from the spec.
        saved = dict(ctx.params)
        ctx.params.update(spec=os.path.join(output, spec_name), name=None, intercept=None, prefix=None, force=False)
        command = regeneration_command(ctx)
        ctx.params.clear()
        ctx.params.update(saved)
        text, tool_spec = quick_spec(name, prefix, intercept, command)
        files[spec_name] = text
        user_files.append(spec_name)
    else:
        tool_spec = load_spec(spec)
        saved = dict(ctx.params)
        ctx.params["force"] = False
        command = regeneration_command(ctx)
        ctx.params.clear()
        ctx.params.update(saved)

    mpi = api.read_mpi(mpi_source(mpi_header, mpicc, cflags, include, exclude, mpix))
    try:
        tool = api.resolve_tool(mpi, tool_spec, interface)
    except QmpigenError as exc:
        raise (quick_error(exc) if quick else exc) from None
    files.update(api.scaffold_tool(mpi, tool, command))
    if not check:
        guard(output, files, force, user_files)
    report = api.write(output, files, check=check)
    # Which MPI the tool was generated for: a tool builds only against a core of the same MPI.
    click.echo(source_line(mpi.source, mpi.enumeration), err=True)
    report_writes(output, report, check)


def refuse_overwrite(directory: str, files: Dict[str, str]) -> None:
    """Examples are the user's to edit once written: never overwrite an edit silently."""
    for name in sorted(files):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace", newline="") as handle:
                if handle.read() != files[name]:
                    raise QmpigenError(f"{path} exists and differs from the shipped file (use --force to overwrite)")


def report_writes(output: str, report: WriteReport, check: bool) -> None:
    if check:
        if report.changed:
            for name in report.changed:
                click.echo(f"{os.path.join(output, name)}: would change")
            sys.exit(1)
        click.echo(f"{output}: up to date ({len(report.unchanged)} files)")
        return
    click.echo(f"{output}: {len(report.changed)} written, {len(report.unchanged)} unchanged")


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
        click.echo(f"qmpigen: error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("qmpigen: error: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
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
