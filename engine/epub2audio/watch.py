"""`epub2audio watch IN_DIR --out OUT_DIR`: drop an EPUB into a folder, get an M4B.

A thin front door: it finds books, keeps a queue and calls `render.convert` for each; everything
about books and audio is the engine's.

How it works
------------
* Finding books. watchdog reports changes in IN_DIR (top level only); a scan at start and a rescan
  every `--rescan` seconds catch whatever the events missed (network folders, a full inotify
  table, a watcher that was not running). Only `*.epub` files count; hidden files and downloads in
  progress (`.part`, `.crdownload`, `.tmp`, `.download`, `~`) are never touched.
* Arrival. A file has arrived when its size and mtime have not changed for `--settle` seconds and
  its zip central directory reads (the directory is written last, so a copy that stalls for longer
  than the settle time is still waited for). A file that stays unreadable for PATIENCE_FACTOR
  settle periods is handed to the engine anyway, which names what is wrong with it.
* The queue. A SQLite database (WAL) in `data_dir()/watch/`, one per IN_DIR/OUT_DIR pair. It lives
  in the data dir, not the cache, because it is the memory of what was already converted: wiping
  it would convert everything again. It is not in OUT_DIR because SQLite's WAL mode does not work
  on network shares, where audiobook libraries often live. Each book is keyed by the SHA-256 of its
  bytes and goes queued → converting → done | failed. The M4B's file name is chosen when a book
  is queued and kept, so a restart converts to the same path, and the engine's job store (keyed by
  the output path) resumes a half-rendered book where it stopped.
* Exactly once. A book's content is converted once. The same bytes under another name are logged
  as a duplicate and left where they are; the watcher remembers every file it has looked at
  (path, size, mtime), so a duplicate is reported once, not at every rescan.
* Files. The M4B is OUT_DIR/<EPUB file name>.m4b, or "<name> (2).m4b" when that name is taken by
  a file that is not this book's. The source EPUB stays where it is: the watcher never deletes,
  renames or edits a good book. A broken book (the engine's InputError) is moved to IN_DIR/failed/
  with NAME.epub.reason.txt beside it, holding the engine's one-line message. If the job itself
  fails (JobFailed: a segment kept failing), the book is not to blame: it stays in place and is
  retried the next time the watcher starts. Putting a failed book back into IN_DIR retries it.
* One conversion at a time: books are converted one after another in the main thread, and a lock
  per model in `data_dir()/watch/` keeps two watchers from running the same model at once.
  `--workers N` is the engine's own parallelism within one book, as for the plain command.
* Stopping. Ctrl-C or SIGTERM stops the conversion (the engine leaves a consistent, resumable job),
  puts the book back in the queue and exits with 130; the next start resumes it.
* A log, OUT_DIR/epub2audio-watch.log, says in plain timestamped lines what happened to each file;
  the same lines go to stderr, and with `--progress json` also to stdout as {"event": "watch"}.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import sqlite3
import stat
import sys
import threading
import time
import traceback
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .errors import InputError, JobFailed

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; running one watcher a folder is up to the user
    fcntl = None

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_SETTLE = 3.0
DEFAULT_RESCAN = 30.0
PATIENCE_FACTOR = 5  # an unreadable zip gets this many settle periods before it counts as broken
TICK = 0.5  # seconds between looks at files still arriving
IGNORED_ENDINGS = (".part", ".crdownload", ".tmp", ".download", "~")
FAILED_DIR = "failed"
LOG_NAME = "epub2audio-watch.log"
WAITING, ARRIVED, GONE = "waiting", "arrived", "gone"


# ------------------------------------------------------------------------------------------
# Which files, and when they are complete


def is_candidate(name: str) -> bool:
    """An EPUB worth looking at: not hidden, not a download still in progress."""
    lower = name.lower()
    if name.startswith(".") or lower.endswith(IGNORED_ENDINGS):
        return False
    return lower.endswith(".epub")


def file_signature(path: Path) -> tuple[int, int] | None:
    """(size, mtime_ns) of a regular file; None if it is gone or not a regular file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


def zip_readable(path: Path) -> bool:
    """The zip's central directory is present and parses (it is the last thing written)."""
    try:
        with zipfile.ZipFile(path) as archive:
            archive.infolist()
        return True
    except Exception:  # BadZipFile, OSError, or whatever a damaged header makes zipfile raise
        return False


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class _Sighting:
    signature: tuple[int, int]
    since: float


