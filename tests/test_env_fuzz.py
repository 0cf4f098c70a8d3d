"""Property-based fuzzing of the core's run-time variables: whatever QMPI_TOOLS,
TOOLS, QMPI_TOOL_LIST and MPIR_CVAR_QMPI_TOOL_LIST hold, a process never crashes nor hangs;
it either builds the chain the variables describe and succeeds, or stops with exactly
one `qmpi: error:` line naming the first entry at fault.

The harness (tests/apps/env_harness.c) is linked with the real core and registers the
callback tools "fuzzcb" and the longest name a tool may have; tests/tools/passthrough.c
is the thesis-style tool. Each example runs the harness as an MPI singleton (no
launcher). Hypothesis explores on the MPICH wheel only: an Open MPI singleton spends
about a second in MPI_Init, so Open MPI (and every other MPI) runs the explicit cases.
"""

from __future__ import annotations

import enum
import itertools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from conftest import APPS, TEST_TOOLS, Mpi, assert_no_sanitizer_report

pytestmark = pytest.mark.mpi

RUN_TIMEOUT_S = 60
MAX_TOOL_NAME_LENGTH = 256  # QMPI_MAX_TOOL_NAME_LENGTH of MPICH and of the core's qmpi.h
LONGEST_NAME = b"n" * (MAX_TOOL_NAME_LENGTH - 1)  # registered by the harness
CALLBACK_NAMES = (b"fuzzcb", LONGEST_NAME)
VARIABLES = ("QMPI_TOOLS", "TOOLS", "QMPI_TOOL_LIST", "MPIR_CVAR_QMPI_TOOL_LIST")
MAX_ARG_STRLEN = 128 * 1024  # Linux: the longest environment string exec accepts
SUCCESS = re.compile(rb"^env harness: ok, (\d+) callback instances, (\d+) barriers$", re.M)


class File(enum.Enum):
    """Files a TOOLS entry may name; their paths are known only once they are built."""

    TOOL = "tests/tools/passthrough.c, by absolute path"
    TOOL_RELATIVE = "the same tool as ./libpassthrough.so (the harness runs in its directory)"
    TOOL_DOUBLE_SLASH = "the same tool, '//' in its path"
    TOOL_DOT_SEGMENT = "the same tool, '/./' in its path"
    CALLBACK_LIBRARY = "a callback tool's library (tests/callback_tools/cbcount.c) named as a path"
    CORE_LIBRARY = "libqmpi.so itself: a library, not a tool"
    HARNESS = "an executable"
    DIRECTORY = "a directory"
    NOT_ELF = "a text file"
    EMPTY_FILE = "an empty file"
    MISSING = "a path that does not exist"


THESIS_TOOL = (File.TOOL, File.TOOL_RELATIVE, File.TOOL_DOUBLE_SLASH, File.TOOL_DOT_SEGMENT)
Entry = Union[File, bytes]
Value = Optional[List[Entry]]  # entries joined by ':'; None leaves the variable unset


@dataclass(frozen=True)
class Harness:
    mpi: Mpi
    program: Path
    workdir: Path
    files: Dict[File, bytes]

    def render(self, value: Value) -> Optional[bytes]:
        if value is None:
            return None
        return b":".join(self.files[e] if isinstance(e, File) else e for e in value)

    def run(self, variables: Dict[str, Optional[bytes]]) -> subprocess.CompletedProcess:
        unset = (*VARIABLES, "QMPI_VERBOSE")  # the caller's own settings do not count
        env = {k.encode(): v.encode() for k, v in self.mpi.env().items() if k not in unset}
        env.update({name.encode(): value for name, value in variables.items() if value is not None})
        assert all(len(v) < MAX_ARG_STRLEN for v in env.values()), "a test value too long for exec"
        try:
            proc = subprocess.run(
                [str(self.program)], env=env, cwd=self.workdir, capture_output=True, timeout=RUN_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"the harness hung for {RUN_TIMEOUT_S} s with {variables!r}")
        # Under make test-sanitize a report fails the case, also where an error exit is expected.
        assert_no_sanitizer_report(proc.stderr.decode(errors="replace"), [str(self.program)])
        return proc


