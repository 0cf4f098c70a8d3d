"""`make bench`, stage 1: build the benchmark and run its configurations, collecting
samples (see bench.py for the whole). Nothing here interprets the numbers."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from qmpigen.mpi.fortran_libs import driver_beside
from qmpigen.mpi.quirks_fortran import FORTRAN_DRIVER_NAMES

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
TOOL_COUNTS = (1, 2, 4, 8, 16, 64, 1000, 10000)
# Extra chain lengths for the reference chain only (cheap, one process): they show how
# the table geometry behaves between the tool counts above.
REF_EXTRA_LEVELS = (32, 128, 256, 512)
PINGPONG_SIZES = (0, 1024)
PINGPONG_TOOLS = 8
RUN_TIMEOUT_S = 600

# Variants of "the core with N tools": how the tools call the next link.
VARIANTS = {
    "exec": "exec_func (QMPI_TABLE_QUERY + EXEC_FUNC)",
    "typed": "typed next call (QMPI_Next_Comm_rank)",
    "callback": "callback, next cached per instance at init",
}
# Supplementary variants: not targets, they explain the numbers.
EXTRA_VARIANTS = {
    "frames": "typed, tool keeps its frame (no tail call)",
    "callback-storage": "callback, next found via QMPI_Get_tool_storage per call",
}


def log(message: str) -> None:
    print(f"[bench] {message}", flush=True)


@dataclass
class Mpi:
    mpicc: str
    mpiexec: List[str]
    env: Dict[str, str]


def make_env(mpicc: str, mpiexec: Sequence[str]) -> Dict[str, str]:
    env = dict(os.environ)
    dirs = [str(Path(shutil.which(mpicc) or mpicc).resolve().parent)]
    launcher = shutil.which(mpiexec[0]) or mpiexec[0]
    dirs.append(str(Path(launcher).resolve().parent))
    env["PATH"] = os.pathsep.join(dict.fromkeys(dirs + [env.get("PATH", "")]))
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    for name in ("TOOLS", "QMPI_TOOL_LIST", "MPIR_CVAR_QMPI_TOOL_LIST", "LD_PRELOAD"):
        env.pop(name, None)
    return env


def run(
    cmd: Sequence[str],
    env: Dict[str, str],
    cwd: Optional[Path] = None,
    quiet: bool = True,
    timeout: float = RUN_TIMEOUT_S,
) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not quiet:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
    return proc


def must(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    if proc.returncode != 0:
        raise SystemExit(f"bench: {what} failed (exit {proc.returncode})")
    return proc


def timed(cmd: Sequence[str], env: Dict[str, str], what: str, cwd: Optional[Path] = None) -> Tuple[float, float]:
    """Wall-clock seconds and CPU seconds (user + system, all child processes) of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    must(run(cmd, env, cwd=cwd), what)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def loadavg() -> Optional[List[float]]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None


# ---- measurements ------------------------------------------------------------------------


@dataclass
class Config:
    """One process to run: a binary, its arguments, tool list, ranks."""

    key: str  # e.g. "typed/64", "direct", "ref", "pingpong/core+8typed"
    binary: str
    args: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    ranks: int = 1
    pin: bool = True
    repeats_factor: int = 1  # more samples per process (paired comparisons)
    # processes per round: a row whose processes differ more than its samples (where the
    # loader and heap put things) gets its median over more of them
    processes: int = 1
    samples: Dict[str, List[float]] = field(default_factory=dict)  # measurement key -> ns
    wall: Dict[str, List[float]] = field(default_factory=dict)  # the same, wall-clock means
    info: Dict[str, dict] = field(default_factory=dict)  # measurement key -> last JSON
    failures: List[str] = field(default_factory=list)
    seconds: float = 0.0
    after: Optional[Callable[[], None]] = None  # run after each process (the trace rows remove their files)


ENTRY_LABELS = ("direct", "interposer", "interposer-plt", "core")


def median_difference(a: Optional[Sequence[float]], b: Optional[Sequence[float]]) -> Optional[float]:
    """Median of sample-by-sample differences a - b (samples taken in turn in one process)."""
    if not a or not b or len(a) != len(b):
        return None
    return statistics.median(x - y for x, y in zip(a, b))


def row_median(rows: Dict[str, dict], key: str) -> Optional[float]:
    """A summarised row's median ns, None if the row did not run."""
    return rows[key]["median_ns"] if key in rows else None


def tool_list(name: str, count: int) -> str:
    return ":".join([name] * count)


