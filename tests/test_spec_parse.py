"""Tool specs, stage 1 (qmpigen/spec_parse.py, grammars/qmpi_tool.lark): the text
of a .qmpi file to a ToolSpec, without any MPI.

Every construct is read back exactly; every error is one QmpigenError whose
file:line:col is checked to the column; hypothesis feeds the parser arbitrary text and
grammar soup: a ToolSpec or a QmpigenError, never anything else.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Set

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qmpigen.errors import Location, QmpigenError
from qmpigen.spec.parse import load_spec, parse_spec
from qmpigen.spec.values import CONTEXT, Code, ToolSpec, normalise_type
from qmpigen.spec.variables import check_variables, offset_location

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "spec-language.md"

EVERYTHING = """\
# every construct
tool msgstat prefix MS;
core "../core";

code %{
#include <stdio.h>
%}

context {
    unsigned long long calls[NUM_MPI_FUNCS];
    double started = -1.0;   /* C comments are fine here */
    int *where;
    char name[16] = "x";
}

group sends = MPI_*send, MPI_Send except MPI_Rsend;

intercept sends, MPI_File_* except MPI_File_open {
    call exec_func;
    before %{ $ctx->calls[$index]++; %}
    before each MPI_Comm %{ use($arg); %}
    after each MPI_Request * %{ if ($ret == MPI_SUCCESS) track($arg); %}
    after %{
        if ($ret != MPI_SUCCESS)
            fail("$name");
    %}
}

intercept collectives except MPI_Barrier;
intercept MPI_Barrier { instead %{ $ret = QMPI_Next_Barrier($0, $level, $v); %} }

