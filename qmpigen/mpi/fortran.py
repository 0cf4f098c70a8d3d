"""Stage 3b: the Fortran entry points of the core, planned per enumerated function.

For each function the MPI's Fortran bindings export (qmpigen.mpi.fortran_libs), every C
parameter gets a conversion (Conv) from its Fortran argument, or the function stays
with the MPI's own binding and the plan says why. The rules read the C prototype
(types, const, arrays) and, where the prototype cannot tell, the Fortran quirks
(quirks_fortran.FORTRAN_*). Templates turn the plan into C (templates/core/qmpi_fortran.c.j2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Dict, FrozenSet, Iterator, List, Optional, Tuple

from qmpigen.mpi import quirks_fortran as fortran_quirks
from qmpigen.mpi.fortran_libs import FortranLibraries
from qmpigen.mpi.model import Enumeration, MpiApi, MpiFunction, Param
from qmpigen.mpi.quirks_fortran import FORTRAN, F08Entries, FortranQuirks, FortranSentinel

# C types whose Fortran counterpart has the same representation (INTEGER is int: the
# core checks sizeof(MPI_Fint) == sizeof(int); INTEGER(KIND=MPI_ADDRESS_KIND/
# OFFSET_KIND/COUNT_KIND) are MPI_Aint/MPI_Offset/MPI_Count by definition).
SAME_REPRESENTATION = ("int", "MPI_Aint", "MPI_Offset", "MPI_Count")
RESULT_TYPES = ("int", "double", "MPI_Aint", "MPI_Count", "MPI_Offset")


class Conv(str, Enum):
    """How one C argument is made from its Fortran argument (and written back)."""

    VALUE = "value"  # INTEGER by reference -> C value
    LOGICAL = "logical"  # LOGICAL by reference -> C 0/1
    HANDLE = "handle"  # INTEGER handle -> MPI_<Type>_f2c
    HANDLE_REF = "handle_ref"  # in/out handle: f2c in, c2f back on success
    HANDLE_ARRAY = "handle_array"  # `length` handles, converted each way
    DIRECT = "direct"  # same representation: the address is passed on
    LOGICAL_REF = "logical_ref"  # LOGICAL result: C 0/1 -> .FALSE./.TRUE.
    INDEX_REF = "index_ref"  # an index, 1-based in Fortran: +1 on the way back
    INDEX_ARRAY = "index_array"  # `length` such indices
    BUFFER = "buffer"  # choice buffer: MPI_BOTTOM / MPI_IN_PLACE sentinels
    WEIGHTS = "weights"  # MPI_UNWEIGHTED / MPI_WEIGHTS_EMPTY sentinels
    STATUS = "status"  # MPI_Status_f2c/c2f, MPI_STATUS_IGNORE
    STATUS_ARRAY = "status_array"  # `length` statuses, MPI_STATUSES_IGNORE
    STRING_IN = "string_in"  # CHARACTER(*) with hidden length -> trimmed C string
    STRING_OUT = "string_out"  # C string -> blank-padded CHARACTER(*)
    ERRHANDLER_FN = "errhandler_fn"  # Fortran error handler -> the core's C handler calling it
    DROPPED_ADDRESS = "dropped_address"  # mpif.h: an address it cannot hold, into a local; mpi_f08: TYPE(C_PTR)
    ABSENT = "absent"  # no Fortran argument: NULL

    @property
    def has_hidden_length(self) -> bool:
        return self in (Conv.STRING_IN, Conv.STRING_OUT)


@dataclass(frozen=True)
class FortranParam:
    param: Param
    conv: Conv
    length: str = ""  # C parameter with the array's length
    f2c: str = ""  # handle conversion functions
    c2f: str = ""
    handle_type: str = ""  # converted handles; for ERRHANDLER_FN the handle type it handles
    implied_length: str = ""  # C expression of a length no argument gives (fortran_quirks.FORTRAN_IMPLIED_LENGTHS)
    partner: str = ""  # ERRHANDLER_FN: the parameter that returns the new MPI_Errhandler
    same_length_as: str = ""  # an earlier array whose implied length this one shares (computed once)

    @property
    def count(self) -> str:
        """C expression of an array's length."""
        return self.implied_length or f"*{self.length}"

    @property
    def name(self) -> str:
        return self.param.name

    @property
    def fortran(self) -> bool:
        """The Fortran routine has this argument."""
        return self.conv is not Conv.ABSENT

    @property
    def declaration(self) -> str:
        """The Fortran argument as the C entry declares it (everything by reference)."""
        if self.conv is Conv.VALUE:
            return f"const {'MPI_Fint' if self.param.base_type == 'int' else self.param.base_type} *{self.name}"
        if self.conv in (Conv.LOGICAL, Conv.HANDLE):
            return f"const MPI_Fint *{self.name}"
        if self.conv in (Conv.HANDLE_REF, Conv.HANDLE_ARRAY, Conv.LOGICAL_REF, Conv.STATUS, Conv.STATUS_ARRAY):
            return f"MPI_Fint *{self.name}"
        if self.conv is Conv.STRING_IN:
            return f"const char *{self.name}"
        if self.conv is Conv.STRING_OUT:
            return f"char *{self.name}"
        if self.conv is Conv.ERRHANDLER_FN:
            return f"qmpi_f_errhandler_fn *{self.name}"
        return self.param.declaration  # same representation: the C parameter itself

    @property
    def writes_back(self) -> bool:
        """Something is converted back to Fortran after the call."""
        if self.conv in (Conv.HANDLE_ARRAY, Conv.STATUS):
            return not self.param.is_const
        return self.conv in (
            Conv.HANDLE_REF,
            Conv.LOGICAL_REF,
            Conv.INDEX_REF,
            Conv.INDEX_ARRAY,
            Conv.STATUS_ARRAY,
            Conv.STRING_OUT,
        )

    @property
    def scratch(self) -> bool:
        """Converted into scratch space that is released after the call."""
        return self.conv in (Conv.HANDLE_ARRAY, Conv.STATUS_ARRAY, Conv.STRING_IN, Conv.STRING_OUT)


