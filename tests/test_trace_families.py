"""Every family of MPI function through the trace tool (issue 25): tests/apps/trace_families.c
(every function of the PIOsim wrapper's list, one-sided, neighbourhood, persistent and
matched-probe calls) traced at 4 ranks with QMPI_TRACE_FUNCTIONS=all, merged, and read back
with otf2-print, OTF2's own reader:

  * each call is a region holding the events of its kind: messages (Sendrecv: both),
    collectives with their operation, nonblocking collectives, I/O operations with their
    mode (nonblocking ones issued, then completed by a Wait/Test), I/O handles created and
    destroyed, RMA puts, gets and atomics;
  * every request started is completed once (Isend, Irecv, collective, I/O, RMA);
  * every send has its receive (sender, receiver, tag, length);
  * bytes read and written per rank equal the application's own count;
  * summary.txt's calls per rank and function equal the application's own report.

On both wheels (`make test-trace`) and both Debian MPIs (`make test-debian`, marked
`families`)."""

from __future__ import annotations

import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, Tuple

import pytest
from test_trace import _need_trace_tools, otf2_events
from test_trace_families_app import BYTES_PER_CALL, EXPECTED_CALLS, PIOSIM, RANKS, _reports

from conftest import APPS, build_sample_tools, qmpigen

pytestmark = [pytest.mark.mpi, pytest.mark.trace, pytest.mark.families]

COLLECTIVE = {"MPI_COLLECTIVE_BEGIN": 1, "MPI_COLLECTIVE_END": 1}
IO = {"IO_OPERATION_BEGIN": 1, "IO_OPERATION_COMPLETE": 1}
IO_NONBLOCKING = {"IO_OPERATION_BEGIN": 1, "IO_OPERATION_ISSUED": 1}


def _expected_events(name: str) -> Dict[str, int]:
    """The OTF2 events inside one call of `name`, by the family it belongs to (completions
    and persistent starts are counted apart: how many a Wait holds depends on the run)."""
    short = name[4:]
    if short in ("Send", "Bsend", "Rsend", "Ssend"):
        return {"MPI_SEND": 1}
    if short in ("Isend", "Ibsend", "Irsend", "Issend"):
        return {"MPI_ISEND": 1}
    if short in ("Recv", "Mrecv"):
        return {"MPI_RECV": 1}
    if short in ("Irecv", "Imrecv"):
        return {"MPI_IRECV_REQUEST": 1}
    if short in ("Sendrecv", "Sendrecv_replace"):
        return {"MPI_SEND": 1, "MPI_RECV": 1}
    if short.startswith("File_") and ("read" in short or "write" in short):
        return IO_NONBLOCKING if short.startswith(("File_iread", "File_iwrite")) else IO
    if short == "File_open":
        return {"IO_CREATE_HANDLE": 1}
    if short == "File_close":
        return {"IO_DESTROY_HANDLE": 1}
    if short in ("Put", "Get", "Rput", "Rget"):  # completed by the fence after them, or their Wait
        return {f"RMA_{short.lstrip('R').upper()}": 1}
    if short in ("Accumulate", "Get_accumulate", "Fetch_and_op", "Compare_and_swap"):
        return {"RMA_ATOMIC": 1}
    if re.fullmatch(r"I(barrier|bcast|allreduce|reduce|allgather|alltoall|gather|scatter|scan|exscan)", short):
        return {"NON_BLOCKING_COLLECTIVE_REQUEST": 1}
    if short.startswith("Ineighbor_"):
        return {"NON_BLOCKING_COLLECTIVE_REQUEST": 1}
    if (
        short.startswith("Neighbor_")
        or short
        in (
            "Barrier Bcast Gather Gatherv Scatter Scatterv Allgather Allgatherv Alltoall Alltoallv Reduce Allreduce "
            "Reduce_scatter Reduce_scatter_block Scan Exscan"
        ).split()
    ):
        return COLLECTIVE
    return {}


# events written by completing or starting calls (Wait*, Test*, Start*), checked in total
COMPLETING = {
    "MPI_ISEND_COMPLETE",
    "MPI_IRECV",
    "NON_BLOCKING_COLLECTIVE_COMPLETE",
    "IO_OPERATION_COMPLETE",
    "RMA_OP_COMPLETE_NON_BLOCKING",
    "MPI_ISEND",
    "MPI_IRECV_REQUEST",
    "NON_BLOCKING_COLLECTIVE_REQUEST",
}


def _read_archive(archive: Path):
    """Per (rank, function): calls and the events inside them; every event line; totals."""
    events, rank_of = otf2_events(archive)
    inside: Dict[Tuple[int, str], Counter] = defaultdict(Counter)
    calls: Counter = Counter()
    lines: Dict[str, list] = defaultdict(list)
    open_call: Dict[int, str] = {}
    for line in events:
        fields = line.split()
        if len(fields) < 3 or not fields[1].isdigit():
            continue
        location = int(fields[1])
        if fields[0] == "ENTER":
            open_call[location] = re.search(r'Region: "([^"]+)"', line)[1]
            calls[(rank_of[location], open_call[location])] += 1
        elif fields[0] == "LEAVE":
            open_call.pop(location, None)
        else:
            inside[(rank_of[location], open_call.get(location, "?"))][fields[0]] += 1
            lines[fields[0]].append((rank_of[location], open_call.get(location, "?"), line))
    return calls, inside, lines


