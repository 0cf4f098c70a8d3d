"""`make bench`'s PMPI tool row (issue 10): ns per MPI_Comm_rank through 1, 2, 4 and 8
private copies of an unmodified PMPI tool (bench/tool_pmpi.c; the core has 8 slots),
against the same numbers of empty typed thesis-style tools in the same rounds; the
target compares the fitted costs per layer (least squares over 1..8 layers, as the
per-layer rows fit theirs).

Whole processes land in faster or slower modes on this kind of machine (the same
binary and chain run after run: 8 PMPI layers took 18.6 ns in one process and 38.6 ns
in the next), and four processes per row cannot average that out: plain medians gave
ratios from 0.8x to 2.0x. So every process also times the reference chain of as many
levels, sample by sample in turn (--pair-ref, as the typed rows do), each sample is
taken relative to its paired reference sample, and the row is that ratio's median
times the reference's median over both kinds' processes: a process's mode scales its
reference too."""

from __future__ import annotations

import statistics
from typing import Callable, Dict, List, Optional

from measure import Config, tool_list

PMPI_LAYERS = (1, 2, 4, 8)
TARGET_PMPI_OVER_TYPED = 2.0
KINDS = ("pmpi", "typed")


def pmpi_configs() -> List[Config]:
    return [Config(f"pmpi/{n}", "bench_core", ["rank", "--pair-ref", str(n), "--pair-layout", "compact"],
                   {"TOOLS": tool_list("./p.so", n)}) for n in PMPI_LAYERS]


def _samples(rows: Dict[str, dict], key: str) -> List[float]:
    return rows.get(key, {}).get("samples_ns") or []


def pmpi_summary(rows: Dict[str, dict], fit_slope: Callable) -> Optional[dict]:
    def paired(kind: str, n: int) -> Optional[tuple]:
        own, ref = _samples(rows, f"{kind}/{n}"), _samples(rows, f"pair-ref/{kind}/{n}")
        return (own, ref) if own and len(own) == len(ref) else None

    # the layer counts both kinds ran, each with its paired reference (typed ones run at --tools's counts)
    layers = [n for n in PMPI_LAYERS if all(paired(kind, n) for kind in KINDS)]
    if len(layers) < 2:
        return None
    series: Dict[str, Dict[int, float]] = {kind: {} for kind in KINDS}
    for n in layers:
        reference = statistics.median([r for kind in KINDS for r in paired(kind, n)[1]])
        for kind in KINDS:
            own, ref = paired(kind, n)
            series[kind][n] = statistics.median(x / y for x, y in zip(own, ref)) * reference
    slopes = {kind: fit_slope(sorted(s.items())) for kind, s in series.items()}
    ratio = slopes["pmpi"] / slopes["typed"] if slopes["pmpi"] and slopes["typed"] else None
    return {"layers": layers, "pmpi_ns": series["pmpi"], "typed_ns": series["typed"],
            "pmpi_slope_ns": slopes["pmpi"], "typed_slope_ns": slopes["typed"], "ratio": ratio}


def pmpi_targets(summary: Optional[dict], target: Callable, fmt: Callable) -> None:
    if summary is None:
        target("per layer, unmodified PMPI tool (private copies) vs typed thesis-style", "not measured",
               f"<= {TARGET_PMPI_OVER_TYPED}x typed", None)
        return
    ratio = summary["ratio"]
    target("per layer, unmodified PMPI tool (private copies) vs typed thesis-style",
           f"{fmt(summary['pmpi_slope_ns'])} ns = {fmt(ratio)}x typed ({fmt(summary['typed_slope_ns'])} ns), "
           f"fitted over {', '.join(map(str, summary['layers']))} layers, each sample relative to the reference "
           f"chain timed in turn in its process", f"<= {TARGET_PMPI_OVER_TYPED}x typed",
           None if ratio is None else ratio <= TARGET_PMPI_OVER_TYPED)
