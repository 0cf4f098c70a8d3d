"""The preprocessed mpi.h kept between runs (qmpigen/mpi/header_cache.py): a second read
of the same MPI runs no preprocessor, and anything that could change what it would give
(a header changed, a header new earlier on the search path, the driver's environment, a
driver that cannot say what it runs, a header changed just now) runs it again."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from qmpigen import api
from qmpigen.errors import QmpigenError
from qmpigen.mpi import header as header_module
from qmpigen.mpi import header_cache
from qmpigen.mpi.header import HeaderRequest, read_header, read_header_and_search_path

from conftest import QUIRKS, needs_cc

pytestmark = needs_cc

MPI_H = """#include "{quirks}"
#include <extra.h>
#include <sub/deep.h>
#include <impl/a.h>
#include "quoted.h"
int MPI_Extra_one(int a);
int PMPI_Extra_one(int a);
"""
EXTRA_H = "int MPI_Extra_{name}(int a);\nint PMPI_Extra_{name}(int a);\n"
# A driver as MPICH's mpicc is: a script that says what it runs (-show), or runs it.
# The search path: inc/ (mpi.h), middle/, outer/absent/ (not there), then later/, which has
# extra.h, sub/deep.h, impl/a.h and sub2/b.h (which impl/a.h includes as "sub2/b.h"); quoted.h
# is in quote2/, after quote1/ (-iquote). inc/sub, middle/sub and later/impl/sub2 are empty.
DRIVER = """#!/bin/sh
FLAGS="-I{tmp}/inc -I{tmp}/middle -I{tmp}/outer/absent -I{tmp}/later -iquote{tmp}/quote1 -iquote{tmp}/quote2"
if [ "$1" = -show ]; then echo "{compiler} $FLAGS"; exit 0; fi
exec {compiler} $FLAGS "$@"
"""


@pytest.fixture
def setup(monkeypatch, tmp_path):
    """A private cache, an MPI of our own behind a driver that answers -show (and names
    a compiler of ours), and a count of the preprocessor's runs. Files count as settled
    at once (SETTLE_NS 0), except where a test is about that."""
    monkeypatch.setenv("QMPIGEN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(header_cache, "SETTLE_NS", 0)
    for name in (
        "inc/sub",
        "middle/sub",
        "outer",
        "later/sub",
        "later/impl/sub2",
        "later/sub2",
        "quote1",
        "quote2",
        "quirks",
    ):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    quirks = tmp_path / "quirks" / "quirks_mpi.h"
    shutil.copyfile(QUIRKS, quirks)
    (tmp_path / "inc" / "mpi.h").write_text(MPI_H.format(quirks=quirks))
    (tmp_path / "later" / "extra.h").write_text(EXTRA_H.format(name="later"))
    (tmp_path / "later" / "sub" / "deep.h").write_text(EXTRA_H.format(name="deep_later"))
    (tmp_path / "quote2" / "quoted.h").write_text(EXTRA_H.format(name="quoted_later"))
    (tmp_path / "later" / "impl" / "a.h").write_text('#include "sub2/b.h"\n')
    (tmp_path / "later" / "sub2" / "b.h").write_text(EXTRA_H.format(name="b_later"))
    compiler = tmp_path / "compiler"
    compiler.write_text('#!/bin/sh\nexec cc "$@"\n')
    driver = tmp_path / "mpicc"
    driver.write_text(DRIVER.format(tmp=tmp_path, compiler=compiler))
    for script in (compiler, driver):
        script.chmod(0o755)
    runs = []
    real = header_module._run

    def counted(cmd, *args):
        runs.append(cmd)
        return real(cmd, *args)

    monkeypatch.setattr(header_module, "_run", counted)
    return runs, driver, tmp_path


def names(driver: Path):
    return {f.name for f in api.read_model(api.MpiSource("auto", str(driver)))[1].functions}


def text(driver: Path, *cflags: str) -> str:
    """The header as the cache gives it (no model: faster)."""
    request = HeaderRequest("auto", str(driver), cflags)
    return header_cache.cached_header(request, read_header_and_search_path).text


def entries(tmp_path: Path):
    return sorted((tmp_path / "cache" / "headers").glob("*" + header_cache.SUFFIX))


def test_a_second_read_runs_no_preprocessor(setup, tmp_path):
    runs, driver, _ = setup
    first = api.read_model(api.MpiSource("auto", str(driver)))
    second = api.read_model(api.MpiSource("auto", str(driver)))
    assert len(runs) == 1 and len(entries(tmp_path)) == 1
    assert second[0] == first[0] and second[1] == first[1]
    assert {"MPI_Extra_one", "MPI_Extra_later", "MPI_Extra_deep_later"} <= {f.name for f in second[1].functions}


def test_a_changed_header_is_read_again(setup):
    runs, driver, tmp = setup
    names(driver)
    mpi_h = tmp / "inc" / "mpi.h"
    mpi_h.write_text(mpi_h.read_text().replace("Extra_one", "Extra_two"))
    changed = names(driver)
    assert "MPI_Extra_two" in changed and "MPI_Extra_one" not in changed and len(runs) == 2


def test_a_rewrite_that_keeps_size_and_modification_time_is_seen(setup):
    """Same size, its modification time set back: the inode change time still moves."""
    runs, driver, tmp = setup
    assert "MPI_Extra_later" in text(driver)
    extra = tmp / "later" / "extra.h"
    before = os.stat(extra)
    extra.write_text(EXTRA_H.format(name="LATER"))
    os.utime(extra, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "MPI_Extra_LATER" in text(driver) and len(runs) == 2


# Where a new extra.h (or sub/deep.h, quoted.h, sub2/b.h) would be found before the one
# read: the header's own directory, a search directory, one the preprocessor found
# missing, the same subdirectory of an earlier search directory, an earlier -iquote
# directory, the subdirectory beside the file that includes "sub2/b.h".
@pytest.mark.parametrize(
    "new",
    [
        "inc/extra.h",
        "middle/extra.h",
        "outer/absent/extra.h",
        "inc/sub/deep.h",
        "middle/sub/deep.h",
        "quote1/quoted.h",
        "later/impl/sub2/b.h",
    ],
)
def test_a_new_header_earlier_on_the_search_path_is_seen(setup, new):
    runs, driver, tmp = setup
    assert "_later(" in text(driver)
    (tmp / new).parent.mkdir(parents=True, exist_ok=True)
    (tmp / new).write_text(EXTRA_H.format(name="earlier"))
    assert "MPI_Extra_earlier" in text(driver) and len(runs) == 2


def test_a_search_directory_after_a_symbolic_link_and_dotdot_is_the_one_the_preprocessor_means(setup):
    """`link/../shadow` is real/shadow when link is real/x: stamped as `shadow` next to
    link (normalised) it would never change."""
    runs, driver, tmp = setup
    (tmp / "real" / "x").mkdir(parents=True)
    (tmp / "real" / "shadow").mkdir()
    (tmp / "link").symlink_to(tmp / "real" / "x")
    driver.write_text(driver.read_text().replace('FLAGS="', f'FLAGS="-I{tmp}/link/../shadow '))
    assert "MPI_Extra_later" in text(driver) and len(entries(tmp)) == 1
    (tmp / "real" / "shadow" / "extra.h").write_text(EXTRA_H.format(name="earlier"))
    assert "MPI_Extra_earlier" in text(driver) and len(runs) == 2
    assert "MPI_Extra_earlier" in text(driver) and len(runs) == 2  # a file read through it is stamped too


def test_relative_paths_are_read_again_from_another_directory(setup, monkeypatch):
    runs, driver, tmp = setup
    for where, name in (("a", "from_a"), ("b", "from_b")):
        (tmp / where / "rel").mkdir(parents=True)
        (tmp / where / "rel" / "extra.h").write_text(EXTRA_H.format(name=name))
    driver.write_text(driver.read_text().replace('FLAGS="', 'FLAGS="-Irel '))
    monkeypatch.chdir(tmp / "a")
    assert "MPI_Extra_from_a" in text(driver)
    assert "MPI_Extra_from_a" in text(driver) and len(runs) == 1
    monkeypatch.chdir(tmp / "b")
    assert "MPI_Extra_from_b" in text(driver) and len(runs) == 2


def test_each_part_of_the_key_makes_its_own_entry(setup, monkeypatch, tmp_path):
    """The environment drivers read, the flags, the driver's file, the compiler's file."""
    runs, driver, tmp = setup
    text(driver)
    monkeypatch.setenv("CPATH", str(tmp_path))
    text(driver)
    monkeypatch.setenv("MPICH_CC", "cc")
    text(driver)
    text(driver, "-DQMPIGEN_TEST_FLAG=1")
    driver.write_text(driver.read_text() + "# changed\n")
    text(driver)
    compiler = tmp / "compiler"
    compiler.write_text(compiler.read_text() + "# changed\n")
    text(driver)
    text(driver)  # the last one again: its entry
    assert len(runs) == 6 and len(entries(tmp_path)) == 6


def test_a_compiler_behind_a_launcher_is_in_the_key(setup, tmp_path):
    """`-show` says `launcher compiler ...` (as with ccache): the compiler's file counts."""
    runs, driver, tmp = setup
    launcher = tmp / "launcher"
    launcher.write_text('#!/bin/sh\nexec "$@"\n')
    launcher.chmod(0o755)
    driver.write_text(driver.read_text().replace(f"{tmp}/compiler", f"{launcher} {tmp}/compiler"))
    text(driver)
    compiler = tmp / "compiler"
    compiler.write_text(compiler.read_text() + "# changed\n")
    text(driver)
    assert len(runs) == 2 and len(entries(tmp_path)) == 2


