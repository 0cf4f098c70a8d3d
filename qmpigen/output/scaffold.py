"""What scaffold-tool adds to the pipeline: the guard over user code, and the quick form.

The rule that keeps user code safe: the C file and the Makefile are generated entirely
from the spec, and the spec is where the user writes code. Each generated file carries
a checksum line (qmpigen.output.checksum). Before writing over an existing file, qmpigen
checks it: a file without a checksum line, or whose checksum no longer matches
(someone edited it), is never overwritten unless --force is given.
The quick form (--name/--intercept) also writes DIR/NAME.qmpi; an existing spec there
that differs is user code too and is kept unless --force is given.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from qmpigen.errors import Location, QmpigenError
from qmpigen.output.checksum import intact
from qmpigen.output.render import render_starter_spec
from qmpigen.output.write import check_path
from qmpigen.spec.parse import parse_spec
from qmpigen.spec.values import ToolSpec


def guard(directory: str, files: Dict[str, str], force: bool, user_files: Sequence[str] = ()) -> None:
    """Refuse to overwrite what the user wrote (see the module docstring)."""
    check_path(directory)  # an output that is a file is a path error, with or without --force
    if force:
        return
    problems: List[str] = []
    for name in sorted(files):
        path = os.path.join(directory, name)
        try:
            with open(path, "r", encoding="utf-8", newline="") as handle:
                old = handle.read()
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError):
            problems.append(f"{path} (unreadable)")
            continue
        if old == files[name]:
            continue
        if name in user_files:
            problems.append(f"{path} (a spec that differs from the one this command would write)")
            continue
        state = intact(old)
        if state is None:
            problems.append(f"{path} (not written by qmpigen: no checksum line)")
        elif state is False:
            problems.append(f"{path} (edited since qmpigen wrote it)")
    if problems:
        raise QmpigenError(
            "refusing to overwrite "
            + "; ".join(problems)
            + ": put your code in the spec and regenerate, or pass --force to overwrite",
            Location(problems[0].split(" (")[0]),
        )


# -- the quick form: a spec from --name and --intercept -------------------------------

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


QUICK_FILE = "--intercept"
QUICK_INTERCEPT_LINE = 2
QUICK_INTERCEPT_COLUMN = len("intercept ") + 1


def quick_error(exc: QmpigenError, option: str = "--name") -> QmpigenError:
    """An error in the quick form's spec, said in terms of the option at fault:
    --intercept:1:COL points into the option's value."""
    loc = exc.location
    if loc is not None and loc.file == QUICK_FILE and loc.line == QUICK_INTERCEPT_LINE:
        column = max(loc.column - QUICK_INTERCEPT_COLUMN + 1, 1)
        message = exc.message.replace(f"{QUICK_FILE}:{QUICK_INTERCEPT_LINE}:", f"{QUICK_FILE}:1:")
        return QmpigenError(message, Location(QUICK_FILE, 1, column))
    if loc is not None and loc.file == QUICK_FILE:
        return QmpigenError(f"{option}: {exc.message}")
    return exc


def quick_spec(name: str, prefix: Optional[str], intercept: str, regenerate: str) -> Tuple[str, ToolSpec]:
    """The spec the quick form stands for (its text, to write) and its parse (from the
    two statements that matter, so that errors map back to --intercept: see quick_error)."""
    if not IDENTIFIER.match(name):
        raise QmpigenError(f"--name '{name}': a tool name is a C identifier (letters, digits, _)")
    if prefix is not None and not IDENTIFIER.match(prefix):
        raise QmpigenError(f"--prefix '{prefix}': a wrapper prefix is a C identifier (letters, digits, _)")
    if "\n" in intercept or "#" in intercept or ";" in intercept or "%" in intercept:
        raise QmpigenError(f"--intercept '{intercept}': a comma-separated list of functions, globs and groups")
    tool_statement = f"tool {name}" + (f" prefix {prefix}" if prefix else "") + ";"
    probe = f"{tool_statement}\nintercept {intercept};\n"
    try:
        parsed = parse_spec(probe, QUICK_FILE)
    except QmpigenError as exc:
        raise quick_error(exc, "--prefix" if prefix else "--name") from None
    # The tool is made from the spec that is written (DIR/NAME.qmpi, which banners and
    # #line name), with its selection as parsed from --intercept, so that a function this
    # MPI lacks is reported at its column there.
    spec_file, text = render_starter_spec(name, tool_statement, str(parsed.rules[0].selection), regenerate)
    starter = parse_spec(text, spec_file)
    (rule,) = starter.rules
    return text, dataclasses.replace(starter, rules=(dataclasses.replace(rule, selection=parsed.rules[0].selection),))
