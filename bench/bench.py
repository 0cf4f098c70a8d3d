#!/usr/bin/env python3
"""`make bench`: what the QMPI core costs per MPI call, against floors measured in the same run.

For one MPI implementation (its mpicc and mpiexec):
  1. times `qmpigen build-core` end to end (median of fresh runs) and `make -j2` of the core;
  2. builds the C side (bench/Makefile): the timed application bench_rank linked five ways,
     a minimal PMPI interposer, the reference chain, and empty tools of every kind;
  3. runs, for several rounds, every configuration in one rank pinned to one CPU:
     direct PMPI, the interposer (with and without -fno-plt), the reference chain, the core
     with 0 tools and with N empty tools via exec_func, the typed next call and the
     callback interface, plus 2-rank ping-pong with 0 and 8 tools;
  4. writes results.json, results.md (medians, ratios to the floors, PASS/FAIL per target)
     and ns_per_call.png into the output directory.

    .venv/mpich/bin/python bench/bench.py --mpicc .venv/mpich/bin/mpicc \\
        --mpiexec .venv/mpich/bin/mpiexec --qmpigen .venv/mpich/bin/qmpigen --out build/bench/mpich
    .venv/mpich/bin/python bench/bench.py combine build/bench/*/results.json   # side by side

What each row means and how to read the ratios: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
TOOL_COUNTS = (1, 2, 4, 8, 16, 64, 1000, 10000)
# Extra chain lengths for the reference chain only (cheap, one process): they show how
# the table geometry behaves between the tool counts above.
REF_EXTRA_LEVELS = (32, 128, 256, 512)
PINGPONG_SIZES = (0, 1024)
PINGPONG_TOOLS = 8
RUN_TIMEOUT_S = 600

# Targets of issue 6 (this machine: 2 cores).
TARGET_CORE0_OVER_INTERPOSER_NS = 0.5
TARGET_RATIO = {"typed": 1.5, "callback": 1.5, "exec": 4.0}
TARGET_LINEAR_MARGINAL = 1.5  # marginal ns/layer 1,000 -> 10,000 vs the fitted slope
TARGET_BYTES_PER_FUNCTION = 24
DESIGNED_BYTES_PER_FUNCTION = 16  # one cell (function pointer + level) per function
TARGET_CODEGEN_S = 2.0
TARGET_COMPILE_S = 45.0

# Variants of "the core with N tools": how the tools call the next link.
VARIANTS = {
    "exec": "exec_func (QMPI_TABLE_QUERY + EXEC_FUNC)",
    "typed": "typed next call (QMPI_Next_Comm_rank)",
    "callback": "callback, next cached per instance at init",
}
# Supplementary variants: not targets, they explain the numbers.
EXTRA_VARIANTS = {
    "frames": "typed, tool keeps its frame (no tail call)",
    "callback-storage": "callback, next found via QMPI_Get_tool_storage per call",
}


# ---- running things ---------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[bench] {message}", flush=True)


@dataclass
class Mpi:
    mpicc: str
    mpiexec: List[str]
    env: Dict[str, str]


def make_env(mpicc: str, mpiexec: Sequence[str]) -> Dict[str, str]:
    env = dict(os.environ)
    dirs = [str(Path(shutil.which(mpicc) or mpicc).resolve().parent)]
    launcher = shutil.which(mpiexec[0]) or mpiexec[0]
    dirs.append(str(Path(launcher).resolve().parent))
    env["PATH"] = os.pathsep.join(dict.fromkeys(dirs + [env.get("PATH", "")]))
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    for name in ("TOOLS", "QMPI_TOOL_LIST", "MPIR_CVAR_QMPI_TOOL_LIST", "LD_PRELOAD"):
        env.pop(name, None)
    return env


def run(cmd: Sequence[str], env: Dict[str, str], cwd: Optional[Path] = None, quiet: bool = True,
        timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not quiet:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
    return proc


def must(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    if proc.returncode != 0:
        raise SystemExit(f"bench: {what} failed (exit {proc.returncode})")
    return proc


def timed(cmd: Sequence[str], env: Dict[str, str], what: str, cwd: Optional[Path] = None) -> Tuple[float, float]:
    """Wall-clock seconds and CPU seconds (user + system, all child processes) of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    must(run(cmd, env, cwd=cwd), what)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def loadavg() -> Optional[List[float]]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None


# ---- measurements ------------------------------------------------------------------------


@dataclass
class Config:
    """One process to run: a binary, its arguments, tool list, ranks."""

    key: str                 # e.g. "typed/64", "direct", "ref", "pingpong/core+8typed"
    binary: str
    args: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    ranks: int = 1
    pin: bool = True
    repeats_factor: int = 1  # more samples per process (paired comparisons)
    samples: Dict[str, List[float]] = field(default_factory=dict)   # measurement key -> ns
    wall: Dict[str, List[float]] = field(default_factory=dict)      # the same, wall-clock means
    info: Dict[str, dict] = field(default_factory=dict)              # measurement key -> last JSON
    failures: List[str] = field(default_factory=list)
    seconds: float = 0.0


ENTRY_LABELS = ("direct", "interposer", "interposer-plt", "core")


def tool_list(name: str, count: int) -> str:
    return ":".join([name] * count)


