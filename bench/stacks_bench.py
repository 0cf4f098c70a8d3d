"""`make bench`'s rows for named stacks and services:

* switching: MPI_Comm_rank through bench/tool_switch.c continuing on a second stack
  that holds one empty typed tool (QMPI_Stack_Comm_rank), against the same tool
  continuing on its own next link into the same typed tool on the default stack
  (QMPI_Next_Comm_rank): two levels either way, the same code but for the switch.
  Whole processes land in faster or slower modes here (the same binary, run after
  run), so each row is taken against the reference chain of 2 levels timed in the same
  process, sample by sample (--pair-ref), and the switch's cost is the difference of
  the two rows' median excess over that floor. Target: at most one typed layer (the
  fitted slope of the typed rows of the same run);
* service lookups: ns per QMPI_Service_get of the same 16 names (spread over the
  registry) with 16, 256 and 4096 services registered (bench/service_lookup.c), so that
  the rows differ by the registry's size, not by the working set's. Target: the
  largest registry costs at most 2x the smallest per lookup (a lookup is O(1) in the
  number of names; a list would be over 100x)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional

from measure import Config, median_difference, row_median

SERVICE_NAMES = (16, 256, 4096)
TARGET_SWITCH_OVER_TYPED_LAYERS = 1.0
TARGET_SERVICE_GROWTH = 2.0

SWITCHED_CONF = """[stack default]
instances = sw

[stack other]
instances = t

[sw]
tool = ./libqbswitch.so
stack = other

[t]
tool = ./libqbtyped.so
"""

NEXT_CONF = """[stack default]
instances = sw, t

[sw]
tool = ./libqbswitch.so

[t]
tool = ./libqbtyped.so
"""


def stacks_configs(bindir: Path) -> List[Config]:
    confs = {"switched": SWITCHED_CONF, "next": NEXT_CONF}
    configs = []
    for key, text in confs.items():
        path = bindir / f"switch-{key}.conf"
        path.write_text(text)
        configs.append(
            Config(
                f"switch/{key}",
                "bench_core",
                ["rank", "--pair-ref", "2", "--pair-layout", "compact"],
                {"QMPI_CONF": str(path)},
            )
        )
    configs += [Config(f"service/{n}", "service_lookup", [str(n)]) for n in SERVICE_NAMES]
    return configs


def stacks_summary(rows: Dict[str, dict], typed_slope_ns: Optional[float]) -> dict:
    def med(key: str) -> Optional[float]:
        return row_median(rows, key)

    def over_floor(key: str) -> Optional[float]:
        """The row over the floor timed in turn with it in the same process."""
        floor = rows.get(f"pair-ref/{key}", {}).get("samples_ns")
        return median_difference(rows.get(key, {}).get("samples_ns"), floor)

    switched, plain = over_floor("switch/switched"), over_floor("switch/next")
    cost = switched - plain if switched is not None and plain is not None else None
    lookups = {n: med(f"service/{n}") for n in SERVICE_NAMES}
    small, large = lookups[SERVICE_NAMES[0]], lookups[SERVICE_NAMES[-1]]
    return {
        "switched_ns": med("switch/switched"),
        "next_ns": med("switch/next"),
        "switched_over_floor_ns": switched,
        "next_over_floor_ns": plain,
        "switch_cost_ns": cost,
        "typed_slope_ns": typed_slope_ns,
        "switch_in_typed_layers": cost / typed_slope_ns if cost is not None and typed_slope_ns else None,
        "service_lookup_ns": lookups,
        "service_growth": large / small if small and large is not None else None,
    }


def stacks_targets(summary: dict, target: Callable, fmt: Callable) -> None:
    layers = summary["switch_in_typed_layers"]
    cost = summary["switch_cost_ns"]
    target(
        "switching to another named stack (QMPI_Stack_X vs QMPI_Next_X, 2 levels each)",
        f"{fmt(cost)} ns (over the paired 2-level floor: {fmt(summary['switched_over_floor_ns'])} vs "
        f"{fmt(summary['next_over_floor_ns'])} ns) = {fmt(layers)} typed layers ({fmt(summary['typed_slope_ns'])} ns)",
        f"<= {TARGET_SWITCH_OVER_TYPED_LAYERS:g} typed layer",
        None
        if cost is None or not summary["typed_slope_ns"]
        else cost <= TARGET_SWITCH_OVER_TYPED_LAYERS * summary["typed_slope_ns"],
    )
    lookups = summary["service_lookup_ns"]
    growth = summary["service_growth"]
    target(
        "QMPI_Service_get, 16 -> 4,096 services registered",
        ", ".join(f"{n}: {fmt(ns)} ns" for n, ns in lookups.items()) + f" = {fmt(growth)}x",
        f"<= {TARGET_SERVICE_GROWTH:g}x",
        None if growth is None else growth <= TARGET_SERVICE_GROWTH,
    )
