"""The `$` variables of tool spec code: which exist where, and their expansion.

docs/spec-language.md has the table. The parser checks each code block against the
table for its kind (qmpigen.spec.values.CodeKind) and records the variables it uses; the
resolver expands them for one function of one MPI, and what a block used decides
what its wrapper declares (a block using $ctx or $rank needs the context).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, Iterator, Mapping, Optional, Tuple

from qmpigen.errors import Location, QmpigenError
from qmpigen.spec.values import Code, CodeKind

VARIABLE = re.compile(r"\$(\$|argument\([A-Za-z_][A-Za-z0-9_]*\)|[A-Za-z_][A-Za-z0-9_]*|[0-9]+)")
ARGUMENT = re.compile(r"argument\((?P<name>[A-Za-z_][A-Za-z0-9_]*)\)")

FILE_VARS = frozenset({"tool", "prefix", "context"})
HOOK_VARS = FILE_VARS | {"ctx", "level", "v", "rank"}
FUNCTION_VARS = HOOK_VARS | {"name", "short", "index", "rtype", "args", "nargs", "va", "kind"}
KIND_VARS: Dict[CodeKind, FrozenSet[str]] = {
    CodeKind.FILE: FILE_VARS,
    CodeKind.HOOK: HOOK_VARS,
    CodeKind.BEFORE: FUNCTION_VARS,
    CodeKind.AFTER: FUNCTION_VARS | {"ret"},
    CodeKind.INSTEAD: FUNCTION_VARS | {"ret"},
    CodeKind.PCONTROL: FUNCTION_VARS | {"ret"},
    CodeKind.EACH: FUNCTION_VARS | {"arg", "argtype", "pos"},
    CodeKind.EACH_AFTER: FUNCTION_VARS | {"arg", "argtype", "pos", "ret"},
}
KIND_WORDS: Dict[CodeKind, str] = {
    CodeKind.FILE: "code at file scope",
    CodeKind.HOOK: "on init/on finalize",
    CodeKind.BEFORE: "before code",
    CodeKind.AFTER: "after code",
    CodeKind.INSTEAD: "instead code",
    CodeKind.PCONTROL: "on pcontrol",
    CodeKind.EACH: "before each code",
    CodeKind.EACH_AFTER: "after each code",
}
ALL_VARS = frozenset().union(*KIND_VARS.values())
# Variables that read the tool instance's context: code using them needs it in scope.
CONTEXT_VARS = frozenset({"ctx", "rank"})


def offset_location(start: Location, text: str, offset: int) -> Location:
    """Location of text[offset] for text that begins at `start`."""
    before = text[:offset]
    newlines = before.count("\n")
    if newlines == 0:
        return Location(start.file, start.line, start.column + offset)
    return Location(start.file, start.line + newlines, offset - before.rfind("\n"))


def check_variables(code: Code) -> FrozenSet[str]:
    """The variables `code` uses; unknown ones, or ones that mean nothing where they are
    used, are an error at their `$`."""
    allowed = KIND_VARS[code.kind]
    used = set()
    for match in VARIABLE.finditer(code.text):
        word = match.group(1)
        if word == "$":
            continue
        if word in allowed or word.isdigit() and "nargs" in allowed or ARGUMENT.fullmatch(word) and "level" in allowed:
            used.add(word)
            continue
        where = offset_location(code.location, code.text, match.start())
        if ARGUMENT.fullmatch(word):
            raise QmpigenError(
                f"${word} needs the tool instance: it is not available in {KIND_WORDS[code.kind]}", where
            )
        if word == "argument":
            raise QmpigenError(
                "$argument reads a tool argument: write $argument(NAME), NAME declared with 'argument NAME;'", where
            )
        if word == "ret" and code.kind in (CodeKind.BEFORE, CodeKind.EACH):
            raise QmpigenError("$ret is not set before the call: use it in after or instead code", where)
        if word in ALL_VARS or word.isdigit():
            raise QmpigenError(f"${word} is not available in {KIND_WORDS[code.kind]}", where)
        close = difflib.get_close_matches(word, sorted(allowed), n=1)
        hint = f"; did you mean ${close[0]}?" if close else " (write $$ for a literal $)"
        raise QmpigenError(f"unknown variable ${word}{hint}", where)
    return frozenset(used)


def argument_uses(code: Code) -> Iterator[Tuple[str, Location]]:
    """Each $argument(NAME) in `code`: the name and where its `$` is."""
    for match in VARIABLE.finditer(code.text):
        argument = ARGUMENT.fullmatch(match.group(1))
        if argument:
            yield argument.group("name"), offset_location(code.location, code.text, match.start())


@dataclass(frozen=True)
class Expansion:
    text: str
    used: FrozenSet[str]  # the variables expanded

    @property
    def uses_context(self) -> bool:
        return bool(self.used & CONTEXT_VARS)


# Why a variable the parser allowed has no value for this function: (word, where) -> error.
Refusal = Callable[[str, Location], QmpigenError]


def expand(
    code: Code, values: Mapping[str, str], refuse: Refusal, check: Optional[Callable[[str, Location], None]] = None
) -> Expansion:
    """Replace every `$` variable of `code` by its value; `$$` is a `$`. `check(word,
    where)` may refuse a known variable; one without a value is `refuse`d."""
    used = set()

    def replace(match: "re.Match[str]") -> str:
        word = match.group(1)
        if word == "$":
            return "$"
        where = offset_location(code.location, code.text, match.start())
        if word not in values:
            raise refuse(word, where)
        if check is not None:
            check(word, where)
        used.add(word)
        return values[word]

    text = VARIABLE.sub(replace, code.text)
    return Expansion(text, frozenset(used))
