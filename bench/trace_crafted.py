#!/usr/bin/env python3
"""`make bench`'s crafted-input rows (issue 32, item 7): rank files crafted to cost the
merge far more than their bytes (tests/trace_writer.py's CRAFTED shapes: one
communicator over 20,000 COMM records, a world of 2^31-1 ranks with a communicator naming
8,000 and 100,000 of them, 8,192 function names), each merged into every output in fresh
processes (bench/trace_merge.py) beside a valid rank file of the same size (the ring of
trace_writer.rank_file): the ratios of their median merge times and of their peak RSS
growth over the interpreter with its imports. Before the fixes: 44 s, over 300 s and
75 s against about 2 s. Target: each ratio at most TARGET_CRAFTED_RATIO.

    python bench/trace_crafted.py [--quick]     # one JSON line per row
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))

ROWS = (("comm_records", 20_000), ("world_claim", 8_000), ("world_claim", 100_000), ("many_functions", 8_192))
REPEATS, REPEATS_QUICK = 3, 1
OUTPUTS = "otf2,json,timeline"
TARGET_CRAFTED_RATIO = 3.0


def _merge(directory: Path, out: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, str(BENCH_DIR / "trace_merge.py"), str(directory), str(out), OUTPUTS],
        capture_output=True,
        text=True,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("{")), None)
    if proc.returncode != 0 or line is None:
        return {"failed": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    shutil.rmtree(out, ignore_errors=True)
    return json.loads(line)


def _median_of(directory: Path, out: Path, repeats: int) -> dict:
    samples = [_merge(directory, out) for _ in range(repeats)]
    failed = next((s for s in samples if "failed" in s), None)
    if failed:
        return failed
    return {
        "seconds": statistics.median(s["seconds"] for s in samples),
        "rss_growth_bytes": max((s["rss_peak_kb"] - s["rss_before_kb"]) * 1024 for s in samples),
        "rss_peak_bytes": max(s["rss_peak_kb"] * 1024 for s in samples),
    }


def row(shape: str, scale: int, repeats: int) -> dict:
    import trace_writer

    work = Path(tempfile.mkdtemp(prefix="qmpi-bench-crafted-"))
    try:
        crafted = trace_writer.CRAFTED[shape](scale)
        valid = trace_writer.valid_of_size(len(crafted))
        result: dict = {"shape": shape, "scale": scale, "bytes": len(crafted), "valid_bytes": len(valid)}
        for name, data in (("crafted", crafted), ("valid", valid)):
            (work / name).mkdir()
            (work / name / "synth_node_0_0.L1.qtr").write_bytes(data)
            result[name] = _median_of(work / name, work / f"{name}-out", repeats)
        c, v = result["crafted"], result["valid"]
        if "failed" not in c and "failed" not in v:
            result["time_ratio"] = c["seconds"] / v["seconds"]
            # growth over a floor of 1 MiB: a merge of a small file grows by little and noisily
            result["memory_ratio"] = max(c["rss_growth_bytes"], 2**20) / max(v["rss_growth_bytes"], 2**20)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure_crafted(quick: bool, log: Optional[Callable[[str], None]] = None) -> List[Dict]:
    rows = []
    for shape, scale in ROWS:
        r = row(shape, scale, REPEATS_QUICK if quick else REPEATS)
        rows.append(r)
        if log is not None:
            log(_text(r))
    return rows


def _text(r: dict) -> str:
    c, v = r["crafted"], r["valid"]
    what = f"crafted merge, {r['shape']} {r['scale']:,} ({r['bytes']:,} bytes)"
    if "time_ratio" not in r:
        return f"{what}: {c.get('failed') or v.get('failed')}"
    return (
        f"{what}: {c['seconds']:.2f} s, {c['rss_growth_bytes'] / 2**20:.0f} MB growth; a valid file of the same "
        f"size {v['seconds']:.2f} s, {v['rss_growth_bytes'] / 2**20:.0f} MB: {r['time_ratio']:.2f}x time, "
        f"{r['memory_ratio']:.2f}x memory"
    )


def crafted_targets(rows: Optional[List[Dict]], target: Callable, fmt: Callable) -> None:
    """A target per row, through analysis.summarise's `target`."""
    for r in rows or []:
        what = f"crafted merge input, {r['shape']} {r['scale']:,}: time and memory against a valid file of its size"
        if "time_ratio" not in r:
            target(what, "—", "", None, r["crafted"].get("failed") or r["valid"].get("failed"))
            continue
        worst = max(r["time_ratio"], r["memory_ratio"])
        target(
            what,
            f"{fmt(r['time_ratio'])}× time ({r['crafted']['seconds']:.2f} s vs {r['valid']['seconds']:.2f} s), "
            f"{fmt(r['memory_ratio'])}× memory growth",
            f"≤ {TARGET_CRAFTED_RATIO:g}×",
            worst <= TARGET_CRAFTED_RATIO,
            f"{r['bytes']:,} bytes",
        )


def main(argv: List[str]) -> int:
    quick = "--quick" in argv
    for shape, scale in ROWS:
        print(json.dumps(row(shape, scale, REPEATS_QUICK if quick else REPEATS)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