on init %{ $ctx->started = 1.0; %}
on finalize %{ report($ctx); %}
on pcontrol %{ $ctx->verbose = $0; %}
"""


def error_of(text: str, file: str = "t.qmpi") -> str:
    with pytest.raises(QmpigenError) as info:
        parse_spec(text, file)
    return info.value.one_line()


# -- every construct ------------------------------------------------------------------


def test_every_construct_is_read_back():
    spec = parse_spec(EVERYTHING, "msgstat.qmpi")
    assert (spec.name, spec.prefix, spec.core) == ("msgstat", "MS", "../core")
    assert spec.location == Location("msgstat.qmpi", 2, 1)

    assert [(f.declaration, f.name, f.initializer) for f in spec.fields] == [
        ("unsigned long long calls[NUM_MPI_FUNCS]", "calls", None),
        ("double started", "started", "-1.0"),
        ("int *where", "where", None),
        ("char name[16]", "name", '"x"'),
    ]
    assert spec.has_context
    # code and context keep their order (a code block after context may use its type).
    assert ["context" if item is CONTEXT else item.text.strip() for item in spec.preamble] == [
        "#include <stdio.h>",
        "context",
    ]

    (group,) = spec.groups
    assert group.name == "sends" and str(group.selection) == "MPI_*send, MPI_Send except MPI_Rsend"

    first, second, third = spec.rules
    assert [s.text for s in first.selection.include] == ["sends", "MPI_File_*"]
    assert [s.text for s in first.selection.exclude] == ["MPI_File_open"]
    assert first.selection.include[1].location == Location("msgstat.qmpi", 18, 18)
    assert first.call == "exec_func" and first.instead is None
    assert [c.text for c in first.before] == [" $ctx->calls[$index]++; "]
    assert [(e.type, e.code.text) for e in first.before_each] == [("MPI_Comm", " use($arg); ")]
    assert [e.type for e in first.after_each] == ["MPI_Request *"]
    assert first.after[0].kind == "after" and 'fail("$name")' in first.after[0].text

    assert second.call == "typed" and not (second.before or second.after or second.instead)
    assert [s.text for s in second.selection.exclude] == ["MPI_Barrier"]
    assert third.instead is not None and third.instead.kind == "instead"

    assert spec.on_init.kind == "hook" and spec.on_finalize.kind == "hook"
    assert spec.on_pcontrol.kind == "pcontrol"


def test_minimal_spec_and_prefix_default():
    spec = parse_spec("tool t;", "t.qmpi")
    assert (spec.name, spec.prefix, spec.core, spec.rules, spec.fields) == ("t", "t", None, (), ())
    assert not spec.has_context and spec.on_init is None and spec.on_pcontrol is None


def test_code_location_is_the_first_character_after_the_opening_brace():
    spec = parse_spec("tool t;\nintercept MPI_Send {\n  before %{x++;%}\n}\n", "t.qmpi")
    assert spec.rules[0].before[0].location == Location("t.qmpi", 3, 12)


def test_comments_everywhere_outside_code():
    spec = parse_spec(
        "# hash\ntool t; // line\n/* block\n comment */ intercept MPI_Send /* x */ , MPI_Recv; # end\n", "t.qmpi"
    )
    assert [s.text for s in spec.rules[0].selection.include] == ["MPI_Send", "MPI_Recv"]


def test_code_is_verbatim_including_braces_hashes_and_comments():
    body = ' if (a) { b("#}"); } /* %{ */ // x\n#define Y 1\n'
    spec = parse_spec(f"tool t; code %{{{body}%}}", "t.qmpi")
    assert spec.preamble[0].text == body


def test_globs_and_group_names_are_selectors():
    spec = parse_spec("tool t; intercept MPI_[IS]send, MPI_*_c, point-to-point, one-sided, MPI_?ecv;", "t.qmpi")
    selectors = spec.rules[0].selection.include
    assert [s.text for s in selectors] == ["MPI_[IS]send", "MPI_*_c", "point-to-point", "one-sided", "MPI_?ecv"]
    assert [s.is_glob for s in selectors] == [True, True, False, False, True]
    assert [s.is_function for s in selectors] == [False, False, False, False, False]
    assert parse_spec("tool t; intercept MPI_Send;").rules[0].selection.include[0].is_function


@pytest.mark.parametrize(
    "written, normal",
    [
        ("MPI_Comm", "MPI_Comm"),
        ("MPI_Request*", "MPI_Request *"),
        ("MPI_Request  *", "MPI_Request *"),
        ("const int[]", "const int [ ]"),
        ("const int []", "const int [ ]"),
        ("int [][3]", "int [ ] [ 3 ]"),
    ],
)
def test_types_in_each_are_normalised(written, normal):
    assert normalise_type(written) == normal
    spec = parse_spec(f"tool t; intercept MPI_Send {{ before each {written} %{{ f($arg); %}} }}")
    assert spec.rules[0].before_each[0].type == normal


def test_load_spec_reads_files(tmp_path):
    path = tmp_path / "x.qmpi"
    path.write_text("tool x;\n")
    assert load_spec(str(path)).file == str(path)
    with pytest.raises(QmpigenError, match="cannot read spec"):
        load_spec(str(tmp_path / "missing.qmpi"))
    path.write_bytes(b"tool x;\n# \xff\n")
    with pytest.raises(QmpigenError) as info:
        load_spec(str(path))
    assert info.value.one_line() == f"{path}:2: the spec is not UTF-8 text"


# -- syntax errors: file:line:col: expected ... ------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "t.qmpi:1:1: expected 'tool', found end of file"),
        ("intercept MPI_Send;", "t.qmpi:1:1: expected 'tool', found 'intercept'"),
        ("tool x", "t.qmpi:1:7: expected ';' or 'prefix', found end of file"),
        ("tool 1x;", "t.qmpi:1:6: expected a name, found '1x'"),
        ("tool x;\nintercept ;", "t.qmpi:2:11: expected a function name, glob or group, found ';'"),
        ("tool x;\nintercept MPI_Send", "t.qmpi:2:19: expected ',', ';', 'except' or '{', found end of file"),
        ("tool x;\ncontext { int x }", "t.qmpi:2:17: expected ';' or '=', found '}'"),
        (
            "tool x;\ncontext {\n  int x\n  int y;\n}",
            "t.qmpi:4:3: expected ';' or '=', found 'int'",
        ),
        (
            "tool x;\nintercept MPI_Send {\n  before %{ x++; ",
            "t.qmpi:3:10: expected 'each', 'role' or C code in %{ ... %}, found '%{' "
            "(a code block that is never closed with %})",
        ),
        (
            "tool x;\nintercept MPI_Send { befor %{ %} }",
            "t.qmpi:2:22: expected 'after', 'before', 'call', 'instead' or '}', found 'befor'",
        ),
        ("tool x; on start %{ %}", "t.qmpi:1:12: expected init, finalize or pcontrol, found 'start'"),
        ("tool x; intercept MPI_Send { call fast; }", "t.qmpi:1:35: expected typed or exec_func, found 'fast'"),
        ("tool x; intercept MPI_Send { before each %{ %} }", "t.qmpi:1:42: expected a C type, found '%{ %}'"),
        ("tool x; core ../core;", "t.qmpi:1:14: expected a \"quoted string\", found '.'"),
        ("tool x; code", "t.qmpi:1:13: expected C code in %{ ... %}, found end of file"),
        (
            "tool x;\n\x00",
            "t.qmpi:2:1: expected 'argument', 'code', 'context', 'core', 'group', 'intercept', 'on' or end of file, found '\\x00'",
        ),
        ("tool x; group g MPI_Send;", "t.qmpi:1:17: expected '=', found 'MPI_Send'"),
    ],
)
def test_syntax_errors_say_where_and_what_was_expected(text, message):
    assert error_of(text) == message


# -- errors the parser finds without an MPI ---------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "tool x prefix MPI;",
            "t.qmpi:1:15: prefix 'MPI' would make the wrappers MPI_Send, ...: names MPI or "
            "QMPI already use; choose another prefix",
        ),
        ("tool QMPI;", "t.qmpi:1:6: 'QMPI' is reserved for QMPI itself: choose another tool name"),
        (
            "tool t prefix qmpi_x;",
            "t.qmpi:1:15: prefix 'qmpi_x' would make the wrappers qmpi_x_Send, ...: names MPI "
            "or QMPI already use; choose another prefix",
        ),
        ("tool core;", "t.qmpi:1:6: 'core' is reserved for QMPI itself: choose another tool name"),
        ("tool x; intercept MPI_Send, MPI_Send;", "t.qmpi:1:29: MPI_Send is listed twice (first at t.qmpi:1:19)"),
        ("tool x; intercept all except io, io;", "t.qmpi:1:34: io is listed twice (first at t.qmpi:1:30)"),
        ('tool x; core "a"; core "b";', "t.qmpi:1:19: a second core statement (the first is at t.qmpi:1:9)"),
        ('tool x; core "";', "t.qmpi:1:9: the core path is empty"),
        (
            "tool x; context { int a; }\ncontext { int b; }",
            "t.qmpi:2:1: a second context block (the first is at t.qmpi:1:9)",
        ),
        (
            "tool x; context { int 3; }",
            "t.qmpi:1:19: 'int 3' is not a field declaration like 'double t0' or 'unsigned long long "
            "calls[NUM_MPI_FUNCS]' (for function pointers, typedef the type in a code block)",
        ),
        (
            "tool x; context { int (*f)(int); }",
            "t.qmpi:1:19: 'int (*f)(int)' is not a field declaration like 'double t0' or 'unsigned long long "
            "calls[NUM_MPI_FUNCS]' (for function pointers, typedef the type in a code block)",
        ),
        ("tool x; context { int a; double a; }", "t.qmpi:1:26: field 'a' is declared twice (first at t.qmpi:1:19)"),
        (
            "tool x; context { int qmpi_x; }",
            "t.qmpi:1:19: field names starting with qmpi_ are reserved for qmpigen: 'qmpi_x'",
        ),
        ("tool x; on init %{ %}\non init %{ %}", "t.qmpi:2:1: a second 'on init' (the first is at t.qmpi:1:9)"),
        (
            "tool x; intercept MPI_Send { call exec_func; call typed; }",
            "t.qmpi:1:46: a second call statement in this intercept (the first is at t.qmpi:1:30)",
        ),
        (
            "tool x; intercept MPI_Send { call exec_func; instead %{ %} }",
            "t.qmpi:1:30: 'call exec_func' and 'instead' exclude each other: instead makes no call",
        ),
        (
            "tool x; intercept MPI_Send { instead %{ %} instead %{ %} }",
            "t.qmpi:1:44: a second instead block (the first is at t.qmpi:1:40)",
        ),
        (
            "tool x; group collectives = MPI_Send;",
            "t.qmpi:1:15: 'collectives' is a built-in group: choose another name",
        ),
        (
            "tool x; group MPI_S = MPI_Send;",
            "t.qmpi:1:15: 'MPI_S' cannot name a group: it reads as a function name or a glob",
        ),
        (
            "tool x; group g = MPI_Send;\ngroup g = MPI_Recv;",
            "t.qmpi:2:7: group 'g' is defined twice (first at t.qmpi:1:15)",
        ),
    ],
)
def test_spec_errors_found_by_the_parser(text, message):
    assert error_of(text) == message


# -- $ variables ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "tool x; intercept MPI_Send { before %{ $ret++; %} }",
            "t.qmpi:1:40: $ret is not set before the call: use it in after or instead code",
        ),
        (
            "tool x; intercept MPI_Send { before each MPI_Comm %{ $ret; %} }",
            "t.qmpi:1:54: $ret is not set before the call: use it in after or instead code",
        ),
        (
            "tool x; intercept MPI_Send { before %{ $foo++; %} }",
            "t.qmpi:1:40: unknown variable $foo (write $$ for a literal $)",
        ),
        (
            "tool x; intercept MPI_Send { before %{\n  a;\n    $ctxx++; %} }",
            "t.qmpi:3:5: unknown variable $ctxx; did you mean $ctx?",
        ),
        ("tool x; code %{ $ctx %}", "t.qmpi:1:17: $ctx is not available in code at file scope"),
        ("tool x; code %{ $0 %}", "t.qmpi:1:17: $0 is not available in code at file scope"),
        ("tool x; on init %{ $name %}", "t.qmpi:1:20: $name is not available in on init/on finalize"),
        ("tool x; intercept MPI_Send { after %{ $arg; %} }", "t.qmpi:1:39: $arg is not available in after code"),
    ],
)
def test_variable_errors_point_at_the_dollar(text, message):
    assert error_of(text) == message


def test_variables_allowed_where_they_mean_something():
    parse_spec(
        "tool x; code %{ $tool $prefix $context $$HOME %}\n"
        "intercept MPI_Send {\n"
        "  before %{ $name $short $index $rtype $args $nargs $0 $12 $ctx $level $v $va $$ %}\n"
        "  before each MPI_Comm %{ $arg $argtype $pos %}\n"
        "  after each MPI_Comm %{ $arg $ret %}\n"
        "  after %{ $ret %}\n"
        "}\n"
        "on init %{ $ctx $level $v $context %}\n"
        "on pcontrol %{ $0 $va $ret $name %}\n",
        "t.qmpi",
    )


def test_offset_location_counts_lines_and_columns():
    start = Location("f", 3, 10)
    assert offset_location(start, "ab\ncd$x", 5) == Location("f", 4, 3)
    assert offset_location(start, "ab$x", 2) == Location("f", 3, 12)
    check_variables(Code("$$ and $ alone and $", start, "file"))


# -- the documentation's examples parse -------------------------------------------------------


def doc_examples():
    """The ```qmpi blocks of every page of the manual (docs/) and of the README."""
    pages = sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md"]
    texts = [p.read_text() for p in pages if p.exists()]
    assert DOCS in pages
    return [block for text in texts for block in re.findall(r"```qmpi\n(.*?)```", text, re.S)]


def test_every_example_in_the_docs_parses():
    examples = doc_examples()
    assert examples, "docs/spec-language.md has ```qmpi examples"
    for text in examples:
        if not text.lstrip().startswith(("#", "tool")):
            text = "tool example;\n" + text
        assert isinstance(parse_spec(text, "doc.qmpi"), ToolSpec)


