"""`make bench`'s PMPI tool row (issue 10): ns per MPI_Comm_rank through 1, 2, 4 and 8
private copies of an unmodified PMPI tool (bench/tool_pmpi.c; the core has 8 slots),
against the same numbers of empty typed thesis-style tools in the same rounds; the
target compares the fitted costs per layer (least squares over 0..8 layers, the core
with 0 tools as the 0 point of both)."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

from measure import Config, row_median, tool_list

PMPI_LAYERS = (1, 2, 4, 8)
TARGET_PMPI_OVER_TYPED = 2.0


def pmpi_configs() -> List[Config]:
    return [Config(f"pmpi/{n}", "bench_core", ["rank"], {"TOOLS": tool_list("./p.so", n)}) for n in PMPI_LAYERS]


def pmpi_summary(rows: Dict[str, dict], fit_slope: Callable) -> Optional[dict]:
    def med(key: str) -> Optional[float]:
        return row_median(rows, key)

    zero = med("core/0")
    # the layer counts both kinds ran (typed ones run at --tools's counts)
    layers = [n for n in PMPI_LAYERS if med(f"pmpi/{n}") is not None and med(f"typed/{n}") is not None]
    series = {kind: {n: med(f"{kind}/{n}") for n in layers} for kind in ("pmpi", "typed")}
    if zero is None or not layers:
        return None
    slopes = {kind: fit_slope([(0, zero), *s.items()]) for kind, s in series.items()}
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
           f"fitted over 0, {', '.join(map(str, summary['layers']))} layers", f"<= {TARGET_PMPI_OVER_TYPED}x typed",
           None if ratio is None else ratio <= TARGET_PMPI_OVER_TYPED)
