"""Named stacks and switching: QMPI_CONF's [stack NAME] sections, the
switch sample tool (sample_tools/switch.qmpi) sending calls on small communicators to
another stack, with exact counts on both sides; the chain report; one-line misuse errors.

tests/apps/stacks_app.c, per rank: on MPI_COMM_WORLD 1 Barrier, 2 Bcast, 3 Allreduce; on
its 2-rank sub-communicator 1 Bcast, 2 Allreduce, 1 Barrier.
"""

from __future__ import annotations

import re

import pytest

from conftest import APPS, Mpi, qmpi_errors

pytestmark = pytest.mark.mpi

RANKS = 4


@pytest.fixture(scope="session")
def stacks_app(mpi: Mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"stacks-{mpi.name}")
    return mpi.build_app(APPS / "stacks_app.c", core, out / "stacks_app")


def counter_reports(stdout: str):
    """{(level, rank): {function: count}} from counter's report lines."""
    reports = {}
    for level, rank, items in re.findall(r"counter@(\d+) rank (\d+):(.*)$", stdout, re.M):
        reports[(int(level), int(rank))] = {k: int(v) for k, v in re.findall(r"(MPI_\w+)=(\d+)", items)}
    return reports


def two_stacks(sample_tools, switch_stack="heavy", threshold=RANKS, extra=""):
    return f"""# the application's calls: switch, then the plain counter
[stack default]
instances = switch, plain

[stack heavy]
instances = heavy

[switch]
tool = {sample_tools / "libswitch.so"}
threshold = {threshold}
stack = {switch_stack}

[plain]
tool = {sample_tools / "libcounter.so"}

[heavy]
tool = {sample_tools / "libcounter.so"}
{extra}"""


PLAIN = {
    "MPI_Init": 1,
    "MPI_Comm_rank": 1,
    "MPI_Comm_size": 1,
    "MPI_Barrier": 1,
    "MPI_Bcast": 2,
    "MPI_Allreduce": 3,
    "MPI_Finalize": 1,
}
HEAVY = {"MPI_Init": 1, "MPI_Bcast": 1, "MPI_Allreduce": 2, "MPI_Barrier": 1, "MPI_Finalize": 1}


def test_the_heavy_stack_sees_only_the_small_communicator_calls(mpi, sample_tools, stacks_app, tmp_path):
    conf = tmp_path / "stacks.conf"
    conf.write_text(two_stacks(sample_tools))
    proc = mpi.run(RANKS, [stacks_app], env={"QMPI_CONF": str(conf), "QMPI_VERBOSE": "1"})
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert sorted(re.findall(r"^ok (\d) 6 (\d)$", proc.stdout, re.M)) == [
        ("0", "1"),
        ("1", "1"),
        ("2", "5"),
        ("3", "5"),
    ]
    reports = counter_reports(proc.stderr)
    # levels: 0 default's top, 1 switch, 2 plain, 3 heavy's top, 4 heavy; 5 PMPI
    assert reports == {**{(2, r): PLAIN for r in range(RANKS)}, **{(4, r): HEAVY for r in range(RANKS)}}, proc.stdout
    report = [line for line in proc.stderr.splitlines() if line.startswith("qmpi: ")]
    assert report[0].startswith(f"qmpi: chain: 3 tools from QMPI_CONF={conf};")
    assert report[1] == "qmpi: stack default (top 0, the application's calls): 2 tools"
    assert re.fullmatch(
        r"qmpi: level 1: .*/libswitch\.so, thesis-style, instance 1, intercepts \d+ functions", report[2]
    )
    assert re.fullmatch(
        r"qmpi: level 2: .*/libcounter\.so, thesis-style, instance 1, intercepts \d+ functions", report[3]
    )
    assert report[4] == "qmpi: stack heavy (top 3): 1 tool"
    assert re.fullmatch(
        r"qmpi: level 4: .*/libcounter\.so, thesis-style, instance 2, intercepts \d+ functions", report[5]
    )
    assert re.fullmatch(r"qmpi: level 5: PMPI \(.*\), the end of every stack", report[6])


