"""Fuzz the EPUB reader: many hostile inputs through `epub2audio BOOK --list-chapters --progress json`.

    .venv/bin/python bench/fuzz.py --count 100000 --seed 7 --jobs 2 [--write DIR] [--hang-seconds 60]

Inputs come from tests/fuzz_epubs.py (deterministic from seed and index), run in-process in worker
processes (tests/fuzz_harness.py) killed when one input hangs. Prints counts by outcome (exit 0,
exit 2 by message class, crash by class, hang), every crash class with reproducers (the command that
writes the input to a file), the slowest input, peak worker RSS and throughput. Exits 1 if anything
crashed or hung. --write DIR saves each failing input (and what was done to it) to DIR.
"""

from __future__ import annotations

import argparse
import collections
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "tests")]

import fuzz_epubs  # noqa: E402
from fuzz_harness import failure_report, fuzz, reproducer  # noqa: E402

EXAMPLES_PER_CLASS = 3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=int, default=0, help="first index (to resume or split a run)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--hang-seconds", type=float, default=60)
    p.add_argument("--memory-mb", type=int, default=2048, help="address-space limit of each worker")
    p.add_argument("--write", type=Path, metavar="DIR", help="save failing inputs here")
    args = p.parse_args()
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)

    counts: collections.Counter = collections.Counter()
    failures: dict[str, list] = collections.defaultdict(list)
    slowest = None
    peak = None
    done = 0
    start = last_report = time.monotonic()
    for r in fuzz(args.seed, range(args.start, args.start + args.count), jobs=args.jobs,
                  hang_seconds=args.hang_seconds, memory_mb=args.memory_mb):
        done += 1
        counts[(r.outcome, "" if r.outcome == "ok" else r.kind)] += 1
        if slowest is None or r.seconds > slowest.seconds:
            slowest = r
        if peak is None or r.rss_kb > peak.rss_kb:
            peak = r
        if r.failed:
            failures[r.kind].append(r)
            if args.write and r.outcome != "generator-error":
                item = fuzz_epubs.make_input(args.seed, r.index)
                (args.write / f"fuzz-{args.seed}-{r.index}.epub").write_bytes(item.data)
                (args.write / f"fuzz-{args.seed}-{r.index}.txt").write_text(
                    f"{r.outcome}: {r.kind}\n{r.message}\n{item.description}\n")
        now = time.monotonic()
        if now - last_report > 30:
            last_report = now
            rate = done / (now - start)
            print(f"  {done}/{args.count} ({rate:.1f}/s, about {(args.count - done) / rate / 60:.0f} min left), "
                  f"{sum(len(v) for v in failures.values())} failing", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers, all reaped by now
    cpu = children.ru_utime + children.ru_stime

    print(f"fuzz: seed {args.seed}, inputs {args.start}..{args.start + args.count - 1}, {args.jobs} jobs: "
          f"{done} inputs in {elapsed:.0f} s ({done / elapsed:.1f}/s, {done / elapsed / args.jobs:.1f}/s per job)")
    print(f"Worker CPU: {cpu:.0f} s, {done / cpu:.1f} inputs per CPU-second (an idle core's rate, start-up included); "
          f"100,000 inputs ≈ {100_000 / (done / cpu) / args.jobs / 60:.0f} min with {args.jobs} idle cores")
    print("\nOutcomes:")
    order = {"ok": 0, "refused": 1, "crash": 2, "hang": 3, "generator-error": 4}
    for (outcome, kind), n in sorted(counts.items(), key=lambda kv: (order.get(kv[0][0], 9), -kv[1])):
        label = {"ok": "exit 0", "refused": "exit 2"}.get(outcome, outcome)
        print(f"  {n:>8}  {label:<16} {kind}")
    if not failures:
        print("\nFailures: none (no crash, no hang, no generator error)")
    else:
        failed = [r for results in failures.values() for r in results]
        print(f"\nFailures: {len(failed)} in {len(failures)} classes")
        print(failure_report(args.seed, failed, EXAMPLES_PER_CLASS))
    if slowest:
        print(f"\nSlowest input: index {slowest.index}, {slowest.seconds:.2f} s ({slowest.outcome} {slowest.kind})"
              f"\n  mutations: {slowest.mutations[:300]}\n  reproduce: {reproducer(args.seed, slowest.index)}")
    if peak:
        print(f"Peak worker RSS: {peak.rss_kb / 1024:.0f} MiB (first reached at index {peak.index}: "
              f"{peak.mutations[:200]})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
