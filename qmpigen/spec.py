"""Tool specs: parse a .qmpi file with grammars/qmpi_tool.lark, then resolve it
against the enumeration of the MPI at hand.

Two stages, two sets of frozen values:
  parse_spec(text, file) -> ToolSpec       what the author wrote (no MPI needed)
  resolve(spec, enumeration, api) -> Tool  what qmpigen will generate for this MPI

Every error is a QmpigenError carrying file:line:col. The C code of a spec is kept
verbatim except for `$` variables ($ctx, $ret, $index, $0, ...), which are replaced
here, checked against where they are used: docs/spec-language.md has the table.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import re
import textwrap
import dataclasses
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import lark
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from . import groups as group_table
from .cnames import C_NAMES, RESERVED_PREFIX
from .errors import Location, QmpigenError
from .model import Enumeration, MpiApi, MpiFunction
from .resources import grammars_dir

GRAMMAR_FILE = "qmpi_tool.lark"
SPEC_SUFFIX = ".qmpi"

# Prefixes a tool's wrappers must not use: PREFIX_Send would be an MPI, PMPI or QMPI
# symbol (MPICH >= 4 declares QMPI_Send itself) or clash with the core's own names.
RESERVED_PREFIXES = frozenset({"MPI", "PMPI", "MPIX", "PMPIX", "QMPI", "qmpi", "MPIR", "PMPIR"})
RESERVED_NAMES = frozenset({"qmpi", "core", "vector", "cell"})

# ---------------------------------------------------------------------------------
# The spec as written
# ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Code:
    """C code between %{ and %}; `location` is the first character after %{."""

    text: str
    location: Location
    kind: str  # where it is used: file, hook, pcontrol, before, after, instead, each


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
class EachCode:
    type: str  # normalised C type: "MPI_Comm", "MPI_Request *"
    code: Code
    location: Location


@dataclass(frozen=True)
class Rule:
    """One `intercept` statement: the functions, how to call on, the code around it."""

    selection: SelectionSpec
    call: str  # "typed" (QMPI_Next_<Name>) or "exec_func"
    before: Tuple[Code, ...]
    after: Tuple[Code, ...]
    before_each: Tuple[EachCode, ...]
    after_each: Tuple[EachCode, ...]
    instead: Optional[Code]
    location: Location


@dataclass(frozen=True)
class ToolSpec:
    file: str  # as given; only its base name reaches generated files
    name: str
    prefix: str
    core: Optional[str]
    groups: Tuple[GroupDecl, ...]
    fields: Tuple[Field, ...]
    has_context: bool  # a context block was written (possibly empty)
    preamble: Tuple[object, ...]  # Code blocks and the string "context", in spec order
    rules: Tuple[Rule, ...]
    on_init: Optional[Code]
    on_finalize: Optional[Code]
    on_pcontrol: Optional[Code]
    location: Location  # of the tool statement


# ---------------------------------------------------------------------------------
# `$` variables: which exist where
# ---------------------------------------------------------------------------------

VARIABLE = re.compile(r"\$(\$|[A-Za-z_][A-Za-z0-9_]*|[0-9]+)")

FILE_VARS = frozenset({"tool", "prefix", "context"})
HOOK_VARS = FILE_VARS | {"ctx", "level", "v", "rank"}
FUNCTION_VARS = HOOK_VARS | {"name", "short", "index", "rtype", "args", "nargs", "va"}
KIND_VARS: Dict[str, FrozenSet[str]] = {
    "file": FILE_VARS,
    "hook": HOOK_VARS,
    "before": FUNCTION_VARS,
    "after": FUNCTION_VARS | {"ret"},
    "instead": FUNCTION_VARS | {"ret"},
    "pcontrol": FUNCTION_VARS | {"ret"},
    "each": FUNCTION_VARS | {"arg", "argtype", "pos"},
    "each_after": FUNCTION_VARS | {"arg", "argtype", "pos", "ret"},
}
KIND_WORDS = {
    "file": "code at file scope",
    "hook": "on init/on finalize",
    "before": "before code",
    "after": "after code",
    "instead": "instead code",
    "pcontrol": "on pcontrol",
    "each": "before each code",
    "each_after": "after each code",
}
ALL_VARS = frozenset().union(*KIND_VARS.values())


def offset_location(start: Location, text: str, offset: int) -> Location:
    """Location of text[offset] for text that begins at `start`."""
    before = text[:offset]
    newlines = before.count("\n")
    if newlines == 0:
        return Location(start.file, start.line, start.column + offset)
    return Location(start.file, start.line + newlines, offset - before.rfind("\n"))


def check_variables(code: Code) -> None:
    """Unknown `$` variables, or ones that mean nothing where they are used."""
    allowed = KIND_VARS[code.kind]
    for match in VARIABLE.finditer(code.text):
        word = match.group(1)
        if word == "$" or word.isdigit() and "nargs" in allowed:
            continue
        if word in allowed:
            continue
        where = offset_location(code.location, code.text, match.start())
        if word == "ret" and code.kind in ("before", "each"):
            raise QmpigenError("$ret is not set before the call: use it in after or instead code", where)
        if word in ALL_VARS or word.isdigit():
            raise QmpigenError(f"${word} is not available in {KIND_WORDS[code.kind]}", where)
        close = difflib.get_close_matches(word, sorted(allowed), n=1)
        hint = f"; did you mean ${close[0]}?" if close else " (write $$ for a literal $)"
        raise QmpigenError(f"unknown variable ${word}{hint}", where)


# ---------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def parser() -> lark.Lark:
    grammar = (grammars_dir() / GRAMMAR_FILE).read_text(encoding="utf-8")
    return lark.Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=False)


# How `expected ...` names the grammar's terminals.
TERMINAL_WORDS = {
    "IDENT": "a name",
    "NAME": "a function name, glob or group",
    "STRING": 'a "quoted path"',
    "C_CODE": "C code in %{ ... %}",
    "FIELD_DECL": "a C field declaration",
    "FIELD_INIT": "an initial value",
    "C_TYPE": "a C type",
    "HOOK": "init, finalize or pcontrol",
    "CALL_KIND": "typed or exec_func",
    "$END": "end of file",
}


# Terminals that match long stretches of text; only meant for their own contexts.
GREEDY_TERMINALS = frozenset({"FIELD_DECL", "FIELD_INIT", "C_TYPE"})


def _terminal_word(name: str) -> str:
    if name in TERMINAL_WORDS:
        return TERMINAL_WORDS[name]
    try:
        pattern = parser().get_terminal(name).pattern
    except KeyError:
        return name.lower()
    if isinstance(pattern, lark.lexer.PatternStr):
        return f"'{pattern.value}'"
    return name.lower()


def _expected(names: Iterable[str]) -> str:
    words = sorted({_terminal_word(n) for n in names})
    if not words:
        return "something else"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _found(text: str) -> str:
    if not text:
        return "end of file"
    first = text.splitlines()[0] if text.strip() else text
    if len(first) > 20:
        first = first[:20] + "..."
    return repr(first)


def _unclosed_code(text: str, line: int, column: int) -> str:
    lines = text.split("\n")
    if 0 < line <= len(lines):
        rest = "\n".join([lines[line - 1][column - 1 :]] + lines[line:])
        if rest.startswith("%{") and "%}" not in rest:
            return " (a code block that is never closed with %})"
    return ""


def _syntax_error(exc: UnexpectedInput, file: str, text: str) -> QmpigenError:
    line = getattr(exc, "line", 0) or 0
    column = getattr(exc, "column", 0) or 0
    hint = _unclosed_code(text, line, column)
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type == "$END" or token.value == "":
            line, column = _end_of(text)
            found = "end of file"
        elif token.type in GREEDY_TERMINALS and token.type not in (exc.accepts or exc.expected or ()):
            # Lexed by a terminal that is not expected here (and swallows a lot): show a word.
            found = _found(re.match(r"%\{|[A-Za-z0-9_]+|\S", str(token.value)).group())
        else:
            found = _found(str(token.value))
        expected = exc.accepts or exc.expected
        return QmpigenError(f"expected {_expected(expected)}, found {found}{hint}", Location(file, line, column))
    if isinstance(exc, UnexpectedCharacters):
        char = text[exc.pos_in_stream] if 0 <= exc.pos_in_stream < len(text) else ""
        allowed = exc.allowed or set()
        return QmpigenError(
            f"expected {_expected(allowed)}, found {_found(char)}{hint}", Location(file, line, column)
        )
    if isinstance(exc, UnexpectedEOF):
        line, column = _end_of(text)
        return QmpigenError(f"expected {_expected(exc.expected)}, found end of file", Location(file, line, column))
    return QmpigenError(f"syntax error: {exc}", Location(file, line, column))


def _end_of(text: str) -> Tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


def parse_spec(text: str, file: str = "<spec>") -> ToolSpec:
    """Parse spec text; any problem is a QmpigenError with file:line:col."""
    try:
        tree = parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, file, text) from None
    except LarkError as exc:  # not expected from LALR, but never a traceback
        raise QmpigenError(f"cannot parse the spec: {exc}", Location(file)) from None
    return _Builder(file).build(tree)


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


FIELD = re.compile(r"^(?P<type>.*?[A-Za-z0-9_\s\*])(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<dims>(\[[^\[\]]*\]\s*)*)$")
C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile "
    "while _Bool _Complex".split()
)
TYPE_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\S")


def normalise_type(text: str) -> str:
    """'const  int[]' and 'const int []' compare equal; so do 'MPI_Request*' and 'MPI_Request *'."""
    return " ".join(TYPE_TOKEN.findall(text))


class _Builder:
    """The parse tree to a ToolSpec, with the checks that need no MPI."""

    def __init__(self, file: str):
        self.file = file

    def loc(self, item) -> Location:
        if isinstance(item, lark.Token):
            return Location(self.file, item.line or 0, item.column or 0)
        meta = item.meta
        return Location(self.file, getattr(meta, "line", 0), getattr(meta, "column", 0))

    def code(self, token: lark.Token, kind: str) -> Code:
        raw = str(token)
        start = Location(self.file, token.line, token.column + 2)
        code = Code(raw[2:-2], start, kind)
        check_variables(code)
        return code

    def selection(self, tree: lark.Tree) -> SelectionSpec:
        lists = [
            tuple(Selector(str(t), self.loc(t)) for t in child.children)
            for child in tree.children
            if isinstance(child, lark.Tree)
        ]
        include = lists[0]
        exclude = lists[1] if len(lists) > 1 else ()
        seen: Dict[str, Location] = {}
        for selector in include + exclude:
            if selector.text in seen:
                raise QmpigenError(
                    f"{selector.text} is listed twice (first at {seen[selector.text]})", selector.location
                )
            seen[selector.text] = selector.location
        return SelectionSpec(include, exclude, self.loc(tree))

    def build(self, tree: lark.Tree) -> ToolSpec:
        tool_tree, *items = tree.children
        name_token = tool_tree.children[0]
        prefix_token = tool_tree.children[1] if len(tool_tree.children) > 1 else name_token
        name, prefix = str(name_token), str(prefix_token)
        if name.lower() in RESERVED_NAMES or name.startswith("qmpi_"):
            raise QmpigenError(f"'{name}' is reserved for QMPI itself: choose another tool name", self.loc(name_token))
        if prefix in RESERVED_PREFIXES or prefix.startswith("qmpi"):
            raise QmpigenError(
                f"prefix '{prefix}' would make the wrappers {prefix}_Send, ...: names MPI or QMPI already use; "
                "choose another prefix",
                self.loc(prefix_token),
            )

        core: Optional[Tuple[str, Location]] = None
        groups: Dict[str, GroupDecl] = {}  # by name: the duplicate check is one lookup
        fields: List[Field] = []
        context_at: Optional[Location] = None
        preamble: List[object] = []
        rules: List[Rule] = []
        hooks: Dict[str, Code] = {}
        hook_at: Dict[str, Location] = {}

        for item in items:
            kind = item.data
            where = self.loc(item)
            if kind == "core_decl":
                if core is not None:
                    raise QmpigenError(f"a second core statement (the first is at {core[1]})", where)
                core = (str(item.children[0])[1:-1], where)
                if not core[0]:
                    raise QmpigenError("the core path is empty", where)
            elif kind == "group_decl":
                name_tok, selection = item.children
                group_name = str(name_tok)
                if group_name.startswith(("MPI_", "MPIX_")) or any(c in group_name for c in "*?[]!"):
                    raise QmpigenError(
                        f"'{group_name}' cannot name a group: it reads as a function name or a glob", self.loc(name_tok)
                    )
                if group_name in group_table.BY_NAME:
                    raise QmpigenError(
                        f"'{group_name}' is a built-in group: choose another name", self.loc(name_tok)
                    )
                other = groups.get(group_name)
                if other is not None:
                    raise QmpigenError(
                        f"group '{group_name}' is defined twice (first at {other.location})", self.loc(name_tok)
                    )
                groups[group_name] = GroupDecl(group_name, self.selection(selection), self.loc(name_tok))
            elif kind == "context_decl":
                if context_at is not None:
                    raise QmpigenError(f"a second context block (the first is at {context_at})", where)
                context_at = where
                for field_tree in item.children:
                    fields.append(self.field(field_tree, fields))
                preamble.append("context")
            elif kind == "code_decl":
                preamble.append(self.code(item.children[0], "file"))
            elif kind == "hook_decl":
                hook = str(item.children[0])
                if hook in hooks:
                    raise QmpigenError(f"a second 'on {hook}' (the first is at {hook_at[hook]})", where)
                hooks[hook] = self.code(item.children[1], "pcontrol" if hook == "pcontrol" else "hook")
                hook_at[hook] = where
            elif kind == "intercept_decl":
                rules.append(self.rule(item))
            else:  # pragma: no cover - the grammar has no other statements
                raise QmpigenError(f"unexpected statement {kind}", where)

        return ToolSpec(
            file=self.file,
            name=name,
            prefix=prefix,
            core=core[0] if core else None,
            groups=tuple(groups.values()),
            fields=tuple(fields),
            has_context=context_at is not None,
            preamble=tuple(preamble),
            rules=tuple(rules),
            on_init=hooks.get("init"),
            on_finalize=hooks.get("finalize"),
            on_pcontrol=hooks.get("pcontrol"),
            location=self.loc(tool_tree),
        )

    def field(self, tree: lark.Tree, earlier: Sequence[Field]) -> Field:
        decl_token = tree.children[0]
        declaration = " ".join(str(decl_token).split())
        where = self.loc(decl_token)
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
        for other in earlier:
            if other.name == name:
                raise QmpigenError(f"field '{name}' is declared twice (first at {other.location})", where)
        initializer = " ".join(str(tree.children[1]).split()) if len(tree.children) > 1 else None
        return Field(declaration, name, initializer, where)

    def rule(self, tree: lark.Tree) -> Rule:
        selection_tree, *statements = tree.children
        call: Optional[Tuple[str, Location]] = None
        before: List[Code] = []
        after: List[Code] = []
        before_each: List[EachCode] = []
        after_each: List[EachCode] = []
        instead: Optional[Code] = None
        for statement in statements:
            kind = statement.data
            where = self.loc(statement)
            if kind == "call_stmt":
                if call is not None:
                    raise QmpigenError(f"a second call statement in this intercept (the first is at {call[1]})", where)
                call = (str(statement.children[0]), where)
            elif kind == "instead_stmt":
                if instead is not None:
                    raise QmpigenError(f"a second instead block (the first is at {instead.location})", where)
                instead = self.code(statement.children[0], "instead")
            else:
                each = statement.children[0] if len(statement.children) == 2 else None
                code_token = statement.children[-1]
                if each is None:
                    target = before if kind == "before_stmt" else after
                    target.append(self.code(code_token, "before" if kind == "before_stmt" else "after"))
                else:
                    ctype = normalise_type(str(each.children[0]))
                    code = self.code(code_token, "each" if kind == "before_stmt" else "each_after")
                    target_each = before_each if kind == "before_stmt" else after_each
                    target_each.append(EachCode(ctype, code, self.loc(each.children[0])))
        if instead is not None and call is not None and call[0] == "exec_func":
            raise QmpigenError("'call exec_func' and 'instead' exclude each other: instead makes no call", call[1])
        return Rule(
            selection=self.selection(selection_tree),
            call=call[0] if call else "typed",
            before=tuple(before),
            after=tuple(after),
            before_each=tuple(before_each),
            after_each=tuple(after_each),
            instead=instead,
            location=self.loc(tree),
        )


# ---------------------------------------------------------------------------------
# Resolution against the enumeration
# ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CBlock:
    """C code ready to emit: `$` variables replaced, dedented; `line` is its line in the spec."""

    text: str
    line: int


@dataclass(frozen=True)
class Wrapper:
    function: MpiFunction
    symbol: str  # PREFIX_Send
    mode: str  # typed, exec_func, instead, fan_out
    before: Tuple[CBlock, ...] = ()
    before_each: Tuple[CBlock, ...] = ()
    after_each: Tuple[CBlock, ...] = ()
    after: Tuple[CBlock, ...] = ()
    instead: Optional[CBlock] = None
    uses_ctx: bool = False
    lifecycle: str = ""  # world_init, session_init, finalize, session_finalize, or ""
    implicit: bool = False  # intercepted only for the init/finalize hooks

    @property
    def returns(self) -> bool:
        return self.function.return_type != "void"

    @property
    def is_fan_out(self) -> bool:
        return self.function.is_fan_out

    @property
    def makes_call(self) -> bool:
        return self.mode in ("typed", "exec_func")


@dataclass(frozen=True)
class ContextField:
    declaration: str
    name: str
    initializer: Optional[str]


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
    preamble: Tuple[object, ...]  # CBlock or "context"
    on_init: Optional[CBlock]
    on_finalize: Optional[CBlock]
    wrappers: Tuple[Wrapper, ...]  # enumeration order
    interface: str = "thesis"  # or "callback": the MPI Forum / MPICH interface
    session_rank: bool = False  # $rank in the sessions model, from the mpi://WORLD process set

    @property
    def context_type(self) -> str:
        return f"struct {self.name}_context"

    @property
    def context_getter(self) -> str:
        return f"{self.name}_context_of"


def _mpi_words(enumeration: Enumeration) -> str:
    facts = enumeration.facts
    return f"{facts.implementation} {facts.version}".strip() + f" (MPI {facts.mpi_version}.{facts.mpi_subversion})"


class _Resolver:
    def __init__(self, spec: ToolSpec, enumeration: Enumeration, api: Optional[MpiApi], interface: str = "thesis"):
        self.interface = interface
        # Callback tools register by the MPI's enum QMPI_Functions_enum: only its members.
        self.registrable = {enumeration.functions[i].name for _, _, i in enumeration.forum_members() if i >= 0}
        self.spec = spec
        self.enumeration = enumeration
        self.api = api
        self.names = enumeration.names
        self.order = {n: i for i, n in enumerate(self.names)}  # built once: select() runs per group
        self.user_groups = {g.name: g for g in spec.groups}
        self.group_cache: Dict[str, Tuple[str, ...]] = {}
        self.resolving: List[str] = []

    # -- selectors ---------------------------------------------------------------
    def select(self, selection: SelectionSpec) -> Tuple[Tuple[str, Selector], ...]:
        """(function name, selector that brought it) in enumeration order, exclusions applied."""
        chosen: Dict[str, Selector] = {}
        for selector in selection.include:
            matched = self.match(selector)
            for name in matched:
                if name in chosen and selector.is_function:
                    first = chosen[name]
                    raise QmpigenError(
                        f"{name} is listed twice: '{first.text}' at {first.location} already selects it",
                        selector.location,
                    )
                chosen.setdefault(name, selector)
        for selector in selection.exclude:
            matched = self.match(selector)
            dropped = [n for n in matched if n in chosen]
            if not dropped:
                kept = ", ".join(s.text for s in selection.include)
                raise QmpigenError(
                    f"'{selector.text}' excludes nothing: it matches none of the functions of '{kept}'",
                    selector.location,
                )
            for name in dropped:
                del chosen[name]
        return tuple(sorted(chosen.items(), key=lambda item: self.order[item[0]]))

    def match(self, selector: Selector) -> Tuple[str, ...]:
        text = selector.text
        if selector.is_glob:
            found = tuple(fnmatch.filter(self.names, text))
            if not found:
                raise QmpigenError(self.glob_miss(text), selector.location)
            return found
        if selector.is_function:
            if self.enumeration.get(text) is not None:
                return (text,)
            raise QmpigenError(self.function_miss(text), selector.location)
        return self.group(selector)

    def group(self, selector: Selector) -> Tuple[str, ...]:
        name = selector.text
        if name in self.group_cache:
            return self.group_cache[name]
        if name in self.user_groups:
            if name in self.resolving:
                raise QmpigenError(f"group '{name}' refers to itself", selector.location)
            self.resolving.append(name)
            try:
                found = tuple(n for n, _ in self.select(self.user_groups[name].selection))
            finally:
                self.resolving.pop()
        elif name in group_table.BY_NAME:
            definition = group_table.BY_NAME[name]
            found = tuple(f.name for f in self.enumeration if definition.matches(f))
            if not found:
                raise QmpigenError(
                    f"group '{name}' ({definition.description}) matches no function of {_mpi_words(self.enumeration)}",
                    selector.location,
                )
        else:
            known = sorted(set(group_table.BY_NAME) | set(self.user_groups))
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else f" (groups: {', '.join(known)})"
            raise QmpigenError(f"unknown group '{name}'{hint}", selector.location)
        self.group_cache[name] = found
        return found

    def glob_miss(self, glob: str) -> str:
        words = _mpi_words(self.enumeration)
        if self.api is not None:
            declared = [f.name for f in self.api if fnmatch.fnmatchcase(f.name, glob)]
            if declared and all(f.startswith("MPIX_") for f in declared):
                return f"'{glob}' matches only MPIX_ functions, which the enumeration leaves out (add --mpix)"
            if declared:
                return f"'{glob}' matches no interceptable function of {words} (it matches {declared[0]}, left out of the enumeration)"
        known = sorted(fnmatch.filter(group_table.KNOWN_FUNCTIONS, glob))
        if known:
            return f"'{glob}' matches no function of {words}: this MPI lacks {_few(known)}"
        return f"'{glob}' matches no function of {words}"

    def function_miss(self, name: str) -> str:
        words = _mpi_words(self.enumeration)
        if name.startswith(("PMPI_", "PMPIX_")):
            return f"intercept {name[1:]}, not {name}: the core calls {name} at the end of the chain"
        declared = self.api.get(name) if self.api is not None else None
        if declared is not None:
            if declared.prefix == "MPIX" and declared.has_pmpi:
                return f"{name} is an MPIX_ extension, which the enumeration leaves out: add --mpix (to the core too)"
            if not declared.has_pmpi:
                return f"{words} declares {name} without a PMPI_ twin: QMPI cannot intercept it"
            return f"{name} is left out of this enumeration by --include/--exclude (build the core the same way)"
        if name in group_table.KNOWN_FUNCTIONS:
            extra = ""
            if name.endswith("_c") and not any(n.endswith("_c") for n in self.names):
                extra = " (it declares no large-count _c functions)"
            return f"{words} lacks {name}: its mpi.h does not declare it{extra}"
        close = difflib.get_close_matches(name, self.names, n=3, cutoff=0.75)
        if close:
            return f"unknown MPI function {name}; did you mean {' or '.join(close)}?"
        return f"unknown MPI function {name} ({words} declares no such function)"

    # -- the tool ----------------------------------------------------------------
    def resolve(self) -> Tool:
        spec = self.spec
        # Every user group is checked, used or not.
        for decl in spec.groups:
            self.group(Selector(decl.name, decl.location))

        rule_of: Dict[str, Tuple[int, Selector]] = {}
        for index, rule in enumerate(spec.rules):
            for name, selector in self.select(rule.selection):
                if name in rule_of:
                    _, first = rule_of[name]
                    raise QmpigenError(
                        f"{name} is already intercepted ('{first.text}' at {first.location})", selector.location
                    )
                rule_of[name] = (index, selector)
        if self.interface == "callback":
            for name in [n for n in rule_of if n not in self.registrable]:
                _, selector = rule_of.pop(name)
                if selector.is_function:
                    raise QmpigenError(
                        f"{name} cannot be intercepted by a callback tool: {_mpi_words(self.enumeration)} has no "
                        f"{self.enumeration.get(name).forum_enum} in its enum QMPI_Functions_enum",
                        selector.location,
                    )
            for index, rule in enumerate(spec.rules):
                if rule.call == "exec_func" and any(i == index for i, _ in rule_of.values()):
                    raise QmpigenError(
                        "'call exec_func' is the thesis interface's call; a callback tool calls its cached next "
                        "function (drop it, or generate with --interface thesis)",
                        rule.location,
                    )

        # $rank is recorded when MPI is initialised, so it needs the lifecycle wrappers too.
        has_hooks = spec.on_init is not None or spec.on_finalize is not None or _uses_rank(spec)
        has_context = spec.has_context and bool(spec.fields) or has_hooks
        lifecycle = self.lifecycle() if has_hooks else {}

        pcontrol = [f for f in self.enumeration if f.is_fan_out]
        if spec.on_pcontrol is not None:
            if not pcontrol:
                raise QmpigenError(
                    f"{_mpi_words(self.enumeration)} has no MPI_Pcontrol in the enumeration", spec.on_pcontrol.location
                )
            for function in pcontrol:
                rule = spec.rules[rule_of[function.name][0]] if function.name in rule_of else None
                if rule is not None and rule.instead is not None:
                    raise QmpigenError(
                        f"{function.name} has both an 'on pcontrol' handler and an instead block "
                        f"(at {rule.instead.location})",
                        spec.on_pcontrol.location,
                    )

        self.has_context = has_context
        wrappers = []
        used_types: Dict[int, Set[str]] = {}
        for function in self.enumeration:
            rule_index = rule_of[function.name][0] if function.name in rule_of else None
            handler = spec.on_pcontrol if function.is_fan_out else None
            stage = lifecycle.get(function.name, "")
            if rule_index is None and handler is None and not stage:
                continue
            wrappers.append(self.wrapper(function, rule_index, handler, stage, used_types))

        for index, rule in enumerate(spec.rules):
            for each in rule.before_each + rule.after_each:
                if each.type not in used_types.get(index, set()):
                    raise QmpigenError(
                        f"no function of this intercept has an argument of type '{each.type}' on "
                        f"{_mpi_words(self.enumeration)} (types are written as in mpi.h, e.g. 'MPI_Comm', "
                        "'MPI_Request *', 'const int []')",
                        each.location,
                    )

        if not wrappers:
            raise QmpigenError("the tool intercepts no function: add an intercept statement", spec.location)

        preamble: List[object] = []
        for item in spec.preamble:
            if item == "context":
                if has_context:
                    preamble.append("context")
            else:
                block = self.block(item, self.common_vars())
                if block.text:
                    preamble.append(block)
        if has_context and "context" not in preamble:
            preamble.append("context")
        return Tool(
            name=spec.name,
            prefix=spec.prefix,
            spec_file=_base_name(spec.file),
            core=spec.core,
            fields=tuple(ContextField(f.declaration, f.name, f.initializer) for f in spec.fields),
            has_context=has_context,
            has_hooks=has_hooks,
            preamble=tuple(preamble),
            on_init=self.block(spec.on_init, self.hook_vars()) if spec.on_init else None,
            on_finalize=self.block(spec.on_finalize, self.hook_vars()) if spec.on_finalize else None,
            wrappers=tuple(wrappers),
            session_rank=self.enumeration.get("MPI_Group_from_session_pset") is not None,
        )

    def lifecycle(self) -> Dict[str, str]:
        stages = {}
        for name in group_table.INIT_FUNCTIONS:
            if self.enumeration.get(name) is not None:
                stages[name] = "world_init" if name in group_table.WORLD_INIT_FUNCTIONS else "session_init"
        for name in group_table.FINALIZE_FUNCTIONS:
            if self.enumeration.get(name) is not None:
                stages[name] = "finalize" if name == "MPI_Finalize" else "session_finalize"
        if not any(stage in ("world_init", "session_init") for stage in stages.values()):
            raise QmpigenError(
                f"on init/on finalize/$rank need MPI_Init or MPI_Session_init in the enumeration of {_mpi_words(self.enumeration)}",
                (self.spec.on_init or self.spec.on_finalize or self.spec).location,
            )
        return stages

    def wrapper(
        self,
        function: MpiFunction,
        rule_index: Optional[int],
        handler: Optional[Code],
        stage: str,
        used_types: Dict[int, Set[str]],
    ) -> Wrapper:
        symbol = f"{self.spec.prefix}_{function.short}"
        rule = self.spec.rules[rule_index] if rule_index is not None else None
        if function.is_fan_out:
            mode = "fan_out"
        elif rule is not None and rule.instead is not None:
            mode = "instead"
        elif rule is not None:
            mode = rule.call
        else:
            mode = "typed"
        variables = self.function_vars(function)
        before: List[CBlock] = []
        after: List[CBlock] = []
        before_each: List[CBlock] = []
        after_each: List[CBlock] = []
        instead = None
        if rule is not None:
            before = [b for b in (self.block(c, variables, function) for c in rule.before) if b.text]
            after = [b for b in (self.block(c, variables, function) for c in rule.after) if b.text]
            for each, target in [(e, before_each) for e in rule.before_each] + [(e, after_each) for e in rule.after_each]:
                for position, param in enumerate(function.params):
                    if normalise_type(param.type) != each.type:
                        continue
                    used_types.setdefault(rule_index, set()).add(each.type)
                    arg_vars = dict(variables, arg=param.name, argtype=param.type, pos=str(position))
                    block = self.block(each.code, arg_vars, function)
                    if block.text:
                        target.append(block)
            if rule.instead is not None:
                instead = self.block(rule.instead, variables, function)
        if handler is not None:
            instead = self.block(handler, variables, function)
        blocks = before + before_each + after_each + after + ([instead] if instead else [])
        uses_ctx = bool(stage) or any(C_NAMES.ctx in b.text for b in blocks)
        return Wrapper(
            function=function,
            symbol=symbol,
            mode=mode,
            before=tuple(before),
            before_each=tuple(before_each),
            after_each=tuple(after_each),
            after=tuple(after),
            instead=instead,
            uses_ctx=uses_ctx,
            lifecycle=stage,
            implicit=rule is None and handler is None,
        )

    # -- variables -----------------------------------------------------------------
    def common_vars(self) -> Dict[str, str]:
        return {"tool": self.spec.name, "prefix": self.spec.prefix, "context": f"struct {self.spec.name}_context"}

    def hook_vars(self) -> Dict[str, str]:
        variables = dict(self.common_vars(), ctx=C_NAMES.ctx, level=C_NAMES.level, rank=C_NAMES.ctx_rank)
        if self.interface == "thesis":
            variables["v"] = C_NAMES.chain  # the thesis chain; callback tools have none
        return variables

    def function_vars(self, function: MpiFunction) -> Dict[str, str]:
        variables = dict(
            self.hook_vars(),
            name=function.name,
            short=function.short,
            index=function.enum,
            rtype=function.return_type,
            args=function.args,
            nargs=str(len(function.params)),
            ret=C_NAMES.ret,
        )
        if function.variadic:
            variables["va"] = C_NAMES.va_args
        for position, param in enumerate(function.params):
            variables[str(position)] = param.name
        return variables

    def block(self, code: Code, variables: Mapping[str, str], function: Optional[MpiFunction] = None) -> CBlock:
        def replace(match: "re.Match[str]") -> str:
            word = match.group(1)
            if word == "$":
                return "$"
            if word in variables:
                if word == "ctx" and not self.has_context:
                    raise QmpigenError(
                        "$ctx needs per-instance state: declare a context { ... } block with at least one field",
                        offset_location(code.location, code.text, match.start()),
                    )
                if word == "ret" and function is not None and function.return_type == "void":
                    raise QmpigenError(f"{function.name} returns nothing: no $ret", offset_location(code.location, code.text, match.start()))
                return variables[word]
            where = offset_location(code.location, code.text, match.start())
            if word.isdigit():
                count = len(function.params) if function else 0
                raise QmpigenError(
                    f"${word}: {function.name if function else 'this code'} has {count} argument"
                    f"{'' if count == 1 else 's'} ($0..${max(count - 1, 0)})",
                    where,
                )
            if word == "va":
                raise QmpigenError(f"$va: {function.name} is not variadic", where)
            raise QmpigenError(f"${word} is not available here", where)  # pragma: no cover - checked at parse time

        text = VARIABLE.sub(replace, code.text)
        return _c_block(text, code.location.line)


def _c_block(text: str, line: int) -> CBlock:
    """Dedent code and drop blank lines around it; `line` is the spec line of the first line kept."""
    lines = text.split("\n")
    if lines[0].strip():  # the code starts on the line of %{
        body = [lines[0].strip()] + (textwrap.dedent("\n".join(lines[1:])).split("\n") if len(lines) > 1 else [])
    else:
        lines.pop(0)
        line += 1
        while lines and not lines[0].strip():
            lines.pop(0)
            line += 1
        body = textwrap.dedent("\n".join(lines)).split("\n")
    body = [l.rstrip() for l in body]
    while body and not body[-1]:
        body.pop()
    return CBlock("\n".join(body), line)


def _uses_rank(spec: ToolSpec) -> bool:
    codes = [spec.on_init, spec.on_finalize, spec.on_pcontrol]
    for rule in spec.rules:
        codes += [*rule.before, *rule.after, rule.instead, *(e.code for e in rule.before_each + rule.after_each)]
    return any(m.group(1) == "rank" for code in codes if code is not None for m in VARIABLE.finditer(code.text))


def _few(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _base_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def resolve(spec: ToolSpec, enumeration: Enumeration, api: Optional[MpiApi] = None, interface: str = "thesis") -> Tool:
    """Check the spec against the enumeration and work out every wrapper, for the
    thesis interface (TOOLS=) or the callback interface (QMPI_TOOL_LIST=)."""
    return dataclasses.replace(_Resolver(spec, enumeration, api, interface).resolve(), interface=interface)