def test_a_header_changed_during_a_slow_run_gets_no_entry(setup, monkeypatch, tmp_path):
    """The run takes 3 s (by the clock the cache reads); mpi.h changes 0.5 s into it: what
    was read may be the old text, its stamp the new one."""
    runs, driver, tmp = setup
    start = time.time_ns() + 60 * 10**9
    clock = iter([start] + [start + 3 * 10**9] * 10)
    monkeypatch.setattr(header_cache, "time", SimpleNamespace(time_ns=lambda: next(clock)))
    monkeypatch.setattr(header_cache, "SETTLE_NS", 2 * 10**9)
    real = header_module._run

    def slow(cmd, *args):
        output = real(cmd, *args)
        during = start + 5 * 10**8
        os.utime(tmp / "inc" / "mpi.h", ns=(during, during))
        return output

    monkeypatch.setattr(header_module, "_run", slow)
    text(driver)
    assert not entries(tmp_path)


def test_a_driver_that_cannot_say_what_it_runs_gets_no_entry(setup, tmp_path):
    runs, _, tmp = setup
    source = api.MpiSource(str(tmp / "inc" / "mpi.h"), "cc", (f"-I{tmp / 'later'}", f"-iquote{tmp / 'quote2'}"))
    api.read_model(source)
    api.read_model(source)
    assert len(runs) == 2 and not entries(tmp_path)