GRAMMAR = REPO / "grammars" / "qmpi_tool.lark"
# Terminals that hold the user's text: a keyword read as one of them is no mention.
USER_TEXT = frozenset({"IDENT", "NAME", "STRING", "C_CODE", "FIELD_DECL", "FIELD_INIT", "C_TYPE"})


@functools.lru_cache(maxsize=None)
def keeping_parser() -> lark.Lark:
    """A parser of the spec grammar built as qmpigen builds its own, keeping the keyword tokens."""
    return lark.Lark(GRAMMAR.read_text(), parser="lalr", lexer="contextual", keep_all_tokens=True)


def keywords_read(text: str, start: int, end: int) -> Set[str]:
    """The keywords the grammar reads as keywords in text[start:end] ({} if `text` is no spec)."""
    try:
        tree = keeping_parser().parse(text)
    except lark.exceptions.LarkError:
        return set()
    return {
        token.value
        for token in tree.scan_values(lambda v: isinstance(v, lark.Token))
        if token.type not in USER_TEXT and start <= token.start_pos < end and re.fullmatch(r"[a-z_]+", token.value)
    }


def keywords_the_docs_use() -> Set[str]:
    """Keywords in grammar position in docs/spec-language.md: in its ```qmpi examples, and
    in its code spans that are a statement (`on init %{ C %}`) or an item of an intercept
    (`call typed;`). A word in prose, or in C, is no mention."""
    text = DOCS.read_text()
    used: Set[str] = set()
    for block in re.findall(r"```qmpi\n(.*?)```", text, re.S):
        lead = "" if block.lstrip().startswith(("#", "tool")) else "tool example;\n"
        used |= keywords_read(lead + block, len(lead), len(lead + block))
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for span in re.findall(r"`([^`\n]+)`", prose):
        for lead, tail in (("tool t;\n", ""), ("tool t;\nintercept x {\n", "\n}")):
            used |= keywords_read(lead + span + tail, len(lead), len(lead + span))
    return used


