"""Time in the merge: a rank's ticks to CLOCK_MONOTONIC ns (its timer records), its ns to
rank 0's (the clock offsets measured at init and finalize), and the span of a file's
calls on the aligned axis (the timeline's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

import numpy as np

from .read import RankFile

if TYPE_CHECKING:
    from .gather import FileInfo


def ticks_to_ns(files: List[FileInfo]) -> Callable[[np.ndarray], np.ndarray]:
    """Ticks -> CLOCK_MONOTONIC ns for one rank: the line through its first and last timer
    pairs (all its threads read the same tick counter); without timer records, ticks are
    taken as ns."""
    points = sorted({p for f in files for p in f.head.timers})
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
    info: FileInfo, aligned: Callable, to_ns: Callable, origin: int
) -> Tuple[int, int, Optional[int], Optional[int]]:
    """A file's first enter, last leave, end of MPI_Init and start of MPI_Finalize as
    aligned ns from `origin` (the timeline's axis)."""

    def ns(ticks: Optional[int]) -> Optional[int]:
        return None if ticks is None else aligned_ns(ticks, aligned, to_ns) - origin

    first, last = (aligned_ns(t, aligned, to_ns) - origin for t in (info.first_enter, info.last_leave))
    return first, last, ns(info.init_leave), ns(info.finalize_enter)
