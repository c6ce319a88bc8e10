"""Word error rate of the default voice, as `epub2audio verify` measures it, on the English corpus.

    .venv/bin/python bench/wer.py [--books moby-dick,alice] [--per-book 2] [--windows 2] [--workers 2]

For each English corpus book a few chapters of moderate size (1,000-6,500 characters: the first one
and one from the middle of that list) are converted with the embedded voice (`epub2audio --chapters`,
fresh cache in a temp folder), then `verify_m4b` transcribes `--windows` windows of ~30 s per chapter
with the packaged Whisper tiny.en and scores them against the planned text. Prints one row per
chapter and one per book (pooled WER, worst window, coverage of the converted chapters and of the
whole book, segment pace, problems found), plus the load average and CPU seconds.
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
    args = parser.parse_args()

    from epub2audio.audiobook.verify import verify_m4b

    names = args.books.split(",") if args.books else list(BOOKS)
    started, load_before = time.monotonic(), os.getloadavg()
    rows, reports, loads = [], {}, []
    with tempfile.TemporaryDirectory(prefix="epub2audio-wer-") as tmp:
        env = dict(os.environ, EPUB2AUDIO_CACHE_DIR=str(Path(tmp) / "cache"))
        for name in names:
            book = CORPUS / BOOKS[name]
            chapters = pick_chapters(book, args.per_book, env)
            out, job = Path(tmp) / f"{name}.m4b", Path(tmp) / f"{name}-job"
            t0 = time.monotonic()
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


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


if __name__ == "__main__":
    sys.exit(main())
