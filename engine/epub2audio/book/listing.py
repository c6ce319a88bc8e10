"""A book's plan for programs: its chapters with their sizes, what is skipped and why, and the
warnings. `--list-chapters --progress json` prints it; the watcher's web page shows it."""

from __future__ import annotations

from ..progress import CHARS_PER_SECOND
from .model import Book
from .skips import plan_fields


def listing(book: Book) -> dict:
    return {
        "title": book.title, "authors": book.authors, "language": book.language,
        "chapters": [{"number": i, "title": c.title, "characters": c.char_count,
                      "estimated_seconds": round(c.char_count / CHARS_PER_SECOND, 1)}
                     for i, c in enumerate(book.chapters, 1)],
        "skipped": [{"title": s.title, "reason": s.reason, "characters": s.chars, "evidence": s.evidence}
                    for s in book.skipped],
        "skipping": plan_fields(book),
        "warnings": list(book.warnings),
    }
