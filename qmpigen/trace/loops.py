"""The merge's C loops (_loops.c), built when qmpigen is installed (setup.py) and loaded
with ctypes: reading rank files (read.py), OTF2 events (otf2_out.py) and Chrome trace
JSON text (perfetto.py). load() returns None where the extension was not built (no C
compiler at install time) or with QMPIGEN_TRACE_NO_NATIVE=1 (tests compare both); the
callers then run their Python code, which gives the same output, slower."""

from __future__ import annotations

import ctypes
import importlib.util
import os
from typing import Optional

_loaded: dict = {}


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
        return ctypes.CDLL(spec.origin)
    except OSError:
        return None