def build_configs(counts: Sequence[int], bindir: Path, core: Path) -> List[Config]:
    levels = ",".join(str(n) for n in sorted({0, *counts, *REF_EXTRA_LEVELS}))
    libs = ",".join(str(p) for p in (bindir / "libqbinterp.so", bindir / "libqbinterpplt.so", core / "libqmpi.so"))
    configs = [
        Config("entry", "bench_direct", ["entry", "--libs", libs], repeats_factor=2),
        Config("direct", "bench_direct", ["rank"]),
        Config("interposer", "bench_interp", ["rank"]),
        Config("interposer-plt", "bench_interp_plt", ["rank"]),
        Config("core/0", "bench_core", ["rank"]),
        Config("ref", "bench_direct", ["ref", "--levels", levels]),
    ]
    # Short names keep TOOLS under the kernel's 128 KiB limit for one variable at 10,000.
    thesis = {"typed": "./t.so", "exec": "./e.so", "frames": "./f.so"}
    callback = {"callback": "qbcb", "callback-storage": "qbcbs"}
    for n in counts:
        for variant, path in thesis.items():
            layout = "frames" if variant == "frames" else "compact"
            args = ["rank", "--pair-ref", str(n), "--pair-layout", layout]
            configs.append(Config(f"{variant}/{n}", "bench_core", args, {"TOOLS": tool_list(path, n)}))
        for variant, name in callback.items():
            configs.append(Config(f"{variant}/{n}", "bench_core_cb", ["rank", "--pair-ref", str(n)],
                                  {"QMPI_TOOL_LIST": tool_list(name, n)}))
    sizes = ",".join(str(s) for s in PINGPONG_SIZES)
    pp = ["pingpong", "--sizes", sizes]
    configs += [
        Config("pingpong/direct", "bench_direct", pp, ranks=2, pin=False),
        Config("pingpong/core+0", "bench_core", pp, ranks=2, pin=False),
        Config(f"pingpong/core+{PINGPONG_TOOLS}typed", "bench_core", pp,
               {"TOOLS": tool_list("./t.so", PINGPONG_TOOLS)}, ranks=2, pin=False),
        Config(f"pingpong/core+{PINGPONG_TOOLS}callback", "bench_core_cb", pp,
               {"QMPI_TOOL_LIST": tool_list("qbcb", PINGPONG_TOOLS)}, ranks=2, pin=False),
    ]
    return configs


def measurement_key(config: Config, record: dict) -> str:
    kind = record["kind"]
    if kind == "ref":
        return f"ref-{record['layout']}/{record['arg']}"
    if kind == "pair-ref":
        return f"pair-ref/{config.key}"
    if kind == "entry":
        return f"entry/{ENTRY_LABELS[record['arg']]}"
    if kind == "pingpong":
        return f"{config.key}/{record['arg']}B"
    return config.key


def run_config(config: Config, mpi: Mpi, bindir: Path, cpu: Optional[int], repeats: int, min_ms: float) -> None:
    cmd = [*mpi.mpiexec, "-n", str(config.ranks)]
    if config.pin and cpu is not None:
        cmd += ["taskset", "-c", str(cpu)]
    cmd += [f"./{config.binary}", *config.args, "--repeats", str(repeats * config.repeats_factor),
            "--min-ms", str(min_ms)]
    env = dict(mpi.env)
    env.update(config.env)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=bindir, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        config.failures.append(f"timed out after {RUN_TIMEOUT_S} s")
        return
    finally:
        config.seconds += time.perf_counter() - start
    records = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if proc.returncode != 0 or not records:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        config.failures.append(f"exit {proc.returncode}: " + " | ".join(tail))
        return
    for record in records:
        key = measurement_key(config, record)
        config.samples.setdefault(key, []).extend(record["samples_ns"])
        config.wall.setdefault(key, []).extend(record.get("wall_ns", []))
        config.info[key] = record


# ---- statistics ------------------------------------------------------------------------------


def quartiles(samples: Sequence[float]) -> Tuple[float, float]:
    if len(samples) < 2:
        return samples[0], samples[0]
    q = statistics.quantiles(samples, n=4)
    return q[0], q[2]


