"""Rendering: models -> files, with one jinja2 environment and one plan per command.

A plan is (template, output file) pairs: what build-core (CORE_PLAN) and scaffold-tool
(tool_plan) write is visible here. Templates stay readable C: derived text comes from
model properties, the filters below (wrapper types and parameter lists of the QMPI
tool interface) and the global `c` (qmpigen.output.cnames: the C names generated code uses).
"""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Optional, Sequence, Tuple

import jinja2

from qmpigen import __version__, escape
from qmpigen.cache import cache_dir, read_entry, write_entry
from qmpigen.mpi.model import Enumeration, MpiFunction
from qmpigen.output.checksum import checksum_line, stamp
from qmpigen.output.cnames import C_NAMES
from qmpigen.output.resources import runtime_dir, templates_dir
from qmpigen.spec.tool import CBlock, Interface, Tool
from qmpigen.spec.values import SPEC_SUFFIX

if TYPE_CHECKING:
    from qmpigen.mpi.fortran import FortranPlan

# What build-core writes: (template, output file). The one place to see the outputs.
CORE_PLAN: Tuple[Tuple[str, str], ...] = (
    ("core/qmpi.h.j2", "qmpi.h"),
    ("core/qmpi_internal.h.j2", "qmpi_internal.h"),
    ("core/qmpi_entry.c.j2", "qmpi_entry.c"),
    ("core/qmpi_links.c.j2", "qmpi_links.c"),  # end links that report the chain, stack fan-out
    ("core/qmpi_exec.c.j2", "qmpi_exec.c"),
    ("core/qmpi_pmpi.c.j2", "qmpi_pmpi.c"),  # continuation entries of the PMPI tool slots
    ("core/qmpi_fortran.c.j2", "qmpi_fortran.c"),  # only where the MPI has Fortran bindings
    ("core/Makefile.j2", "Makefile"),
    ("core/qmpi.pc.j2", "qmpi.pc"),
    ("core/QMPIConfig.cmake.j2", "QMPIConfig.cmake"),
    ("core/QMPIConfigVersion.cmake.j2", "QMPIConfigVersion.cmake"),
    ("core/qmpirun.j2", "qmpirun"),  # its head; the body is the runtime's qmpirun.sh
)

# The fixed C of the core (qmpigen/runtime), copied byte for byte into this directory
# of the core; qmpirun.sh is the body of the generated qmpirun.
RUNTIME_SUBDIR = "runtime"
QMPIRUN_BODY = "qmpirun.sh"


@dataclass(frozen=True)
class GeneratorInfo:
    """What every banner names: generator, MPI, enumeration, how to regenerate; and the
    compiler driver the MPI was read with, as given, which the build files default to,
    and as found then (its path), which messages name: a bare `mpicc` says nothing
    where another MPI's comes first on PATH."""

    version: str
    mpi: str
    enum_hash: str
    command: str
    mpicc: str = "mpicc"
    driver_path: str = ""  # "" when it is the driver as given

    @classmethod
    def for_enumeration(
        cls, enumeration: Enumeration, command: str, mpicc: str = "mpicc", driver_path: str = ""
    ) -> "GeneratorInfo":
        return cls(__version__, enumeration.facts.title, enumeration.hash, command, mpicc, driver_path or mpicc)

    @property
    def major(self) -> str:
        return self.version.split(".")[0]

    @property
    def soname(self) -> str:
        """libqmpi's SONAME: the library is versioned as qmpigen, the SONAME by its major."""
        return f"libqmpi.so.{self.major}"


# -- filters: the QMPI wrapper interface -----------------------------------------------


def wrapper_type(function: MpiFunction) -> str:
    return f"QMPI_{function.short}_wrapper_t"


def wrapper_params(function: MpiFunction, level: str = C_NAMES.level_param, chain: str = C_NAMES.chain_param) -> str:
    """Parameters of a tool wrapper: MPI parameters, level, chain (+ va_list if variadic)."""
    parts = [p.declaration for p in function.params] + [level, chain]
    if function.variadic:
        parts.append(C_NAMES.va_param)
    return ", ".join(parts)


