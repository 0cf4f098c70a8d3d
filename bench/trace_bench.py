"""`make bench`'s per-call tracing rows, beside the core's rows (measure.py runs them like any
row): a call of each parameter-role mix (MPI_Iprobe, MPI_Allreduce, MPI_File_write_at,
MPI_File_seek) through the trace tool (sample_tools/trace/ as libqbtrace.so; files on
tmpfs when there is one: the tool's cost, not the disk's) against the same call through
one empty typed tool, each process pairing its samples with the call to PMPI_; the tool
as shipped, with heap buffers, and the tool of BASELINE_REV, in the same rounds;
MPI_Comm_rank with QMPI_TRACE_FUNCTIONS=all; a thread's first traced call. The merge rows
are trace_merge_rows.py's."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path
from typing import Dict, List, Optional

from measure import BENCH_DIR, Config, run
from trace_merge_rows import merge_targets

# The per-call rows of the trace tool's generated wrappers (trace_roles.qmpi), one call per
# mix of parameter roles: bench_rank's `call` mode, key -> (--call, what is timed, roles,
# whether the row is a target). io-seek, for information: an I/O call without a system
# call, beside io's, after which everything the tracer does costs more.
TRACE_CALLS = {
    "p2p": (
        "iprobe",
        "MPI_Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE), no message",
        "comm, source, tag, status",
        True,
    ),
    "collective": ("allreduce", "MPI_Allreduce of 1 int on MPI_COMM_SELF", "comm, count, datatype", True),
    "io": (
        "write_at",
        "MPI_File_write_at of 8 bytes at offset 0, file opened on MPI_COMM_SELF on tmpfs",
        "file, offset, count, datatype, status",
        True,
    ),
    "io-seek": ("seek", "MPI_File_seek(fh, 0, MPI_SEEK_SET), the same file", "file, offset, whence", False),
}
IO_FILE = "io-bench.dat"  # the I/O calls' file, in the traced runs' directory
PROCESSES_PER_ROUND = 3  # of each per-call row (trace_configs)


# What a traced row runs, besides the floor: the tool as shipped (each thread's buffer its
# tail file, mapped: what a crash leaves is kept), the same with heap buffers
# (QMPI_TRACE_FLUSH=full: nothing kept of a killed rank's buffer), and, when it can be
# built, the tool of BASELINE_REV (the last before issue 33: heap buffers, records made
# after the call): name -> (library, environment, what it is).
BASELINE_REV = "486cabe"
TRACE_VARIANTS = {
    "traced": ("./libqbtrace.so", {}, "as shipped: tail files, a call's record entered before it"),
    "buffered": ("./libqbtrace.so", {"QMPI_TRACE_FLUSH": "full"}, "the same, heap buffers (QMPI_TRACE_FLUSH=full)"),
    "baseline": ("./libqbtrace-base.so", {}, f"the tool at {BASELINE_REV}, before issue 33 (heap buffers)"),
    "discard": (
        "./libqbtrace-discard.so",
        {},
        "as shipped, but a full buffer is thrown away instead of written to the rank file "
        "(built with -DTRACE_BENCH_DISCARD): the file's share of a call is traced − discard",
    ),
    "clock": (
        "./libqbclock.so",
        {},
        "an empty tool that reads the tick counter before and after the call and stores both "
        "(bench/tool_clock.c): the least a tracer does",
    ),
}


def _emptied(directory: Path):
    """After each traced process: its files removed (each run writes new ones: their
    names carry the run), so that tmpfs does not fill over the rounds."""

    def empty() -> None:
        for path in directory.glob("*"):
            if path.is_file() and path.name != IO_FILE:
                path.unlink()

    return empty


def trace_configs(trace_dir: Path, baseline: bool) -> List[Config]:
    empty = _emptied(trace_dir)
    traced_env = {"QMPI_TRACE_DIR": str(trace_dir)}
    variants = {k: v for k, v in TRACE_VARIANTS.items() if baseline or k != "baseline"}
    configs = [
        Config("trace/floor", "bench_core", ["rank"], {"TOOLS": "./t.so"}),
        Config(
            "trace/traced",
            "bench_core",
            ["rank"],
            {"TOOLS": "./libqbtrace.so", "QMPI_TRACE_FUNCTIONS": "all", **traced_env},
            after=empty,
        ),
        # a thread's first traced call: its rank file and tail file made (the first touch
        # of the tail's pages), against the same through one empty tool
        Config("trace-start/floor", "bench_core", ["threads"], {"TOOLS": "./t.so"}, repeats_factor=4),
        Config(
            "trace-start/traced",
            "bench_core",
            ["threads"],
            {"TOOLS": "./libqbtrace.so", **traced_env},
            repeats_factor=4,
            after=empty,
        ),
    ]
    # Each per-call row: the call through the trace tool (default functions: these are
    # of the `operations` group), each variant, and, as its floor, through one empty typed
    # tool; each process also times the same call to PMPI_ directly, samples in turn
    # (--pair-pmpi). PROCESSES_PER_ROUND of each per round: the ns of one library differ
    # between its processes in clusters ~30 ns apart (57-70 against 94-119 ns on the
    # collective row of one run), and a median over 4 processes followed them.
    for mix, (call, _, _, _) in TRACE_CALLS.items():
        args = ["call", "--call", call, "--pair-pmpi"]
        if mix.startswith("io"):
            args += ["--file", str(trace_dir / IO_FILE)]
        configs.append(
            Config(f"trace-{mix}/floor", "bench_core", args, {"TOOLS": "./t.so"}, processes=PROCESSES_PER_ROUND)
        )
        for name, (library, env, _) in variants.items():
            configs.append(
                Config(
                    f"trace-{mix}/{name}",
                    "bench_core",
                    args,
                    {"TOOLS": library, **env, **traced_env},
                    after=empty,
                    processes=PROCESSES_PER_ROUND,
                )
            )
    return configs


def build_baseline(bindir: Path, core: Path, mpicc: str, qmpigen: List[str], env: Dict[str, str]) -> Optional[str]:
    """The trace tool of BASELINE_REV, built as bench/Makefile builds libqbtrace.so, into
    bindir/libqbtrace-base.so; None, or why it could not be."""
    import subprocess

    source = bindir / "trace-baseline"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(BENCH_DIR.parent), "archive", BASELINE_REV, "sample_tools"], capture_output=True
    )
    if archive.returncode != 0:
        return f"git archive {BASELINE_REV}: {archive.stderr.decode(errors='replace').strip() or 'failed'}"
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    out = source / "out"
    proc = run(
        [
            *("make", "-C", str(source / "sample_tools"), f"CORE={core}", f"OUT={out}", f"MPICC={mpicc}"),
            f"QMPIGEN={' '.join(qmpigen)}",
            str(out / "libtrace.so"),
        ],
        env,
    )
    if proc.returncode != 0:
        return f"building the tool at {BASELINE_REV} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
    shutil.copy(out / "libtrace.so", bindir / "libqbtrace-base.so")
    return None


def _paired_excess(rows: Dict[str, dict], key: str) -> Optional[float]:
    """Median of a row's samples minus the PMPI_ samples taken in turn with them."""
    own = (rows.get(key) or {}).get("samples_ns")
    pmpi = (rows.get(f"pair-pmpi/{key}") or {}).get("samples_ns")
    if not own or not pmpi or len(own) != len(pmpi):
        return None
    return statistics.median(x - y for x, y in zip(own, pmpi))


