#!/usr/bin/env python3
"""Time reading and modelling the full mpi.h (target: <= 2 s end to end for MPICH 5).

End to end: `qmpigen functions --mpi-header auto --mpicc DRIVER > /dev/null` in a fresh
process (interpreter start, imports, two preprocessor runs, parse, model, enumeration,
printing). In process, per stage: preprocess (`mpicc -E` and `mpicc -E -dM`), pycparser
parse, model build (everything in parse_header after the parse) and enumeration.

    .venv/mpich/bin/python bench/bench_header.py --mpicc .venv/mpich/bin/mpicc --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Dict, List

from qmpigen.mpi import parse
from qmpigen.mpi.header import HeaderRequest, read_header
from qmpigen.mpi.select import enumerate_functions

TARGET_S = 2.0


def end_to_end(mpicc: str, mpi_header: str) -> float:
    cmd = [sys.executable, "-m", "qmpigen", "functions", "--mpi-header", mpi_header, "--mpicc", mpicc]
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def stages(mpicc: str, mpi_header: str) -> Dict[str, float]:
    """One in-process run, timing each stage. The pycparser parse is timed by wrapping
    parse._parse, so 'model' is parse_header's own work on the AST."""
    times: Dict[str, float] = {}
    original = parse._parse

    def timed_parse(source):
        start = time.perf_counter()
        try:
            return original(source)
        finally:
            times["pycparser parse"] = time.perf_counter() - start

    start = time.perf_counter()
    pre = read_header(HeaderRequest(mpi_header, mpicc))
    times["preprocess (-E, -E -dM)"] = time.perf_counter() - start

    parse._parse = timed_parse
    try:
        start = time.perf_counter()
        api = parse.parse_header(pre)
        total = time.perf_counter() - start
    finally:
        parse._parse = original
    times["model build"] = total - times["pycparser parse"]

    start = time.perf_counter()
    enumeration = enumerate_functions(api)
    times["enumeration"] = time.perf_counter() - start
    times["in-process total"] = sum(times.values())
    times["_functions"] = len(enumeration)
    times["_label"] = f"{api.facts.implementation} {api.facts.version}"
    return times


def summarise(name: str, samples: List[float]) -> str:
    return f"  {name:<26} median {statistics.median(samples):6.3f} s   min {min(samples):6.3f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mpicc", default="mpicc", help="MPI compiler driver (default: mpicc on PATH)")
    ap.add_argument("--mpi-header", default="auto", help="auto (default) or a path to mpi.h")
    ap.add_argument("--repeat", type=int, default=5, metavar="N", help="runs per measurement (default 5)")
    ap.add_argument("--target", type=float, default=TARGET_S, help=f"end-to-end target in s (default {TARGET_S})")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")

    end_to_end(args.mpicc, args.mpi_header)  # warm the page cache and .pyc files
    wall = [end_to_end(args.mpicc, args.mpi_header) for _ in range(args.repeat)]
    runs = [stages(args.mpicc, args.mpi_header) for _ in range(args.repeat)]

    print(f"{runs[0]['_label']}: {runs[0]['_functions']} functions enumerated; {args.repeat} runs each")
    print("in process:")
    for key in runs[0]:
        if not key.startswith("_"):
            print(summarise(key, [r[key] for r in runs]))
    print("end to end (qmpigen functions > /dev/null):")
    print(summarise("wall clock", wall))
    median = statistics.median(wall)
    verdict = "meets" if median <= args.target else "MISSES"
    print(f"{verdict} the target: median {median:.3f} s vs <= {args.target:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
