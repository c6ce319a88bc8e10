"""Converting: the queued books one at a time, oldest first, each handed to `render.convert`.

The M4B is OUT_DIR/<the name chosen when it was queued>. The source EPUB stays where it is: the
watcher never deletes, renames or edits a good book. A broken book (the engine's InputError) is
moved to IN_DIR/failed/ with NAME.epub.reason.txt beside it, holding the engine's one-line message.
If the job itself fails (JobFailed: a segment kept failing), the book is not to blame: it stays in
place and is retried the next time the watcher starts. Ctrl-C or SIGTERM puts the book being
converted back in the queue; the engine's job store resumes it at the next start.

The engine's warnings about a book ("ch3.xhtml: only partly read ...") go to the watcher's log, one
line each under the book's name, and not to the book's progress display too, so that stderr and the
JSON stream carry each warning once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import traceback
from pathlib import Path

from ..errors import InputError, JobFailed
from ..progress import Progress, for_mode
from .arrivals import file_signature
from .log import WatchLog
from .names import numbered_names, one_line
from .queue import QueuedBook, WatchQueue

FAILED_DIR = "failed"


class Cancelled(BaseException):
    """Cancel was asked for the book being converted (the web page's button, through the queue).
    A BaseException, as KeyboardInterrupt is: no `except Exception` on the way up may swallow it."""


def move_to_failed(in_dir: Path, source: Path, reason: str) -> Path:
    """IN_DIR/failed/NAME.epub (numbered if taken) plus NAME.epub.reason.txt; returns the new path."""
    folder = Path(in_dir) / FAILED_DIR
    folder.mkdir(exist_ok=True)
    target = next(folder / n for n in numbered_names(source.stem, source.suffix)
                  if not (folder / n).exists() and not (folder / f"{n}.reason.txt").exists())
    shutil.move(str(source), str(target))
    (folder / f"{target.name}.reason.txt").write_text(one_line(reason) + "\n", encoding="utf-8")
    return target


class WarningsToLog(Progress):
    """A book's progress events, with its warnings taken out and written to the watcher's log."""

    def __init__(self, progress: Progress, log: WatchLog, book: QueuedBook):
        self.progress, self.log, self.book = progress, log, book

    def emit(self, event: str, **fields) -> None:
        if event == "warning":
            self.log.say("warning", self.book.source.name, one_line(fields.get("message", "")), self.book.sha256)
        else:
            self.progress.emit(event, **fields)

    def close(self) -> None:
        self.progress.close()


class Watched(Progress):
    """A book's progress events, also told to `listener(sha256, event, fields)` (the web page's
    live view); raises Cancelled at the first event after a cancel was asked for in the queue."""

    def __init__(self, progress: Progress, queue: WatchQueue, book: QueuedBook, listener=None):
        self.progress, self.queue, self.book, self.listener = progress, queue, book, listener

    def emit(self, event: str, **fields) -> None:
        if self.listener is not None:
            self.listener(self.book.sha256, event, fields)
        if self.queue.cancel_requested(self.book.sha256):
            raise Cancelled
        self.progress.emit(event, **fields)

    def close(self) -> None:
        self.progress.close()


def move_back(in_dir: Path, source: Path) -> Path:
    """A book in IN_DIR/failed/ back in IN_DIR (numbered if the name is taken), its reason file
    removed; a book elsewhere stays where it is. Returns where it is now."""
    in_dir, source = Path(in_dir), Path(source)
    if source.parent != in_dir / FAILED_DIR or not source.is_file():
        return source
    target = next(in_dir / n for n in numbered_names(source.stem, source.suffix) if not (in_dir / n).exists())
    os.replace(source, target)
    (in_dir / FAILED_DIR / f"{source.name}.reason.txt").unlink(missing_ok=True)
    return target


class Converter:
    """Takes the queued books one at a time, oldest first, and hands each to the engine."""

    def __init__(self, in_dir: Path, out_dir: Path, queue: WatchQueue, log: WatchLog, options,
                 progress_mode: str = "none", voice_lock=None, listener=None):
        self.in_dir, self.out_dir, self.queue, self.log = Path(in_dir), Path(out_dir), queue, log
        self.options, self.progress_mode = options, progress_mode
        self.voice_lock = voice_lock or contextlib.nullcontext()
        self.listener = listener  # each book's progress events, for the web page
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
        from ..render import Interrupted, convert

        resuming = " (resuming)" if book.attempts else ""
        self.queue.mark_converting(book.sha256)
        self.log.say("converting", book.source.name, f"-> {book.output}{resuming}", book.sha256)
        progress = Watched(WarningsToLog(for_mode(self.progress_mode), self.log, book), self.queue, book,
                           self.listener)
        try:
            # a book queued before the format changed (config.toml's format) is written in the new one
            target = (self.out_dir / book.output).with_suffix(f".{getattr(self.options, 'audio_format', 'm4b')}")
            if getattr(self.options, "layout", "flat") == "audiobookshelf":
                target = self.out_dir  # the engine names the folders from the book (audiobook/shelf.py)
            result = convert(book.source, target, self.options, progress)
        except (Interrupted, KeyboardInterrupt):
            self.queue.requeue(book.sha256)
            self.log.say("stopped", book.source.name, "left in the queue; it resumes at the next start",
                         book.sha256)
            raise KeyboardInterrupt from None
        except Cancelled:
            self.queue.mark_cancelled(book.sha256)
            self.log.say("cancelled", book.source.name, "stopped; Retry puts it back in the queue (the job resumes)",
                         book.sha256)
        except InputError as error:
            self._book_failed(book, str(error))
        except JobFailed as error:
            self._job_failed(book, str(error))
        except Exception as error:
            traceback.print_exc()
            self._job_failed(book, f"internal error: {type(error).__name__}: {error}")
        else:
            self.queue.mark_done(book.sha256, _shown(result.output, self.out_dir))
            self.log.say("converted", book.source.name,
                         f"-> {_shown(result.output, self.out_dir)} ({result.chapters} chapters, {result.duration_seconds / 60:.1f} min)",
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


def _shown(output: Path, out_dir: Path) -> str:
    """The M4B as the log names it: its path under OUT_DIR (Author/Title/Title.m4b under
    --layout audiobookshelf)."""
    try:
        return str(Path(output).relative_to(out_dir))
    except ValueError:
        return str(output)
