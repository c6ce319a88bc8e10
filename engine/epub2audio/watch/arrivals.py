"""Which files in IN_DIR are books, and when one has finished arriving.

A book is an EPUB or any format the engine reads through calibre (book/formats.py: MOBI, AZW3, DOCX,
FB2, ODT, RTF, TXT, HTML, PDF). A file has arrived when its size and mtime have not changed for
`settle` seconds and, for the zip formats (EPUB, DOCX, ODT), its zip central directory reads (the
directory is written last, so a copy that stalls for longer than the settle time is still waited for). A file that stays unreadable for PATIENCE_FACTOR settle periods is handed
to the engine anyway, which names what is wrong with it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..book.formats import BOOK_SUFFIXES, ZIP_SUFFIXES

DEFAULT_SETTLE = 3.0
PATIENCE_FACTOR = 5  # an unreadable zip gets this many settle periods before it counts as broken
IGNORED_ENDINGS = (".part", ".crdownload", ".tmp", ".download", "~")
WAITING, ARRIVED, GONE = "waiting", "arrived", "gone"


def is_candidate(name: str) -> bool:
    """A book worth looking at: not hidden, not a download still in progress."""
    lower = name.lower()
    if name.startswith(".") or lower.endswith(IGNORED_ENDINGS):
        return False
    return lower.endswith(BOOK_SUFFIXES)


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
        """WAITING until unchanged for `settle` seconds and, for a zip format, readable as a zip (or unchanged for
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
        zipped = path.name.lower().endswith(ZIP_SUFFIXES)
        if quiet < self.settle or (zipped and quiet < self.patience and not zip_readable(path)):
            return WAITING
        self.forget(path)
        return ARRIVED
