"""A rank file read whole into private memory, as one consistent snapshot.

The merge used to map rank files (MAP_SHARED): a file that a new run in the same
directory truncates or rewrites while the merge reads it changed under the reader: a
heap overflow between _loops.c's two walks (the arrays sized by the first), SIGBUS on
truncation. Read into memory the bytes cannot change; a file that changes while it is
read is read again, and its identity (device, inode, size, times) lets pass 2 of the
merge tell whether it is still the file pass 1 read. Only regular files are opened."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import List, Optional, Tuple


class TraceFileError(Exception):
    """A rank file that cannot be used at all; the message is one line."""


READ_TRIES = 3  # a file that changes while it is read is read again, this many times in all
FILE_TYPES = {stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device"}
FILE_TYPES.update({stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"})


def identity_of(info: os.stat_result) -> Tuple[int, ...]:
    """What changes when a file is written, truncated or replaced."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def read_snapshot(path: Path) -> Tuple[bytearray, Tuple[int, ...], Optional[str]]:
    """The file's bytes, its identity, and a note if it changed while read (then it was
    read again: the bytes are one read's, whole). Only a regular file is opened (opening
    a FIFO blocks, a device's open can act); non-blocking, in case it is replaced by one
    between the stat and the open."""
    try:
        kind = stat.S_IFMT(os.stat(path).st_mode)
        if kind != stat.S_IFREG:
            raise TraceFileError(f"not a regular file ({FILE_TYPES.get(kind, 'a special file')})")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TraceFileError(f"cannot read: {exc.strerror}") from None
    try:
        sizes: List[str] = []
        for _ in range(READ_TRIES):
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise TraceFileError("not a regular file")
            data = read_all(fd, before.st_size)
            after = os.fstat(fd)
            if len(data) == before.st_size and identity_of(after) == identity_of(before):
                changed = None if not sizes else f"changed while the merge read it ({'; '.join(sizes)}); read again"
                return data, identity_of(after), changed
            sizes.append(f"{before.st_size} bytes, then {after.st_size}")
    except OSError as exc:
        raise TraceFileError(f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    raise TraceFileError(f"changed each time the merge read it ({'; '.join(sizes)}): is a run still writing it?")


def read_all(fd: int, size: int) -> bytearray:
    """Up to `size` bytes from the start of the file (fewer if it is shorter now)."""
    try:
        data = bytearray(size)
    except MemoryError:
        raise TraceFileError(f"{size} bytes: more than this machine can hold") from None
    got = 0
    with memoryview(data) as view:
        while got < size:
            n = os.preadv(fd, [view[got:]], got)
            if n == 0:
                break
            got += n
    del data[got:]
    return data
