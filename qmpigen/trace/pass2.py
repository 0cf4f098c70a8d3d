"""What pass 2 of `qmpigen trace` keeps across rank files, and the lookups its events
need: a world rank's rank in a communicator, the rank an OTF2 event names, a file's I/O
handle and a window's OTF2 RmaWin (made at their first use)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .gather import Gathered
from .match import ENDPOINT_DTYPE
from .read import RankFile
from .requests import lookup

NONE32 = 0xFFFFFFFF
BLOCKING_IO = np.uint64(1) << np.uint64(63)  # blocking I/O's matching ids, apart from request ids


@dataclass
class Pass2:
    """What pass 2 keeps across files."""

    g: Gathered
    comm_refs: np.ndarray  # merged communicator -> OTF2 Comm ref (index -1: none)
    archive: Any  # Otf2Writer or None
    io_handles: Dict[Tuple[int, int], int] = field(default_factory=dict)  # (rank, file id) -> IoHandle ref
    window_refs: Dict[int, int] = field(default_factory=dict)  # merged window -> RmaWin ref


def local_ranks(
    g: Gathered,
    world: np.ndarray,
    gid_of: np.ndarray,
    tables: Optional[Dict[int, Tuple[np.ndarray, np.ndarray]]] = None,
) -> np.ndarray:
    """World ranks -> ranks in each one's communicator (-1: not a member); with
    g.shown_rank, in its OTF2 group (its members with a file)."""
    tables = g.local_rank if tables is None else tables
    world = world.astype(np.int64)
    result = np.full(len(world), -1, np.int64)
    rows = np.flatnonzero((gid_of >= 0) & (world >= 0) & (world < g.world_size))
    gids = gid_of[rows]
    if len(gids) and (gids == gids[0]).all():  # one communicator: the common case, no sort and no mask
        result[rows] = lookup(*tables[int(gids[0])], world[rows])
        return result
    for gid in np.unique(gids).tolist():
        mine = rows[gids == gid]
        result[mine] = lookup(*tables[gid], world[mine])
    return result


def shown_ranks(g: Gathered, world: np.ndarray, gid_of: np.ndarray, local: np.ndarray) -> np.ndarray:
    """What OTF2 events say of world ranks whose ranks in their communicators are
    `local`: their ranks in its OTF2 group, NONE32 for a rank without a file."""
    if g.shown_rank is not g.local_rank:
        local = local_ranks(g, world, gid_of, g.shown_rank)
    return np.where(local >= 0, local, NONE32)


def endpoints(n: int, **columns) -> np.ndarray:
    """n message endpoints (ENDPOINT_DTYPE) with these columns."""
    e = np.empty(n, ENDPOINT_DTYPE)
    for name, value in columns.items():
        e[name] = value
    return e


def io_handle(p: Pass2, rank_file: RankFile, file_id: int, comm) -> int:
    """The OTF2 IoHandle ref of a rank's file, made at its first use."""
    key = (rank_file.rank, file_id)
    if key not in p.io_handles:
        name = rank_file.files.get(file_id, (f"file {file_id}", 0))[0]
        p.io_handles[key] = p.archive.io_handle(rank_file.rank, name, comm)._ref
    return p.io_handles[key]


def window_ref(p: Pass2, gid: int) -> int:
    """The OTF2 RmaWin ref of a merged window, made at its first use."""
    if gid not in p.window_refs:
        comm = p.g.window_comm[gid]
        p.window_refs[gid] = p.archive.window(gid, p.archive.comms[comm])._ref
    return p.window_refs[gid]