@dataclass(frozen=True)
class Dialect:
    """One family of Fortran entry names and the sentinels its callers pass."""

    key: str  # "f77" (mpif.h and use mpi) or "f08"
    sentinels: Dict[str, FortranSentinel]


@dataclass(frozen=True)
class FortranEntry:
    """A function's Fortran entries: which symbols the core defines, or why none."""

    function: MpiFunction
    f77_names: Tuple[str, ...]  # manglings the MPI exports (all defined when routed)
    f08_names: Tuple[Tuple[str, bool], ...]  # (name, defined by the core)
    params: Tuple[FortranParam, ...]
    reason: str  # why it passes through ("" when routed)

    @property
    def routed(self) -> bool:
        return not self.reason

    @property
    def ierror(self) -> bool:
        return self.function.returns_int and self.function.name not in fortran_quirks.FORTRAN_NO_IERROR

    @property
    def fortran_params(self) -> Tuple[FortranParam, ...]:
        return tuple(p for p in self.params if p.fortran)

    @property
    def hidden_lengths(self) -> Tuple[FortranParam, ...]:
        return tuple(p for p in self.params if p.conv.has_hidden_length)

    @property
    def params_c(self) -> str:
        """The C entry's parameters: Fortran arguments, IERROR, then hidden lengths."""
        parts = [p.declaration for p in self.fortran_params]
        if self.ierror:
            parts.append("MPI_Fint *ierror")
        parts += [f"qmpi_f_strlen {p.name}_len" for p in self.hidden_lengths]
        return ", ".join(parts) or "void"

    @property
    def writes_back(self) -> bool:
        return any(p.writes_back for p in self.params)

    @property
    def uses_sentinels(self) -> bool:
        return any(p.conv in (Conv.BUFFER, Conv.WEIGHTS, Conv.STATUS, Conv.STATUS_ARRAY) for p in self.params)

    @property
    def defined_f08(self) -> Tuple[str, ...]:
        return tuple(name for name, defined in self.f08_names if defined)


