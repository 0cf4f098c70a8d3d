"""The merge's C loops (_loops.c), built when qmpigen is installed (setup.py) and loaded
with ctypes: reading rank files (read.py), OTF2 events (otf2_out.py) and Chrome trace
JSON text (perfetto.py). load() returns None where the extension was not built (no C
compiler at install time), was built from another version (its ABI number), or with
QMPIGEN_TRACE_NO_NATIVE=1 (tests compare both); the
callers then run their Python code, which gives the same output, slower."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from typing import Optional

_loaded: dict = {}
# _loops.c's QMPI_LOOPS_ABI: the structs and arguments this Python passes (read.py's
# _Kinds and _Scan, ...); a build of another is not used
LOOPS_ABI = 4


def load() -> Optional[ctypes.CDLL]:
    if os.environ.get("QMPIGEN_TRACE_NO_NATIVE") == "1":
        return None
    if "lib" not in _loaded:
        _loaded["lib"] = _find()
    return _loaded["lib"]


def _find() -> Optional[ctypes.CDLL]:
    try:
        spec = importlib.util.find_spec("qmpigen.trace._loops")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError:
        return None
    try:
        abi = lib.qmpi_loops_abi()
    except AttributeError:
        abi = 1
    if abi != LOOPS_ABI:
        print(
            f"qmpigen trace: {spec.origin} is from another qmpigen (C loops ABI {abi}, not {LOOPS_ABI}): "
            "reading with the Python code; reinstall qmpigen to rebuild it",
            file=sys.stderr,
        )
        return None
    return lib
