"""What the rest of the engine knows about a book: metadata and chapters of spoken text."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Cover:
    data: bytes
    media_type: str  # "image/jpeg" or "image/png"


@dataclass
class Chapter:
    title: str
    # Paragraph-sized blocks of text to be read aloud, in reading order. A heading, a paragraph,
    # a line group of verse or a table row each become one block.
    paragraphs: list[str]
    # Where the chapter came from (spine hrefs, with #fragment where a TOC entry split a file).
    sources: list[str] = field(default_factory=list)
    # Parallel to paragraphs, when known: "heading", "text" or "note" (a note read under
    # --notes inline / chapter-end, or the "Notes for this chapter." heading). Empty: all "text".
    kinds: list[str] = field(default_factory=list)
    # Indices of paragraphs that a scene break (<hr/>, "* * *") comes before: a longer pause.
    breaks: set[int] = field(default_factory=set)
    # Paragraph index → (start, end, ipa) spans from the book's inline ssml:ph attributes.
    pronunciations: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)
    # Paragraph index → (start, end, BCP 47 tag) runs of text in a language the markup names
    # (xml:lang/lang); text outside them is in the book's language.
    languages: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)

    def kind(self, index: int) -> str:
        return self.kinds[index] if index < len(self.kinds) else "text"

    @property
    def char_count(self) -> int:
        return sum(len(p) for p in self.paragraphs)


@dataclass
class Skipped:
    """A part of the book that is not read, and why. The summary and the share of the text it
    costs are computed in one place, book/skips.py."""

    title: str
    reason: str  # e.g. "cover (epub:type)", "copyright page (landmarks)", "non-linear spine item"
    chars: int = 0  # characters of body text in the part that are not read
    # What decided it: "structure" (epub:type, ARIA role, landmarks, guide, nav document,
    # non-linear spine item, Project Gutenberg's START/END markers), "lines" (a list whose lines are
    # found elsewhere in the book), "guess" (text, a title or label, a file name), "repetition"
    # (lines repeated across files) or "empty" (no text at all).
    evidence: str = "structure"
    # Its first words, for --list-chapters --preview (not part of what the skip is).
    preview: str = field(default="", compare=False)


@dataclass
class Book:
    path: str
    title: str
    authors: list[str]
    language: str  # BCP 47 as given by dc:language, "" if missing
    chapters: list[Chapter]
    skipped: list[Skipped] = field(default_factory=list)
    date: str = ""  # dc:date as given; the M4B gets the year
    description: str = ""
    publisher: str = ""
    identifier: str = ""  # ISBN where the book has one, else its dc:identifier
    series: str = ""  # from calibre's metadata or calibre:series in the OPF
    series_index: str = ""
    asin: str = ""  # only from --meta / calibre: EPUBs do not carry one
    cover: Cover | None = None
    # (grapheme, IPA) entries of the book's PLS pronunciation lexicons, in manifest order.
    pronunciation_lexicon: list[tuple[str, str]] = field(default_factory=list)
    # What could not be read as it should, one line each naming the part ("ch3.xhtml: only partly
    # read (...)", "spine item 'x': no such item in the manifest; not read"). Shown by
    # --list-chapters and sent as warning events; never dropped silently.
    warnings: list[str] = field(default_factory=list)

    @property
    def read_chars(self) -> int:
        """Characters of chapter text: what is read (book/skips.py sets it against what is not)."""
        return sum(c.char_count for c in self.chapters)