@dataclass(frozen=True)
class FortranPlan:
    """Every Fortran entry of the core, with the facts the report and templates need."""

    implementation: str
    libraries: FortranLibraries
    quirks: FortranQuirks
    entries: Tuple[FortranEntry, ...]
    status_f2c: str  # MPI_Status_f2c / c2f as the header declares them (PMPI_ names)
    status_c2f: str
    # (handle type, its get_errhandler, its c2f) for the C handlers that call Fortran ones
    errhandler_kinds: Tuple[Tuple[str, str, str], ...] = ()
    string_bounds: Tuple[str, ...] = fortran_quirks.FORTRAN_STRING_BOUNDS

    def __iter__(self) -> Iterator[FortranEntry]:
        return iter(self.entries)

    @property
    def routed(self) -> Tuple[FortranEntry, ...]:
        return tuple(e for e in self.entries if e.routed)

    @property
    def defining(self) -> Tuple[FortranEntry, ...]:
        """Routed entries that define at least one symbol (an f08-only function whose
        routines reach C as they are needs none)."""
        return tuple(e for e in self.routed if e.f77_names or e.defined_f08)

    @property
    def dialects(self) -> Tuple[Dialect, ...]:
        return (Dialect("f77", dict(self.quirks.f77_sentinels)), Dialect("f08", dict(self.quirks.f08_sentinels)))

    @property
    def sentinel_symbols(self) -> Tuple[Tuple[str, bool], ...]:
        """(symbol, holds an address) for every symbol a sentinel check names, once, sorted."""
        names = {(s, t.holds_address) for d in self.dialects for t in d.sentinels.values() for s in t.symbols}
        return tuple(sorted(names))

    def f77_coverage(self) -> Tuple[int, int, int]:
        """(functions with a mpif.h / use mpi routine, routed by core entries, seen by
        the chain at all: routed, or passed through to a binding that calls C MPI_)."""
        with_binding = [e for e in self.entries if e.f77_names]
        routed = sum(1 for e in with_binding if e.routed)
        seen = routed if not self.quirks.f77_reaches_c else len(with_binding)
        return len(with_binding), routed, seen

    def f08_coverage(self) -> Tuple[int, int, int]:
        """(functions with a use mpi_f08 routine, with every f08 routine either defined
        here or reaching C, seen)."""
        reaches = {f.suffix: not f.bypasses_c for f in self.quirks.f08_entries}
        with_f08 = [e for e in self.entries if e.f08_names]
        routed = sum(1 for e in with_f08 if e.routed and any(d for _, d in e.f08_names))
        seen = sum(1 for e in with_f08 if all(d or reaches[_suffix(n, self.quirks)] for n, d in e.f08_names))
        return len(with_f08), routed, seen

    def f08_route(self, entry: FortranEntry, name: str, defined: bool) -> str:
        if defined:
            return "chain"
        family = next(f for f in self.quirks.f08_entries if f.suffix == _suffix(name, self.quirks))
        return "binding reaches C" if not family.bypasses_c else "bypasses the chain"


def _defines(family: F08Entries) -> bool:
    """Whether the core defines this family's entries: only where the MPI's own routines
    bypass the C names (the others reach the chain as they are), and may be defined."""
    return family.bypasses_c and family.defined


def _suffix(name: str, quirks: FortranQuirks) -> str:
    return next(f.suffix for f in sorted(quirks.f08_entries, key=lambda f: -len(f.suffix)) if name.endswith(f.suffix))


def plan_fortran(
    enumeration: Enumeration, api: MpiApi, libraries: Optional[FortranLibraries], macros: FrozenSet[str] = frozenset()
) -> Optional[FortranPlan]:
    """The Fortran entries for this enumeration, or None without Fortran bindings.
    `macros`: the header's function-like macros (MPICH defines handle conversions so)."""
    quirks = FORTRAN.get(enumeration.facts.implementation)
    if libraries is None or quirks is None:
        return None
    conversions = _handle_conversions(api, enumeration, macros)
    status_f2c, status_c2f = (_called(api.get(f"MPI_Status_{way}")) for way in ("f2c", "c2f"))
    errhandler_kinds = {
        handle: (handle, _called(api.get(f"MPI_{handle[len('MPI_') :]}_get_errhandler")), conversions[handle][1])
        for handle in sorted(set(fortran_quirks.FORTRAN_ERRHANDLER_FUNCTIONS.values()))
        if handle in conversions and api.get(f"MPI_{handle[len('MPI_') :]}_get_errhandler") is not None
    }
    entries = []
    for function in enumeration:
        f77 = tuple(
            name
            for name in (
                m.format(lower=function.name.lower(), upper=function.name.upper())
                for m in fortran_quirks.FORTRAN_MANGLINGS
            )
            if libraries.has(name)
        )
        f08 = tuple(
            function.name.lower() + family.suffix
            for family in quirks.f08_entries
            if libraries.has(function.name.lower() + family.suffix)
        )
        if not f77 and not f08:
            continue
        params, reason = _classify(function, conversions, quirks, errhandler_kinds)
        if (
            not reason
            and not (status_f2c and status_c2f)
            and any(p.conv in (Conv.STATUS, Conv.STATUS_ARRAY) for p in params)
        ):
            reason = "mpi.h declares no MPI_Status_f2c/MPI_Status_c2f"
        families = {f.suffix: f for f in quirks.f08_entries}
        f08_names = tuple((n, not reason and _defines(families[_suffix(n, quirks)])) for n in f08)
        entries.append(FortranEntry(function, f77, f08_names, params, reason))
    used_kinds = {p.handle_type for e in entries if e.routed for p in e.params if p.conv is Conv.ERRHANDLER_FN}
    return FortranPlan(
        enumeration.facts.implementation,
        libraries,
        quirks,
        tuple(entries),
        status_f2c,
        status_c2f,
        tuple(errhandler_kinds[k] for k in sorted(used_kinds)),
    )


