"""QMPI_VERBOSE=1 shows the chain once, on world rank 0; QMPI_TOOLS beside the thesis's
TOOLS. On the real MPIs, with a real stack: the generated counter sample (thesis-style)
twice around the hand-written callback tool cbcount."""

from __future__ import annotations

import re

import pytest

from conftest import APPS, qmpi_errors

pytestmark = pytest.mark.mpi

CBCOUNT = APPS.parent / "callback_tools" / "cbcount.c"
LEVEL = re.compile(r"^qmpi: level (\d+): (.*)$", re.M)


@pytest.fixture(scope="session")
def stack_app(mpi, core, tmp_path_factory):
    """The demo app linked with cbcount (constructor registration), and the tool."""
    out = tmp_path_factory.mktemp(f"verbose-{mpi.name}")
    flags = [] if mpi.family == "mpich" else ["-D_GNU_SOURCE", "-include", str(core / "qmpi.h")]
    tool = mpi.compile([CBCOUNT], out / "libcbcount.so", ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", *flags])
    link = ["-rdynamic", "-Wl,--no-as-needed", str(tool), f"-Wl,-rpath,{out}", "-Wl,--as-needed"]
    return mpi.build_app(APPS.parent.parent / "sample_tools" / "demo_app.c", core, out / "demo", link)


def chain_reports(stderr: str):
    return [line[line.index("qmpi: chain:") :] for line in stderr.splitlines() if "qmpi: chain:" in line]


def mpi_identity(core):
    header = (core / "qmpi.h").read_text()
    library = re.search(r'#define QMPI_MPI_LIBRARY "(.*)"', header).group(1)
    enum_hash = re.search(r'#define QMPI_ENUM_HASH "(.*)"', header).group(1)
    return library, enum_hash


def intercepted_by_counter(sample_tools) -> int:
    source = (sample_tools / "generated" / "counter" / "counter.c").read_text()
    return len(re.findall(r'^\s+\[_MPI_\w+\] = "', source, re.M))


def registered_by_cbcount() -> int:
    return len(set(re.findall(r"QMPI_Register_function\(tool_id, (MPI_\w+_T),", CBCOUNT.read_text())))


def test_verbose_prints_the_stack_once(mpi, core, sample_tools, stack_app):
    counter = sample_tools / "libcounter.so"
    proc = mpi.run(3, [stack_app], env={"QMPI_VERBOSE": "1", "QMPI_TOOLS": f"{counter}:@cbcount:{counter}"})
    assert proc.returncode == 0, proc.stderr
    library, enum_hash = mpi_identity(core)
    assert chain_reports(proc.stderr) == [f"qmpi: chain: 3 tools from QMPI_TOOLS; {library}, enumeration {enum_hash}"]
    n_counter, n_cb = intercepted_by_counter(sample_tools), registered_by_cbcount()
    assert n_counter > 0 and n_cb > 0
    levels = [(int(m.group(1)), m.group(2)) for m in LEVEL.finditer(proc.stderr)]
    assert levels == [
        (1, f"{counter}, thesis-style, instance 1, intercepts {n_counter} functions"),
        (2, f"@cbcount, callback, instance 1, intercepts {n_cb} functions"),
        (3, f"{counter}, thesis-style, instance 2, intercepts {n_counter} functions"),
        (4, f"PMPI ({library})"),
    ]
    assert len(re.findall(r"counter@1 rank", proc.stderr, re.M)) == 3  # the stack ran on every rank


def test_verbose_names_both_lists_and_an_empty_chain(mpi, core, sample_tools, stack_app):
    counter = sample_tools / "libcounter.so"
    library, enum_hash = mpi_identity(core)
    proc = mpi.run(2, [stack_app], env={"QMPI_VERBOSE": "yes", "TOOLS": str(counter), "QMPI_TOOL_LIST": "cbcount"})
    assert proc.returncode == 0, proc.stderr
    assert chain_reports(proc.stderr) == [
        f"qmpi: chain: 2 tools from TOOLS and QMPI_TOOL_LIST; {library}, enumeration {enum_hash}"
    ]
    assert [m.group(1) for m in LEVEL.finditer(proc.stderr)] == ["1", "2", "3"]
    proc = mpi.run(2, [stack_app], env={"QMPI_VERBOSE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert chain_reports(proc.stderr) == [
        f"qmpi: chain: no tools listed in QMPI_TOOLS, TOOLS or QMPI_TOOL_LIST; {library}, enumeration {enum_hash}"
    ]
    assert [m.group(2) for m in LEVEL.finditer(proc.stderr)] == [f"PMPI ({library})"]


@pytest.mark.parametrize("verbose", [None, "0", ""])
def test_quiet_unless_asked(mpi, sample_tools, stack_app, verbose):
    env = {"TOOLS": str(sample_tools / "libcounter.so")}
    if verbose is not None:
        env["QMPI_VERBOSE"] = verbose
    proc = mpi.run(2, [stack_app], env=env)
    assert proc.returncode == 0, proc.stderr
    assert "qmpi: chain" not in proc.stderr and "qmpi: level" not in proc.stderr
    assert len(re.findall(r"counter@1 rank", proc.stderr, re.M)) == 2


def test_verbose_in_the_sessions_model(mpi, core, sample_tools, tmp_path):
    """No MPI_Init: the rank comes from the mpi://WORLD process set after MPI_Session_init."""
    if "_MPI_Session_init" not in (core / "qmpi.h").read_text():
        pytest.skip(f"{mpi.name} has no Sessions")
    app = mpi.build_app(APPS / "sessions_only.c", core, tmp_path / "sessions_only")
    proc = mpi.run(3, [app], env={"QMPI_VERBOSE": "1", "QMPI_TOOLS": str(sample_tools / "libcounter.so")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("sessions_only: initialised") == 3
    assert len(chain_reports(proc.stderr)) == 1, proc.stderr
    assert chain_reports(proc.stderr)[0].startswith("qmpi: chain: 1 tool from QMPI_TOOLS; ")


def test_qmpi_tools_wins_over_tools(mpi, sample_tools, stack_app):
    """TOOLS is a generic name other software may set: QMPI_TOOLS, when set at all
    (even empty), is the thesis-style tool list and TOOLS is not read."""
    counter = sample_tools / "libcounter.so"
    stray = "/nonexistent/libnot-a-tool.so"
    proc = mpi.run(2, [stack_app], env={"TOOLS": stray, "QMPI_TOOLS": str(counter)})
    assert proc.returncode == 0, proc.stderr
    assert len(re.findall(r"counter@1 rank", proc.stderr, re.M)) == 2
    proc = mpi.run(2, [stack_app], env={"TOOLS": stray, "QMPI_TOOLS": ""})
    assert proc.returncode == 0, proc.stderr
    assert "counter@" not in proc.stderr
    proc = mpi.run(2, [stack_app], env={"TOOLS": str(counter), "QMPI_TOOLS": stray})
    assert proc.returncode != 0
    errors = set(qmpi_errors(proc.stderr))
    assert len(errors) == 1, proc.stderr
    assert errors.pop().startswith(f"qmpi: error: QMPI_TOOLS entry 1 ({stray}): cannot load: ")
