"""The documentation and sample tools shipped in the wheel, as files to write out.

`qmpigen examples DIR` gives a user who has only the wheel the layout the manual and
scaffolded specs point to: DIR/docs/spec-language.md, DIR/sample_tools/printer.c, ...
The manual goes out with what its pages show and link: its pictures, the design note and
that note's benchmark sources (tests/test_examples_manual.py follows every link).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Union

from qmpigen.output.resources import docs_dir, samples_dir

# What ships, by directory: (name in DIR, where it is installed, which files). The same
# patterns are pyproject.toml's package data.
SHIPPED = (
    ("docs", docs_dir, ("*.md", "*.png", "design/*.md", "design/pmpi-bench/*.c", "design/pmpi-bench/*.py")),
    ("sample_tools", samples_dir, ("*.c", "*.h", "*.qmpi", "Makefile", "trace/*.c", "trace/*.h", "trace/*.qmpi")),
)
BINARY = (".png",)


def shipped_examples() -> Dict[str, Union[str, bytes]]:
    """Relative path -> text (bytes for pictures), sorted, for write_outputs."""
    files: Dict[str, Union[str, bytes]] = {}
    for name, where, patterns in SHIPPED:
        root: Path = where()
        for pattern in patterns:
            for path in sorted(root.glob(pattern)):
                binary = path.suffix in BINARY
                files[f"{name}/{path.relative_to(root).as_posix()}"] = (
                    path.read_bytes() if binary else path.read_text(encoding="utf-8")
                )
    return dict(sorted(files.items()))
