"""Where `qmpigen trace DIR -o OUT` may write: the merge never deletes what it did not make.

OUT is built in a staging directory beside it and moved into place at the end. An OUT
that already exists is replaced only when it is recognisably an earlier merge's output:
the MARKER file this module writes, with the exact text it writes, and nothing but the
files a merge writes (OUTPUT_FILES, and the OTF2 archive's `traces/N.evt`, `traces/N.def`),
no symbolic links. Never the input directory or one that holds it, never the current
directory or one above it, never a symbolic link. Anything else is a MergeError naming
OUT, raised before the merge reads a file and again just before the swap (OUT may have
changed meanwhile). The swap is atomic (renameat2 RENAME_EXCHANGE): the old output is
removed only once the new one is in place, and only after it is checked again where
the exchange put it."""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path
from typing import Optional

from qmpigen.output.write import RENAME_EXCHANGE, RENAME_NOREPLACE, renameat2

from .gather import MergeError

MARKER = ".qmpigen-trace"
MARKER_TEXT = (
    "This directory is the output of `qmpigen trace`. The next `qmpigen trace -o` into it\n"
    "replaces it; a directory without this file, or with files of its own, is never replaced.\n"
)
OUTPUT_FILES = frozenset({MARKER, "traces.otf2", "traces.def", "trace.json", "timeline.png", "io.png", "summary.txt"})
ARCHIVE_DIR = "traces"  # the OTF2 archive's per-location files
ARCHIVE_FILE = re.compile(r"^[0-9]+\.(evt|def)$")


def check_output(directory: Path, out: Path) -> None:
    """MergeError unless OUT may be written: absent, or an earlier merge's output that is
    neither the input, nor holds it, nor is the current directory or above it."""
    if out.is_symlink():
        raise MergeError(f"{out}: a symbolic link: not replaced (name the directory itself)")
    target = _real(out)
    if target == _real(Path.cwd()) or target in _real(Path.cwd()).parents:
        raise MergeError(f"{out}: the current directory or one above it: not replaced")
    if target == _real(directory) or target in _real(directory).parents:
        raise MergeError(f"{out}: the input directory or one that holds it: not replaced")
    if not target.parent.is_dir():
        raise MergeError(f"{out}: its parent {target.parent} is not a directory")
    if os.path.lexists(out):
        why = not_an_output(out)
        if why is not None:
            raise MergeError(
                f"{out}: exists and is not the output of an earlier qmpigen trace ({why}): not replaced; "
                "choose another -o, or remove it yourself"
            )


def not_an_output(out: Path) -> Optional[str]:
    """Why `out` is not recognisably a merge's output (None: it is)."""
    info = os.lstat(out)
    if not stat.S_ISDIR(info.st_mode):
        return "not a directory"
    entries = sorted(os.listdir(out))
    for name in entries:
        if name not in OUTPUT_FILES and name != ARCHIVE_DIR:
            return f"it holds {name}"
    if MARKER not in entries:
        return f"no {MARKER} file"
    for name in entries:
        mode = os.lstat(out / name).st_mode
        if name == ARCHIVE_DIR:
            if not stat.S_ISDIR(mode):
                return f"{name} is not a directory"
            for inner in sorted(os.listdir(out / name)):
                if not ARCHIVE_FILE.match(inner) or not stat.S_ISREG(os.lstat(out / name / inner).st_mode):
                    return f"it holds {name}/{inner}"
        elif not stat.S_ISREG(mode):
            return f"{name} is not a regular file"
    with open(out / MARKER, "rb") as stream:
        if stream.read(len(MARKER_TEXT) + 1) != MARKER_TEXT.encode():
            return f"{MARKER} is not the one a merge writes"
    return None


def write_marker(staging: Path) -> None:
    (staging / MARKER).write_text(MARKER_TEXT)


def swap_in(staging: Path, directory: Path, out: Path) -> None:
    """Moves the finished `staging` to `out`, replacing an earlier merge's output in one
    step; MergeError (and nothing changed) if `out` became something else meanwhile."""
    check_output(directory, out)
    if not os.path.lexists(out):
        try:
            if renameat2(str(staging), str(out), RENAME_NOREPLACE):
                return
            os.rename(staging, out)  # no renameat2 here: a plain rename
            return
        except FileExistsError:  # made meanwhile: the rules again
            check_output(directory, out)
    if renameat2(str(staging), str(out), RENAME_EXCHANGE):
        old = staging
    else:  # the file system cannot exchange: the old output aside, the new one in
        old = staging.with_name(staging.name + ".old")
        os.rename(out, old)
        os.rename(staging, out)
    why = not_an_output(old)  # the old output where it now is, checked again before it goes
    if why is not None:
        if not renameat2(str(old), str(out), RENAME_EXCHANGE):
            os.rename(out, staging)
            os.rename(old, out)
        raise MergeError(f"{out}: changed during the merge ({why}): not replaced")
    shutil.rmtree(old)


def _real(path: Path) -> Path:
    """The absolute path with every symbolic link resolved (a name that does not exist
    yet kept as it is)."""
    return Path(os.path.realpath(path))
