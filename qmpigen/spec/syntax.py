"""Tool specs: lark's syntax errors as one line in the words of the spec language
(`expected a name, found '{'` at file:line:col), with a hint for unclosed C code."""

from __future__ import annotations

import re
from typing import Iterable, Tuple

import lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from qmpigen.errors import Location, QmpigenError

# ---------------------------------------------------------------------------------
# Syntax errors: one line, in the words of the spec language
# ---------------------------------------------------------------------------------

# How `expected ...` names the grammar's terminals.
TERMINAL_WORDS = {
    "IDENT": "a name",
    "NAME": "a function name, glob or group",
    "STRING": 'a "quoted string"',
    "INTEGER": "an integer",
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
    from qmpigen.spec.parse import parser  # the grammar's own spelling of a literal terminal

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


def syntax_error(exc: UnexpectedInput, file: str, text: str) -> QmpigenError:
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
            word = re.match(r"%\{|[A-Za-z0-9_]+|\S", str(token.value))
            found = _found(word.group() if word else str(token.value))
        else:
            found = _found(str(token.value))
        expected = exc.accepts or exc.expected
        return QmpigenError(f"expected {_expected(expected)}, found {found}{hint}", Location(file, line, column))
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream if exc.pos_in_stream is not None else -1
        char = text[pos] if 0 <= pos < len(text) else ""
        allowed = exc.allowed or set()
        return QmpigenError(f"expected {_expected(allowed)}, found {_found(char)}{hint}", Location(file, line, column))
    if isinstance(exc, UnexpectedEOF):
        line, column = _end_of(text)
        return QmpigenError(f"expected {_expected(exc.expected)}, found end of file", Location(file, line, column))
    return QmpigenError(f"syntax error: {exc}", Location(file, line, column))


def _end_of(text: str) -> Tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1
