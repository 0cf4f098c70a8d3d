"""Fuzzing the rank-file reader and the merge: rank files (tests/trace_writer.py, the
documented format: the ring of rank_file, and the CRAFTED shapes that once cost far more
than their bytes) mutated by a seeded random mutator (bit flips, truncations, huge or
negative counts, sizes and ids, records copied and dropped), sometimes beside a FIFO named
like a rank file, merged in this process. Run by tests/test_trace_hostile.py in a
subprocess with an address-space limit, and by `make fuzz` with the merge's C loops built
with ASan and UBSan (tests/trace_asan.py). Alone:

    python tests/trace_fuzz.py ITERATIONS SEED [--seconds S] [--asan DIR | --loops _loops_asan.so]

(--seconds: stop after S seconds, ITERATIONS at most; --asan: the C loops built with ASan
and UBSan into DIR, this script run again with their runtime). Prints one summary line:
`fuzz: N inputs, C crashes, L multi-line files, P max peak MiB, T max s per input`; any
crash as its traceback."""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trace_writer  # noqa: E402

from qmpigen.trace import merge  # noqa: E402

HUGE = (0x7FFFFFFF, -1, -0x80000000, 0x40000000, 0xFFFF, 0x8000, 1 << 62, -(1 << 63))


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        what = rng.random()
        if what < 0.35:  # bit flips
            at = rng.randrange(len(b))
            b[at] ^= 1 << rng.randrange(8)
        elif what < 0.5:  # truncation, anywhere (the header too)
            del b[rng.randrange(len(b)) :]
            if not b:
                break
        elif what < 0.8:  # a huge or negative value over an aligned 4- or 8-byte field
            width = rng.choice((2, 4, 8))
            at = rng.randrange(0, max(len(b) - width, 1), width)
            value = rng.choice(HUGE) & ((1 << 8 * width) - 1)
            b[at : at + width] = value.to_bytes(width, "little")[: len(b) - at]
        elif what < 0.9:  # an 8-byte aligned chunk copied elsewhere (records repeated)
            start = rng.randrange(0, len(b), 8)
            chunk = b[start : start + 8 * rng.randint(1, 12)]
            at = rng.randrange(0, len(b) + 1, 8)
            b[at:at] = chunk
        else:  # an 8-byte aligned chunk dropped
            start = rng.randrange(0, len(b), 8)
            del b[start : start + 8 * rng.randint(1, 12)]
    return bytes(b)


def base(ring: bytes, rng: random.Random) -> bytes:
    """A victim's bytes before mutation: its ring file, or now and then a crafted shape at
    a small scale (rank 0's file, named as this rank's)."""
    what = rng.random()
    if what < 0.7:
        return ring
    if what < 0.75:
        return trace_writer.dollar_names()
    shape = rng.choice(sorted(trace_writer.CRAFTED))
    return trace_writer.CRAFTED[shape](rng.randint(1, 300 if shape == "many_functions" else 3000))


def one_input(run: Path, out: Path, rings: dict, rng: random.Random) -> list:
    """Writes one mutated directory and merges it: the merge's lines."""
    run.mkdir()
    victims = rng.sample(range(4), rng.randint(1, 2))
    for rank, data in rings.items():
        if rank in victims:
            data = base(data, rng)
            data = mutate(data, rng) if rng.random() < 0.8 else data
        (run / f"synth_node_{rank}_0.L1.qtr").write_bytes(data)
    if rng.random() < 0.05:
        os.mkfifo(run / "synth_node_5_0.L1.qtr")
    lines: list = []
    merge.run(run, out, None, lines.append)
    return lines


def main(iterations: int, seed: int, seconds: float = 0.0) -> int:
    rng = random.Random(seed)
    # ranks 1 and 3 with calls as the tool writes them (COMPACT_CALL), 0 and 2 whole
    rings = {rank: trace_writer.rank_file(rank, 4, 40, compact_calls=rank % 2 == 1) for rank in range(4)}
    crashes = multi = done = 0
    slowest = 0.0
    work = Path(tempfile.mkdtemp(prefix="trace-fuzz-"))
    started = time.monotonic()
    try:
        for i in range(iterations):
            if seconds and time.monotonic() - started > seconds:
                break
            run, out = work / f"run{i}", work / f"out{i}"
            at = time.monotonic()
            try:
                lines = one_input(run, out, rings, rng)
            except BaseException:
                crashes += 1
                lines = []
                print(f"fuzz input {i} (seed {seed}): crash", file=sys.stderr)
                traceback.print_exc()
                shutil.copytree(run, Path(tempfile.gettempdir()) / f"trace-fuzz-crash-{seed}-{i}", dirs_exist_ok=True)
            slowest = max(slowest, time.monotonic() - at)
            # lines about a file start with its name (another file's may name it as the one merged)
            named = Counter(line.split(": ", 2)[1] for line in lines if line.count(": ") >= 2)
            if any(n > 1 for n in named.values()):
                multi += 1
                print(f"fuzz input {i} (seed {seed}): more than one line for a file: {lines}", file=sys.stderr)
            done += 1
            shutil.rmtree(run)
            shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"fuzz: {done} inputs, {crashes} crashes, {multi} multi-line files, {peak:.0f} max peak MiB, "
        f"{slowest:.1f} max s per input"
    )
    return 1 if crashes or multi else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="fuzz the rank-file reader and the merge")
    parser.add_argument("iterations", type=int)
    parser.add_argument("seed", type=int)
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after this long (ITERATIONS at most)")
    parser.add_argument("--loops", type=Path, default=None, help="a build of _loops.c to merge with (trace_asan.py)")
    parser.add_argument("--asan", type=Path, default=None, help="build _loops.c with ASan into DIR and fuzz with it")
    args = parser.parse_args()
    import trace_asan

    if args.asan is not None:  # this script again, in a Python with the sanitizer's runtime
        argv = [sys.executable, __file__, str(args.iterations), str(args.seed), "--seconds", str(args.seconds)]
        os.execve(sys.executable, argv + ["--loops", str(trace_asan.build(args.asan))], trace_asan.environment())
    if args.loops is not None:
        trace_asan.activate(args.loops)
    raise SystemExit(main(args.iterations, args.seed, args.seconds))
