"""`qmpigen trace` on hostile and odd rank-file directories, without an MPI job (files
from tests/trace_writer.py, the documented format): each bad file gives one line and
the rest is merged, no traceback, costs that follow the files (not a header's world
size or an id's value), runs never mixed; the fuzz target (tests/trace_fuzz.py) in a
subprocess under an address-space limit, 1,100 members and 8,192 rank files in the slow
tier (`make test-trace` runs them)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("otf2")
pytest.importorskip("matplotlib")

import trace_writer as w  # noqa: E402

from qmpigen.trace import layout, merge  # noqa: E402

# Seconds of merges of crafted traces: in `make test-trace`, not in `make test-fast`.
pytestmark = [pytest.mark.trace, pytest.mark.slow]
HERE = Path(__file__).resolve().parent


def _merge(directory: Path, out: Path):
    lines: list = []
    code = merge.run(directory, out, None, lines.append)
    assert not any("Traceback" in line for line in lines)
    return code, lines


def _file(directory: Path, rank: int, data: bytes, host: str = "node") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"synth_{host}_{rank}_0.L1.qtr"
    path.write_bytes(data)
    return path


def _one_line_for(lines, name: str, *words: str) -> None:
    mine = [line for line in lines if name in line]
    assert len(mine) == 1 and all(word in mine[0] for word in words), lines


def test_short_comm_record_at_end_of_file(tmp_path):
    """An 8-byte COMM record (no room for its fixed part) at the end: struct.error before."""
    w.write_run(tmp_path / "run", 4)
    victim = tmp_path / "run" / "synth_node_2_0.L1.qtr"
    victim.write_bytes(victim.read_bytes() + w.HEAD.pack(w.KIND["COMM"], 8) + b"\0" * 4)
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0
    _one_line_for(lines, victim.name, "corrupt")


@pytest.mark.parametrize("what", ["comm", "function"])
def test_negative_codes(tmp_path, what):
    """A call naming communicator -7, or a FUNCTION record with code -3: IndexError before."""
    w.write_run(tmp_path / "run", 4)
    if what == "comm":
        extra = w.calls(w.np.array([w.CODE["MPI_Barrier"]]), w.np.array([1_000_100]), w.np.array([1_000_200]), -7)
    else:
        extra = w.record("FUNCTION", (-3, 0), layout.BY_NAME["FUNCTION"].layout, b"MPI_Bad\0")
    _file(tmp_path / "run", 1, w.rank_file(1, 4, extra=extra))
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0
    _one_line_for(lines, "synth_node_1_0.L1.qtr", "communicator" if what == "comm" else "function")
    assert "merged 4 trace files" in lines[-1]


def test_comm_id_with_a_flipped_bit_costs_nothing(tmp_path):
    """Communicator 0x40000000 in a call: the merge took minutes and 4.6 GB before."""
    w.write_run(tmp_path / "run", 4)
    extra = w.calls(w.np.array([w.CODE["MPI_Barrier"]]), w.np.array([1_000_100]), w.np.array([1_000_200]), 0x40000000)
    _file(tmp_path / "run", 3, w.rank_file(3, 4, extra=extra))
    started = time.monotonic()
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0 and time.monotonic() - started < 30
    _one_line_for(lines, "synth_node_3_0.L1.qtr", "does not define")


def test_finalize_clock_backwards_and_json_times(tmp_path):
    """A finalize clock record before the init one: OTF2 refused the events, and negative
    times were written as `-530589./((` in trace.json."""
    data = bytearray(w.rank_file(1, 2))
    clock = layout.CLOCK.layout
    at = bytes(data).rfind(w.HEAD.pack(w.KIND["CLOCK"], clock.size) + (1).to_bytes(4, "little"))
    values = list(clock.format.unpack_from(data, at))
    values[3], values[4] = 1, -(10**12)  # local ns before init's; a wild offset
    clock.format.pack_into(data, at, *values)
    _file(tmp_path / "run", 0, w.rank_file(0, 2))
    _file(tmp_path / "run", 1, bytes(data))
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0
    _one_line_for(lines, "synth_node_1_0.L1.qtr", "backwards")
    json.loads((tmp_path / "out" / "trace.json").read_text())
    assert (
        subprocess.run(["otf2-print", str(tmp_path / "out" / "traces.otf2")], capture_output=True).returncode == 0
        if _have_otf2_print()
        else True
    )


def _have_otf2_print() -> bool:
    import shutil

    return shutil.which("otf2-print") is not None


def test_negative_times_are_valid_json():
    from qmpigen.trace import loops, perfetto

    text = perfetto._us(w.np.array([-530_589_123, -5, 0, 1500], w.np.int64)).tolist()
    assert [json.loads(t) for t in text] == [-530589.123, -0.005, 0.0, 1.5]
    if loops.load() is not None:
        import io

        stream = io.BytesIO()
        writer = perfetto.PerfettoWriter(stream)
        args = {name: w.np.zeros(1, w.np.int64) for name in perfetto.ARG_FIELDS}
        writer.slices(
            0,
            0,
            ["MPI_Send"],
            w.np.zeros(1, w.np.int64),
            w.np.array([-530_589_123]),
            w.np.array([-1000]),
            args,
            w.np.zeros(1, w.np.uint8),
        )
        writer.close()
        event = json.loads(stream.getvalue())["traceEvents"][0]
        assert event["ts"] == -530589.123


def test_header_claiming_2_31_ranks(tmp_path):
    """One file whose header says 2^31-1 ranks: 21 GB before the OOM killer; now the
    costs follow the one file, and the missing ranks are one line."""
    _file(tmp_path / "run", 5, w.rank_file(5, 2**31 - 1))
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 2 * 1024 * 1024  # KiB: well under 2 GiB
    assert sum("ranks missing" in line for line in lines) == 1


def test_missing_ranks_are_named(tmp_path):
    w.write_run(tmp_path / "run", 8, ranks=[0, 1, 2, 5, 7])
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0
    assert [line for line in lines if "ranks missing" in line] == [
        "qmpigen: ranks missing: 3 of 8 have no file (3-4, 6); the others merged"
    ]


def test_two_runs_in_one_directory(tmp_path):
    """A new 2-rank run over stale ranks 2-3 of an older 4-rank run: merged silently into
    one 4-rank trace before. The newest run is merged; each other file named."""
    w.write_run(tmp_path / "run", 4, run_id=0xAAAA, realtime=1)
    w.write_run(tmp_path / "run", 2, run_id=0xBBBB, realtime=2)  # over ranks 0-1 of the old run
    # ranks 0-1 of run B (newer), ranks 2-3 of run A: the newest run is merged
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0
    others = [line for line in lines if "other run" in line]
    assert len(others) == 2 and all("_2_0" in line or "_3_0" in line for line in others), lines
    assert "merged 2 trace files" in lines[-1]


def test_same_rank_from_two_hosts(tmp_path):
    """Traceback (internal error) before."""
    w.write_run(tmp_path / "run", 2)
    _file(tmp_path / "run", 1, w.rank_file(1, 2), host="other")
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0
    _one_line_for(lines, "synth_other_1_0.L1.qtr", "again")


def test_rank_killed_before_finalize(tmp_path):
    """No END record: the merge says the rank did not finalize, and summary.txt how it ended."""
    w.write_run(tmp_path / "run", 2)
    _file(tmp_path / "run", 1, w.rank_file(1, 2, end=False))
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0
    _one_line_for(lines, "synth_node_1_0.L1.qtr", "did not finalize (24 calls merged", "summary.txt says how it ended")
    assert "rank 1 thread 0: last call returned: " in (tmp_path / "out" / "summary.txt").read_text()


@pytest.mark.slow  # seconds of merging: `make test-trace`, not `make test-fast`
def test_communicator_of_1100_members(tmp_path):
    """More than 1,021 members overflowed the trace tool's 4,096-byte record (its tail cut); the
    members now span COMM records of COMM_CHUNK each, read back whole."""
    from qmpigen.trace.read import read_rank_file

    path = _file(tmp_path / "run", 0, w.rank_file(0, 1100))
    assert read_rank_file(path).comms[0] == tuple(range(1100))
    w.write_run(tmp_path / "run", 1100, n_calls=4, ranks=range(1, 1100))
    code, lines = _merge(tmp_path / "run", tmp_path / "out")
    assert code == 0 and lines == [lines[-1]] and "merged 1100 trace files" in lines[-1]
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert "busiest by bytes" in summary and len(summary) < 1_000_000  # a 1100 x 1100 matrix: 17 MB


@pytest.mark.slow  # half a minute: `make test-trace`, not `make test-fast`
def test_fuzz_reader_and_merge():
    """tests/trace_fuzz.py: mutated rank files merged; no crash, one line per bad file,
    under a 4 GiB address space and a time bound."""
    iterations = int(os.environ.get("QMPIGEN_TRACE_FUZZ", "60"))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    proc = subprocess.run(
        [sys.executable, str(HERE / "trace_fuzz.py"), str(iterations), "24"],
        capture_output=True,
        text=True,
        timeout=60 + 5 * iterations,
        preexec_fn=limit,
        cwd=HERE.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"fuzz: {iterations} inputs, 0 crashes, 0 multi-line files" in proc.stdout, proc.stdout + proc.stderr[-3000:]


@pytest.mark.slow
def test_8192_rank_files(tmp_path):
    """8,192 synthetic rank files merged (in `make test-trace`): MemoryError before (an 8,192 x 8,192
    matrix), then 4.8 GB; now memory nearly flat in the number of files."""
    w.write_run(tmp_path / "run", 8192, n_calls=24)
    script = (
        "import resource, sys, time; from pathlib import Path; from qmpigen.trace import merge;"
        "t = time.monotonic(); code = merge.run(Path(sys.argv[1]), Path(sys.argv[2]), None, print);"
        "print('seconds', time.monotonic() - t, 'peak_mib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss"
        " / 1024); sys.exit(code)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "run"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "merged 8192 trace files, 196608 calls, 90112 messages" in proc.stdout, proc.stdout
    peak = float(proc.stdout.split("peak_mib")[1])
    print(proc.stdout.splitlines()[-1])
    # measured 253 MiB (33 s) on the 2-core VM, 150 MiB at 2,048 files; 4.8 GB before each
    # file's MPI_COMM_WORLD member list was shared (2.7 GB: files x world size) and each
    # location's OTF2 writer closed after its events (1.9 GB: a chunk per location)
    assert peak < 768
