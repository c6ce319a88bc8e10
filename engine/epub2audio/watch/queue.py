"""The watcher's persistent queue: every book by the SHA-256 of its bytes, and its state.

A SQLite database (WAL) in `data_dir()/watch/`, one per IN_DIR/OUT_DIR pair. It lives in the data
dir, not the cache, because it is the memory of what was already converted: wiping it would convert
everything again. It is not in OUT_DIR because SQLite's WAL mode does not work on network shares,
where audiobook libraries often live. Each book goes queued → converting → done | failed. The M4B's
file name is chosen when a book is queued and kept: OUT_DIR/<EPUB file name>.m4b, or "<name> (2).m4b"
when that name is taken by a file that is not this book's. So a restart converts to the same path,
and the engine's job store (keyed by the output path) resumes a half-rendered book where it stopped.

A book's content is converted once: the same bytes under another name are a duplicate. The queue
also remembers every file it has looked at (name, size, mtime), so a file is hashed once and a
duplicate is reported once, not at every rescan.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from .names import numbered_names, one_line, safe_name

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
    queued REAL NOT NULL, updated REAL NOT NULL,
    written TEXT,                                    -- the audiobook's path under OUT_DIR, once done
    cancel INTEGER NOT NULL DEFAULT 0);              -- 1: stop it (the web page's Cancel)
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
    written: str | None = None
    cancel: int = 0


@dataclass(frozen=True)
class Offer:
    outcome: str  # queued | known | renamed | retry | duplicate
    book: QueuedBook


class WatchQueue:
    """Books by content hash and their state, in SQLite (WAL). One instance per thread."""

    def __init__(self, path: Path, out_dir: Path, suffix: str = ".m4b"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.out_dir = Path(out_dir)
        self.suffix = suffix  # the audiobooks' format (--format)
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(books)")}
        for column, kind in (("written", "TEXT"), ("cancel", "INTEGER NOT NULL DEFAULT 0")):
            if column not in columns:  # a queue made before the web page
                self.db.execute(f"ALTER TABLE books ADD COLUMN {column} {kind}")

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
            "SELECT sha256, name, source, output, state, size, mtime_ns, attempts, error, error_kind, written, cancel "
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
        for name in numbered_names(stem, self.suffix):
            claimed = self.db.execute("SELECT 1 FROM books WHERE output = ?", (name,)).fetchone()
            if not claimed and not (self.out_dir / name).exists():
                return name
        raise AssertionError("unreachable")

    # --- state changes -----------------------------------------------------------------------
    def mark_converting(self, sha256: str) -> None:
        self.db.execute("UPDATE books SET state = 'converting', attempts = attempts + 1, updated = ?"
                        " WHERE sha256 = ?", (time.time(), sha256))

    def mark_done(self, sha256: str, written: str | None = None) -> None:
        self._update(sha256, state="done", error=None, error_kind=None, written=written, cancel=0)

    def mark_failed(self, sha256: str, error: str, kind: str, source: Path | None = None) -> None:
        fields = {"state": "failed", "error": one_line(error), "error_kind": kind}
        if kind == "book":
            fields["output"] = None  # a broken book gives its M4B name back
        if source is not None:
            fields["source"] = str(source)
        self._update(sha256, **fields)

    def requeue(self, sha256: str) -> None:
        self._update(sha256, state="queued")

    # --- requests from the web page --------------------------------------------------------------
    def cancel(self, sha256: str) -> str | None:
        """Cancel a queued book at once, or ask the converter to stop the one it converts (it looks
        at every progress event of the book). Returns the book's state before, None if unknown."""
        with self._transaction():
            book = self.book(sha256)
            if book is None:
                return None
            if book.state == "queued":  # cancel stays 1: a converter that took it just now stops it
                self._update(sha256, state="failed", error="cancelled", error_kind="cancelled", cancel=1)
            elif book.state == "converting":
                self._update(sha256, cancel=1)
            return book.state

    def cancel_requested(self, sha256: str) -> bool:
        row = self.db.execute("SELECT cancel FROM books WHERE sha256 = ?", (sha256,)).fetchone()
        return bool(row and row[0])

    def mark_cancelled(self, sha256: str) -> None:
        self._update(sha256, state="failed", error="cancelled", error_kind="cancelled", cancel=0)

    def retry(self, sha256: str, source: Path) -> bool:
        """A failed or cancelled book back in the queue (its file now at `source`)."""
        with self._transaction():
            book = self.book(sha256)
            if book is None or book.state != "failed":
                return False
            self._update(sha256, state="queued", error=None, error_kind=None, cancel=0, source=str(source),
                         output=book.output or self._free_output(Path(book.name).stem))
            return True

    def forget(self, sha256: str) -> None:
        self.db.execute("DELETE FROM books WHERE sha256 = ? AND state != 'done'", (sha256,))

    def recover(self) -> list[QueuedBook]:
        """At start: books cut off mid-conversion, and books whose job failed, go back in the queue."""
        with self._transaction():
            books = self._select("WHERE state = 'converting' OR (state = 'failed' AND error_kind = 'job')"
                                 " ORDER BY queued, rowid")
            for book in books:
                if book.cancel:  # cancelled while the watcher went down: it stays cancelled
                    self.mark_cancelled(book.sha256)
                else:
                    self._update(book.sha256, state="queued")
            books = [b for b in books if not b.cancel]
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
    from ..config import data_dir

    in_dir, out_dir = Path(in_dir).resolve(), Path(out_dir).resolve()
    key = hashlib.sha256(f"{in_dir}\0{out_dir}".encode()).hexdigest()[:16]
    return data_dir() / "watch" / f"{safe_name(in_dir.name) or 'root'}-{key}.sqlite3"
