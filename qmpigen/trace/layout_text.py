"""The trace rank-file layout (qmpigen.trace.layout) as text: the generated section of
sample_tools/trace.c (structs, codes, _Static_asserts) and the tables of
docs/trace-format.md. `python -m qmpigen.trace.layout_text --write` rewrites both; without
--write it exits 1 if either is out of date."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

from .layout import (
    C_TYPES,
    CALL,
    COMM_CHUNK,
    FLAGS,
    FUNCTIONS,
    HEADER,
    MAGIC,
    PEERS,
    RECORD_ALIGNMENT,
    RECORDS,
    REQUEST_FLAGS,
    SHORT_CALL,
    VERSION,
    Field,
    Struct,
)

REPO = Path(__file__).resolve().parents[2]
TRACE_C = REPO / "sample_tools" / "trace.c"
DOC = REPO / "docs" / "trace-format.md"
COMMAND = "python -m qmpigen.trace.layout_text --write"


def _c_struct(s: Struct, comment: str) -> List[str]:
    lines = [f"struct {s.c_name} {{ /* {comment} */"]
    for f in s.fields:
        decl = f"char {f.name}[8]" if f.ctype == "char[8]" else f"{f.ctype} {f.name}"
        lines.append(f"    {decl};" + (f" /* {f.doc} */" if f.doc else ""))
    lines.append("};")
    lines += [
        f'_Static_assert(offsetof(struct {s.c_name}, {f.name}) == {at}, "layout.py");'
        for f, at in zip(s.fields, s.offsets())
    ]
    lines.append(f'_Static_assert(sizeof(struct {s.c_name}) == {s.size}, "layout.py");')
    return lines


def c_text() -> str:
    """The generated part of trace.c."""
    out = [
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        f"#define TRACE_VERSION {VERSION}",
        f'#define TRACE_MAGIC "{MAGIC.rstrip(bytes(1)).decode()}"',
        f"#define RECORD_ALIGNMENT {RECORD_ALIGNMENT}",
        f"#define COMM_CHUNK {COMM_CHUNK}",
        "",
        "/* Stable function codes written in the files (the core's indices differ per MPI); the names",
        " * reach the merger in FUNCTION records. The third column: 1 = interesting (always traced),",
        " * 0 = ordinary (QMPI_TRACE_FUNCTIONS=all). Every other function traced under `all` has",
        " * code TF_COUNT + its core index. */",
        "#define TRACE_FUNCTIONS(X) \\",
    ]
    body = [f"X({f.name.upper()}, {f.name}, {int(f.interesting)})" for f in FUNCTIONS]
    out += [f"    {item} \\" for item in body[:-1]] + [f"    {body[-1]}", ""]
    out.append("/* Record kinds; every record starts with kind and total size (a multiple of RECORD_ALIGNMENT). */")
    out.append("enum {")
    out += [f"    R_{r.name} = {r.kind}," for r in RECORDS]
    out += [
        "};",
        "enum { " + ", ".join(f"{name} = {value}" for name, value, _ in FLAGS) + " };",
        "enum { " + ", ".join(f"{name} = {value}" for name, value in PEERS) + " };",
        "enum { " + ", ".join(f"{name} = {value}" for name, value, _ in REQUEST_FLAGS) + " };",
        "",
    ]
    out += _c_struct(HEADER, f"{HEADER.size} bytes") + [""]
    for r in RECORDS:
        what = f"R_{r.name}: after kind and size, then {r.tail}" if r.variable else f"R_{r.name}, {r.size} bytes"
        out += _c_struct(r.layout, what) + [""]
    defaults = ", ".join(f".{f.name} = {f.default}" for f in CALL.layout.fields if f.default)
    out.append(f"#define CALL_RECORD_DEFAULTS {defaults}")
    # a call record that a SHORT_CALL can stand for: every field it lacks at its default
    # (all defaults are 0 or -1: one AND and one OR, no branch per field)
    short = {f.name for f in SHORT_CALL.layout.fields}
    extra = [f for f in CALL.layout.fields if f.name not in short]
    assert all(f.default in (0, -1) for f in extra)
    ones = " & ".join(f"(r).{f.name}" for f in extra if f.default == -1)
    zeros = " | ".join(
        f"(int64_t)(r).{f.name}" if f.ctype == "uint64_t" else f"(r).{f.name}" for f in extra if f.default == 0
    )
    out.append(f"#define CALL_RECORD_IS_SHORT(r) (({ones}) == -1 && \\\n    ({zeros}) == 0)")
    return "\n".join(out) + "\n"


def _field_text(f: Field) -> str:
    ctype = f.ctype if f.ctype == "char[8]" else f.ctype[0] + str(8 * C_TYPES[f.ctype][2])  # uint16_t: u16
    return f"{ctype} {f.name}" + (f" ({f.doc})" if f.doc else "")


def doc_text() -> str:
    """The generated part of docs/trace-format.md."""
    out = [f"### Header ({HEADER.size} bytes, version {VERSION})", "", "| offset | type | field |", "|---|---|---|"]
    for f, at in zip(HEADER.fields, HEADER.offsets()):
        if not f.name.startswith("reserved"):
            out.append(
                f"| {at} | {_field_text(f).split(' ', 1)[0]} | {f.name}" + (f": {f.doc}" if f.doc else "") + " |"
            )
    out += [
        "",
        "### Records",
        "",
        "Each record starts with `u16 kind, u16 size`. Fields in order (types: "
        "`u`/`i` and bits, little-endian; `reserved` fields are 0).",
        "",
        "| kind | name | size | fields after kind and size |",
        "|---|---|---|---|",
    ]
    for r in sorted(RECORDS, key=lambda r: r.kind):
        fields = r.layout.fields if r.variable else r.layout.fields[2:]
        text = ", ".join(_field_text(f) for f in fields)
        if r.variable:
            text += f", then {r.tail}"
        if r.doc:
            text += f"; {r.doc}"
        out.append(f"| {r.kind} | {r.name} | {'variable' if r.variable else r.size} | {text} |")
    flags = ", ".join(f"{value} {name}" for name, value, _ in FLAGS)
    out += [
        "",
        f"Call flags: {flags}. A CALL field's value when the call has none (and so in a SHORT_CALL): "
        + ", ".join(f"{f.name} {f.default}" for f in CALL.layout.fields if f.default)
        + ", the rest 0.",
        "",
        "COMPLETION flags: " + "; ".join(f"{value} {name}: {doc}" for name, value, doc in REQUEST_FLAGS) + ".",
        "",
        "### trace.c's function codes",
        "",
        "| code | function | traced | OTF2 collective |",
        "|---|---|---|---|",
    ]
    out += [
        f"| {f.code} | `{f.mpi_name}` | {'always' if f.interesting else '`all`'} | {f.collective or ''} |"
        for f in FUNCTIONS
    ]
    return "\n".join(out) + "\n"


C_BEGIN = f"/* ---- BEGIN GENERATED by `{COMMAND}` from qmpigen/trace/layout.py: do not edit ---- */\n"
C_END = "/* ---- END GENERATED ---- */\n"
DOC_BEGIN = f"<!-- BEGIN GENERATED by `{COMMAND}` from qmpigen/trace/layout.py: do not edit -->\n"
DOC_END = "<!-- END GENERATED -->\n"


def _replace(text: str, begin: str, end: str, body: str, path: Path) -> str:
    if text.count(begin) != 1 or text.count(end) != 1:
        raise SystemExit(f"{path}: expected one pair of GENERATED markers")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return head + begin + body + end + tail


def generated() -> Dict[Path, str]:
    """Each generated file's text as this layout makes it."""
    return {
        TRACE_C: _replace(TRACE_C.read_text(), C_BEGIN, C_END, c_text(), TRACE_C),
        DOC: _replace(DOC.read_text(), DOC_BEGIN, DOC_END, doc_text(), DOC),
    }


def main(argv: Optional[List[str]] = None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else argv
    stale = [path for path, text in generated().items() if path.read_text() != text]
    if argv == ["--write"]:
        for path, text in generated().items():
            path.write_text(text)
        for path in stale:
            print(f"{path.relative_to(REPO)}: rewritten")
        return 0
    for path in stale:
        print(f"{path.relative_to(REPO)}: out of date; run `{COMMAND}`")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
