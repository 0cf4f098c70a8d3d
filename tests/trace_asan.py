"""The merge's C loops (qmpigen/trace/_loops.c) built with AddressSanitizer and UBSan, for
tests and the trace fuzzer (`make fuzz`): `build(dir)` compiles them; a Python started
with `environment()` (libasan preloaded: Python itself is not instrumented) and calling
`activate(path)` before it merges reads every rank file through that build, and any
out-of-bounds access or undefined behaviour ends it with the sanitizer's report.
`between_the_walks(hook)` runs a test's hook between the C walk's count and copy.

    python tests/trace_asan.py DIR     # builds DIR/_loops_asan.so, prints its path
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict, Optional

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "qmpigen" / "trace" / "_loops.c"
FLAGS = ("-O1", "-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all")


def compiler() -> str:
    return os.environ.get("CC", "gcc")


def _library(name: str) -> Optional[str]:
    proc = subprocess.run([compiler(), f"-print-file-name={name}"], capture_output=True, text=True)
    path = proc.stdout.strip()
    return path if proc.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None


def runtime() -> Optional[str]:
    """The ASan runtime to preload, or None where the compiler has none."""
    return _library("libasan.so")


def build(directory: Path) -> Path:
    """DIR/_loops_asan.so, built from the checkout's _loops.c; CalledProcessError if it fails."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / "_loops_asan.so"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        [compiler(), "-shared", "-fPIC", *FLAGS, f"-I{include}", str(SOURCE), "-o", str(out)],
        check=True,
        capture_output=True,
    )
    return out


def environment(base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """A child Python's environment: the runtime preloaded, with the C++ library (a C++
    extension that throws, matplotlib's, needs ASan's __cxa_throw interceptor set up at
    start), leaks not reported (the interpreter's own), the first error fatal."""
    env = dict(os.environ if base is None else base)
    env["LD_PRELOAD"] = " ".join(p for p in (runtime(), _library("libstdc++.so")) if p)
    env["ASAN_OPTIONS"] = "detect_leaks=0:halt_on_error=1:exitcode=86"
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1:exitcode=86"
    return env


def between_the_walks(hook) -> None:
    """Makes qmpigen.trace.walk call hook(rank_file) after _loops.c's counting walk of each
    file, before its copying walk: where tests change a file under the reader."""
    import ctypes

    from qmpigen.trace import walk

    real = walk._scan_native

    def scan(lib, data, pos, end, out):
        walk = lib.qmpi_scan_records
        walk.restype = ctypes.c_int64

        def qmpi_scan_records(*args):
            stop = walk(*args)
            if args[4]._obj.calls is None:  # the counting walk (no buffers)
                hook(out)
            return stop

        return real(type("Lib", (), {"qmpi_scan_records": staticmethod(qmpi_scan_records)}), data, pos, end, out)

    walk._scan_native = scan


def activate(path: Path) -> None:
    """Makes qmpigen.trace.loops hand out this build (its ABI checked as any build's)."""
    import ctypes

    from qmpigen.trace import loops

    lib = ctypes.CDLL(str(path))
    if lib.qmpi_loops_abi() != loops.LOOPS_ABI:
        raise SystemExit(f"{path}: C loops ABI {lib.qmpi_loops_abi()}, not {loops.LOOPS_ABI}")
    loops._loaded["lib"] = lib


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
