"""Soak the worker machinery: many segments, with and without forced recycling.

    .venv/bin/python bench/soak.py [--segments 200] [--recycle-every 25] [--voice joe]

Runs the same segments twice through one supervised worker slot: once with recycling off, once
recycling the worker every N requests. Prints the parent's RSS (it must stay flat: the parent holds
no model), the worker's private memory over time, how many workers were started and recycled, and
the real-time factor of each run, so the cost of recycling is a ratio measured in one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from epub2audio.worker.supervisor import Supervisor, WorkerPolicy

ROOT = Path(__file__).resolve().parents[1]


def sentences(count: int) -> list[str]:
    from epub2audio.book.epub import load_book
    from epub2audio.book.segment import segment_chapter

    book = load_book(ROOT / "examples" / "aesop-three-fables.epub")
    base = [s.text for i, c in enumerate(book.chapters) for s in segment_chapter(i, c)]
    # Vary the text so no two requests are identical.
    return [f"{base[i % len(base)]} Number {i}." for i in range(count)]


def parent_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def soak(voice: str, texts: list[str], policy: WorkerPolicy, label: str) -> float:
    supervisor = Supervisor({"voice": voice, "threads": 1}, policy)
    supervisor.details  # start the worker before the clock
    audio_seconds, started = 0.0, time.perf_counter()
    rate = supervisor.details.sample_rate
    print(f"\n{label}")
    print(f"{'request':>8}{'worker MB':>11}{'parent MB':>11}{'workers':>9}")
    for i, text in enumerate(texts, 1):
        pcm, _, _ = supervisor.synthesize(text, i)
        audio_seconds += len(pcm) / 2 / rate
        if i % max(1, len(texts) // 10) == 0:
            memory = supervisor.stats.memory_samples[-1][1] / 2**20
            print(f"{i:8d}{memory:11.0f}{parent_rss_mb():11.0f}{supervisor.stats.spawned:9d}")
    wall = time.perf_counter() - started
    supervisor.close()
    s = supervisor.stats
    print(f"spawned {s.spawned}, recycled {s.recycled}, died {s.died}; "
          f"{audio_seconds:.0f} s of audio in {wall:.1f} s: RTF {wall / audio_seconds:.4f}")
    return wall / audio_seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", type=int, default=200)
    parser.add_argument("--recycle-every", type=int, default=25)
    parser.add_argument("--voice", default="joe")
    args = parser.parse_args()
    texts = sentences(args.segments)
    print(f"{args.segments} segments, voice {args.voice}; load {os.getloadavg()[0]:.1f}")
    steady = soak(args.voice, texts, WorkerPolicy(), "no recycling")
    recycled = soak(args.voice, texts, WorkerPolicy(max_requests=args.recycle_every),
                    f"recycling every {args.recycle_every} requests")
    print(f"\nRTF with recycling / without = {recycled / steady:.3f}; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
