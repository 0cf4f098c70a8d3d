"""The trace layout's one home (qmpigen/trace/layout.py) and what derives from it:
sample_tools/trace/format.h and docs/trace-format.md's tables are exactly what the layout
makes (byte for byte), the C structs compile with the layout's offsets and sizes, the
reader's dtypes and struct formats agree with them, the kinds are the function model's,
and the merger's collective operations cover every collective. Also: `qmpigen trace`
without its extra is one line and exit 2."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

from qmpigen.trace import layout, layout_text

from conftest import REPO


def test_generated_parts_are_up_to_date():
    for path, text in layout_text.generated().items():
        assert path.read_text() == text, f"{path} is out of date: run `{layout_text.COMMAND}`"
    assert layout_text.main([]) == 0


def test_the_c_structs_compile_with_the_layouts_offsets(tmp_path):
    """format.h alone (its _Static_asserts hold the offsets and sizes), and its packer
    read back by both readers (_loops.c's and Python's): calls at their defaults, with
    every field, with a few; 64-bit fields narrow and wide; a communicator id and a
    duration too large for the head; recv_bytes equal to bytes; a call entered."""
    np = pytest.importorskip("numpy")

    from qmpigen.trace import loops, records, walk

    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "layout.c"
    source.write_text(
        f'#include "{layout_text.TRACE_H}"\n'
        "#include <stdio.h>\n"
        "static void show(struct call_record r, uint64_t leave) {\n"
        "    unsigned char out[COMPACT_CALL_MAX + 8];\n"
        "    size_t size = call_record_pack(&r, leave, out);\n"
        "    r.leave = leave;\n"
        "    fwrite(&r, sizeof r, 1, stdout); fwrite(&size, sizeof size, 1, stdout); fwrite(out, 1, size, stdout);\n"
        "}\n"
        "#define FRESH(code) (struct call_record){.kind = R_CALL, .size = sizeof r, .func = code, CALL_RECORD_DEFAULTS}\n"
        "int main(void) {\n"
        "    struct call_record r = FRESH(3);\n"
        "    r.enter = 10;\n"
        "    show(r, 20);\n"
        "    r.comm = 2; r.peer = 1; r.tag = -7; r.root = 0; r.datatype = 4; r.file = 5; r.count = 6;\n"
        "    r.bytes = 1LL << 40; r.offset = -8; r.request = ~0ULL; r.source = -2; r.recv_tag = 9;\n"
        "    r.window = 10; r.created = 11; r.recv_bytes = 12; r.flags = CALL_FAILED; r.depth = 2;\n"
        "    show(r, 30);\n"
        "    r.comm = 70000; r.enter = 5; show(r, 5 + (1ULL << 33));\n"
        "    r = FRESH(9); r.enter = 1;\n"
        "    r.file = 0; r.datatype = 1; r.count = 8; r.bytes = 8; r.offset = 64;\n"
        "    show(r, 2);\n"
        "    r.offset = -5; r.request = 0xAC000001u; r.comm = -32768; show(r, 4);\n"
        "    r = FRESH(4); r.enter = 100; r.comm = 0; r.datatype = 2; r.count = 3; r.bytes = r.recv_bytes = 12;\n"
        "    show(r, 140);\n"
        "    r.bytes = r.recv_bytes = -(1LL << 35); show(r, 0);\n"
        "    r.flags = 0x5A; show(r, 150);\n"
        "    return 0;\n"
        "}\n"
    )
    proc = subprocess.run(
        [compiler, "-std=c11", "-Wall", "-Wextra", "-Werror", str(source), "-o", str(tmp_path / "layout")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(tmp_path / "layout")], capture_output=True, check=True).stdout
    lib = loops.load()
    sizes, packed_records, wholes = [], [], []
    while out:
        whole, (size,), out = out[:104], struct.unpack_from("<Q", out, 104), out[112:]
        packed, out = out[:size], out[size:]
        if whole[16:24] == bytes(8):  # entered: a call entered has no leave yet, nor its duration
            assert packed[16:20] == bytes(4)
        whole = whole[:7] + bytes([whole[7] & layout.CALL_FLAGS]) + whole[8:]  # the CALL_ flags kept
        assert walk._unpack_compact(packed, 0, size) == whole
        sizes.append(size)
        packed_records.append(packed)
        wholes.append(whole)
    # nothing but the head; every field, then 64-bit ones narrow and wide; a write's five
    # (narrow), with a negative offset, a request and comm -32768 (wide); bytes once
    # (recv_bytes is bytes), narrow and wide, the second one entered
    assert sizes == [24, 104, 112, 48, 56, 40, 48, 48]
    assert layout.COMPACT_CALL_MAX == 112
    if lib is None and os.environ.get("QMPIGEN_REQUIRE_TRACE") == "1":
        pytest.fail("qmpigen/trace/libqmpigen_loops.so was not built: _loops.c's walk not compared")
    if lib is not None:  # _loops.c's walk gives the same calls
        data = b"".join(packed_records)
        calls, _, _, problem = walk._scan_native(lib, data, 0, len(data), records.RankFile(tmp_path / "f", 0, 0, 1, 1))
        assert problem is None and [bytes(c) for c in calls.view(np.uint8).reshape(len(calls), 104)] == wholes


def test_the_readers_types_are_the_layouts():
    pytest.importorskip("numpy")
    from qmpigen.trace import read

    for record in layout.RECORDS:
        s = record.layout
        assert s.format.size == s.size == s.dtype.itemsize
        assert [s.dtype.fields[f.name][1] for f in s.fields] == s.offsets()
    assert read.CALL_DTYPE == layout.CALL.layout.dtype and read.CALL_DTYPE.itemsize == 104
    assert read.HEADER.size == 64 and read.MAGIC == b"QMPITRC\0"
    assert read.CALL_DEFAULTS == {
        "peer": -1,
        "root": -1,
        "datatype": -1,
        "file": -1,
        "source": -1,
        "window": -1,
        "created": -1,
    }
    assert (read.R_CALL, read.R_COMPLETION, read.R_PACKED_CALL) == (6, 7, 10)
    assert layout.PACKED_CALL.layout.dtype.names[:8] == read.CALL_DTYPE.names[:8]


def test_the_kinds_are_the_function_models():
    from qmpigen.mpi import roles

    assert layout.KINDS == roles.KINDS
    text = layout_text.TRACE_H.read_text()
    assert re.findall(r"TRACE_KIND_(\w+) = (\d+)", text) == [(k, str(i)) for i, k in enumerate(roles.KINDS)]


@pytest.mark.parametrize(
    "name, op",
    [
        ("MPI_Barrier", "BARRIER"),
        ("MPI_Ibarrier", "BARRIER"),
        ("MPI_Bcast_init", "BCAST"),
        ("MPI_Ialltoallv_c", "ALLTOALLV"),
        ("MPI_Neighbor_allgather", "ALLGATHER"),
        ("MPI_Ineighbor_alltoallw", "ALLTOALLW"),
        ("MPI_Reduce_scatter_block", "REDUCE_SCATTER_BLOCK"),
        ("MPI_Ireduce_scatter", "REDUCE_SCATTER"),
        ("MPI_Iexscan", "EXSCAN"),
        ("MPI_Scatterv", "SCATTERV"),
    ],
)
def test_every_collective_has_its_otf2_operation(name, op):
    pytest.importorskip("numpy")
    from qmpigen.trace import semantics

    assert semantics.collective_op(name) == op


@pytest.mark.slow  # seconds: `make test`, not `make test-fast`
def test_qmpigen_trace_without_its_extra_is_one_line(tmp_path):
    """numpy (or otf2) missing: the modules made unimportable in a fresh interpreter."""
    for module in ("numpy", "otf2"):
        code = (
            f"import sys; sys.modules[{module!r}] = None\n"
            "from qmpigen.cli import main\n"
            f"main(['trace', {str(tmp_path)!r}, '-o', {str(tmp_path / 'out')!r}])\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO))
        assert proc.returncode == 2, (module, proc.stderr)
        assert proc.stderr == "qmpigen: error: qmpigen trace needs its extra: pip install 'qmpigen[trace]'\n", module


def test_the_c_loops_use_otf2_ops_codes():
    """_loops.c's OP_* and COMPLETE_* enums have otf2_ops.py's values."""
    otf2_out = pytest.importorskip("qmpigen.trace.otf2_ops")
    text = (REPO / "qmpigen" / "trace" / "_loops.c").read_text()
    names = re.search(r"enum \{\s*(OP_NONE[^}]*)\}", text)[1].split()
    names = [name.rstrip(",") for name in names]
    assert {name: getattr(otf2_out, name) for name in names} == {name: i for i, name in enumerate(names)}
    for name, value in re.findall(r"((?:COMPLETE|START)_\w+|CANCELLED) = (\d+)", text):
        assert getattr(otf2_out, name) == int(value)
