"""Tool libraries as files: whatever the file, the core refuses it in one line before
the loader maps it (a library cut short would kill every rank with SIGBUS inside
dlopen), reads a PMPI tool from its program headers alone, and copies only what the
loader reads of it.

Every library the core dlopens from a tool list goes through the same check first
(elf.c): thesis-style tools, callback tools named by path, PMPI tools."""

from __future__ import annotations

import os
import re
import struct

import pytest
import test_pmpi_tools
from test_pmpi_tools import CALLBACK_TOOLS, app_lines, demo_counts, expected_app, pmpi_reports

from conftest import APPS, qmpi_errors

pmpi = test_pmpi_tools.pmpi  # the fixture: PMPI tools built as PMPI tools are

pytestmark = pytest.mark.mpi

# Far above the seconds a refusal takes: a hang shows as a timeout, not as slowness.
ERROR_TIMEOUT_S = 60


def elf_offsets(path):
    """Offsets to cut a built library at: inside the ELF header, inside the program
    headers, inside its second loadable segment, inside the dynamic section, the last
    segment's last byte, inside the section headers, one byte short."""
    data = path.read_bytes()
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((p_offset, p_filesz))
        elif p_type == 2:
            dynamic = p_offset
    return {
        "elf-header": 40,
        "program-headers": phoff + phentsize + 20,
        "segment": loads[1][0] + 100,
        "dynamic": dynamic + 8,
        "last-segment": loads[-1][0] + loads[-1][1] - 1,
        "section-headers": shoff + 64 * 2,
        "one-byte-short": len(data) - 1,
    }


def truncated_copies(lib, out):
    data = lib.read_bytes()
    copies = []
    for name, offset in elf_offsets(lib).items():
        copy = out / f"{lib.stem}-cut-at-{name}.so"
        copy.write_bytes(data[:offset])
        copies.append(copy)
    return copies


def assert_one_truncated_line(proc, lib, where="TOOLS"):
    errors = qmpi_errors(proc.stderr)
    assert proc.returncode != 0, proc.stderr
    assert len(errors) == 1, proc.stderr
    assert f"{where} entry 1 ({lib}): cannot load: file is truncated" in errors[0], errors[0]


@pytest.fixture(scope="session")
def cbcount(mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"cbcount-{mpi.name}")
    flags = [] if mpi.family == "mpich" else ["-D_GNU_SOURCE", "-include", str(core / "qmpi.h")]
    return mpi.compile(
        [CALLBACK_TOOLS / "cbcount.c"],
        out / "libcbcount.so",
        ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", *flags],
    )


@pytest.mark.parametrize("kind", ["thesis", "pmpi", "callback"])
def test_a_truncated_tool_is_refused_in_one_line(mpi, demo_app, sample_tools, pmpi, cbcount, kind, tmp_path):
    """Cut at several offsets, each copy stops the job with one line, before dlopen."""
    lib = {"thesis": sample_tools / "libcounter.so", "pmpi": pmpi["count"], "callback": cbcount}[kind]
    for copy in truncated_copies(lib, tmp_path):
        proc = mpi.run(1, [demo_app], env={"TOOLS": str(copy)}, timeout=ERROR_TIMEOUT_S)
        assert_one_truncated_line(proc, copy)


@pytest.mark.parametrize("variable", ["QMPI_TOOLS", "QMPI_CONF"])
def test_a_truncated_tool_is_refused_from_every_tool_list(mpi, demo_app, sample_tools, pmpi, variable, tmp_path):
    for lib in (sample_tools / "libcounter.so", pmpi["count"]):
        (copy,) = [c for c in truncated_copies(lib, tmp_path) if "cut-at-segment" in c.name]
        if variable == "QMPI_CONF":
            conf = tmp_path / "stack.conf"
            conf.write_text(f"[a]\ntool = {copy}\n")
            env = {"QMPI_CONF": str(conf)}
        else:
            env = {variable: str(copy)}
        proc = mpi.run(1, [demo_app], env=env, timeout=ERROR_TIMEOUT_S)
        assert_one_truncated_line(proc, copy, variable)


def test_a_truncated_tool_stops_every_rank(mpi, demo_app, pmpi, tmp_path):
    (copy,) = [c for c in truncated_copies(pmpi["count"], tmp_path) if "cut-at-segment" in c.name]
    proc = mpi.run(3, [demo_app], env={"TOOLS": f"{pmpi['count']}:{copy}"}, timeout=ERROR_TIMEOUT_S)
    assert proc.returncode != 0
    errors = qmpi_errors(proc.stderr)
    assert errors and all(f"TOOLS entry 2 ({copy}): cannot load: file is truncated" in e for e in errors), proc.stderr


def without_section_headers(lib, out):
    """The library cut at its section headers, the ELF header told so (as sstrip does)."""
    data = bytearray(lib.read_bytes())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    del data[shoff:]
    struct.pack_into("<Q", data, 0x28, 0)
    struct.pack_into("<HH", data, 0x3C, 0, 0)  # e_shnum, e_shstrndx
    out.write_bytes(bytes(data))
    return out


def test_a_pmpi_tool_without_section_headers_intercepts(mpi, demo_app, pmpi, tmp_path):
    """The loader needs no section headers; the core reads the dynamic symbols through
    PT_DYNAMIC and renames the PMPI_ imports in the string table DT_STRTAB points at."""
    lib = without_section_headers(pmpi["count"], tmp_path / "libpmpistripped.so")
    proc = mpi.run(2, [demo_app], env={"TOOLS": f"{lib}:{lib}", "QMPI_VERBOSE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert app_lines(proc.stdout) == expected_app(2)
    for r in range(2):
        assert pmpi_reports(proc.stdout)[r] == [demo_counts(2)] * 2, proc.stdout
    assert f"qmpi: level 1: {lib}, PMPI tool, private copy, slot 1 (" in proc.stderr


MB = 1 << 20


def test_a_sparse_pmpi_tool_listed_four_times_costs_its_loadable_bytes(mpi, core, pmpi, tmp_path):
    """600 MB, all but a few KB of it a hole after the section headers (the loader never
    reads it): four private copies must not each hold the file's size in memory."""
    lib = tmp_path / "libpmpisparse.so"
    lib.write_bytes(pmpi["count"].read_bytes())
    os.truncate(lib, 600 * MB)
    app = mpi.build_app(APPS / "memory_app.c", core, tmp_path / "memory_app")
    proc = mpi.run(1, [app], env={"TOOLS": ":".join([str(lib)] * 4), "QMPI_VERBOSE": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"^memory rank 0: vmhwm_kb=(\d+) copies=(\d+) copies_kb=(\d+)$", proc.stdout, re.M)
    assert m, proc.stdout
    vmhwm_kb, copies, copies_kb = map(int, m.groups())
    loads = re.findall(r"loaded in ([\d.]+) ms", proc.stderr)
    print(
        f"\nsparse 600 MB PMPI tool x4 ({mpi.name}): copies hold {copies_kb} kB, VmHWM {vmhwm_kb} kB, "
        f"loaded in {', '.join(loads)} ms"
    )
    assert copies == 4
    assert copies_kb * 1024 < 200 * MB, f"the 4 copies hold {copies_kb} kB"
    assert vmhwm_kb * 1024 < 200 * MB, f"peak resident set {vmhwm_kb} kB"
    assert len(pmpi_reports(proc.stdout)[0]) == 4, proc.stdout  # each copy intercepts