def test_a_threshold_below_every_communicator_switches_nothing(mpi, sample_tools, stacks_app, tmp_path):
    conf = tmp_path / "stacks.conf"
    conf.write_text(two_stacks(sample_tools, threshold=2))
    proc = mpi.run(RANKS, [stacks_app], env={"QMPI_CONF": str(conf)})
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    every = {**PLAIN, "MPI_Barrier": 2, "MPI_Bcast": 3, "MPI_Allreduce": 5}
    lifecycle = {"MPI_Init": 1, "MPI_Finalize": 1}
    assert counter_reports(proc.stderr) == {
        **{(2, r): every for r in range(RANKS)},
        **{(4, r): lifecycle for r in range(RANKS)},
    }, proc.stdout


def test_a_file_without_stack_sections_is_one_default_stack(mpi, sample_tools, stacks_app, tmp_path):
    conf = tmp_path / "one.conf"
    conf.write_text(f"[a]\ntool = {sample_tools / 'libcounter.so'}\n[b]\ntool = {sample_tools / 'libcounter.so'}\n")
    proc = mpi.run(2, [stacks_app], env={"QMPI_CONF": str(conf), "QMPI_VERBOSE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert {level for level, _ in counter_reports(proc.stderr)} == {1, 2}
    assert "qmpi: stack" not in proc.stderr
    assert re.search(r"^qmpi: level 3: PMPI \(", proc.stderr, re.M) and "every stack" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "[stack default]\ninstances = a, nosuch\n[a]\ntool = {counter}\n",
            "{f}:2: [stack default] instances: no section [nosuch] in the file",
        ),
        (
            "[a]\ntool = {counter}\n[stack default]\n[stack b]\ninstances = a\n",
            "{f}:3: [stack default] has no 'instances = NAME, ...' line",
        ),
        (
            "[stack heavy]\ninstances = a\n[a]\ntool = {counter}\n",
            "{f}:1: [stack heavy] but no [stack default]: with stack sections, [stack default] lists the instances the "
            "application's calls enter",
        ),
        (
            "[a]\ntool = {counter}\n[stack default]\ninstances = a\n[stack b]\ninstances = a\n",
            "{f}:6: [stack b] instances: [a] is already in [stack default] (line 4): an instance is in one stack only "
            "(give the tool a second section for a second instance)",
        ),
        (
            "[a]\ntool = {counter}\n[b]\ntool = {counter}\n[stack default]\ninstances = a\n",
            "{f}:3: [b] is in no stack: name it in the instances = line of a [stack NAME]",
        ),
        (
            "[stack default]\ninstances =\n",
            "{f}:2: [stack default] instances = needs instance names: instances = NAME, NAME, ...",
        ),
        ("[stack default]\ninstances = a,,b\n", "{f}:2: [stack default] instances = a,,b: '' is not an instance name"),
        (
            "[stack default]\ntool = x\n",
            "{f}:2: unknown key 'tool' in [stack default]: a stack has one line, instances = NAME, NAME, ...",
        ),
        (
            "[stack default]\ninstances = a\n[stack default]\n",
            "{f}:3: duplicate stack name 'default' (first at line 1)",
        ),
        (
            "[stack two words]\n",
            "{f}:1: '[stack two words]': a stack name is letters, digits, '_', '-' and '.' ([stack heavy])",
        ),
    ],
)
def test_stack_section_errors_are_one_line_with_file_and_line(mpi, sample_tools, stacks_app, tmp_path, text, message):
    conf = tmp_path / "bad.conf"
    conf.write_text(text.format(counter=sample_tools / "libcounter.so"))
    proc = mpi.run(2, [stacks_app], env={"QMPI_CONF": str(conf)})
    assert proc.returncode != 0
    errors = qmpi_errors(proc.stderr)
    assert errors and set(errors) == {f"qmpi: error: {message.format(f=conf)}"}, proc.stderr
    assert "ok " not in proc.stdout


