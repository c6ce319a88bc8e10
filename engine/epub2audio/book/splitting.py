"""Chapters for a book whose table of contents does not give them.

A TOC is not usable when it gives no chapter at all (missing, or every entry points into the
Project Gutenberg licence); when it gives one chapter that runs over three or more spine files;
or when one chapter holds half the book's text or more and two or more chapter markers inside it
(a Chinese novel whose only entry is the book, with 119 "第N回" inside). A notes section (epub:type
endnotes, footnotes, rearnotes) is none of these: its "Chapter I …" lines name the chapter a note
is on (The Art of War's 234K endnotes), and it is never cut. Such a book is split, in order of
evidence:

1. at chapter markers, where the text has two or more: a heading or a short paragraph that starts
   "第N回" / "第N章" / "第N卷" / "第N話", or "Chapter IV", "Chapitre premier", "Kapitel 3",
   "Capítulo", "Capitolo" and the like (a heading run just before a marker goes with it);
2. else at every run of headings whose first is an h1-h3 (or a "Chapter N" line of its own in
   plain-text paragraphs); with only h4-h6 headings, at those;
3. else at spine files, each titled by its first heading or <title>;
4. and a piece still longer than about two hours of speech (LONG_PIECE characters), with nothing
   in it to cut at, is cut into near-equal parts at paragraph ends: "Title (1)", "Title (2)", ...

Every piece is titled by the marker or heading that starts it; text before the first keeps the
title it had. A guess from text (the markers) is bounded: a paragraph counts only if it is short
and begins with the marker, so a sentence that mentions "chapter four" splits nothing.
"""

from __future__ import annotations

import re

from .chapters import Span, add_sources
from .text import Block

# A TOC chapter over this many spine files, as the only chapter, is the whole book under one label.
MANY_FILES = 3
# Share of the book's text above which one chapter holding chapter markers is the book.
MOST_OF_BOOK = 0.5
MARKERS_NEEDED = 2
LONG_PIECE = 100_000  # characters; a voice reads about 50,000 an hour
MARKER_PARAGRAPH = 60  # characters: a paragraph longer than this is prose, not a chapter line
# (○ and 〇 are the zero of "第一二○回", 120, as Gutenberg's 三國志演義 writes it)
CJK_MARKER = re.compile(r"^第[一二三四五六七八九十百千〇○零两0-9０-９]+[回章卷話话](?=$|[\s\u3000:：、.．，,])")
NOTE_SECTIONS = frozenset(["endnotes", "footnotes", "rearnotes", "notes", "z3998:notes", "z3998:footnotes",
                           "z3998:rearnotes", "doc-endnotes"])
WORD_MARKER = re.compile(
    r"^(chapter|chapitre|kapitel|cap[íi]tulo|capitolo|hoofdstuk|rozdzia[łl]|глава)\s+"
    r"([0-9]+|[ivxlcdm]+|[^\W\d_]+)(?=$|[\s.:;,—–-])", re.IGNORECASE)


def is_chapter_marker(block: Block) -> bool:
    """A heading, or a short paragraph, that begins with a chapter marker."""
    text = block.text
    if not block.heading and len(text) > MARKER_PARAGRAPH:
        return False
    return bool(CJK_MARKER.match(text) or WORD_MARKER.match(text))


def is_notes(span: Span) -> bool:
    """A TOC entry's notes section, by its markup."""
    return span.entry is not None and bool(span.types & NOTE_SECTIONS)


def _chars(span: Span) -> int:
    return sum(len(b.text) for b in span.blocks)


def _files(span: Span) -> list[str]:
    files: list[str] = []
    for block in span.blocks:
        doc = getattr(block, "source_doc", None)
        if doc and doc not in files:
            files.append(doc)
    return files


def toc_is_usable(titled: list[tuple[str, Span]]) -> bool:
    """Whether the chapters the TOC gave are the book's chapters (see the module docstring)."""
    from_toc = [span for _, span in titled if span.entry is not None]
    if not from_toc:
        return False
    if len(from_toc) == 1 and len(_files(from_toc[0])) >= MANY_FILES:
        return False
    total = sum(_chars(span) for _, span in titled)
    for _, span in titled:
        if is_notes(span):
            continue
        markers = sum(map(is_chapter_marker, span.blocks))
        if total and _chars(span) >= MOST_OF_BOOK * total and markers >= MARKERS_NEEDED:
            return False
    return True


