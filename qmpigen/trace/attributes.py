"""What the rank files hold that no OTF2 event has a field for, as OTF2 attributes of the
calls' Enter events: the arguments of file metadata calls (a seek's offset and whence, a
size, the atomicity flag, a view's displacement: FILE_META) and the shape of a derived
datatype a call names (its `datatype`, or for a constructor the type it made: name or
constructor, size, lower bound, extent). Values are what the rank files say; a whence is
the MPI's own MPI_SEEK_* value."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from . import semantics
from .otf2_out import CallAttributes, Otf2Writer
from .read import RankFile
from .requests import lookup

# per function, (attribute, the CALL field holding it)
FILE_META: Dict[str, Tuple[Tuple[str, str], ...]] = {
    "MPI_File_seek": (("offset", "offset"), ("whence", "tag")),
    "MPI_File_seek_shared": (("offset", "offset"), ("whence", "tag")),
    "MPI_File_get_byte_offset": (("offset", "offset"),),
    "MPI_File_set_size": (("size", "offset"),),
    "MPI_File_preallocate": (("size", "offset"),),
    "MPI_File_set_view": (("displacement", "offset"),),
    "MPI_File_set_atomicity": (("atomicity", "tag"),),
}
DESCRIPTIONS = {
    "offset": "MPI-IO: the offset the call was given (etypes)",
    "whence": "MPI-IO: how the offset counts (the MPI's MPI_SEEK_SET, _CUR or _END value)",
    "size": "MPI-IO: the file size asked for (bytes)",
    "displacement": "MPI-IO: the view's displacement (bytes)",
    "atomicity": "MPI-IO: the atomicity flag (1: atomic mode)",
    "datatype": "the derived datatype (its name, or its constructor)",
    "datatype size": "MPI_Type_size of the derived datatype (bytes)",
    "datatype lower bound": "its lower bound (MPI_Type_get_extent, bytes)",
    "datatype extent": "its extent (MPI_Type_get_extent, bytes)",
}
SHAPE = ("datatype", "datatype size", "datatype lower bound", "datatype extent")


def call_attributes(archive: Otf2Writer, rank_file: RankFile, calls: np.ndarray) -> Optional[CallAttributes]:
    """The attributes of `calls` (time order), or None when none has any."""
    rows: List[np.ndarray] = []  # per attribute given to some calls: (call, order, ref, string, value) columns
    names = {code: name for code, name in rank_file.functions.items() if name in FILE_META}
    for code, name in sorted(names.items()):
        mine = np.flatnonzero(calls["func"] == code)
        for order, (attribute, field) in enumerate(FILE_META[name]):
            ref = archive.attribute(attribute, DESCRIPTIONS[attribute])
            rows.append(_rows(mine, order, ref, 0, calls[field][mine]))
    derived = sorted((i, t) for i, t in rank_file.types.items() if rank_file.type_shapes.get(i, ("",))[0] != "NAMED")
    if derived:
        made = semantics.of_kinds(rank_file, calls["func"], {"type_create"})
        ids = np.array([i for i, _ in derived], np.int64)
        index = lookup(ids, np.arange(len(ids)), np.where(made, calls["created"], calls["datatype"]))
        mine = np.flatnonzero(index >= 0)
        shapes = np.zeros((len(ids), 4), np.int64)
        for at in np.unique(index[mine]).tolist():  # the datatypes called with only: a String each
            type_id, (size, name) = derived[at]
            shapes[at] = (archive.string(name), size, *rank_file.type_shapes.get(type_id, ("", 0, 0))[1:])
        for order, attribute in enumerate(SHAPE if len(mine) else ()):
            ref = archive.attribute(attribute, DESCRIPTIONS[attribute], string=order == 0)
            rows.append(_rows(mine, 8 + order, ref, int(order == 0), shapes[index[mine], order]))
    if not rows or not sum(len(r) for r in rows):
        return None
    table = np.concatenate(rows)
    table = table[np.lexsort((table[:, 1], table[:, 0]))]  # by call, then in the order above
    first = np.searchsorted(table[:, 0], np.arange(len(calls) + 1))
    return CallAttributes(first, table[:, 2].astype(np.uint32), table[:, 3].astype(np.uint8), table[:, 4])


def _rows(calls: np.ndarray, order: int, ref: int, string: int, values: np.ndarray) -> np.ndarray:
    out = np.empty((len(calls), 5), np.int64)
    out[:, 0], out[:, 1], out[:, 2], out[:, 3], out[:, 4] = calls, order, ref, string, values
    return out
