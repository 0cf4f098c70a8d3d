#!/usr/bin/env python3
"""One timed merge for `make bench`'s merge rows (bench/trace_merge_rows.py): merges DIR into
OUT with only the given outputs of `qmpigen trace` and prints one JSON line: wall
seconds of the merge, calls, OTF2 events, how OTF2 was written, and the process's peak
RSS before the merge (interpreter, numpy, otf2 imported) and after it.

    python bench/trace_merge.py DIR OUT otf2|json|timeline[,...]
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path


def main() -> int:
    directory, out, outputs = Path(sys.argv[1]), Path(sys.argv[2]), frozenset(sys.argv[3].split(","))
    import matplotlib  # noqa: F401  (imported before the baseline, as `qmpigen trace` does)
    import numpy  # noqa: F401
    import otf2  # noqa: F401

    from qmpigen.trace import loops
    from qmpigen.trace.merge import merge

    loops.load()  # the C loops (built at install time) loaded before timing
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    report = merge(directory, out, outputs=outputs)
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "outputs": sorted(outputs),
                "seconds": seconds,
                "calls": report.events,
                "messages": report.messages,
                "otf2_events": report.otf2_events,
                "json_events": report.json_events,
                "otf2_mode": report.otf2_mode,
                "rss_before_kb": before_kb,
                "rss_peak_kb": peak_kb,
                "notes": report.notes,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
