"""scaffold-tool --interface callback: skeletons for the MPI Forum / MPICH callback
interface (constructor registration, per-instance storage, next pointers cached at
init), compiled with -Wall -Wextra -Werror and run stacked on real MPIs. The fixture-header
tests run the command in this process (conftest.run_cli)."""

from __future__ import annotations

import re
import textwrap

import pytest

from conftest import APPS, FIXTURES, SAMPLE_TOOLS, make, qmpigen, run_cli

SPEC = textwrap.dedent(
    """\
    tool cbs prefix CBS;
    code %{
    #include <stdio.h>
    %}
    context {
        unsigned long long calls[NUM_MPI_FUNCS];
        int pc_level = -1;
        int pc_arg;
    }
    intercept MPI_Bcast, MPI_Send, MPI_Recv {
        before %{ $ctx->calls[$index]++; %}
    }
    intercept MPI_Wtime;
    on pcontrol %{
        $ctx->pc_level = $0;
        if ($0 == 5) $ctx->pc_arg = va_arg(*$va, int);
    %}
    on finalize %{
        int rank = 0;
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        printf("cbs@%d rank %d: bcast=%llu send=%llu recv=%llu pcontrol=%d,%d\\n", $level, rank,
               $ctx->calls[_MPI_Bcast], $ctx->calls[_MPI_Send], $ctx->calls[_MPI_Recv], $ctx->pc_level, $ctx->pc_arg);
        fflush(stdout);
    %}
    """
)
FIXTURE_ARGS = ["--mpi-header", str(FIXTURES / "quirks_mpi.h"), "--mpicc", "cc"]


def test_callback_skeleton_registers_caches_and_has_no_thesis_table(tmp_path):
    proc = run_cli(
        "scaffold-tool",
        "--interface",
        "callback",
        "--name",
        "cbq",
        "--intercept",
        "MPI_Send,MPI_Wtime",
        *FIXTURE_ARGS,
        "-o",
        str(tmp_path / "cbq"),
    )
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "cbq" / "cbq.c").read_text()
    assert 'QMPI_Register_tool_name("cbq", cbq_init)' in text
    assert "QMPI_Register_function(qmpi_level, MPI_SEND_T, (void (*)(void))cbq_Send);" in text
    assert re.search(r"QMPI_Get_function\(qmpi_level, MPI_WTIME_T, .*&qmpi_self->next_Wtime,", text)
    assert "qmpi_self->next_Send(qmpi_context, qmpi_self->next_Send_id, buf," in text
    assert "get_interceptions" not in text and "vector" not in text
    assert "--interface callback" in (tmp_path / "cbq" / "cbq.qmpi").read_text()


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            "tool t;\nintercept MPI_Send { call exec_func; }\n",
            "t.qmpi:2:1: 'call exec_func' is the thesis interface's call",
        ),
        ("tool t;\nintercept MPI_Send { before %{ (void)$v; %} }\n", "t.qmpi:2:38: $v is not available here"),
        # MPICH #defines MPI_Comm_c2f and has no MPI_COMM_C2F_T: nothing to register it with.
        (
            "tool t;\nintercept MPI_Send, MPI_Comm_c2f;\n",
            "t.qmpi:2:21: MPI_Comm_c2f cannot be intercepted by a callback tool",
        ),
    ],
)
def test_callback_only_errors(tmp_path, spec, message):
    (tmp_path / "t.qmpi").write_text(spec)
    proc = run_cli(
        "scaffold-tool", "--interface", "callback", str(tmp_path / "t.qmpi"), *FIXTURE_ARGS, "-o", str(tmp_path / "out")
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_callback_skeleton_takes_every_registrable_function_of_a_glob(tmp_path):
    """A glob or group skips what the MPI's enum lacks (MPICH's *_c2f macros) instead of failing."""
    proc = run_cli(
        "scaffold-tool",
        "--interface",
        "callback",
        "--name",
        "all",
        "--intercept",
        "MPI_*",
        *FIXTURE_ARGS,
        "-o",
        str(tmp_path / "all"),
    )
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "all" / "all.c").read_text()
    assert "MPI_SEND_T" in text and "Comm_c2f" not in text


@pytest.mark.mpi
def test_generated_callback_tools_run_stacked_and_mixed(mpi, core, sample_tools, tmp_path):
    (tmp_path / "cbs.qmpi").write_text(SPEC)
    proc = qmpigen(
        "scaffold-tool",
        "--interface",
        "callback",
        str(tmp_path / "cbs.qmpi"),
        "--mpicc",
        mpi.mpicc,
        "-o",
        str(tmp_path / "cbs"),
        env=mpi.env(),
    )
    assert proc.returncode == 0, proc.stderr
    make(tmp_path / "cbs", f"QMPI_CORE={core}", f"MPICC={mpi.mpicc}", env=mpi.env())
    lib = tmp_path / "cbs" / "libcbs.so"
    demo = mpi.build_app(SAMPLE_TOOLS / "demo_app.c", None, tmp_path / "demo")
    preload = {"LD_PRELOAD": f"{core / 'libqmpi.so'}:{lib}"}

    # @cbs above TBcast and @cbs below it: the outer sees Bcast, the inner Send/Recv.
    chain = f"@cbs:{sample_tools / 'libtbcast.so'}:@cbs"
    run = mpi.run(3, [demo], env={"TOOLS": chain, **preload})
    assert run.returncode == 0, run.stderr
    lines = sorted(line for line in run.stdout.splitlines() if line.startswith("cbs@"))
    assert lines == sorted(
        [f"cbs@1 rank {r}: bcast=1 send=0 recv=0 pcontrol=2,0" for r in range(3)]
        + ["cbs@3 rank 0: bcast=0 send=2 recv=0 pcontrol=2,0"]
        + [f"cbs@3 rank {r}: bcast=0 send=0 recv=1 pcontrol=2,0" for r in (1, 2)]
    ), run.stdout

    # Twice by name; Pcontrol's level and variadic tail reach both instances.
    lifecycle = mpi.build_app(APPS / "lifecycle_app.c", None, tmp_path / "lifecycle")
    run = mpi.run(2, [lifecycle], env={"QMPI_TOOL_LIST": "cbs:cbs", **preload})
    assert run.returncode == 0, run.stderr
    assert sorted(line for line in run.stdout.splitlines() if line.startswith("cbs@")) == sorted(
        f"cbs@{k} rank {r}: bcast=0 send=0 recv=0 pcontrol=0,42" for k in (1, 2) for r in (0, 1)
    )
