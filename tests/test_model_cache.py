"""The cache of parsed models (qmpigen/mpi/model_cache.py, qmpigen/cache.py): a second
read of the same MPI does not parse again, a changed MPI (header, flag) never gets the
old model, and the cache is used only where it is the user's own: a damaged, foreign
or linked entry and a directory others can write are ignored, never loaded."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import pytest

from qmpigen import api
from qmpigen.mpi import model_cache, parse

from conftest import QUIRKS, needs_cc

pytestmark = needs_cc

HEADER = """#include "{quirks}"
int MPI_Extra_one(int a);
int PMPI_Extra_one(int a);
#ifdef WITH_TWO
int MPI_Extra_two(int a);
int PMPI_Extra_two(int a);
#endif
"""


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """A private cache in tmp_path/cache and a count of the real parses."""
    monkeypatch.setenv("QMPIGEN_CACHE", str(tmp_path / "cache"))
    calls = []
    real = parse.parse_header

    def parse_header(source):
        calls.append(source.header_path)
        return real(source)

    monkeypatch.setattr(parse, "parse_header", parse_header)
    header = tmp_path / "mpi.h"
    header.write_text(HEADER.format(quirks=QUIRKS))
    return calls, header


def names(header: Path, *cflags: str):
    source = api.MpiSource(str(header), "cc", cflags)
    return {f.name for f in api.read_model(source)[1].functions}


def entries(tmp_path: Path):
    return sorted((tmp_path / "cache" / "models").glob("*" + model_cache.SUFFIX))


def test_a_second_read_of_the_same_mpi_is_not_parsed_again(counted, tmp_path):
    calls, header = counted
    first = api.read_model(api.MpiSource(str(header), "cc"))[1]
    second = api.read_model(api.MpiSource(str(header), "cc"))[1]
    assert len(calls) == 1 and second == first and len(entries(tmp_path)) == 1
    mode = stat.S_IMODE(os.stat(entries(tmp_path)[0]).st_mode)
    assert mode & 0o077 == 0  # the user's alone


def test_a_changed_header_or_flag_is_parsed_again(counted, tmp_path):
    calls, header = counted
    assert "MPI_Extra_one" in names(header) and "MPI_Extra_two" not in names(header)
    assert "MPI_Extra_two" in names(header, "-DWITH_TWO")  # a flag that changes the MPI
    header.write_text(HEADER.format(quirks=QUIRKS).replace("Extra_one", "Extra_three"))
    changed = names(header)
    assert "MPI_Extra_three" in changed and "MPI_Extra_one" not in changed  # never the old model
    assert len(calls) == 3


def test_a_changed_parser_is_another_key(counted, tmp_path, monkeypatch):
    calls, header = counted
    names(header)
    monkeypatch.setattr(model_cache, "code_fingerprint", lambda: "another qmpigen")
    names(header)
    assert len(calls) == 2 and len(entries(tmp_path)) == 2


def test_damaged_foreign_and_linked_entries_are_never_loaded(counted, tmp_path):
    calls, header = counted
    names(header)
    (entry,) = entries(tmp_path)
    entry.write_bytes(b"not a pickle")
    assert "MPI_Extra_one" in names(header) and len(calls) == 2  # parsed again and rewritten
    assert pickle.loads(entry.read_bytes()).functions
    os.chmod(entry, 0o666)  # writable by others: someone else's code could be in it
    names(header)
    assert len(calls) == 3 and stat.S_IMODE(os.stat(entry).st_mode) == 0o600  # replaced by a private one
    target = tmp_path / "elsewhere.model"
    entry.rename(target)
    entry.symlink_to(target)
    names(header)
    assert len(calls) == 4 and not entry.is_symlink()


def test_a_directory_others_can_write_is_not_used(counted, tmp_path):
    calls, header = counted
    (tmp_path / "cache").mkdir(mode=0o700)
    os.chmod(tmp_path / "cache", 0o777)
    names(header)
    names(header)
    assert len(calls) == 2 and not (tmp_path / "cache" / "models").exists()


def test_off_writes_nothing(counted, tmp_path, monkeypatch):
    calls, header = counted
    monkeypatch.setenv("QMPIGEN_CACHE", "off")
    names(header)
    names(header)
    assert len(calls) == 2 and not (tmp_path / "cache").exists()
