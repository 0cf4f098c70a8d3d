"""Stage 1b: what the MPI's Fortran bindings export, read from the libraries it ships.

The Fortran compiler driver beside the C one (mpicc.mpich -> mpif90.mpich) tells its
link line; the libraries on it are read with pyelftools, and their dynamic symbol
tables say which Fortran entry names exist (mpi_send_, MPI_SEND, mpi_send_f08_, ...).
No hand-kept list of Fortran routines: an MPI without Fortran (the PyPI wheels) has
no driver or no such symbols, and gets no Fortran entries.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import FrozenSet, List, Optional, Sequence, Tuple

from qmpigen.errors import QmpigenError
from qmpigen.mpi.quirks_fortran import FORTRAN_DRIVER_NAMES, FortranQuirks

DRIVER_TIMEOUT_S = 60


@dataclass(frozen=True)
class FortranRequest:
    """--fortran: "auto" (the driver beside mpicc, if any), "none", or a driver command."""

    mode: str = "auto"

    @property
    def disabled(self) -> bool:
        return self.mode == "none"


@dataclass(frozen=True)
class FortranLibraries:
    """The MPI's Fortran bindings as shipped: which driver, which libraries, which symbols."""

    driver: Tuple[str, ...]
    compiler: str  # first line of `driver --version`: "GNU Fortran (Debian 12.2.0-14) 12.2.0"
    libraries: Tuple[str, ...]  # basenames of the libraries that define Fortran entries
    link_names: Tuple[str, ...]  # the same as -l options ("-lmpichfort"): libqmpi links them
    symbols: FrozenSet[str]  # defined dynamic symbols (functions) of every library on the link line

    def has(self, symbol: str) -> bool:
        return symbol in self.symbols


def find_fortran(
    request: FortranRequest, c_driver: Tuple[str, ...], quirks: Optional[FortranQuirks]
) -> Optional[FortranLibraries]:
    """The Fortran bindings of the MPI whose mpicc is c_driver; None where it has none
    (or where Fortran entries are off). An explicit driver that does not work is an error."""
    if request.disabled or quirks is None:
        return None
    explicit = request.mode != "auto"
    driver = tuple(shlex.split(request.mode)) if explicit else driver_beside(c_driver)
    if not driver:
        return None
    if not shutil.which(driver[0]):
        raise QmpigenError(f"Fortran compiler driver '{driver[0]}' not found (from --fortran)")
    try:
        link_line = _run(list(driver) + list(quirks.link_query))
        compiler = _run(list(driver) + ["--version"]).splitlines()[0].strip()
    except QmpigenError:
        if explicit:
            raise
        return None  # a wrapper whose compiler is missing (mpif90 of a wheel without gfortran)
    libraries = _link_libraries(shlex.split(link_line), _search_dirs(driver))
    symbols: set = set()
    defining: List[str] = []
    link_names: List[str] = []
    for option, path in libraries:
        found = _dynamic_functions(path)
        if any(quirks.is_fortran_symbol(s) for s in found):
            defining.append(os.path.basename(path))
            link_names.append(option)
        symbols |= found
    if not defining:
        if explicit:
            raise QmpigenError(f"'{' '.join(driver)}' links no library with MPI Fortran entry points")
        return None
    return FortranLibraries(driver, compiler, tuple(defining), tuple(link_names), frozenset(symbols))


def driver_beside(c_driver: Tuple[str, ...]) -> Tuple[str, ...]:
    """mpicc -> mpif90 (or mpifort) in the same directory, keeping a suffix (.mpich);
    () without one. The benchmark's Fortran rows use it too."""
    path = shutil.which(c_driver[0])
    if not path:
        return ()
    directory, name = os.path.split(path)
    if "mpicc" not in name:
        return ()
    for fortran_name in FORTRAN_DRIVER_NAMES:
        candidate = os.path.join(directory, name.replace("mpicc", fortran_name, 1))
        if os.access(candidate, os.X_OK):
            return (candidate,) + c_driver[1:]
    return ()


def _run(cmd: Sequence[str]) -> str:
    try:
        proc = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=DRIVER_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise QmpigenError(f"cannot run '{' '.join(cmd)}': {exc}") from None
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise QmpigenError(f"'{' '.join(cmd)}' failed (exit {proc.returncode}){': ' + detail[0] if detail else ''}")
    return proc.stdout.decode("utf-8", "replace")


def _search_dirs(driver: Tuple[str, ...]) -> List[str]:
    """The compiler's own library directories (where -lmpich is found without -L)."""
    try:
        text = _run(list(driver) + ["-print-search-dirs"])
    except QmpigenError:
        return []
    for line in text.splitlines():
        if line.startswith("libraries:"):
            return [os.path.normpath(d) for d in line.split("=", 1)[-1].split(os.pathsep) if d]
    return []


def _link_libraries(words: Sequence[str], default_dirs: Sequence[str]) -> List[Tuple[str, str]]:
    """(-l option, path) of the shared libraries a link line names, found as the linker would."""
    dirs = [w[2:] for w in words if w.startswith("-L") and len(w) > 2] + list(default_dirs)
    found: List[Tuple[str, str]] = []
    for word in words:
        if not word.startswith("-l") or len(word) <= 2:
            continue
        for directory in dirs:
            candidate = os.path.join(directory, f"lib{word[2:]}.so")
            if os.path.exists(candidate):
                real = os.path.realpath(candidate)
                if real not in (path for _, path in found):
                    found.append((word, real))
                break
    return found


def _dynamic_functions(path: str) -> FrozenSet[str]:
    """Defined global and weak dynamic symbols (functions and data) of a shared library."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    names = set()
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != b"\x7fELF":
                return frozenset()  # a linker script (libm.so, libc.so): no MPI routines there
            handle.seek(0)
            table = ELFFile(handle).get_section_by_name(".dynsym")
            if not isinstance(table, SymbolTableSection):
                return frozenset()
            for symbol in table.iter_symbols():
                if symbol["st_shndx"] == "SHN_UNDEF":
                    continue
                if symbol["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK"):
                    names.add(symbol.name)
    except (OSError, ELFError) as exc:
        raise QmpigenError(f"cannot read the symbols of {path}: {exc}") from None
    return frozenset(names)
