"""`--layout audiobookshelf`: where Audiobookshelf's folder scanner expects a book, and the files
it reads beside the audio.

    OUT/Author/Series/Book 2 - Title/Title.m4b     (a book in a series with a position)
    OUT/Author/Series/Title/Title.m4b              (in a series, no position)
    OUT/Author/Title/Title.m4b                     (no series)

with cover.jpg (cover.png for a PNG cover), desc.txt (the description) and reader.txt (the
narrator) beside it. The scanner takes the author, series, position ("Book 2 - ") and title from
these folder names, so they say what the tags say. Several authors are joined with " & ", which
it splits on. Every name is made safe on every platform (safe_component).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

LAYOUTS = ("flat", "audiobookshelf")
COMPONENT_BYTES = 120  # well under the 255 bytes a name may have on ext4, APFS and NTFS
WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{n}" for n in range(1, 10)), *(f"LPT{n}" for n in range(1, 10))}


def safe_component(text: str, fallback: str) -> str:
    """One folder or file name from a title or an author: no path separators, control characters,
    characters Windows refuses (<>:"/\\|?*), leading or trailing dots and spaces (no hidden files), reserved device names (CON,
    NUL, ...) or '.'/'..'; NFC (macOS and Linux then agree on the bytes); cut at a character
    boundary within COMPONENT_BYTES of UTF-8. Nothing left: `fallback`."""
    text = unicodedata.normalize("NFC", str(text or ""))
    text = "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in text)
    text = re.sub(r'[<>:"/\\|?*]', "_", text)
    text = " ".join(text.split())
    cut = text.encode("utf-8")[:COMPONENT_BYTES].decode("utf-8", "ignore")
    cut = cut.strip(" .")
    if not cut or set(cut) <= {"_"}:
        return fallback
    if cut.split(".")[0].upper() in WINDOWS_RESERVED:
        cut = f"_{cut}"
    return cut


def shelf_path(root: Path, title: str, authors: list[str], series: str, series_index: str, suffix: str) -> Path:
    """Where Audiobookshelf wants this book's audio file, under the library folder `root`."""
    name = safe_component(title, "Untitled")
    folder = Path(root) / safe_component(" & ".join(a for a in authors if a.strip()), "Unknown Author")
    if series.strip():
        folder /= safe_component(series, "Series")
        position = safe_component(series_index, "")
        book = safe_component(f"Book {position} - {title}", name) if position else name
        folder /= book
    else:
        folder /= name
    return folder / f"{name}{suffix}"


def write_beside(audio: Path, cover, description: str, narrator: str) -> list[Path]:
    """cover.jpg / cover.png, desc.txt and reader.txt in the audio file's folder, each atomically."""
    from ..files import atomic_write

    written = []
    folder = Path(audio).parent
    if cover is not None:
        suffix = ".png" if cover.media_type.lower() == "image/png" else ".jpg"
        written.append(folder / f"cover{suffix}")
        atomic_write(written[-1], cover.data, shared=True)
    for name, text in (("desc.txt", description), ("reader.txt", narrator)):
        if text and text.strip():
            written.append(folder / name)
            atomic_write(written[-1], (text.strip() + "\n").encode("utf-8"), shared=True)
    return written
