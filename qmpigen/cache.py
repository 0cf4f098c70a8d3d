"""The user's cache of work done by earlier runs: the preprocessed mpi.h
(qmpigen.mpi.header_cache), the model parsed from it (qmpigen.mpi.model_cache) and the
compiled templates (qmpigen.output.render). What it
holds is loaded as code (pickle, Python bytecode), so it is used only when it is the
user's own: the directory and every entry owned by the user and writable by nobody
else, entries regular files opened without following links. Anything else, or a
damaged entry, is the same as no entry: the work is done again.

Where: $QMPIGEN_CACHE, else $XDG_CACHE_HOME/qmpigen, else ~/.cache/qmpigen;
QMPIGEN_CACHE=off turns it off.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Optional

KEEP = 16  # entries of a kind, by default: older ones are removed as new ones are written


def cache_dir(kind: str) -> Optional[Path]:
    """The directory for one kind of entry, made if missing; None when turned off or
    when it is not the user's own."""
    chosen = os.environ.get("QMPIGEN_CACHE")
    if chosen == "off":
        return None
    base = Path(chosen) if chosen else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qmpigen"
    try:
        for directory in (base, base / kind):  # the kind's directory only inside a private one
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _private(os.stat(directory, follow_symlinks=False), stat.S_ISDIR):
                return None
    except (OSError, RuntimeError):  # RuntimeError: no home directory
        return None
    return directory


def _private(info: os.stat_result, is_type: Callable[[int], bool]) -> bool:
    return is_type(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def read_entry(path: Path, load: Callable[[BinaryIO], object]) -> Optional[object]:
    """load(file) of the entry, or None: missing, not the user's own, or damaged."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not _private(os.fstat(fd), stat.S_ISREG):
                return None
            value = load(handle)
        except Exception:  # damaged: the work is done again
            return None
    try:
        os.utime(path)  # recently used: kept
    except OSError:
        pass
    return value


def write_entry(path: Path, dump: Callable[[BinaryIO], None], keep: int = KEEP) -> None:
    """The entry written whole (a private temporary file renamed), then the oldest of
    its directory removed. Failing to write is not an error: the cache is optional."""
    try:
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            dump(handle)
        os.replace(temporary, path)
    except Exception:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return
    entries = []
    for entry in path.parent.glob("*" + path.suffix):
        try:
            entries.append((entry.stat().st_mtime, entry))
        except OSError:  # removed meanwhile by another run
            continue
    for _, old in sorted(entries, reverse=True)[keep:]:
        try:
            old.unlink()
        except OSError:
            pass
