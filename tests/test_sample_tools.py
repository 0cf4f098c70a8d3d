"""Every sample tool in sample_tools/ is built (`make -C sample_tools`, which generates
the spec tools with qmpigen scaffold-tool) and run, on every MPI, so samples cannot rot.

Spec tools: empty.qmpi (pass-through, every function), counter.qmpi (the build-core
issue's counter, now generated), profiler.qmpi (mpiP-like), virtual.qmpi (MPI
virtualization: tests/test_virtual.py), reqtrack.qmpi and reqcheck.qmpi (services
between tools: tests/test_services.py), limit_threading.qmpi (the stack's thread level:
tests/test_thread_limit.py), switch.qmpi (named stacks: tests/test_stacks.py). Hand-written: printer.c,
tbcast.c, trace/ (its rank files go to tmp_path). The profiler around TBcast reproduces the thesis's figures 4.8-4.9.
"""

from __future__ import annotations

import re

import pytest

from conftest import APPS, SAMPLE_TOOLS, build_sample_tools

pytestmark = pytest.mark.mpi

# spec tools, hand-written single files, and tools with a folder of their own (trace/)
SAMPLES = (
    sorted(p.stem for p in SAMPLE_TOOLS.glob("*.qmpi"))
    + sorted(p.stem for p in SAMPLE_TOOLS.glob("*.c") if p.stem != "demo_app")
    + sorted(p.name for p in SAMPLE_TOOLS.iterdir() if p.is_dir() and (p / "lifecycle.c").exists())
)


def app_lines(stdout: str):
    return sorted(line for line in stdout.splitlines() if line.startswith("app rank"))


def expected_app(ranks: int):
    return [f"app rank {r} of {ranks}: data 11 22 33 {ranks} wtime_ok 1" for r in range(ranks)]


def chain(tools, *names):
    return ":".join(str(tools / f"lib{n}.so") for n in names)


def test_the_samples_are_the_ones_we_know():
    assert SAMPLES == [
        "counter",
        "empty",
        "limit_threading",
        "profiler",
        "reqcheck",
        "reqtrack",
        "switch",
        "virtual",
        "printer",
        "tbcast",
        "trace",
    ]


def test_other_flags_rebuild_the_tools_and_quotes_in_them_hold(mpi, core, tmp_path):
    """sample_tools/Makefile remembers the flags it built with (`make CFLAGS='-O2 -g'`
    after a default build rebuilds), and passes flags with quotes whole to the spec tools'
    own Makefiles."""
    targets = [str(tmp_path / "libprinter.so"), str(tmp_path / "libcounter.so")]

    def built(cflags):
        build_sample_tools(mpi, core, tmp_path, f"CFLAGS={cflags}", *targets)
        return [(tmp_path / name).stat().st_mtime_ns for name in ("libprinter.so", "libcounter.so")]

    first = built("-O1 -DQMPI_TEST_FLAG='a b'")
    assert built("-O1 -DQMPI_TEST_FLAG='a b'") == first  # the same flags: nothing to do
    second = built("-O2")
    assert all(new > old for new, old in zip(second, first))


