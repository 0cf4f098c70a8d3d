"""glibc's malloc while `qmpigen trace` merges: every array from the heap, reused from one
rank file to the next.

An array in a fresh mapping costs a page fault per page on first touch (and the kernel
clears the page). glibc maps each block over its mmap threshold on its own and unmaps it
when freed, so such an array costs its faults again in every file. With the threshold
fixed at 1 MiB, a file's call records (80 bytes each) crossed it at 13,000 calls and its
int64 columns at 130,000: on the bench's 10x trace (400,000 calls a file) kernel time was
half the merge (0.48 M faults, 17,000 now) and its events per second 0.6-0.85x the 1x
trace's. No threshold is high enough (glibc takes at most 32 MiB; the 10x trace's record
arrays are 31 MiB): no mappings at all, and the heap kept whole until the merge ends.
Peak memory is about what mapped arrays gave: the heap's free blocks take the next
file's arrays (16 files of 400,000 calls: the heap stopped growing after the fifth).
Elsewhere than glibc, nothing changes."""

from __future__ import annotations

import ctypes
from contextlib import contextmanager
from typing import Iterator

# glibc's <malloc.h> and the defaults of its malloc.c
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX = 128 * 1024, 65536
KEEP_FREE = (1 << 31) - 1  # mallopt takes an int: the heap trimmed only past 2 GiB free


@contextmanager
def arrays_from_the_heap() -> Iterator[None]:
    """No mapped blocks and no trimming while the block runs; then glibc's defaults
    again, and the free heap given back to the system."""
    try:
        libc = ctypes.CDLL(None)
        mallopt, malloc_trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        yield
        return
    mallopt(M_MMAP_MAX, 0)
    mallopt(M_TRIM_THRESHOLD, KEEP_FREE)
    try:
        yield
    finally:
        mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        malloc_trim(0)
