#!/usr/bin/env python3
"""`make bench`'s merge rows at scale, on synthetic rank files (tests/trace_writer.py,
the documented format): merge time and peak memory at 1,024 and 8,192 rank files of the
same calls each (memory should stay flat in the number of files, time linear in the
events), and the 8,192 files' calls in 64 files (the floor of the per-file row). One JSON
line per row; `python bench/trace_scale.py [FILES:CALLS ...]`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))

# 1,024 and 8,192 files of 200 calls; the same calls as 8,192 x 200 in 64 files, the floor
# of the per-file row (trace_merge_rows.scale_targets)
ROWS = ((1024, 200), (8192, 200), (64, 25600))


def row(files: int, calls: int, outputs: str = "otf2,json,timeline") -> dict:
    import trace_writer

    work = Path(tempfile.mkdtemp(prefix="qmpi-bench-scale-"))
    try:
        trace_writer.write_run(work / "run", files, n_calls=calls)
        proc = subprocess.run(
            [sys.executable, str(BENCH_DIR / "trace_merge.py"), str(work / "run"), str(work / "out"), outputs],
            capture_output=True,
            text=True,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("{")), None)
        if proc.returncode != 0 or line is None:
            return {"files": files, "failed": (proc.stderr.strip().splitlines() or ["?"])[-1]}
        r = json.loads(line)
        return {
            "files": files,
            "calls_per_file": calls,
            "outputs": outputs,
            "seconds": round(r["seconds"], 2),
            "calls": r["calls"],
            "calls_per_s": round(r["calls"] / r["seconds"]),
            "rss_peak_mb": round(r["rss_peak_kb"] / 1024),
            "rss_growth_mb": round((r["rss_peak_kb"] - r["rss_before_kb"]) / 1024),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv) -> int:
    rows = [tuple(map(int, a.split(":"))) for a in argv] or ROWS
    for files, calls in rows:
        print(json.dumps(row(files, calls)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