def _variant(rows: Dict[str, dict], mix: str, name: str) -> Optional[dict]:
    floor, traced = rows.get(f"trace-{mix}/floor"), rows.get(f"trace-{mix}/{name}")
    if not floor or not traced:
        return None
    a, b = _paired_excess(rows, f"trace-{mix}/{name}"), _paired_excess(rows, f"trace-{mix}/floor")
    return {
        "traced_ns": traced["median_ns"],
        "added_ns": traced["median_ns"] - floor["median_ns"],
        "traced_over_pmpi_ns": a,
        "added_paired_ns": a - b if a is not None and b is not None else None,
    }


def trace_call_summary(rows: Dict[str, dict]) -> Dict[str, dict]:
    """The per-call rows: traced and floor medians, their difference and ratio; and the
    difference paired with PMPI_ in each process (the target's measurement: whole
    processes run faster or slower, which an MPI call of a microsecond shows); the same
    for each variant of the tool (TRACE_VARIANTS), measured in the same rounds."""
    out: Dict[str, dict] = {}
    for mix, (call, label, roles, is_target) in TRACE_CALLS.items():
        floor, traced = rows.get(f"trace-{mix}/floor"), rows.get(f"trace-{mix}/traced")
        if not floor or not traced:
            continue
        row = {
            "call": call,
            "label": label,
            "roles": roles,
            "target": is_target,
            "floor_ns": floor["median_ns"],
            "traced_ns": traced["median_ns"],
            "added_ns": traced["median_ns"] - floor["median_ns"],
            "ratio": traced["median_ns"] / floor["median_ns"] if floor["median_ns"] > 0 else None,
            "pmpi_ns": (rows.get(f"pair-pmpi/trace-{mix}/floor") or {}).get("median_ns"),
            "floor_over_pmpi_ns": _paired_excess(rows, f"trace-{mix}/floor"),
            "traced_over_pmpi_ns": _paired_excess(rows, f"trace-{mix}/traced"),
            "variants": {name: v for name in TRACE_VARIANTS if (v := _variant(rows, mix, name)) is not None},
        }
        a, b = row["traced_over_pmpi_ns"], row["floor_over_pmpi_ns"]
        row["added_paired_ns"] = a - b if a is not None and b is not None else None
        out[mix] = row
    floor, traced = rows.get("trace/floor"), rows.get("trace/traced")
    if floor and traced:  # MPI_Comm_rank through trace_all.qmpi's wrapper (QMPI_TRACE_FUNCTIONS=all)
        out["other"] = {
            "call": "comm_rank",
            "label": "MPI_Comm_rank(MPI_COMM_WORLD, &r), QMPI_TRACE_FUNCTIONS=all",
            "roles": "none recorded (kind other: a 24-byte record)",
            "target": True,
            "floor_ns": floor["median_ns"],
            "traced_ns": traced["median_ns"],
            "added_ns": traced["median_ns"] - floor["median_ns"],
            "ratio": traced["median_ns"] / floor["median_ns"] if floor["median_ns"] > 0 else None,
            "added_paired_ns": None,
            "variants": {},
        }
    return out