class Arrivals:
    """Decides when a file that is being written has finished arriving."""

    def __init__(self, settle: float, patience: float | None = None, clock=time.monotonic):
        self.settle = settle
        self.patience = max(settle, settle * PATIENCE_FACTOR if patience is None else patience)
        self.clock = clock
        self._seen: dict[Path, _Sighting] = {}

    def pending(self) -> list[Path]:
        return sorted(self._seen)

    def forget(self, path: Path) -> None:
        self._seen.pop(path, None)

    def check(self, path: Path) -> str:
        """WAITING until unchanged for `settle` seconds and readable as a zip (or unchanged for
        `patience` seconds: then it is as complete as it will get), then ARRIVED once."""
        signature = file_signature(path)
        if signature is None:
            self.forget(path)
            return GONE
        now = self.clock()
        seen = self._seen.get(path)
        if seen is None or seen.signature != signature:
            self._seen[path] = _Sighting(signature, now)
            return WAITING
        quiet = now - seen.since
        if quiet < self.settle or (quiet < self.patience and not zip_readable(path)):
            return WAITING
        self.forget(path)
        return ARRIVED


def numbered_names(stem: str, suffix: str):
    """'Book.m4b', 'Book (2).m4b', 'Book (3).m4b', ..."""
    yield f"{stem}{suffix}"
    for n in itertools.count(2):
        yield f"{stem} ({n}){suffix}"


def one_line(message: str) -> str:
    return " ".join(str(message).split())


# ------------------------------------------------------------------------------------------
# The persistent queue

SCHEMA = """
CREATE TABLE IF NOT EXISTS books (
    sha256 TEXT PRIMARY KEY,
    name TEXT NOT NULL,                              -- the file name it arrived under
    source TEXT NOT NULL,                            -- where the EPUB is now
    output TEXT UNIQUE COLLATE NOCASE,               -- the M4B's file name in OUT_DIR (NULL: failed)
    state TEXT NOT NULL CHECK (state IN ('queued', 'converting', 'done', 'failed')),
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,             -- conversions started
    error TEXT, error_kind TEXT,                     -- 'book' (moved to failed/) or 'job'
    queued REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS files (                   -- every file looked at, to hash it once
    name TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL);
"""


@dataclass(frozen=True)
class QueuedBook:
    sha256: str
    name: str
    source: Path
    output: str | None
    state: str
    size: int
    mtime_ns: int
    attempts: int
    error: str | None
    error_kind: str | None


@dataclass(frozen=True)
class Offer:
    outcome: str  # queued | known | renamed | retry | duplicate
    book: QueuedBook


