"""Tools as qmpigen generates them: a spec resolved for one MPI (qmpigen.spec.resolve),
everything the tool templates need, as frozen values."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import FrozenSet, Optional, Tuple, Union

from qmpigen.escape import c_string
from qmpigen.mpi.model import Lifecycle, MpiFunction
from qmpigen.spec.values import CallMode, ContextSlot
from qmpigen.spec.variables import CONTEXT_VARS


class Interface(str, Enum):
    """How the chain calls a tool."""

    THESIS = "thesis"  # PREFIX_<Name>(args, level, chain), found through get_interceptions; TOOLS=
    CALLBACK = "callback"  # the MPI Forum's / MPICH's, registered by name; QMPI_TOOL_LIST=


@dataclass(frozen=True)
class CBlock:
    """C code ready to emit: `$` variables replaced, dedented; `line` is its line in the spec."""

    text: str
    line: int
    variables: FrozenSet[str] = frozenset()  # the `$` variables it used
    scoped: bool = False  # an `each`/`role` block: in its own { } (its locals are its own)
    is_context = False  # a code block, not the context's place (spec.ContextSlot)

    @property
    def uses_context(self) -> bool:
        return bool(self.variables & CONTEXT_VARS)


@dataclass(frozen=True)
class Wrapper:
    function: MpiFunction
    symbol: str  # PREFIX_Send
    mode: CallMode
    before: Tuple[CBlock, ...] = ()  # plain, `each` and `role` blocks, in the order written
    after: Tuple[CBlock, ...] = ()
    instead: Optional[CBlock] = None
    uses_ctx: bool = False  # the wrapper needs its instance's context in scope
    lifecycle: Optional[Lifecycle] = None  # set when the tool hooks MPI's start or end here
    implicit: bool = False  # intercepted only for the init/finalize hooks

    @property
    def returns(self) -> bool:
        return self.function.return_type != "void"

    @property
    def is_fan_out(self) -> bool:
        return self.mode is CallMode.FAN_OUT

    @property
    def makes_call(self) -> bool:
        return self.mode.makes_call


@dataclass(frozen=True)
class ContextField:
    declaration: str
    name: str
    initializer: Optional[str]


@dataclass(frozen=True)
class ToolArgument:
    """A tool argument: {tool}_argument_{name}(...) returns it (long long or const char *)."""

    name: str
    default: Optional[str]  # the spec's value: the string's characters, or the integer; None: none
    is_integer: bool

    @property
    def shown(self) -> str:
        """The default as the spec wrote it, for comments."""
        if self.default is None:
            return "NULL"
        return self.default if self.is_integer else f'"{self.default}"'

    @property
    def c_default(self) -> str:
        """The default as a C expression of the argument's type: a string is data, whatever
        its characters (escaped, never spliced into the code)."""
        if self.default is None:
            return "NULL"
        if not self.is_integer:
            return f'"{c_string(self.default)}"'
        # -9223372036854775808LL would be the negation of a constant too large for long long.
        return f"({int(self.default) + 1}LL - 1)" if int(self.default) == -(2**63) else f"{self.default}LL"


@dataclass(frozen=True)
class Tool:
    """A spec resolved for one MPI: everything the templates need."""

    name: str
    prefix: str
    spec_file: str  # base name of the spec, for banners and #line
    core: Optional[str]
    fields: Tuple[ContextField, ...]
    has_context: bool  # a context struct is generated (user fields or hooks)
    has_hooks: bool
    preamble: Tuple[Union[CBlock, ContextSlot], ...]  # file-scope code and the context, in spec order
    on_init: Optional[CBlock]
    on_finalize: Optional[CBlock]
    wrappers: Tuple[Wrapper, ...]  # enumeration order
    interface: Interface = Interface.THESIS
    session_rank: bool = False  # $rank in the sessions model, from the mpi://WORLD process set
    arguments: Tuple[ToolArgument, ...] = ()

    @property
    def has_integer_arguments(self) -> bool:
        return any(a.is_integer for a in self.arguments)

    @property
    def context_type(self) -> str:
        return f"struct {self.name}_context"

    @property
    def context_getter(self) -> str:
        return f"{self.name}_context_of"
