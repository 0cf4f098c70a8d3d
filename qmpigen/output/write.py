"""Write outputs all-or-nothing, touching only files that change.

A directory of outputs is replaced as a whole: the new version is staged beside it
(unchanged files and whatever else the directory holds, such as build products, are
hard-linked, so their times and inodes stay), then swapped in with one atomic
rename (renameat2 RENAME_EXCHANGE). A process killed at any point leaves either the
old directory or the new one, never a mix, plus at most a staging directory that the
next write into the same place removes (writes take a lock on the parent directory,
so a staging directory found under the lock belongs to a dead writer).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from typing import List, Mapping, Optional, Tuple, Union

from qmpigen.errors import QmpigenError

Content = Union[str, bytes]
STAGING_PREFIX = ".qmpigen-"
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2  # linux/fs.h


@dataclass(frozen=True)
class WriteReport:
    changed: Tuple[str, ...]  # written (or, with check=True, would be)
    unchanged: Tuple[str, ...]


def _differs(path: str, content: Content) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read() != _bytes(content)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return True


def _bytes(content: Content) -> bytes:
    """Text is written as UTF-8, as it is (no newline translation); bytes as they are (pictures)."""
    return content if isinstance(content, bytes) else content.encode("utf-8")


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_outputs(directory: str, files: Mapping[str, Content], check: bool = False) -> WriteReport:
    """Write `files` (relative path -> text or bytes) into `directory`, as a whole (module docstring).

    Everything is rendered before this is called; unchanged files are not touched
    (make stays quiet).
    """
    check_path(directory)
    names = sorted(files)
    changed = tuple(n for n in names if _differs(os.path.join(directory, n), files[n]))
    unchanged = tuple(n for n in names if n not in changed)
    if check or not changed:
        return WriteReport(changed, unchanged)

    target = os.path.realpath(directory)  # through a link: the directory it names is replaced
    parent = os.path.dirname(target)
    created = _make_parents(parent, directory)
    staging = ""
    try:
        with _locked(parent):
            _remove_stale_staging(target)
            staging = tempfile.mkdtemp(prefix=_staging_prefix(target), dir=parent)
            mode = stat.S_IMODE(os.stat(target).st_mode) if os.path.isdir(target) else 0o777 & ~current_umask()
            os.chmod(staging, mode)  # mkdtemp makes it private; the output keeps its mode
            if os.path.isdir(target):
                _link_tree(target, staging, skip=frozenset(changed))
            for name in changed:
                path = os.path.join(staging, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as handle:
                    handle.write(_bytes(files[name]))
            if os.path.isdir(target):
                _exchange(staging, target)  # staging now holds the old version
            else:
                os.rename(staging, target)
                staging = ""
    except OSError as exc:
        if not os.path.isdir(target):
            _remove_created(created)
        raise QmpigenError(f"cannot write {directory}: {exc.strerror or exc}") from None
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
    return WriteReport(changed, unchanged)


def _staging_prefix(target: str) -> str:
    return f"{STAGING_PREFIX}{os.path.basename(target)}."


class _locked:
    """An exclusive lock on the parent directory (flock on its descriptor: no lock file
    left beside the output) for the time of one write."""

    def __init__(self, parent: str):
        self.parent = parent
        self.fd: Optional[int] = None

    def __enter__(self) -> "_locked":
        self.fd = os.open(self.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock


def _remove_stale_staging(target: str) -> None:
    """Staging directories of earlier writes into target: their writer died (we hold the
    lock), so each is an old or an unfinished new version. Where the writer died between
    the two renames of the fallback swap, the target is missing: its old version (.old)
    is put back first."""
    parent, prefix = os.path.dirname(target), _staging_prefix(target)
    stale = sorted(e for e in os.listdir(parent) if e.startswith(prefix))
    if not os.path.lexists(target):
        for entry in stale:
            if entry.endswith(".old"):
                os.rename(os.path.join(parent, entry), target)
                break
    for entry in stale:
        path = os.path.join(parent, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)


def _link_tree(source: str, dest: str, skip: frozenset) -> None:
    """Recreate source's tree in dest, every file a hard link (a copy where links fail),
    but the relative paths in skip, which the caller writes anew."""
    for root, dirs, filenames in os.walk(source):
        rel = os.path.relpath(root, source)
        out = dest if rel == "." else os.path.join(dest, rel)
        for d in dirs:
            full = os.path.join(root, d)
            if os.path.islink(full):
                os.symlink(os.readlink(full), os.path.join(out, d))
            else:
                os.mkdir(os.path.join(out, d))
                shutil.copystat(full, os.path.join(out, d), follow_symlinks=False)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for f in filenames:
            name = os.path.normpath(os.path.join(rel, f))
            if name in skip:
                continue
            full, copy = os.path.join(root, f), os.path.join(out, f)
            if os.path.islink(full):
                os.symlink(os.readlink(full), copy)
                continue
            try:
                os.link(full, copy)
            except OSError:
                shutil.copy2(full, copy)


def renameat2(a: str, b: str, flags: int) -> bool:
    """rename(a, b) with renameat2's flags (RENAME_EXCHANGE, RENAME_NOREPLACE); False
    where the C library or the file system cannot (the caller falls back), OSError
    for any other failure."""
    import ctypes  # here: most commands never rename a directory over another

    function = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if function is None:
        return False
    at_fdcwd = -100
    if function(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def _exchange(a: str, b: str) -> None:
    """Swap two directories in one step (renameat2 RENAME_EXCHANGE); where the file
    system cannot, two renames with the old one kept until the new one is in place."""
    if renameat2(a, b, RENAME_EXCHANGE):
        return
    old = a + ".old"
    os.rename(b, old)
    os.rename(a, b)
    os.rename(old, a)


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
