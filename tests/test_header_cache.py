"""The preprocessed mpi.h kept between runs (qmpigen/mpi/header_cache.py): a second read
of the same MPI runs no preprocessor, and anything that could change what it would give
(a header changed, a header new earlier on the search path, the driver's environment, a
driver that cannot say what it runs, a header changed just now) runs it again."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from qmpigen import api
from qmpigen.mpi import header as header_module
from qmpigen.mpi import header_cache
from qmpigen.mpi.header import HeaderRequest, read_header, read_header_and_search_path

from conftest import QUIRKS, needs_cc

pytestmark = needs_cc

MPI_H = """#include "{quirks}"
#include <extra.h>
int MPI_Extra_one(int a);
int PMPI_Extra_one(int a);
"""
EXTRA_H = "int MPI_Extra_{name}(int a);\nint PMPI_Extra_{name}(int a);\n"
# A driver as MPICH's mpicc is: a script that says what it runs (-show), or runs it.
DRIVER = """#!/bin/sh
if [ "$1" = -show ]; then echo "cc -I{inc} -I{later}"; exit 0; fi
exec cc -I{inc} -I{later} "$@"
"""


def settled(*paths: Path) -> None:
    """Modified a minute ago: older than the few seconds a new entry waits for."""
    then = time.time() - 60
    for path in paths:
        os.utime(path, (then, then))


@pytest.fixture
def setup(monkeypatch, tmp_path):
    """A private cache, an MPI of our own (mpi.h in inc/, extra.h in later/) behind a
    driver that answers -show, and a count of the preprocessor's runs."""
    monkeypatch.setenv("QMPIGEN_CACHE", str(tmp_path / "cache"))
    inc, later = tmp_path / "inc", tmp_path / "later"
    inc.mkdir()
    later.mkdir()
    # A copy of the fixture: the checkout's own may be younger than the settle time.
    quirks = tmp_path / "quirks_mpi.h"
    shutil.copyfile(QUIRKS, quirks)
    (inc / "mpi.h").write_text(MPI_H.format(quirks=quirks))
    (later / "extra.h").write_text(EXTRA_H.format(name="later"))
    driver = tmp_path / "mpicc"
    driver.write_text(DRIVER.format(inc=inc, later=later))
    driver.chmod(0o755)
    settled(quirks, inc / "mpi.h", later / "extra.h")
    runs = []
    real = header_module._run

    def counted(cmd, *args):
        runs.append(cmd)
        return real(cmd, *args)

    monkeypatch.setattr(header_module, "_run", counted)
    return runs, driver, inc, later


def names(driver: Path):
    return {f.name for f in api.read_model(api.MpiSource("auto", str(driver)))[1].functions}


def entries(tmp_path: Path):
    return sorted((tmp_path / "cache" / "headers").glob("*" + header_cache.SUFFIX))


def test_a_second_read_runs_no_preprocessor(setup, tmp_path):
    runs, driver, _, _ = setup
    first = api.read_model(api.MpiSource("auto", str(driver)))
    second = api.read_model(api.MpiSource("auto", str(driver)))
    assert len(runs) == 1 and len(entries(tmp_path)) == 1
    assert second[0] == first[0] and second[1] == first[1]
    assert {"MPI_Extra_one", "MPI_Extra_later"} <= {f.name for f in second[1].functions}


def test_a_changed_header_is_read_again(setup):
    runs, driver, inc, _ = setup
    names(driver)
    (inc / "mpi.h").write_text(MPI_H.format(quirks=inc.parent / "quirks_mpi.h").replace("Extra_one", "Extra_two"))
    settled(inc / "mpi.h")
    changed = names(driver)
    assert "MPI_Extra_two" in changed and "MPI_Extra_one" not in changed and len(runs) == 2


def test_a_new_header_earlier_on_the_search_path_is_seen(setup):
    runs, driver, inc, _ = setup
    assert "MPI_Extra_later" in names(driver)
    (inc / "extra.h").write_text(EXTRA_H.format(name="earlier"))  # inc/ is searched first
    settled(inc / "extra.h")
    shadowed = names(driver)
    assert "MPI_Extra_earlier" in shadowed and "MPI_Extra_later" not in shadowed and len(runs) == 2


def test_the_drivers_environment_is_in_the_key(setup, monkeypatch, tmp_path):
    runs, driver, _, _ = setup
    names(driver)
    monkeypatch.setenv("CPATH", str(tmp_path))
    names(driver)
    monkeypatch.setenv("MPICH_CC", "cc")
    names(driver)
    assert len(runs) == 3 and len(entries(tmp_path)) == 3


def test_a_driver_that_cannot_say_what_it_runs_gets_no_entry(setup, tmp_path):
    runs, _, inc, _ = setup
    source = api.MpiSource(str(inc / "mpi.h"), "cc", (f"-I{tmp_path / 'later'}",))
    api.read_model(source)
    api.read_model(source)
    assert len(runs) == 2 and not entries(tmp_path)


def test_a_header_changed_just_now_gets_no_entry(setup, tmp_path):
    runs, driver, inc, _ = setup
    os.utime(inc / "mpi.h")  # now: it may change again within its clock's tick
    names(driver)
    names(driver)
    assert len(runs) == 2 and not entries(tmp_path)


def test_a_real_mpi_read_from_the_cache_is_the_mpi_read(mpi, monkeypatch, tmp_path):
    """Each MPI's own driver answers -show, and what the entry gives is what a read
    without the cache gives (the header: the model is made from it alone)."""
    for name, value in mpi.extra_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("QMPIGEN_CACHE", str(tmp_path / "cache"))
    request = HeaderRequest("auto", mpi.mpicc)
    fresh = read_header(request)
    header_cache.cached_header(request, read_header_and_search_path)
    runs = []
    monkeypatch.setattr(header_module, "_run", lambda *args: runs.append(args))
    cached = header_cache.cached_header(request, read_header_and_search_path)
    assert not runs and cached == fresh and len(entries(tmp_path)) == 1
