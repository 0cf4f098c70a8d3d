"""Requests and messages, with numpy: ties each Wait/Test completion to its Isend/Irecv,
and pairs sends with receives (MPI's non-overtaking order per sender, receiver,
communicator and tag)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import numpy as np

# One side of a message: world ranks, the merged communicator, where and when (aligned
# ns: the send call's enter, the receive's completion).
ENDPOINT_DTYPE = np.dtype(
    [
        ("sender", "<i4"),
        ("receiver", "<i4"),
        ("comm", "<i4"),
        ("tag", "<i4"),
        ("bytes", "<i8"),
        ("time", "<i8"),
        ("thread", "<i4"),
    ]
)


def match_requests(
    start_handle: np.ndarray, start_time: np.ndarray, done_handle: np.ndarray, done_time: np.ndarray
) -> np.ndarray:
    """For each completion of one rank, the index of its start, or -1: per handle, the
    latest start before it not already completed (a stack per handle). MPI reuses a
    handle only after it completes, but an MPI may give many requests completed at once
    the same handle (MPICH's eager Isends): a Waitall over them completes each start of
    that handle, latest first. A completion with nothing open (its request came from a
    call that is not traced) ties to none. Times order the rank's threads (one clock per
    rank); a start sorts before a completion at the same time. Vectorised: the stack
    depth is a running sum of +1 (start) and -1 (completion) per handle, held at 0 from
    below (a completion of nothing), and a completion ties to the latest earlier start
    of its handle at the depth the completion leaves."""
    n_start, n_done = len(start_handle), len(done_handle)
    result = np.full(n_done, -1, np.int64)
    if n_start == 0 or n_done == 0:
        return result
    handle = np.concatenate([start_handle, done_handle]).astype(np.uint64)
    time = np.concatenate([start_time, done_time]).astype(np.int64)
    is_done = np.concatenate([np.zeros(n_start, bool), np.ones(n_done, bool)])
    order = np.lexsort((is_done, time, handle))
    h, done = handle[order], is_done[order]
    n = len(order)
    first = np.ones(n, bool)
    first[1:] = h[1:] != h[:-1]
    group = np.cumsum(first) - 1
    step = np.where(done, -1, 1).astype(np.int64)
    total = np.cumsum(step)
    base = (total - step)[first][group]  # the running sum before each handle's first event
    walk = total - base
    big = 2 * n + 2  # keeps each handle's running minimum to itself
    low = np.minimum(np.minimum.accumulate(walk - group * big) + group * big, 0)
    depth = walk - low  # the stack depth after each event (held at 0)
    before = np.empty(n, np.int64)
    before[0] = 0
    before[1:] = depth[:-1]
    before[first] = 0
    level = np.where(done, before, depth)  # a start's depth after it, a completion's before it
    by_level = np.lexsort((np.arange(n), level, group))
    prev = np.empty(n, np.int64)
    prev[by_level[0]] = -1
    prev[by_level[1:]] = by_level[:-1]
    closes = np.flatnonzero(done & (before >= 1))
    opener = prev[closes]
    ok = opener >= 0
    ok[ok] &= ~done[opener[ok]] & (group[opener[ok]] == group[closes[ok]]) & (level[opener[ok]] == level[closes[ok]])
    result[order[closes[ok]] - n_start] = order[opener[ok]]
    return result


def match(sends: np.ndarray, receives: np.ndarray) -> Tuple[np.ndarray, np.ndarray, int, int]:
    """Pairs in order per (sender, receiver, comm, tag): the n-th send of a key with the
    n-th receive of that key. Indices into sends and receives (pairs in send time
    order), unmatched sends, unmatched receives."""
    key, key_bits = _channel_key(concatenate([sends, receives]))
    n_sends = len(sends)
    place = np.concatenate([_nth(key[:n_sends], sends["time"]), _nth(key[n_sends:], receives["time"])])
    bits = int(place.max(initial=0)).bit_length()
    if key_bits + bits > 62:  # no room beside the place: the channels numbered densely (fewer than the endpoints)
        key = np.unique(key, return_inverse=True)[1].astype(np.int64).reshape(-1)
    # (key, place) is unique on each side: the pairs are the values both sides have
    paired = key << bits | place
    _, send_index, receive_index = np.intersect1d(
        paired[:n_sends], paired[n_sends:], assume_unique=True, return_indices=True
    )
    by_time = np.argsort(sends["time"][send_index], kind="stable")
    send_index, receive_index = send_index[by_time], receive_index[by_time]
    return send_index, receive_index, n_sends - len(send_index), len(receives) - len(receive_index)


def take(records: np.ndarray, index: np.ndarray) -> np.ndarray:
    """records[index] for a structured array, its rows copied as opaque bytes: numpy
    copies structured rows field by field, 7x slower (800,000 endpoints: 165 ms, 22 ms)."""
    return records.view((np.void, records.dtype.itemsize))[index].view(records.dtype)


def concatenate(parts: List[np.ndarray]) -> np.ndarray:
    """np.concatenate of structured arrays of one dtype, rows copied as opaque bytes (as
    take); of dtypes that differ, numpy's (which converts field by field, by name)."""
    dtype = parts[0].dtype
    if any(p.dtype != dtype for p in parts):
        return np.concatenate(parts)
    return np.concatenate([p.view((np.void, dtype.itemsize)) for p in parts]).view(dtype)