class WatchQueue:
    """Books by content hash and their state, in SQLite (WAL). One instance per thread."""

    def __init__(self, path: Path, out_dir: Path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.out_dir = Path(out_dir)
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def _transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _update(self, sha256: str, **fields) -> None:
        columns = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE books SET {columns}, updated = ? WHERE sha256 = ?",
                        [*fields.values(), time.time(), sha256])

    # --- reading ---------------------------------------------------------------------------
    def book(self, sha256: str) -> QueuedBook | None:
        rows = self._select("WHERE sha256 = ?", sha256)
        return rows[0] if rows else None

    def books(self, state: str | None = None) -> list[QueuedBook]:
        return self._select("WHERE state = ? ORDER BY queued, rowid", state) if state else self._select("")

    def next_queued(self) -> QueuedBook | None:
        rows = self._select("WHERE state = 'queued' ORDER BY queued, rowid LIMIT 1")
        return rows[0] if rows else None

    def _select(self, where: str, *params) -> list[QueuedBook]:
        rows = self.db.execute(
            "SELECT sha256, name, source, output, state, size, mtime_ns, attempts, error, error_kind "
            f"FROM books {where}", params).fetchall()
        return [QueuedBook(r[0], r[1], Path(r[2]), *r[3:]) for r in rows]

    # --- arriving books ----------------------------------------------------------------------
    def offer(self, path: Path, sha256: str, signature: tuple[int, int]) -> Offer:
        """A complete file with this content is at `path`: queue it unless this content is known."""
        size, mtime_ns = signature
        with self._transaction():
            book = self.book(sha256)
            if book is None:
                now = time.time()
                self.db.execute(
                    "INSERT INTO books (sha256, name, source, output, state, size, mtime_ns, queued, updated)"
                    " VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
                    (sha256, path.name, str(path), self._free_output(Path(path.name).stem), size, mtime_ns,
                     now, now))
                outcome = "queued"
            elif book.source == path:
                self._update(sha256, size=size, mtime_ns=mtime_ns)  # touched, same bytes
                outcome = "known"
            elif book.state == "failed" and book.error_kind == "book":
                self._update(sha256, source=str(path), size=size, mtime_ns=mtime_ns, state="queued",
                             error=None, error_kind=None,  # the user put it back: try again
                             output=self._free_output(Path(path.name).stem))
                outcome = "retry"
            elif book.state != "done" and not book.source.exists():
                self._update(sha256, source=str(path), size=size, mtime_ns=mtime_ns)
                outcome = "renamed"
            else:
                outcome = "duplicate"
            return Offer(outcome, self.book(sha256))

    def _free_output(self, stem: str) -> str:
        for name in numbered_names(stem, ".m4b"):
            claimed = self.db.execute("SELECT 1 FROM books WHERE output = ?", (name,)).fetchone()
            if not claimed and not (self.out_dir / name).exists():
                return name
        raise AssertionError("unreachable")

    # --- state changes -----------------------------------------------------------------------
    def mark_converting(self, sha256: str) -> None:
        self.db.execute("UPDATE books SET state = 'converting', attempts = attempts + 1, updated = ?"
                        " WHERE sha256 = ?", (time.time(), sha256))

    def mark_done(self, sha256: str) -> None:
        self._update(sha256, state="done", error=None, error_kind=None)

    def mark_failed(self, sha256: str, error: str, kind: str, source: Path | None = None) -> None:
        fields = {"state": "failed", "error": one_line(error), "error_kind": kind}
        if kind == "book":
            fields["output"] = None  # a broken book gives its M4B name back
        if source is not None:
            fields["source"] = str(source)
        self._update(sha256, **fields)

    def requeue(self, sha256: str) -> None:
        self._update(sha256, state="queued")

    def forget(self, sha256: str) -> None:
        self.db.execute("DELETE FROM books WHERE sha256 = ? AND state != 'done'", (sha256,))

    def recover(self) -> list[QueuedBook]:
        """At start: books cut off mid-conversion, and books whose job failed, go back in the queue."""
        with self._transaction():
            books = self._select("WHERE state = 'converting' OR (state = 'failed' AND error_kind = 'job')"
                                 " ORDER BY queued, rowid")
            for book in books:
                self._update(book.sha256, state="queued")
        return books

    # --- files already looked at ---------------------------------------------------------------
    def remembered(self, name: str) -> tuple[tuple[int, int], str] | None:
        row = self.db.execute("SELECT size, mtime_ns, sha256 FROM files WHERE name = ?", (name,)).fetchone()
        return ((row[0], row[1]), row[2]) if row else None

    def remember(self, name: str, signature: tuple[int, int], sha256: str) -> None:
        self.db.execute("INSERT INTO files VALUES (?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET"
                        " size = excluded.size, mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256",
                        (name, *signature, sha256))

    def forget_file(self, name: str) -> None:
        self.db.execute("DELETE FROM files WHERE name = ?", (name,))

    def prune_files(self, present: set[str]) -> None:
        gone = [n for (n,) in self.db.execute("SELECT name FROM files") if n not in present]
        self.db.executemany("DELETE FROM files WHERE name = ?", [(n,) for n in gone])


def queue_path(in_dir: Path, out_dir: Path) -> Path:
    """data_dir()/watch/<IN_DIR name>-<hash of both folders>.sqlite3"""
    from .config import data_dir

    in_dir, out_dir = Path(in_dir).resolve(), Path(out_dir).resolve()
    key = hashlib.sha256(f"{in_dir}\0{out_dir}".encode()).hexdigest()[:16]
    return data_dir() / "watch" / f"{_safe_name(in_dir.name) or 'root'}-{key}.sqlite3"


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:40]


# ------------------------------------------------------------------------------------------
# The log