def _function_sizes(library: Path) -> dict:
    from elftools.elf.elffile import ELFFile

    with library.open("rb") as f:
        table = ELFFile(f).get_section_by_name(".symtab")
        return {s.name: s["st_size"] for s in table.iter_symbols() if s["st_info"]["type"] == "STT_FUNC"}


def _shared_records_tool(mpi, core: Path, sample_tools: Path, work: Path) -> Path:
    """The trace tool built with TRACE_RECORDS=shared (the records out of line, as the
    sanitizer sessions build it) from a copy of the session's build: only the wrappers
    by role are compiled again."""
    tools = work / "tools"
    shutil.copytree(sample_tools, tools)
    build_sample_tools(mpi, core, tools, "TRACE_RECORDS=shared", str(tools / "libtrace.so"))
    return tools


# Both builds of the trace tool's records (sample_tools/trace/record.h): inline in each
# wrapper (as shipped) and shared (TRACE_RECORDS=shared): the same C, the same trace.
@pytest.fixture(scope="module", params=["inline", "shared"])
def traced_families(request, mpi, core, sample_tools, tmp_path_factory):
    _need_trace_tools()
    work = tmp_path_factory.mktemp(f"families-trace-{mpi.name}-{request.param}")
    tools = sample_tools if request.param == "inline" else _shared_records_tool(mpi, core, sample_tools, work)
    # MPI_Comm_dup's record is out of line in both builds (a call made once per object),
    # MPI_Send's only in the shared one: there its wrapper is no bigger than Comm_dup's,
    # inline it is more than twice as big.
    sizes = _function_sizes(tools / "libtrace.so")
    send, dup = sizes["TRACE_ROLES_Send"], sizes["TRACE_ROLES_Comm_dup"]
    assert {"trace_record_prepare_shared", "trace_record_finish_shared"} <= set(sizes)
    assert (send <= dup) if request.param == "shared" else (send > 2 * dup), (send, dup)
    app = mpi.build_app(APPS / "trace_families.c", core, work / "trace_families", ["-Wextra", "-Werror"])
    (work / "data").mkdir()
    env = {"QMPI_TOOLS": f"{tools}/libtrace.so", "QMPI_TRACE_DIR": str(work / "run")}
    proc = mpi.run(RANKS, [app, work / "data"], env={**env, "QMPI_TRACE_FUNCTIONS": "all"}, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reported, io = _reports(proc.stdout)
    out = work / "merged"
    merged = qmpigen("trace", str(work / "run"), "-o", str(out))
    assert merged.returncode == 0, merged.stderr
    assert "qmpigen: " not in merged.stderr.replace("qmpigen: merged", ""), merged.stderr  # no file noted
    return reported, io, out, _read_archive(out / "traces.otf2")


def test_every_call_is_a_region_with_its_kinds_events(traced_families):
    reported, _, _, (calls, inside, _) = traced_families
    for rank in range(RANKS):
        for name, n in reported[rank].items():
            assert calls[(rank, name)] == n, (rank, name)
            expected = Counter({event: count * n for event, count in _expected_events(name).items()})
            got = Counter({event: count for event, count in inside[(rank, name)].items() if event not in COMPLETING})
            want = Counter({event: count for event, count in expected.items() if event not in COMPLETING})
            assert got == want, (rank, name)
            for event in set(expected) & COMPLETING:  # started here, maybe more from others
                assert inside[(rank, name)][event] >= expected[event], (rank, name, event)
    assert {f"MPI_{name}" for name in PIOSIM} <= set(reported[0])


def test_every_request_is_completed_once(traced_families):
    _, _, _, (_, inside, lines) = traced_families
    total = Counter()
    for events in inside.values():
        total.update(events)
    assert total["MPI_ISEND"] == total["MPI_ISEND_COMPLETE"] > 0
    assert total["MPI_IRECV_REQUEST"] == total["MPI_IRECV"] > 0
    assert total["NON_BLOCKING_COLLECTIVE_REQUEST"] == total["NON_BLOCKING_COLLECTIVE_COMPLETE"] > 0
    assert total["IO_OPERATION_ISSUED"] == RANKS * 10  # iread/iwrite, and their _at, _all, _at_all, _shared
    assert total["IO_OPERATION_BEGIN"] == total["IO_OPERATION_COMPLETE"]
    # Rput and Rget in their Waits; Put, Get and the four atomics in the Win_fence after them
    assert total["RMA_OP_COMPLETE_NON_BLOCKING"] == RANKS * 8 and total["RMA_OP_COMPLETE_BLOCKING"] == 0
    assert sum(inside[(rank, "MPI_Win_fence")]["RMA_OP_COMPLETE_NON_BLOCKING"] for rank in range(RANKS)) == RANKS * 6
    assert len(lines["IO_CREATE_HANDLE"]) == len(lines["IO_DESTROY_HANDLE"]) == RANKS * 2


def test_every_send_has_its_receive(traced_families):
    _, _, _, (_, _, lines) = traced_families
    sends, receives = Counter(), Counter()
    for kind, side in (("MPI_SEND", sends), ("MPI_ISEND", sends), ("MPI_RECV", receives), ("MPI_IRECV", receives)):
        for rank, _, line in lines[kind]:
            m = re.search(
                r'(?:Receiver|Sender): \d+ \("rank (\d+) thread \d+" <\d+>\).*Tag: (\d+), Length: (\d+)', line
            )
            key = (rank, int(m[1])) if side is sends else (int(m[1]), rank)
            side[(*key, int(m[2]), int(m[3]))] += 1
    assert sends == receives and sum(sends.values()) > 0


def test_io_bytes_and_modes(traced_families):
    """Bytes per rank and mode as the application counts them (a split collective's at
    its _begin, its _end moving none), on one handle per file and rank."""
    _, io, _, (_, _, lines) = traced_families
    moved: Counter = Counter()
    for rank, name, line in lines["IO_OPERATION_BEGIN"]:
        m = re.search(r"Mode: (\w+), .*Bytes Request: (\d+)", line)
        assert m[1] == ("WRITE" if "write" in name else "READ"), line
        assert int(m[2]) == (0 if name.endswith("_end") else BYTES_PER_CALL), line
        moved[(rank, "written" if m[1] == "WRITE" else "read")] += int(m[2])
    assert moved == Counter({(rank, side): io[rank][side] for rank in range(RANKS) for side in ("read", "written")})


def test_collectives_and_one_sided_carry_their_attributes(traced_families):
    _, _, _, (_, _, lines) = traced_families
    ends = {(name, rank): line for rank, name, line in lines["MPI_COLLECTIVE_END"]}
    assert "Operation: BARRIER" in ends[("MPI_Barrier", 0)] and "Sent: 0, Received: 0" in ends[("MPI_Barrier", 0)]
    for name in ("MPI_Allreduce", "MPI_Alltoall", "MPI_Allgatherv", "MPI_Neighbor_alltoall"):
        m = re.search(r"Operation: (\w+), .*Sent: (\d+), Received: (\d+)", ends[(name, 1)])
        assert int(m[2]) > 0 and int(m[3]) > 0, (name, ends[(name, 1)])
    assert "Operation: ALLTOALL" in ends[("MPI_Neighbor_alltoall", 1)]
    root = re.search(r"Root: (\d+)", ends[("MPI_Bcast", 2)])
    assert root is not None
    for _, _, line in lines["RMA_PUT"] + lines["RMA_GET"] + lines["RMA_ATOMIC"]:
        assert re.search(r'Window: "window \d+".*Remote: \d+.*(Bytes|Sent): [1-9]', line), line
    atomic_types = {name: re.search(r"Type: (\w+)", line)[1] for _, name, line in lines["RMA_ATOMIC"]}
    assert atomic_types["MPI_Compare_and_swap"] == "COMPARE_AND_SWAP"
    assert atomic_types["MPI_Accumulate"] == "ACCUMULATE"
    assert atomic_types["MPI_Fetch_and_op"] == "FETCH_AND_ACCUMULATE"


# Functions an MPI calls by their MPI_ names inside others (ROMIO is written on MPI: Debian's
# MPICH 4.0 frees a keyval in MPI_File_close); the tracer sees them, the application does not.
MPI_INTERNAL = {"MPI_Type_free_keyval"}


def test_summary_counts_are_the_applications(traced_families):
    reported, _, out, _ = traced_families
    summary = Counter()
    for m in re.finditer(r"^\s+rank (\d+)\s+(MPI_\w+)\s+(\d+)\s", (out / "summary.txt").read_text(), re.M):
        summary[(int(m[1]), m[2])] = int(m[3])
    internal = {key for key in summary if key[1] in MPI_INTERNAL and key[1] not in reported[key[0]]}
    assert Counter({key: n for key, n in summary.items() if key not in internal}) == Counter(
        {(rank, name): n for rank in range(RANKS) for name, n in reported[rank].items()}
    )
    assert all(reported[rank] == EXPECTED_CALLS for rank in range(RANKS))
    # the derived datatypes the application builds, with size, lower bound and extent
    shapes = re.findall(r"^  (\w+)\(\S+\s+(\d+)\s+(-?\d+)\s+(\d+): 4 ranks$", (out / "summary.txt").read_text(), re.M)
    assert {shape[0] for shape in shapes} == {"vector", "contiguous", "struct"}
    assert all(int(extent) >= int(size) > 0 for _, size, _, extent in shapes)


def test_the_documented_coverage_is_the_models(mpi):
    """README.md's and docs/tracing.md's tables of what each kind records are generated
    from the roles of the MPICH wheel's functions (the MPI the documentation shows)."""
    if mpi.name != "mpich":
        pytest.skip("the tables show the MPICH wheel")
    pytest.importorskip("numpy")
    from qmpigen.trace import coverage_text

    assert coverage_text.main(["--mpicc", str(mpi.mpicc)]) == 0, f"run `{coverage_text.COMMAND}`"
