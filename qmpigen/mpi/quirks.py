"""MPI quirks in one place: data, not `if name == ...` in emitters.

Everything that is regular (return types, const, array parameters, which names are
macros) is read from the header itself; only what the header cannot tell us lives here.
This module holds the C header's quirks; those of the Fortran bindings are beside it,
in qmpigen.mpi.quirks_fortran.
"""

from __future__ import annotations

from enum import Enum
from typing import Dict, FrozenSet, Mapping, Tuple


class Dispatch(str, Enum):
    """How the core calls a function's chain, where it is not the usual nested call."""

    FAN_OUT = "fan_out"  # every tool's wrapper in chain order, then PMPI; no next link


# MPI_Pcontrol (MPI standard 15.2 / seed 001; thesis listing 3.11): its wrappers do not
# call a next link; the core calls every tool's wrapper in chain order, then PMPI.
# It is also variadic: every tool receives the variadic tail as a va_list.
DISPATCH: Dict[str, Dispatch] = {
    "MPI_Pcontrol": Dispatch.FAN_OUT,
}

# First letters that PMPI tool slots must not use (qmpigen.output.cnames.PMPI_SLOT_CANDIDATES):
# a PMPI tool's private copy has its PMPI_X imports renamed to <letter>MPI_X, and the
# dynamic linker must find the core's continuation entry under that name, not one of the
# MPI's own. Besides these, build-core drops every letter L for which the MPI's mpi.h
# declares a name starting with L + "MPI_", and the core checks each renamed import at
# load time against the whole process.
PMPI_SLOT_RESERVED: Dict[str, str] = {
    "P": "PMPI_: the profiling names of every MPI",
    "Q": "QMPI_: MPICH >= 4 exports its callback tool interface (QMPI_Register_tool_name, ...)",
    "O": "OMPI_: Open MPI's libmpi exports OMPI_ symbols (OMPI_C_MPI_*), its headers OMPI_ macros",
    "A": "AMPI_: Adaptive MPI (Charm++) names its functions AMPI_",
    "X": "XMPI_: kept for a shared continuation beyond the slots (PnMPI's XMPI_ convention)",
    "N": "NMPI_: MPICH-derived MPIs' internal name-shifted calls (NMPI_ in older MPICH)",
}

# PMPI_ functions some MPIs declare in mpi.h without defining them in the C library.
# MPICH 4.0 (Debian's libmpich-dev 4.0.2) declares the MPI_Status Fortran 2008
# conversions, but libmpich defines none of them (libmpichfort has c2f08 only). The core
# references these weakly, so it links everywhere, and stops with a clear line if one
# is called where the library lacks it.
OPTIONAL_PMPI: FrozenSet[str] = frozenset(
    {
        "MPI_Status_c2f08",
        "MPI_Status_f082c",
        "MPI_Status_f082f",
        "MPI_Status_f2f08",
    }
)

# Handle conversions: C <-> Fortran (and Fortran 2008) handles; MPI 5.0 ABI integers.
CONVERSION_SUFFIXES: Tuple[str, ...] = ("_c2f", "_f2c", "_f082c", "_c2f08", "_f082f", "_f2f08", "_toint", "_fromint")

# Categories derived from the name, shared by every MPI. (category, kind, text)
NAME_CATEGORIES: Tuple[Tuple[str, str, str], ...] = (
    ("mpi_t", "prefix", "MPI_T_"),  # tool information interface (MPI 3.0+)
    ("mpix", "prefix", "MPIX_"),  # implementation extensions (MPICH)
    ("sessions", "prefix", "MPI_Session_"),  # MPI 4.0 Sessions model
    ("large_count", "suffix", "_c"),  # MPI 4.0 large-count (MPI_Count) variants
) + tuple(("conversion", "suffix", suffix) for suffix in CONVERSION_SUFFIXES)

# Removed from the standard in MPI 3.0 (still declared by some MPIs behind options;
# Open MPI #defines them to a compile error instead, which the macro check catches).
REMOVED: FrozenSet[str] = frozenset(
    {
        "MPI_Address",
        "MPI_Errhandler_create",
        "MPI_Errhandler_get",
        "MPI_Errhandler_set",
        "MPI_Type_extent",
        "MPI_Type_hindexed",
        "MPI_Type_hvector",
        "MPI_Type_lb",
        "MPI_Type_struct",
        "MPI_Type_ub",
    }
)

# Deprecated but not removed (MPI 2.0 attribute caching, MPI 4.0 info getters,
# MPI 4.1 _x variants superseded by large-count _c procedures).
DEPRECATED: FrozenSet[str] = frozenset(
    {
        "MPI_Attr_delete",
        "MPI_Attr_get",
        "MPI_Attr_put",
        "MPI_Keyval_create",
        "MPI_Keyval_free",
        "MPI_Info_get",
        "MPI_Info_get_valuelen",
        "MPI_Get_elements_x",
        "MPI_Status_set_elements_x",
        "MPI_Type_get_extent_x",
        "MPI_Type_get_true_extent_x",
        "MPI_Type_size_x",
    }
)

