"""Every installed English voice side by side on the same windows of four kinds of corpus book, in
one run: speed, Whisper WER, DistillMOS, audio length and peak memory, and the default voice the
measured rule picks.

    nice .venv/bin/python bench/voices.py [--per-book 10] [--voices joe,hibari,kokoro:af_heart]

The windows: 10 from each of four books (prose, dialogue, verse, non-fiction with numbers), spread
evenly over each book's chapters, each a run of consecutive segments of 150-450 characters, in the
text the voice is given (the engine's spoken_chapter: numbers, abbreviations and lexicons already
normalised, as a worker receives it; written words, not the book's IPA, since not every voice
takes phonemes). Each voice runs in a fresh process of its own (its peak RSS
is that process's, the model included), loaded as a worker loads it (registry.load_voice, one
thread), warmed up once; speed is CPU seconds per audio second of synthesis (CPU, not wall: the
machine may be shared). The audio is resampled to 16 kHz by ffmpeg and heard by the [verify]
extra's Whisper tiny.en (as `epub2audio verify` hears) and scored by DistillMOS (distillmos 0.9.1,
one torch thread, through verify's own scorer: audiobook/verify/quality.py), pooled over the windows. Voices that are not measured: the test tone (no
words), CosyVoice3 and Qwen3-TTS (no real weights on this machine).

The default rule (issue 30): among the voices whose pooled WER is no worse than joe's and that read
a 10-hour book in at most 30 minutes on 2 cores, the one with the best DistillMOS. A 10-hour book
on 2 cores takes 10 h x speed / 2 workers (the pipeline's own cost is within 1.1x of the raw voice's,
bench/voice_pipeline.py), so the speed limit is 0.1 CPU s per audio s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))

CORPUS = ROOT / "tests" / "corpus"
BOOKS = {  # kind -> book
    "prose": "moby-dick-epub3.epub",
    "dialogue": "pride-and-prejudice-pg-licence-in-last-chapter-epub2-ncx.epub",
    "verse": "leaves-of-grass-poetry-718-toc-se-epub3.epub",
    "numbers": "georgia-britannica-pls-ssml-epub3.epub",
}
WINDOW_CHARS = (150, 450)
BOOK_HOURS, WALL_LIMIT_MIN, WORKERS = 10, 30, 2
SPEED_LIMIT = WALL_LIMIT_MIN / 60 * WORKERS / BOOK_HOURS  # CPU s per audio s


def windows_of(book_path: Path, count: int) -> list[str]:
    """`count` windows spread evenly over the book: runs of consecutive segments of the spoken text
    (headings left out) between WINDOW_CHARS[0] and WINDOW_CHARS[1] characters."""
    from epub2audio.book.epub import load_book
    from epub2audio.book.segment import segment_chapter
    from epub2audio.render import spoken_chapter

    book = load_book(book_path)
    candidates = []
    for i, chapter in enumerate(book.chapters):
        spoken = spoken_chapter(book, chapter, say_titles=False, phonemes=False)
        run: list[str] = []
        for seg in segment_chapter(i, spoken):
            if len(seg.text) > WINDOW_CHARS[1]:
                run = []
                continue
            run.append(seg.text)
            text = " ".join(run)
            if len(text) >= WINDOW_CHARS[0]:
                if len(text) <= WINDOW_CHARS[1]:
                    candidates.append(text)
                run = []
    if len(candidates) <= count:
        return candidates
    step = len(candidates) / count
    return [candidates[int(step * k + step / 2)] for k in range(count)]


def english_voices() -> list[str]:
    from epub2audio.voices import catalog

    return [row.name for row in catalog.listing()
            if "en" in row.languages and row.family in ("Piper", "Kokoro", "hibari")]


def synthesize_child(name: str, texts_path: Path, out_dir: Path) -> None:
    """In a process of its own: read every window, write each as 16 kHz float32 .npy, and the CPU
    seconds, audio seconds and peak RSS as result.json."""
    from epub2audio.audiobook.ffmpeg import ffmpeg_exe
    from epub2audio.voices import catalog
    from epub2audio.voices.registry import load_voice

    texts = json.loads(texts_path.read_text(encoding="utf-8"))
    choice = catalog.resolve(name, config={})
    started = time.process_time()
    voice = load_voice(choice.name, threads=1, options=choice.options)
    load_cpu = time.process_time() - started
    rate = voice.info.sample_rate
    voice.synthesize("A short warm-up sentence.", 1)
    cpu = samples = 0
    for i, text in enumerate(texts):
        started = time.process_time()
        pcm = voice.synthesize(text, 1)
        cpu += time.process_time() - started
        samples += len(pcm) // 2
        cmd = [ffmpeg_exe(), "-v", "error", "-f", "s16le", "-ar", str(rate), "-ac", "1", "-i", "-",
               "-ar", "16000", "-f", "f32le", "-"]
        audio16k = np.frombuffer(subprocess.run(cmd, input=pcm, capture_output=True, check=True).stdout, "<f4")
        np.save(out_dir / f"{i:03d}.npy", audio16k)
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a child of the bench (which holds
    # Whisper and DistillMOS) would report the bench's own size.
    status = Path("/proc/self/status")
    peak_kib = (int(next(line.split()[1] for line in status.read_text().splitlines() if line.startswith("VmHWM:")))
                if status.exists() else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // (1024 if sys.platform == "darwin" else 1))
    (out_dir / "result.json").write_text(json.dumps(
        {"cpu": cpu, "seconds": samples / rate, "load_cpu": load_cpu, "peak_mib": peak_kib / 1024}))


def measure(name: str, texts: list[str], mos) -> dict:
    from epub2audio.audiobook.verify.speech import transcribe
    from epub2audio.audiobook.verify.words import edit_distance, normalize_words

    with tempfile.TemporaryDirectory(prefix="voices-bench-") as tmp:
        folder = Path(tmp)
        (folder / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
        proc = subprocess.run([sys.executable, __file__, "--child", name, str(folder / "texts.json"), str(folder)],
                              capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{name}: {proc.stderr.strip()[-800:]}")
        result = json.loads((folder / "result.json").read_text())
        audio = [np.load(folder / f"{i:03d}.npy") for i in range(len(texts))]
    errors = words = 0
    per_window = []
    for text, samples in zip(texts, audio):
        reference = normalize_words(text)
        wrong = edit_distance(reference, normalize_words(transcribe(samples)))
        errors += wrong
        words += len(reference)
        per_window.append((wrong, len(reference), mos.score(samples)))
    result.update(wer=errors / words, mos=float(np.mean([m for *_, m in per_window])),
                  mos_low=float(np.percentile([m for *_, m in per_window], 10)), windows=per_window)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-book", type=int, default=10, help="windows from each of the four books")
    parser.add_argument("--voices", help="comma-separated names (default: every installed English voice)")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("EPUB2AUDIO_DATA_DIR", tempfile.mkdtemp(prefix="voices-bench-"))
    if args.child:
        synthesize_child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return 0

    started = time.monotonic()
    texts, kinds = [], []
    for kind, book in BOOKS.items():
        picked = windows_of(CORPUS / book, args.per_book)
        texts += picked
        kinds += [kind] * len(picked)
    names = args.voices.split(",") if args.voices else english_voices()
    if "joe" not in names:
        names.insert(0, "joe")  # the rule compares every voice with joe
    print(f"{len(texts)} windows ({', '.join(f'{k} {kinds.count(k)}: {BOOKS[k]}' for k in BOOKS)}), "
          f"{sum(map(len, texts))} characters; {platform.machine()}, {os.cpu_count()} cores, "
          f"1 thread a voice; load average {os.getloadavg()[0]:.2f} at start", flush=True)
    from epub2audio.audiobook.verify.quality import MosScorer

    mos = MosScorer()  # verify's DistillMOS child; here each whole window is scored (all its 7.68 s crops)
    header = (f"{'voice':<20}{'CPU s/audio s':>14}{'10 h book, 2 cores':>20}{'WER':>7}"
              + "".join(f"{k[:6]:>7}" for k in BOOKS) + f"{'MOS':>6}{'MOS p10':>8}{'audio s':>9}{'peak MiB':>9}")
    print("\n" + header + "\n" + "WER by kind of book; MOS = mean DistillMOS of the windows, p10 its 10th percentile",
          flush=True)
    rows = {}
    for name in names:
        r = rows[name] = measure(name, texts, mos)
        speed = r["cpu"] / r["seconds"]
        by_kind = []
        for kind in BOOKS:
            picked = [w for w, k in zip(r["windows"], kinds) if k == kind]
            by_kind.append(sum(e for e, *_ in picked) / max(1, sum(n for _, n, _ in picked)))
        r.update(speed=speed, wall_min=BOOK_HOURS * 60 * speed / WORKERS, by_kind=by_kind)
        print(f"{name:<20}{speed:>14.4f}{r['wall_min']:>16.0f} min{r['wer']:>7.3f}"
              + "".join(f"{w:>7.3f}" for w in by_kind)
              + f"{r['mos']:>6.2f}{r['mos_low']:>8.2f}{r['seconds']:>9.1f}{r['peak_mib']:>9.0f}", flush=True)
    joe = rows["joe"]
    eligible = [n for n, r in rows.items() if r["wer"] <= joe["wer"] and r["speed"] <= SPEED_LIMIT]
    best = max(eligible, key=lambda n: rows[n]["mos"])
    print(f"\nrule: WER <= joe's ({joe['wer']:.3f}) and a {BOOK_HOURS} h book in <= {WALL_LIMIT_MIN} min on "
          f"{WORKERS} cores (speed <= {SPEED_LIMIT:.3f}); eligible: {', '.join(eligible)}; "
          f"best DistillMOS: {best} ({rows[best]['mos']:.2f})")
    print(f"wall {time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f} at end")
    if args.json:
        args.json.write_text(json.dumps({"texts": texts, "kinds": kinds, "rows": rows, "default": best}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
