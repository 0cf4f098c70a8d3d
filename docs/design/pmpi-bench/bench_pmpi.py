#!/usr/bin/env python3
"""Per-call cost of an unmodified PMPI tool layer against a typed thesis-style layer, and
the load time of a PMPI tool (issue 10's targets: <= 2x per layer, <= 50 ms per tool).

    python3 docs/design/pmpi-bench/bench_pmpi.py --mpi .venv/mpich [--rounds 5] [--out build/pmpi-bench]

Builds a core for the MPI of --mpi (its bin/mpicc), rank_loop.c against it, a
pass-through MPI_Comm_rank layer of each kind (typed_layer.c, pmpi_layer.c) and a PMPI
tool wrapping every function of the enumeration (generated from `qmpigen functions
--json`). Runs rank_loop at 1 rank under 0, 1, 2, 4 and 8 layers of each kind, the
configurations interleaved, --rounds times, keeps each one's minimum, and fits ns per
layer (least squares over the layer counts). Load times are the core's own
(QMPI_VERBOSE's "loaded in X ms" per PMPI level): the small tool and the full one, 8
copies each. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "bench"))  # make bench's every-function PMPI tool
from pmpi_bench import full_pmpi_tool  # noqa: E402

LAYERS = (0, 1, 2, 4, 8)


def run(cmd, env=None, cwd=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stdout}{proc.stderr}")
    return proc


def slope(points):
    xs, ys = zip(*points)
    mx, my = statistics.mean(xs), statistics.mean(ys)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpi", required=True, help="the MPI's prefix (its bin/mpicc, bin/mpiexec)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--out", default="build/pmpi-bench")
    a = ap.parse_args()
    mpi = Path(a.mpi).resolve()
    out = Path(a.out).resolve() / mpi.name
    out.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        PATH=f"{mpi / 'bin'}:{os.environ['PATH']}",
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
    )
    env.pop("TOOLS", None)
    env.pop("QMPI_TOOLS", None)
    mpicc, qmpigen = str(mpi / "bin" / "mpicc"), [sys.executable, "-m", "qmpigen"]
    core = out / "core"
    run([*qmpigen, "build-core", "--mpicc", mpicc, "-o", str(core)], env)
    run(["make", "-s", "-j2", "-C", str(core), f"MPICC={mpicc}"], env)
    app = out / "rank_loop"
    run([mpicc, "-O2", str(HERE / "rank_loop.c"), "-o", str(app), f"-L{core}", "-lqmpi", f"-Wl,-rpath,{core}"], env)
    typed, pmpi, full = out / "libtyped_layer.so", out / "libpmpi_layer.so", out / "libpmpi_full.so"
    run([mpicc, "-shared", "-fPIC", "-O2", f"-I{core}", str(HERE / "typed_layer.c"), "-o", str(typed)], env)
    run([mpicc, "-shared", "-fPIC", "-O2", str(HERE / "pmpi_layer.c"), "-o", str(pmpi)], env)
    listing = json.loads(run([*qmpigen, "functions", "--mpicc", mpicc, "--json"], env).stdout)["functions"]
    (out / "pmpi_full.c").write_text(full_pmpi_tool(listing))
    run([mpicc, "-shared", "-fPIC", "-O1", "-w", str(out / "pmpi_full.c"), "-o", str(full)], env)

    def ns(tools):
        proc = run([str(mpi / "bin" / "mpiexec"), "-n", "1", str(app), str(a.calls)], dict(env, TOOLS=tools))
        return float(re.search(r"ns_per_call ([\d.]+)", proc.stdout).group(1))

    configs = {(kind, k): ":".join([str(lib)] * k) for kind, lib in (("typed", typed), ("pmpi", pmpi)) for k in LAYERS}
    best = {c: float("inf") for c in configs}
    for _ in range(a.rounds):
        for c, tools in configs.items():
            best[c] = min(best[c], ns(tools))
    per_layer = {kind: slope([(k, best[(kind, k)]) for k in LAYERS]) for kind in ("typed", "pmpi")}

    loads = {}
    for name, lib in (
        ("pass-through MPI_Comm_rank (1 wrapper)", pmpi),
        (f"every function ({len(listing)} wrappers)", full),
    ):
        times = []
        for _ in range(a.rounds):
            proc = run(
                [str(mpi / "bin" / "mpiexec"), "-n", "1", str(app), "1000"],
                dict(env, TOOLS=":".join([str(lib)] * 8), QMPI_VERBOSE="1"),
            )
            times += [float(t) for t in re.findall(r"loaded in ([\d.]+) ms", proc.stderr)]
        loads[name] = times

    title = run([*qmpigen, "functions", "--mpicc", mpicc], env).stdout.splitlines()[0].lstrip("# ").split(":")[0]
    print(f"## PMPI tool layers on {title}, ns per MPI_Comm_rank (min of {a.rounds} rounds)\n")
    print("| layers | " + " | ".join(str(k) for k in LAYERS) + " | per layer |")
    print("|---|" + "---|" * (len(LAYERS) + 1))
    for kind, label in (("typed", "typed thesis-style (QMPI_Next_)"), ("pmpi", "unmodified PMPI tool")):
        print(f"| {label} | " + " | ".join(f"{best[(kind, k)]:.2f}" for k in LAYERS) + f" | {per_layer[kind]:.2f} ns |")
    print(f"\nPMPI layer / typed layer: {per_layer['pmpi'] / per_layer['typed']:.2f}x (target <= 2x)\n")
    print("| PMPI tool | copies loaded | load time per copy: median | max | target |")
    print("|---|---|---|---|---|")
    for name, times in loads.items():
        print(f"| {name} | {len(times)} | {statistics.median(times):.2f} ms | {max(times):.2f} ms | <= 50 ms |")


if __name__ == "__main__":
    main()
