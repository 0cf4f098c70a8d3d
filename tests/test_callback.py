"""The MPI Forum / MPICH callback tool interface in the generated core, on real MPIs.

cbcount (tests/callback_tools/cbcount.c) is written by hand to that interface and
includes only <mpi.h>: on MPICH the MPI's own declarations serve; on Open MPI the
core's qmpi.h is force-included (-include qmpi.h)."""

from __future__ import annotations

import re

import pytest

from conftest import APPS, SAMPLE_TOOLS, qmpi_errors

pytestmark = pytest.mark.mpi

CALLBACK_TOOLS = APPS.parent / "callback_tools"


@pytest.fixture(scope="session")
def cbcount(mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"cb-{mpi.name}")
    # Feature macros go on the command line with -include: an mpi.h may include libc headers.
    flags = [] if mpi.family == "mpich" else ["-D_GNU_SOURCE", "-include", str(core / "qmpi.h")]
    return mpi.compile(
        [CALLBACK_TOOLS / "cbcount.c"],
        out / "libcbcount.so",
        ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", *flags],
    )


@pytest.fixture(scope="session")
def cb_apps(mpi, core, cbcount, tmp_path_factory):
    """demo and lifecycle apps: linked with the tool (constructor registration) or plain."""
    out = tmp_path_factory.mktemp(f"cbapps-{mpi.name}")
    tool = ["-Wl,--no-as-needed", str(cbcount), f"-Wl,-rpath,{cbcount.parent}", "-Wl,--as-needed"]
    apps = {}
    for name, source in (("demo", SAMPLE_TOOLS / "demo_app.c"), ("lifecycle", APPS / "lifecycle_app.c")):
        apps[name] = mpi.build_app(source, core, out / f"{name}_with_tool", ["-rdynamic", *tool])
        apps[f"{name}_plain"] = mpi.build_app(source, None, out / f"{name}_plain", ["-rdynamic"])
    return apps


def reports(stdout):
    found = {}
    for m in re.finditer(r"^cbcount@(\d+) rank (\d+): (.*)$", stdout, re.M):
        found[(int(m.group(1)), int(m.group(2)))] = dict(kv.split("=", 1) for kv in m.group(3).split())
    return found


def test_callback_tool_stacked_twice_has_two_instances(mpi, cb_apps):
    proc = mpi.run(2, [cb_apps["demo"]], env={"QMPI_TOOL_LIST": "cbcount:cbcount"})
    assert proc.returncode == 0, proc.stderr
    found = reports(proc.stdout)
    assert set(found) == {(1, 0), (2, 0), (1, 1), (2, 1)}, proc.stdout
    for report in found.values():
        assert report["bcast"] == "1"  # each instance counted once: separate storage
        assert report["site"] == "main"  # the application's call site, not a tool's
        assert report["late_refused"] == "1"  # registration after init refused


def test_mpich_spelling_of_the_tool_list(mpi, cb_apps):
    proc = mpi.run(2, [cb_apps["demo"]], env={"MPIR_CVAR_QMPI_TOOL_LIST": "cbcount"})
    assert proc.returncode == 0, proc.stderr
    assert set(reports(proc.stdout)) == {(1, 0), (1, 1)}


def test_pcontrol_level_and_varargs_reach_callback_tools(mpi, cb_apps):
    proc = mpi.run(2, [cb_apps["lifecycle"]], env={"QMPI_TOOL_LIST": "cbcount:cbcount"})
    assert proc.returncode == 0, proc.stderr
    found = reports(proc.stdout)
    assert len(found) == 4
    # Pcontrol(5, 42, "hello") then Pcontrol(0): the level is the last, the tail the first.
    assert all(r["pcontrol"] == "0,42,hello" for r in found.values()), found
    assert proc.stdout.count("finalized after finalize 1") == 2


def preload(mpi, core, cbcount):
    return {"LD_PRELOAD": f"{core / 'libqmpi.so'}:{cbcount}"}


