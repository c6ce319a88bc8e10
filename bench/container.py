"""Time and peak memory of opening hostile and real EPUBs (not a test: prints numbers).

    PYTHONPATH=engine:tests .venv/bin/python bench/container.py [BOOK.epub ...]

Each book is opened twice, each time in a fresh child process, up to the ebooklib EpubBook that
chapters are then cut from: "before" hands the archive to ebooklib as epub.py used to
(epub.read_epub on the file itself), "now" is epub.py's _open_epub, behind the safe container
reader. Imports are not timed. The "before" child runs under an address-space cap (--before-cap-gib) so
that a bomb cannot take the machine down; "MemoryError" there means it hit the cap. Peak RSS is the
child's whole process (about 35 MiB of it is the interpreter and imports).

Built here: the 2 GiB zip bomb, its twin with lying headers, a book of 10,001 entries (see
tests/hostile_epubs.py) and, with --big-mib, a sound book heavy with images (what the limits let
through costs about twice its size: the in-memory zip and ebooklib's copy). Given books (e.g.
the corpus) are added after them.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import hostile_epubs  # noqa: E402
from epub2audio.book.container import MAX_ENTRIES  # noqa: E402

CHILD = """
import sys, time
from pathlib import Path
from ebooklib import epub
from epub2audio.book.epub import _open_epub
mode, path = sys.argv[1:3]
start = time.perf_counter()
try:
    book = epub.read_epub(path, options={"ignore_ncx": True}) if mode == "before" else _open_epub(Path(path))
    outcome = f"read, {len(list(book.get_items()))} items"
except MemoryError:
    outcome = "MemoryError"
except Exception as error:
    outcome = f"{type(error).__name__}: {error}"
print(f"{time.perf_counter() - start:.3f}\\t{outcome}")
"""


def run(mode: str, book: Path, cap: int | None) -> tuple[float, float, str]:
    """(seconds spent opening, peak RSS in MiB, outcome) of one child process."""
    def limit():
        if cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(book)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, preexec_fn=limit)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds, _, outcome = out.strip().partition("\t")
    if not seconds:
        return float("nan"), usage.ru_maxrss / 1024, f"died (exit {proc.returncode})"
    return float(seconds), usage.ru_maxrss / 1024, outcome


def image_book(folder: Path, mib: int) -> Path:
    """A sound book with `mib` one-MiB images (built in a function so that this process lets go of
    them: each child's peak RSS starts from ours, as it is forked)."""
    images = {f"{i}.png": (os.urandom(1 << 20), "image/png", "") for i in range(mib)}
    return hostile_epubs.hostile(folder, f"images-{mib}MiB.epub", extra_items=images)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("books", nargs="*", type=Path)
    parser.add_argument("--before-cap-gib", type=float, default=4.0)
    parser.add_argument("--big-mib", type=int, default=0,
                        help="also a sound book carrying this many MiB of (incompressible) images")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        books = [hostile_epubs.zip_bomb(folder), hostile_epubs.lying_bomb(folder),
                 hostile_epubs.many_entries(folder, MAX_ENTRIES + 1), *args.books]
        if args.big_mib:
            books.append(image_book(folder, args.big_mib))
        print(f"{'book':42} {'before s':>9} {'MiB':>6}  {'now s':>7} {'MiB':>6}  {'RSS now/before':>14}  outcome now (before)")
        for book in books:
            b_s, b_mib, b_out = run("before", book, int(args.before_cap_gib * (1 << 30)))
            n_s, n_mib, n_out = run("now", book, None)
            print(f"{book.name[:42]:42} {b_s:9.2f} {b_mib:6.0f}  {n_s:7.3f} {n_mib:6.0f}  {n_mib / b_mib:14.2f}  "
                  f"{n_out[:90]} ({b_out[:40]})")


if __name__ == "__main__":
    main()
