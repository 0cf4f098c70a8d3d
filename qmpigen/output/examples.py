"""The documentation and sample tools shipped in the wheel, as files to write out.

`qmpigen examples DIR` gives a user who has only the wheel the layout the manual and
scaffolded specs point to: DIR/docs/spec-language.md, DIR/sample_tools/printer.c, ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict

from qmpigen.output.resources import docs_dir, samples_dir

# What ships, by directory: (name in DIR, where it is installed, which files).
SHIPPED = (
    ("docs", docs_dir, ("*.md",)),
    ("sample_tools", samples_dir, ("*.c", "*.h", "*.qmpi", "Makefile", "trace/*.c", "trace/*.h", "trace/*.qmpi")),
)


def shipped_examples() -> Dict[str, str]:
    """Relative path -> text, sorted, for write_outputs."""
    files: Dict[str, str] = {}
    for name, where, patterns in SHIPPED:
        root: Path = where()
        for pattern in patterns:
            for path in sorted(root.glob(pattern)):
                files[f"{name}/{path.relative_to(root).as_posix()}"] = path.read_text(encoding="utf-8")
    return dict(sorted(files.items()))