def test_a_driver_whose_show_hangs_is_given_up_quickly(setup, monkeypatch, tmp_path):
    """Its -show leaves a child holding the pipe: the whole session is killed."""
    runs, driver, tmp = setup
    monkeypatch.setattr(header_cache, "SHOW_TIMEOUT_S", 0.5)
    driver.write_text(driver.read_text().replace('echo "', f'sleep 30 & echo $! > {tmp}/child; wait; echo "'))
    start = time.monotonic()
    assert "MPI_Extra_one" in text(driver)
    assert time.monotonic() - start < 10 and len(runs) == 1 and not entries(tmp_path)
    stat = Path(f"/proc/{(tmp / 'child').read_text().strip()}/stat")
    for _ in range(100):  # killed: gone, or a zombie until whoever adopted it reaps it
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail("the driver's child still runs")


def test_a_bad_header_is_named_before_a_bad_driver(setup, tmp_path):
    with pytest.raises(QmpigenError, match="MPI header not found: .*nothere.h"):
        api.read_model(api.MpiSource(str(tmp_path / "nothere.h"), "no-such-driver"))


@pytest.mark.parametrize("changed", ["quirks/quirks_mpi.h", "middle"])
def test_a_file_or_directory_changed_just_now_gets_no_entry(setup, monkeypatch, tmp_path, changed):
    """Now is a minute on (every inode change time of the setup has settled); then the
    file's or directory's modification time is a second ago."""
    runs, driver, tmp = setup
    now = time.time_ns() + 60 * 10**9
    monkeypatch.setattr(header_cache, "time", SimpleNamespace(time_ns=lambda: now))
    monkeypatch.setattr(header_cache, "SETTLE_NS", 2 * 10**9)
    text(driver)
    assert len(entries(tmp_path)) == 1
    recent = (now - 10**9) / 1e9
    os.utime(tmp / changed, (recent, recent))  # it may change again within its clock's tick
    text(driver)
    text(driver)
    assert len(runs) == 3 and len(entries(tmp_path)) == 1


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
