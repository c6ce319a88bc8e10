"""`--workers auto` on a GPU: how many workers share it, found by measuring, and remembered.

Several workers on one GPU each decode one segment alone (no batching, so a segment's bytes never
depend on its neighbours); what they gain together depends on the GPU, the voice and its precision,
so it is measured, not guessed: throughput (audio seconds per wall second) with 1, 2, 3, ...
workers (or the counts given, e.g. 1, 2, 4, 8 as bench/gpu_check.py measures), stopping at the
first count that adds less than `min_gain` (10 %) over the best so far.
The choice is the last count that still paid. A count whose measure fails (a worker could not load,
e.g. the GPU is full) ends the search too.

Throughput counts finished segments only (`Throughput`): a segment that failed, or that was still
being said when the clock stopped, adds nothing, so a count that merely starts more work does not
look faster.

The chosen count is cached per device and voice (`WorkerCountCache`, a JSON file in the cache dir),
so a library measures once, not every book. On the CPU `auto` keeps the old default (render.py):
CPU workers already split the cores between them (voices.catalog), and one worker is the default.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

AUTO = "auto"


@dataclass
class AutoWorkersArgs:
    min_gain: float = 0.10  # a worker must add at least this fraction of throughput to be kept
    max_workers: int = 8  # never measure beyond this many
    segments_per_worker: int = 2  # each timed round renders this many segments per worker
    counts: tuple[int, ...] = ()  # the counts to try, rising from 1; () = 1, 2, 3, ... max_workers


@dataclass
class Choice:
    workers: int
    curve: list[tuple[int, float]] = field(default_factory=list)  # (workers, audio s per wall s) measured
    reason: str = ""


def choose_workers(measure: Callable[[int], float | None], args: AutoWorkersArgs | None = None) -> Choice:
    """Measure throughput at 1, 2, 3, ... workers; keep adding while a worker adds >= min_gain.

    `measure(n)` returns audio seconds per wall second with n workers, or None when n workers
    could not run (then n - 1 is the answer). A measure that comes out lower than the best (noise,
    or the GPU saturated) stops the search like a small gain does: the best count so far is kept."""
    args = args or AutoWorkersArgs()
    counts = args.counts or tuple(range(1, args.max_workers + 1))
    best_n, best_rate = counts[0], measure(counts[0])
    curve = [(best_n, best_rate)]
    if best_rate is None or best_rate <= 0:
        return Choice(best_n, curve, f"{best_n} worker(s) produced no audio to measure")
    for n in counts[1:]:
        rate = measure(n)
        curve.append((n, rate))
        if rate is None:
            return Choice(best_n, curve, f"{n} workers could not run")
        if rate < best_rate * (1 + args.min_gain):
            return Choice(best_n, curve, f"worker {n} added {rate / best_rate - 1:+.1%} (< {args.min_gain:.0%})")
        best_n, best_rate = n, rate
    return Choice(best_n, curve, f"every count up to the largest ({counts[-1]}) added >= {args.min_gain:.0%}")


class Throughput:
    """Audio seconds per wall second over finished segments only."""

    def __init__(self, sample_rate: int, bytes_per_sample: int = 2) -> None:
        self.sample_rate, self.bytes_per_sample = sample_rate, bytes_per_sample
        self.audio_seconds = 0.0
        self.finished = 0
        self.failed = 0

    def add(self, pcm: bytes | None, error=None) -> None:
        """One segment's result: its audio counts only if it finished without an error."""
        if pcm is None or error is not None:
            self.failed += 1
            return
        self.finished += 1
        self.audio_seconds += len(pcm) / self.bytes_per_sample / self.sample_rate

    def rate(self, wall_seconds: float) -> float:
        return self.audio_seconds / wall_seconds if wall_seconds > 0 else 0.0


def cache_key(device: str, model_id: str, pipeline_depth: int = 1) -> str:
    """What the measured count depends on: the GPU, the voice as it runs (its model id records
    backend, precision, devices and decode step) and how many requests each worker holds."""
    return f"{device}|{model_id}|depth={pipeline_depth}"


class WorkerCountCache:
    """{cache_key: {"workers": n, "curve": [[n, rate], ...]}} in one JSON file, written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or unreadable: measure again rather than fail the job
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> int | None:
        entry = self._read().get(key)
        try:
            workers = int(entry["workers"])
        except (TypeError, KeyError, ValueError):
            return None
        return workers if workers >= 1 else None

    def put(self, key: str, choice: Choice) -> None:
        data = self._read()
        data[key] = {"workers": choice.workers, "curve": [[n, r] for n, r in choice.curve], "reason": choice.reason}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