@pytest.fixture(scope="session")
def harness(mpi, core, tmp_path_factory) -> Harness:
    out = tmp_path_factory.mktemp(f"env-fuzz-{mpi.name}")
    # An mpi.h without the callback interface gets it from qmpi.h (see test_callback.py).
    callback_flags = [] if mpi.family == "mpich" else ["-D_GNU_SOURCE", "-include", str(core / "qmpi.h")]
    program = mpi.build_app(APPS / "env_harness.c", core, out / "env_harness", ["-Wextra", "-Werror", *callback_flags])
    tool = mpi.build_tool(TEST_TOOLS / "passthrough.c", core, out / "libpassthrough.so")
    callback_library = mpi.compile(
        [APPS.parent / "callback_tools" / "cbcount.c"], out / "libcbcount.so", ["-shared", "-fPIC", *callback_flags]
    )
    (out / "directory.so").mkdir()
    (out / "text.so").write_text("not an ELF file\n")
    (out / "empty.so").write_bytes(b"")
    files = {
        File.TOOL: tool,
        File.TOOL_RELATIVE: "./libpassthrough.so",
        File.TOOL_DOUBLE_SLASH: f"{out}//libpassthrough.so",
        File.TOOL_DOT_SEGMENT: f"{out}/./libpassthrough.so",
        File.CALLBACK_LIBRARY: callback_library,
        File.CORE_LIBRARY: core / "libqmpi.so",
        File.HARNESS: program,
        File.DIRECTORY: out / "directory.so",
        File.NOT_ELF: out / "text.so",
        File.EMPTY_FILE: out / "empty.so",
        File.MISSING: out / "missing.so",
    }
    assert not any(":" in str(path) for path in files.values())
    return Harness(mpi, program, out, {k: str(v).encode() for k, v in files.items()})


# ---- what the core should do: a model of its reading of the variables --------------


@dataclass(frozen=True)
class Failure:
    variable: str
    position: int
    quoted: Optional[bytes]  # the text the line must show (escaped), if it shows one


def names_a_tool(harness: Harness, entry: bytes) -> bool:
    """loading.c's rule: '@name', '%name', a library name (a file name ending in ".so" or
    with ".so." in it), or an existing ELF file; an entry too long to be a path counts."""
    if not entry:
        return False
    if entry[:1] in (b"@", b"%") or len(entry) >= 4096:
        return True
    base = entry.rsplit(b"/", 1)[-1]
    if re.search(rb"\.so(\.|$)", base):
        return True
    if b"/" not in entry:
        return False  # a bare name is looked up in LD_LIBRARY_PATH, unset here
    path = Path(entry.decode("utf-8", "surrogateescape"))
    path = path if path.is_absolute() else harness.workdir / path
    try:
        return path.is_file() and path.read_bytes()[:4] == b"\x7fELF"
    except OSError:
        return False


def ignored_tools(harness: Harness, qmpi_tools, tools) -> bool:
    """TOOLS, a generic name, is another program's variable when no entry names a tool:
    ignored with one warning line (QMPI_TOOLS never is)."""
    return qmpi_tools is None and bool(tools) and not any(names_a_tool(harness, e) for e in tools.split(b":"))


def expected_outcome(harness: Harness, qmpi_tools, tools, tool_list, cvar: Optional[bytes]):
    """The number of callback levels of the chain, or the Failure the core must report.

    QMPI_TOOLS, if set at all, stands for TOOLS; a TOOLS that names no tool is not read.
    The core reads in passes: empty entries (TOOLS, then the tool list), then a bare '@'
    in TOOLS, then each entry in chain order (TOOLS first) while loading."""
    thesis_paths = {harness.files[f] for f in THESIS_TOOL}
    if ignored_tools(harness, qmpi_tools, tools):
        tools = None
    thesis_name, thesis_value = ("QMPI_TOOLS", qmpi_tools) if qmpi_tools is not None else ("TOOLS", tools)
    list_name, list_value = ("QMPI_TOOL_LIST", tool_list) if tool_list else ("MPIR_CVAR_QMPI_TOOL_LIST", cvar)
    lists = [(name, value) for name, value in ((thesis_name, thesis_value), (list_name, list_value)) if value]
    for name, value in lists:
        for position, entry in enumerate(value.split(b":"), 1):
            if entry == b"":
                return Failure(name, position, value)
    for position, entry in enumerate(thesis_value.split(b":") if thesis_value else [], 1):
        if entry == b"@":
            return Failure(thesis_name, position, None)
    callbacks = 0
    for name, value in lists:
        for position, entry in enumerate(value.split(b":"), 1):
            if name == thesis_name and not entry.startswith(b"@"):
                if entry not in thesis_paths:
                    return Failure(name, position, entry)
                continue
            callback_name = entry[1:] if name == thesis_name else entry
            if callback_name not in CALLBACK_NAMES:
                return Failure(name, position, callback_name)
            callbacks += 1
    return callbacks


