"""The merge's per-call lookups and joins, written for speed (np.take with clipping, rows
joined as bytes), must give what the plain numpy expressions give."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from qmpigen.trace.match import ENDPOINT_DTYPE, concatenate  # noqa: E402
from qmpigen.trace.records import codes_in  # noqa: E402
from qmpigen.trace.semantics import by_code  # noqa: E402

CODES = np.array([0, 1, 6, 7, 8, 300, 65534, 65535, 3, 3], np.uint16)


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, bool])
@pytest.mark.parametrize("size", [1, 7, 65536])
def test_by_code_is_the_table_and_missing_past_it(dtype, size):
    rng = np.random.default_rng(size)
    table = rng.integers(0, 2 if dtype is bool else 200, size).astype(dtype)
    missing = dtype(1)
    got = by_code(table, CODES, missing)
    want = np.array([table[c] if c < size else missing for c in CODES.tolist()], dtype)
    assert got.dtype == table.dtype and got.tolist() == want.tolist()
    assert by_code(table, CODES[:0], missing).tolist() == []


def test_by_code_reads_a_strided_column():
    rows = np.zeros(5, [("pad", "<i8"), ("func", "<u2")])
    rows["func"] = [4, 0, 9, 2, 4]
    assert by_code(np.arange(5, dtype=np.int64) * 10, rows["func"], -1).tolist() == [40, 0, -1, 20, 40]


def test_codes_in_names_only_the_codes_given():
    assert codes_in(CODES, [3, 65535, 9]).tolist() == [c in (3, 65535, 9) for c in CODES.tolist()]


def test_concatenate_joins_rows_as_numpy_does():
    a = np.zeros(4, ENDPOINT_DTYPE)
    for i, name in enumerate(ENDPOINT_DTYPE.names):
        a[name] = np.arange(4) * (i + 1) - 2
    b = a[::-2]  # strided
    assert concatenate([a, b, a[:0]]).tobytes() == np.concatenate([a, b, a[:0]]).tobytes()
    other = np.zeros(1, [("time", "<i8"), ("sender", "<i4")])
    with pytest.raises(TypeError):  # numpy's answer to rows of other fields, not a reinterpretation
        concatenate([a, other])
