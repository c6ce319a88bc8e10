"""Navigation boilerplate recognised by repetition: link bars ("Parent / Previous / Next topic"),
per-file copyright footers and running headers that a converter prints in every spine file.

The rule, from the structure of the book rather than from words:
* a candidate is a short block (at most SHORT characters) that is not a heading (poems all called
  "Sonnet" are titles) and not verse, and that sits where page furniture sits: in the page's
  <header> or <footer>, a <nav> (or their ARIA roles), or holds a link to another place in the
  book, or is the first or the last block of its file, or is a rights line (©, "all rights
  reserved") right under the file's headings (a stage direction or a dedication there is no
  candidate);
* a candidate text (compared case-folded, whitespace collapsed; for a mostly-link block, its own
  words around its links, so "Next topic: <a>Section 3</a>" and "Next topic: <a>Section 4</a>"
  are one text) that recurs in at least
  MIN_FILES files and in at least half of the files that have text is dropped everywhere it is a
  candidate, and reported once as a Skipped with evidence "repetition" and its total characters.
So a © line in one file is never dropped, a refrain (verse) or a speaker's name (in the middle of
its files) is never a candidate, and a book of two files keeps everything.
"""

from __future__ import annotations

from .chapters import DocStart
from .classify import COPYRIGHT_TEXT
from .model import Skipped
from .text import LINK_HOLE, Block

SHORT = 300  # characters: a link bar or a footer line, not a paragraph of the work
LINK_BAR_WORDS = 6  # a link bar's own words, besides its links
MIN_FILES = 3


def _key(block: Block) -> str:
    """What repeats: the text, or for a block with links its own words around its links."""
    return " ".join((block.skeleton or block.text).casefold().split())


def drop_repeated(stream: list, skipped: list[Skipped]) -> list:
    """The stream without repeated boilerplate blocks; one Skipped per repeated text is added."""
    files: list[list[int]] = []  # per spine file, the stream indices of its blocks
    for i, item in enumerate(stream):
        if isinstance(item, DocStart):
            files.append([])
        elif isinstance(item, Block) and files:
            files[-1].append(i)
    text_files = [f for f in files if f]
    if len(text_files) < MIN_FILES:
        return stream
    found: dict[str, list[int]] = {}  # key → stream indices of its candidate blocks
    in_files: dict[str, set[int]] = {}
    for number, indices in enumerate(text_files):
        # (a rights line right under the file's title stands where a running header would)
        under_title = next((i for i in indices if not stream[i].heading), None)
        for position, i in enumerate(indices):
            block = stream[i]
            at_edge = position in (0, len(indices) - 1) or (i == under_title and bool(COPYRIGHT_TEXT.search(block.text)))
            if _candidate(block, at_edge):
                key = _key(block)
                found.setdefault(key, []).append(i)
                in_files.setdefault(key, set()).add(number)
    drop: set[int] = set()
    for key, indices in found.items():
        count = len(in_files[key])
        if count >= MIN_FILES and 2 * count >= len(text_files):
            drop.update(indices)
            first = stream[indices[0]]
            same = all(stream[i].text == first.text for i in indices)
            text = first.text if same or not first.skeleton else first.skeleton.replace(LINK_HOLE, "…")
            skipped.append(Skipped(
                text if len(text) <= 60 else text[:59] + "…",
                f"repeated text ({len(indices)} times, in {count} of {len(text_files)} files)",
                chars=sum(len(stream[i].text) for i in indices), evidence="repetition", preview=text))
    if not drop:
        return stream
    return [item for i, item in enumerate(stream) if i not in drop]


def _candidate(block: Block, at_edge: bool) -> bool:
    if len(block.text) > SHORT or block.verse or block.in_note or block.heading:
        return False
    # A block with links is a link bar where its own words are a few labels ("Next topic:"); with a
    # sentence of its own around them it is text (a specification's list of its companion documents).
    link_bar = bool(block.skeleton) and len(block.skeleton.replace(LINK_HOLE, " ").split()) <= LINK_BAR_WORDS
    return block.furniture or link_bar or at_edge