def wrapper_args(function: MpiFunction, level: str, chain: str = C_NAMES.chain, va: str = C_NAMES.va_args) -> str:
    parts = [p.name for p in function.params] + [level, chain]
    if function.variadic:
        parts.append(va)
    return ", ".join(parts)


def callback_params(function: MpiFunction) -> str:
    """Parameters of a callback-interface function (seed 002 / MPICH's QMPI_<Name>_t)."""
    return function.with_extra("QMPI_Context context, int tool_id", leading=True) + (
        ", ..." if function.variadic else ""
    )


def callback_args(function: MpiFunction, context: str, tool_id: str) -> str:
    return ", ".join([context, tool_id] + [p.name for p in function.params])


# Text from outside (spec strings, names, the MPI's version text) goes through the
# filter of the context it lands in (qmpigen.escape).
FILTERS = {
    "c_string": escape.c_string,  # the inside of a C string literal
    "include_name": escape.include_name,  # the inside of #include "..."
    "c_comment": escape.c_comment,  # inside /* */
    "line_comment": escape.line_comment,  # inside a # comment line
    "make_value": escape.make_value,  # a Makefile variable's value
    "pc_value": escape.pc_value,  # a pkg-config field
    "cmake_string": escape.cmake_string,  # inside a quoted CMake argument
    "shell_quote": lambda text: shlex.quote(escape.printable(text)),  # a POSIX sh word, one line
    "callback_params": callback_params,
    "callback_args": callback_args,
    "wrapper_type": wrapper_type,
    "wrapper_params": wrapper_params,
    "wrapper_args": wrapper_args,
}


class TemplateCache(jinja2.BytecodeCache):
    """Compiled templates in the user's cache (qmpigen.cache): compiling them is a third
    of what rendering a core costs. Jinja checks each entry against its template's text."""

    SUFFIX = ".jinja"
    KEEP = 64  # every template of a few qmpigen versions

    def __init__(self, directory: Path):
        self.directory = directory

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        read_entry(self.directory / (bucket.key + self.SUFFIX), bucket.load_bytecode)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        write_entry(self.directory / (bucket.key + self.SUFFIX), bucket.write_bytecode, self.KEEP)


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    compiled = cache_dir("templates")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        bytecode_cache=TemplateCache(compiled) if compiled else None,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters.update(FILTERS)
    env.globals["c"] = C_NAMES
    return env


def render_plan(
    plan: Sequence[Tuple[str, str]], context: Dict[str, object], finish: Optional[Callable[[str, str], str]] = None
) -> Dict[str, str]:
    """Every output of the plan; finish(text, output) is applied to each, if given."""
    env = environment()
    files = {output: env.get_template(template).render(**context) for template, output in plan}
    return {output: finish(text, output) if finish else text for output, text in files.items()}


def core_plan(fortran: Optional[FortranPlan]) -> Tuple[Tuple[str, str], ...]:
    """What build-core writes for this MPI: Fortran entries only where it has Fortran."""
    return tuple((t, o) for t, o in CORE_PLAN if fortran is not None or o != "qmpi_fortran.c")


def _read_runtime(name: str) -> str:
    with open(runtime_dir() / name, "r", encoding="utf-8", newline="") as handle:
        return handle.read()


def runtime_files() -> Dict[str, str]:
    """The runtime's C sources and header by their path in the core, e.g. runtime/conf.c."""
    names = sorted(p.name for p in runtime_dir().iterdir() if p.suffix in (".c", ".h"))
    return {f"{RUNTIME_SUBDIR}/{name}": _read_runtime(name) for name in names}


def render_core(enumeration: Enumeration, gen: GeneratorInfo, fortran: Optional[FortranPlan] = None) -> Dict[str, str]:
    plan = core_plan(fortran)
    runtime = runtime_files()
    sources = [output for _, output in plan if output.endswith(".c")] + [p for p in runtime if p.endswith(".c")]
    context = {
        "enumeration": enumeration,
        "gen": gen,
        "sources": sources,
        "fortran": fortran,
        "session_report": enumeration.reports_sessions,
        # Asked here, not first inside a template: an MPI without free slot letters is
        # the model's error, raised before anything renders.
        "pmpi_slots": enumeration.facts.pmpi_slot_letters,
    }
    files = render_plan(plan, context)
    files["qmpirun"] += _read_runtime(QMPIRUN_BODY)
    files.update(runtime)
    return files


