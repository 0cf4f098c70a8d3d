"""Stage 3: choose the functions to intercept and number them.

The enumeration is alphabetical (code-point order), as in the thesis's appendix 7.1:
_MPI_Abort = 0, _MPI_Accumulate = 1, ...
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Tuple

from qmpigen.errors import QmpigenError
from qmpigen.mpi.model import Enumeration, MpiApi, MpiFunction


@dataclass(frozen=True)
class Selection:
    include: Tuple[str, ...] = ()  # globs; empty means every candidate
    exclude: Tuple[str, ...] = ()
    mpix: bool = False  # also MPIX_ extensions


def is_candidate(function: MpiFunction, mpix: bool) -> bool:
    """Interceptable: a PMPI_ twin exists for the end of the chain to call."""
    if not function.has_pmpi:
        return False
    return function.prefix == "MPI" or (mpix and function.prefix == "MPIX")


def enumerate_functions(api: MpiApi, selection: Selection = Selection()) -> Enumeration:
    candidates = [f for f in api if is_candidate(f, selection.mpix)]
    chosen = candidates
    if selection.include:
        _check_globs("--include", selection.include, candidates, api)
        chosen = [f for f in candidates if any(fnmatch.fnmatchcase(f.name, g) for g in selection.include)]
    if selection.exclude:
        _check_globs("--exclude", selection.exclude, chosen, api)
        chosen = [f for f in chosen if not any(fnmatch.fnmatchcase(f.name, g) for g in selection.exclude)]
    if not chosen:
        raise QmpigenError("the selection leaves no MPI function to intercept")
    return Enumeration(api.facts, tuple(sorted(chosen, key=lambda f: f.name)))


def _check_globs(option: str, globs: Tuple[str, ...], pool, api: MpiApi) -> None:
    names = [f.name for f in pool]
    for glob in globs:
        if fnmatch.filter(names, glob):
            continue
        where = f"{api.facts.implementation} {api.facts.version}".strip()
        hint = ""
        if any(fnmatch.fnmatchcase(f.name, glob) for f in api if f.prefix == "MPIX"):
            hint = " (it matches MPIX_ functions: add --mpix)"
        raise QmpigenError(f"{option} '{glob}' matches no interceptable function of {where}{hint}")
