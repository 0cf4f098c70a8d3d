"""The MPI function model: frozen values built from a parsed mpi.h.

No I/O here. Derived C text (signatures, argument lists, enum names) comes from
properties so templates read like the C they produce.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import Enum
from typing import Dict, Iterator, Optional, Tuple

from qmpigen.errors import Location, QmpigenError
from qmpigen.mpi.quirks import ABI_SYMBOLS, IMPLEMENTATION_MARKERS, PMPI_SLOT_RESERVED, Dispatch
from qmpigen.output.cnames import PMPI_SLOT_CANDIDATES, PMPI_SLOTS

# What the chain report after MPI_Session_init calls (rank in mpi://WORLD).
SESSION_REPORT_FUNCTIONS = ("MPI_Session_init", "MPI_Group_from_session_pset", "MPI_Group_rank", "MPI_Group_free")
FORUM_SENTINEL = "MPI_LAST_FUNC_T"  # last member of enum QMPI_Functions_enum (MPICH)

# The callback interface's six functions (seed 002, as MPICH >= 5 declares them). An MPI
# that declares them may differ in types (MPICH 4.0 takes `enum QMPI_Functions_enum`);
# the core then defines them with the header's types and these parameter names.
FORUM_TOOL_API: Dict[str, Tuple[Tuple[str, ...], str]] = {
    # name: (parameter names, the seed's parameter list)
    "QMPI_Register_tool_name": (
        ("tool_name", "init_function_ptr"),
        "const char *tool_name, void (*init_function_ptr)(int tool_id)",
    ),
    "QMPI_Register_tool_storage": (("tool_id", "tool_storage"), "int tool_id, void *tool_storage"),
    "QMPI_Register_function": (
        ("calling_tool_id", "function_enum", "function_ptr"),
        "int calling_tool_id, int function_enum, void (*function_ptr)(void)",
    ),
    "QMPI_Get_function": (
        ("calling_tool_id", "function_enum", "function_ptr", "next_tool_id"),
        "int calling_tool_id, int function_enum, void (**function_ptr)(void), int *next_tool_id",
    ),
    "QMPI_Get_tool_storage": (("context", "tool_id", "storage"), "QMPI_Context context, int tool_id, void **storage"),
    "QMPI_Get_calling_address": (("context", "address"), "QMPI_Context context, void **address"),
}


class Lifecycle(str, Enum):
    """What a function does to MPI's life (MPI 5.0 sections 11.2 and 11.3)."""

    WORLD_INIT = "world_init"  # initialises the world model
    SESSION_INIT = "session_init"  # opens a session
    FINALIZE = "finalize"  # finalises the world model
    SESSION_FINALIZE = "session_finalize"  # closes a session

    @property
    def starts(self) -> bool:
        return self in (Lifecycle.WORLD_INIT, Lifecycle.SESSION_INIT)


# The functions that start or end MPI: the one list of them.
LIFECYCLE: Dict[str, Lifecycle] = {
    "MPI_Init": Lifecycle.WORLD_INIT,
    "MPI_Init_thread": Lifecycle.WORLD_INIT,
    "MPI_Session_init": Lifecycle.SESSION_INIT,
    "MPI_Finalize": Lifecycle.FINALIZE,
    "MPI_Session_finalize": Lifecycle.SESSION_FINALIZE,
}

# Functions that ask MPI for a thread level and return the one provided (MPI 5.0 11.2.1):
# the positions of those two parameters. The core caps them at what the stack supports.
THREAD_LEVEL_PARAMS: Dict[str, Tuple[int, int]] = {"MPI_Init_thread": (2, 3)}


@dataclass(frozen=True)
class Param:
    """One parameter of an MPI function, with its C text printed by pycparser."""

    name: str
    declaration: str  # as declared, with the name: "int ranges[][3]"
    type: str  # abstract type as declared: "int [][3]"
    va_type: str  # type after array/function decay, for va_arg: "int (*)[3]"
    va_declaration: str  # a local that receives it: "int (*ranges)[3]"
    base_type: str  # innermost type name: "int", "MPI_Datatype", "void"
    is_pointer: bool  # pointer or array at the top level
    is_array: bool
    is_const: bool  # the pointed-to data is const
    is_function_pointer: bool
    promoted_type: Optional[str] = None  # set when varargs promote the type (char, short, float)


