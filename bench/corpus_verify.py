"""Convert whole corpus books with the default voice, verify on, and report each book's verdict.

This is issue 12's "a check that never fails a good book": every chapter of every English corpus
book, rendered by the embedded voice and checked by `verify` (the verify extra must be installed).
A book passes when the command exits 0; the line also gives the verify event's figures.

    python bench/corpus_verify.py [BOOK-NAME ...] [--workers 2] [--work-root DIR]

Hours of CPU per book (Moby-Dick alone is about 1.2 M characters). Jobs live under --work-root and
resume where they stopped, so an interrupted run loses at most the segments in flight.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
# The corpus's English books (the others are French, Chinese, Arabic; broken-truncated-zip is refused).
ENGLISH = (
    "the-waste-land-poetry-notes-epub3",
    "georgia-britannica-pls-ssml-epub3",
    "alice-under-ground-facsimile-images-epub2-ncx",
    "hamlet-drama-tables-se-epub3",
    "childrens-literature-unlinked-toc-long-section-epub3",
    "a-tale-of-two-cities-nested-books-se-epub3",
    "herodotus-vol1-split-chapters-footnotes-epub2-ncx",
    "moby-dick-epub3",
)


def run_book(name: str, work_root: Path, workers: int) -> dict:
    out_dir = work_root / name
    out_dir.mkdir(parents=True, exist_ok=True)
    events_path = out_dir / "events.jsonl"
    command = [sys.executable, "-m", "epub2audio.cli", str(CORPUS / f"{name}.epub"),
               "-o", str(out_dir / f"{name}.m4b"), "--work-dir", str(out_dir / "job"),
               "--workers", str(workers), "--progress", "json"]
    earlier = events_path.stat().st_size if events_path.exists() else 0  # a resumed run appends
    started = time.monotonic()
    with open(events_path, "a", encoding="utf-8") as events:
        proc = subprocess.run(command, stdout=events, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - started
    result = {"book": name, "exit": proc.returncode, "wall_seconds": round(seconds)}
    with open(events_path, "rb") as events:
        events.seek(earlier)
        lines = events.read().decode("utf-8").splitlines()
    for line in lines:  # this run's events only: an earlier run's verdict must not stand in for it
        event = json.loads(line)
        if event["event"] == "book":
            result["chapters"] = event["chapters"]
            result["segments"] = event["segments"]
        elif event["event"] == "verify":
            result.update(passed=event["passed"], problems=event["problems"], coverage=event["coverage"],
                          wer=event["wer"])
    if proc.returncode:
        result["stderr"] = proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("books", nargs="*", default=list(ENGLISH), help="corpus book names (default: all English)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work-root", type=Path, default=ROOT / "out" / "corpus-verify")
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "engine"), os.environ.get("PYTHONPATH")]))
    failed = 0
    for name in args.books:
        result = run_book(name, args.work_root, args.workers)
        failed += result["exit"] != 0
        print(json.dumps(result, ensure_ascii=False), flush=True)
    print(f"{len(args.books) - failed} of {len(args.books)} books converted and passed verify")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
