"""`epub2audio library IN_DIR --out OUT_DIR`: every EPUB under a folder becomes an M4B.

A front door like the watcher: it finds books and calls `render.convert` for each. The M4B goes to
the same place under OUT_DIR as the EPUB under IN_DIR (calibre's Author/Title (id)/Title - Author.epub
becomes Author/Title (id)/Title - Author.m4b). A book whose M4B is there and newer than the EPUB is
done and skipped (the M4B is written atomically, so one that is there is whole); a book that was
cut short resumes from its job store, which is keyed by the output path. So after any stop, the
same command carries on where it was.

One worker pool serves the whole run (its workers load the voice once): local processes, or Ray
actors with --ray. Books go one after another, each spread over every worker, and each segment's
audio is written to the job store as it arrives, so the driver holds at most the pool's in-flight
segments in memory (see ray_pool.py). A finished book's job folder is removed: its WAVs are
about 160 MB an hour of audio, which a library would pile up.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError, JobFailed


def find_books(in_dir: Path) -> list[Path]:
    """Every EPUB under `in_dir`, in path order; hidden files and folders and downloads in progress left out."""
    books = []
    for path in Path(in_dir).rglob("*"):
        parts = path.relative_to(in_dir).parts
        if any(p.startswith(".") for p in parts) or not path.name.lower().endswith(".epub"):
            continue
        if path.is_file():
            books.append(path)
    return sorted(books)


def output_for(book: Path, in_dir: Path, out_dir: Path) -> Path:
    return Path(out_dir) / Path(book).relative_to(in_dir).with_suffix(".m4b")


def is_done(book: Path, output: Path) -> bool:
    try:
        return output.stat().st_mtime_ns >= book.stat().st_mtime_ns
    except OSError:
        return False


def worker_pool(ray_address: str | None):
    """The pool class for --ray [ADDRESS] ("" = a private Ray on this machine), or None (local workers).
    Ray is imported only here, only when asked for."""
    if ray_address is None:
        return None
    import os
    from functools import partial

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray would report usage online
    if not ray_address:  # a private Ray binds to loopback only (read when ray is imported)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from .ray_pool import RayWorkerPool

    return partial(RayWorkerPool, address=ray_address or None)


class SharedPool:
    """One pool lent to every book of the run: `convert` closes it after each book, we do at the end."""

    def __init__(self, make_pool):
        self.make_pool = make_pool
        self.pool = None
        self.pools = {}  # one per voice: with --voice auto each book's language picks its own
        self.loaded = False  # the voice loaded once: a later JobFailed is the book's, not the pool's

    def __call__(self, voice, voice_options, *args):
        import json

        key = (voice, json.dumps(voice_options, sort_keys=True, default=str))
        if key not in self.pools:
            self.pools[key] = self.make_pool(voice, voice_options, *args)
        self.pool = self.pools[key]
        return self

    def details(self):
        details = self.pool.details()
        self.loaded = True
        return details

    def render(self, todo, on_result) -> None:
        self.pool.render(todo, on_result)

    def __getattr__(self, name):
        # --workers auto resizes the book's pool (render._auto_workers) where it can: local workers
        if name in ("resize", "measure") and "pool" in self.__dict__:
            return getattr(self.pool, name)
        raise AttributeError(name)

    def kill(self) -> None:
        self.pool.kill()

    def close(self) -> None:
        pass  # the next book uses it

    def shutdown(self) -> None:
        for pool in self.pools.values():
            pool.close()


@dataclass
class LibraryResult:
    converted: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    refused: list[tuple[Path, str]] = field(default_factory=list)  # the book is bad (InputError)
    failed: list[tuple[Path, str]] = field(default_factory=list)  # the job failed (JobFailed)


def convert_library(in_dir: Path, out_dir: Path, options, progress, say=None) -> LibraryResult:
    """Convert every book under `in_dir` not yet done. `options.pool` (a pool class) is shared by all."""
    from .render import WorkerPool, convert

    say = say or (lambda line: print(f"epub2audio: {line}", file=sys.stderr))
    books = find_books(in_dir)
    result = LibraryResult()
    shared = SharedPool(options.pool or WorkerPool)
    options.pool = shared
    try:
        for number, book in enumerate(books, 1):
            output = output_for(book, in_dir, out_dir)
            name = str(book.relative_to(in_dir))
            if is_done(book, output):
                result.skipped.append(book)
                progress.emit("library", book=name, number=number, total=len(books), state="done already")
                continue
            progress.emit("library", book=name, number=number, total=len(books), state="converting")
            output.parent.mkdir(parents=True, exist_ok=True)
            try:
                done = convert(book, output, options, progress)
            except InputError as error:
                result.refused.append((book, str(error)))
                say(f"{name}: refused: {' '.join(str(error).split())}")
                continue
            except JobFailed as error:
                if not shared.loaded:  # the voice cannot load (e.g. a node without the model): stop
                    raise
                result.failed.append((book, str(error)))
                say(f"{name}: failed: {' '.join(str(error).split())}")
                continue
            shutil.rmtree(done.work_dir, ignore_errors=True)
            result.converted.append(book)
    finally:
        shared.shutdown()
    return result
