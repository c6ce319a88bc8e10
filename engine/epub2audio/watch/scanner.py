"""Finding arrived books: watchdog's events and periodic rescans of IN_DIR, offered to the queue.

watchdog reports changes in IN_DIR (top level only); a scan at start and a rescan every `--rescan`
seconds catch whatever the events missed (network folders, a full inotify table, a watcher that was
not running).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from .arrivals import ARRIVED, Arrivals, file_signature, is_candidate, sha256_file
from .log import WatchLog
from .queue import Offer, WatchQueue

DEFAULT_RESCAN = 30.0


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
