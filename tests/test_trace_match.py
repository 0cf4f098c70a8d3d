"""Pairing sends with receives (qmpigen/trace/match.py) without an MPI: against a plain
per-channel FIFO written here, for channels that pack into one integer, that need dense
numbering beside a long channel's places, and that do not pack at all."""

from __future__ import annotations

from collections import defaultdict, deque

import pytest

np = pytest.importorskip("numpy")

from qmpigen.trace.match import ENDPOINT_DTYPE, match  # noqa: E402

CHANNEL = ("sender", "receiver", "comm", "tag")


def fifo_pairs(sends, receives):
    """MPI's non-overtaking order by hand: per channel, the n-th send with the n-th receive."""
    queue = defaultdict(deque)
    for i in sorted(range(len(receives)), key=lambda i: (receives["time"][i], i)):
        queue[tuple(int(receives[f][i]) for f in CHANNEL)].append(i)
    pairs = []
    for i in sorted(range(len(sends)), key=lambda i: (sends["time"][i], i)):
        waiting = queue[tuple(int(sends[f][i]) for f in CHANNEL)]
        if waiting:
            pairs.append((i, waiting.popleft()))
    return sorted(pairs)


def endpoints(rng, n, values):
    e = np.zeros(n, ENDPOINT_DTYPE)
    for name in CHANNEL:
        e[name] = rng.choice(values[name], n)
    e["time"] = rng.integers(0, 40, n)
    return e


NARROW = {"sender": [0, 1], "receiver": [0, 1, 2], "comm": [0, 1], "tag": [-1, 0, 5]}
# 61 bits of channel: no room for the places beside it
LONG = {"sender": [0, 1], "receiver": [0, 2**22], "comm": [0, 2**20], "tag": [0, 2**15]}
# over 62 bits: the fields cannot be packed
WIDE = {"sender": [0, 3], "receiver": [0, 2**31 - 1], "comm": [-(2**31), 2**31 - 1], "tag": [-(2**31), 7]}


@pytest.mark.parametrize("values", [NARROW, LONG, WIDE], ids=["narrow", "long", "wide"])
def test_pairs_are_the_fifo_per_channel(values):
    rng = np.random.default_rng(7)
    for _ in range(20):
        sends, receives = endpoints(rng, 300, values), endpoints(rng, 280, values)
        send_index, receive_index, lost_sends, lost_receives = match(sends, receives)
        expected = fifo_pairs(sends, receives)
        assert sorted(zip(send_index.tolist(), receive_index.tolist())) == expected
        assert lost_sends == 300 - len(expected) and lost_receives == 280 - len(expected)
        assert (np.diff(sends["time"][send_index]) >= 0).all()  # in send time order