def _called(function: Optional[MpiFunction]) -> str:
    """How the core calls a conversion function: its PMPI_ name where declared."""
    if function is None:
        return ""
    return function.pmpi if function.has_pmpi else function.name


def _handle_conversions(api: MpiApi, enumeration: Enumeration, macros: FrozenSet[str]) -> Dict[str, Tuple[str, str]]:
    """C handle type -> (f2c, c2f), from the header's own declarations (PMPI_ names
    where declared: tools do not see the core's conversions), else its macros."""
    f2c: Dict[str, str] = {}
    c2f: Dict[str, str] = {}
    handle_types = {p.base_type for f in enumeration for p in f.params if p.base_type.startswith("MPI_")}
    for handle in sorted(handle_types):
        stem = "MPI_" + fortran_quirks.FORTRAN_HANDLE_STEMS.get(handle, handle[len("MPI_") :])
        for way, table in (("_f2c", f2c), ("_c2f", c2f)):
            for name in ("P" + stem + way, stem + way):
                if name in macros:
                    table.setdefault(handle, name)
                    break
    for f in api:
        called = _called(f)
        if f.name.endswith("_f2c") and f.return_type.startswith("MPI_") and len(f.params) == 1:
            f2c.setdefault(f.return_type, called)
        elif f.name.endswith("_c2f") and f.return_type in ("MPI_Fint", "int") and len(f.params) == 1:
            c2f.setdefault(f.params[0].base_type, called)
    return {t: (f2c[t], c2f[t]) for t in f2c if t in c2f}


def _classify(
    function: MpiFunction, conversions: Dict[str, Tuple[str, str]], quirks: FortranQuirks, errhandler_kinds
) -> Tuple[Tuple[FortranParam, ...], str]:
    """(conversions, "") when every argument converts; ((), reason) otherwise."""
    if function.is_macro:
        return (), "mpi.h defines the C name as a macro"
    if function.pmpi_optional:
        return (), f"the C library may lack {function.pmpi}"
    if function.name in fortran_quirks.FORTRAN_PASS_THROUGH:
        return (), fortran_quirks.FORTRAN_PASS_THROUGH[function.name]
    if function.return_type not in RESULT_TYPES:
        return (), f"returns {function.return_type}, which no Fortran routine returns"
    if function.variadic and not function.is_fan_out:
        return (), "variadic"
    names = {p.name for p in function.params}
    absent = fortran_quirks.FORTRAN_ABSENT.get(function.name, ())
    out: List[FortranParam] = []
    for p in function.params:
        if p.name in absent:
            out.append(FortranParam(p, Conv.ABSENT))
            continue
        handled = fortran_quirks.FORTRAN_ERRHANDLER_FUNCTIONS.get(p.base_type)
        if p.is_function_pointer and handled is not None and handled in errhandler_kinds:
            partner = next((q.name for q in function.params if q.base_type == "MPI_Errhandler" and q.is_pointer), "")
            if partner:
                out.append(FortranParam(p, Conv.ERRHANDLER_FN, handle_type=handled, partner=partner))
                continue
        if p.is_function_pointer:
            return (), f"{p.name}: a user callback (the MPI's binding adapts Fortran procedures)"
        if p.name in fortran_quirks.FORTRAN_PASS_THROUGH_PARAMS:
            return (), f"{p.name}: {fortran_quirks.FORTRAN_PASS_THROUGH_PARAMS[p.name]}"
        one_based = fortran_quirks.FORTRAN_ONE_BASED.get((function.name, p.name))
        if one_based is not None:
            out.append(FortranParam(p, Conv.INDEX_ARRAY if one_based else Conv.INDEX_REF, one_based))
            continue
        converted = _convert(function, p, names, conversions, quirks)
        if isinstance(converted, str):
            return (), f"{p.name}: {converted}"
        out.append(converted)
    return _implied_lengths_once(out), ""


