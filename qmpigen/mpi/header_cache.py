"""Stage 1, remembered: a preprocessed mpi.h kept between runs, used without running the
preprocessor again while nothing it read has changed (as ccache's direct mode does).

`mpicc -E` is 0.06-0.09 s of CPU, a sixth of a `scaffold-tool` whose model is cached
(qmpigen.mpi.model_cache), and `make -C sample_tools` asks for the same MPI ten times.

An entry's key is what decides which files the preprocessor reads, and how: the request
(header, driver, flags), the driver's file, what `DRIVER -show` says it runs (MPICH's,
Open MPI's and Intel MPI's drivers answer it; a driver that does not gets no entry: the
preprocessor runs every time), the files of the programs it names, the environment variables that
drivers and compilers read, and qmpigen's code. The entry holds the preprocessed header
and a manifest: the size, modification time and inode of every file the preprocessor
read (its linemarkers), with its inode change time (which no one can set back), and the
modification time of every directory where a new file would shadow one it read: those
of its include search path (`-Wp,-v`: the -iquote ones and those it ignored as
nonexistent included), those files' own directories, and, for a file read from a
subdirectory of a search directory (`<sub/x.h>`), that subdirectory under every search
directory and beside every file read. It is used only when every one of them is as recorded; otherwise the
preprocessor runs, and a new entry replaces it. Files and directories are stamped after
the run, so one changed during the run or in the seconds before it gives no entry.
Paths are stamped as the preprocessor names them, not normalised: `link/../inc` is not
`inc`. An entry is the user's own (qmpigen.cache).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Set, Tuple

from qmpigen.cache import cache_dir, read_entry, write_entry
from qmpigen.mpi.header import (
    COMMAND_LINE,
    PROBE,
    HeaderRequest,
    PreprocessedHeader,
    check_header_file,
    linemarker,
    resolve_driver,
)
from qmpigen.mpi.model_cache import code_fingerprint

SUFFIX = ".header"
SHOW_TIMEOUT_S = 10
# Read by compiler drivers and compilers when they choose a compiler or include paths.
ENVIRONMENT = ("PATH", "CPATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH", "SDKROOT")
ENVIRONMENT_PREFIXES = ("MPICH_", "OMPI_", "OPAL_", "I_MPI_", "MPI", "CC", "CFLAGS")
SETTLE_NS = 2_000_000_000
# Linemarker names that are not files (Clang writes "<command line>").
NOT_FILES = ("<built-in>", COMMAND_LINE, "<command line>", PROBE)

FileStamp = Tuple[str, int, int, int, int, int]  # path, size, mtime_ns, ctime_ns, inode, device
DirStamp = Tuple[str, int, int, int, int]  # path, mtime_ns, ctime_ns, inode, device


@dataclass(frozen=True)
class Entry:
    header: PreprocessedHeader
    cwd: Optional[str]  # the directory relative paths were read from; None if there were none
    files: Tuple[FileStamp, ...]
    directories: Tuple[DirStamp, ...]


def cached_header(
    request: HeaderRequest, read: Callable[[HeaderRequest], Tuple[PreprocessedHeader, Tuple[str, ...]]]
) -> PreprocessedHeader:
    """read(request)'s header (it returns the include search path too), or the one an
    earlier run read while nothing it read has changed."""
    directory = cache_dir("headers")
    check_header_file(request)  # its message before any about the driver, as without the cache
    key = _key(request) if directory is not None else None
    if directory is None or key is None:
        return read(request)[0]
    path = directory / (key + SUFFIX)
    entry = read_entry(path, pickle.load)
    if isinstance(entry, Entry) and _unchanged(entry):
        return entry.header
    started = time.time_ns()
    header, search_path = read(request)
    made = _entry(header, search_path, started)
    if made is not None:
        write_entry(path, lambda handle: pickle.dump(made, handle, protocol=pickle.HIGHEST_PROTOCOL))
    return header


def _key(request: HeaderRequest) -> Optional[str]:
    """The entry's key, or None where the driver does not say what it runs."""
    driver = resolve_driver(request)
    program = shutil.which(driver[0])
    if program is None:
        return None
    shown = _show(driver)
    words = shown.decode("utf-8", errors="replace").split() if shown is not None else []
    compiler = shutil.which(words[0]) if words else None
    if compiler is None:
        return None
    header = os.path.abspath(request.mpi_header) if request.mpi_header != "auto" else "auto"
    parts = [code_fingerprint(), header, "\0".join(driver), "\0".join(request.cflags), " ".join(words)]
    # Every program the command names: a launcher's (`ccache gcc ...`) compiler too.
    programs = [program, compiler, *filter(None, (shutil.which(word) for word in words[1:] if word[:1] != "-"))]
    for name in programs:
        stamp = _file_stamp(os.path.realpath(name))
        if stamp is None:
            return None
        parts.append(repr(stamp))
    parts += sorted(f"{name}={value}" for name, value in os.environ.items() if _read_by_compilers(name))
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()