def test_the_docs_list_every_built_in_group():
    from qmpigen.mpi.groups import GROUPS

    text = DOCS.read_text()
    for group in GROUPS:
        assert f"| `{group.name}` |" in text, group.name


def test_the_docs_use_every_keyword_of_the_grammar():
    keywords = set(re.findall(r'"([a-z_]+)"', GRAMMAR.read_text()))
    assert {"tool", "on", "call", "each", "typed", "pcontrol"} <= keywords  # the grammar's, found
    assert sorted(keywords - keywords_the_docs_use()) == []


def test_a_keyword_in_prose_or_c_is_no_mention():
    def read(text: str, start: int = 0) -> Set[str]:
        return keywords_read(text, start, len(text))

    assert read("tool t;\nintercept x {\ncall typed;\n}", len("tool t;\nintercept x {")) == {"call", "typed"}
    assert read("tool t;\nthe call of each function") == set()  # no spec
    assert read("tool t;\ncode %{ on(call, each); %}", len("tool t;")) == {"code"}
    assert read("tool on prefix each;") == {"tool", "prefix"}


# -- property tests: never anything but a ToolSpec or a QmpigenError ---------------------------

VOCABULARY = [
    "tool",
    "x",
    "prefix",
    "P",
    ";",
    "core",
    '"../c"',
    '"',
    "group",
    "g",
    "=",
    "except",
    ",",
    "MPI_Send",
    "MPI_File_*",
    "collectives",
    "point-to-point",
    "context",
    "{",
    "}",
    "int a",
    "double b[3]",
    "= 3",
    "code",
    "%{",
    "%}",
    "$ctx",
    "$ret",
    "$0",
    "$99",
    "$$",
    "$",
    "$va",
    "$arg",
    "on",
    "init",
    "finalize",
    "pcontrol",
    "intercept",
    "call",
    "typed",
    "exec_func",
    "before",
    "after",
    "each",
    "MPI_Comm",
    "MPI_Request *",
    "instead",
    "#",
    "\n",
    " ",
    "\t",
    "/*",
    "*/",
    "//",
    "\x00",
    "\r",
    "é",
    "[",
    "]",
    "qmpi_x",
    "MPI",
    "all",
]
soup = st.lists(st.sampled_from(VOCABULARY), max_size=40).map(" ".join)


