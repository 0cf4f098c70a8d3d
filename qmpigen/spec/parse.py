"""Tool specs, stage 1: .qmpi text -> ToolSpec, with grammars/qmpi_tool.lark.

lark parses; SpecBuilder, a lark Transformer, has one method per grammar rule (named
after it, the rule in its docstring) and does the checks that need no MPI. A syntax
error becomes one line saying where, what was expected and what was found. Every
error is a QmpigenError carrying file:line:col.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import lark
from lark import Token, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedInput, VisitError

from qmpigen.cache import cache_dir, read_entry, write_entry
from qmpigen.errors import Location, QmpigenError
from qmpigen.escape import printable
from qmpigen.mpi import groups as group_table
from qmpigen.mpi.roles import ROLES
from qmpigen.output.cnames import RESERVED_PREFIX
from qmpigen.output.resources import grammars_dir
from qmpigen.spec.syntax import syntax_error
from qmpigen.spec.values import (
    CONTEXT,
    ArgumentDecl,
    CallMode,
    Code,
    CodeKind,
    EachCode,
    Field,
    GroupDecl,
    Hook,
    Rule,
    SelectionSpec,
    Selector,
    ToolSpec,
    normalise_type,
)
from qmpigen.spec.variables import argument_uses, check_variables

GRAMMAR_FILE = "qmpi_tool.lark"

# Prefixes a tool's wrappers must not use: PREFIX_Send would be an MPI, PMPI or QMPI
# symbol (MPICH >= 4 declares QMPI_Send itself) or clash with the core's own names.
RESERVED_PREFIXES = frozenset({"MPI", "PMPI", "MPIX", "PMPIX", "QMPI", "qmpi", "MPIR", "PMPIR"})
RESERVED_NAMES = frozenset({"qmpi", "core", "vector", "cell"})
# What a `core "PATH"` may hold besides letters and digits: nothing make or a shell reads.
CORE_PATH_PUNCTUATION = "_./+@,=~-"


@functools.lru_cache(maxsize=None)
def parser() -> lark.Lark:
    """The spec parser; building its tables is most of parsing a small spec, so they are
    kept in the user's cache (qmpigen.cache), keyed by the grammar and lark's version."""
    grammar = (grammars_dir() / GRAMMAR_FILE).read_text(encoding="utf-8")
    options = dict(parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=False)
    directory = cache_dir("grammars")
    if directory is None:
        return lark.Lark(grammar, **options)
    key = hashlib.sha256(f"{lark.__version__}\0{sorted(options.items())}\0{grammar}".encode()).hexdigest()
    path = directory / (key + ".lark")
    built = read_entry(path, lambda handle: lark.Lark.load(handle))
    if isinstance(built, lark.Lark):
        return built
    built = lark.Lark(grammar, **options)
    write_entry(path, built.save)
    return built


def parse_spec(text: str, file: str = "<spec>") -> ToolSpec:
    """Parse spec text; any problem is a QmpigenError with file:line:col."""
    try:
        tree = parser().parse(text)
    except UnexpectedInput as exc:
        raise syntax_error(exc, file, text) from None
    except LarkError as exc:  # not expected from LALR, but never a traceback
        raise QmpigenError(f"cannot parse the spec: {exc}", Location(file)) from None
    try:
        return SpecBuilder(file).transform(tree)
    except VisitError as exc:  # lark wraps what a rule method raises
        if isinstance(exc.orig_exc, QmpigenError):
            raise exc.orig_exc from None
        raise


def load_spec(path: str) -> ToolSpec:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise QmpigenError(f"cannot read spec: {exc.strerror or exc}", Location(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise QmpigenError("the spec is not UTF-8 text", Location(path, line)) from None
    return parse_spec(text, path)


# ---------------------------------------------------------------------------------
# The tree to a ToolSpec
# ---------------------------------------------------------------------------------

FIELD = re.compile(r"^(?P<type>.*?[A-Za-z0-9_\s\*])(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<dims>(\[[^\[\]]*\]\s*)*)$")
C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile "
    "while _Bool _Complex".split()
)


class Statement(NamedTuple):
    """A statement that may appear once (per spec, or per intercept), with what it holds."""

    second: str  # the error for a second one; {first} is where the first one is
    value: object
    location: Location
    first_at: Optional[Location] = None  # where a second one's error says the first is, if not `location`


class RoleName(str):
    """A role named after `before role` / `after role` (a type name is a plain str)."""


class Around(NamedTuple):
    """before/after code of an intercept: `part` is the Rule field it belongs to."""

    part: str  # before, after, before_each, after_each
    value: Union[Code, EachCode]


class Context(NamedTuple):
    fields: Tuple[Field, ...]


class _Tool(NamedTuple):
    name: str
    prefix: str
    location: Location


def once(
    key: str, where: Location, second: str, seen: Dict[str, Location], first_at: Optional[Location] = None
) -> None:
    """The check behind every "a second ..." and "... twice" error."""
    if key in seen:
        raise QmpigenError(second.replace("{first}", str(seen[key])), where)
    seen[key] = first_at or where


@v_args(meta=True)
class SpecBuilder(Transformer):
    """The parse tree to a ToolSpec, with the checks that need no MPI."""

    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def at(self, item: Union[Token, "lark.tree.Meta"]) -> Location:
        return Location(self.file, getattr(item, "line", 0) or 0, getattr(item, "column", 0) or 0)

    def code(self, token: Token, kind: CodeKind) -> Code:
        code = Code(str(token)[2:-2], Location(self.file, token.line or 0, (token.column or 0) + 2), kind)
        return Code(code.text, code.location, kind, check_variables(code))

    def start(self, meta, children) -> ToolSpec:
        """start: tool_decl _item*"""
        tool, *items = children
        seen: Dict[str, Location] = {}
        core: Optional[str] = None
        groups: List[GroupDecl] = []
        fields: Tuple[Field, ...] = ()
        preamble: List[Any] = []  # Code blocks and the CONTEXT marker, in spec order
        rules: List[Rule] = []
        hooks: Dict[Hook, Code] = {}
        arguments: List[ArgumentDecl] = []
        for item in items:
            if isinstance(item, ArgumentDecl):
                once(
                    "argument " + item.name,
                    item.location,
                    f"argument '{item.name}' is declared twice (first at {{first}})",
                    seen,
                )
                arguments.append(item)
            elif isinstance(item, Rule):
                rules.append(item)
            elif isinstance(item, Code):
                preamble.append(item)
            elif isinstance(item, GroupDecl):
                groups.append(item)
                once(item.name, item.location, f"group '{item.name}' is defined twice (first at {{first}})", seen)
            else:
                once(item.second, item.location, item.second, seen)
                if isinstance(item.value, Context):
                    fields = item.value.fields
                    preamble.append(CONTEXT)
                elif isinstance(item.value, tuple):
                    hook, hook_code = item.value
                    hooks[hook] = hook_code
                else:
                    core = item.value
        declared = {a.name for a in arguments}
        codes = [c for c in preamble if isinstance(c, Code)] + [c for c in hooks.values()]
        codes += [c for rule in rules for c in rule.codes]
        for code in codes:
            for name, where in argument_uses(code):
                if name not in declared:
                    raise QmpigenError(f"$argument({name}): no argument '{name}' is declared (argument {name};)", where)
        return ToolSpec(
            file=self.file,
            name=tool.name,
            prefix=tool.prefix,
            core=core,
            groups=tuple(groups),
            fields=fields,
            has_context=CONTEXT in preamble,
            preamble=tuple(preamble),
            rules=tuple(rules),
            on_init=hooks.get(Hook.INIT),
            on_finalize=hooks.get(Hook.FINALIZE),
            on_pcontrol=hooks.get(Hook.PCONTROL),
            location=tool.location,
            arguments=tuple(arguments),
        )

    def tool_decl(self, meta, children) -> _Tool:
        """tool_decl: "tool" IDENT ("prefix" IDENT)? ";" """
        name_token = children[0]
        prefix_token = children[-1]
        name, prefix = str(name_token), str(prefix_token)
        if name.lower() in RESERVED_NAMES or name.startswith(RESERVED_PREFIX):
            raise QmpigenError(f"'{name}' is reserved for QMPI itself: choose another tool name", self.at(name_token))
        if prefix in RESERVED_PREFIXES or prefix.startswith("qmpi"):
            raise QmpigenError(
                f"prefix '{prefix}' would make the wrappers {prefix}_Send, ...: names MPI or QMPI already use; "
                "choose another prefix",
                self.at(prefix_token),
            )
        return _Tool(name, prefix, self.at(meta))

    def core_decl(self, meta, children) -> Statement:
        """core_decl: "core" STRING ";" """
        path = str(children[0])[1:-1]
        if not path:
            raise QmpigenError("the core path is empty", self.at(meta))
        # The Makefile uses it as a prerequisite and in the shell: no quoting fits both.
        bad = next((i for i, char in enumerate(path) if not (char.isalnum() or char in CORE_PATH_PUNCTUATION)), None)
        if bad is not None:
            raise QmpigenError(
                f"core path: {printable(repr(path[bad]))} would be read by make or the shell; a core path holds "
                f"letters, digits and {' '.join(CORE_PATH_PUNCTUATION)}",
                Location(self.file, children[0].line or 0, (children[0].column or 0) + 1 + bad),
            )
        return Statement("a second core statement (the first is at {first})", path, self.at(meta))

    def group_decl(self, meta, children) -> GroupDecl:
        """group_decl: "group" NAME "=" selection ";" """
        name_token, selection = children
        name = str(name_token)
        if name.startswith(("MPI_", "MPIX_")) or any(c in name for c in "*?[]!"):
            raise QmpigenError(
                f"'{name}' cannot name a group: it reads as a function name or a glob", self.at(name_token)
            )
        if name in group_table.BY_NAME:
            raise QmpigenError(f"'{name}' is a built-in group: choose another name", self.at(name_token))
        return GroupDecl(name, selection, self.at(name_token))

    def context_decl(self, meta, children) -> Statement:
        """context_decl: "context" "{" field* "}" """
        seen: Dict[str, Location] = {}
        for field in children:
            once(field.name, field.location, f"field '{field.name}' is declared twice (first at {{first}})", seen)
        return Statement("a second context block (the first is at {first})", Context(tuple(children)), self.at(meta))

    def field(self, meta, children) -> Field:
        """field: FIELD_DECL ("=" FIELD_INIT)? ";" """
        declaration = " ".join(str(children[0]).split())
        where = self.at(children[0])
        match = FIELD.match(declaration)
        if not match or not re.search(r"[A-Za-z_]", match.group("type")) or match.group("name") in C_KEYWORDS:
            raise QmpigenError(
                f"'{declaration}' is not a field declaration like 'double t0' or "
                "'unsigned long long calls[NUM_MPI_FUNCS]' (for function pointers, typedef the type in a code block)",
                where,
            )
        name = match.group("name")
        if name.startswith(RESERVED_PREFIX):
            raise QmpigenError(f"field names starting with {RESERVED_PREFIX} are reserved for qmpigen: '{name}'", where)
        initializer = " ".join(str(children[1]).split()) if len(children) > 1 else None
        return Field(declaration, name, initializer, where)

    def argument_decl(self, meta, children) -> ArgumentDecl:
        """argument_decl: "argument" IDENT ("=" (STRING | INTEGER))? ";" """
        name_token = children[0]
        name = str(name_token)
        if name.startswith(RESERVED_PREFIX) or name == "tool":
            raise QmpigenError(
                f"'{name}' cannot name an argument: 'tool' and names starting with {RESERVED_PREFIX} are the core's",
                self.at(name_token),
            )
        if len(children) == 1:
            return ArgumentDecl(name, None, False, self.at(name_token))
        default = children[1]
        if default.type == "INTEGER":
            if not -(2**63) <= int(str(default)) < 2**63:
                raise QmpigenError(f"the default of '{name}' does not fit a long long", self.at(default))
            return ArgumentDecl(name, str(int(str(default))), True, self.at(name_token))
        return ArgumentDecl(name, str(default)[1:-1], False, self.at(name_token))

    def code_decl(self, meta, children) -> Code:
        """code_decl: "code" C_CODE"""
        return self.code(children[0], CodeKind.FILE)

    def hook_decl(self, meta, children) -> Statement:
        """hook_decl: "on" HOOK C_CODE"""
        hook = Hook(str(children[0]))
        code = self.code(children[1], CodeKind.PCONTROL if hook is Hook.PCONTROL else CodeKind.HOOK)
        return Statement(f"a second 'on {hook.value}' (the first is at {{first}})", (hook, code), self.at(meta))

    def intercept_decl(self, meta, children) -> Rule:
        """intercept_decl: "intercept" selection (";" | "{" _rule_item* "}")"""
        selection, *statements = children
        seen: Dict[str, Location] = {}
        parts: Dict[str, List[Any]] = {"before": [], "after": [], "before_each": [], "after_each": []}
        call: Optional[Statement] = None
        instead: Optional[Code] = None
        for statement in statements:
            if isinstance(statement, Around):
                parts[statement.part].append(statement.value)
                continue
            once(statement.second, statement.location, statement.second, seen, statement.first_at)
            if isinstance(statement.value, CallMode):
                call = statement
            else:
                instead = statement.value
        if instead is not None and call is not None and call.value is CallMode.EXEC_FUNC:
            raise QmpigenError(
                "'call exec_func' and 'instead' exclude each other: instead makes no call", call.location
            )
        return Rule(
            selection=selection,
            call=call.value if call is not None and isinstance(call.value, CallMode) else CallMode.TYPED,
            before=tuple(parts["before"]),
            after=tuple(parts["after"]),
            before_each=tuple(parts["before_each"]),
            after_each=tuple(parts["after_each"]),
            instead=instead,
            location=self.at(meta),
        )

    def selection(self, meta, children) -> SelectionSpec:
        """selection: selector_list ("except" selector_list)?"""
        include = children[0]
        exclude = children[1] if len(children) > 1 else ()
        seen: Dict[str, Location] = {}
        for selector in include + exclude:
            once(selector.text, selector.location, f"{selector.text} is listed twice (first at {{first}})", seen)
        return SelectionSpec(include, exclude, self.at(meta))

    def selector_list(self, meta, children) -> Tuple[Selector, ...]:
        """selector_list: NAME ("," NAME)*"""
        return tuple(Selector(str(token), self.at(token)) for token in children)

    # The statements of an intercept body.
    def call_stmt(self, meta, children) -> Statement:
        """call_stmt: "call" CALL_KIND ";" """
        second = "a second call statement in this intercept (the first is at {first})"
        return Statement(second, CallMode(str(children[0])), self.at(meta))

    def instead_stmt(self, meta, children) -> Statement:
        """instead_stmt: "instead" C_CODE"""
        code = self.code(children[0], CodeKind.INSTEAD)
        return Statement("a second instead block (the first is at {first})", code, self.at(meta), code.location)

    def before_stmt(self, meta, children) -> Around:
        """before_stmt: "before" each? C_CODE"""
        return self.around(children, CodeKind.BEFORE, CodeKind.EACH, "before")

    def after_stmt(self, meta, children) -> Around:
        """after_stmt: "after" each? C_CODE"""
        return self.around(children, CodeKind.AFTER, CodeKind.EACH_AFTER, "after")

    def around(self, children, kind: CodeKind, each_kind: CodeKind, part: str) -> Around:
        if len(children) == 1:
            return Around(part, self.code(children[0], kind))
        selected, where = children[0]
        code = self.code(children[1], each_kind)
        if isinstance(selected, RoleName):
            return Around(part + "_each", EachCode("", code, where, role=selected))
        return Around(part + "_each", EachCode(selected, code, where))

    def each(self, meta, children) -> Tuple[str, Location]:
        """each: "each" C_TYPE"""
        return normalise_type(str(children[0])), self.at(children[0])

    def role(self, meta, children) -> Tuple[RoleName, Location]:
        """role: "role" IDENT"""
        name, where = str(children[0]), self.at(children[0])
        if name not in ROLES:
            close = difflib.get_close_matches(name, ROLES, 1)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; roles: {', '.join(ROLES)}"
            raise QmpigenError(f"unknown parameter role '{name}'{hint}", where)
        return RoleName(name), where