def _printable_length(text: bytes, i: int) -> int:
    """Bytes of the printable UTF-8 character at text[i], 0 if none (errors.c's rule)."""
    if text[i] < 0x80:
        return 1 if 0x20 <= text[i] < 0x7F else 0
    for n in (2, 3, 4):
        try:
            char = text[i : i + n].decode("utf-8")  # strict: no overlong forms, surrogates
        except UnicodeDecodeError:
            continue
        return n if len(char) == 1 and not 0x80 <= ord(char) <= 0x9F else 0  # C1 controls
    return 0


def escaped(text: bytes) -> bytes:
    """How an error line shows what is not printable UTF-8: control characters (one
    line stays one line) and bytes that are not UTF-8, as \\xNN."""
    out, i = bytearray(), 0
    while i < len(text):
        n = _printable_length(text, i)
        out += text[i : i + n] if n else b"\\x%02x" % text[i]
        i += n or 1
    return bytes(out)


def check(harness: Harness, *values: Value) -> str:
    """Runs the harness with `values` of VARIABLES and checks the property; returns the
    kind of outcome."""
    variables = dict(zip(VARIABLES, map(harness.render, values), strict=True))
    proc = harness.run(variables)
    shown = f"{variables!r}\nexit {proc.returncode}\nstdout: {proc.stdout!r}\nstderr: {proc.stderr!r}"
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}: {shown}"
    core_lines = [line for line in proc.stderr.split(b"\n") if b"qmpi:" in line]
    outcome = expected_outcome(harness, *variables.values())
    if ignored_tools(harness, variables["QMPI_TOOLS"], variables["TOOLS"]):
        warning = core_lines.pop(0) if core_lines else b""
        assert warning.startswith(b"qmpi: warning: TOOLS=") and b"names no tool" in warning, shown
        assert escaped(variables["TOOLS"][:300]) in warning, shown
    if isinstance(outcome, int):
        assert proc.returncode == 0, shown
        assert core_lines == [], shown
        assert [m.groups() for m in SUCCESS.finditer(proc.stdout)] == [(b"%d" % outcome,) * 2], shown
        return "chain built"
    assert proc.returncode != 0 and not SUCCESS.search(proc.stdout), shown
    assert len(core_lines) == 1, shown
    line = core_lines[0]
    assert re.match(rb"qmpi: error: %s entry %d[ :]" % (outcome.variable.encode(), outcome.position), line), shown
    if outcome.quoted is not None:
        assert escaped(outcome.quoted) in line, shown
    return f"stopped at a {outcome.variable} entry"


# ---- adversarial values --------------------------------------------------------------

ODD_ENTRIES = (
    b"",
    b"@",
    b"@@fuzzcb",
    b" fuzzcb",
    b"fuzzcb ",
    b"@ fuzzcb",
    b"FUZZCB",
    b"@nosuchtool",
    b"/",
    b".",
    b"..",
    b"fuzz\ncb",  # a newline must not split the error line
    b"\x1b[31mred\r",
    b"\xff\xfe\x80 not UTF-8",
    b"n" * (MAX_TOOL_NAME_LENGTH - 2),
    b"n" * MAX_TOOL_NAME_LENGTH,
    b"@" + b"n" * MAX_TOOL_NAME_LENGTH,
    b"/" + b"d" * 300,  # a path component longer than NAME_MAX
    b"/" + b"p/" * 2100,  # a path longer than PATH_MAX
    b"x" * 5000,
)
VALID_IN_TOOLS = (b"@fuzzcb", b"@" + LONGEST_NAME, *THESIS_TOOL)
VALID_IN_LISTS = CALLBACK_NAMES

entries = st.one_of(
    st.sampled_from(VALID_IN_TOOLS + VALID_IN_LISTS),
    st.sampled_from(list(File)),
    st.sampled_from(ODD_ENTRIES),
    st.binary(max_size=16).map(lambda b: b.replace(b"\0", b"")),  # may hold ':' too
)