# -- tools (scaffold-tool) ---------------------------------------------------------------


@dataclass(frozen=True)
class ToolInterface:
    """How the chain calls a tool: its C template and the names of the parameters
    that the interface adds to every wrapper and hook."""

    template: str
    hook_params: str
    hook_args: str
    hook_unused: Tuple[str, ...]
    wrapper_unused: Tuple[str, ...]


INTERFACES: Dict[Interface, ToolInterface] = {
    # The thesis's: PREFIX_<Name>(args, int level, vector *v), found via get_interceptions.
    Interface.THESIS: ToolInterface(
        "tool/thesis.c.j2",
        f"{C_NAMES.level_param}, {C_NAMES.chain_param}",
        f"{C_NAMES.level}, {C_NAMES.chain}",
        (C_NAMES.level, C_NAMES.chain),
        (C_NAMES.level, C_NAMES.chain),
    ),
    # The MPI Forum's / MPICH's: fn(QMPI_Context, int tool_id, args), registered by name.
    Interface.CALLBACK: ToolInterface(
        "tool/callback.c.j2", C_NAMES.level_param, C_NAMES.level, (C_NAMES.level,), (C_NAMES.context, C_NAMES.level)
    ),
}

STARTER_SPEC = "tool/starter.qmpi.j2"  # the quick form's spec, NAME.qmpi


def tool_plan(tool: Tool) -> Tuple[Tuple[str, str], ...]:
    """What scaffold-tool writes for a tool."""
    return ((INTERFACES[tool.interface].template, f"{tool.name}.c"), ("tool/Makefile.j2", "Makefile"))


def render_tool(tool: Tool, gen: GeneratorInfo, enumeration_size: int) -> Dict[str, str]:
    """The tool's files, each stamped with its checksum (qmpigen.output.checksum)."""
    context = {
        "tool": tool,
        "gen": gen,
        "user_code": _user_code(tool.spec_file),
        "checksum_line": checksum_line,
        "enumeration_size": enumeration_size,
        "iface": INTERFACES[tool.interface],
    }
    return render_plan(tool_plan(tool), context, lambda text, output: stamp(_restore_lines(text, output)))


def render_starter_spec(name: str, tool_statement: str, selection: str, regenerate: str) -> Tuple[str, str]:
    """The quick form's spec: (file name, text)."""
    text = (
        environment()
        .get_template(STARTER_SPEC)
        .render(name=name, tool_statement=tool_statement, selection=selection, regenerate=regenerate)
    )
    return name + SPEC_SUFFIX, text


# Spec code sits between #line directives, so that compiler messages point into the spec;
# after it, this marker becomes a #line back to the generated file itself.
RESTORE = "#line QMPIGEN_RESTORE"


def _user_code(spec_file: str) -> Callable[[CBlock, int], str]:
    def user_code(block: CBlock, indent: int) -> str:
        """Spec code between #line directives, so compiler messages point into the spec."""
        pad = " " * indent
        body = "\n".join(pad + line if line.strip() else "" for line in block.text.split("\n"))
        return f'#line {block.line} "{escape.c_string(spec_file)}"\n{body}\n{RESTORE}'

    return user_code


def _restore_lines(text: str, output: str) -> str:
    """After user code, point compiler messages back at the generated file itself."""
    lines = text.split("\n")
    # A restore right before the next #line says nothing.
    lines = [
        entry
        for i, entry in enumerate(lines)
        if not (entry == RESTORE and lines[i + 1 : i + 2] and lines[i + 1].startswith("#line "))
    ]
    for number, line in enumerate(lines, start=1):
        if line == RESTORE:
            lines[number - 1] = f'#line {number + 1} "{escape.c_string(output)}"'
    return "\n".join(lines)
