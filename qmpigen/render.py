"""Stage 4: model -> C sources, with one jinja2 environment and explicit plans.

Templates stay readable C: derived text comes from model properties and from the
filters below (wrapper types and parameter lists of the QMPI tool interface).
"""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

import jinja2

from . import __version__
from .cnames import C_NAMES
from .model import Enumeration, MpiFunction
from .resources import templates_dir

# What build-core writes: (template, output file). The one place to see the outputs.
CORE_PLAN: Tuple[Tuple[str, str], ...] = (
    ("core/qmpi.h.j2", "qmpi.h"),
    ("core/qmpi_internal.h.j2", "qmpi_internal.h"),
    ("core/qmpi_core.c.j2", "qmpi_core.c"),
    ("core/qmpi_entry.c.j2", "qmpi_entry.c"),
    ("core/qmpi_exec.c.j2", "qmpi_exec.c"),
    ("core/Makefile.j2", "Makefile"),
    ("core/qmpi.pc.j2", "qmpi.pc"),
    ("core/QMPIConfig.cmake.j2", "QMPIConfig.cmake"),
    ("core/QMPIConfigVersion.cmake.j2", "QMPIConfigVersion.cmake"),
    ("core/qmpirun.j2", "qmpirun"),
)


@dataclass(frozen=True)
class GeneratorInfo:
    """What every banner names: generator, MPI, enumeration, how to regenerate."""

    version: str
    mpi: str
    enum_hash: str
    command: str

    @classmethod
    def for_enumeration(cls, enumeration: Enumeration, command: str) -> "GeneratorInfo":
        facts = enumeration.facts
        mpi = f"{facts.implementation} {facts.version}".strip() + f" (MPI {facts.mpi_version}.{facts.mpi_subversion})"
        return cls(__version__, mpi, enumeration.hash, command)

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
    return function.with_extra("QMPI_Context context, int tool_id", leading=True) + (", ..." if function.variadic else "")


def callback_args(function: MpiFunction, context: str, tool_id: str) -> str:
    return ", ".join([context, tool_id] + [p.name for p in function.params])


FILTERS = {
    "callback_params": callback_params,
    "callback_args": callback_args,
    "shell_quote": shlex.quote,
    "wrapper_type": wrapper_type,
    "wrapper_params": wrapper_params,
    "wrapper_args": wrapper_args,
}


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters.update(FILTERS)
    env.globals["c"] = C_NAMES
    return env


def render_plan(plan: Sequence[Tuple[str, str]], context: Dict[str, object]) -> Dict[str, str]:
    env = environment()
    return {output: env.get_template(template).render(**context) for template, output in plan}


def render_core(enumeration: Enumeration, gen: GeneratorInfo) -> Dict[str, str]:
    sources = [output for _, output in CORE_PLAN if output.endswith(".c")]
    return render_plan(CORE_PLAN, {"enumeration": enumeration, "gen": gen, "sources": sources})