def _read_by_compilers(name: str) -> bool:
    return name in ENVIRONMENT or name.startswith(ENVIRONMENT_PREFIXES)


def _entry(header: PreprocessedHeader, search_path: Tuple[str, ...], started: int) -> Optional[Entry]:
    """The entry of a header read by a run that started at `started` (ns); None without a
    search path (no `-v` list)."""
    if not search_path:
        return None
    markers = (linemarker(line) for line in header.text.split("\n") if line.startswith("# "))
    read = sorted({marker[1] for marker in markers if marker} - set(NOT_FILES))
    relative = any(not os.path.isabs(name) for name in (*read, *search_path))
    names = sorted({_absolute(name) for name in read})
    search = [_absolute(name) for name in search_path]
    directories = set(search) | {os.path.dirname(name) for name in names} | _subdirectories(names, search)
    files = [_file_stamp(name) for name in names]
    dirs = [_dir_stamp(name) for name in sorted(directories)]
    # A file changed during the run, or within the seconds before it, may have been read
    # before the change and stamped after it, or change again within its clock's tick,
    # unseen by its stamp: no entry until everything has settled.
    settled = min(started, time.time_ns()) - SETTLE_NS
    if not names or any(stamp is None or max(stamp[2], stamp[3]) > settled for stamp in files):
        return None
    if any(max(stamp[1], stamp[2]) > settled for stamp in dirs):
        return None
    return Entry(
        header,
        os.getcwd() if relative else None,
        tuple(stamp for stamp in files if stamp is not None),
        tuple(dirs),
    )


def _absolute(name: str) -> str:
    """The path as the preprocessor meant it: not normalised (after a symbolic link,
    `link/../inc` is not `inc`)."""
    return name if os.path.isabs(name) else os.path.join(os.getcwd(), name)


def _subdirectories(names: Sequence[str], search: Sequence[str]) -> Set[str]:
    """For each file read from a subdirectory of a search directory (`<sub/x.h>`), that
    subdirectory under every search directory and under the directory of every file
    read (where `"sub/x.h"` is looked for first): a new `sub/x.h` in one of them would
    change nothing else the entry stamps."""
    subs: Set[str] = set()
    for name in names:
        for base in search:
            prefix = base.rstrip("/") + "/"
            sub = os.path.dirname(name[len(prefix) :]) if name.startswith(prefix) else ""
            if sub:
                subs.add(sub)
    bases = set(search) | {os.path.dirname(name) for name in names}
    return {os.path.join(base, sub) for base in bases for sub in subs}


def _show(driver: Tuple[str, ...]) -> Optional[bytes]:
    """What `DRIVER -show` prints; None if it fails or does not answer in time. It runs
    in a session of its own, killed whole on time-out: a child left holding the pipe
    would keep the read waiting."""
    try:
        proc = subprocess.Popen(
            [*driver, "-show"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        shown, _ = proc.communicate(timeout=SHOW_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        if proc.stdout is not None:
            proc.stdout.close()
        proc.wait()
        return None
    return shown if proc.returncode == 0 else None


def _unchanged(entry: Entry) -> bool:
    if entry.cwd is not None and entry.cwd != os.getcwd():
        return False
    return all(_file_stamp(stamp[0]) == stamp for stamp in entry.files) and all(
        _dir_stamp(stamp[0]) == stamp for stamp in entry.directories
    )


def _file_stamp(path: str) -> Optional[FileStamp]:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (path, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)


def _dir_stamp(path: str) -> DirStamp:
    """A directory's stamp; (path, -1, -1, -1, -1) while it does not exist."""
    try:
        info = os.stat(path)
    except OSError:
        return (path, -1, -1, -1, -1)
    return (path, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)
