"""Every installed voice on the same windows of English corpus prose: WER, RTF, and the whole
pipeline against the raw voice.

    nice .venv/bin/python bench/voice_pipeline.py [--windows 20] [--voices joe,kokoro:jm_kumo] [--book moby-dick-epub3.epub]

The windows are bench/kokoro.py's (three consecutive segments each, from the first prose chapters
of the book that have them, as the engine segments them; the text as the book has it). Each voice
reads them twice:
- raw: the voice's synthesize() called directly on each window's text, one onnxruntime thread, in
  this process (registry.load_voice, as a worker loads it), model load and a warm-up left out;
- pipeline: the `epub2audio` command on an EPUB holding one chapter per window (normalisation,
  segmentation, the worker process, the store, levels, AAC and M4B assembly), from a cold job,
  `--workers 1 --say-titles no --no-verify`, pinned to one core so the worker runs one thread;
  its audio is the M4B decoded and cut at its chapter marks.
Both are transcribed by the [verify] extra's packaged Whisper tiny.en (as `epub2audio verify`
decodes) and scored against the window's text. RTF is CPU seconds / audio seconds (CPU, not wall:
the machine is shared); the pipeline's CPU is everything the command and its children used,
start-up, model load, ffmpeg and the parent included. Limits (issue 21): pipeline WER at most
+0.5 points over raw, pipeline RTF at most 1.1x raw's.

Voices: joe and the packaged Kokoro speakers (when the [kokoro] extra is installed). Not measured:
the test tone (it speaks no words), CosyVoice3 and Qwen3-TTS (no real weights on this machine),
the user's own Piper and Kokoro voices (none here).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from kokoro import read, to16k, wer, wer16k, windows  # noqa: E402  (bench/kokoro.py)
from epub_factory import make_epub, xhtml  # noqa: E402  (tests/epub_factory.py)

from epub2audio.audiobook.ffmpeg import ffmpeg_exe  # noqa: E402
from epub2audio.audiobook.verify.container import _ffmpeg_chapters  # noqa: E402

WER_LIMIT_POINTS = 0.5
RTF_LIMIT_RATIO = 1.1


def installed_voices() -> list[str]:
    from epub2audio.voices import catalog

    voices = ["joe"]
    if catalog.kokoro_installed():
        voices += [f"kokoro:{style}" for style in catalog.KOKORO_STYLES]
    return voices


def raw(name: str, texts: list[str]) -> dict:
    from epub2audio.voices import catalog
    from epub2audio.voices.registry import load_voice

    choice = catalog.resolve(name, config={})
    voice = load_voice(choice.name, threads=1, options=choice.options)
    audio, cpu = read(voice, texts)
    rate = voice.info.sample_rate
    seconds = sum(len(p) for p in audio) / 2 / rate
    heard: list[str] = []
    return {"cpu": cpu, "seconds": seconds, "wer": wer(texts, audio, rate, heard), "heard": heard}


def windows_book(folder: Path, texts: list[str]) -> Path:
    docs = {f"w{i + 1:02d}.xhtml": xhtml(f"<p>{html.escape(text, quote=False)}</p>", f"Window {i + 1}")
            for i, text in enumerate(texts)}
    return make_epub(folder, docs, nav=[(f"Window {i + 1}", name) for i, name in enumerate(docs)],
                     title="Voice bench windows", name="windows.epub")


def pipeline(name: str, texts: list[str], folder: Path) -> dict:
    book = windows_book(folder, texts)
    out, job = folder / "windows.m4b", folder / "job"
    core = min(os.sched_getaffinity(0))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "epub2audio.cli", str(book), "-o", str(out), "--work-dir", str(job), "--voice", name,
         "--workers", "1", "--say-titles", "no", "--no-verify", "--progress", "json"],
        capture_output=True, text=True, preexec_fn=lambda: os.sched_setaffinity(0, {core}),
        env={**os.environ, "EPUB2AUDIO_CACHE_DIR": str(folder / "cache")})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{name}: the pipeline failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    segments = [e for e in events if e["event"] == "segment"]
    pcm = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(out), "-ac", "1", "-ar", "16000", "-f", "f32le", "-"],
                         capture_output=True, check=True).stdout
    audio16k = np.frombuffer(pcm, dtype="<f4")
    marks = _ffmpeg_chapters(out, 16000)
    if len(marks) != len(texts):
        raise SystemExit(f"{name}: the M4B has {len(marks)} chapters for {len(texts)} windows")
    chapters = [audio16k[start:end] for start, end, _title in marks]
    heard: list[str] = []
    return {"cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), "wall": wall,
            "seconds": len(audio16k) / 16000, "wer": wer16k(texts, chapters, heard), "segments": len(segments),
            "heard": heard}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=20)
    parser.add_argument("--voices", help="comma-separated names (default: every installed voice)")
    parser.add_argument("--book", default="moby-dick-epub3.epub")
    parser.add_argument("--transcripts", action="store_true", help="also print the windows whose transcripts differ")
    args = parser.parse_args()
    os.environ.setdefault("EPUB2AUDIO_DATA_DIR", tempfile.mkdtemp(prefix="voices-bench-"))

    texts = windows(ROOT / "tests" / "corpus" / args.book, args.windows)
    names = args.voices.split(",") if args.voices else installed_voices()
    started = time.monotonic()
    print(f"{len(texts)} windows of {args.book}, {sum(map(len, texts))} characters; voices {', '.join(names)}; "
          f"1 onnxruntime thread; load average {os.getloadavg()[0]:.2f} at start")
    print("not measured: tone (a test tone, no words), CosyVoice3 and Qwen3-TTS (no real weights on this machine)",
          flush=True)
    # Each voice's row is printed as soon as it is measured, so a run cut short keeps what it had.
    print(f"\n{'':<22}{'raw voice':^26}{'whole pipeline':^36}{'pipeline - raw':^22}")
    print(f"{'voice':<22}{'WER':>7}{'RTF 1 thr':>10}{'audio s':>9}{'WER':>7}{'RTF 1 thr':>10}{'audio s':>9}"
          f"{'wall s':>8}{'segs':>5}{'WER pts':>9}{'RTF x':>7}{'CPU x':>7}  verdict", flush=True)
    rows = {}
    for name in names:
        r = raw(name, texts)
        with tempfile.TemporaryDirectory(prefix="voices-bench-") as tmp:
            p = pipeline(name, texts, Path(tmp))
        rows[name] = (r, p)
        points = 100 * (p["wer"] - r["wer"])
        raw_rtf, pipe_rtf = r["cpu"] / r["seconds"], p["cpu"] / p["seconds"]
        ok = points <= WER_LIMIT_POINTS and pipe_rtf / raw_rtf <= RTF_LIMIT_RATIO
        print(f"{name:<22}{r['wer']:>7.3f}{raw_rtf:>10.3f}{r['seconds']:>9.1f}{p['wer']:>7.3f}{pipe_rtf:>10.3f}"
              f"{p['seconds']:>9.1f}{p['wall']:>8.0f}{p['segments']:>5}{points:>+9.2f}{pipe_rtf / raw_rtf:>7.2f}"
              f"{p['cpu'] / r['cpu']:>7.2f}  {'ok' if ok else 'OVER'}  (load average {os.getloadavg()[0]:.1f})",
              flush=True)
    print(f"\nlimits: pipeline WER at most +{WER_LIMIT_POINTS} points over raw, pipeline RTF at most "
          f"{RTF_LIMIT_RATIO}x raw's. RTF = CPU s / audio s; 'CPU x' = pipeline CPU s / raw CPU s for the same "
          f"text (the pipeline's audio also holds its pauses).")
    if args.transcripts:
        from epub2audio.audiobook.verify.words import edit_distance, normalize_words

        for name, (r, p) in rows.items():
            print(f"\n{name}: windows whose raw and pipeline transcripts differ (errors raw / pipeline)")
            for i, (text, a, b) in enumerate(zip(texts, r["heard"], p["heard"])):
                if normalize_words(a) != normalize_words(b):
                    ref = normalize_words(text)
                    print(f"  window {i + 1}: {edit_distance(ref, normalize_words(a))} / "
                          f"{edit_distance(ref, normalize_words(b))} of {len(ref)} words\n"
                          f"    text    : {text}\n    raw     : {a}\n    pipeline: {b}")
    print(f"\nwall {time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