@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_tool_is_built_and_runs_alone(mpi, demo_app, sample_tools, name, tmp_path):
    assert (sample_tools / f"lib{name}.so").exists()
    # tools that write files (trace: QMPI_TRACE_DIR, default ./qmpi-trace) write them under tmp_path
    env = {"TOOLS": chain(sample_tools, name), "QMPI_TRACE_DIR": str(tmp_path / "trace")}
    if name == "switch":  # it needs a stack to switch to (tests/test_stacks.py): a configuration file
        conf = tmp_path / "switch.conf"
        conf.write_text(
            f"[stack default]\ninstances = switch\n[stack side]\ninstances = count\n"
            f"[switch]\ntool = {sample_tools / 'libswitch.so'}\nstack = side\n"
            f"[count]\ntool = {sample_tools / 'libcounter.so'}\n"
        )
        env = {"QMPI_CONF": str(conf)}
    proc = mpi.run(2, [demo_app], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    if name == "virtual":  # it keeps the last rank for itself (tests/test_virtual.py)
        assert app_lines(proc.stdout) == expected_app(1)
        assert re.search(r"^virtual@1 server 1: 1 application ranks, \d+ MPI calls$", proc.stdout, re.M), proc.stdout
        return
    assert app_lines(proc.stdout) == expected_app(2)
    if name == "trace":
        assert sorted(p.name.split("_")[-2] for p in (tmp_path / "trace").glob("*.L1.*qtr")) == ["0", "1"]


def test_generated_counter_reports_like_the_hand_written_one(mpi, demo_app, sample_tools):
    """Same line format, one line per instance and rank, counting what it intercepts."""
    proc = mpi.run(1, [demo_app], env={"TOOLS": chain(sample_tools, "counter")})
    assert proc.returncode == 0, proc.stderr
    reports = [line[line.index("counter@") :] for line in proc.stderr.splitlines() if "counter@" in line]
    assert reports == [
        "counter@1 rank 0: MPI_Barrier=1 MPI_Bcast=1 MPI_Comm_rank=1 MPI_Comm_size=1 MPI_Finalize=1 MPI_Init=1"
    ]


def counter_reports(stdout):
    reports = {}
    for match in re.finditer(r"counter@(\d+) rank (\d+):(.*)$", stdout, re.M):
        reports[(int(match.group(1)), int(match.group(2)))] = dict(
            (k, int(v)) for k, v in (item.split("=") for item in match.group(3).split())
        )
    return reports


def test_counter_tbcast_counter(mpi, demo_app, sample_tools):
    proc = mpi.run(3, [demo_app], env={"TOOLS": chain(sample_tools, "counter", "tbcast", "counter")})
    assert proc.returncode == 0, proc.stderr
    reports = counter_reports(proc.stderr)
    for r in range(3):
        assert reports[(1, r)] == {
            "MPI_Barrier": 1,
            "MPI_Bcast": 1,
            "MPI_Comm_rank": 1,
            "MPI_Comm_size": 1,
            "MPI_Finalize": 1,
            "MPI_Init": 1,
        }
        inner = {"MPI_Barrier": 1, "MPI_Comm_rank": 2, "MPI_Comm_size": 2, "MPI_Finalize": 1, "MPI_Init": 1}
        inner.update({"MPI_Send": 2} if r == 0 else {"MPI_Recv": 1})
        # The app's own Comm_rank/Comm_size plus TBcast's; the reports' rank ($rank) costs
        # no MPI call, so the inner instance counts nothing of the outer one's report.
        assert reports[(3, r)] == inner


def test_tbcast_replaces_only_the_broadcasts_it_implements_exactly(mpi, core, sample_tools, tmp_path):
    """tests/apps/bcast_cases.c at 4 ranks under counter:tbcast:counter: the data of each
    case is right and the job exits 0. TBcast replaces the broadcasts on MPI_COMM_WORLD
    (after a message of the same tag, of a vector type, of count 0); the two over an
    intercommunicator (MPI_ROOT, MPI_PROC_NULL, a remote root) and the one from a root
    out of range (the MPI's MPI_ERR_ROOT) reach the inner counter as MPI_Bcast. On MPI 4
    it replaces MPI_Bcast_c as well (the case "large")."""
    app = mpi.build_app(APPS / "bcast_cases.c", core, tmp_path / "bcast_cases")
    env = {"TOOLS": chain(sample_tools, "counter", "tbcast", "counter"), "QMPI_VERBOSE": "1"}
    proc = mpi.run(4, [app], env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    functions = "2 functions" if "_MPI_Bcast_c" in (core / "qmpi.h").read_text() else "1 function"
    assert f"libtbcast.so, thesis-style, instance 1, intercepts {functions}\n" in proc.stderr, proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("bcast_cases")) == [
        f"bcast_cases {r}: ok" for r in range(4)
    ], proc.stdout
    reports = counter_reports(proc.stderr)
    for r in range(4):
        assert reports[(1, r)]["MPI_Bcast"] == 6 and reports[(3, r)]["MPI_Bcast"] == 3, reports


def profiler_reports(stdout):
    """{(level, rank): {function: (calls, seconds, bytes)}} and the header lines."""
    tables, headers = {}, {}
    for match in re.finditer(r"^profiler@(\d+) rank (\d+):   (MPI_\w+) +(\d+) +([\d.]+) +(\d+)$", stdout, re.M):
        key = (int(match.group(1)), int(match.group(2)))
        tables.setdefault(key, {})[match.group(3)] = (int(match.group(4)), float(match.group(5)), int(match.group(6)))
    for match in re.finditer(r"^profiler@(\d+) rank (\d+): (\d+ functions, .*)$", stdout, re.M):
        headers[(int(match.group(1)), int(match.group(2)))] = match.group(3)
    return tables, headers


def test_profiler_around_tbcast_reports_differently_in_its_two_instances(mpi, demo_app, sample_tools):
    """Thesis 4.5.3, figures 4.8-4.9: the first instance reports MPI_Bcast, the second
    the MPI_Send (root) and MPI_Recv (others) of TBcast, with their bytes."""
    ranks = 3
    proc = mpi.run(ranks, [demo_app], env={"TOOLS": chain(sample_tools, "profiler", "tbcast", "profiler")})
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == expected_app(ranks)
    tables, headers = profiler_reports(proc.stdout)
    assert set(tables) == {(level, r) for level in (1, 3) for r in range(ranks)}
    for r in range(ranks):
        outer, inner = tables[(1, r)], tables[(3, r)]
        assert outer["MPI_Bcast"][0] == 1 and outer["MPI_Bcast"][2] == 16  # 4 MPI_INTs
        assert "MPI_Send" not in outer and "MPI_Recv" not in outer
        assert "MPI_Bcast" not in inner
        if r == 0:
            assert inner["MPI_Send"][0] == ranks - 1 and inner["MPI_Send"][2] == 16 * (ranks - 1)
            assert "MPI_Recv" not in inner
        else:
            assert inner["MPI_Recv"][0] == 1 and inner["MPI_Recv"][2] == 16
            assert "MPI_Send" not in inner
        assert outer["MPI_Comm_rank"][0] == 1 and inner["MPI_Comm_rank"][0] == 2
        for table in (outer, inner):
            assert table["MPI_Barrier"][0] == 1 and table["MPI_Wtime"][0] == 2 and table["MPI_Pcontrol"][0] == 1
            assert table["MPI_Init"] == (1, 0.0, 0)  # before MPI is up: counted, not timed
            assert all(seconds >= 0.0 for _, seconds, _ in table.values())
        assert headers[(1, r)].endswith("pcontrol level 2") and headers[(3, r)].endswith("pcontrol level 2")


def test_profiler_writes_one_file_per_instance_and_rank(mpi, demo_app, sample_tools, tmp_path):
    prefix = tmp_path / "prof"
    proc = mpi.run(
        2,
        [demo_app],
        env={"TOOLS": chain(sample_tools, "profiler", "profiler"), "PROFILER_OUTPUT": str(prefix)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "profiler@" not in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prof.1.0", "prof.1.1", "prof.2.0", "prof.2.1"]
    text = (tmp_path / "prof.2.1").read_text()
    assert text.startswith("profiler@2 rank 1: ") and "MPI_Bcast" in text


def test_empty_tool_stacked_around_printer(mpi, demo_app, sample_tools):
    """The pass-through tool intercepts everything and changes nothing: the printer
    between two instances sees the app's calls at level 2."""
    proc = mpi.run(1, [demo_app], env={"TOOLS": chain(sample_tools, "empty", "printer", "empty")})
    assert proc.returncode == 0, proc.stderr
    events = [line for line in proc.stdout.splitlines() if line.startswith("printer@")]
    assert events[:2] == ["printer@2 pre MPI_Init", "printer@2 post MPI_Init"]
    assert "printer@2 MPI_Pcontrol level 2" in events
    assert app_lines(proc.stdout) == expected_app(1)


def test_sessions_only_program_reports_each_rank_once(mpi, core, sample_tools, tmp_path):
    """Issue 13: a sessions-only program has no MPI_COMM_WORLD to ask (Open MPI answered
    rank 0 on every rank, and both ranks wrote one PROFILER_OUTPUT file). $rank comes
    from the mpi://WORLD process set; report files are created exclusively."""
    if "_MPI_Session_init" not in (core / "qmpi.h").read_text():
        pytest.skip(f"{mpi.name} has no Sessions (MPI < 4.0)")
    app = mpi.build_app(APPS / "sessions_world.c", core, tmp_path / "sessions_world")
    prefix = tmp_path / "out" / "prof"
    prefix.parent.mkdir()
    env = {"TOOLS": chain(sample_tools, "counter", "profiler"), "PROFILER_OUTPUT": str(prefix)}
    proc = mpi.run(2, [app], env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("app rank")) == [
        "app rank 0 of 2: data 42",
        "app rank 1 of 2: data 42",
    ]
    assert sorted(counter_reports(proc.stderr)) == [(1, 0), (1, 1)]
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["prof.2.0", "prof.2.1"]
    for rank in (0, 1):
        text = (prefix.parent / f"prof.2.{rank}").read_text()
        assert {line.split(":")[0] for line in text.splitlines()} == {f"profiler@2 rank {rank}"}
        assert re.search(r"^profiler@2 rank \d:   MPI_Bcast +1 ", text, re.M)

    # Again, with the files there: never overwritten; one line each, the report on stdout.
    proc = mpi.run(2, [app], env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(line.strip() for line in proc.stderr.splitlines() if "profiler: error:" in line) == [
        f"profiler: error: cannot create {prefix}.2.{rank}: File exists (PROFILER_OUTPUT files are never "
        "overwritten); the report goes to stdout"
        for rank in (0, 1)
    ]
    assert sorted(profiler_reports(proc.stdout)[1]) == [(2, 0), (2, 1)]