def split_without_toc(titled: list[tuple[str, Span]], doc_titles: dict[str, str]) -> list[tuple[str, Span]]:
    """The chapters, cut where the text says chapters start (see the module docstring).
    `doc_titles`: spine file → its first heading or <title>, for a cut at a spine file."""
    blocks = [b for _, span in titled if not is_notes(span) for b in span.blocks]
    if sum(map(is_chapter_marker, blocks)) >= MARKERS_NEEDED:
        starts = _marker_starts
    elif any(b.heading for b in blocks):
        top = any(b.heading and b.level <= 3 for b in blocks)
        starts = _heading_starts(3 if top else 6)
    else:
        starts = _file_starts(doc_titles)
    result: list[tuple[str, Span]] = []
    for title, span in titled:
        if is_notes(span):
            result.append((title, span))
            continue
        for piece_title, piece in _cut(title, span, starts(span.blocks, title)):
            result.extend(_cut(piece_title, piece, _length_starts(piece.blocks, piece_title)))
    return result


def _length_starts(blocks: list[Block], title: str) -> dict[int, str]:
    """Cuts into near-equal parts of at most about LONG_PIECE characters, at paragraph ends."""
    total = sum(len(b.text) for b in blocks)
    parts = -(-total // LONG_PIECE)
    if parts < 2:
        return {}
    size = total / parts
    starts: dict[int, str] = {0: f"{title} (1)"}
    done = 0
    for index, block in enumerate(blocks):
        if done >= size * len(starts) and index > 0 and not blocks[index - 1].heading:
            starts[index] = f"{title} ({len(starts) + 1})"
        done += len(block.text)
    return starts


def _cut(title: str, span: Span, starts: dict[int, str]) -> list[tuple[str, Span]]:
    """Split a span before each index in `starts` (index → the new chapter's title)."""
    if not starts:
        return [(title, span)]
    pieces: list[tuple[str, Span]] = []
    current: list[Block] = []
    for index, block in enumerate(span.blocks):
        if index in starts and current:
            pieces.append((title, _piece(span, current)))
            current = []
        if index in starts:
            title = starts[index]
        current.append(block)
    if current:
        pieces.append((title, _piece(span, current)))
    return pieces


def _piece(span: Span, blocks: list[Block]) -> Span:
    piece = Span(None, blocks=blocks)
    files = [doc for doc in dict.fromkeys(getattr(b, "source_doc", None) for b in blocks) if doc]
    add_sources(piece, [s for s in span.sources if s.partition("#")[0] in files] or files or span.sources)
    return piece


def _marker_starts(blocks: list[Block], _title: str) -> dict[int, str]:
    """Each marker starts a chapter titled by it; the heading run right before it comes along."""
    starts: dict[int, str] = {}
    for index, block in enumerate(blocks):
        if is_chapter_marker(block):
            first = index
            while first > 0 and blocks[first - 1].heading and not is_chapter_marker(blocks[first - 1]) \
                    and first - 1 not in starts:
                first -= 1
            starts[first] = block.text
    return starts


def _heading_starts(max_level: int):
    def starts(blocks: list[Block], _title: str) -> dict[int, str]:
        """A run of headings starts a chapter, titled by its first, if one in it ranks high enough."""
        found: dict[int, str] = {}
        run_start = None
        for index, block in enumerate(blocks):
            if not block.heading:
                run_start = None
                continue
            if run_start is None:
                run_start = index
            if block.level <= max_level and run_start not in found:
                found[run_start] = blocks[run_start].text
        return found
    return starts


def _file_starts(doc_titles: dict[str, str]):
    def starts(blocks: list[Block], title: str) -> dict[int, str]:
        """Each spine file starts a chapter, titled by its first heading or <title> (else the
        chapter's); a title several files share gets their numbers."""
        found: dict[int, str] = {}
        previous = None
        for index, block in enumerate(blocks):
            doc = getattr(block, "source_doc", None)
            if doc and doc != previous:
                found[index] = doc_titles.get(doc) or title
                previous = doc
        counts: dict[str, int] = {}
        for name in found.values():
            counts[name] = counts.get(name, 0) + 1
        seen: dict[str, int] = {}
        for index, name in found.items():
            if counts[name] > 1:
                seen[name] = seen.get(name, 0) + 1
                found[index] = f"{name} ({seen[name]})"
        return found
    return starts
