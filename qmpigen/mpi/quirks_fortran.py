"""MPI quirks of the Fortran bindings: facts the C header cannot tell — how each MPI's
Fortran bindings are named, linked and called, and which Fortran arguments mean
something a C argument does not. The Fortran routines themselves are found in the MPI's
libraries (qmpigen.mpi.fortran_libs), never here. One entry per quirk, with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

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
        F08Entries(
            "_f08_",
            True,
            "Intel MPI's mpi_f08 routine calls PMPI_ directly; its ifort module is untested here",
            defined=False,
        ),
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
    **{
        (f, p): "peers"
        for f in ("MPI_Alltoallw", "MPI_Ialltoallw", "MPI_Alltoallw_init")
        for p in ("sendtypes", "recvtypes")
    },
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
