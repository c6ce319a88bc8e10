"""What `--readalong words` costs with Piper (not a test: prints numbers side by side).

    .venv/bin/python bench/readalong_words.py [--sentences 12]

For the sample book's sentences: the seconds joe takes to synthesise each (what the job already
spent) next to the seconds word_times takes for it afterwards (the durations graph, no decoder,
plus espeak-ng on each word), and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sentences(limit: int) -> list[str]:
    from epub2audio.book.epub import load_book
    from epub2audio.book.segment import split_sentences

    book = load_book(ROOT / "examples" / "aesop-three-fables.epub")
    out = [s for chapter in book.chapters for p in chapter.paragraphs for s in split_sentences(p)]
    return out[:limit]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=12)
    args = parser.parse_args()
    from epub2audio.voices import piper

    voice = piper.load()
    texts = sentences(args.sentences)
    voice.word_times(texts[0], 1)  # builds the durations graph once (not counted)
    synth = words = 0.0
    audio = 0
    for seed, text in enumerate(texts, 1):
        started = time.perf_counter()
        pcm = voice.synthesize(text, seed)
        synth += time.perf_counter() - started
        started = time.perf_counter()
        timed = voice.word_times(text, seed)
        words += time.perf_counter() - started
        assert timed["samples"] == len(pcm) // 2
        audio += len(pcm) // 2
    seconds = audio / voice.info.sample_rate
    print(f"{len(texts)} sentences, {seconds:.1f} s of audio")
    print(f"synthesize  {synth:7.2f} s  (RTF {synth / seconds:.3f})")
    print(f"word_times  {words:7.2f} s  (RTF {words / seconds:.3f})")
    print(f"word_times / synthesize = {words / synth:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
