"""Time in the merge: a rank's ticks to CLOCK_MONOTONIC ns (its timer records), its ns to
rank 0's (the clock offsets measured at init and finalize), and the span of a file's
calls on the aligned axis (the timeline's)."""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Tuple

import numpy as np

from .read import RankFile


def ticks_to_ns(timers: Iterable[Tuple[int, int]]) -> Callable[[np.ndarray], np.ndarray]:
    """Ticks -> CLOCK_MONOTONIC ns for one rank: the line through the first and last of its
    timer pairs (ticks, ns; all its threads read the same tick counter); without timer
    records, ticks are taken as ns."""
    points = sorted(set(timers))
    if not points:
        return lambda t: t.astype(np.int64)
    (t0, n0), (t1, n1) = points[0], points[-1]
    slope = (n1 - n0) / (t1 - t0) if t1 > t0 else 1.0
    if not 0 < slope < 1e6:  # timer records that make no sense (a corrupt file): ticks taken as ns
        slope = 1.0
    # in wrapping 64-bit arithmetic: a corrupt value gives a wrong time, never an error
    base, start = _i64(n0), np.uint64(t0)
    with np.errstate(all="ignore"):
        return lambda t: base + np.rint((t.astype(np.uint64) - start).astype(np.int64) * slope).astype(np.int64)


def clock_alignment(rank_file: RankFile) -> Callable[[np.ndarray], np.ndarray]:
    """Local ns -> rank 0's ns, interpolating the offsets measured at init and finalize."""
    if 0 not in rank_file.clocks:
        return lambda t: t
    local0, offset0 = rank_file.clocks[0]
    local1, offset1 = rank_file.clocks.get(1, rank_file.clocks[0])
    start, offset = _i64(local0), _i64(offset0)
    if local1 == local0:
        return lambda t: t + offset
    slope = (offset1 - offset0) / (local1 - local0)
    if not abs(slope) < 1e-2:  # a drift of more than 1 %: a corrupt record, not a clock
        slope = 0.0
    with np.errstate(all="ignore"):
        return lambda t: t + offset + np.rint(slope * (t - start)).astype(np.int64)


def _i64(value: int) -> np.ndarray:
    """A u64 or i64 from a file as int64, wrapping."""
    return np.array(value & 0xFFFFFFFFFFFFFFFF, np.uint64).astype(np.int64)


def aligned_ns(ticks: int, aligned: Callable, to_ns: Callable) -> int:
    """One tick value of a rank as rank 0's ns (`to_ns`, `aligned`: the rank's conversions)."""
    return int(aligned(to_ns(np.array([ticks], np.uint64)))[0])


def axis_span(
    ticks: Tuple[int, int, Optional[int], Optional[int]], aligned: Callable, to_ns: Callable, origin: int
) -> Tuple[int, int, Optional[int], Optional[int]]:
    """A file's first enter, last leave, end of MPI_Init and start of MPI_Finalize (ticks;
    the last two None where the file has none) as aligned ns from `origin` (the
    timeline's axis)."""

    def ns(value: Optional[int]) -> Optional[int]:
        return None if value is None else aligned_ns(value, aligned, to_ns) - origin

    first, last, init_leave, finalize_enter = ticks
    return (
        aligned_ns(first, aligned, to_ns) - origin,
        aligned_ns(last, aligned, to_ns) - origin,
        ns(init_leave),
        ns(finalize_enter),
    )
