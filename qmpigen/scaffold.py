"""scaffold-tool: a resolved tool spec -> DIR/NAME.c and DIR/Makefile.

The rule that keeps user code safe: the C file and the Makefile are generated entirely
from the spec, and the spec is where the user writes code. Each generated file carries
a checksum line (a SHA-256 of the file without that line). Before writing over an
existing file, qmpigen checks it: a file without a checksum line, or whose checksum no
longer matches (someone edited it), is never overwritten unless --force is given.
The quick form (--name/--intercept) also writes DIR/NAME.qmpi; an existing spec there
that differs is user code too and is kept unless --force is given.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from .cnames import C_NAMES
from .errors import Location, QmpigenError
from .render import GeneratorInfo, environment
from .spec import SPEC_SUFFIX, CBlock, Tool, ToolSpec, parse_spec
from .write import check_path

@dataclass(frozen=True)
class ToolInterface:
    """How the chain calls a tool: its C template and the names of the parameters
    that the interface adds to every wrapper and hook."""

    template: str
    hook_params: str
    hook_args: str
    hook_unused: Tuple[str, ...]
    wrapper_unused: Tuple[str, ...]


INTERFACES: Dict[str, ToolInterface] = {
    # The thesis's: PREFIX_<Name>(args, int level, vector *v), found via get_interceptions.
    "thesis": ToolInterface(
        "tool/thesis.c.j2",
        f"{C_NAMES.level_param}, {C_NAMES.chain_param}",
        f"{C_NAMES.level}, {C_NAMES.chain}",
        (C_NAMES.level, C_NAMES.chain),
        (C_NAMES.level, C_NAMES.chain),
    ),
    # The MPI Forum's / MPICH's: fn(QMPI_Context, int tool_id, args), registered by name.
    "callback": ToolInterface(
        "tool/callback.c.j2", C_NAMES.level_param, C_NAMES.level, (C_NAMES.level,), (C_NAMES.context, C_NAMES.level)
    ),
}


def tool_plan(interface: str) -> Tuple[Tuple[str, str], ...]:
    """What scaffold-tool writes: (template, output file; {name} is the tool's name)."""
    return ((INTERFACES[interface].template, "{name}.c"), ("tool/Makefile.j2", "Makefile"))


CHECKSUM_TAG = "qmpigen-checksum:"
PENDING = "0" * 64
CHECKSUM_LINE = re.compile(r"^(?:/\* |# )" + re.escape(CHECKSUM_TAG) + r" ([0-9a-f]{64})\b.*\n?", re.M)
RESTORE = "#line QMPIGEN_RESTORE"


def _checksum_line(style: str) -> str:
    if style == "c":
        return f"/* {CHECKSUM_TAG} {PENDING} (qmpigen overwrites this file only while it matches) */"
    return f"# {CHECKSUM_TAG} {PENDING} (qmpigen overwrites this file only while it matches)"


def _c_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _restore_lines(text: str, output: str) -> str:
    """After user code, point compiler messages back at the generated file itself."""
    lines = text.split("\n")
    # A restore right before the next #line says nothing.
    lines = [l for i, l in enumerate(lines) if not (l == RESTORE and lines[i + 1 : i + 2] and lines[i + 1].startswith("#line "))]
    for number, line in enumerate(lines, start=1):
        if line == RESTORE:
            lines[number - 1] = f'#line {number + 1} "{_c_string(output)}"'
    return "\n".join(lines)


def _digest(text_without_checksum: str) -> str:
    return hashlib.sha256(text_without_checksum.encode("utf-8")).hexdigest()


def stamp(text: str) -> str:
    """Fill in the checksum line of a freshly rendered file."""
    match = CHECKSUM_LINE.search(text)
    if match is None or match.group(1) != PENDING:
        raise AssertionError("template without a pending checksum line")
    digest = _digest(text[: match.start()] + text[match.end() :])
    return text[: match.start(1)] + digest + text[match.end(1) :]


def intact(text: str) -> Optional[bool]:
    """None: no checksum line (not ours); True: unchanged since qmpigen wrote it; False: edited."""
    match = CHECKSUM_LINE.search(text)
    if match is None:
        return None
    return _digest(text[: match.start()] + text[match.end() :]) == match.group(1)


def _user_code(spec_file: str):
    def user_code(block: CBlock, indent: int) -> str:
        """Spec code between #line directives, so compiler messages point into the spec."""
        pad = " " * indent
        body = "\n".join(pad + line if line.strip() else "" for line in block.text.split("\n"))
        return f'#line {block.line} "{_c_string(spec_file)}"\n{body}\n{RESTORE}'

    return user_code


def render_tool(tool: Tool, gen: GeneratorInfo, enumeration_size: int) -> Dict[str, str]:
    env = environment()
    context = {
        "tool": tool,
        "gen": gen,
        "user_code": _user_code(tool.spec_file),
        "checksum_line": _checksum_line,
        "enumeration_size": enumeration_size,
        "iface": INTERFACES[tool.interface],
    }
    files = {}
    for template, output in tool_plan(tool.interface):
        name = output.format(name=tool.name)
        text = env.get_template(template).render(**context)
        files[name] = stamp(_restore_lines(text, name))
    return files


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
    tool_line = f"tool {name}" + (f" prefix {prefix}" if prefix else "") + ";"
    probe = f"{tool_line}\nintercept {intercept};\n"
    try:
        parsed = parse_spec(probe, QUICK_FILE)
    except QmpigenError as exc:
        raise quick_error(exc, "--prefix" if prefix else "--name") from None
    # Banners and #line name the spec that is written, DIR/NAME.qmpi.
    parsed = dataclasses.replace(parsed, file=f"{name}{SPEC_SUFFIX}")
    selection = parsed.rules[0].selection
    text = (
        f"# {name}{SPEC_SUFFIX}: a QMPI tool spec, written by qmpigen scaffold-tool --name {name}.\n"
        f"# It is yours now: edit it, then regenerate {name}.c and the Makefile from it with\n"
        f"#   {regenerate}\n"
        "# The language is described in docs/spec-language.md ('qmpigen examples DIR' writes it out).\n"
        "\n"
        f"{tool_line}\n"
        "\n"
        "# Per-instance state (one copy per entry of TOOLS), e.g.:\n"
        "# context {\n"
        "#     unsigned long long calls[NUM_MPI_FUNCS];\n"
        "# }\n"
        "\n"
        f"intercept {selection};\n"
        "\n"
        "# To run C code around the calls to the next tool, give the intercept a body, e.g.\n"
        "# code %{\n"
        "# #include <stdio.h>\n"
        "# %}\n"
        f"# intercept {selection} {{\n"
        "#     before %{ double t0 = PMPI_Wtime(); %}\n"
        "#     after  %{ fprintf(stderr, \"$name: %g s\\n\", PMPI_Wtime() - t0); %}\n"
        "# }\n"
    )
    return text, parsed
