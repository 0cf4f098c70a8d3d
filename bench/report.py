"""`make bench`, stage 3: results.md, the side-by-side table of `bench.py combine`, and
the plot, from the results dict. The markdown comes from jinja templates in
bench/templates/, which read like the report they produce; this module only prepares
the rows they lay out."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import List, Optional, Sequence

import jinja2
from analysis import DESIGNED_BYTES_PER_FUNCTION, fmt
from measure import BENCH_DIR, EXTRA_VARIANTS, FORTRAN_ROWS, PINGPONG_SIZES, REF_EXTRA_LEVELS, VARIANTS, log

LABELS = {**VARIANTS, **EXTRA_VARIANTS}
ZERO_TOOL_ROWS = (
    ("direct", "direct PMPI, application not linked with libqmpi"),
    ("interposer", "minimal PMPI interposer, -fno-plt (the floor used)"),
    ("interposer-plt", "minimal PMPI interposer, PLT"),
    ("core/0", "core, 0 tools"),
)
TOOL_COLUMNS = (
    ("ref-compact", "reference chain (floor)"),
    *((v, v) for v in (*VARIANTS, *EXTRA_VARIANTS)),
    ("ref-core-layout", "ref., core's table layout"),
    ("ref-core-layout-hugepages", "ref., core layout, huge pages"),
    ("ref-frames", "ref., frames"),
)


def median_at(rows: dict, column: str, n: int) -> str:
    """A cell of the ns-per-call tables: 0 tools of every core variant is the core/0 row."""
    key = f"{column}/{n}" if column.startswith("ref-") or n else "core/0"
    return fmt(rows[key]["median_ns"]) if key in rows else "—"


def latency(rows: dict, config: str, size: int) -> str:
    row = rows.get(f"pingpong/{config}/{size}B")
    return f"{fmt(row['median_ns'], 0)} ({fmt(row['q1_ns'], 0)}–{fmt(row['q3_ns'], 0)})" if row else "—"


def _by_length(names) -> list:
    return sorted(names, key=lambda k: (len(k), k))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(BENCH_DIR / "templates")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(fmt=fmt, median_at=median_at, latency=latency, py=str, format_seconds=lambda t: f"{t:.3f}")
    return env


def markdown(res: dict, brief: bool = False) -> str:
    """results.md; `brief`: the part `make bench` prints at the end."""
    counts = res["counts"]
    return (
        _environment()
        .get_template("results.md.j2")
        .render(
            res=res,
            brief=brief,
            labels=LABELS,
            zero_tool_rows=ZERO_TOOL_ROWS,
            fortran_rows=FORTRAN_ROWS,
            tool_columns=TOOL_COLUMNS,
            tool_counts=sorted({0, *counts, *(m for m in REF_EXTRA_LEVELS if m < max(counts))}),
            pingpong_sizes=PINGPONG_SIZES,
            pingpong_configs=_by_length({k.rsplit("/", 1)[0] for k in res["pingpong_ns"]}),
            codegen_cpu_median=statistics.median(res["codegen_cpu_s"]) if res.get("codegen_cpu_s") else None,
            cell_bytes=DESIGNED_BYTES_PER_FUNCTION,
        )
    )


def combine(paths: Sequence[str]) -> str:
    """Side-by-side markdown of several results.json (for docs/performance.md)."""
    results = [json.loads(Path(p).read_text()) for p in paths]
    # The C targets side by side by position (their names carry the tool count); the
    # Fortran one by name, after the first: runs on MPIs without Fortran lack it.
    split = [
        (
            [t for t in r["targets"] if not t["target"].startswith("Fortran")],
            [t for t in r["targets"] if t["target"].startswith("Fortran")],
        )
        for r in results
    ]
    rows = [(t, [c[i] if i < len(c) else None for c, _ in split]) for i, t in enumerate(split[0][0])]
    fortran_targets = {t["target"]: t for _, f in split for t in f}
    rows[1:1] = [
        (t, [next((x for x in f if x["target"] == name), None) for _, f in split])
        for name, t in fortran_targets.items()
    ]
    targets = [(t, found, len({f["bound"] for f in found if f}) == 1) for t, found in rows]
    fortran = [r.get("fortran") or {} for r in results]
    return (
        _environment()
        .get_template("combine.md.j2")
        .render(
            names=[r["mpi"].split(" (")[0] for r in results],
            results=results,
            targets=targets,
            tool_counts=(0, *sorted({n for r in results for n in r["counts"]})),
            variants=(*VARIANTS, *EXTRA_VARIANTS),
            labels=LABELS,
            pingpong_sizes=PINGPONG_SIZES,
            pingpong_configs=_by_length(
                {k.split("/")[1] for r in results for k in r["rows"] if k.startswith("pingpong/")}
            ),
            fortran=fortran if any(f.get("driver") for f in fortran) else None,
            fortran_rows=FORTRAN_ROWS,
            trace_mixes=list(dict.fromkeys(m for r in results for m in (r.get("trace_calls") or {}))),
        )
    )


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
    styles = {
        "exec": ("exec_func", "tab:red", "s"),
        "typed": ("typed QMPI_Next_Comm_rank", "tab:blue", "o"),
        "callback": ("callback, cached next", "tab:green", "^"),
    }
    for variant, (label, colour, marker) in styles.items():
        xs = [n for n in counts if f"{variant}/{n}" in rows]
        left.plot(xs, [rows[f"{variant}/{n}"]["median_ns"] for n in xs], marker=marker, color=colour, label=label)
        per = res["variants"][variant]["per_layer_ns"]
        right.plot(sorted(per), [per[n] for n in sorted(per)], marker=marker, color=colour, label=label)

    def ref_levels(layout: str) -> List[int]:
        return sorted(int(k.rsplit("/", 1)[1]) for k in rows if k.startswith(f"ref-{layout}/") and not k.endswith("/0"))

    xs = ref_levels("compact")
    left.plot(
        xs,
        [rows[f"ref-compact/{n}"]["median_ns"] for n in xs],
        color="black",
        linestyle="--",
        label="floor: reference chain",
    )
    for layout, colour, style, label in (
        ("compact", "black", "--", "floor: reference chain"),
        ("core-layout", "grey", ":", "reference chain, core's table layout"),
    ):
        zero = rows.get(f"ref-{layout}/0", {}).get("median_ns")
        xs = ref_levels(layout)
        if zero is not None and xs:
            right.plot(
                xs,
                [(rows[f"ref-{layout}/{n}"]["median_ns"] - zero) / n for n in xs],
                color=colour,
                linestyle=style,
                label=label,
            )
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
