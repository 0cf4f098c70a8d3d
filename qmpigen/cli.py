"""Stage 6: the command line. Every user error becomes one line on stderr and exit 2."""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import List, Optional, Sequence

import click

from . import __version__
from .errors import QmpigenError
from .header import HeaderRequest, read_header
from .model import Enumeration, MpiApi, MpiFunction
from .parse import parse_header
from .render import GeneratorInfo, render_core
from .select import Selection, enumerate_functions
from .write import WriteReport, write_outputs

EXIT_USAGE = 2


def load_api(mpi_header: str, mpicc: Optional[str], cflags: Sequence[str]) -> MpiApi:
    return parse_header(read_header(HeaderRequest(mpi_header, mpicc, tuple(cflags))))


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
        click.option("--cflag", "cflags", multiple=True, metavar="FLAG", help="Extra preprocessor flag (-I, -D); repeatable."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def selection_options(func):
    options = [
        click.option("--include", multiple=True, metavar="GLOB", help="Only functions matching GLOB; repeatable."),
        click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out functions matching GLOB; repeatable."),
        click.option("--mpix", is_flag=True, help="Also intercept MPIX_ extensions."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


# Options that say how to run, not what to generate: left out of banners.
NOT_IN_BANNER = frozenset({"check", "quiet"})
# Defaults that the banner still spells out, because they say where the model came from.
SHOWN_WHEN_DEFAULT = frozenset({"mpi_header"})


def regeneration_command(ctx: click.Context) -> str:
    """The command that regenerates an output, for its banner: canonical (same options,
    same text, whatever their order) and free of absolute paths."""
    words: List[str] = ["qmpigen", ctx.info_name or ""]

    def text(value) -> str:
        value = str(value)
        return shlex.quote(os.path.basename(value) if os.path.isabs(value) else value)

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
            words += [flag, text(value)]
    return " ".join(words)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="qmpigen")
def cli() -> None:
    """Generate QMPI, the multi-tool MPI interception layer, for the installed MPI."""


@cli.command()
@header_options
@selection_options
@click.option("--json", "as_json", is_flag=True, help="Print the enumeration manifest as JSON.")
@click.option("-d", "--dump", is_flag=True, help="Print everything parsed from mpi.h (for debugging a new MPI).")
def functions(mpi_header, mpicc, cflags, include, exclude, mpix, as_json, dump) -> None:
    """List the MPI function enumeration: index, enum name, return type, signature."""
    api = load_api(mpi_header, mpicc, cflags)
    if dump:
        click.echo(dump_api(api), nl=False)
        return
    enumeration = enumerate_functions(api, Selection(tuple(include), tuple(exclude), mpix))
    if as_json:
        click.echo(json.dumps(manifest(enumeration), indent=1))
        return
    facts = enumeration.facts
    click.echo(
        f"# {facts.implementation} {facts.version} (MPI {facts.mpi_version}.{facts.mpi_subversion}): "
        f"{len(enumeration)} functions, enumeration {enumeration.hash}"
    )
    width = max(len(f.enum) for f in enumeration)
    rwidth = max(len(f.return_type) for f in enumeration)
    for index, function in enumerate(enumeration):
        click.echo(
            f"{index:4d}  {function.enum:<{width}}  {function.return_type:<{rwidth}}  {function.name}({function.params_c})"
        )


@cli.command("build-core")
@header_options
@selection_options
@click.option("-o", "--output", required=True, metavar="DIR", help="Directory for the core's sources and Makefile.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the files that would change.")
@click.pass_context
def build_core(ctx, mpi_header, mpicc, cflags, include, exclude, mpix, output, check) -> None:
    """Generate the QMPI core (qmpi.h, C sources, Makefile) for the installed MPI."""
    api = load_api(mpi_header, mpicc, cflags)
    enumeration = enumerate_functions(api, Selection(tuple(include), tuple(exclude), mpix))
    files = render_core(enumeration, GeneratorInfo.for_enumeration(enumeration, regeneration_command(ctx)))
    report_writes(output, write_outputs(output, files, check=check), check)


@cli.command("scaffold-tool")
@click.argument("spec", required=False, metavar="[SPEC]")
@click.option("--name", default=None, metavar="NAME", help="Quick form: the tool's name (writes DIR/NAME.qmpi too).")
@click.option(
    "--intercept", default=None, metavar="LIST", help="Quick form: functions, globs and groups, e.g. 'MPI_Send,MPI_File_*'."
)
@click.option("--prefix", default=None, metavar="PREFIX", help="Quick form: wrapper symbol prefix (default: NAME).")
@header_options
@selection_options
@click.option("-o", "--output", required=True, metavar="DIR", help="Directory for NAME.c and its Makefile.")
@click.option(
    "--interface",
    type=click.Choice(["thesis", "callback"]),
    default="thesis",
    show_default=True,
    help="thesis: wrappers found through get_interceptions (TOOLS=); callback: the MPI Forum / MPICH "
    "interface, registered from a constructor (QMPI_TOOL_LIST=).",
)
@click.option("--force", is_flag=True, help="Overwrite files that were edited or not written by qmpigen.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the files that would change.")
@click.pass_context
def scaffold_tool(
    ctx, spec, name, intercept, prefix, mpi_header, mpicc, cflags, include, exclude, mpix, output, interface, force, check
) -> None:
    """Generate a QMPI tool (NAME.c, Makefile) from a spec, or from --name/--intercept.

    The outputs are generated from the spec alone: edit the spec and rerun. A file that
    was edited since qmpigen wrote it is never overwritten without --force. The
    --include/--exclude/--mpix options must match those the core was built with.
    """
    from .scaffold import guard, quick_error, quick_spec, render_tool
    from .spec import SPEC_SUFFIX, load_spec, resolve

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

    api = load_api(mpi_header, mpicc, cflags)
    enumeration = enumerate_functions(api, Selection(tuple(include), tuple(exclude), mpix))
    try:
        tool = resolve(tool_spec, enumeration, api, interface)
    except QmpigenError as exc:
        raise quick_error(exc) if quick else exc
    files.update(render_tool(tool, GeneratorInfo.for_enumeration(enumeration, command), len(enumeration)))
    if not check:
        guard(output, files, force, user_files)
    report_writes(output, write_outputs(output, files, check=check), check)


def report_writes(output: str, report: WriteReport, check: bool) -> None:
    if check:
        if report.changed:
            for name in report.changed:
                click.echo(f"{os.path.join(output, name)}: would change")
            sys.exit(1)
        click.echo(f"{output}: up to date ({len(report.unchanged)} files)")
        return
    click.echo(f"{output}: {len(report.changed)} written, {len(report.unchanged)} unchanged")


def manifest(enumeration: Enumeration) -> dict:
    return {
        "mpi": dict(enumeration.facts.as_dict(), count=len(enumeration), enumeration=enumeration.hash),
        "functions": [
            {
                "index": index,
                "name": f.name,
                "enum": f.enum,
                "forum_enum": f.forum_enum,
                "return_type": f.return_type,
                "signature": f.signature,
                "params": [
                    {
                        "name": p.name,
                        "type": p.type,
                        "declaration": p.declaration,
                        "pointer": p.is_pointer,
                        "array": p.is_array,
                        "const": p.is_const,
                        "function_pointer": p.is_function_pointer,
                    }
                    for p in f.params
                ],
                "variadic": f.variadic,
                "categories": list(f.categories),
            }
            for index, f in enumerate(enumeration)
        ],
    }


def dump_api(api: MpiApi) -> str:
    facts = api.facts
    lines = [
        f"header: {facts.implementation} {facts.version}, MPI {facts.mpi_version}.{facts.mpi_subversion}, "
        f"declares QMPI: {'yes' if facts.declares_qmpi else 'no'}, "
        f"forum enum members: {len(facts.forum_enum)}",
        f"functions declared (MPI_/MPIX_): {len(api)}",
    ]
    for f in api:
        flags = [k for k, v in (("pmpi", f.has_pmpi), ("macro", f.is_macro), ("variadic", f.variadic)) if v]
        lines.append(f"{f.location}: {f.signature}")
        lines.append(f"    flags: {' '.join(flags) or '-'}; categories: {' '.join(f.categories) or '-'}")
        for p in f.params:
            traits = [
                k
                for k, v in (
                    ("pointer", p.is_pointer),
                    ("array", p.is_array),
                    ("const", p.is_const),
                    ("function-pointer", p.is_function_pointer),
                )
                if v
            ]
            promoted = f", promoted to {p.promoted_type}" if p.promoted_type else ""
            lines.append(
                f"    {p.name}: type '{p.type}', passed as '{p.va_type}', base '{p.base_type}'"
                f"{', ' + ' '.join(traits) if traits else ''}{promoted}"
            )
    return "\n".join(lines) + "\n"


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
