"""Stage pipelining (worker/pipeline.py) vs sequential rendering, CosyVoice3 on FULL-SIZE random weights.

    .venv/bin/python bench/pipeline.py [--segments 3] [--tokens 75] [--rounds 2]

Not a test: prints a table. One process, one in-memory voice (bench/fullsize.py); variants run
interleaved, round after round, so a busy machine slows them alike. Per variant, `--segments`
segments of `--tokens` speech tokens (75 = 3 s) after a 3 s voice prompt:

    seq T=1      today's worker at threads=1: synthesize one segment after another, 1 torch thread
    pipe T=1     the pipelined worker at threads=1 and depth 2: the Prefetcher runs segment n+1's
                 LLM stage on its own thread (1 torch thread) while this thread renders segment n
                 (1 torch thread); same bytes as seq T=1
    seq T=2      today's worker at threads=2 (bytes may differ from T=1: see pipeline.py)
    2 seg T=1    two segments at a time, whole synthesize each, on two threads at 1 torch thread
                 each, sharing the weights: what two workers at threads=1 would do, without the
                 second copy of the model
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from fullsize import full_size_voice  # noqa: E402

TEXTS = [
    "Once upon a time there were three little pigs, and they went out into the world.",
    "The quick brown fox jumps over the lazy dog; she sells sea shells by the sea shore.",
    "It was the best of times, it was the worst of times, hello world, this is a test.",
    "You are a helpful assistant. Please read this text aloud to the people in the room.",
]


def load() -> str:
    return open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"


STAGES: dict[int, list[tuple[float, float]]] = {}  # threads -> (LLM s, render s) per sequential run


def seq(voice, jobs, threads):
    """synthesize, one segment after another, with the two stages timed apart (same bytes)."""
    import torch

    from epub2audio.voices.cosyvoice3.voice import pcm16

    torch.set_num_threads(threads)
    out, llm, render = [], 0.0, 0.0
    for text, seed in jobs:
        t = time.perf_counter()
        tokens = voice.speech_tokens(text.strip(), seed)
        llm += time.perf_counter() - t
        t = time.perf_counter()
        out.append(pcm16(voice.render(tokens)))
        render += time.perf_counter() - t
    STAGES.setdefault(threads, []).append((llm, render))
    return out


def pipe(voice, jobs, threads, depth=2):
    import torch

    from epub2audio.worker.pipeline import Prefetcher

    torch.set_num_threads(threads)
    original = voice.speech_tokens
    prefetch = Prefetcher(voice, threads)
    try:
        out, sent = [], 0
        for i in range(len(jobs)):
            while sent < min(len(jobs), i + depth):  # the supervisor keeps `depth` in flight
                prefetch.submit(sent, *jobs[sent])
                sent += 1
            out.append(prefetch.synthesize(i, *jobs[i]))
        assert prefetch.misses == 0
        return out
    finally:
        prefetch.close()
        voice.speech_tokens = original


def two_at_once(voice, jobs, threads):
    import torch

    out = [None] * len(jobs)
    todo = list(range(len(jobs)))
    lock = threading.Lock()

    def run():
        torch.set_num_threads(threads)
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            out[i] = voice.synthesize(*jobs[i])

    ts = [threading.Thread(target=run) for _ in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return out


VARIANTS = {
    "seq T=1": lambda v, j: seq(v, j, 1),
    "pipe T=1": lambda v, j: pipe(v, j, 1),
    "seq T=2": lambda v, j: seq(v, j, 2),
    "2 seg T=1": lambda v, j: two_at_once(v, j, 1),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=75)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=list(VARIANTS))
    a = ap.parse_args()
    t0 = time.perf_counter()
    voice = full_size_voice(max_tokens_per_segment=a.tokens, prompt_speech=75)
    print(f"# full-size random voice built in {time.perf_counter() - t0:.0f} s; load {load()}", flush=True)
    jobs = [(TEXTS[i % len(TEXTS)], 1000 + i) for i in range(a.segments)]
    times: dict[str, list[float]] = {k: [] for k in a.only}
    digests: dict[str, set] = {k: set() for k in a.only}
    audio_s = 0.0
    for r in range(a.rounds):
        for name in a.only:
            before = load()
            t = time.perf_counter()
            pcm = VARIANTS[name](voice, jobs)
            dt = time.perf_counter() - t
            audio_s = sum(len(p) for p in pcm) / 2 / 24000
            times[name].append(dt)
            digests[name].add(hashlib.sha256(b"".join(pcm)).hexdigest()[:12])
            print(f"round {r + 1} {name:10s} {dt:7.1f} s  RTF {dt / audio_s:5.2f}  load {before}->{load()}", flush=True)
    base = min(times[a.only[0]])
    print(f"\n{a.segments} segments, {audio_s:.1f} s of audio; best of {a.rounds}; ratio = variant / {a.only[0]}")
    for name in a.only:
        best = min(times[name])
        print(f"  {name:10s} best {best:7.1f} s  RTF {best / audio_s:5.2f}  ratio {best / base:4.2f}  "
              f"all {' '.join(f'{x:.0f}' for x in times[name])}  pcm {'/'.join(sorted(digests[name]))}")
    _stages()


def _stages() -> None:
    for threads, runs in STAGES.items():
        print(f"  stages at T={threads}: " + "; ".join(f"LLM {a:.0f} s + render {b:.0f} s" for a, b in runs))


if __name__ == "__main__":
    main()
