"""`qmpigen scaffold-tool`: a tool's C file and Makefile from a spec, or from the quick
form (--name/--intercept), which writes the spec too."""

from __future__ import annotations

import os

import click

from qmpigen import api
from qmpigen.cli.listing import source_line
from qmpigen.cli.options import (
    complete_intercept,
    header_options,
    inform,
    mpi_source,
    regeneration_command,
    report_writes,
    selection_options,
)
from qmpigen.errors import QmpigenError
from qmpigen.spec.tool import Interface


@click.command("scaffold-tool")
@click.argument("spec", required=False, metavar="[SPEC]")
@click.option("--name", default=None, metavar="NAME", help="Quick form: the tool's name (writes DIR/NAME.qmpi too).")
@click.option(
    "--intercept",
    default=None,
    metavar="LIST",
    shell_complete=complete_intercept,
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
    inform(source_line(mpi.source, mpi.enumeration), err=True)
    report_writes(output, report, check)
