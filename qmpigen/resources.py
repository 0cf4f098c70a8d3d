"""Where the shipped templates/ and grammars/ are: inside the installed package."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def package_dir(package: str) -> Path:
    """Directory of a resource package (qmpigen.templates or qmpigen.grammars)."""
    return Path(str(resources.files(package)))


def templates_dir() -> Path:
    return package_dir("qmpigen.templates")


def grammars_dir() -> Path:
    return package_dir("qmpigen.grammars")
