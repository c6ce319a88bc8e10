"""Books that are not EPUBs: MOBI, AZW3, DOCX, FB2, ODT, RTF, TXT, HTML and PDF, read through
calibre's `ebook-convert`.

The type is told by the bytes, never by the name alone: a zip with the EPUB mimetype (or any file
named .epub: the EPUB reader then says what is wrong with it), "BOOKMOBI" at byte 60 (MOBI and
AZW3), "%PDF-", "{\\rtf", a zip holding word/document.xml (DOCX) or the OpenDocument text mimetype
(ODT), an XML <FictionBook> (FB2), an <html> document, or plain text. calibre picks its input
plugin by suffix, so the copy it converts carries the suffix the content says.

A converted book is kept in the cache, keyed by the SHA-256 of its bytes: `--list-chapters`, the
conversion, a resumed job and `regen` all read the same EPUB (calibre writes a fresh uuid and time
into each conversion), and calibre runs once per book. The conversion runs in a temporary folder
beside the cache entry, in its own process group, for at most CONVERT_SECONDS and CONVERT_MEMORY,
and only a finished EPUB is renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import zipfile
from pathlib import Path

from ..errors import InputError

CONVERT_SECONDS = 600  # a long PDF takes minutes on a slow machine; a hung calibre is stopped here
# Address space calibre may take (RLIMIT_AS): each format's conversion ran in 4 GiB here, and a
# decompression bomb inside a DOCX or an ODT fails inside it instead of taking the machine's memory.
CONVERT_MEMORY = 4 << 30
EBOOK_CONVERT = "ebook-convert"
INSTALL_CALIBRE = "install calibre (Debian/Ubuntu: apt install calibre; else https://calibre-ebook.com)"

# kind → (the suffix calibre is given, the name in messages)
KINDS = {
    "mobi": (".mobi", "MOBI"), "azw3": (".azw3", "AZW3"), "docx": (".docx", "DOCX"), "fb2": (".fb2", "FB2"),
    "odt": (".odt", "ODT"), "rtf": (".rtf", "RTF"), "txt": (".txt", "TXT"), "html": (".html", "HTML"),
    "pdf": (".pdf", "PDF"),
}
# The names a book may arrive under (the watcher and the page look at these files).
BOOK_SUFFIXES = (".epub", ".mobi", ".azw3", ".azw", ".prc", ".docx", ".fb2", ".odt", ".rtf", ".txt",
                 ".html", ".htm", ".xhtml", ".pdf")
ZIP_SUFFIXES = (".epub", ".docx", ".odt")  # formats whose last written part is a zip directory
FORMATS_LINE = "EPUB, MOBI, AZW3, DOCX, FB2, ODT, RTF, TXT, HTML or PDF"


def book_kind(path: Path) -> str | None:
    """'epub', one of KINDS, or None (not a book we can read)."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if path.suffix.lower() == ".epub":
        return "epub"  # the name claims EPUB: a damaged one gets the EPUB reader's own message
    return kind_of_bytes(head, path)


def kind_of_bytes(head: bytes, path: Path | None = None) -> str | None:
    """The kind from a file's first 64 KiB (and, for a zip, its directory when `path` is given)."""
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(path) if path is not None else "epub"
    if head[60:68] == b"BOOKMOBI":
        return "azw3" if path is not None and path.suffix.lower() == ".azw3" else "mobi"
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"{\\rtf"):
        return "rtf"
    if b"\0" in head:
        return None
    text = _decoded(head)
    if text is None:
        return None
    start = text.lstrip("\ufeff \t\r\n")[:4096].lower()
    if "<fictionbook" in start:
        return "fb2"
    if start.startswith(("<!doctype html", "<html")) or (start.startswith("<?xml") and "<html" in start):
        return "html"
    return "txt"


def _zip_kind(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            mimetype = archive.read("mimetype")[:100].strip() if "mimetype" in names else b""
    except Exception:  # damaged: the EPUB reader names what is wrong
        return "epub"
    if mimetype == b"application/vnd.oasis.opendocument.text":
        return "odt"
    if "word/document.xml" in names and mimetype != b"application/epub+zip":
        return "docx"
    return "epub"


def _decoded(head: bytes) -> str | None:
    """Text if it reads as UTF-8 (a cut last character allowed) or as mostly printable 8-bit text."""
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start >= len(head) - 3:
            return head[:error.start].decode("utf-8")
    text = head.decode("latin-1")
    controls = sum(1 for c in text if ord(c) < 32 and c not in "\t\r\n\f")
    return text if controls <= len(text) // 100 else None


def readable_epub(path: Path) -> Path:
    """`path` itself for an EPUB; for another format, the EPUB calibre made of it (cached).
    InputError in one line when the format is unknown, calibre is missing or fails."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return path  # the EPUB reader says "file not found" / "empty file"
    kind = book_kind(path)
    if kind == "epub":
        return path
    if kind is None:
        raise InputError(f"{path.name}: not a book epub2audio reads ({FORMATS_LINE}); convert it to EPUB "
                         "first, e.g. with calibre")
    suffix, label = KINDS[kind]
    program = shutil.which(EBOOK_CONVERT)
    if program is None:
        raise InputError(f"{path.name}: a {label} book is read through calibre's ebook-convert, which is not "
                         f"installed: {INSTALL_CALIBRE}")
    # calibre reads the title from a TXT's name, and messages name the EPUB: it keeps the book's name
    stem = os.fsencode(path.stem).decode("utf-8", "replace").lstrip(".") or "book"
    entry = _cache_root() / _sha256(path)[:32]
    target = entry / f"{stem}.epub"
    if target.is_file():
        return target
    entry.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=entry, prefix=".converting-") as tmp:
        work = Path(tmp)
        source = work / f"{stem}{suffix}"
        shutil.copyfile(path, source)  # what is converted cannot change under calibre
        made = work / "book.epub"
        _run_calibre(program, source, made, path.name, label, work)
        os.replace(made, target)
    return target


def _run_calibre(program: str, source: Path, made: Path, name: str, label: str, work: Path) -> None:
    env = dict(os.environ, CALIBRE_TEMP_DIR=str(work), QT_QPA_PLATFORM="offscreen")
    for key in ("PYTHONPATH", "PYTHONHOME"):  # calibre runs its own Python
        env.pop(key, None)
    process = subprocess.Popen([program, str(source), str(made)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=work,
                               start_new_session=True, preexec_fn=_limit_memory)
    try:
        _out, err = process.communicate(timeout=CONVERT_SECONDS)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise InputError(f"{name}: calibre's ebook-convert did not convert this {label} file within "
                         f"{CONVERT_SECONDS} s") from None
    except BaseException:  # Ctrl-C: calibre and its helpers stop with us
        _kill_group(process)
        raise
    if process.returncode != 0 or not made.is_file() or made.stat().st_size == 0:
        lines = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        why = lines[-1][:200] if lines else f"exit code {process.returncode}"
        raise InputError(f"{name}: calibre's ebook-convert could not convert this {label} file ({why})")


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (CONVERT_MEMORY, CONVERT_MEMORY))
    except (ImportError, ValueError, OSError):  # Windows, or a lower hard limit already
        pass


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass
    process.wait()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cache_root() -> Path:
    from ..config import cache_dir

    return cache_dir() / "converted"
