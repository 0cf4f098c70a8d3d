"""The OTF2 archive carries what the rank files hold that no OTF2 event has a field for
(issue 32, item 10): the arguments of file metadata calls (a seek's offset and whence, a
size, the atomicity flag, a view's displacement) and the shape of a derived datatype (name
or constructor, size, lower bound, extent) of the call that made it and of a call that
names it, as attributes of the calls' Enter events (qmpigen.trace.attributes), read back
with otf2-print; the C loop and its Python fallback write the same. Before: regions
without attributes, the arguments only in the rank files and trace.json."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

pytest.importorskip("otf2")
pytest.importorskip("matplotlib")

import trace_writer as w  # noqa: E402

from qmpigen.trace import layout, merge  # noqa: E402

# Seconds of merges of crafted traces: in `make test-trace`, not in `make test-fast`.
pytestmark = [pytest.mark.trace, pytest.mark.slow]

NAMES = (
    ("MPI_Init", "other"),
    ("MPI_File_open", "file_open"),
    ("MPI_File_seek", "file_meta"),
    ("MPI_File_set_size", "file_meta"),
    ("MPI_File_set_atomicity", "file_meta"),
    ("MPI_File_set_view", "file_meta"),
    ("MPI_File_sync", "file_meta"),
    ("MPI_Type_vector", "type_create"),
    ("MPI_Send", "send"),
    ("MPI_File_close", "file_close"),
    ("MPI_Finalize", "other"),
)
CODE = {name: code for code, (name, _) in enumerate(NAMES)}
CALLS = (
    ("MPI_Init", {}),
    ("MPI_File_open", {"file": 3, "comm": 0, "tag": 2}),
    ("MPI_File_seek", {"file": 3, "offset": 4096, "tag": 600}),
    ("MPI_File_set_size", {"file": 3, "offset": 1 << 20}),
    ("MPI_File_set_atomicity", {"file": 3, "tag": 1}),
    ("MPI_File_set_view", {"file": 3, "offset": 512}),
    ("MPI_File_sync", {"file": 3}),
    ("MPI_Type_vector", {"created": 7}),
    ("MPI_Send", {"comm": 0, "peer": 0, "datatype": 7, "count": 2, "bytes": 48, "tag": 5}),
    ("MPI_File_close", {"file": 3}),
    ("MPI_Finalize", {}),
)
VECTOR = '("datatype" <5>; STRING; "vector(ints=3,addrs=0,types=1)" <1>), ("datatype size" <6>; INT64; 24), '
VECTOR += '("datatype lower bound" <7>; INT64; -8), ("datatype extent" <8>; INT64; 40)'
EXPECTED = {
    "MPI_File_seek": '("offset" <0>; INT64; 4096), ("whence" <1>; INT64; 600)',
    "MPI_File_set_size": '("size" <2>; INT64; 1048576)',
    "MPI_File_set_atomicity": '("atomicity" <3>; INT64; 1)',
    "MPI_File_set_view": '("displacement" <4>; INT64; 512)',
    "MPI_Type_vector": VECTOR,
    "MPI_Send": VECTOR,
}


def _rank_file() -> bytes:
    defaults = {f.name: f.default for f in layout.CALL.layout.fields}
    fields = sorted({name for _, given in CALLS for name in given})
    body = w.call_rows(
        [CODE[name] for name, _ in CALLS], **{f: [given.get(f, defaults[f]) for _, given in CALLS] for f in fields}
    )
    vector = (7, 24, 0, 3, 0, 1, layout.COMBINERS.index("VECTOR"), 0, -8, 40)
    definitions = w.comm(0, [0]) + w.record("FILE", (3, 0, 0), layout.BY_NAME["FILE"].layout, b"data.bin\0")
    definitions += w.record("TYPE", vector, layout.BY_NAME["TYPE"].layout, b"\0")
    return w.synthetic(0, 1, NAMES, definitions, body, len(CALLS), program="io")


def _attributes(archive) -> dict:
    """Region -> the attributes otf2-print shows under its Enter event."""
    text = subprocess.run(["otf2-print", str(archive)], capture_output=True, text=True, check=True).stdout
    found, region = {}, None
    for line in text.splitlines():
        if line.startswith("ENTER"):
            region = re.search(r'Region: "([^"]+)"', line)[1]
        elif "ADDITIONAL ATTRIBUTES:" in line:
            found[region] = line.split("ADDITIONAL ATTRIBUTES: ", 1)[1].strip()
        elif not line.startswith(" "):
            region = None
    return found, text


def test_file_metadata_and_datatype_shapes_are_otf2_attributes(tmp_path, monkeypatch):
    if shutil.which("otf2-print") is None:
        pytest.skip("otf2-print not installed")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "io_node_0_0.L1.qtr").write_bytes(_rank_file())
    assert merge.run(tmp_path / "run", tmp_path / "c", None, print) == 0
    found, with_c = _attributes(tmp_path / "c" / "traces.otf2")
    assert found == EXPECTED, found
    monkeypatch.setenv("QMPIGEN_TRACE_NO_NATIVE", "1")
    assert merge.run(tmp_path / "run", tmp_path / "python", None, print) == 0
    assert _attributes(tmp_path / "python" / "traces.otf2")[1] == with_c
