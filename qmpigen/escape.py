"""Text from outside (a spec's strings, file names, a driver's path, an mpi.h's version
macros) made safe for the context it is written into. Each function is one context;
templates pick one as a filter (qmpigen.output.render) and messages use `printable`.
A value that a context cannot hold is refused (EscapeError), never cut or guessed.
"""

from __future__ import annotations

import re
import shlex

# C0 controls, DEL and C1 controls: what a terminal or an editor would act on.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# What str.encode gives back from a non-UTF-8 file name (os.fsdecode): lone surrogates.
SURROGATE = re.compile(r"[\ud800-\udfff]")
NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


class EscapeError(ValueError):
    """A value that cannot be written into a context at all (a newline in a Makefile value)."""


def _named(char: str) -> str:
    if char in NAMED:
        return NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a non-UTF-8 name, as os.fsdecode kept it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """One line for a terminal: control characters and undecodable bytes as escapes
    (`\\n`, `\\x1b`), everything else as it is."""
    text = str(text)
    return SURROGATE.sub(lambda m: _named(m.group()), CONTROL.sub(lambda m: _named(m.group()), text))


def c_string(text: str) -> str:
    """The inside of a C string literal with exactly these bytes: backslash, quote and `?`
    (trigraphs) escaped, anything but printable ASCII as three-digit octal of its UTF-8."""
    out = []
    for byte in str(text).encode("utf-8", "surrogateescape"):
        char = chr(byte)
        if char in '\\"?':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def include_name(text: str) -> str:
    """The inside of `#include "..."`, which has no escapes: one line, no quote."""
    return printable(text).replace('"', "'")


def c_comment(text: str) -> str:
    """Text inside a one-line /* */ comment: it cannot end the comment, open another
    (-Wcomment) or span lines."""
    return printable(text).replace("*/", "*\\/").replace("/*", "/\\*")


def line_comment(text: str) -> str:
    """Text inside a `#` comment line (Makefile, sh, CMake, pkg-config, spec): one line,
    and no backslash at its end (make would continue the comment onto the next line)."""
    text = printable(text)
    return text + "\\" if text.endswith("\\") else text


def make_value(text: str) -> str:
    """A Makefile variable's value as make passes it on (`MPICC ?= VALUE`): `$` and `#`
    escaped for make. The shell quoting is the caller's (the value is a command)."""
    if "\n" in text or "\r" in text:
        raise EscapeError(f"'{printable(text)}' holds a line break, which a Makefile cannot carry")
    return text.replace("$", "$$").replace("#", "\\#")


def pc_value(text: str) -> str:
    """A pkg-config field's value: one line, `$` escaped (pkg-config expands ${var})."""
    return printable(text).replace("$", "$$")


def cmake_string(text: str) -> str:
    """The inside of a quoted CMake argument: no variable reference, no escape sequence
    but its own."""
    out = printable(text)
    for char in '\\"$':
        out = out.replace(char, "\\" + char)
    return out


def shell_word(text: str) -> str:
    """One shell word that gives back `text`, on one line: POSIX quoting, or bash's
    $'...' where it holds control characters (a newline in quotes would split a banner
    or a comment that shows the command)."""
    text = str(text)
    if not CONTROL.search(text) and not SURROGATE.search(text):
        return shlex.quote(text)
    body = "".join(
        "\\" + char if char in "\\'" else c_string(char) if CONTROL.match(char) or SURROGATE.match(char) else char
        for char in text
    )
    return f"$'{body}'"
