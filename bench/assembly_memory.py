"""Peak memory of M4B assembly for a long synthetic book (not a test: prints numbers).

    .venv/bin/python bench/assembly_memory.py --hours 2

The book is made of a few distinct one-minute WAVs reused as many parts (so the bench needs little
disk), with silence between them and one chapter per `--chapter-minutes`. It prints the peak RSS
of this Python process and of the ffmpeg encoder next to the size of the raw PCM they streamed:
both should stay flat (tens of MB) however many hours go through.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import threading
import time
import wave
from pathlib import Path

import numpy as np

from epub2audio.audiobook import AudioChapter, Tags, write_m4b

RATE = 22050
PART_SECONDS = 60
DISTINCT_PARTS = 5


def synthetic_parts(folder: Path) -> list[Path]:
    """A few minutes of speech-like noise bursts, each a separate WAV."""
    rng = np.random.default_rng(0)
    paths = []
    t = np.arange(RATE) / RATE
    for i in range(DISTINCT_PARTS):
        path = folder / f"part{i}.wav"
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            for _ in range(PART_SECONDS):  # a second at a time, so this bench's own RSS stays small
                envelope = 0.5 + 0.5 * np.sin(2 * np.pi * (2 + i) * t)
                x = np.clip(rng.standard_normal(RATE) * envelope * 0.15, -1, 1)
                w.writeframes((x * 32767).astype("<i2").tobytes())
        paths.append(path)
    return paths


def build_chapters(parts: list[Path], hours: float, chapter_minutes: int) -> list[AudioChapter]:
    minutes = max(1, round(hours * 60))
    chapters = []
    for start in range(0, minutes, chapter_minutes):
        count = min(chapter_minutes, minutes - start)
        body: list[Path | int] = []
        for k in range(count):
            body += [parts[(start + k) % len(parts)], RATE // 2]  # half a second between parts
        chapters.append(AudioChapter(f"Chapter {len(chapters) + 1}", body))
    return chapters


class ChildPeakRSS:
    """Polls VmHWM of this process's children (Linux /proc).

    resource.getrusage(RUSAGE_CHILDREN) is no good here: a child's ru_maxrss includes the memory
    it shared with this process between fork and exec, so it reports at least our own RSS.
    """

    def __init__(self) -> None:
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "ChildPeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for pid in self._children():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue  # it just exited
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kib = max(self.peak_kib, int(line.split()[1]))

    @staticmethod
    def _children() -> list[str]:
        pids = []
        for task in Path("/proc/self/task").glob("*/children"):
            try:
                pids += task.read_text().split()
            except OSError:
                pass
        return pids


def rss_mb(usage: resource.struct_rusage) -> float:
    # ru_maxrss is in KiB on Linux and in bytes on macOS.
    return usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--chapter-minutes", type=int, default=10)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="epub2audio-bench-") as tmp:
        folder = Path(tmp)
        parts = synthetic_parts(folder)
        chapters = build_chapters(parts, args.hours, args.chapter_minutes)
        python_before = rss_mb(resource.getrusage(resource.RUSAGE_SELF))
        began = time.monotonic()
        with ChildPeakRSS() as child:
            result = write_m4b(folder / "bench.m4b", chapters, Tags("Bench", ["Nobody"], "Noise"), None, RATE)
        wall = time.monotonic() - began
        python_peak = rss_mb(resource.getrusage(resource.RUSAGE_SELF))
        ffmpeg_peak = child.peak_kib / 1024
        out_mb = result.path.stat().st_size / 1e6

    pcm_mb = result.duration_samples * 2 / (1024 * 1024)
    hours = result.duration_samples / RATE / 3600
    print(f"audio            {hours:.2f} h in {len(chapters)} chapters, {sum(len(c.parts) for c in chapters)} parts")
    print(f"raw PCM streamed {pcm_mb:8.1f} MiB")
    print(f"python peak RSS  {python_peak:8.1f} MiB (before assembly {python_before:.1f};"
          f" ratio to PCM {python_peak / pcm_mb:.3f})")
    print(f"ffmpeg peak RSS  {ffmpeg_peak:8.1f} MiB (ratio to PCM {ffmpeg_peak / pcm_mb:.3f})")
    print(f"M4B              {out_mb:8.1f} MB, {wall:.0f} s wall ({hours * 3600 / wall:.0f}x real time)")


if __name__ == "__main__":
    main()
