"""Kokoro-82M on this CPU: the packaged int8 graph against the same weights dequantised to fp32.

    nice .venv/bin/python bench/kokoro.py [--windows 8] [--style jm_kumo] [--book moby-dick-epub3.epub]

The same windows of corpus prose (three consecutive segments each, from the first prose chapters
of the book that have them, as the engine segments them) are read by:
- Kokoro with the graph as shipped (int8: DynamicQuantizeLinear + MatMulInteger/ConvInteger);
- Kokoro fp32: every quantised op rewritten at load into fp32 weights and kernels;
- Kokoro fp32-matmul: the MatMuls and LSTMs in fp32, the convolutions left int8;
- Piper joe, the default voice, for the time a book takes;
all on one onnxruntime thread. Prints, side by side: RTF (synthesis seconds / audio seconds), audio
seconds, Whisper tiny.en WER (the [verify] extra's packaged model, as `epub2audio verify` decodes)
and, for each rewrite, how its audio differs from int8's (max abs sample difference, SNR over the
common length, length difference). Then the arithmetic for a book Piper reads in 10 hours, read by
two single-thread Kokoro workers on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))

from epub2audio.audiobook.ffmpeg import ffmpeg_exe  # noqa: E402
from epub2audio.audiobook.verify.speech import transcribe  # noqa: E402
from epub2audio.audiobook.verify.words import edit_distance, normalize_words  # noqa: E402
from epub2audio.book.epub import load_book  # noqa: E402
from epub2audio.book.segment import segment_chapter  # noqa: E402

PRECISIONS = ("int8", "fp32", "fp32-matmul")


def windows(book: Path, count: int, per_window: int = 3) -> list[str]:
    texts = []
    for i, chapter in enumerate(load_book(book).chapters):
        segments = [s.text for s in segment_chapter(i, chapter) if len(s.text) >= 40]
        for start in range(0, len(segments) - per_window + 1, per_window * 4):
            texts.append(" ".join(segments[start:start + per_window]))
            if len(texts) == count:
                return texts
    return texts


def to16k(pcm: bytes, rate: int) -> np.ndarray:
    cmd = [ffmpeg_exe(), "-v", "error", "-f", "s16le", "-ar", str(rate), "-ac", "1", "-i", "-",
           "-ar", "16000", "-f", "f32le", "-"]
    return np.frombuffer(subprocess.run(cmd, input=pcm, capture_output=True, check=True).stdout, dtype="<f4")


def wer(texts: list[str], audio: list[bytes], rate: int, transcripts: list | None = None) -> float:
    return wer16k(texts, [to16k(pcm, rate) for pcm in audio], transcripts)


def wer16k(texts: list[str], audio16k: list[np.ndarray], transcripts: list | None = None) -> float:
    """Pooled WER of each text against the transcript of its 16 kHz float audio (each transcript is
    appended to `transcripts` when given)."""
    errors = words = 0
    for text, samples in zip(texts, audio16k):
        reference, heard = normalize_words(text), transcribe(samples)
        errors += edit_distance(reference, normalize_words(heard))
        words += len(reference)
        if transcripts is not None:
            transcripts.append(heard)
    return errors / words


def read(voice, texts: list[str]) -> tuple[list[bytes], float]:
    voice.synthesize("A short warm-up.", 1)
    audio, seconds = [], 0.0
    for text in texts:
        started = time.process_time()  # CPU seconds: the machine is shared, and we run one thread
        audio.append(voice.synthesize(text, 1))
        seconds += time.process_time() - started
    return audio, seconds


def compare(a: list[bytes], b: list[bytes]) -> tuple[float, float, int]:
    diffs, signal, noise, lengths = [], 0.0, 0.0, 0
    for x, y in zip(a, b):
        x = np.frombuffer(x, "<i2").astype(np.float64) / 32768
        y = np.frombuffer(y, "<i2").astype(np.float64) / 32768
        n = min(len(x), len(y))
        diffs.append(np.abs(x[:n] - y[:n]).max())
        signal += (x[:n] ** 2).sum()
        noise += ((x[:n] - y[:n]) ** 2).sum()
        lengths += abs(len(x) - len(y))
    return max(diffs), 10 * np.log10(signal / noise) if noise else float("inf"), lengths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--style", default="jm_kumo")
    parser.add_argument("--book", default="moby-dick-epub3.epub")
    args = parser.parse_args()
    os.environ.setdefault("EPUB2AUDIO_DATA_DIR", tempfile.mkdtemp(prefix="kokoro-bench-"))
    from epub2audio.voices import kokoro, piper

    texts = windows(ROOT / "tests" / "corpus" / args.book, args.windows)
    print(f"{len(texts)} windows of {args.book}, {sum(map(len, texts))} characters; style {args.style}; "
          f"1 onnxruntime thread; load average {os.getloadavg()[0]:.2f} at start")
    results = {}
    for precision in PRECISIONS:
        started = time.perf_counter()
        voice = kokoro.load(f"kokoro:{args.style}", threads=1, options={"precision": precision})
        load = time.perf_counter() - started
        audio, cpu = read(voice, texts)
        seconds = sum(len(p) for p in audio) / 2 / kokoro.SAMPLE_RATE
        results[precision] = {"audio": audio, "cpu": cpu, "seconds": seconds, "load": load,
                              "wer": wer(texts, audio, kokoro.SAMPLE_RATE)}
        del voice
    joe = piper.load(threads=1)
    audio, cpu = read(joe, texts)
    rate = joe.info.sample_rate
    results["joe"] = {"audio": audio, "cpu": cpu, "seconds": sum(len(p) for p in audio) / 2 / rate, "load": 0.0,
                      "wer": wer(texts, audio, rate)}

    print(f"\n{'':<14}{'RTF 1 thr':>10}{'audio s':>9}{'WER':>7}{'load s':>8}{'max|diff|':>11}{'SNR dB':>8}{'len diff':>10}")
    for name, r in results.items():
        line = f"{name:<14}{r['cpu'] / r['seconds']:>10.3f}{r['seconds']:>9.1f}{r['wer']:>7.3f}{r['load']:>8.1f}"
        if name in PRECISIONS[1:]:
            peak, snr, lengths = compare(results["int8"]["audio"], r["audio"])
            line += f"{peak:>11.3f}{snr:>8.1f}{lengths:>10}"
        print(line)
    best = min(PRECISIONS, key=lambda p: results[p]["cpu"] / results[p]["seconds"])
    k, j = results[best], results["joe"]
    ratio = k["seconds"] / j["seconds"]
    rtf = k["cpu"] / k["seconds"]
    hours = 10 * ratio * rtf / 2
    print(f"\nfastest Kokoro: {best}. A book Piper reads in 10 h: Kokoro reads it in 10 h x {ratio:.2f} "
          f"(its audio / joe's) = {10 * ratio:.1f} h of audio; at RTF {rtf:.3f} on one thread, two "
          f"single-thread workers on 2 cores take {10 * ratio:.1f} x {rtf:.3f} / 2 = {hours:.1f} h "
          f"(joe: 10 x {j['cpu'] / j['seconds']:.3f} / 2 = {10 * j['cpu'] / j['seconds'] / 2:.1f} h)")
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
