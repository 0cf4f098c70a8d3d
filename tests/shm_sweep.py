"""The shared-memory files of MPI jobs the tests end on purpose, removed after each test.

A job that does not reach MPI_Finalize (MPI_Abort, a rank killed, the core stopping a
job with its one line) leaves its MPI's shared-memory files in /dev/shm: MPICH unlinks
its `mpich_shm_<job>_<node>` (3.1 MB here) only in MPI_Finalize, and Open MPI leaves
`sm_segment.*` files when a job is torn down. The suite ends some hundreds of jobs so;
on a machine that runs it again and again they filled 8.4 GB of /dev/shm (RAM) in a
day, and a full /dev/shm stops every MPI job from starting.

So the suite does what a batch system's epilogue does (MPICH's and Open MPI's own
advice), limited to what it can tell is an orphan:
- a name of those MPIs' shared-memory files;
- not there when this session started (files found then are never touched);
- no live process has it mapped or open (/proc/*/maps, /proc/*/fd): a running job, in
  this session or any other, keeps its files mapped from their creation to its end;
- changed at least MIN_AGE_S ago: a starting job creates its file and maps it at once,
  so a file that young may be one about to be mapped.
A file that cannot be removed (another user's, in the sticky /dev/shm) is left.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Iterable, Optional, Set

SHM = Path("/dev/shm")
# MPICH's initshm and VCI files; Open MPI 5's and 4's shared-memory transport.
MPI_SEGMENT = re.compile(r"(mpich_shm_|mpich_vci_|sm_segment\.|vader_segment\.)")
MIN_AGE_S = 2.0


def segments(directory: Path = SHM) -> Set[str]:
    """The names of the MPI shared-memory files in `directory`."""
    try:
        return {n for n in os.listdir(directory) if MPI_SEGMENT.match(n)}
    except OSError:  # no /dev/shm here
        return set()


def _pids() -> Iterable[str]:
    return (p for p in os.listdir("/proc") if p.isdigit())


def descendants(root: int) -> Set[str]:
    """The pids (as /proc names them) of `root` and every process below it."""
    parent = {}
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/stat") as stat:
                parent[pid] = stat.read().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
    found, grew = {str(root)}, True
    while grew:
        below = {pid for pid, ppid in parent.items() if ppid in found} - found
        found |= below
        grew = bool(below)
    return found


def in_use(directory: Path, pids: Optional[Iterable[str]] = None) -> Set[str]:
    """Names of the files in `directory` that a live process (of `pids`, else any) has
    mapped or open."""
    prefix = f"{directory}/"
    prefix_bytes = prefix.encode()
    used: Set[str] = set()
    for pid in pids if pids is not None else _pids():
        try:
            with open(f"/proc/{pid}/maps", "rb") as maps:
                for line in maps:
                    at = line.find(prefix_bytes)
                    if at >= 0:
                        used.add(line[at + len(prefix_bytes) :].split(b" ")[0].rstrip(b"\n").decode(errors="replace"))
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(prefix):
                    used.add(target[len(prefix) :].split(" (deleted)")[0])
        except OSError:  # the process ended meanwhile, or is not ours to read
            continue
    return used


class ShmSweeper:
    """Removes the orphaned MPI shared-memory files that appeared in `directory` since it
    was made (see the module's docstring)."""

    def __init__(self, directory: Path = SHM, min_age_s: float = MIN_AGE_S) -> None:
        self.directory = directory
        self.min_age_s = min_age_s
        self.started = time.time()
        self.existing = segments(directory)
        self.removed: Set[str] = set()

    def sweep(self) -> Set[str]:
        """The names removed by this call."""
        now = time.time()
        candidates = []
        for name in segments(self.directory):
            if name in self.existing:
                continue
            try:
                st = os.stat(self.directory / name, follow_symlinks=False)
            except OSError:
                continue
            changed = max(st.st_mtime, st.st_ctime)
            if changed >= self.started - 1 and now - changed >= self.min_age_s:
                candidates.append(name)
        if not candidates:
            return set()
        used = in_use(self.directory)
        gone = set()
        for name in candidates:
            if name in used:
                continue
            try:
                os.unlink(self.directory / name)
            except OSError:
                continue
            gone.add(name)
        self.removed |= gone
        return gone

    def finish(self) -> None:
        """The last sweep: the last test's orphans may still be too young, so it waits
        for them (at most min_age_s) when there are any."""
        self.sweep()
        young = segments(self.directory) - self.existing - self.removed
        if young:
            time.sleep(self.min_age_s)
            self.sweep()
