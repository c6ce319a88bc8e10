"""DistillMOS per chapter as `epub2audio verify` scores it: good chapters of each voice family, and
the same chapters broken, to set the norms and the doubt rule of audiobook/verify/quality.py.

    .venv/bin/python bench/verify_quality.py [--voices joe,hibari,kokoro:af_heart,tone] [--windows 3]

Good: the three Aesop fables (examples/), chapter II of A Dog's Tale, The Art of War's dedication
and appreciations, Beowulf's abbreviations and word list (tests/corpus/), read by each voice.
Broken (the Aesop chapters of every voice and all of joe's, every segment WAV of the job rewritten,
then the M4B assembled again as render does): white noise at 5 dB SNR; clipped (gain x8, cut at full scale); choppy (every
40 ms of speech followed by 40 ms of silence); wrong rate (22.05 kHz samples made 1.4x faster, as
if 16 kHz audio were written at 22.05 kHz). Prints one line a chapter, then per family the mean,
min and max, and the time verify took with and without DistillMOS.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
CORPUS = ROOT / "tests" / "corpus"
BOOKS = [(ROOT / "examples" / "aesop-three-fables.epub", "1-3"),
         (CORPUS / "a-dogs-tale-pg-epubmaker-0-3-pginternal-epub2-ncx.epub", "2"),
         (CORPUS / "art-of-war-giles-huge-endnotes-se-epub3.epub", "1,6"),
         (CORPUS / "beowulf-pg-sidenotes-footnotes-glossary-epub2-ncx.epub", "3,6")]
KINDS = ("noise", "clipped", "choppy", "wrong-rate")


def convert(book: Path, chapters: str, voice: str, folder: Path) -> tuple[Path, Path]:
    out, job = folder / f"{book.stem}.m4b", folder / f"{book.stem}.job"
    env = dict(os.environ, EPUB2AUDIO_CACHE_DIR=str(folder / "cache"))
    subprocess.run([sys.executable, "-m", "epub2audio.cli", str(book), "-o", str(out), "--voice", voice,
                    "--chapters", chapters, "--work-dir", str(job), "--no-verify", "--progress", "none"],
                   check=True, env=env)
    return out, job


def _damaged(kind: str, pcm: np.ndarray, rate: int, rng: np.random.Generator) -> np.ndarray:
    x = pcm.astype(np.float64) / 32768
    if kind == "noise":
        x = x + rng.standard_normal(len(x)) * np.sqrt(np.mean(x ** 2) / 10 ** 0.5)
    elif kind == "clipped":
        x = np.clip(x * 8, -1, 1)
    elif kind == "choppy":
        chunk = rate // 25  # 40 ms
        pieces = [x[i:i + chunk] for i in range(0, len(x), chunk)]
        x = np.concatenate([np.concatenate([p, np.zeros(chunk)]) for p in pieces]) if pieces else x
    elif kind == "wrong-rate":
        x = np.interp(np.arange(0, len(x), 22050 / 16000), np.arange(len(x)), x)  # 1.38x faster
    return np.round(np.clip(x, -1, 32767 / 32768) * 32768).astype("<i2")


def damage(out: Path, job: Path, kind: str, folder: Path) -> tuple[Path, Path]:
    from epub2audio.audiobook.m4b import tags_for_book, write_m4b
    from epub2audio.book.epub import load_book
    from epub2audio.render import audio_chapters
    from epub2audio.store import SegmentStore

    job_copy = folder / f"{out.stem}-{kind}.job"
    shutil.copytree(job, job_copy)
    store = SegmentStore(job_copy)
    rng = np.random.default_rng(0)
    rate = None
    for _c, _i, key, _p in store.plan():
        path = store.audio_path(key)
        with wave.open(str(path), "rb") as w:
            rate = w.getframerate()
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(rate)
            w.writeframes(_damaged(kind, pcm, rate, rng).tobytes())
    book = load_book(store.get_meta("book"))
    damaged = folder / f"{out.stem}-{kind}.m4b"
    write_m4b(damaged, list(audio_chapters(store, rate).values()), tags_for_book(book, "Joe"), book.cover, rate)
    store.close()
    return damaged, job_copy


def main() -> None:
    from epub2audio.audiobook.verify import verify_m4b

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voices", default="joe,hibari,kokoro:af_heart,tone")
    parser.add_argument("--windows", type=int, default=2, help="windows per chapter (verify's default 2)")
    parser.add_argument("--books", type=int, default=len(BOOKS), help="the first N of the books (default all)")
    args = parser.parse_args()
    from epub2audio.audiobook.verify.quality import MosScorer

    started = time.perf_counter()
    MosScorer().close()
    load = time.perf_counter() - started
    scores: dict[str, list[float]] = {}
    seconds = {"with": 0.0, "without": 0.0, "chapters": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for voice in args.voices.split(","):
            folder = Path(tmp) / voice.replace(":", "_")
            folder.mkdir()
            for book, chapters in BOOKS[:args.books]:
                out, job = convert(book, chapters, voice, folder)
                cases = [(voice, out, job)]
                if voice == "joe" or book == BOOKS[0][0]:
                    cases += [(f"{cases[0][0]} {kind}", *damage(out, job, kind, folder)) for kind in KINDS]
                for label, m4b, job_dir in cases:
                    started = time.perf_counter()
                    report = verify_m4b(m4b, job_dir, windows_per_chapter=args.windows, asr=False, quality=True)
                    took = time.perf_counter() - started
                    if label == voice:
                        started = time.perf_counter()
                        verify_m4b(m4b, job_dir, windows_per_chapter=args.windows, asr=False, quality=False)
                        seconds["without"] += time.perf_counter() - started
                        seconds["with"] += took
                        seconds["chapters"] += len(report.chapters)
                    for row in report.chapters:
                        windows = " ".join(f"{w.distillmos:.2f}" for w in row.quality_windows)
                        print(f"{label:26} {book.stem[:22]:22} {row.title[:26]:26} {row.seconds:6.1f} s  "
                              f"MOS {row.distillmos}  windows {windows}", flush=True)
                        if row.distillmos is not None:
                            scores.setdefault(label, []).append(row.distillmos)
    print()
    print(f"{'case':26} {'chapters':>8} {'mean':>6} {'min':>6} {'max':>6}")
    for label, values in scores.items():
        print(f"{label:26} {len(values):>8} {statistics.fmean(values):6.2f} {min(values):6.2f} {max(values):6.2f}")
    n = seconds["chapters"]
    print(f"\nverify --no-asr, {args.windows} windows a chapter, over {n} good chapters: "
          f"{seconds['without'] / n:.2f} s a chapter without DistillMOS, {seconds['with'] / n:.2f} s with it "
          f"(the child's start, {load:.1f} s once per run, included)")


if __name__ == "__main__":
    main()
