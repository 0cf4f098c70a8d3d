#!/usr/bin/env python3
"""`make bench`: what the QMPI core costs per MPI call, against floors measured in the same run.

For one MPI implementation (its mpicc and mpiexec):
  1. times `qmpigen build-core` end to end (median of fresh runs) and `make -j2` of the core;
  2. builds the C side (bench/Makefile): the timed application bench_rank linked five ways,
     a minimal PMPI interposer, the reference chain, and empty tools of every kind;
  3. runs, for several rounds, every configuration in one rank pinned to one CPU:
     direct PMPI, the interposer (with and without -fno-plt), the reference chain, the core
     with 0 tools and with N empty tools via exec_func, the typed next call and the
     callback interface, plus 2-rank ping-pong with 0 and 8 tools; where the MPI has a
     Fortran driver (mpif90.mpich beside mpicc.mpich, ...), MPI_COMM_RANK from Fortran
     through the MPI's own binding and through the core's Fortran entry (bench_rank.f90);
     the named-stack rows (stacks_bench.py): a call switched to a second stack against
     the same call on the tool's next link, and service lookups against the registry's size;
     The tracing rows (trace_bench.py) run with them: a call of each parameter-role mix
     (MPI_Iprobe, MPI_Allreduce, MPI_File_write_at; MPI_Comm_rank without arguments)
     through the trace tool against one empty tool; then a 4-rank traced run is merged
     into OTF2 and JSON, timed; and the trace tool's own instructions per call of each mix,
     counted under valgrind's callgrind (trace_instructions.py: the same run after run);
     the configuration parser's row (conf_bench.py): 100,000 against 10,000 sections;
     the code generation rows (codegen_bench.py; alone with --codegen-only): CPU time of
     build-core and scaffold-tool, wall time of building the sample tools with -j2;
  4. writes results.json, results.md (medians, ratios to the floors, PASS/FAIL per target)
     and ns_per_call.png into the output directory.

    .venv/mpich/bin/python bench/bench.py --mpicc .venv/mpich/bin/mpicc \\
        --mpiexec .venv/mpich/bin/mpiexec --qmpigen .venv/mpich/bin/qmpigen --out build/bench/mpich
    .venv/mpich/bin/python bench/bench.py combine build/bench/*/results.json   # side by side

The stages live in their own modules: measure.py (building, running, samples),
analysis.py (statistics and targets: the results dict), report.py with templates/
(results.md, the combined table, the plot). What each row means and how to read the
ratios: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from analysis import fmt, summarise, verdict
from codegen_bench import codegen_report, measure_codegen
from conf_bench import measure_conf_parse
from measure import (
    BENCH_DIR,
    REPO,
    TOOL_COUNTS,
    Mpi,
    build_configs,
    entry_alignment,
    find_qmpigen,
    fortran_configs,
    library_name,
    loadavg,
    log,
    make_env,
    must,
    pick_cpu,
    prepare_fortran,
    provenance,
    run,
    run_config,
    slug,
    timed,
)
from pmpi_bench import measure_pmpi_loads, pmpi_configs
from report import combine, markdown, plot
from stacks_bench import stacks_configs
from trace_bench import build_baseline, probe_trace_dir, trace_configs
from trace_instructions import LIBRARIES as INSTRUCTION_LIBRARIES
from trace_instructions import measure_trace_instructions
from trace_merge_rows import run_merge_rows, trace_dir_root


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mpicc", default="mpicc", help="the MPI's compiler driver (default: mpicc on PATH)")
    ap.add_argument(
        "--mpiexec", default="mpiexec", help="launcher command, with its flags if any (e.g. 'mpiexec --oversubscribe')"
    )
    ap.add_argument("--qmpigen", default=None, help="qmpigen executable (default: beside this Python, else PATH)")
    ap.add_argument("--name", default="auto", help="label and output subdirectory; auto: from the MPI library")
    ap.add_argument("--out", default=None, help="output directory (default: <out-root>/<name>)")
    ap.add_argument("--out-root", default=str(REPO / "build" / "bench"), help="default: build/bench")
    ap.add_argument("--repeats", type=int, default=3, help="timed samples per process (default 3)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="passes over all configurations, one process each, interleaved; samples are pooled, "
        "so a row's median is over repeats x rounds samples (default 4)",
    )
    ap.add_argument("--min-ms", type=float, default=50.0, help="minimum length of one sample in ms (default 50)")
    ap.add_argument(
        "--tools",
        default=",".join(map(str, TOOL_COUNTS)),
        help=f"tool counts (default {','.join(map(str, TOOL_COUNTS))})",
    )
    ap.add_argument("--cpu", type=int, default=None, help="CPU for single-rank runs (default: the last one allowed)")
    ap.add_argument("--codegen-repeats", type=int, default=5, help="timed `qmpigen build-core` runs (default 5)")
    ap.add_argument(
        "--fortran",
        default="auto",
        help="Fortran rows: auto (the mpif90/mpifort beside --mpicc, if any), none, or a driver",
    )
    ap.add_argument("--quick", action="store_true", help="a smoke run: 3 samples of 5 ms, one round, few tool counts")
    ap.add_argument(
        "--codegen-only",
        action="store_true",
        help="only the code generation rows (build-core, scaffold-tool, the sample tools: codegen_bench.py)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.rounds, args.min_ms, args.codegen_repeats = 3, 1, 5.0, 1
        if args.tools == ",".join(map(str, TOOL_COUNTS)):
            args.tools = "1,8,1000"
    args.counts = sorted({int(x) for x in args.tools.split(",") if x.strip()})
    if any(n < 1 for n in args.counts) or not args.counts:
        ap.error("--tools: positive tool counts")
    if not 1 <= args.repeats <= 64 or args.rounds < 1:
        ap.error("--repeats 1..64, --rounds >= 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "combine":
        print(combine(argv[1:]), end="")
        return 0
    args = parse_args(argv)
    mpiexec = shlex.split(args.mpiexec)
    mpi = Mpi(args.mpicc, mpiexec, make_env(args.mpicc, mpiexec))
    qmpigen = find_qmpigen(args.qmpigen)
    started = time.perf_counter()
    load_start = loadavg()

    commit = provenance(qmpigen)
    if args.codegen_only:
        codegen_rows = measure_codegen(qmpigen, args.mpicc, mpi, args.codegen_repeats)
        print(codegen_report(codegen_rows, fmt, verdict), end="")
        return 0
    # 1. code generation and compilation of the core, timed
    scratch = Path(tempfile.mkdtemp(prefix="qmpi-bench-"))
    try:
        gen = [*qmpigen, "build-core", "--mpi-header", "auto", "--mpicc", args.mpicc, "-o"]
        must(run([*gen, str(scratch / "warm")], mpi.env), "qmpigen build-core")  # warm caches
        name, nfuncs = library_name(scratch / "warm")
        if args.name == "auto":
            args.name = slug(name)
        out = (Path(args.out) if args.out else Path(args.out_root) / args.name).resolve()
        out.mkdir(parents=True, exist_ok=True)
        log(f"{name}: {nfuncs} functions; results in {out}")
        codegen, codegen_cpu = [], []
        for i in range(args.codegen_repeats):
            wall, cpu_s = timed([*gen, str(scratch / f"gen{i}")], mpi.env, "qmpigen build-core")
            codegen.append(wall)
            codegen_cpu.append(cpu_s)
        log(f"qmpigen build-core: median {statistics.median(codegen):.3f} s over {len(codegen)} fresh runs")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    codegen_rows = measure_codegen(qmpigen, args.mpicc, mpi, args.codegen_repeats)
    header_stages = None
    stage_script = BENCH_DIR / "bench_header.py"
    if stage_script.exists():
        proc = run([sys.executable, str(stage_script), "--mpicc", args.mpicc, "--repeat", "3"], mpi.env)
        header_stages = proc.stdout.strip() if proc.returncode == 0 else None

    core = out / "core"
    shutil.rmtree(core, ignore_errors=True)
    must(run([*gen, str(core)], mpi.env), "qmpigen build-core")
    compile_load = loadavg()
    compile_s, compile_cpu = timed(
        ["make", "-C", str(core), "-j2", f"MPICC={args.mpicc}"], mpi.env, "compiling the core"
    )
    log(f"make -j2 of the core: {compile_s:.1f} s ({compile_cpu:.1f} s CPU)")

    # 2. the C side
    bindir = out / "bin"
    must(
        run(
            [
                "make",
                "-C",
                str(BENCH_DIR),
                "-j2",
                f"CORE={core}",
                f"OUT={bindir}",
                f"MPICC={args.mpicc}",
                f"QMPIGEN={shlex.join(qmpigen)}",  # generates the trace tool's wrappers
            ],
            mpi.env,
        ),
        "building the benchmark",
    )
    for short, lib in (
        ("t.so", "libqbtyped.so"),
        ("e.so", "libqbexec.so"),
        ("f.so", "libqbframes.so"),
        ("p.so", "libqbpmpi.so"),
    ):
        link = bindir / short
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(lib)
    fortran = prepare_fortran(args.fortran, args.mpicc, core, bindir, mpi.env)
    no_baseline = build_baseline(bindir, core, args.mpicc, qmpigen, mpi.env)
    if no_baseline:
        log(f"trace rows without the baseline tool: {no_baseline}")

    # 3. the runs, interleaved over rounds
    cpu = pick_cpu(args.cpu)
    log(f"single-rank runs pinned to CPU {cpu}" if cpu is not None else "taskset not found: runs not pinned")
    configs = build_configs(args.counts, bindir, core)
    trace_dir = Path(tempfile.mkdtemp(prefix="qmpi-bench-tracecall-", dir=str(trace_dir_root())))
    configs += trace_configs(trace_dir, baseline=no_baseline is None)  # each run's files removed after it
    configs += pmpi_configs()
    configs += stacks_configs(bindir)
    if fortran["driver"]:
        configs += fortran_configs(core)
    for r in range(args.rounds):
        t0 = time.perf_counter()
        for config in configs:
            for _ in range(config.processes):
                if config.failures:
                    break  # a configuration that failed once is not retried
                run_config(config, mpi, bindir, cpu, args.repeats, args.min_ms)
        log(f"round {r + 1}/{args.rounds}: {time.perf_counter() - t0:.0f} s")
    trace_fs = probe_trace_dir(trace_dir, mib=8 if args.quick else 64)
    shutil.rmtree(trace_dir, ignore_errors=True)
    for config in configs:
        for failure in config.failures:
            log(f"FAILED {config.key}: {failure}")
    trace_merge = run_merge_rows(mpi, bindir, args.quick)
    trace_instructions = measure_trace_instructions(
        mpi, bindir, {name: bindir / file for name, file in INSTRUCTION_LIBRARIES.items()}
    )
    pmpi_loads = measure_pmpi_loads(mpi, bindir, qmpigen, jobs=1 if args.quick else args.rounds)
    conf_parse = measure_conf_parse(mpi, bindir)

    # 4. results
    results = summarise(
        args,
        name,
        nfuncs,
        configs,
        codegen,
        compile_s,
        cpu,
        header_stages,
        fortran,
        trace_merge,
        pmpi_loads,
        conf_parse,
        codegen_rows,
        trace_instructions,
        trace_fs,
    )
    results["codegen_cpu_s"] = codegen_cpu
    results["compile_cpu_s"] = compile_cpu
    results["environment"]["loadavg_at_compile"] = compile_load
    results["environment"]["qmpigen_commit"] = commit
    results["entry_alignment"] = entry_alignment(core / "libqmpi.so")
    results["environment"]["loadavg_start"] = load_start
    results["environment"]["loadavg_end"] = loadavg()
    results["environment"]["wall_s"] = round(time.perf_counter() - started, 1)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "results.md").write_text(markdown(results))
    plotted = plot(results, out / "ns_per_call.png")
    log(f"wrote {out / 'results.json'}, {out / 'results.md'}" + (f", {plotted}" if plotted else " (no plot)"))
    print(markdown(results, brief=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
