"""`make bench`'s row for the configuration file parser (QMPI_CONF): CPU seconds of
`qmpi_conf_read` on a file of 10,000 and of 100,000 sections (each instance named in one
[stack default]), through the core's own runtime/conf.c (bench/conf_parse.c), a fresh
process per sample. Linear parsing makes 10x the sections cost about 10x the time; the
name lookups it replaced made it 100x (100,000 sections: 14.7 s per rank). Target: the
ratio of the medians at most TARGET_CONF_RATIO."""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Callable, Optional

from measure import Mpi, run

CONF_SECTIONS = (10_000, 100_000)
CONF_REPEATS = 5
TARGET_CONF_RATIO = 25.0  # linear: about 10 (a bigger file also misses caches more); quadratic: about 100


def measure_conf_parse(mpi: Mpi, bindir: Path) -> dict:
    """Median CPU seconds of the parser per section count: a dict for results.json."""
    result: dict = {}
    with tempfile.TemporaryDirectory(prefix="qmpi-bench-conf-") as work:
        for sections in CONF_SECTIONS:
            samples = []
            for _ in range(CONF_REPEATS):
                proc = run([str(bindir / "conf_parse"), str(sections), str(Path(work) / "qmpi.conf")], mpi.env)
                line = next((x for x in proc.stdout.splitlines() if x.startswith("{")), None)
                if proc.returncode != 0 or line is None:
                    return {"failed": f"conf_parse {sections}: exit {proc.returncode}: {proc.stderr.strip()[-200:]}"}
                row = json.loads(line)
                samples.append(row["cpu_s"])
            result[str(sections)] = {
                "bytes": row["bytes"],
                "median_cpu_s": statistics.median(samples),
                "samples_cpu_s": samples,
            }
    small, large = (result[str(n)]["median_cpu_s"] for n in CONF_SECTIONS)
    result["ratio"] = large / small if small > 0 else None
    return result


def conf_targets(conf: Optional[dict], target: Callable, fmt: Callable) -> None:
    name = (
        f"QMPI_CONF parsing, {CONF_SECTIONS[1]:,} against {CONF_SECTIONS[0]:,} sections "
        "(CPU time of the parser, 10x the sections)"
    )
    bound = f"<= {TARGET_CONF_RATIO:.0f}x (linear ~10x, quadratic ~100x)"
    if not conf or "failed" in conf or conf.get("ratio") is None:
        target(name, (conf or {}).get("failed", "not measured"), bound, None)
        return
    small, large = (conf[str(n)]["median_cpu_s"] for n in CONF_SECTIONS)
    target(
        name,
        f"{fmt(conf['ratio'], 1)}x ({fmt(small * 1e3, 1)} ms -> {fmt(large * 1e3, 1)} ms)",
        bound,
        conf["ratio"] <= TARGET_CONF_RATIO,
    )
