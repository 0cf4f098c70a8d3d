"""Stage 2, remembered: the model parsed from a preprocessed mpi.h, kept between runs
in the user's cache (qmpigen.cache).

Parsing MPICH's mpi.h with pycparser is most of what a command costs (a second of CPU),
and `make -C sample_tools` reads the same MPI ten times. An entry is keyed by
everything the model is made from: the preprocessed text and macro table (read again
whenever anything it was read from changed: qmpigen.mpi.header_cache; so a changed
header, include path, flag or driver gives another key),
the header's path (what parse_header reads of its input), and the code that builds the model (qmpigen's version,
Python's, pycparser's and the source of the modules that parse). A stale model cannot
come back: other input is another key, never an overwrite.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import pickle
import sys
from pathlib import Path
from typing import Callable

from qmpigen import __version__
from qmpigen.cache import cache_dir, read_entry, write_entry
from qmpigen.mpi.header import PreprocessedHeader
from qmpigen.mpi.model import MpiApi

SUFFIX = ".model"
# The code a model is made by: a change to any of it is a new key.
PACKAGE = Path(__file__).resolve().parents[1]
MODEL_SOURCES = ("mpi/*.py", "errors.py", "escape.py", "output/cnames.py")


@functools.lru_cache(maxsize=None)
def code_fingerprint() -> str:
    digest = hashlib.sha256(f"{__version__} {sys.version_info[:3]}".encode())
    parser = importlib.util.find_spec("pycparser")  # its version is in its __init__.py
    sources = [Path(parser.origin)] if parser and parser.origin else []
    sources += [path for pattern in MODEL_SOURCES for path in sorted(PACKAGE.glob(pattern))]
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key(source: PreprocessedHeader) -> str:
    digest = hashlib.sha256(code_fingerprint().encode())
    parts = [source.header_path, source.text]
    parts += [f"{name}={value}" for name, value in sorted(source.object_macros.items())]
    parts += sorted(source.function_macros)
    for part in parts:
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()


def cached_model(source: PreprocessedHeader, parse: Callable[[PreprocessedHeader], MpiApi]) -> MpiApi:
    """parse(source), or the model an earlier run parsed from the same input."""
    directory = cache_dir("models")
    if directory is None:
        return parse(source)
    path = directory / (key(source) + SUFFIX)
    model = read_entry(path, pickle.load)
    if isinstance(model, MpiApi):
        return model
    model = parse(source)
    write_entry(path, lambda handle: pickle.dump(model, handle, protocol=pickle.HIGHEST_PROTOCOL))
    return model