def thread_start_summary(rows: Dict[str, dict]) -> Optional[dict]:
    """A thread's first traced call (its rank file and tail file made, the tail's pages
    touched the first time) over the same through one empty tool, and that cost spread
    over the calls one buffer holds (QMPI_TRACE_BUFFER's default 1 MiB of 40-byte
    records, format 7's for a collective or a file write: 26,214 calls): what the first
    touch of a page costs, amortised."""
    floor, traced = rows.get("trace-start/floor"), rows.get("trace-start/traced")
    if not floor or not traced:
        return None
    added = traced["median_ns"] - floor["median_ns"]
    return {
        "threads": traced["samples"],
        "floor_first_ns": floor["median_ns"],
        "traced_first_ns": traced["median_ns"],
        "added_ns": added,
        "calls_per_buffer": BUFFER_BYTES // RECORD_BYTES,
        "record_bytes": RECORD_BYTES,
        "per_call_over_one_buffer_ns": added / (BUFFER_BYTES // RECORD_BYTES),
    }


BUFFER_BYTES, RECORD_BYTES = 1 << 20, 40
PAGE_BYTES = 4096


def probe_trace_dir(directory: Path, mib: int = 64, rounds: int = 5) -> dict:
    """What the trace directory's file system charges for a rank file's bytes, as the tool
    writes them (a full 1 MiB buffer at a time): `mib` MiB appended to a new file, then
    written over the same file again; medians of `rounds`, in ns a byte. Appending
    allocates the file's pages; writing over them does not, so the difference is what
    a new page costs. A record's bytes at the appending cost are a floor of every traced
    call's row that no work in the tool can lower."""
    import os
    import time

    chunk = b"\x5a" * BUFFER_BYTES
    appended: List[float] = []
    rewritten: List[float] = []
    path = directory / "fs-probe.dat"
    for _ in range(rounds):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            for timings in (appended, rewritten):
                os.lseek(fd, 0, os.SEEK_SET)
                start = time.perf_counter_ns()
                for _ in range(mib):
                    os.write(fd, chunk)
                timings.append((time.perf_counter_ns() - start) / (mib * BUFFER_BYTES))
        finally:
            os.close(fd)
            path.unlink()
    append, rewrite = statistics.median(appended), statistics.median(rewritten)
    return {
        "directory_fs": _fs_type(directory),
        "append_ns_per_byte": append,
        "rewrite_ns_per_byte": rewrite,
        "new_page_us": (append - rewrite) * PAGE_BYTES / 1000,
        "record_bytes": RECORD_BYTES,
        "record_append_ns": append * RECORD_BYTES,
    }


def _fs_type(directory: Path) -> str:
    """The file system type of `directory` (the longest mount point over it)."""
    best, kind = "", "?"
    target = str(directory.resolve())
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return kind
    for line in mounts:
        fields = line.split()
        if len(fields) >= 3:
            point = fields[1].replace("\\040", " ")
            if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
                best, kind = point, fields[2]
    return kind


def trace_call_targets(summary: Dict[str, dict], target, fmt, trace_fs: Optional[dict] = None) -> None:
    """A target per role mix (issue 25: traced call overhead <= 100 ns for a generated
    wrapper; issue 33: no more than the tool before it, measured in the same rounds, and
    <= 40 ns), through analysis.summarise's `target`; and, for information, what the
    trace directory charges for the records' bytes (probe_trace_dir)."""
    if trace_fs is not None:
        target(
            "tracing: the trace directory's cost of a rank file's bytes (1 MiB writes), for information",
            f"{trace_fs['directory_fs']}: appended {fmt(trace_fs['append_ns_per_byte'], 3)} ns/B, written over "
            f"{fmt(trace_fs['rewrite_ns_per_byte'], 3)} ns/B: a new page {fmt(trace_fs['new_page_us'], 2)} µs; "
            f"a {trace_fs['record_bytes']}-byte record's share {fmt(trace_fs['record_append_ns'])} ns",
            "—",
            None,
        )
    for mix in (m for m, (_, _, _, is_target) in TRACE_CALLS.items() if is_target):
        row = summary.get(mix)
        what = f"tracing, generated wrapper, {mix} ({TRACE_CALLS[mix][0]}), ns added per traced call over an empty tool"
        if row is None:
            target(what, "—", "", None, "not run")
            continue
        added = row["added_paired_ns"]
        target(
            what,
            f"{fmt(added)} ns ({fmt(row['traced_over_pmpi_ns'])} − {fmt(row['floor_over_pmpi_ns'])} over PMPI, "
            f"paired); medians {fmt(row['traced_ns'])} − {fmt(row['floor_ns'])} = {fmt(row['added_ns'])} ns, "
            f"{fmt(row['ratio'])}× the floor",
            f"≤ {TARGET_TRACE_NS:g} ns; issue 33: ≤ {TARGET_CRASH_SAFE_NS:g} ns",
            None if added is None else added <= TARGET_TRACE_NS,
            ""
            if added is None
            else f"≤ {TARGET_CRASH_SAFE_NS:g} ns: {'yes' if added <= TARGET_CRASH_SAFE_NS else 'no'}",
        )
        _where_it_goes(mix, added, row["variants"], target, fmt)
        base = row["variants"].get("baseline")
        if base is not None and added is not None and base["added_paired_ns"] is not None:
            target(
                f"tracing, {mix}: the tool as shipped against the tool at {BASELINE_REV} (issue 33: no more)",
                f"{fmt(added)} vs {fmt(base['added_paired_ns'])} ns (paired, same rounds)",
                f"≤ the baseline + {BASELINE_NOISE_NS:g} ns (noise)",
                added <= base["added_paired_ns"] + BASELINE_NOISE_NS,
            )


def _where_it_goes(mix: str, added: Optional[float], variants: Dict[str, dict], target, fmt) -> None:
    """For information: a traced call's ns as the least a tracer does (two tick reads and a
    record stored: the clock variant), writing the records to the rank file (traced −
    discard), and the rest, the tool's own work."""
    clock = (variants.get("clock") or {}).get("added_paired_ns")
    discard = (variants.get("discard") or {}).get("added_paired_ns")
    if added is None or clock is None:
        return
    parts = f"two tick reads and a record {fmt(clock)}"
    if discard is not None:
        parts += f", the rank file's writes {fmt(added - discard)}, the rest {fmt(discard - clock)}"
    target(
        f"tracing, {mix}: where a traced call's ns go (bench/tool_clock.c; the tool built to throw its "
        "buffers away), for information",
        f"{parts} ns (of {fmt(added)}, paired, same rounds)",
        "—",
        None,
    )


def trace_targets(rows: Dict[str, dict], merge: Optional[Dict], target, fmt) -> None:
    """Adds the tracing targets through analysis.summarise's `target`: the traced
    MPI_Comm_rank row's here, the merge rows' (trace_merge_rows.py)."""
    floor, traced = rows.get("trace/floor"), rows.get("trace/traced")
    if floor and traced:
        added = traced["median_ns"] - floor["median_ns"]
        target(
            "tracing, ns added per traced call (MPI_Comm_rank, QMPI_TRACE_FUNCTIONS=all, files on tmpfs) over an "
            "empty tool",
            f"{fmt(added)} ns ({fmt(traced['median_ns'])} − {fmt(floor['median_ns'])})",
            f"≤ {TARGET_TRACE_NS:g} ns",
            added <= TARGET_TRACE_NS,
        )
    merge_targets(merge, target, fmt)


TARGET_TRACE_NS = 100.0
TARGET_CRASH_SAFE_NS = 40.0  # issue 33's goal for every role mix, crash-proof
BASELINE_NOISE_NS = 3.0  # what paired medians of two builds move by between runs here