def fit_slope(points: Sequence[Tuple[float, float]]) -> Optional[float]:
    """Least-squares slope of y against x."""
    if len(points) < 2:
        return None
    mx = statistics.fmean(p[0] for p in points)
    my = statistics.fmean(p[1] for p in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def fmt(value: Optional[float], digits: int = 2) -> str:
    if value is None:
        return "—"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def verdict(ok: Optional[bool]) -> str:
    return "—" if ok is None else ("PASS" if ok else "FAIL")


# ---- the run ---------------------------------------------------------------------------------


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mpicc", default="mpicc", help="the MPI's compiler driver (default: mpicc on PATH)")
    ap.add_argument("--mpiexec", default="mpiexec",
                    help="launcher command, with its flags if any (e.g. 'mpiexec --oversubscribe')")
    ap.add_argument("--qmpigen", default=None, help="qmpigen executable (default: beside this Python, else PATH)")
    ap.add_argument("--name", default="auto", help="label and output subdirectory; auto: from the MPI library")
    ap.add_argument("--out", default=None, help="output directory (default: <out-root>/<name>)")
    ap.add_argument("--out-root", default=str(REPO / "build" / "bench"), help="default: build/bench")
    ap.add_argument("--repeats", type=int, default=3, help="timed samples per process (default 3)")
    ap.add_argument("--rounds", type=int, default=4,
                    help="passes over all configurations, one process each, interleaved; samples are pooled, "
                         "so a row's median is over repeats x rounds samples (default 4)")
    ap.add_argument("--min-ms", type=float, default=50.0, help="minimum length of one sample in ms (default 50)")
    ap.add_argument("--tools", default=",".join(map(str, TOOL_COUNTS)),
                    help=f"tool counts (default {','.join(map(str, TOOL_COUNTS))})")
    ap.add_argument("--cpu", type=int, default=None, help="CPU for single-rank runs (default: the last one allowed)")
    ap.add_argument("--codegen-repeats", type=int, default=5, help="timed `qmpigen build-core` runs (default 5)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 3 samples of 5 ms, one round, few tool counts")
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


def find_qmpigen(given: Optional[str]) -> List[str]:
    if given:
        return [given]
    beside = Path(sys.executable).parent / "qmpigen"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("qmpigen")
    return [found] if found else [sys.executable, "-m", "qmpigen"]


def library_name(core: Path) -> Tuple[str, int]:
    text = (core / "qmpi.h").read_text()
    lib = re.search(r'#define QMPI_MPI_LIBRARY "([^"]*)"', text)
    funcs = re.search(r"#define NUM_MPI_FUNCS (\d+)", text)
    return (lib.group(1) if lib else "unknown MPI"), (int(funcs.group(1)) if funcs else 0)


def slug(text: str) -> str:
    text = re.sub(r"\(.*?\)", "", text).strip().lower()
    return re.sub(r"[^a-z0-9.]+", "-", text).strip("-") or "mpi"


def pick_cpu(requested: Optional[int]) -> Optional[int]:
    if shutil.which("taskset") is None:
        return None
    if requested is not None:
        return requested
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def combine(paths: Sequence[str]) -> str:
    """Side-by-side markdown of several results.json (for docs/performance.md)."""
    results = [json.loads(Path(p).read_text()) for p in paths]
    names = [r["mpi"].split(" (")[0] for r in results]
    lines = ["| target | " + " | ".join(names) + " | bound |", "|---|" + "---|" * (len(names) + 1)]
    for i, t in enumerate(results[0]["targets"]):
        found = [r["targets"][i] if i < len(r["targets"]) else None for r in results]
        same = len({f["bound"] for f in found if f}) == 1
        cells = [f"{f['measured']}{'' if same else ' (' + f['bound'] + ')'} **{f['result']}**" if f else "—"
                 for f in found]
        lines.append(f"| {t['target']} | " + " | ".join(cells) + f" | {t['bound'] if same else 'per MPI'} |")
    lines += ["", "| ns per MPI_Comm_rank | " + " | ".join(
        f"{n} {c}" for n in names for c in ("floor", "exec_func", "typed", "callback")) + " |",
        "|---|" + "---|" * (4 * len(names))]
    counts = sorted({n for r in results for n in r["counts"]})
    for n in (0, *counts):
        cells = []
        for r in results:
            rows = r["rows"]
            for col in ("ref-compact", "exec", "typed", "callback"):
                key = f"{col}/{n}" if col.startswith("ref-") or n else "core/0"
                cells.append(fmt(rows[key]["median_ns"]) if key in rows else "—")
        lines.append(f"| {n:,} tools | " + " | ".join(cells) + " |")
    lines += ["", "| per layer (ns, ratio to the paired floor) | " + " | ".join(names) + " |",
              "|---|" + "---|" * len(names)]
    labels = {**VARIANTS, **EXTRA_VARIANTS}
    for variant in (*VARIANTS, *EXTRA_VARIANTS):
        cells = []
        for r in results:
            v = r["variants"][variant]
            cells.append(f"{fmt(v['slope_ns'])} ({fmt(v['ratio_to_floor'])}x); 1,000→10,000: "
                         f"{fmt(v['marginal_1000_up_ns'])}; stack {fmt(v['stack_bytes_per_layer'], 0)} B")
        lines.append(f"| {labels[variant]} | " + " | ".join(cells) + " |")
    for layout in ("compact", "core-layout", "core-layout-hugepages"):
        cells = [f"{fmt(r['reference'][layout]['slope_ns'])}; 1,000→10,000: "
                 f"{fmt(r['reference'][layout]['marginal_1000_up_ns'])}" for r in results]
        lines.append(f"| reference chain, {layout} | " + " | ".join(cells) + " |")
    lines += ["", "| one-way ping-pong latency, ns (median; q1–q3) | " + " | ".join(
        f"{n} {s} B" for n in names for s in PINGPONG_SIZES) + " |",
        "|---|" + "---|" * (len(names) * len(PINGPONG_SIZES))]
    configs = sorted({k.split("/")[1] for r in results for k in r["rows"] if k.startswith("pingpong/")},
                     key=lambda k: (len(k), k))
    for config in configs:
        cells = []
        for r in results:
            for size in PINGPONG_SIZES:
                row = r["rows"].get(f"pingpong/{config}/{size}B")
                cells.append(f"{fmt(row['median_ns'], 0)} ({fmt(row['q1_ns'], 0)}–{fmt(row['q3_ns'], 0)})"
                             if row else "—")
        lines.append(f"| {config} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


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
    # 1. code generation and compilation of the core, timed
    scratch = Path(tempfile.mkdtemp(prefix="qmpi-bench-"))
    try:
        gen = [*qmpigen, "build-core", "--mpi-header", "auto", "--mpicc", args.mpicc, "-o"]
        must(run([*gen, str(scratch / "warm")], mpi.env), "qmpigen build-core")  # warm caches
        name, nfuncs = library_name(scratch / "warm")
        if args.name == "auto":
            args.name = slug(name)
        out = Path(args.out) if args.out else Path(args.out_root) / args.name
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
    header_stages = None
    stage_script = BENCH_DIR / "bench_header.py"
    if stage_script.exists():
        proc = run([sys.executable, str(stage_script), "--mpicc", args.mpicc, "--repeat", "3"], mpi.env)
        header_stages = proc.stdout.strip() if proc.returncode == 0 else None

    core = out / "core"
    shutil.rmtree(core, ignore_errors=True)
    must(run([*gen, str(core)], mpi.env), "qmpigen build-core")
    compile_load = loadavg()
    compile_s, compile_cpu = timed(["make", "-C", str(core), "-j2", f"MPICC={args.mpicc}"], mpi.env,
                                   "compiling the core")
    log(f"make -j2 of the core: {compile_s:.1f} s ({compile_cpu:.1f} s CPU)")

    # 2. the C side
    bindir = out / "bin"
    must(run(["make", "-C", str(BENCH_DIR), "-j2", f"CORE={core}", f"OUT={bindir}", f"MPICC={args.mpicc}"],
             mpi.env), "building the benchmark")
    for short, lib in (("t.so", "libqbtyped.so"), ("e.so", "libqbexec.so"), ("f.so", "libqbframes.so")):
        link = bindir / short
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(lib)

    # 3. the runs, interleaved over rounds
    cpu = pick_cpu(args.cpu)
    log(f"single-rank runs pinned to CPU {cpu}" if cpu is not None else "taskset not found: runs not pinned")
    configs = build_configs(args.counts, bindir, core)
    for r in range(args.rounds):
        t0 = time.perf_counter()
        for config in configs:
            if config.failures:
                continue  # a configuration that failed once is not retried
            run_config(config, mpi, bindir, cpu, args.repeats, args.min_ms)
        log(f"round {r + 1}/{args.rounds}: {time.perf_counter() - t0:.0f} s")
    for config in configs:
        for failure in config.failures:
            log(f"FAILED {config.key}: {failure}")

    # 4. results
    results = summarise(args, name, nfuncs, configs, codegen, compile_s, cpu, header_stages)
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


# ---- summary ----------------------------------------------------------------------------------


def summarise(args, name: str, nfuncs: int, configs: List[Config], codegen: List[float], compile_s: float,
              cpu: Optional[int], header_stages: Optional[str]) -> dict:
    rows: Dict[str, dict] = {}
    failures: Dict[str, List[str]] = {}
    for config in configs:
        if config.failures:
            failures[config.key] = config.failures
        for key, samples in config.samples.items():
            q1, q3 = quartiles(samples)
            info = config.info[key]
            rows[key] = {
                "median_ns": statistics.median(samples), "min_ns": min(samples), "q1_ns": q1, "q3_ns": q3,
                "samples": len(samples), "iterations": info.get("iterations"), "clock": info.get("clock"),
                "wall_median_ns": statistics.median(config.wall[key]) if config.wall.get(key) else None,
                "vmrss_init_kb": info.get("vmrss_init_kb"), "stack_bytes": info.get("stack_bytes"),
                "samples_ns": samples,
            }

    def med(key: str) -> Optional[float]:
        return rows[key]["median_ns"] if key in rows else None

    counts = args.counts
    fit_counts = [n for n in counts if n <= 1000] or counts
    floors = {
        "direct_ns": med("direct"),
        "interposer_ns": med("interposer"),
        "interposer_plt_ns": med("interposer-plt"),
        "core0_ns": med("core/0"),
    }
    core0_delta_linked = (floors["core0_ns"] - floors["interposer_ns"]
                          if floors["core0_ns"] is not None and floors["interposer_ns"] is not None else None)

    def paired(a: str, b: str) -> Optional[float]:
        """Median of sample-by-sample differences a - b (taken in turn in one process)."""
        sa, sb = rows.get(f"entry/{a}", {}).get("samples_ns"), rows.get(f"entry/{b}", {}).get("samples_ns")
        if not sa or not sb or len(sa) != len(sb):
            return None
        return statistics.median(x - y for x, y in zip(sa, sb))

    entry = {label: med(f"entry/{label}") for label in ENTRY_LABELS}
    entry_deltas = {
        "core_minus_interposer_ns": paired("core", "interposer"),
        "interposer_minus_direct_ns": paired("interposer", "direct"),
        "interposer_plt_minus_interposer_ns": paired("interposer-plt", "interposer"),
        "core_minus_interposer_plt_ns": paired("core", "interposer-plt"),
    }
    core0_delta = entry_deltas["core_minus_interposer_ns"]

    def series(prefix: str) -> Dict[int, float]:
        return {n: rows[f"{prefix}/{n}"]["median_ns"] for n in counts if f"{prefix}/{n}" in rows}

    def slopes(points: Dict[int, float], zero: Optional[float]) -> dict:
        fit = fit_slope([(n, points[n]) for n in fit_counts if n in points])
        fit_all = fit_slope([(n, t) for n, t in points.items()])
        marginal = None
        big = max(points) if points else None
        if big and big > 1000 and 1000 in points:
            marginal = (points[big] - points[1000]) / (big - 1000)
        per_layer = {n: (t - zero) / n for n, t in points.items()} if zero is not None else {}
        return {"slope_ns": fit, "slope_all_ns": fit_all, "marginal_1000_up_ns": marginal,
                "per_layer_ns": per_layer, "median_ns": points}

    ref = {layout: slopes({n: rows[f"ref-{layout}/{n}"]["median_ns"] for n in counts if f"ref-{layout}/{n}" in rows},
                          med(f"ref-{layout}/0"))
           for layout in ("compact", "core-layout", "core-layout-hugepages", "frames")}
    for layout in ref:
        ref[layout]["zero_ns"] = med(f"ref-{layout}/0")
        st0 = rows.get(f"ref-{layout}/0", {}).get("stack_bytes")
        stn = rows.get(f"ref-{layout}/{max(counts)}", {}).get("stack_bytes")
        ref[layout]["stack_bytes_per_layer"] = ((stn - st0) / max(counts)
                                                if st0 is not None and stn is not None and stn >= 0 else None)
    floor_slope = ref["compact"]["slope_ns"]

    variants = {}
    for variant in (*VARIANTS, *EXTRA_VARIANTS):
        s = slopes(series(variant), floors["core0_ns"])
        # The floor measured in the same processes, in turn with this variant's samples.
        pair_zero = med("ref-frames/0") if variant == "frames" else med("ref-compact/0")
        pair = slopes(series(f"pair-ref/{variant}"), pair_zero)
        s["paired_floor_slope_ns"] = pair["slope_ns"]
        s["paired_floor_median_ns"] = pair["median_ns"]
        floor = pair["slope_ns"]
        s["ratio_to_floor"] = s["slope_ns"] / floor if s["slope_ns"] and floor else None
        global_floor = ref["frames"]["slope_ns"] if variant == "frames" else floor_slope
        s["ratio_to_ref_run"] = s["slope_ns"] / global_floor if s["slope_ns"] and global_floor else None
        s["floor"] = "reference chain, frames" if variant == "frames" else "reference chain"
        big = max(counts)
        rss0 = rows.get("core/0", {}).get("vmrss_init_kb")
        rssn = rows.get(f"{variant}/{big}", {}).get("vmrss_init_kb")
        s["bytes_per_instance"] = ((rssn - rss0) * 1024 / big) if rss0 is not None and rssn is not None else None
        st0 = rows.get("core/0", {}).get("stack_bytes")
        stn = rows.get(f"{variant}/{big}", {}).get("stack_bytes")
        s["stack_bytes_max_n"] = stn
        s["stack_bytes_per_layer"] = (stn - st0) / big if st0 is not None and stn is not None and stn >= 0 else None
        s["failures"] = {k: v for k, v in failures.items() if k.startswith(variant + "/")}
        s["ran_all"] = all(f"{variant}/{n}" in rows for n in counts) and not s["failures"]
        variants[variant] = s

    pingpong = {}
    for key, row in rows.items():
        if key.startswith("pingpong/"):
            pingpong[key[len("pingpong/"):]] = row["median_ns"]

    # targets
    targets = []

    def target(what: str, measured: str, bound: str, ok: Optional[bool], note: str = "") -> None:
        targets.append({"target": what, "measured": measured, "bound": bound, "result": verdict(ok), "note": note})

    target("core with 0 tools vs minimal interposer (-fno-plt), paired in one process",
           f"{fmt(core0_delta)} ns (linked-in rows: {fmt(core0_delta_linked)} ns)",
           f"<= +{TARGET_CORE0_OVER_INTERPOSER_NS} ns",
           None if core0_delta is None else core0_delta <= TARGET_CORE0_OVER_INTERPOSER_NS)
    for variant, bound in TARGET_RATIO.items():
        r = variants[variant]["ratio_to_floor"]
        target(f"per layer, {VARIANTS[variant]}",
               f"{fmt(variants[variant]['slope_ns'])} ns = {fmt(r)}x floor "
               f"({fmt(variants[variant]['paired_floor_slope_ns'])} ns)", f"<= {bound}x floor",
               None if r is None else r <= bound)
    big = max(counts)
    for variant in VARIANTS:
        v = variants[variant]
        marginal, slope = v["marginal_1000_up_ns"], v["slope_ns"]
        lin = marginal / slope if marginal is not None and slope else None
        ok = v["ran_all"] and (lin is None or lin <= TARGET_LINEAR_MARGINAL)
        target(f"linear to {big:,} tools, no failure: {variant}",
               f"{'all ran' if v['ran_all'] else 'FAILED'}; 1,000->{big:,}: {fmt(marginal)} ns/layer"
               + (f" = {fmt(lin)}x the fitted slope" if lin is not None else ""),
               f"<= {TARGET_LINEAR_MARGINAL}x", ok)
    designed = DESIGNED_BYTES_PER_FUNCTION * nfuncs
    bound_bytes = TARGET_BYTES_PER_FUNCTION * nfuncs
    for variant in VARIANTS:
        b = variants[variant]["bytes_per_instance"]
        target(f"memory per tool instance: {variant}", f"{fmt(b, 0)} B (designed {designed:,} B)",
               f"<= {bound_bytes:,} B", None if b is None else b <= bound_bytes)
    try:
        stack_limit = resource.getrlimit(resource.RLIMIT_STACK)[0]
    except (ValueError, OSError):
        stack_limit = -1
    deepest = {v: variants[v]["stack_bytes_max_n"] for v in (*VARIANTS, *EXTRA_VARIANTS)
               if variants[v]["stack_bytes_max_n"] is not None}
    if deepest:
        worst = max(deepest, key=lambda v: deepest[v])
        ran = all(variants[v]["ran_all"] for v in (*VARIANTS, *EXTRA_VARIANTS))
        limit_text = "unlimited" if stack_limit in (-1, resource.RLIM_INFINITY) else f"{stack_limit:,} B"
        target(f"{big:,} tools on the default stack (one call, deepest variant)",
               f"{deepest[worst]:,} B ({worst}); " + ", ".join(f"{v} {b:,} B" for v, b in deepest.items()
                                                                if v != worst),
               f"< stack limit ({limit_text})",
               ran and deepest[worst] >= 0 and (stack_limit in (-1, resource.RLIM_INFINITY)
                                                or deepest[worst] < stack_limit))
    cg = statistics.median(codegen) if codegen else None
    target("`qmpigen build-core` end to end", f"{fmt(cg, 3)} s ({nfuncs} functions)", f"<= {TARGET_CODEGEN_S} s",
           None if cg is None else cg <= TARGET_CODEGEN_S,
           "" if "MPICH 5" in name else "the target is set for MPICH 5")
    target("compiling the core (`make -j2`)", f"{compile_s:.1f} s", f"<= {TARGET_COMPILE_S:.0f} s",
           compile_s <= TARGET_COMPILE_S)

    return {
        "mpi": name, "name": args.name, "num_mpi_funcs": nfuncs,
        "environment": {
            "machine": platform.machine(), "cpus": os.cpu_count(), "pinned_cpu": cpu,
            "cpu_model": cpu_model(), "stack_limit_bytes": stack_limit,
            "repeats": args.repeats, "rounds": args.rounds, "min_sample_ms": args.min_ms,
            "mpicc": args.mpicc, "mpiexec": args.mpiexec,
        },
        "floors": floors, "entry_ns": entry, "entry_paired": entry_deltas,
        "core0_minus_interposer_ns": core0_delta, "core0_minus_interposer_linked_ns": core0_delta_linked,
        "floor_slope_ns": floor_slope, "fit_counts": fit_counts, "counts": counts,
        "reference": ref, "variants": variants, "pingpong_ns": pingpong,
        "memory": {"designed_bytes_per_instance": designed, "bound_bytes_per_instance": bound_bytes},
        "codegen_s": codegen, "codegen_median_s": cg, "compile_s": compile_s, "header_stages": header_stages,
        "targets": targets, "failures": failures, "rows": rows,
        "seconds_per_config": {c.key: round(c.seconds, 2) for c in configs},
    }


def provenance(qmpigen: Sequence[str]) -> Optional[str]:
    """The commit of the qmpigen that generated the core, and whether its templates or
    code had uncommitted changes (the numbers then describe a work in progress)."""
    try:
        import qmpigen as package  # the one this Python imports; the CLI given may be another
        root = Path(package.__file__).resolve().parent.parent
        if qmpigen and Path(qmpigen[0]).name != "qmpigen":
            return None
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
                                "templates", "qmpigen"], capture_output=True, text=True, timeout=10)
    except (ImportError, OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + (" + uncommitted changes to templates/ or qmpigen/" if dirty.stdout.strip() else "")


def entry_alignment(lib: Path) -> Optional[dict]:
    """Where the entry wrappers' fast path (state check, then `jmp *PMPI_X@GOT`) lies
    against 32-byte fetch blocks: one that straddles a boundary costs ~0.3 ns per call
    on the machine this was written on. None without objdump."""
    if shutil.which("objdump") is None:
        return None
    proc = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0:
        return None
    entries: Dict[str, Tuple[int, int]] = {}
    name, start, previous_jump = None, 0, None
    for line in proc.stdout.splitlines():
        head = re.match(r"^([0-9a-f]+) <(\w+)>:$", line)
        if head:
            name, start, previous_jump = head.group(2), int(head.group(1), 16), None
            continue
        insn = re.match(r"^\s+([0-9a-f]+):\s+(\S+)", line)
        if not insn or name is None or not (name.startswith("MPI_") or name.startswith("MPIX_")):
            continue
        address = int(insn.group(1), 16)
        if previous_jump is not None and name not in entries:
            entries[name] = (start, address)  # the fast path ends where the next instruction starts
            previous_jump = None
        if name not in entries and insn.group(2) == "jmp" and "(%rip)" in line and address - start < 32:
            previous_jump = address
    straddling = sorted(n for n, (a, b) in entries.items() if a // 32 != (b - 1) // 32)
    rank = entries.get("MPI_Comm_rank")
    return {"entries": len(entries), "straddling_32B": len(straddling),
            "MPI_Comm_rank": None if rank is None else {
                "address": hex(rank[0]), "fast_path_bytes": rank[1] - rank[0],
                "straddles_32B": rank[0] // 32 != (rank[1] - 1) // 32}}


def cpu_model() -> Optional[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def markdown(res: dict, brief: bool = False) -> str:
    env = res["environment"]
    rows = res["rows"]
    counts = res["counts"]
    labels = {**VARIANTS, **EXTRA_VARIANTS}
    lines: List[str] = []
    add = lines.append
    add(f"# QMPI core benchmark: {res['mpi']}")
    add("")
    add(f"{env['cpu_model'] or env['machine']}, {env['cpus']} CPUs; single-rank runs pinned to CPU "
        f"{env['pinned_cpu']}, timed in thread CPU time; each row is the median of {env['repeats']} samples x "
        f"{env['rounds']} rounds (one process per round, rounds interleaved), each sample >= "
        f"{env['min_sample_ms']:g} ms. Load average at start {env.get('loadavg_start')}, end "
        f"{env.get('loadavg_end')}; {env.get('wall_s')} s in all. Call: `MPI_Comm_rank(MPI_COMM_WORLD, &r)`. "
        f"Core generated by qmpigen at {env.get('qmpigen_commit') or 'an unknown commit'}.")
    add("")
    add("## Targets")
    add("")
    add("| target | measured | bound | result |")
    add("|---|---|---|---|")
    for t in res["targets"]:
        note = f" ({t['note']})" if t["note"] else ""
        add(f"| {t['target']}{note} | {t['measured']} | {t['bound']} | **{t['result']}** |")
    add("")
    add("## 0 tools: the cost of being there")
    add("")
    add("| row | ns per call (median) | q1–q3 |")
    add("|---|---|---|")
    for key, label in (("direct", "direct PMPI, application not linked with libqmpi"),
                       ("interposer", "minimal PMPI interposer, -fno-plt (the floor used)"),
                       ("interposer-plt", "minimal PMPI interposer, PLT"),
                       ("core/0", "core, 0 tools")):
        if key in rows:
            r = rows[key]
            add(f"| {label} | {fmt(r['median_ns'])} | {fmt(r['q1_ns'])}–{fmt(r['q3_ns'])} |")
    add("")
    paired = res["entry_paired"]
    add("Paired in one process (each entry point called through a pointer, samples in turn; median of the "
        "sample-by-sample differences): "
        f"core − interposer {fmt(paired['core_minus_interposer_ns'])} ns, "
        f"interposer − PMPI {fmt(paired['interposer_minus_direct_ns'])} ns, "
        f"PLT interposer − -fno-plt interposer {fmt(paired['interposer_plt_minus_interposer_ns'])} ns, "
        f"core − PLT interposer {fmt(paired['core_minus_interposer_plt_ns'])} ns.")
    add("")
    align = res.get("entry_alignment")
    if align and align.get("MPI_Comm_rank"):
        rank = align["MPI_Comm_rank"]
        add(f"Entry wrappers whose fast path (state check + `jmp *PMPI_X@GOT`) straddles a 32-byte block: "
            f"{align['straddling_32B']} of {align['entries']}; MPI_Comm_rank's ({rank['fast_path_bytes']} bytes at "
            f"{rank['address']}) {'does' if rank['straddles_32B'] else 'does not'} — one that does was measured "
            f"~0.3 ns slower.")
        add("")
    add("## ns per call against the number of tools")
    add("")
    cols = ["ref-compact", *VARIANTS, *EXTRA_VARIANTS, "ref-core-layout", "ref-core-layout-hugepages", "ref-frames"]
    head = {"ref-compact": "reference chain (floor)", "ref-core-layout": "ref., core's table layout",
            "ref-core-layout-hugepages": "ref., core layout, huge pages", "ref-frames": "ref., frames"}
    add("| tools | " + " | ".join(head.get(c, c) for c in cols) + " |")
    add("|---|" + "---|" * len(cols))
    for n in sorted({0, *counts, *(m for m in REF_EXTRA_LEVELS if m < max(counts))}):
        cells = []
        for col in cols:
            key = f"{col}/{n}" if col.startswith("ref-") or n else "core/0"
            cells.append(fmt(rows[key]["median_ns"]) if key in rows else "—")
        add(f"| {n:,} | " + " | ".join(cells) + " |")
    add("")
    add(f"## Per layer (least-squares slope of ns against N over N in {{{', '.join(map(str, res['fit_counts']))}}})")
    add("")
    add("The floor of each variant is the reference chain measured in the same processes, its samples taken in "
        "turn with the variant's.")
    add("")
    add("| chain | ns/layer | floor ns/layer | ratio | slope incl. all N | marginal 1,000→max | "
        "bytes/instance | stack bytes/layer |")
    add("|---|---|---|---|---|---|---|---|")
    for variant, v in res["variants"].items():
        add(f"| {labels[variant]} | {fmt(v['slope_ns'])} | {fmt(v['paired_floor_slope_ns'])} ({v['floor']}) | "
            f"**{fmt(v['ratio_to_floor'])}x** | {fmt(v['slope_all_ns'])} | {fmt(v['marginal_1000_up_ns'])} | "
            f"{fmt(v['bytes_per_instance'], 0)} | {fmt(v['stack_bytes_per_layer'], 1)} |")
    for layout, data in res["reference"].items():
        ratio = data["slope_ns"] / res["floor_slope_ns"] if data["slope_ns"] and res["floor_slope_ns"] else None
        add(f"| reference chain, {layout} (own process) | {fmt(data['slope_ns'])} | {fmt(res['floor_slope_ns'])} "
            f"(compact) | {fmt(ratio)}x | {fmt(data['slope_all_ns'])} | {fmt(data['marginal_1000_up_ns'])} | — | "
            f"{fmt(data.get('stack_bytes_per_layer'), 1)} |")
    add("")
    if res["pingpong_ns"]:
        add("## Ping-pong, 2 ranks (one-way latency, ns)")
        add("")
        add("Each sample is the median over batches of 16 round trips (wall clock), so that round trips waiting "
            "for a preempted rank do not count; the row is the median of the samples, q1–q3 in brackets (on a busy "
            "2-core machine whole processes land in slower modes: compare rows with that spread in mind).")
        add("")
        add("| configuration | " + " | ".join(f"{s} B" for s in PINGPONG_SIZES) + " |")
        add("|---|" + "---|" * len(PINGPONG_SIZES))
        names = sorted({k.rsplit("/", 1)[0] for k in res["pingpong_ns"]}, key=lambda k: (len(k), k))
        for config in names:
            cells = []
            for size in PINGPONG_SIZES:
                row = rows.get(f"pingpong/{config}/{size}B")
                cells.append(f"{fmt(row['median_ns'], 0)} ({fmt(row['q1_ns'], 0)}–{fmt(row['q3_ns'], 0)})"
                             if row else "—")
            add(f"| {config} | " + " | ".join(cells) + " |")
        add("")
    if brief:
        return "\n".join(lines) + "\n"
    add("## Code generation and compilation")
    add("")
    add(f"`qmpigen build-core` end to end, fresh output directory: "
        + ", ".join(f"{t:.3f}" for t in res["codegen_s"]) + f" s (median {fmt(res['codegen_median_s'], 3)} s; "
        f"CPU time {fmt(statistics.median(res['codegen_cpu_s']), 3) if res.get('codegen_cpu_s') else '—'} s). "
        f"`make -j2` of the generated core: {res['compile_s']:.1f} s wall, {fmt(res.get('compile_cpu_s'), 1)} s "
        f"CPU (user + system) in all, load average {res['environment'].get('loadavg_at_compile')} when it started "
        f"(other work on the machine lengthens the wall-clock time).")
    if res.get("header_stages"):
        add("")
        add("Reading the header alone (bench/bench_header.py):")
        add("")
        add("```")
        add(res["header_stages"])
        add("```")
    add("")
    add("## Memory and stack")
    add("")
    add(f"Memory per instance: (VmRSS after MPI_Init with {max(counts):,} tools − with 0 tools) / {max(counts):,}; "
        f"designed {res['memory']['designed_bytes_per_instance']:,} B ({DESIGNED_BYTES_PER_FUNCTION}-byte cell x "
        f"{res['num_mpi_funcs']} functions), bound {res['memory']['bound_bytes_per_instance']:,} B. Stack: bytes of "
        f"stack one MPI_Comm_rank uses below main (high-water mark of a painted stack), with a stack limit of "
        f"{res['environment']['stack_limit_bytes']} bytes.")
    add("")
    add("| variant | stack bytes, 0 tools | stack bytes, max tools | per layer |")
    add("|---|---|---|---|")
    st0 = rows.get("core/0", {}).get("stack_bytes")
    for variant, v in res["variants"].items():
        add(f"| {labels[variant]} | {st0} | {v['stack_bytes_max_n']} | {fmt(v['stack_bytes_per_layer'], 1)} |")
    if res["failures"]:
        add("")
        add("## Failures")
        add("")
        for key, msgs in res["failures"].items():
            add(f"- {key}: {'; '.join(msgs)}")
    return "\n".join(lines) + "\n"


def plot(res: dict, path: Path) -> Optional[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not installed: no plot")
        return None
    rows = res["rows"]
    counts = res["counts"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2))
    styles = {"exec": ("exec_func", "tab:red", "s"), "typed": ("typed QMPI_Next_Comm_rank", "tab:blue", "o"),
              "callback": ("callback, cached next", "tab:green", "^")}
    for variant, (label, colour, marker) in styles.items():
        xs = [n for n in counts if f"{variant}/{n}" in rows]
        left.plot(xs, [rows[f"{variant}/{n}"]["median_ns"] for n in xs], marker=marker, color=colour, label=label)
        per = res["variants"][variant]["per_layer_ns"]
        right.plot(sorted(per), [per[n] for n in sorted(per)], marker=marker, color=colour, label=label)
    def ref_levels(layout: str) -> List[int]:
        return sorted(int(k.rsplit("/", 1)[1]) for k in rows if k.startswith(f"ref-{layout}/") and
                      not k.endswith("/0"))

    xs = ref_levels("compact")
    left.plot(xs, [rows[f"ref-compact/{n}"]["median_ns"] for n in xs], color="black", linestyle="--",
              label="floor: reference chain")
    for layout, colour, style, label in (("compact", "black", "--", "floor: reference chain"),
                                         ("core-layout", "grey", ":", "reference chain, core's table layout")):
        zero = rows.get(f"ref-{layout}/0", {}).get("median_ns")
        xs = ref_levels(layout)
        if zero is not None and xs:
            right.plot(xs, [(rows[f"ref-{layout}/{n}"]["median_ns"] - zero) / n for n in xs], color=colour,
                       linestyle=style, label=label)
    if res["floors"]["interposer_ns"]:
        left.axhline(res["floors"]["interposer_ns"], color="grey", linestyle=":", label="minimal interposer (0 tools)")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("tool instances")
    left.set_ylabel("ns per MPI_Comm_rank")
    left.set_title("ns per call")
    right.set_xscale("log")
    right.set_xlabel("tool instances")
    right.set_ylabel("ns per layer: (t(N) − t(0)) / N")
    right.set_title("cost per tool layer")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"QMPI core: {res['mpi']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit(main())