@dataclass(frozen=True)
class MpiFunction:
    """One MPI procedure as the header declares it."""

    name: str  # "MPI_Send"
    return_type: str  # "int", "double", "MPI_Aint"
    params: Tuple[Param, ...]
    variadic: bool
    has_pmpi: bool  # a PMPI_ twin is declared (or #defined)
    is_macro: bool  # the header #defines this name: generated C must never define it
    categories: Tuple[str, ...]  # sorted
    location: Location
    quirk: Optional[Dispatch] = None  # from quirks.DISPATCH: Dispatch.FAN_OUT for MPI_Pcontrol
    pmpi_optional: bool = False  # the C library may lack PMPI_<Name> (quirks.OPTIONAL_PMPI)

    @property
    def lifecycle(self) -> Optional[Lifecycle]:
        """Whether it starts or ends MPI (then tools may hook it), else None."""
        return LIFECYCLE.get(self.name)

    @property
    def thread_level_params(self) -> Optional[Tuple[str, str]]:
        """(required, provided): the names of a thread-level request and its result."""
        positions = THREAD_LEVEL_PARAMS.get(self.name)
        return (self.params[positions[0]].name, self.params[positions[1]].name) if positions else None

    @property
    def is_fan_out(self) -> bool:
        """The core calls every tool's wrapper itself; wrappers make no next call."""
        return self.quirk is Dispatch.FAN_OUT

    # -- names -------------------------------------------------------------
    @property
    def prefix(self) -> str:
        return self.name.split("_", 1)[0]  # "MPI" or "MPIX"

    @property
    def short(self) -> str:
        """Name without the MPI_ prefix: the thesis's wrapper suffix (T1_Send)."""
        return self.name.split("_", 1)[1]

    @property
    def pmpi(self) -> str:
        return "P" + self.name

    @property
    def enum(self) -> str:
        """Thesis enumeration name (appendix 7.1): _MPI_Send."""
        return "_" + self.name

    @property
    def forum_enum(self) -> str:
        """MPI Forum / MPICH enumeration name: MPI_SEND_T."""
        return self.name.upper() + "_T"

    # -- C text ------------------------------------------------------------
    @property
    def returns_int(self) -> bool:
        return self.return_type == "int"

    @property
    def fixed_params(self) -> str:
        """Declared parameters without the ellipsis, comma separated ('' if none)."""
        return ", ".join(p.declaration for p in self.params)

    @property
    def params_c(self) -> str:
        """The parameter list exactly as the prototype has it ('void' when empty)."""
        parts = [p.declaration for p in self.params]
        if self.variadic:
            parts.append("...")
        return ", ".join(parts) if parts else "void"

    @property
    def args(self) -> str:
        """Argument names for a call: 'buf, count, datatype'."""
        return ", ".join(p.name for p in self.params)

    @property
    def signature(self) -> str:
        return f"{self.return_type} {self.name}({self.params_c})"

    def with_extra(self, extra: str, leading: bool = False) -> str:
        """Fixed parameters plus extra trailing (or leading) parameters."""
        fixed = [p.declaration for p in self.params]
        parts = [extra] + fixed if leading else fixed + [extra]
        return ", ".join(parts)

    def has_category(self, category: str) -> bool:
        return category in self.categories


