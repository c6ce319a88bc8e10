"""How long load_book takes on each corpus book, beside ebooklib's own parse of the same file.

    .venv/bin/python bench/load_books.py [--rounds 3]

load_book (chapters, text, skips, metadata) is timed against `ebooklib.epub.read_epub`, the bare
parse it builds on, in alternating rounds, so machine load affects both alike. The ratio is what
our work adds; the goal is Moby-Dick (1.2 M characters) in well under 3 s on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

from ebooklib import epub

from epub2audio.book.epub import load_book

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus"


def best_of(rounds: int, *calls) -> list[float]:
    best = [float("inf")] * len(calls)
    for _ in range(rounds):
        for i, call in enumerate(calls):
            start = time.perf_counter()
            call()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # ebooklib's future warnings
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'book':58} {'load_book s':>11} {'ebooklib s':>10} {'ratio':>6}")
    for book in sorted(CORPUS.glob("*.epub")):
        if book.name.startswith("broken"):
            continue
        ours, bare = best_of(args.rounds, lambda: load_book(book), lambda: epub.read_epub(str(book)))
        print(f"{book.name:58} {ours:11.2f} {bare:10.2f} {ours / bare:6.1f}")


if __name__ == "__main__":
    main()
