"""`make bench`, stage 2: statistics of the samples and the verdict on each target,
as one results dict (written as results.json). No printing, no files."""

from __future__ import annotations

import os
import platform
import resource
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from codegen_bench import codegen_targets
from conf_bench import conf_targets
from measure import ENTRY_LABELS, EXTRA_VARIANTS, VARIANTS, Config, cpu_model, median_difference, row_median
from pmpi_bench import pmpi_load_targets, pmpi_summary, pmpi_targets
from stacks_bench import stacks_summary, stacks_targets
from trace_bench import BASELINE_REV, thread_start_summary, trace_call_summary, trace_call_targets, trace_targets
from trace_instructions import instruction_targets

# Targets (this machine: 2 cores).
TARGET_CORE0_OVER_INTERPOSER_NS = 0.5
TARGET_RATIO = {"typed": 1.5, "callback": 1.5, "exec": 4.0}
TARGET_LINEAR_MARGINAL = 1.5  # marginal ns/layer 1,000 -> 10,000 vs the fitted slope
TARGET_BYTES_PER_FUNCTION = 24
# Per function per instance: its 16-byte cell (function pointer + level) and its 4-byte
# word in the function's links row (the typed next call's walk, since issue 31).
DESIGNED_BYTES_PER_FUNCTION = 20
TARGET_CODEGEN_S = 2.0
TARGET_COMPILE_S = 45.0
TARGET_FORTRAN_OVER_OWN_NS = 2.0  # core's Fortran entry, 0 tools, vs the MPI's own binding


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


def fortran_summary(rows: Dict[str, dict], status: Optional[dict]) -> Optional[dict]:
    """The Fortran rows (bench_rank.f90) against the MPI's own Fortran binding; None when
    the run did not look for Fortran (results from before it existed)."""
    if status is None:
        return None

    def med(key: str) -> Optional[float]:
        return row_median(rows, key)

    own, core0, core1 = med("fortran/own"), med("fortran/core+0"), med("fortran/core+1typed")
    return {
        **status,
        "own_ns": own,
        "core0_ns": core0,
        "core1typed_ns": core1,
        "core0_minus_own_linked_ns": core0 - own if core0 is not None and own is not None else None,
        "core0_minus_own_ns": median_difference(
            rows.get("fentry/core", {}).get("samples_ns"), rows.get("fentry/own", {}).get("samples_ns")
        ),
        "entry_ns": {"own": med("fentry/own"), "core": med("fentry/core")},
        "one_tool_layer_ns": core1 - core0 if core1 is not None and core0 is not None else None,
    }


