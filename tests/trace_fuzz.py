"""Fuzzing the rank-file reader and the merge: rank files (tests/trace_writer.py, the
documented format) mutated by a seeded random mutator (bit flips, truncations, huge or
negative counts, sizes and ids, records copied and dropped), merged in this process.
Run by tests/test_trace_hostile.py in a subprocess with an address-space limit; alone:
`python tests/trace_fuzz.py ITERATIONS SEED`. Prints one summary line:
`fuzz: N inputs, C crashes, L multi-line files, P max peak MiB`; any crash as its traceback."""

from __future__ import annotations

import random
import resource
import shutil
import sys
import tempfile
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


def main(iterations: int, seed: int) -> int:
    rng = random.Random(seed)
    base = {rank: trace_writer.rank_file(rank, 4, 40) for rank in range(4)}
    crashes = multi = 0
    work = Path(tempfile.mkdtemp(prefix="trace-fuzz-"))
    try:
        for i in range(iterations):
            run = work / f"run{i}"
            run.mkdir()
            victims = rng.sample(range(4), rng.randint(1, 2))
            for rank, data in base.items():
                (run / f"synth_node_{rank}_0.L1.qtr").write_bytes(mutate(data, rng) if rank in victims else data)
            lines: list = []
            try:
                merge.run(run, work / f"out{i}", None, lines.append)
            except BaseException:
                crashes += 1
                print(f"fuzz input {i} (seed {seed}): crash", file=sys.stderr)
                traceback.print_exc()
                shutil.copytree(run, Path(tempfile.gettempdir()) / f"trace-fuzz-crash-{seed}-{i}", dirs_exist_ok=True)
            named = Counter(name for line in lines for name in (p.name for p in run.iterdir()) if name in line)
            if any(n > 1 for n in named.values()):
                multi += 1
                print(f"fuzz input {i} (seed {seed}): more than one line for a file: {lines}", file=sys.stderr)
            shutil.rmtree(run)
            shutil.rmtree(work / f"out{i}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"fuzz: {iterations} inputs, {crashes} crashes, {multi} multi-line files, {peak:.0f} max peak MiB")
    return 1 if crashes or multi else 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]), int(sys.argv[2])))
