"""`make bench`'s rows for what a user waits on before a run: CPU seconds of `qmpigen
build-core` and of `qmpigen scaffold-tool sample_tools/counter.qmpi` (user + system,
the preprocessor included), and the wall-clock time of building the sample tools with
`make -j2` (the Quick start's step 4: ten specs generated, thirteen C files compiled).
They run with a cache of their own (QMPIGEN_CACHE, qmpigen/cache.py): a first
build-core fills it (the "empty cache" row, no target), the rows after use it as a
user's second command does. `bench.py --codegen-only` runs these rows alone.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from measure import REPO, Mpi, loadavg, log, timed

TARGET_BUILD_CORE_CPU_S = 1.0
TARGET_SCAFFOLD_CPU_S = 0.5
TARGET_SAMPLE_TOOLS_S = 30.0
SCAFFOLD_SPEC = REPO / "sample_tools" / "counter.qmpi"


def measure_codegen(qmpigen: Sequence[str], mpicc: str, mpi: Mpi, repeats: int) -> dict:
    """CPU and wall seconds per row: a dict for results.json."""
    with tempfile.TemporaryDirectory(prefix="qmpi-bench-codegen-") as work:
        scratch = Path(work)
        env = {**mpi.env, "QMPIGEN_CACHE": str(scratch / "cache")}
        # Python as a user has it: the first run writes the modules' bytecode, the rows
        # after load it (an environment with PYTHONDONTWRITEBYTECODE, such as this
        # project's CI machine, would compile every module in every timed run).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        gen = [*qmpigen, "build-core", "--mpi-header", "auto", "--mpicc", mpicc, "-o"]
        cold_wall, cold_cpu = timed([*gen, str(scratch / "cold")], env, "qmpigen build-core (empty cache)")
        build_core = [timed([*gen, str(scratch / f"core{i}")], env, "qmpigen build-core") for i in range(repeats)]
        scaffold = [
            timed(
                [*qmpigen, "scaffold-tool", str(SCAFFOLD_SPEC), "--mpicc", mpicc, "-o", str(scratch / f"tool{i}")],
                env,
                "qmpigen scaffold-tool",
            )
            for i in range(repeats)
        ]
        # The tools compile against the core's qmpi.h only: no need to build the core.
        load = loadavg()
        tools_wall, tools_cpu = timed(
            [
                "make",
                "-s",
                "-j2",
                "-C",
                str(REPO / "sample_tools"),
                f"CORE={scratch / 'cold'}",
                f"OUT={scratch / 'tools'}",
                f"MPICC={mpicc}",
                f"QMPIGEN={' '.join(qmpigen)}",
            ],
            env,
            "building the sample tools",
        )
    result = {
        "build_core_empty_cache": {"wall_s": cold_wall, "cpu_s": cold_cpu},
        "build_core": _samples(build_core),
        "scaffold_tool": _samples(scaffold),
        "sample_tools": {"wall_s": tools_wall, "cpu_s": tools_cpu, "loadavg_at_start": load},
    }
    log(
        f"build-core {result['build_core']['median_cpu_s']:.2f} s CPU (empty cache {cold_cpu:.2f} s), "
        f"scaffold-tool {result['scaffold_tool']['median_cpu_s']:.2f} s CPU, "
        f"sample tools (make -j2) {tools_wall:.1f} s wall"
    )
    return result


def _samples(timings: List[tuple]) -> Dict[str, object]:
    walls, cpus = [w for w, _ in timings], [c for _, c in timings]
    return {"wall_s": walls, "cpu_s": cpus, "median_cpu_s": statistics.median(cpus)}


def codegen_targets(codegen: Optional[dict], target: Callable, fmt: Callable) -> None:
    rows = (
        ("`qmpigen build-core`, CPU (user + system), cache filled", "build_core", TARGET_BUILD_CORE_CPU_S),
        ("`qmpigen scaffold-tool counter.qmpi`, CPU (user + system)", "scaffold_tool", TARGET_SCAFFOLD_CPU_S),
    )
    for name, key, bound in rows:
        row = (codegen or {}).get(key)
        measured = row["median_cpu_s"] if row else None
        note = ""
        if key == "build_core" and codegen:
            note = f"with an empty cache: {fmt(codegen['build_core_empty_cache']['cpu_s'])} s CPU"
        target(name, f"{fmt(measured)} s", f"<= {bound} s", None if measured is None else measured <= bound, note)
    tools = (codegen or {}).get("sample_tools")
    target(
        "the sample tools built with `make -j2` (10 specs generated, 13 C files compiled), wall clock",
        f"{fmt(tools['wall_s'], 1)} s ({fmt(tools['cpu_s'], 1)} s CPU)" if tools else "not measured",
        f"<= {TARGET_SAMPLE_TOOLS_S:.0f} s",
        None if not tools else tools["wall_s"] <= TARGET_SAMPLE_TOOLS_S,
        f"load average {tools['loadavg_at_start']} at its start" if tools else "",
    )


def codegen_report(codegen: dict, fmt: Callable, verdict: Callable) -> str:
    """The rows alone, as markdown (`bench.py --codegen-only`)."""
    lines = ["| target | measured | bound | result | note |", "|---|---|---|---|---|"]

    def target(what: str, measured: str, bound: str, ok: Optional[bool], note: str = "") -> None:
        lines.append(f"| {what} | {measured} | {bound} | {verdict(ok)} | {note} |")

    codegen_targets(codegen, target, fmt)
    return "\n".join(lines) + "\n"