class WatchLog:
    """Plain timestamped lines in OUT_DIR/epub2audio-watch.log and on stderr (+ JSON on request)."""

    def __init__(self, path: Path, echo=sys.stderr, json_stream=None):
        self.path, self.echo, self.json_stream = Path(path), echo, json_stream
        self._lock = threading.Lock()

    def say(self, action: str, name: str = "", detail: str = "", sha256: str | None = None) -> None:
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        tag = f" [{sha256[:12]}]" if sha256 else ""
        line = f"{stamp}  {action:<10} {name}{tag}" + (f" {detail}" if detail else "")
        with self._lock:
            try:
                with open(self.path, "a", encoding="utf-8") as f:  # reopened a line: logrotate-safe
                    f.write(line + "\n")
            except OSError as error:
                line += f"  (not written to {self.path}: {error.strerror})"
            if self.echo is not None:
                print(line, file=self.echo, flush=True)
            if self.json_stream is not None:
                event = {"event": "watch", "action": action, "file": name, "sha256": sha256, "detail": detail}
                self.json_stream.write(json.dumps(event, ensure_ascii=False) + "\n")
                self.json_stream.flush()


# ------------------------------------------------------------------------------------------
# Finding arrived books


class Scanner:
    """Watches IN_DIR's files until they have arrived, then offers them to the queue."""

    def __init__(self, in_dir: Path, queue: WatchQueue, arrivals: Arrivals, log: WatchLog,
                 rescan_every: float = DEFAULT_RESCAN, on_queued=lambda: None):
        self.in_dir, self.queue, self.arrivals, self.log = Path(in_dir), queue, arrivals, log
        self.rescan_every, self.on_queued = rescan_every, on_queued
        self.wake = threading.Event()
        self._dirty: set[Path] = set()
        self._lock = threading.Lock()
        self._next_scan = 0.0
        self._scanned = False

    def poke(self, path: Path) -> None:
        """A file changed (called from watchdog's thread)."""
        path = Path(path)
        if path.parent == self.in_dir and is_candidate(path.name):
            with self._lock:
                self._dirty.add(path)
            self.wake.set()

    @property
    def idle(self) -> bool:
        """Scanned at least once, and nothing is on its way in."""
        return self._scanned and not self._dirty and not self.arrivals.pending()

    def step(self) -> None:
        if time.monotonic() >= self._next_scan:
            self._scan_folder()
            self._next_scan = time.monotonic() + self.rescan_every
        with self._lock:
            dirty, self._dirty = self._dirty, set()
        for path in sorted(dirty | set(self.arrivals.pending())):
            self._look_at(path)

    def _scan_folder(self) -> None:
        try:
            names = {n for n in os.listdir(self.in_dir) if is_candidate(n)}
        except OSError as error:
            self.log.say("warning", str(self.in_dir), f"cannot list the folder: {error.strerror}")
            return
        with self._lock:
            self._dirty.update(self.in_dir / n for n in names)
        self.queue.prune_files(names)
        self._scanned = True

    def _look_at(self, path: Path) -> None:
        signature = file_signature(path)
        known = self.queue.remembered(path.name)
        if signature is None or (known and known[0] == signature):
            self.arrivals.forget(path)  # gone, or looked at before and unchanged since
            return
        if self.arrivals.check(path) == ARRIVED:
            try:
                self._arrived(path)
            except OSError as error:
                self.log.say("warning", path.name, f"cannot read it: {error.strerror}")

    def _arrived(self, path: Path) -> None:
        signature = file_signature(path)
        sha256 = sha256_file(path)
        if file_signature(path) != signature:  # changed while we read it: not arrived after all
            self.arrivals.check(path)
            return
        offer = self.queue.offer(path, sha256, signature)
        self.queue.remember(path.name, signature, sha256)
        self._report(path, offer)

    def _report(self, path: Path, offer: Offer) -> None:
        book = offer.book
        if offer.outcome == "queued":
            self.log.say("queued", path.name, f"-> {book.output}", book.sha256)
        elif offer.outcome == "retry":
            self.log.say("queued", path.name, f"-> {book.output} (failed before; trying again)", book.sha256)
        elif offer.outcome == "renamed":
            self.log.say("renamed", path.name, f"(was {book.name}; still -> {book.output})", book.sha256)
        elif offer.outcome == "duplicate":
            where = f"already converted to {book.output}" if book.state == "done" else f"{book.state}"
            self.log.say("duplicate", path.name, f"same content as {book.source.name} ({where}); left alone",
                         book.sha256)
        if offer.outcome in ("queued", "retry", "renamed"):
            self.on_queued()


