"""Static stacking (TOOLS=%NAME, -DQMPI_STATIC_TOOL=NAME) and the configuration file
(QMPI_CONF) with per-instance tool arguments ($argument(NAME), QMPI_Get_argument,
QMPI_Get_tool_argument).

The `mpi` tests build a core, the sample tools and tests/apps/conf/argcount.qmpi (both
interfaces) with each MPI's mpicc and run demo_app at 1-3 ranks.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from qmpigen.errors import QmpigenError
from qmpigen.spec.parse import parse_spec

from conftest import APPS, SAMPLE_TOOLS, qmpi_errors, qmpigen

ARGCOUNT = APPS / "conf" / "argcount.qmpi"


# -- the spec language: argument / $argument(NAME) (no MPI needed) --------------------------


def test_argument_statements_are_parsed_with_their_defaults():
    spec = parse_spec(
        'tool t;\nargument output = "a\\\\b";\nargument threshold = -12;\nargument label;\n'
        "intercept MPI_Send { before %{ f($argument(output), $argument(threshold), $argument(label)); %} }\n",
        "t.qmpi",
    )
    assert [(a.name, a.default, a.is_integer) for a in spec.arguments] == [
        ("output", "a\\\\b", False),  # the characters between the quotes (qmpigen.escape makes the C)
        ("threshold", "-12", True),
        ("label", None, False),
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "tool t;\nargument x;\nargument x = 1;\n",
            "t.qmpi:3:10: argument 'x' is declared twice (first at t.qmpi:2:10)",
        ),
        (
            "tool t;\nintercept MPI_Send { before %{ $argument(nope); %} }\n",
            "t.qmpi:2:32: $argument(nope): no argument 'nope' is declared (argument nope;)",
        ),
        (
            "tool t;\nargument x;\ncode %{ int y = $argument(x); %}\n",
            "t.qmpi:3:17: $argument(x) needs the tool instance: it is not available in code at file scope",
        ),
        (
            "tool t;\nintercept MPI_Send { before %{ $argument; %} }\n",
            "t.qmpi:2:32: $argument reads a tool argument: write $argument(NAME), NAME declared with 'argument NAME;'",
        ),
        ("tool t;\nargument tool;\n", "t.qmpi:2:10: 'tool' cannot name an argument"),
        ("tool t;\nargument x = 99999999999999999999;\n", "t.qmpi:2:14: the default of 'x' does not fit a long long"),
        ("tool t;\nargument x = y;\n", "t.qmpi:2:14: expected a \"quoted string\" or an integer, found 'y'"),
    ],
)
def test_argument_errors_say_where(text, message):
    with pytest.raises(QmpigenError) as error:
        parse_spec(text, "t.qmpi")
    assert error.value.one_line().startswith(message), error.value.one_line()


# -- building: static objects, the argument tool ---------------------------------------------


@pytest.fixture(scope="module")
def built(mpi, core, sample_tools, tmp_path_factory):
    """Static objects of counter (generated: QMPI_STATIC_SYMBOLS) and tbcast (hand-written:
    found with -rdynamic), argcount in both interfaces, and the applications."""
    out = tmp_path_factory.mktemp(f"conf-{mpi.name}")
    objects = {}
    for name, source in (
        ("counter", sample_tools / "generated" / "counter" / "counter.c"),
        ("tbcast", SAMPLE_TOOLS / "tbcast.c"),
    ):
        objects[name] = mpi.compile(
            [source],
            out / f"{name}_static.o",
            ["-c", "-O2", "-Wall", "-Wextra", "-Werror", f"-DQMPI_STATIC_TOOL={name}", f"-I{core}"],
        )
    for interface in ("thesis", "callback"):
        gen = out / f"argcount-{interface}"
        proc = qmpigen(
            "scaffold-tool",
            str(ARGCOUNT),
            "--interface",
            interface,
            "--mpi-header",
            "auto",
            "--mpicc",
            mpi.mpicc,
            "-o",
            str(gen),
            env=mpi.env(),
        )
        assert proc.returncode == 0, proc.stderr
        mpi.build_tool(gen / "argcount.c", core, out / f"libargcount-{interface}.so")
    demo = SAMPLE_TOOLS / "demo_app.c"
    link_so = [f"-L{core}", "-lqmpi", f"-Wl,-rpath,{core}"]
    link_a = [str(core / "libqmpi.a"), "-ldl", "-pthread"]
    apps = {
        "so": mpi.compile(
            [demo, objects["counter"], objects["tbcast"]], out / "app_so", ["-O2", "-rdynamic", *link_so]
        ),
        "a": mpi.compile([demo, objects["counter"], objects["tbcast"]], out / "app_a", ["-O2", "-rdynamic", *link_a]),
        # Without -rdynamic: the generated tool brings its own table; the hand-written one is
        # found in the program's symbol table (.symtab).
        "a_plain": mpi.compile([demo, objects["counter"], objects["tbcast"]], out / "app_a_plain", ["-O2", *link_a]),
    }
    apps["a_stripped"] = out / "app_a_stripped"  # no .symtab: only the generated tool can be found
    shutil.copy(apps["a_plain"], apps["a_stripped"])
    subprocess.run(["strip", str(apps["a_stripped"])], check=True)
    return {"out": out, "apps": apps, "tools": sample_tools, "core": core}


def counter_reports(stdout: str):
    reports = {}
    for match in re.finditer(r"counter@(\d+) rank (\d+):(.*)$", stdout, re.M):
        counts = dict(item.split("=") for item in match.group(3).split())
        reports[(int(match.group(1)), int(match.group(2)))] = {k: int(v) for k, v in counts.items()}
    return reports


def assert_counter_tbcast_counter(stdout: str, ranks: int, outer: int = 1, inner: int = 3):
    """Thesis 4.5.3 semantics: the outer counter sees MPI_Bcast once, the inner one the
    Send/Recv TBcast issues instead; every count exact."""
    assert sorted(line for line in stdout.splitlines() if line.startswith("app rank")) == [
        f"app rank {r} of {ranks}: data 11 22 33 {ranks} wtime_ok 1" for r in range(ranks)
    ]
    reports = counter_reports(stdout)
    assert set(reports) == {(level, r) for level in (outer, inner) for r in range(ranks)}, stdout
    base = {"MPI_Init": 1, "MPI_Finalize": 1, "MPI_Barrier": 1}
    for r in range(ranks):
        assert reports[(outer, r)] == dict(base, MPI_Bcast=1, MPI_Comm_rank=1, MPI_Comm_size=1), reports
        # TBcast asks rank and size through its table: the inner instance sees them twice.
        peer = {"MPI_Send": ranks - 1} if r == 0 else {"MPI_Recv": 1}
        assert reports[(inner, r)] == dict(base, MPI_Comm_rank=2, MPI_Comm_size=2, **peer), reports


# -- static stacking ----------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("app", ["so", "a"])
def test_two_static_tools_and_a_dynamic_one_in_the_order_of_tools(mpi, built, app):
    """%counter and %tbcast are linked into the program; libcounter.so is dlopen'd."""
    dynamic = built["tools"] / "libcounter.so"
    proc = mpi.run(3, [built["apps"][app]], env={"TOOLS": f"%counter:%tbcast:{dynamic}", "QMPI_VERBOSE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert_counter_tbcast_counter(proc.stderr, 3)
    # How many functions the counter intercepts depends on the MPI (MPI_Session_* where declared).
    chain = [
        re.sub(r"intercepts \d+ functions?", "intercepts N functions", line)
        for line in proc.stderr.splitlines()
        if line.startswith("qmpi: level")
    ]
    assert chain[:3] == [
        "qmpi: level 1: %counter, thesis-style, instance 1, intercepts N functions",
        "qmpi: level 2: %tbcast, thesis-style, instance 1, intercepts N functions",
        f"qmpi: level 3: {dynamic}, thesis-style, instance 1, intercepts N functions",
    ], proc.stderr
    counts = re.findall(
        r"^qmpi: level \d: \S+, thesis-style, instance 1, intercepts (\d+) functions?$", proc.stderr, re.M
    )
    # TBcast: MPI_Bcast, and MPI_Bcast_c where the MPI declares it (MPI 4).
    tbcast_functions = "2" if "_MPI_Bcast_c" in (built["core"] / "qmpi.h").read_text() else "1"
    assert counts[0] == counts[2] and counts[1] == tbcast_functions, proc.stderr
    # The other order: the dynamic one outside, the static counter inside.
    proc = mpi.run(3, [built["apps"][app]], env={"TOOLS": f"{dynamic}:%tbcast:%counter"})
    assert proc.returncode == 0, proc.stderr
    assert_counter_tbcast_counter(proc.stderr, 3)


@pytest.mark.mpi
@pytest.mark.parametrize("app", ["a_plain", "a_stripped"])
def test_a_static_tool_twice_is_two_instances_without_any_exported_symbol(mpi, built, app):
    """The generated tool carries its wrapper table: no dlsym, no -rdynamic, even stripped."""
    tbcast = built["tools"] / "libtbcast.so"
    proc = mpi.run(3, [built["apps"][app]], env={"TOOLS": f"%counter:{tbcast}:%counter"})
    assert proc.returncode == 0, proc.stderr
    assert_counter_tbcast_counter(proc.stderr, 3)


@pytest.mark.mpi
def test_a_hand_written_static_tool_is_found_in_the_symbol_table(mpi, built):
    """tbcast.c, unchanged, compiled with -DQMPI_STATIC_TOOL=tbcast: no table, no -rdynamic."""
    proc = mpi.run(3, [built["apps"]["a_plain"]], env={"TOOLS": "%counter:%tbcast:%counter"})
    assert proc.returncode == 0, proc.stderr
    assert_counter_tbcast_counter(proc.stderr, 3)


@pytest.mark.mpi
@pytest.mark.parametrize(
    "app, tools, message",
    [
        (
            "so",
            "%counter:%nope",
            "TOOLS entry 2 (%nope): no statically linked tool named 'nope' (linked: counter, tbcast); "
            "compile it with -DQMPI_STATIC_TOOL=nope and link its object files into the program",
        ),
        ("so", "%", "TOOLS entry 1: '%' needs the name of a statically linked tool"),
        (
            "a_stripped",
            "%tbcast",
            "TOOLS entry 1 (%tbcast): wrapper 'TB_Bcast' for MPI_Bcast not found: not in the tool's "
            "QMPI_STATIC_SYMBOLS, not in the symbol table of /proc/self/exe (stripped?), not "
            "exported (-rdynamic)",
        ),
    ],
)
def test_static_tool_errors_are_one_line(mpi, built, app, tools, message):
    proc = mpi.run(1, [built["apps"][app]], env={"TOOLS": tools})
    assert proc.returncode != 0
    assert qmpi_errors(proc.stderr) == [f"qmpi: error: {message}"], proc.stderr


# -- the configuration file ------------------------------------------------------------------


def argcount_lines(stdout: str):
    return sorted(line for line in stdout.splitlines() if re.match(r"^\w+ rank \d+: threshold", line))


@pytest.mark.mpi
def test_configuration_file_gives_each_instance_its_own_arguments(mpi, built, tmp_path):
    """Two instances of one thesis-style spec tool around TBcast, then the same spec as a
    callback tool and the static counter: each reads its own section."""
    out = built["out"]
    conf = tmp_path / "stack.conf"
    conf.write_text(
        "# one instance per section, in chain order\n"
        "[outer]\n"
        f"tool = {out / 'libargcount-thesis.so'}\n"
        "output = outer\n"
        "threshold = 16\n"
        "\n"
        "[tb]\n"
        f"tool = {built['tools'] / 'libtbcast.so'}\n"
        "unused = a hand-written tool does not say which arguments it takes: any key is fine\n"
        "; the inner instance of the same library\n"
        "[inner]\n"
        f"   tool   =   {out / 'libargcount-thesis.so'}   \n"
        "output=inner\n"
        "threshold = 1048576\n"
        "[cb]\n"
        "tool = @argcount\n"
        "output = callback\n"
        "threshold = 0x11\n"
        "[count]\n"
        "tool = %counter\n"
    )
    # The core first: Open MPI's mpiexec gets LD_PRELOAD too, and the tool needs the core's symbols.
    preload = f"{built['core'] / 'libqmpi.so'}:{out / 'libargcount-callback.so'}"
    env = {"QMPI_CONF": str(conf), "LD_PRELOAD": preload, "QMPI_VERBOSE": "1"}
    proc = mpi.run(3, [built["apps"]["so"]], env=env)
    assert proc.returncode == 0, proc.stderr
    expected = []
    for r in range(3):
        sends = 2 if r == 0 else 1  # TBcast's Sends from the root, or the one Recv
        expected += [
            f"outer rank {r}: threshold 16 calls 1 large 1",  # 16-byte Bcast >= 16
            f"inner rank {r}: threshold 1048576 calls {sends} large 0",
            f"callback rank {r}: threshold 17 calls {sends} large 0",  # 16 bytes < 0x11
        ]
    assert argcount_lines(proc.stdout) == sorted(expected), proc.stdout
    reports = counter_reports(proc.stderr)
    assert sorted(reports) == [(5, r) for r in range(3)]
    assert reports[(5, 0)]["MPI_Send"] == 2 and reports[(5, 1)]["MPI_Recv"] == 1
    assert f"qmpi: chain: 5 tools from QMPI_CONF={conf};" in proc.stderr
    assert re.search(r"^qmpi: level 4: @argcount, callback, instance 1, intercepts \d+ functions$", proc.stderr, re.M)


@pytest.mark.mpi
def test_without_a_configuration_file_arguments_have_their_defaults(mpi, built):
    lib = built["out"] / "libargcount-thesis.so"
    proc = mpi.run(2, [built["apps"]["so"]], env={"TOOLS": f"{lib}:{lib}"})
    assert proc.returncode == 0, proc.stderr
    assert argcount_lines(proc.stdout) == sorted(
        f"argcount rank {r}: threshold 0 calls 1 large 1" for r in (0, 0, 1, 1)
    )


CONF_ERRORS = [
    ("[a b]\n", "{f}:1: '[a b]': an instance name is letters, digits, '_', '-' and '.' ([outer])"),
    (
        "[ok]\ntool = {lib}\nnonsense\n",
        "{f}:3: expected '[NAME]', 'KEY = VALUE', a comment or an empty line, found 'nonsense'",
    ),
    ("[ok\n", "{f}:1: a section header ends with ']': '[ok'"),
    ("# first\nthreshold = 1\n", "{f}:2: 'threshold = ...' before the first [NAME] section"),
    ("[a]\ntool = {lib}\n[b]\ntool = {lib}\n[a]\n", "{f}:5: duplicate instance name 'a' (first at line 1)"),
    ("[a]\ntool = {lib}\nk = 1\nk = 2\n", "{f}:4: duplicate key 'k' in [a] (first at line 3)"),
    ("[a]\ntool = {lib}\ntool = {lib}\n", "{f}:3: duplicate key 'tool' in [a] (first at line 2)"),
    (
        "[a]\ntool = {lib}\nqmpi.level = 3\n",
        "{f}:3: unknown key 'qmpi.level' (keys starting with 'qmpi.' are reserved for the core)",
    ),
    ("[a]\nbad key = 1\n", "{f}:2: 'bad key' is not a key: keys are letters, digits, '_', '-' and '.'"),
    ("[a]\ntool =\n", "{f}:2: 'tool =' needs a path, %NAME or @NAME"),
    ("[a]\noutput = x\n", "{f}:1: [a] has no 'tool = ...' line (a path, %NAME or @NAME)"),
    ("[stack row]\n", "{f}:1: [stack row] has no 'instances = NAME, ...' line"),
    (
        "[a]\ntool = {lib}\n\n[b]\ntool = /nonexistent/libx.so\n",
        "{f}:5: QMPI_CONF entry 2 (/nonexistent/libx.so): cannot load: /nonexistent/libx.so: cannot open shared object "
        "file: No such file or directory",
    ),
    ("[a]\ntool = @nobody\n", "{f}:2: QMPI_CONF entry 1: no callback tool named 'nobody' is registered"),
    ("[a]\ntool = %nobody\n", "{f}:2: QMPI_CONF entry 1 (%nobody): no statically linked tool named 'nobody'"),
    ("[a]\ntool = {lib}\nthreshold = 1M\n", "{f}:3: [a] threshold = 1M: not an integer"),
    (
        "[a]\ntool = {lib}\noutput = x\nthresold = 1\n",
        "{f}:4: [a] unknown argument 'thresold': {lib} takes output, threshold",
    ),
    ("[a]\ntool = %counter\nlevel = 1\n", "{f}:3: [a] unknown argument 'level': %counter takes no arguments"),
]


@pytest.mark.mpi
@pytest.mark.parametrize("text, message", CONF_ERRORS, ids=[str(i) for i in range(len(CONF_ERRORS))])
def test_configuration_errors_are_one_line_with_file_and_line(mpi, built, tmp_path, text, message):
    conf = tmp_path / "bad.conf"
    lib = built["out"] / "libargcount-thesis.so"
    conf.write_text(text.format(lib=lib))
    proc = mpi.run(2, [built["apps"]["so"]], env={"QMPI_CONF": str(conf)})
    assert proc.returncode != 0
    errors = qmpi_errors(proc.stderr)
    assert errors and all(e == errors[0] for e in errors), proc.stderr
    assert errors[0].startswith("qmpi: error: " + message.format(f=conf, lib=lib)), proc.stderr


@pytest.mark.mpi
def test_a_missing_configuration_file_is_one_line(mpi, built, tmp_path):
    proc = mpi.run(1, [built["apps"]["so"]], env={"QMPI_CONF": str(tmp_path / "none.conf")})
    assert proc.returncode != 0
    assert qmpi_errors(proc.stderr) == [
        f"qmpi: error: QMPI_CONF={tmp_path / 'none.conf'}: cannot read the configuration file: No such file or directory"
    ]


# -- precedence: QMPI_CONF, then QMPI_TOOLS / TOOLS, then QMPI_TOOL_LIST ---------------------


@pytest.mark.mpi
def test_qmpi_conf_wins_and_verbose_says_what_it_ignored(mpi, built, tmp_path):
    conf = tmp_path / "one.conf"
    conf.write_text(f"[only]\ntool = {built['out'] / 'libargcount-thesis.so'}\noutput = fromconf\n")
    env = {"QMPI_CONF": str(conf), "TOOLS": "/nonexistent/libx.so", "QMPI_TOOL_LIST": "nobody", "QMPI_VERBOSE": "1"}
    proc = mpi.run(2, [built["apps"]["so"]], env=env)
    assert proc.returncode == 0, proc.stderr
    assert argcount_lines(proc.stdout) == [f"fromconf rank {r}: threshold 0 calls 1 large 1" for r in (0, 1)]
    assert (
        f"qmpi: chain: 1 tool from QMPI_CONF={conf} (TOOLS and QMPI_TOOL_LIST set but ignored: QMPI_CONF wins); "
        in proc.stderr
    ), proc.stderr
    # Set but empty is unset: TOOLS is read.
    lib = built["tools"] / "libcounter.so"
    proc = mpi.run(1, [built["apps"]["so"]], env={"QMPI_CONF": "", "TOOLS": str(lib)})
    assert proc.returncode == 0, proc.stderr
    assert sorted(counter_reports(proc.stderr)) == [(1, 0)]
