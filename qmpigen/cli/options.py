"""What the commands share: the options that say which MPI to read and what to select,
shell completion, the command that regenerates an output (its banner), and the lines
that say what was written (which `qmpigen --quiet` leaves out)."""

from __future__ import annotations

import os
import sys
from typing import List, Optional, Sequence

import click

from qmpigen import api
from qmpigen.escape import printable, shell_word
from qmpigen.mpi.groups import GROUPS
from qmpigen.mpi.select import Selection
from qmpigen.output.write import WriteReport


def inform(text: str, err: bool = False) -> None:
    """A line that says what happened (not a result, not an error): none under --quiet."""
    context = click.get_current_context(silent=True)
    if context is None or not context.find_root().params.get("quiet"):
        click.echo(text, err=err)


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


def complete_intercept(ctx, param, incomplete):
    """Shell completion of the last item of a comma-separated --intercept list: group
    names and `except`; MPI function names need an MPI, which completion does not read."""
    head, _, last = incomplete.rpartition(",")
    prefix = head + "," if head else ""
    return [prefix + name for name in [g.name for g in GROUPS] if name.startswith(last)]


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
        return shell_word(os.path.basename(value) if os.path.isabs(value) and not as_given else value)

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


def report_writes(output: str, report: WriteReport, check: bool) -> None:
    if check:
        if report.changed:
            for name in report.changed:
                click.echo(f"{printable(os.path.join(output, name))}: would change")
            sys.exit(1)
        click.echo(f"{printable(output)}: up to date ({len(report.unchanged)} files)")
        return
    inform(f"{printable(output)}: {len(report.changed)} written, {len(report.unchanged)} unchanged")