def start_observer(in_dir: Path, scanner: Scanner):
    """watchdog events for IN_DIR's top level, forwarded to the scanner."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    class Forward(FileSystemEventHandler):
        def on_any_event(self, event):
            if event.is_directory or event.event_type in ("opened", "closed_no_write", "deleted"):
                return
            for raw in (event.src_path, getattr(event, "dest_path", "")):
                if raw:
                    scanner.poke(Path(os.fsdecode(raw)))

    observer = Observer()
    observer.schedule(Forward(), str(in_dir), recursive=False)
    observer.start()
    return observer


# ------------------------------------------------------------------------------------------
# Converting


def move_to_failed(in_dir: Path, source: Path, reason: str) -> Path:
    """IN_DIR/failed/NAME.epub (numbered if taken) plus NAME.epub.reason.txt; returns the new path."""
    folder = Path(in_dir) / FAILED_DIR
    folder.mkdir(exist_ok=True)
    target = next(folder / n for n in numbered_names(source.stem, source.suffix)
                  if not (folder / n).exists() and not (folder / f"{n}.reason.txt").exists())
    shutil.move(str(source), str(target))
    (folder / f"{target.name}.reason.txt").write_text(one_line(reason) + "\n", encoding="utf-8")
    return target


class VoiceLock:
    """Held while converting, so that watchers of other folders never run the same model at once."""

    def __init__(self, path: Path, log: WatchLog):
        self.path, self.log, self._file = Path(path), log, None

    def __enter__(self):
        if fcntl is None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a")
        told = False
        while True:
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if not told:
                    self.log.say("waiting", "", f"another watcher is using this voice ({self.path.name})")
                    told = True
                time.sleep(1.0)

    def __exit__(self, *exc):
        if self._file is not None:
            self._file.close()  # closing releases the lock
            self._file = None


@contextlib.contextmanager
def instance_lock(path: Path, in_dir: Path, out_dir: Path):
    """Refuse to run two watchers for the same IN_DIR/OUT_DIR pair (they would share a queue)."""
    if fcntl is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise InputError(f"another watcher (pid {holder}) already watches {in_dir} for {out_dir}") from None
        f.truncate(0)
        f.write(str(os.getpid()))
        f.flush()
        yield


class Converter:
    """Takes the queued books one at a time, oldest first, and hands each to the engine."""

    def __init__(self, in_dir: Path, out_dir: Path, queue: WatchQueue, log: WatchLog, options,
                 progress_mode: str = "none", voice_lock=None):
        self.in_dir, self.out_dir, self.queue, self.log = Path(in_dir), Path(out_dir), queue, log
        self.options, self.progress_mode = options, progress_mode
        self.voice_lock = voice_lock or contextlib.nullcontext()
        self._told_out_missing = False

    def convert_next(self) -> bool:
        """Convert the next queued book; False when there was nothing to do (or OUT_DIR is gone)."""
        book = self.queue.next_queued()
        if book is None or not self._out_dir_present():
            return False
        problem = self._source_problem(book)
        if problem:
            self.queue.forget(book.sha256)
            self.log.say("forgotten", book.name, problem, book.sha256)
            return True
        with self.voice_lock:
            self._convert(book)
        return True

    def _out_dir_present(self) -> bool:
        present = self.out_dir.is_dir()
        if not present and not self._told_out_missing:
            self.log.say("waiting", str(self.out_dir), "the output folder is missing (not mounted?)")
        self._told_out_missing = not present
        return present

    def _source_problem(self, book: QueuedBook) -> str | None:
        signature = file_signature(book.source)
        if signature is None:
            return "the file disappeared before it was converted"
        if signature != (book.size, book.mtime_ns):
            return "the file changed after it was queued; it is looked at again when it settles"
        return None

    def _convert(self, book: QueuedBook) -> None:
        from .progress import for_mode
        from .render import Interrupted, convert

        resuming = " (resuming)" if book.attempts else ""
        self.queue.mark_converting(book.sha256)
        self.log.say("converting", book.source.name, f"-> {book.output}{resuming}", book.sha256)
        progress = for_mode(self.progress_mode)
        try:
            result = convert(book.source, self.out_dir / book.output, self.options, progress)
        except (Interrupted, KeyboardInterrupt):
            self.queue.requeue(book.sha256)
            self.log.say("stopped", book.source.name, "left in the queue; it resumes at the next start",
                         book.sha256)
            raise KeyboardInterrupt from None
        except InputError as error:
            self._book_failed(book, str(error))
        except JobFailed as error:
            self._job_failed(book, str(error))
        except Exception as error:
            traceback.print_exc()
            self._job_failed(book, f"internal error: {type(error).__name__}: {error}")
        else:
            self.queue.mark_done(book.sha256)
            self.log.say("converted", book.source.name,
                         f"-> {book.output} ({result.chapters} chapters, {result.duration_seconds / 60:.1f} min)",
                         book.sha256)
        finally:
            progress.close()

    def _book_failed(self, book: QueuedBook, message: str) -> None:
        if not self.out_dir.is_dir():  # the engine blamed the output folder, not the book
            self._job_failed(book, message)
            return
        try:
            moved = move_to_failed(self.in_dir, book.source, message)
        except OSError as error:
            moved = None
            self.log.say("warning", book.source.name, f"could not move it to {FAILED_DIR}/: {error}")
        self.queue.mark_failed(book.sha256, message, "book", moved)
        if moved is not None:
            self.queue.forget_file(book.source.name)
        where = f"moved to {FAILED_DIR}/{moved.name}" if moved else "left in place"
        self.log.say("failed", book.source.name, f"{one_line(message)} ({where})", book.sha256)

    def _job_failed(self, book: QueuedBook, message: str) -> None:
        self.queue.mark_failed(book.sha256, message, "job")
        self.log.say("error", book.source.name,
                     f"{one_line(message)} (the book stays in place; retried at the next start)", book.sha256)


# ------------------------------------------------------------------------------------------
# The command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("in_dir", type=Path, metavar="IN_DIR", help="the folder to watch for EPUB files")
    parser.add_argument("--out", "-o", dest="out_dir", type=Path, required=True, metavar="OUT_DIR",
                        help="where the M4B files (and epub2audio-watch.log) go")
    parser.add_argument("--voice", help="joe (default, the embedded voice), tone, or a saved CosyVoice3 voice")
    parser.add_argument("--model-dir", type=Path, help="the Fun-CosyVoice3-0.5B folder (for CosyVoice3 voices)")
    parser.add_argument("--workers", type=int, help="worker processes rendering each book (default 1)")
    from .cli import add_ray_argument

    add_ray_argument(parser)
    parser.add_argument("--once", action="store_true",
                        help="convert what is there and what is queued, then exit (for cron and tests)")
    parser.add_argument("--settle", type=float, default=DEFAULT_SETTLE, metavar="SECONDS",
                        help=f"a file counts as arrived after this long unchanged (default {DEFAULT_SETTLE:g})")
    parser.add_argument("--rescan", type=float, default=DEFAULT_RESCAN, metavar="SECONDS",
                        help=f"look through the whole folder this often, in case events were missed "
                             f"(default {DEFAULT_RESCAN:g})")
    parser.add_argument("--progress", choices=("auto", "bar", "json", "none"), default="auto",
                        help="progress of the book being converted; json also reports the watcher's events")


def _convert_options(args: argparse.Namespace):
    from .config import load_config, outputs, worker_policy
    from .render import ConvertOptions
    from .voices.catalog import resolve

    from .cli import _workers
    from .library import worker_pool

    config = load_config()
    workers = _workers(args, config)
    voice = resolve(args.voice or config.get("voice", "joe"), config=config, model_dir=args.model_dir,
                    workers=max(1, workers))
    return ConvertOptions(voice=voice.name, voice_options=voice.options, threads_per_worker=voice.threads,
                          workers=workers, policy=worker_policy(config), pool=worker_pool(args.ray),
                          **outputs(config))  # config.toml's subtitles / readalong


def _voice_lock_path(options) -> Path:
    """One lock per model: CosyVoice3 voices made from different recordings share one model."""
    from .config import data_dir

    model = options.voice_options.get("model_dir") or options.voice
    key = hashlib.sha256(str(model).encode()).hexdigest()[:12]
    return data_dir() / "watch" / f"model-{_safe_name(Path(str(model)).name)}-{key}.lock"


def _check_folders(args: argparse.Namespace) -> tuple[Path, Path]:
    in_dir, out_dir = args.in_dir.expanduser().resolve(), args.out_dir.expanduser().resolve()
    for folder, what in ((in_dir, "IN_DIR"), (out_dir, "--out")):
        if not folder.is_dir():
            raise InputError(f"{folder}: {what} is not an existing folder")
    if args.settle < 0 or args.rescan <= 0:
        raise InputError("--settle must be 0 or more and --rescan more than 0 seconds")
    return in_dir, out_dir


def run(args: argparse.Namespace) -> int:
    """The watch command. Bad arguments raise InputError (exit code 2); returns 0, or 130 when
    stopped by Ctrl-C / SIGTERM."""
    in_dir, out_dir = _check_folders(args)
    options = _convert_options(args)
    state = queue_path(in_dir, out_dir)
    log = WatchLog(out_dir / LOG_NAME, json_stream=sys.stdout if args.progress == "json" else None)
    previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with instance_lock(state.with_suffix(".lock"), in_dir, out_dir):
            return _watch(args, in_dir, out_dir, options, state, log, _voice_lock_path(options))
    finally:
        signal.signal(signal.SIGTERM, previous_handler)


def _watch(args, in_dir: Path, out_dir: Path, options, state: Path, log: WatchLog, voice_lock: Path) -> int:
    consumer_queue, scanner_queue = WatchQueue(state, out_dir), WatchQueue(state, out_dir)
    converted = threading.Event()
    scanner = Scanner(in_dir, scanner_queue, Arrivals(args.settle), log, args.rescan, on_queued=converted.set)
    converter = Converter(in_dir, out_dir, consumer_queue, log, options, args.progress, VoiceLock(voice_lock, log))
    stop = threading.Event()
    threads = []
    try:
        for book in consumer_queue.recover():
            log.say("resuming" if book.state == "converting" else "retrying", book.source.name,
                    f"-> {book.output}", book.sha256)
        if not args.once:
            threads = _start_background(in_dir, scanner, stop, log)
        log.say("watching", str(in_dir), f"-> {out_dir} (voice {options.voice}, settle {args.settle:g} s"
                f"{', once' if args.once else ''}; queue {state})")
        if args.once:
            return _serve_once(scanner, converter, out_dir)
        _serve_forever(converter, converted)
    except KeyboardInterrupt:
        log.say("stopped", str(in_dir), "Ctrl-C / SIGTERM")
        return EXIT_INTERRUPTED
    finally:
        stop.set()
        scanner.wake.set()
        for thing in threads:
            if hasattr(thing, "stop"):
                thing.stop()
            thing.join(timeout=10)
        consumer_queue.close()
        if not any(t.is_alive() for t in threads):
            scanner_queue.close()


def _serve_once(scanner: Scanner, converter: Converter, out_dir: Path) -> int:
    while True:
        scanner.step()
        if converter.convert_next():
            continue
        if not out_dir.is_dir():
            raise InputError(f"{out_dir}: the output folder went away")
        if scanner.idle and converter.queue.next_queued() is None:
            return EXIT_OK
        time.sleep(TICK)


def _serve_forever(converter: Converter, wake: threading.Event) -> None:
    while True:
        if not converter.convert_next():
            wake.wait(TICK)
            wake.clear()


def _start_background(in_dir: Path, scanner: Scanner, stop: threading.Event, log: WatchLog) -> list:
    """File events first, then the scanner, whose first step lists the folder: a file that arrives
    in between is reported by an event, so none waits for the next rescan."""
    try:
        threads = [start_observer(in_dir, scanner)]
    except Exception as error:  # e.g. the inotify watch limit: the rescans still find every book
        log.say("warning", str(in_dir), f"no file events ({error}); relying on rescans")
        threads = []
    thread = threading.Thread(target=_scan_forever, args=(scanner, stop, log), name="watch-scanner", daemon=True)
    thread.start()
    return [thread, *threads]


def _scan_forever(scanner: Scanner, stop: threading.Event, log: WatchLog) -> None:
    while not stop.is_set():
        try:
            scanner.step()
        except Exception as error:  # keep watching; one bad moment must not end the watcher
            log.say("warning", "", f"scanner: {type(error).__name__}: {error}")
        scanner.wake.wait(TICK)
        scanner.wake.clear()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """`python -m epub2audio.watch ...` (the same as `epub2audio watch ...`)."""
    parser = argparse.ArgumentParser(prog="epub2audio watch",
                                     description="Watch a folder: every EPUB dropped into it becomes an M4B.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except InputError as error:
        print(f"epub2audio: error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
