"""MPI quirks in one place: data, not `if name == ...` in emitters.

Everything that is regular (return types, const, array parameters, which names are
macros) is read from the header itself; only what the header cannot tell us lives here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Dict, FrozenSet, Mapping, Optional, Tuple


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


# -- Fortran bindings ---------------------------------------------------------------------
# Facts the C header cannot tell: how each MPI's Fortran bindings are named, linked and
# called, and which Fortran arguments mean something a C argument does not. The Fortran
# routines themselves are found in the MPI's libraries (qmpigen.mpi.fortran_libs), never here.

# Fortran compiler drivers beside mpicc, in order of preference (mpicc.mpich -> mpif90.mpich).
FORTRAN_DRIVER_NAMES: Tuple[str, ...] = ("mpif90", "mpifort")

# The Fortran 77 manglings in use ({lower}: "mpi_send", {upper}: "MPI_SEND"): gfortran's
# (trailing underscore), g77's (double for names with an underscore), none (xlf), upper
# case (Cray, Intel on Windows). Only those the MPI's library exports are defined.
FORTRAN_MANGLINGS: Tuple[str, ...] = (
    "{lower}_",
    "{lower}__",
    "{lower}",
    "{upper}",
    # Open MPI (4.1) names the TYPE(C_PTR) overloads of `use mpi` (MPI_Alloc_mem,
    # MPI_Win_allocate, ...) so: the pointer arrives by reference as with INTEGER(KIND=
    # MPI_ADDRESS_KIND), so one entry serves both.
    "{lower}_cptr_",
    "{lower}_cptr__",
    "{lower}_cptr",
    "{upper}_CPTR",
)


@dataclass(frozen=True)
class FortranSentinel:
    """How a Fortran sentinel (MPI_IN_PLACE, ...) reaches C: either the Fortran argument
    is the address of one of `symbols` (a common block or module variable), or, with
    `holds_address`, the first symbol is a C pointer variable holding that address."""

    symbols: Tuple[str, ...]
    holds_address: bool = False


@dataclass(frozen=True)
class F08Entries:
    """One family of `use mpi_f08` entry names: {lower}{suffix}."""

    suffix: str
    bypasses_c: bool  # the MPI's own routine calls PMPI_ (or internals), so the chain misses it
    how: str  # what the MPI's routine does, for `qmpigen functions`
    # False: the core defines no entries of this family even where they bypass C (calling
    # conventions no compiler here can test); they stay with the MPI's binding.
    defined: bool = True


@dataclass(frozen=True)
class FortranQuirks:
    link_query: Tuple[str, ...]  # driver flags that print its link line
    logical_true: int  # the Fortran compiler's .TRUE. and .FALSE. as the MPI was built for
    logical_false: int
    f77_reaches_c: bool  # the MPI's mpif.h / use mpi routines call the C MPI_ names
    f77_sentinels: Mapping[str, FortranSentinel]
    f08_sentinels: Mapping[str, FortranSentinel]
    f08_entries: Tuple[F08Entries, ...]
    # (flag, routine): the MPI fills its sentinel pointers in `routine` while `flag` is
    # set, from its own Fortran MPI_Init; our entries replace that MPI_Init, so they call it.
    setup: Optional[Tuple[str, str]] = None

    def is_fortran_symbol(self, symbol: str) -> bool:
        return symbol.startswith("mpi_") and symbol.endswith("_") and not symbol.startswith("mpi_fortran_")


def _ompi_sentinel(name: str) -> FortranSentinel:
    # Open MPI defines each sentinel in every mangling it may meet (ompi/mpi/fortran/base/
    # constants.h, OMPI_IS_FORTRAN_<NAME>); Debian's build exports the gfortran one only.
    lower = f"mpi_fortran_{name}"
    return FortranSentinel((lower + "_", lower + "__", lower, lower.upper()))


# Open MPI's sentinels are common blocks that mpif.h, use mpi and use mpi_f08 share.
_OMPI_SENTINELS: Dict[str, FortranSentinel] = {
    name: _ompi_sentinel(stem)
    for name, stem in (
        ("MPI_BOTTOM", "bottom"),
        ("MPI_IN_PLACE", "in_place"),
        ("MPI_STATUS_IGNORE", "status_ignore"),
        ("MPI_STATUSES_IGNORE", "statuses_ignore"),
        ("MPI_UNWEIGHTED", "unweighted"),
        ("MPI_WEIGHTS_EMPTY", "weights_empty"),
    )
}

FORTRAN: Dict[str, FortranQuirks] = {
    # MPICH 4.0 (Debian libmpich-dev 4.0.2, libmpichfort): its mpif.h routines call the C
    # MPI_ names; `use mpi_f08` has *_f08_ routines that call PMPI_ through bind(C)
    # interfaces (missed by any C interposer) and *_f08ts_ ones for choice buffers that
    # go through C descriptor wrappers to the C MPI_ names. Sentinel addresses of mpif.h /
    # use mpi are stored by mpirinitf_ (setbot.c) into C pointers; mpi_f08's are
    # module variables with C binding names.
    "MPICH": FortranQuirks(
        link_query=("-show",),
        logical_true=1,
        logical_false=0,
        f77_reaches_c=True,
        f77_sentinels={
            "MPI_BOTTOM": FortranSentinel(("MPIR_F_MPI_BOTTOM",), holds_address=True),
            "MPI_IN_PLACE": FortranSentinel(("MPIR_F_MPI_IN_PLACE",), holds_address=True),
            "MPI_STATUS_IGNORE": FortranSentinel(("MPI_F_STATUS_IGNORE",), holds_address=True),
            "MPI_STATUSES_IGNORE": FortranSentinel(("MPI_F_STATUSES_IGNORE",), holds_address=True),
            "MPI_UNWEIGHTED": FortranSentinel(("MPIR_F_MPI_UNWEIGHTED",), holds_address=True),
            "MPI_WEIGHTS_EMPTY": FortranSentinel(("MPIR_F_MPI_WEIGHTS_EMPTY",), holds_address=True),
        },
        f08_sentinels={
            "MPI_BOTTOM": FortranSentinel(("MPIR_F08_MPI_BOTTOM",)),
            "MPI_IN_PLACE": FortranSentinel(("MPIR_F08_MPI_IN_PLACE",)),
            "MPI_STATUS_IGNORE": FortranSentinel(("MPIR_F08_MPI_STATUS_IGNORE_OBJ",)),
            "MPI_STATUSES_IGNORE": FortranSentinel(("MPIR_F08_MPI_STATUSES_IGNORE_OBJ",)),
            "MPI_UNWEIGHTED": FortranSentinel(("__mpi_f08_link_constants_MOD_mpi_unweighted",)),
            "MPI_WEIGHTS_EMPTY": FortranSentinel(("__mpi_f08_link_constants_MOD_mpi_weights_empty",)),
        },
        f08_entries=(
            F08Entries("_f08_", True, "MPICH's mpi_f08 routine calls PMPI_ directly (bind(C) interface)"),
            F08Entries("_f08ts_", False, "MPICH's mpi_f08 descriptor routine calls the C MPI_ name"),
        ),
        setup=("MPIR_F_NeedInit", "mpirinitf_"),
    ),
    # Open MPI 4.1 (Debian libopenmpi-dev 4.1.4): libmpi_mpifh's routines and
    # libmpi_usempif08's *_f08_ ones call PMPI_ directly (ompi_send_f -> PMPI_Send): without
    # entries here a Fortran application bypasses every tool. Sentinels are common blocks
    # shared by all three bindings (mpif.h, use mpi, use mpi_f08).
    "Open MPI": FortranQuirks(
        link_query=("--showme:link",),
        logical_true=1,
        logical_false=0,
        f77_reaches_c=False,
        f77_sentinels=_OMPI_SENTINELS,
        f08_sentinels=_OMPI_SENTINELS,
        f08_entries=(F08Entries("_f08_", True, "Open MPI's mpi_f08 routine calls PMPI_ through its mpif.h code"),),
    ),
}

# Intel MPI 2021 (PyPI impi-devel) is MPICH-derived: libmpifort's mpif.h / use mpi
# routines call the C MPI_ names, its *_f08_ routines PMPI_, its *_f08ts_ ones the C names;
# the mpif.h sentinels and their setup live in libmpi as in MPICH. Its mpi_f08 module is
# ifort's (gfortran cannot read it) and the ifort-built library names module variables
# ifort's way (module_mp_name_), so no mpi_f08 entry can be tested here: none is defined.
# The gfortran modules of `use mpi` ship under include/mpi/gfortran/<version>.
FORTRAN["Intel MPI"] = FortranQuirks(
    link_query=("-show",),
    logical_true=1,  # as gfortran; Intel's routines read any non-zero as .TRUE. and write 1
    logical_false=0,
    f77_reaches_c=True,
    f77_sentinels=FORTRAN["MPICH"].f77_sentinels,
    f08_sentinels={
        **FORTRAN["MPICH"].f08_sentinels,
        "MPI_UNWEIGHTED": FortranSentinel(("mpi_f08_link_constants_mp_mpi_unweighted_",)),
        "MPI_WEIGHTS_EMPTY": FortranSentinel(("mpi_f08_link_constants_mp_mpi_weights_empty_",)),
    },
    f08_entries=(
        F08Entries("_f08_", True, "Intel MPI's mpi_f08 routine calls PMPI_ directly; its ifort module is untested here", defined=False),
        F08Entries("_f08ts_", False, "Intel MPI's mpi_f08 descriptor routine calls the C MPI_ name"),
    ),
    setup=FORTRAN["MPICH"].setup,
)

# Handle types whose conversions are not named after the type (MPI_Type_f2c converts an
# MPI_Datatype). Used where the header defines the conversions only as macros (MPICH).
FORTRAN_HANDLE_STEMS: Dict[str, str] = {"MPI_Datatype": "Type"}

# Parameters (by name, as both MPIs' headers spell them) that are LOGICAL in Fortran
# (MPI standard bindings): C int 0/1 <-> the compiler's .FALSE./.TRUE.
FORTRAN_LOGICALS: FrozenSet[str] = frozenset({"flag", "commute", "periods", "remain_dims", "reorder", "weighted"})

# Integer arrays that may be MPI_UNWEIGHTED / MPI_WEIGHTS_EMPTY (dist_graph topologies).
FORTRAN_WEIGHTS: FrozenSet[str] = frozenset({"sourceweights", "destweights", "weights"})

# Arrays of handles or statuses, by name: the parameter giving their length (the first
# the function has). Arrays without one (sendtypes of MPI_Alltoallw: the communicator's
# size) pass through.
FORTRAN_ARRAY_LENGTHS: Dict[str, Tuple[str, ...]] = {
    "array_of_requests": ("count", "incount"),
    "array_of_statuses": ("count", "incount"),
    "array_of_types": ("count",),
    "array_of_datatypes": ("max_datatypes",),
}

# Indices that Fortran counts from 1 and C from 0 (MPI standard 3.7.5): (function, parameter)
# -> the parameter giving the number of entries ("" for a scalar).
FORTRAN_ONE_BASED: Dict[Tuple[str, str], str] = {
    ("MPI_Waitany", "index"): "",
    ("MPI_Testany", "index"): "",
    ("MPI_Waitsome", "array_of_indices"): "outcount",
    ("MPI_Testsome", "array_of_indices"): "outcount",
}

# Arguments of the C binding that the Fortran binding does not have: passed as NULL
# (the command line of a Fortran program is not MPI's to see).
FORTRAN_ABSENT: Dict[str, Tuple[str, ...]] = {
    "MPI_Init": ("argc", "argv"),
    "MPI_Init_thread": ("argc", "argv"),
    "MPI_Info_create_env": ("argc", "argv"),
}

# Fortran routines without IERROR (MPI standard: MPI_PCONTROL(LEVEL); functions such as
# MPI_WTIME return their value instead).
FORTRAN_NO_IERROR: FrozenSet[str] = frozenset({"MPI_Pcontrol"})

# Why a function's Fortran entry stays with the MPI's own binding, by parameter name
# (checked after the regular rules): what the Fortran argument means is not the C one.
FORTRAN_PASS_THROUGH_PARAMS: Dict[str, str] = {
    # C reads an attribute that Fortran set as a pointer to its value, Fortran reads a C
    # one as the address (MPI standard, attributes across languages): only the MPI's own
    # binding records which language set it.
    "attribute_val": "an attribute set from Fortran is a pointer to its value in C; only the MPI's binding records the language",
    "attr_val": "an attribute set from Fortran is a pointer to its value in C; only the MPI's binding records the language",
    "argv": "argument vectors are blank-padded CHARACTER arrays in Fortran",
    "array_of_argv": "argument vectors are blank-padded CHARACTER arrays in Fortran",
    "array_of_commands": "command arrays are blank-padded CHARACTER arrays in Fortran",
    "array_of_errcodes": "MPI_ERRCODES_IGNORE and the error-code array stay with the MPI's binding",
}

# `void *` results that C declares as any pointer's address: the MPI stores a pointer
# where the argument points, and Fortran's INTEGER(KIND=MPI_ADDRESS_KIND) or TYPE(C_PTR)
# holds it just as C's void * (MPI_Alloc_mem, MPI_Win_allocate(_shared), MPI_Win_shared_query).
FORTRAN_ADDRESS_RESULTS: FrozenSet[str] = frozenset({"baseptr"})

# Addresses C returns that mpif.h / use mpi have no way to hold (MPI standard: there
# MPI_BUFFER_DETACH's BUFFER_ADDR is a choice buffer, not written; mpi_f08's is a
# TYPE(C_PTR) that is): (function, parameter) whose C argument is a local the address
# is dropped into for mpif.h, as the MPIs' own bindings do.
FORTRAN_DROPPED_ADDRESSES: FrozenSet[Tuple[str, str]] = frozenset(
    {
        ("MPI_Buffer_detach", "buffer"),  # Open MPI's name
        ("MPI_Buffer_detach", "buffer_addr"),  # MPICH's
        ("MPI_Comm_detach_buffer", "buffer_addr"),  # MPI 4.1
        ("MPI_Session_detach_buffer", "buffer_addr"),
    }
)

# Arrays of handles whose length the call implies instead of naming (MPI standard):
# (function, parameter) -> "peers" (the communicator's size, its remote group's for an
# intercommunicator), "in_neighbors" / "out_neighbors" (its topology's degrees).
FORTRAN_IMPLIED_LENGTHS: Dict[Tuple[str, str], str] = {
    **{(f, p): "peers" for f in ("MPI_Alltoallw", "MPI_Ialltoallw", "MPI_Alltoallw_init") for p in ("sendtypes", "recvtypes")},
    **{
        (f, p): way
        for f in ("MPI_Neighbor_alltoallw", "MPI_Ineighbor_alltoallw", "MPI_Neighbor_alltoallw_init")
        for p, way in (("sendtypes", "out_neighbors"), ("recvtypes", "in_neighbors"))
    },
}

# Error-handler procedures (MPI standard typedefs, and MPICH's older *_fn spellings) ->
# the handle type whose errors they handle. A Fortran handler gets that handle as an
# INTEGER: the core registers a C handler that converts it and calls the Fortran one.
FORTRAN_ERRHANDLER_FUNCTIONS: Dict[str, str] = {
    "MPI_Comm_errhandler_function": "MPI_Comm",
    "MPI_Comm_errhandler_fn": "MPI_Comm",
    "MPI_Handler_function": "MPI_Comm",
    "MPI_File_errhandler_function": "MPI_File",
    "MPI_File_errhandler_fn": "MPI_File",
    "MPI_Win_errhandler_function": "MPI_Win",
    "MPI_Win_errhandler_fn": "MPI_Win",
    "MPI_Session_errhandler_function": "MPI_Session",
}

# Functions whose Fortran argument semantics differ from C in ways no parameter type shows.
FORTRAN_PASS_THROUGH: Dict[str, str] = {
    "MPI_Info_get_string": "BUFLEN counts the C terminating NUL, the Fortran binding's does not",
}

# The longest string an MPI routine writes is the largest of these bounds that the header
# defines: a Fortran CHARACTER result gets a C buffer at least that long.
FORTRAN_STRING_BOUNDS: Tuple[str, ...] = (
    "MPI_MAX_PROCESSOR_NAME",
    "MPI_MAX_ERROR_STRING",
    "MPI_MAX_OBJECT_NAME",
    "MPI_MAX_LIBRARY_VERSION_STRING",
    "MPI_MAX_INFO_KEY",
    "MPI_MAX_INFO_VAL",
    "MPI_MAX_PORT_NAME",
    "MPI_MAX_DATAREP_STRING",
    "MPI_MAX_PSET_NAME_LEN",
    "MPI_MAX_STRINGTAG_LEN",
)
