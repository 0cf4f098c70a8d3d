"""Where a one-sided operation completes: at the synchronisation that completes it, not
when its call returns (MPI_Put returns with the data maybe still in flight). For each
operation of a thread (MPI_Put, MPI_Get, MPI_Accumulate, ...: those without a request,
which MPI_Wait would complete), the first later call of the same thread on the same
window that completes it: MPI_Win_fence, MPI_Win_complete, MPI_Win_unlock_all,
MPI_Win_flush_all and MPI_Win_flush_local_all complete every operation on the window;
MPI_Win_unlock, MPI_Win_flush and MPI_Win_flush_local those to their target rank (every
operation on the window when the trace does not say which rank). semantics.RMA_COMPLETES
names them; events.py writes the completion (OTF2 RmaOpCompleteNonBlocking) there."""

from __future__ import annotations

import numpy as np

SCOPE_NONE, SCOPE_WINDOW, SCOPE_TARGET = 0, 1, 2  # what a call completes: nothing, the window, one target


def completing_call(
    ops: np.ndarray,
    op_window: np.ndarray,
    op_target: np.ndarray,
    syncs: np.ndarray,
    sync_window: np.ndarray,
    sync_target: np.ndarray,
    sync_scope: np.ndarray,
) -> np.ndarray:
    """For each operation (its call's index, window and target), the index of the call that
    completes it, or -1. `syncs`: the calls that complete operations, with their window,
    target (-1: not known) and scope. Indices count the calls of one thread in time order."""
    whole = (sync_scope == SCOPE_WINDOW) | (sync_target < 0)
    by_window = _first_after(ops, op_window.astype(np.int64), syncs[whole], sync_window[whole].astype(np.int64))
    by_target = _first_after(
        ops, _pair(op_window, op_target), syncs[~whole], _pair(sync_window[~whole], sync_target[~whole])
    )
    return np.where((by_target >= 0) & ((by_window < 0) | (by_target < by_window)), by_target, by_window)


def _first_after(ops: np.ndarray, op_key: np.ndarray, syncs: np.ndarray, sync_key: np.ndarray) -> np.ndarray:
    """For each operation, the first of the syncs with its key after it, or -1: the syncs
    sorted by (key, index), one binary search each."""
    found = np.full(len(ops), -1, np.int64)
    if not len(syncs) or not len(ops):
        return found
    keys, group = np.unique(sync_key, return_inverse=True)
    n = int(max(ops.max(), syncs.max())) + 2
    combined = group.reshape(-1).astype(np.int64) * n + syncs
    order = np.argsort(combined, kind="stable")
    combined, at = combined[order], syncs[order]
    op_group = np.minimum(np.searchsorted(keys, op_key), len(keys) - 1)
    where = np.minimum(np.searchsorted(combined, op_group * n + ops, side="right"), len(combined) - 1)
    hit = (keys[op_group] == op_key) & (combined[where] // n == op_group) & (at[where] > ops)
    found[hit] = at[where[hit]]
    return found


def _pair(window: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(window, target rank) as one int64 key."""
    return window.astype(np.int64) << 32 | (target.astype(np.int64) & 0xFFFFFFFF)