def values(valid: Sequence[Entry]):
    """Unset, or entries joined by ':'; a chunk may repeat a valid entry up to 200 times.
    Values of valid entries only are drawn, too: a chain must often be built."""

    def repeats(entry: Entry):
        # Up to about 10 kB a chunk: a value stays far below Linux's 128 KiB per variable.
        most = min(200, 10_000 // (80 if isinstance(entry, File) else len(entry)))
        return st.integers(2, most).map(lambda n: [entry] * n)

    def chunked(entry):
        repeated = st.sampled_from(valid).flatmap(repeats)
        chunks = st.lists(st.one_of(entry.map(lambda e: [e]), repeated), min_size=1, max_size=5)
        return chunks.map(lambda chunks: [e for chunk in chunks for e in chunk])

    return st.one_of(st.none(), chunked(st.sampled_from(valid)), chunked(entries))


# Inputs worth running whatever hypothesis draws, values of VARIABLES in order.
EXPLICIT: Sequence[Tuple[Value, Value, Value, Value]] = (
    (None, None, None, None),
    (None, [b""], [b""], [b""]),  # all set, all empty: no tools
    (None, [File.TOOL, b"@fuzzcb"], [b"fuzzcb", LONGEST_NAME], None),
    (None, None, [b""], [b"fuzzcb"]),  # an empty QMPI_TOOL_LIST gives way to MPICH's spelling
    (None, None, [b"fuzzcb"], [b"nosuchtool"]),  # QMPI_TOOL_LIST wins
    (None, [File.TOOL, b"", File.TOOL], None, None),
    (None, [b"", b""], None, None),  # TOOLS=":"
    (None, None, None, [b"fuzzcb", b""]),  # a trailing ':'
    (None, [b"@"], None, None),
    (None, [File.TOOL, b"@"], [b""], [b"a", b"", b"b"]),  # empty list entries are found before a bare '@'
    (None, [b"fuzz\ncb"], None, None),
    (None, None, [b"fuzz\ncb"], None),
    (None, [b"a\nb", b""], None, None),  # the empty-entry line quotes the whole value
    (None, [b"\xff\xfe\x80 not UTF-8"], None, None),
    (None, [File.CALLBACK_LIBRARY], None, None),
    (None, [File.DIRECTORY], None, None),
    (None, [File.NOT_ELF], None, None),
    (None, [File.EMPTY_FILE], None, None),
    (None, [File.CORE_LIBRARY], None, None),
    (None, [File.HARNESS], None, None),
    (None, [b"/" + b"p/" * 2100], None, None),
    (None, None, [b"n" * MAX_TOOL_NAME_LENGTH], None),
    (None, [File.TOOL] * 300 + [b"@fuzzcb"] * 100, [b"fuzzcb"] * 100, None),
    ([b""], [b"/nonexistent.so"], None, None),  # QMPI_TOOLS set, even empty, wins over TOOLS
    ([File.TOOL, b"@fuzzcb"], [b"@"], None, None),
    ([b"fuzz\ncb"], [File.TOOL], None, None),
)


def with_examples(test):
    for qmpi_tools, tools, tool_list, cvar in EXPLICIT:
        test = example(qmpi_tools=qmpi_tools, tools=tools, tool_list=tool_list, cvar=cvar)(test)
    return test


@pytest.mark.parametrize("mpi", ["mpich"], indirect=True)
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@with_examples
@given(
    qmpi_tools=values(VALID_IN_TOOLS),
    tools=values(VALID_IN_TOOLS),
    tool_list=values(VALID_IN_LISTS),
    cvar=values(VALID_IN_LISTS),
)
def test_any_tool_variables_give_the_chain_or_one_error_line(harness, qmpi_tools, tools, tool_list, cvar):
    event(check(harness, qmpi_tools, tools, tool_list, cvar))  # --hypothesis-show-statistics: the mix of outcomes


def describe(case: Tuple[Value, Value, Value, Value]) -> str:
    """A short test id: the variables that are set, entries abbreviated."""

    def entry(e: Entry) -> str:
        return e.name if isinstance(e, File) else repr(e)[2:-1][:12]

    shown = []
    for name, value in zip(("QMPI_TOOLS", "TOOLS", "LIST", "CVAR"), case):
        if value is not None:
            runs = [(entry(e), len(list(group))) for e, group in itertools.groupby(value)]
            shown.append(f"{name}=" + ":".join(f"{e}*{n}" if n > 3 else ":".join([e] * n) for e, n in runs))
    return " ".join(shown) or "unset"


@pytest.mark.parametrize("case", EXPLICIT, ids=list(map(describe, EXPLICIT)))
def test_explicit_tool_variables_on_every_mpi(harness, case):
    check(harness, *case)


def test_callback_library_named_in_tools_says_how_to_name_it(harness):
    """Its constructor's refused registration used to be a second error line."""
    path = harness.files[File.CALLBACK_LIBRARY]
    proc = harness.run({"TOOLS": path})
    assert [line for line in proc.stderr.split(b"\n") if b"qmpi:" in line] == [
        b"qmpi: error: TOOLS entry 1 (%s): not a QMPI tool but the library of callback tool 'cbcount': name it "
        b"'@cbcount' in TOOLS or in QMPI_TOOL_LIST, with the library linked or preloaded" % path
    ], proc.stderr