@pytest.mark.parametrize(
    "stack, why",
    [
        ("nosuch", "no stack of that name (the stacks: default, heavy)"),
        ("default", "the stack this instance is on: the call would come back to it"),
    ],
)
def test_a_switch_to_no_stack_or_its_own_is_one_line(mpi, sample_tools, stacks_app, tmp_path, stack, why):
    conf = tmp_path / "stacks.conf"
    conf.write_text(two_stacks(sample_tools, switch_stack=stack))
    # 2 ranks, as the other run-time errors (the core waits until the launcher has taken
    # the error line before MPI_Abort: errors.c.j2)
    proc = mpi.run(2, [stacks_app], env={"QMPI_CONF": str(conf)})
    assert proc.returncode != 0
    errors = qmpi_errors(proc.stderr)
    assert errors and set(errors) == {f"qmpi: error: {conf}:11: [switch] stack = {stack}: {why}"}, proc.stderr
    assert "ok " not in proc.stdout


# ---- switching from a callback tool (QMPI_Get_stack_function) ----------------------------


@pytest.fixture(scope="session")
def cbswitch(mpi: Mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"cbswitch-{mpi.name}")
    return mpi.compile(
        [APPS.parent / "callback_tools" / "cbswitch.c"],
        out / "libcbswitch.so",
        ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-include", str(core / "qmpi.h")],
    )


def callback_two_stacks(sample_tools, switch_stack="heavy"):
    return f"""[stack default]
instances = cbswitch, plain

[stack heavy]
instances = heavy

[cbswitch]
tool = @cbswitch
threshold = {RANKS}
stack = {switch_stack}

[plain]
tool = {sample_tools / "libcounter.so"}

[heavy]
tool = {sample_tools / "libcounter.so"}
"""


def test_a_callback_tool_switches_small_communicator_calls_to_the_heavy_stack(
    mpi, core, cbswitch, sample_tools, stacks_app, tmp_path
):
    conf = tmp_path / "stacks.conf"
    conf.write_text(callback_two_stacks(sample_tools))
    env = {"QMPI_CONF": str(conf), "LD_PRELOAD": f"{core / 'libqmpi.so'}:{cbswitch}"}
    proc = mpi.run(RANKS, [stacks_app], env=env)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    # the same levels and counts as with the spec switch: its three functions are the
    # ones stacks_app calls on the 2-rank sub-communicators
    assert counter_reports(proc.stderr) == {
        **{(2, r): PLAIN for r in range(RANKS)},
        **{(4, r): HEAVY for r in range(RANKS)},
    }, proc.stdout


@pytest.mark.parametrize(
    "stack, why",
    [
        ("nosuch", "-1 is not a stack's handle (the stacks: default, heavy)"),
        ("default", "tool 1 is on stack default: the call would come back to it"),
    ],
)
def test_a_callback_switch_to_no_stack_or_its_own_is_one_line(
    mpi, core, cbswitch, sample_tools, stacks_app, tmp_path, stack, why
):
    conf = tmp_path / "stacks.conf"
    conf.write_text(callback_two_stacks(sample_tools, switch_stack=stack))
    env = {"QMPI_CONF": str(conf), "LD_PRELOAD": f"{core / 'libqmpi.so'}:{cbswitch}"}
    proc = mpi.run(2, [stacks_app], env=env)
    assert proc.returncode != 0
    handle = -1 if stack == "nosuch" else 0
    # at 2 ranks MPI_COMM_WORLD is below the threshold: the first call, a Barrier, switches
    assert set(qmpi_errors(proc.stderr)) == {
        f"qmpi: error: QMPI_Get_stack_function(1, {handle}, MPI_Barrier): {why}"
    }, proc.stderr
    assert "ok " not in proc.stdout
