"""Files (or sections of them) that qmpigen's own tables generate: the trace format's C
header and tables, the role tables of the spec documentation, the trace tool's coverage
tables. Each generator module has a `--write` main built from these two helpers; without
--write it exits 1 when a file is out of date (a test runs it that way)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict


def between(text: str, begin: str, end: str, body: str, path: Path) -> str:
    """`text` with what stands between its one `begin` marker and its one `end` marker
    replaced by `body`."""
    if text.count(begin) != 1 or text.count(end) != 1:
        raise SystemExit(f"{path}: expected one pair of GENERATED markers")
    head, rest = text.split(begin)
    _, tail = rest.split(end, 1)
    return head + begin + body + end + tail


def refresh(generated: Dict[Path, str], repo: Path, command: str, write: bool) -> int:
    """Writes the stale files (write), or names them (exit status 1)."""
    stale = {path: text for path, text in generated.items() if not path.exists() or path.read_text() != text}
    for path, text in stale.items():
        if write:
            path.write_text(text)
            print(f"{path.relative_to(repo)}: rewritten")
        else:
            print(f"{path.relative_to(repo)}: out of date; run `{command}`")
    return 1 if stale and not write else 0