def parses_or_fails_cleanly(text: str) -> None:
    try:
        spec = parse_spec(text, "p.qmpi")
    except QmpigenError as exc:
        assert exc.location is not None and exc.location.file == "p.qmpi"
        assert "\n" not in exc.one_line()
        return
    assert isinstance(spec, ToolSpec)


# The examples are the same every run (conftest's derandomized hypothesis profile); 600
# in all keep the three at about a second, in the fast tier.
@pytest.mark.slow  # seconds: `make test`, not `make test-fast`
@settings(max_examples=200, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=300))
def test_any_text_gives_a_spec_or_a_clean_error(text):
    parses_or_fails_cleanly(text)


@pytest.mark.slow  # seconds: `make test`, not `make test-fast`
@settings(max_examples=300, suppress_health_check=list(HealthCheck))
@given(st.one_of(soup, soup.map(lambda s: "tool t; " + s), soup.map(lambda s: "tool t; intercept all { " + s)))
def test_grammar_soup_gives_a_spec_or_a_clean_error(text):
    parses_or_fails_cleanly(text)


@pytest.mark.slow  # seconds: `make test`, not `make test-fast`
@settings(max_examples=100, suppress_health_check=list(HealthCheck))
@given(st.integers(min_value=0, max_value=len(EVERYTHING)), st.text(max_size=3))
def test_damaged_complete_spec_gives_a_spec_or_a_clean_error(cut, noise):
    parses_or_fails_cleanly(EVERYTHING[:cut] + noise + EVERYTHING[cut:])
