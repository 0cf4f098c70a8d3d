"""Stage 5: write outputs all-or-nothing, touching only files that change."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Tuple

from qmpigen.errors import QmpigenError


@dataclass(frozen=True)
class WriteReport:
    changed: Tuple[str, ...]  # written (or, with check=True, would be)
    unchanged: Tuple[str, ...]


def _differs(path: str, text: str) -> bool:
    try:
        with open(path, "r", encoding="utf-8", newline="") as handle:
            return handle.read() != text
    except FileNotFoundError:
        return True
    except UnicodeDecodeError:
        return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_outputs(directory: str, files: Dict[str, str], check: bool = False) -> WriteReport:
    """Write `files` (relative path -> text) into `directory`.

    Everything is rendered before this is called, so a failure cannot leave half a
    generation behind: new files are staged in a temporary directory beside the
    target and moved into place; unchanged files are not touched (make stays quiet).
    """
    check_path(directory)
    names = sorted(files)
    changed = tuple(n for n in names if _differs(os.path.join(directory, n), files[n]))
    unchanged = tuple(n for n in names if n not in changed)
    if check or not changed:
        return WriteReport(changed, unchanged)

    parent = os.path.dirname(os.path.abspath(directory))
    created = _make_parents(parent, directory)
    try:
        staging = tempfile.mkdtemp(prefix=".qmpigen-", dir=parent)
    except OSError as exc:
        _remove_created(created)
        raise QmpigenError(f"cannot write {directory}: {exc.strerror or exc}") from None
    try:
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private; the output is not
        for name in changed:
            target = os.path.join(staging, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8", newline="") as handle:
                handle.write(files[name])
        if not os.path.exists(directory):
            os.rename(staging, directory)
            staging = ""
        else:
            for name in changed:
                final = os.path.join(directory, name)
                os.makedirs(os.path.dirname(final), exist_ok=True)
                os.replace(os.path.join(staging, name), final)
    except OSError as exc:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
            staging = ""
        _remove_created(created)
        raise QmpigenError(f"cannot write {directory}: {exc.strerror or exc}") from None
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
    return WriteReport(changed, unchanged)


def check_path(directory: str) -> None:
    """The output, or its nearest existing ancestor, must be a directory."""
    path = os.path.abspath(directory)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        what = "output" if path == os.path.abspath(directory) else "its parent"
        raise QmpigenError(f"cannot write {directory}: {what} {path} exists and is not a directory")


def _make_parents(parent: str, directory: str) -> List[str]:
    """Create missing parents of the output (like mkdir -p); returns what was created."""
    missing = []
    path = parent
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for path in reversed(missing):
        try:
            os.mkdir(path)
        except OSError as exc:
            _remove_created(missing[missing.index(path) + 1 :])
            raise QmpigenError(f"cannot write {directory}: {exc.strerror or exc}: {path}") from None
    return missing


def _remove_created(created: List[str]) -> None:
    """Undo _make_parents (innermost first): a failed write leaves nothing behind."""
    for path in created:
        try:
            os.rmdir(path)
        except OSError:
            pass
