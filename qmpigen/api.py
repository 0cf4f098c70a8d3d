"""The pipeline, assembled once: what the CLI, the tests and the bench call.

    read an MPI (qmpigen.mpi)  ->  model  ->  render (qmpigen.output)  ->  write
    tool spec (qmpigen.spec)   ->  resolve against the model  ---------^

Each function takes plain values and returns model objects or rendered files
({relative path: text}); nothing here prints, and writing is a separate step
(`write`), so a caller can render, inspect and then decide.

    >>> from qmpigen import api
    >>> mpi = api.read_mpi(api.MpiSource(mpicc="mpicc"))
    >>> core = api.build_core(mpi, command="qmpigen build-core -o core")
    >>> api.write("core", core.files)
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple

from qmpigen.errors import QmpigenError
from qmpigen.mpi.header import HeaderRequest, PreprocessedHeader, read_header_and_search_path
from qmpigen.mpi.header_cache import cached_header
from qmpigen.mpi.model import Enumeration, MpiApi
from qmpigen.mpi.model_cache import cached_model
from qmpigen.mpi.select import Selection, enumerate_functions
from qmpigen.output.render import GeneratorInfo, render_core, render_tool
from qmpigen.output.write import Content, WriteReport, write_outputs
from qmpigen.spec.resolve import resolve
from qmpigen.spec.tool import Interface, Tool
from qmpigen.spec.values import ToolSpec

if TYPE_CHECKING:
    from qmpigen.mpi.fortran import FortranPlan

Files = Dict[str, str]


@dataclass(frozen=True)
class MpiSource:
    """Which MPI to read and which of its functions to enumerate."""

    header: str = "auto"  # mpi.h, or "auto": the one the driver compiles against
    mpicc: Optional[str] = None  # the MPI's compiler driver (default: mpicc on PATH)
    cflags: Tuple[str, ...] = ()  # extra preprocessor flags
    selection: Selection = Selection()


@dataclass(frozen=True)
class Mpi:
    """An MPI as read: its preprocessed header, the model, and the enumeration."""

    source: PreprocessedHeader
    api: MpiApi
    enumeration: Enumeration

    @property
    def driver(self) -> str:
        """The compiler driver as given (a path stays that path), for build files."""
        return shlex.join(self.source.driver)

    @property
    def driver_path(self) -> str:
        """The compiler driver as found when the MPI was read (its absolute path), for
        messages that tell which driver to build with."""
        return shlex.join(self.source.driver_found)


@dataclass(frozen=True)
class Core:
    """A rendered core: the Fortran plan it holds (None without Fortran) and its files."""

    fortran: Optional[FortranPlan]
    files: Files


def read_model(source: MpiSource) -> Tuple[PreprocessedHeader, MpiApi]:
    """Stages 1-2: preprocess mpi.h with the MPI's driver and parse it (no selection)."""
    header = cached_header(
        HeaderRequest(source.header, source.mpicc, tuple(source.cflags)), read_header_and_search_path
    )
    return header, cached_model(header, _parse)


def _parse(header: PreprocessedHeader) -> MpiApi:
    from qmpigen.mpi.parse import parse_header  # pycparser: only when the model is not in the cache

    return parse_header(header)


def read_mpi(source: MpiSource) -> Mpi:
    """Stages 1-3: read_model, then enumerate the selected functions."""
    header, model = read_model(source)
    return Mpi(header, model, enumerate_functions(model, source.selection))


def fortran_plan(mpi: Mpi, mode: str = "auto") -> Optional[FortranPlan]:
    """The core's Fortran entries: 'auto' (the Fortran driver beside mpicc), 'none', or a
    driver name. None where the MPI has no Fortran bindings or mode is 'none'."""
    # Imported here: the Fortran stages are a tenth of the import time of commands without them.
    from qmpigen.mpi.fortran import plan_fortran
    from qmpigen.mpi.fortran_libs import FortranRequest, find_fortran
    from qmpigen.mpi.quirks_fortran import FORTRAN

    quirks = FORTRAN.get(mpi.api.facts.implementation)
    if quirks is None and mode not in ("auto", "none"):
        raise QmpigenError(f"no Fortran facts for {mpi.api.facts.title} in qmpigen's quirks table (try --fortran none)")
    libraries = find_fortran(FortranRequest(mode), mpi.source.driver, quirks)
    return plan_fortran(mpi.enumeration, mpi.api, libraries, mpi.source.function_macros)


def functions(mpi: Mpi, fortran_mode: str = "auto") -> Tuple[Enumeration, Optional[FortranPlan]]:
    """What `qmpigen functions` reports: the enumeration and the Fortran routes."""
    return mpi.enumeration, fortran_plan(mpi, fortran_mode)


def build_core(mpi: Mpi, command: str, fortran_mode: str = "auto") -> Core:
    """The core's files for this MPI. `command` is what regenerates them (their banner)."""
    fortran = fortran_plan(mpi, fortran_mode)
    gen = GeneratorInfo.for_enumeration(mpi.enumeration, command, mpi.driver, mpi.driver_path)
    return Core(fortran, render_core(mpi.enumeration, gen, fortran))


def resolve_tool(mpi: Mpi, spec: ToolSpec, interface: Interface = Interface.THESIS) -> Tool:
    """A tool spec met with this MPI: every selector expanded, every wrapper planned."""
    return resolve(spec, mpi.enumeration, mpi.api, interface)


def scaffold_tool(mpi: Mpi, tool: Tool, command: str) -> Files:
    """A resolved tool's C file and Makefile. `command` is what regenerates them."""
    return render_tool(
        tool, GeneratorInfo.for_enumeration(mpi.enumeration, command, mpi.driver, mpi.driver_path), len(mpi.enumeration)
    )


def write(directory: str, files: Mapping[str, Content], check: bool = False) -> WriteReport:
    """All-or-nothing into `directory`, touching only files that change (or, with check,
    writing nothing and reporting what would change)."""
    return write_outputs(directory, files, check=check)
