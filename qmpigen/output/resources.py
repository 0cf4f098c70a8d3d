"""Where the shipped runtime/ (qmpigen/runtime), templates/, grammars/, docs/ and sample_tools/ are: inside the
installed package (qmpigen.templates, ...), mapped from the repository's top level."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_dir(package: str) -> Path:
    """Directory of a resource package (each has an empty __init__.py, as setuptools'
    editable installs find no namespace package inside a regular one)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"qmpigen is installed without {package}: reinstall it")
    return Path(list(spec.submodule_search_locations)[0])


def templates_dir() -> Path:
    return package_dir("qmpigen.templates")


def runtime_dir() -> Path:
    """The core's fixed C sources, copied verbatim by build-core."""
    return package_dir("qmpigen.runtime")


def grammars_dir() -> Path:
    return package_dir("qmpigen.grammars")


def docs_dir() -> Path:
    return package_dir("qmpigen.docs")


def samples_dir() -> Path:
    return package_dir("qmpigen.sample_tools")