CHANNEL = ("sender", "receiver", "comm", "tag")


def _channel_key(e: np.ndarray) -> Tuple[np.ndarray, int]:
    """(sender, receiver, comm, tag) as one int64 per endpoint, ordered as the four fields
    are, and its width in bits: the fields packed side by side, or, when they do not fit
    in 62 bits, the rank of the endpoint's channel among the distinct ones."""
    key = np.zeros(len(e), np.int64)
    used = 0
    for name in CHANNEL:
        column = e[name].astype(np.int64)
        low = int(column.min(initial=0))
        width = max(1, (int(column.max(initial=0)) - low).bit_length())
        used += width
        if used > 62:
            fields = np.empty(len(e), [(name, "<i8") for name in CHANNEL])
            for name in CHANNEL:
                fields[name] = e[name]
            dense = np.unique(fields, return_inverse=True)[1].astype(np.int64).reshape(-1)
            return dense, int(dense.max(initial=0)).bit_length()
        key = key << width | (column - low)
    return key, used


def _nth(key: np.ndarray, time: np.ndarray) -> np.ndarray:
    """Each endpoint's place among those of its key, in time order."""
    order = np.lexsort((time, key))
    ordered = key[order]
    new = np.ones(len(order), bool)
    new[1:] = ordered[1:] != ordered[:-1]
    index = np.arange(len(order))
    place = np.empty(len(order), np.int64)
    place[order] = index - np.maximum.accumulate(np.where(new, index, 0))
    return place


class EndpointSpill:
    """Message endpoints kept on disk until matching, so that the merge's memory does not
    grow with the trace: appended per rank file, grouped by sender; `by_sender` yields
    one sender's sends and receives at a time (a message has one sender, so each group
    matches on its own). The index holds one run per file and sender."""

    def __init__(self, directory: Path):
        directory.mkdir()
        self.paths = (directory / "sends.bin", directory / "receives.bin")
        self.streams = [open(path, "wb") for path in self.paths]
        self.sizes = [0, 0]  # endpoints written per side
        self.runs: Dict[int, List[Tuple[int, int, int]]] = defaultdict(list)  # sender -> (side, first, count)

    def add(self, side: int, endpoints: np.ndarray) -> None:
        if not len(endpoints):
            return
        sender = endpoints["sender"]
        if sender.min() == sender.max():  # a rank file's sends: one sender, one run
            senders, first, counts = sender[:1], np.zeros(1, np.int64), np.array([len(endpoints)])
        else:
            endpoints = take(endpoints, np.argsort(sender, kind="stable"))
            senders, first = np.unique(endpoints["sender"], return_index=True)
            counts = np.diff(np.append(first, len(endpoints)))
        for sender, at, count in zip(senders.tolist(), first.tolist(), counts.tolist()):
            self.runs[sender].append((side, self.sizes[side] + at, count))
        self.streams[side].write(endpoints.tobytes())
        self.sizes[side] += len(endpoints)

    def by_sender(self) -> Iterator[Tuple[int, np.ndarray, np.ndarray]]:
        for stream in self.streams:
            stream.close()
        for sender in sorted(self.runs):
            parts: Tuple[List[np.ndarray], List[np.ndarray]] = ([], [])
            for side, first, count in self.runs[sender]:
                parts[side].append(
                    np.fromfile(self.paths[side], ENDPOINT_DTYPE, count, offset=first * ENDPOINT_DTYPE.itemsize)
                )
            sends, receives = (concatenate(p) if p else np.empty(0, ENDPOINT_DTYPE) for p in parts)
            yield sender, sends, receives