# C types that varargs promote (C11 6.5.2.2p6): va_arg must name the promoted type.
VARARG_PROMOTIONS: Dict[str, str] = {
    "char": "int",
    "signed char": "int",
    "unsigned char": "int",
    "short": "int",
    "short int": "int",
    "unsigned short": "int",
    "unsigned short int": "int",
    "_Bool": "int",
    "float": "double",
}

# GNU extensions in MPI headers that pycparser does not read. Open MPI's header alone
# carries about 1,000 __attribute__ annotations (deprecation, MPI_Datatype checks).
NEUTRALISING_DEFINES: Tuple[str, ...] = (
    "-D__attribute__(x)=",
    "-D__extension__=",
    "-D__restrict=",
    "-D__restrict__=",
    "-D__inline=",
    "-D__inline__=",
    "-D__asm__(x)=",
    "-D__asm(x)=",
    "-D__declspec(x)=",
)

# Header macros that say which MPI this is: (implementation, macros giving its version).
# Checked in order. The MPI 5.0 standard ABI comes first: MPICH's `mpicc_abi` (and any
# MPI in ABI mode) defines MPI_ABI_VERSION and none of the implementation's own macros,
# and the core it gets fits every library of that ABI. Intel MPI is MPICH-derived and
# defines MPICH_VERSION too, so it precedes MPICH. A string macro is the version as it
# is; integer macros are joined with dots.
IMPLEMENTATION_MARKERS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("MPI ABI", ("MPI_ABI_VERSION", "MPI_ABI_SUBVERSION")),
    ("Intel MPI", ("I_MPI_VERSION",)),
    ("MPICH", ("MPICH_VERSION",)),
    ("Open MPI", ("OMPI_MAJOR_VERSION", "OMPI_MINOR_VERSION", "OMPI_RELEASE_VERSION")),
)

# How the core tells at run time an MPI library of another ABI from one it can call
# (identity.c): by a symbol only that family's libraries define, never by the wording of
# MPI_Get_library_version, which derivatives change (MVAPICH2 says "MVAPICH2 Version",
# Intel MPI "Intel(R) MPI Library", Cray "CRAY MPICH": all of MPICH's ABI, all right for a
# core made from MPICH's mpi.h). Open MPI's predefined handles are addresses of its
# objects (its libraries define ompi_mpi_comm_world); MPICH's, its derivatives' and the
# standard ABI's are integer constants. An implementation qmpigen cannot name is checked
# for nothing: a check that stops jobs must not guess.
ABI_SYMBOLS: Dict[str, str] = {
    "Open MPI": "ompi_mpi_comm_world",
}

# Integer macros that pin down the MPI a core is generated for. qmpi.h compares those
# the header defined (and requires the other implementations' markers to be absent),
# so compiling a core or tool against another MPI's mpi.h stops with one line instead
# of errors deep inside qmpi.h. MPICH_NUMVERSION and I_MPI_NUMVERSION encode the full
# release; Open MPI spells its version in three macros.
IDENTITY_MACROS: Tuple[str, ...] = (
    "MPI_VERSION",
    "MPI_SUBVERSION",
    "MPI_ABI_VERSION",
    "MPI_ABI_SUBVERSION",
    "I_MPI_NUMVERSION",
    "MPICH_NUMVERSION",
    "OMPI_MAJOR_VERSION",
    "OMPI_MINOR_VERSION",
    "OMPI_RELEASE_VERSION",
)


def name_categories(name: str) -> FrozenSet[str]:
    found = set()
    for category, kind, text in NAME_CATEGORIES:
        if (kind == "prefix" and name.startswith(text)) or (kind == "suffix" and name.endswith(text)):
            found.add(category)
    if name in REMOVED:
        found.add("removed")
    if name in DEPRECATED:
        found.add("deprecated")
    return frozenset(found)


def implementation(macros: Mapping[str, str]) -> Tuple[str, str]:
    """(implementation, version) from the header's object-like macros, by
    IMPLEMENTATION_MARKERS: ("unknown", "") when no marker is defined."""
    for name, version_macros in IMPLEMENTATION_MARKERS:
        if version_macros[0] in macros:
            first = macros[version_macros[0]].strip()
            if first.startswith('"'):
                return name, first.strip('"')
            return name, ".".join(str(macro_number(macros, m)) for m in version_macros)
    return "unknown", ""


def macro_number(macros: Mapping[str, str], name: str) -> int:
    """An integer macro's value ("(4)" is 4); 0 when it is undefined or not an integer."""
    text = macros.get(name, "").strip("()")
    return int(text) if text.isdigit() else 0