def build_configs(counts: Sequence[int], bindir: Path, core: Path) -> List[Config]:
    levels = ",".join(str(n) for n in sorted({0, *counts, *REF_EXTRA_LEVELS}))
    libs = ",".join(str(p) for p in (bindir / "libqbinterp.so", bindir / "libqbinterpplt.so", core / "libqmpi.so"))
    configs = [
        Config("entry", "bench_direct", ["entry", "--libs", libs], repeats_factor=2),
        Config("direct", "bench_direct", ["rank"]),
        Config("interposer", "bench_interp", ["rank"]),
        Config("interposer-plt", "bench_interp_plt", ["rank"]),
        Config("core/0", "bench_core", ["rank"]),
        Config("ref", "bench_direct", ["ref", "--levels", levels]),
    ]
    # Short names keep TOOLS under the kernel's 128 KiB limit for one variable at 10,000.
    thesis = {"typed": "./t.so", "exec": "./e.so", "frames": "./f.so"}
    callback = {"callback": "qbcb", "callback-storage": "qbcbs"}
    for n in counts:
        for variant, path in thesis.items():
            layout = "frames" if variant == "frames" else "compact"
            args = ["rank", "--pair-ref", str(n), "--pair-layout", layout]
            configs.append(Config(f"{variant}/{n}", "bench_core", args, {"TOOLS": tool_list(path, n)}))
        for variant, name in callback.items():
            configs.append(
                Config(
                    f"{variant}/{n}",
                    "bench_core_cb",
                    ["rank", "--pair-ref", str(n)],
                    {"QMPI_TOOL_LIST": tool_list(name, n)},
                )
            )
    sizes = ",".join(str(s) for s in PINGPONG_SIZES)
    pp = ["pingpong", "--sizes", sizes]
    configs += [
        Config("pingpong/direct", "bench_direct", pp, ranks=2, pin=False),
        Config("pingpong/core+0", "bench_core", pp, ranks=2, pin=False),
        Config(
            f"pingpong/core+{PINGPONG_TOOLS}typed",
            "bench_core",
            pp,
            {"TOOLS": tool_list("./t.so", PINGPONG_TOOLS)},
            ranks=2,
            pin=False,
        ),
        Config(
            f"pingpong/core+{PINGPONG_TOOLS}callback",
            "bench_core_cb",
            pp,
            {"QMPI_TOOL_LIST": tool_list("qbcb", PINGPONG_TOOLS)},
            ranks=2,
            pin=False,
        ),
    ]
    return configs


# ---- Fortran (MPIs with a Fortran driver beside mpicc: Debian's, not the PyPI wheels) ------

FORTRAN_SYMBOL = "mpi_comm_rank_"  # gfortran's name of the timed routine
FORTRAN_ENTRY_LABELS = ("own", "core")  # bench_rank.f90 entry: arg 0, 1
FORTRAN_ROWS = (
    ("fortran/own", "the MPI's own Fortran binding, application not linked with libqmpi (the floor)"),
    ("fortran/core+0", "core's Fortran entry, 0 tools"),
    ("fortran/core+1typed", "core's Fortran entry, 1 empty typed tool"),
)


def fortran_driver(mpicc: str) -> Optional[str]:
    """mpicc -> mpif90 (or mpifort) in the same directory: the driver qmpigen build-core
    also looks for (the benchmark runs with the Python that has qmpigen)."""
    found = driver_beside((mpicc,))
    return found[0] if found else None


def exports(lib: Path, symbol: str) -> Optional[bool]:
    """Whether a shared library defines a dynamic symbol; None without nm."""
    if shutil.which("nm") is None:
        return None
    proc = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return None
    return any(line.split()[-1] == symbol for line in proc.stdout.splitlines() if line.strip())


def prepare_fortran(request: str, mpicc: str, core: Path, bindir: Path, env: Dict[str, str]) -> dict:
    """Builds bench_rank.f90 both ways when the MPI has a Fortran driver and the core
    Fortran entries. {"driver": ...} or {"skipped": why}; says which on the log."""
    status: dict = {"driver": None}
    driver = None if request == "none" else (fortran_driver(mpicc) if request == "auto" else request)
    if driver is None:
        status["skipped"] = (
            "--fortran none"
            if request == "none"
            else f"no Fortran driver beside {mpicc} ({' or '.join(FORTRAN_DRIVER_NAMES)})"
        )
    elif exports(core / "libqmpi.so", FORTRAN_SYMBOL) is False:
        status["skipped"] = f"the core defines no {FORTRAN_SYMBOL} (generated without Fortran entries)"
    else:
        version = run([driver, "--version"], env)
        if version.returncode == 0 and version.stdout.strip():
            status["compiler"] = version.stdout.strip().splitlines()[0]
        proc = run(
            [
                "make",
                "-C",
                str(BENCH_DIR),
                "fortran",
                f"CORE={core}",
                f"OUT={bindir}",
                f"MPICC={mpicc}",
                f"MPIF90={driver}",
            ],
            env,
        )
        if proc.returncode != 0:
            status["skipped"] = f"building bench_rank.f90 with {driver} failed (exit {proc.returncode})"
        else:
            status["driver"] = driver
    log(
        f"Fortran rows with {driver} ({status.get('compiler', '?')})"
        if status["driver"]
        else f"Fortran rows skipped: {status['skipped']}"
    )
    return status


def fortran_configs(core: Path) -> List[Config]:
    return [
        Config("fortran-entry", "bench_f_direct", ["entry", "--libs", str(core / "libqmpi.so")], repeats_factor=2),
        Config("fortran/own", "bench_f_direct", ["rank"]),
        Config("fortran/core+0", "bench_f_core", ["rank"]),
        Config("fortran/core+1typed", "bench_f_core", ["rank"], {"TOOLS": "./t.so"}),
    ]