def _implied_lengths_once(params: List[FortranParam]) -> Tuple[FortranParam, ...]:
    """Arrays as long as the same implied length (Alltoallw's send and receive types:
    the communicator's size) share the first one's: two MPI calls a call, not four."""
    first: Dict[str, str] = {}
    shared = []
    for p in params:
        if p.implied_length and p.implied_length in first:
            p = replace(p, same_length_as=first[p.implied_length])
        elif p.implied_length:
            first[p.implied_length] = p.name
        shared.append(p)
    return tuple(shared)


def _convert(function: MpiFunction, p: Param, names, conversions: Dict[str, Tuple[str, str]], quirks: FortranQuirks):
    """The conversion of one parameter, or why there is none (a string)."""
    base = p.base_type
    if p.name in fortran_quirks.FORTRAN_ADDRESS_RESULTS and p.is_pointer:
        return FortranParam(p, Conv.DIRECT)
    if (function.name, p.name) in fortran_quirks.FORTRAN_DROPPED_ADDRESSES:
        return FortranParam(p, Conv.DROPPED_ADDRESS)
    array = p.is_array or p.name.startswith("array_of_")
    logical_same = (quirks.logical_true, quirks.logical_false) == (1, 0)
    if base in conversions:
        f2c, c2f = conversions[base]
        if not p.is_pointer:
            return FortranParam(p, Conv.HANDLE, f2c=f2c, c2f=c2f, handle_type=base)
        if array:
            length = _array_length(p, names)
            implied = _implied_length(function, p, conversions)
            if not length and not implied:
                return f"an array of {base} whose length is no argument (the MPI's binding computes it)"
            return FortranParam(p, Conv.HANDLE_ARRAY, length, f2c, c2f, base, implied_length=implied)
        return FortranParam(p, Conv.HANDLE_REF, f2c=f2c, c2f=c2f, handle_type=base)
    if base.startswith("MPI_") and base not in SAME_REPRESENTATION and base != "MPI_Status":
        return f"no Fortran conversion for {base}"
    if base == "MPI_Status":
        if array:
            length = _array_length(p, names)
            if not length:
                return "a status array whose length is no argument"
            return FortranParam(p, Conv.STATUS_ARRAY, length)
        return FortranParam(p, Conv.STATUS)
    if base == "void" and p.is_pointer:
        return FortranParam(p, Conv.BUFFER)
    if base == "char":
        if p.type.count("*") + p.type.count("[") != 1:
            return "an array of strings"
        return FortranParam(p, Conv.STRING_IN if p.is_const else Conv.STRING_OUT)
    if base not in SAME_REPRESENTATION:
        return f"no Fortran conversion for {p.type}"
    if p.name in fortran_quirks.FORTRAN_LOGICALS:
        if not p.is_pointer:
            return FortranParam(p, Conv.LOGICAL)
        if array:
            # LOGICAL arrays are passed on as they are where .TRUE./.FALSE. are C's 1/0.
            return FortranParam(p, Conv.DIRECT) if logical_same else "a LOGICAL array whose values are not C's"
        return FortranParam(p, Conv.LOGICAL_REF)
    if p.name in fortran_quirks.FORTRAN_WEIGHTS:
        return FortranParam(p, Conv.WEIGHTS)
    return FortranParam(p, Conv.DIRECT if p.is_pointer else Conv.VALUE)


def _array_length(p: Param, names) -> str:
    return next((n for n in fortran_quirks.FORTRAN_ARRAY_LENGTHS.get(p.name, ()) if n in names), "")


def _implied_length(function: MpiFunction, p: Param, conversions: Dict[str, Tuple[str, str]]) -> str:
    """The C expression of an array length the call implies (its communicator's size or
    degree, asked with PMPI_ calls that tools do not see), or ""."""
    way = fortran_quirks.FORTRAN_IMPLIED_LENGTHS.get((function.name, p.name))
    comm = next((q.name for q in function.params if q.base_type == "MPI_Comm" and not q.is_pointer), "")
    if not way or not comm or "MPI_Comm" not in conversions:
        return ""
    return f"qmpi_f_{way}({conversions['MPI_Comm'][0]}(*{comm}))"