def test_mixed_chain_thesis_tools_above_a_callback_tool(mpi, core, cbcount, cb_apps, sample_tools):
    """counter:tbcast:@cbcount: the callback tool below TBcast sees Send/Recv, not Bcast."""
    chain = f"{sample_tools / 'libcounter.so'}:{sample_tools / 'libtbcast.so'}:@cbcount"
    proc = mpi.run(3, [cb_apps["demo_plain"]], env={"TOOLS": chain, **preload(mpi, core, cbcount)})
    assert proc.returncode == 0, proc.stderr
    found = reports(proc.stdout)
    assert set(found) == {(3, r) for r in range(3)}
    assert found[(3, 0)]["bcast"] == "0" and found[(3, 0)]["send"] == "2"
    assert found[(3, 1)]["recv"] == "1" and found[(3, 2)]["recv"] == "1"
    assert len(re.findall(r"counter@1 rank \d+:.* MPI_Bcast=1", proc.stderr, re.M)) == 3


def test_mixed_chain_callback_tool_above_thesis_tools(mpi, core, cbcount, cb_apps, sample_tools):
    """@cbcount:tbcast:counter: TBcast (thesis) below the callback tool, counter below."""
    chain = f"@cbcount:{sample_tools / 'libtbcast.so'}:{sample_tools / 'libcounter.so'}"
    proc = mpi.run(3, [cb_apps["demo_plain"]], env={"TOOLS": chain, **preload(mpi, core, cbcount)})
    assert proc.returncode == 0, proc.stderr
    found = reports(proc.stdout)
    assert all(found[(1, r)]["bcast"] == "1" and found[(1, r)]["site"] == "main" for r in range(3)), found
    inner = {int(m.group(1)): m.group(2) for m in re.finditer(r"counter@3 rank (\d+):(.*)$", proc.stderr, re.M)}
    assert "MPI_Send=2" in inner[0] and all("MPI_Recv=1" in inner[r] for r in (1, 2))
    assert all("MPI_Bcast" not in line for line in inner.values())


def test_tools_then_tool_list_form_one_chain(mpi, cb_apps, sample_tools):
    """TOOLS entries come first (levels 1..n), QMPI_TOOL_LIST's tools follow."""
    proc = mpi.run(
        1, [cb_apps["demo"]], env={"TOOLS": str(sample_tools / "libprinter.so"), "QMPI_TOOL_LIST": "cbcount"}
    )
    assert proc.returncode == 0, proc.stderr
    assert "printer@1 pre MPI_Bcast" in proc.stdout
    assert set(reports(proc.stdout)) == {(2, 0)}


def test_unknown_tool_name_stops_the_job(mpi, cb_apps):
    proc = mpi.run(2, [cb_apps["demo"]], env={"QMPI_TOOL_LIST": "cbcount:nosuchtool"}, timeout=60)
    assert proc.returncode != 0
    errors = qmpi_errors(proc.stderr)
    assert errors and all(
        "QMPI_TOOL_LIST entry 2: no callback tool named 'nosuchtool' is registered (registered: cbcount)" in line
        for line in errors
    ), proc.stderr


def test_out_of_range_function_enums_are_refused(mpi, cb_apps):
    proc = mpi.run(1, [cb_apps["demo"]], env={"QMPI_TOOL_LIST": "cbcount", "CBCOUNT_MISBEHAVE": "bad_enum"})
    assert proc.returncode == 0, proc.stderr
    assert "cbcount bad_enum register=1 get=1" in proc.stdout
    assert "QMPI_Register_function(1, 1048576): not a function this core intercepts" in proc.stderr
    assert "QMPI_Get_function(1, -3): not a function this core intercepts" in proc.stderr


def test_pcontrol_at_the_top_of_a_stack_reads_no_unpassed_arguments(mpi, core, cbcount, tmp_path):
    # Review finding: with a callback tool in the chain the core read 13 integer and 8
    # floating-point words of MPI_Pcontrol's tail whatever the caller passed: ASan's
    # stack-buffer-underflow, and SIGSEGV next to a guard page.
    app = mpi.build_app(APPS / "pcontrol_stack_top.c", None, tmp_path / "stack_top")
    proc = mpi.run(2, [app], env={"QMPI_TOOL_LIST": "cbcount", **preload(mpi, core, cbcount)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("pcontrol on a small stack: ok") == 2, proc.stdout