def measurement_key(config: Config, record: dict) -> str:
    kind = record["kind"]
    if kind == "fentry":
        return f"fentry/{FORTRAN_ENTRY_LABELS[record['arg']]}"
    if kind == "ref":
        return f"ref-{record['layout']}/{record['arg']}"
    if kind == "pair-ref":
        return f"pair-ref/{config.key}"
    if kind == "pair-pmpi":
        return f"pair-pmpi/{config.key}"
    if kind == "entry":
        return f"entry/{ENTRY_LABELS[record['arg']]}"
    if kind == "pingpong":
        return f"{config.key}/{record['arg']}B"
    return config.key


def run_config(config: Config, mpi: Mpi, bindir: Path, cpu: Optional[int], repeats: int, min_ms: float) -> None:
    cmd = [*mpi.mpiexec, "-n", str(config.ranks)]
    if config.pin and cpu is not None:
        cmd += ["taskset", "-c", str(cpu)]
    cmd += [
        f"./{config.binary}",
        *config.args,
        "--repeats",
        str(repeats * config.repeats_factor),
        "--min-ms",
        str(min_ms),
    ]
    env = dict(mpi.env)
    env.update(config.env)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=bindir, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        config.failures.append(f"timed out after {RUN_TIMEOUT_S} s")
        return
    finally:
        config.seconds += time.perf_counter() - start
        if config.after is not None:
            config.after()
    records = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if proc.returncode != 0 or not records:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        config.failures.append(f"exit {proc.returncode}: " + " | ".join(tail))
        return
    for record in records:
        key = measurement_key(config, record)
        config.samples.setdefault(key, []).extend(record["samples_ns"])
        config.wall.setdefault(key, []).extend(record.get("wall_ns", []))
        config.info[key] = record


def find_qmpigen(given: Optional[str]) -> List[str]:
    if given:
        return [given]
    beside = Path(sys.executable).parent / "qmpigen"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("qmpigen")
    return [found] if found else [sys.executable, "-m", "qmpigen"]


def library_name(core: Path) -> Tuple[str, int]:
    text = (core / "qmpi.h").read_text()
    lib = re.search(r'#define QMPI_MPI_LIBRARY "([^"]*)"', text)
    funcs = re.search(r"#define NUM_MPI_FUNCS (\d+)", text)
    return (lib.group(1) if lib else "unknown MPI"), (int(funcs.group(1)) if funcs else 0)


def slug(text: str) -> str:
    text = re.sub(r"\(.*?\)", "", text).strip().lower()
    return re.sub(r"[^a-z0-9.]+", "-", text).strip("-") or "mpi"


def pick_cpu(requested: Optional[int]) -> Optional[int]:
    if shutil.which("taskset") is None:
        return None
    if requested is not None:
        return requested
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def provenance(qmpigen: Sequence[str]) -> Optional[str]:
    """The commit of the qmpigen that generated the core, and whether its templates or
    code had uncommitted changes (the numbers then describe a work in progress)."""
    try:
        import qmpigen as package  # the one this Python imports; the CLI given may be another

        root = Path(package.__file__).resolve().parent.parent
        if qmpigen and Path(qmpigen[0]).name != "qmpigen":
            return None
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "templates", "qmpigen"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (ImportError, OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + (" + uncommitted changes to templates/ or qmpigen/" if dirty.stdout.strip() else "")


def entry_alignment(lib: Path) -> Optional[dict]:
    """Where the entry wrappers' fast path (state check, then `jmp *PMPI_X@GOT`) lies
    against 32-byte fetch blocks: one that straddles a boundary costs ~0.3 ns per call
    on the machine this was written on. None without objdump."""
    if shutil.which("objdump") is None:
        return None
    proc = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        return None
    entries: Dict[str, Tuple[int, int]] = {}
    name, start, previous_jump = None, 0, None
    for line in proc.stdout.splitlines():
        head = re.match(r"^([0-9a-f]+) <(\w+)>:$", line)
        if head:
            name, start, previous_jump = head.group(2), int(head.group(1), 16), None
            continue
        insn = re.match(r"^\s+([0-9a-f]+):\s+(\S+)", line)
        if not insn or name is None or not (name.startswith("MPI_") or name.startswith("MPIX_")):
            continue
        address = int(insn.group(1), 16)
        if previous_jump is not None and name not in entries:
            entries[name] = (start, address)  # the fast path ends where the next instruction starts
            previous_jump = None
        if name not in entries and insn.group(2) == "jmp" and "(%rip)" in line and address - start < 32:
            previous_jump = address
    straddling = sorted(n for n, (a, b) in entries.items() if a // 32 != (b - 1) // 32)
    rank = entries.get("MPI_Comm_rank")
    return {
        "entries": len(entries),
        "straddling_32B": len(straddling),
        "MPI_Comm_rank": None
        if rank is None
        else {
            "address": hex(rank[0]),
            "fast_path_bytes": rank[1] - rank[0],
            "straddles_32B": rank[0] // 32 != (rank[1] - 1) // 32,
        },
    }


def cpu_model() -> Optional[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
