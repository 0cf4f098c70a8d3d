"""`make bench`'s instruction rows: the instructions a traced call executes in the trace
tool's own code, counted by valgrind's callgrind, for each parameter-role mix of the timed
rows (trace_bench.py), for the tool as shipped, the tool of BASELINE_REV, one empty tool and
the clock tool (bench/tool_clock.c: two tick reads and a record).

Unlike the ns rows, which move by ±25 ns between runs on a shared machine, a count is the
same run after run: it answers "no more than before" exactly, and says where a change in
the ns rows comes from. It is not time (a tick read is one instruction of ~12 ns here).
Each library runs bench/trace_calls.c twice, with N_SHORT and N_LONG calls: the difference
of the instructions counted in the library's object, over N_LONG - N_SHORT, is one call's,
start-up and finalize excluded. Without valgrind the rows say so and nothing fails.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Optional

from measure import Mpi, log, make_env

N_SHORT, N_LONG = 200, 2200
# The libraries counted, in make bench's bin directory (bench/Makefile): name -> file.
LIBRARIES = {
    "empty": "libqbtyped.so",
    "traced": "libqbtrace.so",
    "baseline": "libqbtrace-base.so",
    "clock": "libqbclock.so",
}
MIXES = ("p2p", "collective", "io")  # trace_calls.c's, the timed rows' call of each mix
COST_LINE = re.compile(r"^[0-9+\-*]")


def object_instructions(callgrind_out: Path, library: str) -> int:
    """The instructions executed in `library`'s own code (its object's self cost, inlined
    code included), from a callgrind output file (format: valgrind's docs, "Callgrind
    Format Specification"). Costs of calls (the line after `calls=`) are inclusive, and
    are skipped; names may be compressed to `(id)` after their first use."""
    names: Dict[str, str] = {}
    current, total, skip_next = "", 0, False
    for line in callgrind_out.read_text(errors="replace").splitlines():
        if line.startswith(("ob=", "cob=")):  # one namespace of object names for both
            spec = line.split("=", 1)[1].strip()
            match = re.match(r"\((\d+)\)\s*(.*)", spec)
            name = spec
            if match:
                if match.group(2):
                    names[match.group(1)] = match.group(2)
                name = names.get(match.group(1), "")
            if line.startswith("ob="):
                current = name
        elif line.startswith("calls="):
            skip_next = True
        elif COST_LINE.match(line):
            if skip_next:
                skip_next = False
                continue
            if current == library:
                fields = line.split()
                if len(fields) >= 2 and fields[1].isdigit():
                    total += int(fields[1])
    return total


def measure_trace_instructions(mpi: Mpi, bindir: Path, libraries: Dict[str, Path]) -> Dict[str, object]:
    """{"per_call": {mix: {variant: instructions}}} for each library that exists, or
    {"skipped": why}."""
    valgrind = shutil.which("valgrind")
    app = bindir / "trace_calls"
    if valgrind is None:
        return {"skipped": "valgrind not found (apt-get install valgrind)"}
    if not app.exists():
        return {"skipped": f"{app} was not built"}
    present = {name: path.resolve() for name, path in libraries.items() if path.exists()}
    per_call: Dict[str, Dict[str, Optional[float]]] = {mix: {} for mix in MIXES}
    with tempfile.TemporaryDirectory(prefix="qmpi-bench-instr-") as work:
        for name, library in present.items():
            for mix in MIXES:
                counts = []
                for n in (N_SHORT, N_LONG):
                    run_dir = Path(work) / f"{name}-{mix}-{n}"
                    run_dir.mkdir()
                    out = run_dir / "callgrind.out"
                    env = {**mpi.env, "TOOLS": str(library), "QMPI_TRACE_DIR": str(run_dir)}
                    proc = subprocess.run(
                        [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", str(app), str(n), mix]
                        + [str(run_dir / "io.dat")],
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=600,
                    )
                    if proc.returncode != 0 or not out.exists():
                        log(f"instruction rows: {name} {mix} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
                        counts = []
                        break
                    counts.append(object_instructions(out, str(library)))
                per_call[mix][name] = (counts[1] - counts[0]) / (N_LONG - N_SHORT) if counts else None
    log(
        "instructions per traced call: "
        + "; ".join(
            f"{mix} " + ", ".join(f"{k} {v:.0f}" for k, v in row.items() if v is not None)
            for mix, row in per_call.items()
        )
    )
    return {"per_call": per_call, "calls": [N_SHORT, N_LONG]}


def instruction_targets(rows: Optional[Dict[str, object]], target, fmt, baseline_rev: str) -> None:
    """Per mix: the shipped tool's instructions against the baseline's (issue 33: no more
    than before), through analysis.summarise's `target`."""
    if not rows:
        return
    if "skipped" in rows:
        target("tracing, instructions per traced call (callgrind)", "not measured", "", None, str(rows["skipped"]))
        return
    per_call = rows["per_call"]
    assert isinstance(per_call, dict)
    for mix, row in per_call.items():
        shipped, base, empty, clock = row.get("traced"), row.get("baseline"), row.get("empty"), row.get("clock")
        target(
            f"tracing, {mix}: the trace tool's own instructions per traced call (callgrind), "
            f"as shipped against the tool at {baseline_rev}",
            f"{fmt(shipped, 0)} vs {fmt(base, 0)} (one empty tool: {fmt(empty, 0)}"
            + ("" if clock is None else f"; two tick reads and a record, bench/tool_clock.c: {fmt(clock, 0)}")
            + ")",
            f"≤ the tool at {baseline_rev}",
            None if shipped is None or base is None else shipped <= base,
        )


if __name__ == "__main__":
    import argparse
    import json

    ap = argparse.ArgumentParser(description="the instruction rows alone, on a built bench directory")
    ap.add_argument("bindir", type=Path, help="make bench's bin directory (trace_calls, t.so, libqbtrace*.so)")
    ap.add_argument("libraries", nargs="*", help="more NAME=PATH libraries to count")
    ap.add_argument("--mpicc", default="mpicc", help="the MPI's compiler driver (its directory goes first on PATH)")
    args = ap.parse_args()
    libs = {name: args.bindir / file for name, file in LIBRARIES.items()}
    libs.update({k: Path(v) for k, v in (item.split("=", 1) for item in args.libraries)})
    mpi = Mpi(args.mpicc, ["mpiexec"], make_env(args.mpicc, ["mpiexec"]))
    print(json.dumps(measure_trace_instructions(mpi, args.bindir, libs), indent=1))
