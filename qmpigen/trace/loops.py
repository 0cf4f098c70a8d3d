"""The merge's C loops (_loops.c), built when qmpigen is installed (setup.py) as a plain
shared library beside this file, libqmpigen_loops.so, and loaded with ctypes: reading
rank files (read.py), OTF2 events (otf2_out.py) and Chrome trace JSON text
(perfetto.py). load() returns None where it was not built (no C compiler at install
time), was built from another version (its ABI number), or with
QMPIGEN_TRACE_NO_NATIVE=1 (tests compare both); the callers then run their Python
code, which gives the same output, slower."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path
from typing import Optional

LIBRARY = "libqmpigen_loops.so"  # setup.py's name for the build of _loops.c
_loaded: dict = {}
# _loops.c's QMPI_LOOPS_ABI: the structs and arguments this Python passes (read.py's
# _Kinds and _Scan, ...); a build of another is not used
LOOPS_ABI = 6


def load() -> Optional[ctypes.CDLL]:
    if os.environ.get("QMPIGEN_TRACE_NO_NATIVE") == "1":
        return None
    if "lib" not in _loaded:
        _loaded["lib"] = _find()
    return _loaded["lib"]


def library_path() -> Path:
    """Where setup.py puts the build: beside this file (a wheel's or a checkout's)."""
    return Path(__file__).resolve().with_name(LIBRARY)


def _find() -> Optional[ctypes.CDLL]:
    path = library_path()
    if not path.is_file():
        return None
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:
        return None
    try:
        abi = lib.qmpi_loops_abi()
    except AttributeError:
        abi = 1
    if abi != LOOPS_ABI:
        print(
            f"qmpigen trace: {path} is from another qmpigen (C loops ABI {abi}, not {LOOPS_ABI}): "
            "reading with the Python code; reinstall qmpigen to rebuild it",
            file=sys.stderr,
        )
        return None
    return lib