@dataclass(frozen=True)
class HeaderFacts:
    """What the header is: implementation, versions, what it already declares."""

    implementation: str  # "MPICH", "Open MPI", "Intel MPI", "unknown"
    version: str  # implementation version, "" when unknown
    mpi_version: int
    mpi_subversion: int
    declares_qmpi: bool  # MPICH >= 4: QMPI_Context, QMPI_X prototypes, enum QMPI_Functions_enum
    forum_enum: Tuple[Tuple[str, int], ...] = ()  # the header's enum QMPI_Functions_enum: (member, value)
    # Tool-interface names the header already declares (typedefs, prototypes, macros):
    # QMPI_* and the seed's MPI_-named spellings. Generated code never redeclares them.
    tool_names: Tuple[str, ...] = ()
    # FORUM_TOOL_API functions the header declares: (name, parameters as declared,
    # printed with FORUM_TOOL_API's parameter names).
    tool_signatures: Tuple[Tuple[str, str], ...] = ()
    # Integer macros that pin down this MPI (quirks.IDENTITY_MACROS it defines, with
    # their values) and the implementation markers it does not define: qmpi.h checks
    # both, so it refuses any other MPI's mpi.h at compile time.
    identity: Tuple[Tuple[str, int], ...] = ()
    absent_markers: Tuple[str, ...] = ()
    # Letters L for which the header declares a name starting with L + "MPI_" (QMPI_ in
    # MPICH >= 4, OMPI_ macros in Open MPI): PMPI tool slots must not use them.
    mpi_name_letters: Tuple[str, ...] = ()

    @property
    def title(self) -> str:
        """How messages and banners name the MPI: "MPICH 5.0.2 (MPI 5.0)"."""
        return f"{self.implementation} {self.version}".strip() + f" (MPI {self.mpi_version}.{self.mpi_subversion})"

    @property
    def identity_clauses(self) -> Tuple[str, ...]:
        """Preprocessor conditions all true exactly for this MPI's mpi.h (none if unknowable)."""
        if not self.identity:
            return ()
        present = tuple(f"defined({m}) && {m} == {value}" for m, value in self.identity)
        return present + tuple(f"!defined({m})" for m in self.absent_markers)

    @property
    def known_implementations(self) -> Tuple[Tuple[str, str], ...]:
        """(implementation, marker macro) for every MPI qmpigen can name, in detection order."""
        return tuple((name, markers[0]) for name, markers in IMPLEMENTATION_MARKERS)

    def declares(self, name: str) -> bool:
        return name in self.tool_names

    @property
    def abi_symbol(self) -> Optional[str]:
        """A symbol every library of this MPI's ABI defines (quirks.ABI_SYMBOLS), or None."""
        return ABI_SYMBOLS.get(self.implementation)

    @property
    def foreign_abi_symbols(self) -> Tuple[Tuple[str, str], ...]:
        """(symbol, implementation) of the other ABIs qmpigen knows: an MPI library that
        defines one is not of this MPI's ABI. None for an implementation it cannot name."""
        if self.implementation == "unknown":
            return ()
        return tuple((symbol, name) for name, symbol in ABI_SYMBOLS.items() if name != self.implementation)

    @property
    def pmpi_slot_letters(self) -> Tuple[str, ...]:
        """The first letters of the PMPI tool slots' continuation entries (YMPI_Send, ...):
        the first cnames.PMPI_SLOTS candidates that no MPI and not this header use."""
        free = [
            letter
            for letter in PMPI_SLOT_CANDIDATES
            if letter not in PMPI_SLOT_RESERVED and letter not in self.mpi_name_letters
        ]
        if len(free) < PMPI_SLOTS:
            raise QmpigenError(
                f"{self.title}: mpi.h declares names starting with {len(self.mpi_name_letters)} different "
                f"letters before MPI_, too many to give {PMPI_SLOTS} PMPI tool slots their own"
            )
        return tuple(free[:PMPI_SLOTS])

    @property
    def tool_functions(self) -> Tuple[str, ...]:
        """The callback interface's functions (FORUM_TOOL_API), in the seed's order."""
        return tuple(FORUM_TOOL_API)

    def tool_params(self, name: str) -> str:
        """Parameters of a callback-interface function: the header's, else the seed's."""
        return dict(self.tool_signatures).get(name, FORUM_TOOL_API[name][1])

    def as_dict(self) -> Dict[str, object]:
        return {
            "implementation": self.implementation,
            "version": self.version,
            "mpi_version": f"{self.mpi_version}.{self.mpi_subversion}",
            "declares_qmpi": self.declares_qmpi,
        }


@dataclass(frozen=True)
class FunctionSet:
    """Functions of one header, in a fixed order, iterable."""

    facts: HeaderFacts
    functions: Tuple[MpiFunction, ...]

    def __iter__(self) -> Iterator[MpiFunction]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)


@dataclass(frozen=True)
class MpiApi(FunctionSet):
    """Every MPI_/MPIX_ function the header declares, in declaration order."""

    _by_name: Dict[str, MpiFunction] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {f.name: f for f in self.functions})

    def get(self, name: str) -> Optional[MpiFunction]:
        return self._by_name.get(name)


@dataclass(frozen=True)
class Enumeration(FunctionSet):
    """The selected functions in enumeration order: index i is _MPI_<Name> = i."""

    _index: Dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {f.name: i for i, f in enumerate(self.functions)})

    def index(self, name: str) -> int:
        return self._index[name]

    def get(self, name: str) -> Optional[MpiFunction]:
        i = self._index.get(name)
        return None if i is None else self.functions[i]

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(f.name for f in self.functions)

    @property
    def reports_sessions(self) -> bool:
        """The chain report after MPI_Session_init needs these functions: present unless
        the MPI lacks sessions or the selection left them out."""
        return all(self.get(name) for name in SESSION_REPORT_FUNCTIONS)

    def forum_members(self) -> Tuple[Tuple[str, int, int], ...]:
        """The callback interface's enum: (member, value, enumeration index or -1).

        An MPI that declares `enum QMPI_Functions_enum` (MPICH >= 4) fixes names and
        values; its members we do not enumerate map to -1. Otherwise the enum is ours,
        in enumeration order."""
        if self.facts.forum_enum:
            by_member = {f.forum_enum: i for i, f in enumerate(self.functions)}
            return tuple((m, v, by_member.get(m, -1)) for m, v in self.facts.forum_enum if m != FORUM_SENTINEL)
        return tuple((f.forum_enum, i, i) for i, f in enumerate(self.functions))

    @property
    def forum_size(self) -> int:
        """Value of the enum's sentinel MPI_LAST_FUNC_T."""
        for member, value in self.facts.forum_enum:
            if member == FORUM_SENTINEL:
                return value
        return len(self.functions)

    @property
    def hash(self) -> str:
        """Identity of the enumeration: a tool built for another one must not be wired in."""
        digest = hashlib.sha256("\n".join(self.names).encode()).hexdigest()
        return f"{len(self.functions)}-{digest[:16]}"