def summarise(
    args,
    name: str,
    nfuncs: int,
    configs: List[Config],
    codegen: List[float],
    compile_s: float,
    cpu: Optional[int],
    header_stages: Optional[str],
    fortran_status: Optional[dict] = None,
    trace_merge: Optional[dict] = None,
    pmpi_loads: Optional[dict] = None,
    conf_parse: Optional[dict] = None,
    codegen_rows: Optional[dict] = None,
    trace_instructions: Optional[dict] = None,
    trace_fs: Optional[dict] = None,
) -> dict:
    rows: Dict[str, dict] = {}
    failures: Dict[str, List[str]] = {}
    for config in configs:
        if config.failures:
            failures[config.key] = config.failures
        for key, samples in config.samples.items():
            q1, q3 = quartiles(samples)
            info = config.info[key]
            rows[key] = {
                "median_ns": statistics.median(samples),
                "min_ns": min(samples),
                "q1_ns": q1,
                "q3_ns": q3,
                "samples": len(samples),
                "iterations": info.get("iterations"),
                "clock": info.get("clock"),
                "wall_median_ns": statistics.median(config.wall[key]) if config.wall.get(key) else None,
                "vmrss_init_kb": info.get("vmrss_init_kb"),
                "stack_bytes": info.get("stack_bytes"),
                "samples_ns": samples,
            }

    def med(key: str) -> Optional[float]:
        return row_median(rows, key)

    counts = args.counts
    fit_counts = [n for n in counts if n <= 1000] or counts
    floors = {
        "direct_ns": med("direct"),
        "interposer_ns": med("interposer"),
        "interposer_plt_ns": med("interposer-plt"),
        "core0_ns": med("core/0"),
    }
    core0_delta_linked = (
        floors["core0_ns"] - floors["interposer_ns"]
        if floors["core0_ns"] is not None and floors["interposer_ns"] is not None
        else None
    )

    def paired(a: str, b: str) -> Optional[float]:
        return median_difference(
            rows.get(f"entry/{a}", {}).get("samples_ns"), rows.get(f"entry/{b}", {}).get("samples_ns")
        )

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
        return {
            "slope_ns": fit,
            "slope_all_ns": fit_all,
            "marginal_1000_up_ns": marginal,
            "per_layer_ns": per_layer,
            "median_ns": points,
        }

    ref = {
        layout: slopes(
            {n: rows[f"ref-{layout}/{n}"]["median_ns"] for n in counts if f"ref-{layout}/{n}" in rows},
            med(f"ref-{layout}/0"),
        )
        for layout in ("compact", "core-layout", "core-layout-hugepages", "frames")
    }
    for layout in ref:
        ref[layout]["zero_ns"] = med(f"ref-{layout}/0")
        st0 = rows.get(f"ref-{layout}/0", {}).get("stack_bytes")
        stn = rows.get(f"ref-{layout}/{max(counts)}", {}).get("stack_bytes")
        ref[layout]["stack_bytes_per_layer"] = (
            (stn - st0) / max(counts) if st0 is not None and stn is not None and stn >= 0 else None
        )
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
            pingpong[key[len("pingpong/") :]] = row["median_ns"]

    # targets
    targets = []

    def target(what: str, measured: str, bound: str, ok: Optional[bool], note: str = "") -> None:
        targets.append({"target": what, "measured": measured, "bound": bound, "result": verdict(ok), "note": note})

    target(
        "core with 0 tools vs minimal interposer (-fno-plt), paired in one process",
        f"{fmt(core0_delta)} ns (linked-in rows: {fmt(core0_delta_linked)} ns)",
        f"<= +{TARGET_CORE0_OVER_INTERPOSER_NS} ns",
        None if core0_delta is None else core0_delta <= TARGET_CORE0_OVER_INTERPOSER_NS,
    )
    fortran = fortran_summary(rows, fortran_status)
    if fortran and fortran.get("driver"):
        delta = fortran["core0_minus_own_ns"]
        target(
            "Fortran MPI_COMM_RANK, core with 0 tools vs the MPI's own Fortran binding, paired in one process",
            f"{fmt(delta)} ns (linked-in rows: {fmt(fortran['core0_minus_own_linked_ns'])} ns; "
            f"own {fmt(fortran['own_ns'])} ns, core {fmt(fortran['core0_ns'])} ns)",
            f"<= +{TARGET_FORTRAN_OVER_OWN_NS} ns",
            None if delta is None else delta <= TARGET_FORTRAN_OVER_OWN_NS,
        )
    for variant, bound in TARGET_RATIO.items():
        r = variants[variant]["ratio_to_floor"]
        target(
            f"per layer, {VARIANTS[variant]}",
            f"{fmt(variants[variant]['slope_ns'])} ns = {fmt(r)}x floor "
            f"({fmt(variants[variant]['paired_floor_slope_ns'])} ns)",
            f"<= {bound}x floor",
            None if r is None else r <= bound,
        )
    big = max(counts)
    for variant in VARIANTS:
        v = variants[variant]
        marginal, slope = v["marginal_1000_up_ns"], v["slope_ns"]
        lin = marginal / slope if marginal is not None and slope else None
        ok = v["ran_all"] and (lin is None or lin <= TARGET_LINEAR_MARGINAL)
        target(
            f"linear to {big:,} tools, no failure: {variant}",
            f"{'all ran' if v['ran_all'] else 'FAILED'}; 1,000->{big:,}: {fmt(marginal)} ns/layer"
            + (f" = {fmt(lin)}x the fitted slope" if lin is not None else ""),
            f"<= {TARGET_LINEAR_MARGINAL}x",
            ok,
        )
    designed = DESIGNED_BYTES_PER_FUNCTION * nfuncs
    bound_bytes = TARGET_BYTES_PER_FUNCTION * nfuncs
    for variant in VARIANTS:
        b = variants[variant]["bytes_per_instance"]
        target(
            f"memory per tool instance: {variant}",
            f"{fmt(b, 0)} B (designed {designed:,} B)",
            f"<= {bound_bytes:,} B",
            None if b is None else b <= bound_bytes,
        )
    try:
        stack_limit = resource.getrlimit(resource.RLIMIT_STACK)[0]
    except (ValueError, OSError):
        stack_limit = -1
    deepest = {
        v: variants[v]["stack_bytes_max_n"]
        for v in (*VARIANTS, *EXTRA_VARIANTS)
        if variants[v]["stack_bytes_max_n"] is not None
    }
    if deepest:
        worst = max(deepest, key=lambda v: deepest[v])
        ran = all(variants[v]["ran_all"] for v in (*VARIANTS, *EXTRA_VARIANTS))
        limit_text = "unlimited" if stack_limit in (-1, resource.RLIM_INFINITY) else f"{stack_limit:,} B"
        target(
            f"{big:,} tools on the default stack (one call, deepest variant)",
            f"{deepest[worst]:,} B ({worst}); " + ", ".join(f"{v} {b:,} B" for v, b in deepest.items() if v != worst),
            f"< stack limit ({limit_text})",
            ran
            and deepest[worst] >= 0
            and (stack_limit in (-1, resource.RLIM_INFINITY) or deepest[worst] < stack_limit),
        )
    cg = statistics.median(codegen) if codegen else None
    target(
        "`qmpigen build-core` end to end",
        f"{fmt(cg, 3)} s ({nfuncs} functions)",
        f"<= {TARGET_CODEGEN_S} s",
        None if cg is None else cg <= TARGET_CODEGEN_S,
        "" if "MPICH 5" in name else "the target is set for MPICH 5",
    )
    codegen_targets(codegen_rows, target, fmt)
    target(
        "compiling the core (`make -j2`)",
        f"{compile_s:.1f} s",
        f"<= {TARGET_COMPILE_S:.0f} s",
        compile_s <= TARGET_COMPILE_S,
    )
    pmpi = pmpi_summary(rows, fit_slope)
    pmpi_targets(pmpi, target, fmt)
    pmpi_load_targets(pmpi_loads, target, fmt)
    stacks = stacks_summary(rows, variants["typed"]["slope_ns"])
    stacks_targets(stacks, target, fmt)
    trace_calls = trace_call_summary(rows)
    trace_call_targets(trace_calls, target, fmt, trace_fs)
    trace_targets(rows, trace_merge, target, fmt)
    instruction_targets(trace_instructions, target, fmt, BASELINE_REV)
    conf_targets(conf_parse, target, fmt)

    return {
        "mpi": name,
        "name": args.name,
        "num_mpi_funcs": nfuncs,
        "environment": {
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "pinned_cpu": cpu,
            "cpu_model": cpu_model(),
            "stack_limit_bytes": stack_limit,
            "repeats": args.repeats,
            "rounds": args.rounds,
            "min_sample_ms": args.min_ms,
            "mpicc": args.mpicc,
            "mpiexec": args.mpiexec,
        },
        "floors": floors,
        "entry_ns": entry,
        "entry_paired": entry_deltas,
        "core0_minus_interposer_ns": core0_delta,
        "core0_minus_interposer_linked_ns": core0_delta_linked,
        "floor_slope_ns": floor_slope,
        "fit_counts": fit_counts,
        "counts": counts,
        "reference": ref,
        "variants": variants,
        "pingpong_ns": pingpong,
        "pmpi": pmpi,
        "pmpi_loads": pmpi_loads,
        "stacks": stacks,
        "conf_parse": conf_parse,
        "codegen": codegen_rows,
        "memory": {"designed_bytes_per_instance": designed, "bound_bytes_per_instance": bound_bytes},
        "codegen_s": codegen,
        "codegen_median_s": cg,
        "compile_s": compile_s,
        "header_stages": header_stages,
        "targets": targets,
        "failures": failures,
        "rows": rows,
        "fortran": fortran,
        "trace_merge": trace_merge,
        "trace_instructions": trace_instructions,
        "trace_calls": trace_calls,
        "trace_thread_start": thread_start_summary(rows),
        "trace_dir_cost": trace_fs,
        "seconds_per_config": {c.key: round(c.seconds, 2) for c in configs},
    }
