"""Tool specs as written: the values a .qmpi file parses to (qmpigen.spec.parse), before
they meet an MPI (qmpigen.spec.resolve turns them into a qmpigen.spec.tool.Tool).

Frozen values, no MPI knowledge: a spec parses the same on every MPI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import FrozenSet, Optional, Tuple, Union

from qmpigen.errors import Location

SPEC_SUFFIX = ".qmpi"


class CodeKind(str, Enum):
    """Where a code block of a spec is used; it decides which `$` variables exist there."""

    FILE = "file"  # code %{ %} at file scope
    HOOK = "hook"  # on init / on finalize
    PCONTROL = "pcontrol"  # on pcontrol
    BEFORE = "before"
    AFTER = "after"
    INSTEAD = "instead"
    EACH = "each"  # before each TYPE
    EACH_AFTER = "each_after"  # after each TYPE


class CallMode(str, Enum):
    """How a wrapper goes on: the spec's `call typed|exec_func`, or none at all."""

    TYPED = "typed"  # QMPI_Next_<Name>: the fast, typed call of the next link
    EXEC_FUNC = "exec_func"  # the thesis's variadic exec_func
    INSTEAD = "instead"  # the spec's instead code replaces the call
    FAN_OUT = "fan_out"  # MPI_Pcontrol: the core calls every tool itself

    @property
    def makes_call(self) -> bool:
        return self in (CallMode.TYPED, CallMode.EXEC_FUNC)


class Hook(str, Enum):
    """`on HOOK %{ %}`: the grammar's HOOK terminal."""

    INIT = "init"
    FINALIZE = "finalize"
    PCONTROL = "pcontrol"


@dataclass(frozen=True)
class Code:
    """C code between %{ and %}; `location` is the first character after %{."""

    text: str
    location: Location
    kind: CodeKind
    variables: FrozenSet[str] = frozenset()  # the `$` variables it uses ("ctx", "0", ...)


@dataclass(frozen=True)
class Selector:
    text: str  # "MPI_Send", "MPI_File_*", "collectives"
    location: Location

    @property
    def is_glob(self) -> bool:
        return any(c in self.text for c in "*?[")

    @property
    def is_function(self) -> bool:
        return not self.is_glob and self.text.startswith(("MPI_", "MPIX_", "PMPI_", "PMPIX_"))


@dataclass(frozen=True)
class SelectionSpec:
    include: Tuple[Selector, ...]
    exclude: Tuple[Selector, ...]
    location: Location

    def __str__(self) -> str:
        text = ", ".join(s.text for s in self.include)
        if self.exclude:
            text += " except " + ", ".join(s.text for s in self.exclude)
        return text


@dataclass(frozen=True)
class GroupDecl:
    name: str
    selection: SelectionSpec
    location: Location


@dataclass(frozen=True)
class Field:
    declaration: str  # "unsigned long long calls[NUM_MPI_FUNCS]"
    name: str  # "calls"
    initializer: Optional[str]  # "{ 0 }", "-1.0", or None (zero)
    location: Location


@dataclass(frozen=True)
class ArgumentDecl:
    """`argument NAME [= DEFAULT];`: a value from the instance's section of QMPI_CONF."""

    name: str
    default: Optional[str]  # the string's characters ("prof") or the integer ("1024"); None: NULL
    is_integer: bool  # the default is an integer: the value is parsed as a long long
    location: Location


@dataclass(frozen=True)
class EachCode:
    type: str  # normalised C type: "MPI_Comm", "MPI_Request *"; "" for a role
    code: Code
    location: Location
    role: Optional[str] = None  # `before role NAME`: parameters of this role, whatever their type

    @property
    def what(self) -> str:
        """The parameters it applies to, in words."""
        return f"a parameter of role '{self.role}'" if self.role else f"an argument of type '{self.type}'"


@dataclass(frozen=True)
class Rule:
    """One `intercept` statement: the functions, how to call on, the code around it."""

    selection: SelectionSpec
    call: CallMode  # TYPED or EXEC_FUNC
    before: Tuple[Code, ...]
    after: Tuple[Code, ...]
    before_each: Tuple[EachCode, ...]
    after_each: Tuple[EachCode, ...]
    instead: Optional[Code]
    location: Location

    @property
    def codes(self) -> Tuple[Code, ...]:
        each = tuple(e.code for e in self.before_each + self.after_each)
        return self.before + self.after + each + ((self.instead,) if self.instead else ())


@dataclass(frozen=True)
class ContextSlot:
    """Where the context struct goes among the file-scope code blocks."""

    is_context = True


CONTEXT = ContextSlot()


@dataclass(frozen=True)
class ToolSpec:
    file: str  # as given; only its base name reaches generated files
    name: str
    prefix: str
    core: Optional[str]
    groups: Tuple[GroupDecl, ...]
    fields: Tuple[Field, ...]
    has_context: bool  # a context block was written (possibly empty)
    preamble: Tuple[Union[Code, ContextSlot], ...]  # file-scope code and CONTEXT, in spec order
    rules: Tuple[Rule, ...]
    on_init: Optional[Code]
    on_finalize: Optional[Code]
    on_pcontrol: Optional[Code]
    location: Location  # of the tool statement
    arguments: Tuple[ArgumentDecl, ...] = ()  # in spec order

    @property
    def codes(self) -> Tuple[Code, ...]:
        """Every code block that runs in a wrapper or hook."""
        hooks = tuple(c for c in (self.on_init, self.on_finalize, self.on_pcontrol) if c is not None)
        return hooks + tuple(c for rule in self.rules for c in rule.codes)

    def uses(self, variable: str) -> bool:
        return any(variable in code.variables for code in self.codes)


TYPE_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\S")


def normalise_type(text: str) -> str:
    """'const  int[]' and 'const int []' compare equal; so do 'MPI_Request*' and 'MPI_Request *'."""
    return " ".join(TYPE_TOKEN.findall(text))
