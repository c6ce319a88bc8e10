"""A book's plan for programs: its chapters with their sizes, what is skipped and why, and the
warnings (and, for --preview, the first words of each chapter and skipped part).
`--list-chapters --progress json` prints it; the watcher's web page shows it."""

from __future__ import annotations

from ..progress import CHARS_PER_SECOND
from .model import Book, Chapter
from .skips import plan_fields, preview as first_words


def chapter_preview(chapter: Chapter) -> str:
    """A chapter's first words after its title (the heading it starts with is its title)."""
    paragraphs = chapter.paragraphs[1:] if chapter.paragraphs[:1] == [chapter.title] else chapter.paragraphs
    return first_words(paragraphs)


def listing(book: Book, preview: bool = False) -> dict:
    """The plan; with `preview`, each chapter's and skipped part's first words ("preview")."""
    chapters = [{"number": i, "title": c.title, "characters": c.char_count,
                 "estimated_seconds": round(c.char_count / CHARS_PER_SECOND, 1)}
                for i, c in enumerate(book.chapters, 1)]
    skipped = [{"title": s.title, "reason": s.reason, "characters": s.chars, "evidence": s.evidence}
               for s in book.skipped]
    if preview:
        for row, chapter in zip(chapters, book.chapters):
            row["preview"] = chapter_preview(chapter)
        for row, part in zip(skipped, book.skipped):
            row["preview"] = part.preview
    return {
        "title": book.title, "authors": book.authors, "language": book.language,
        "chapters": chapters, "skipped": skipped,
        "skipping": plan_fields(book),
        "warnings": list(book.warnings),
    }
