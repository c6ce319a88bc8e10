"""The read-along book (`--readalong`): BOOK.readalong.epub beside the M4B, an EPUB 3 with media
overlays, so a reader highlights each sentence while it is read.

What it is made of:
- The source EPUB, entry for entry. An EPUB 2 is upgraded: package version 3.0, a navigation
  document made from its NCX (the NCX stays, for old readers), `dcterms:modified`, and the OPF 2
  attributes EPUB 3 no longer has (opf:role, opf:file-as, opf:scheme, opf:event, xsi:type) moved
  into refining `meta`s or dropped; its XHTML documents get the HTML5 doctype.
- In each content document a chapter was read from, each sentence of the book (the store's
  sources: the book's own words, before normalisation) is found among the document's text, in
  order, by its letters and digits, and wrapped in a `span` with an id (an element that holds
  exactly the sentence, a heading for example, gets the id itself). Nothing else in the markup
  changes, so `xml:lang` on a foreign passage stays where it was. A sentence that cannot be
  wrapped without breaking an element apart (it starts inside <em> and ends outside it) is joined
  to the next sentence of its paragraph; one that is not found at all has no highlight, and the
  warning counts them.
- One SMIL 3.0 document per such content document (the EPUB profile's namespace
  http://www.w3.org/ns/SMIL), one `par` per sentence, its `audio` a clip of the chapter's file.
- One AAC-in-MP4 file (`audio/mp4`, a core media type) per chapter, encoded from the same stored
  PCM as the M4B, through the same gain and limiter (levels.filter_chain with the M4B's gain), so
  clipBegin/clipEnd are the sentence's sample positions in it.
- `media:duration` for each overlay and for the book (the sum of the clips, to the millisecond),
  `media:active-class` and a stylesheet that gives the playing sentence a background.
Parts of the book that are not read (skipped front matter, notes under --notes skip) get no overlay.
- `--readalong words`: inside each sentence's element, each word the voice said when it starts
  (words.py: the book's words matched to the spoken ones) is wrapped in a span with an id too,
  and the sentence's `par` becomes a `seq` (epub:textref the sentence) of one `par` per word,
  whose clips tile the sentence's clip: a word plays until the next one starts.

The file appears atomically, as the M4B does; a book that cannot be made into one gets one line
(ReadalongError, an InputError) and nothing is written. Same store, same source: the same bytes
(fixed zip timestamps, `dcterms:modified` from the source file's time, ffmpeg in bitexact mode).
"""

from __future__ import annotations

import io
import os
import posixpath
import re
import subprocess
import tempfile
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from ..book.text import is_unread
from ..errors import InputError
from . import levels
from .ffmpeg import ffmpeg_exe
from .html5 import dropped_line, upgrade_markup
from .m4b import AudioChapter, _pcm_chunks, _run_ffmpeg
from .timings import ChapterTiming, Cue

XHTML = "http://www.w3.org/1999/xhtml"
OPF = "http://www.idpf.org/2007/opf"
DC = "http://purl.org/dc/elements/1.1/"
NCX = "http://www.daisy.org/z3986/2005/ncx/"
EPUB_NS = "http://www.idpf.org/2007/ops"
SMIL = "http://www.w3.org/ns/SMIL"
CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

ACTIVE_CLASS = "epub2audio-active"
STYLESHEET = f".{ACTIVE_CLASS} {{ background-color: #ffe98a; color: #000; }}\n"
FOLDER = "readalong"  # beside the package document: overlays, audio and the stylesheet
ZIP_TIME = (2000, 1, 1, 0, 0, 0)  # every entry's timestamp: the same book gives the same bytes
AUDIO_BITRATE = "64k"

# What a span may hold: phrasing content (HTML's phrasing elements that EPUB books use).
PHRASING = frozenset(
    "a abbr b bdi bdo br cite code data del dfn em i img ins kbd mark q ruby s samp small span strong "
    "sub sup time u var wbr tt big font".split()
)


class ReadalongError(InputError):
    """The read-along book cannot be made from this EPUB; nothing was written."""


@dataclass
class ReadalongResult:
    path: Path
    sentences: int  # sentences with a highlight (pars)
    unplaced: int  # sentences said but not found in the documents
    warnings: list[str] = field(default_factory=list)


def readalong_path(m4b: Path) -> Path:
    return Path(m4b).with_suffix(".readalong.epub")


# ------------------------------------------------------------------------------------------
# Reading the source EPUB


@dataclass
class _Source:
    entries: dict[str, bytes]  # zip name → data, in the source's order
    opf_name: str
    opf: etree._Element

    @property
    def base(self) -> str:
        return posixpath.dirname(self.opf_name)

    def path(self, href: str) -> str:
        """A manifest href (relative to the package document) as a zip name."""
        from urllib.parse import unquote

        return posixpath.normpath(posixpath.join(self.base, unquote(href.split("#")[0])))


def _read_source(epub: Path) -> _Source:
    name = epub.name
    try:
        with zipfile.ZipFile(epub) as z:
            entries = {info.filename: z.read(info) for info in z.infolist() if not info.is_dir()}
    except (OSError, zipfile.BadZipFile, RuntimeError, NotImplementedError) as error:
        raise ReadalongError(f"{name}: cannot make a read-along book: the EPUB cannot be read ({error})") from None
    if "META-INF/encryption.xml" in entries:
        raise ReadalongError(f"{name}: cannot make a read-along book: the EPUB has encrypted parts")
    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    try:
        container = etree.fromstring(entries["META-INF/container.xml"], parser)
        rootfile = container.find(f".//{{{CONTAINER}}}rootfile")
        opf_name = rootfile.get("full-path")
        opf = etree.fromstring(entries[opf_name], parser)
    except (KeyError, AttributeError, TypeError, etree.XMLSyntaxError) as error:
        raise ReadalongError(f"{name}: cannot make a read-along book: its package document cannot be read "
                             f"({type(error).__name__})") from None
    return _Source(entries, opf_name, opf)


def _items(opf) -> list[etree._Element]:
    return opf.findall(f"{{{OPF}}}manifest/{{{OPF}}}item")


# ------------------------------------------------------------------------------------------
# Finding the sentences in a document


def _letters(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


class _DocText:
    """The read text of a document's body, as a string of letters and digits that points back at
    the text node (an element's .text or .tail) and offset each one came from."""

    def __init__(self, root, *, notes: bool = False, within=None):
        """notes: also the text the reading flow leaves out (a footnote <aside>), where a note read
        inline comes from; markers and page numbers are skipped all the same. within: the text of
        that element only (a sentence's, to find its words in), not the body's."""
        self.notes = notes
        self.key: list[str] = []
        self.where: list[tuple[etree._Element, str, int]] = []
        body = root.find(f"{{{XHTML}}}body") if within is None else within
        if body is not None:
            self._walk(body)
        self.text = "".join(self.key)

    def _add(self, node, kind: str, text: str | None) -> None:
        for offset, ch in enumerate(text or ""):
            if ch.isalnum():
                for folded in ch.casefold():
                    if folded.isalnum():
                        self.key.append(folded)
                        self.where.append((node, kind, offset))

    def _walk(self, el) -> None:
        if not isinstance(el.tag, str):
            return
        if is_unread(el) and not (self.notes and _local(el) == "aside"):
            return
        self._add(el, "text", el.text)
        for child in el:
            self._walk(child)
            self._add(child, "tail", child.tail)


def _start_chain(node, kind: str, offset: int) -> list[tuple]:
    """The equivalent places a range may start: (container, spec), deepest first."""
    if kind == "tail":
        return [(node.getparent(), ("tail", node, offset))]
    chain = [(node, ("text", offset))]
    if (node.text or "")[:offset].strip():
        return chain
    x = node
    while (parent := x.getparent()) is not None:
        chain.append((parent, ("before", x)))
        if parent.index(x) != 0 or (parent.text or "").strip():
            break
        x = parent
    return chain


def _end_chain(node, kind: str, offset: int) -> list[tuple]:
    """The equivalent places a range may end (exclusive): (container, spec), deepest first."""
    if kind == "text":
        chain = [(node, ("text", offset))]
        rest_empty = not (node.text or "")[offset:].strip() and len(node) == 0
        x = node
    else:
        chain = [(node.getparent(), ("tail", node, offset))]
        rest_empty = not (node.tail or "")[offset:].strip() and node.getnext() is None
        x = node.getparent()
    while rest_empty and (parent := x.getparent()) is not None:
        chain.append((parent, ("after", x)))
        rest_empty = not (x.tail or "").strip() and x.getnext() is None
        x = parent
    return chain


def _end_offset(node, kind: str, offset: int) -> int:
    """Just after the sentence's last letter: its closing punctuation and quotes come with it."""
    text = (node.text if kind == "text" else node.tail) or ""
    end = offset + 1
    while end < len(text) and not text[end].isspace() and not text[end].isalnum():
        end += 1
    return end


def _plan_wrap(start_chain, end_chain):
    """(container, start spec, end spec) for the deepest container both ends share where the
    range can be wrapped in one span, or None."""
    ends = {id(container): spec for container, spec in end_chain}
    for container, start in start_chain:  # an element that holds exactly the sentence gets the id
        end = ends.get(id(container))
        if end is not None and start[0] == "before" and end[0] == "after" and start[1] is end[1]:
            return container, start, end
    for container, start in start_chain:
        end = ends.get(id(container))
        if end is None:
            continue
        if _local(container) in ("html", "head"):
            return None
        moved = _moved(container, start, end)
        if moved is None or any(isinstance(c.tag, str) and _local(c) not in PHRASING for c in moved):
            continue
        return container, start, end
    return None


def _moved(container, start, end) -> list | None:
    children = list(container)
    first = 0 if start[0] == "text" else children.index(start[1]) + (start[0] == "tail")
    last = -1 if end[0] == "text" else children.index(end[1])
    if end[0] == "text" and start[0] != "text":
        return None
    if last < first - 1:
        return None
    return children[first:last + 1]


def _local(el) -> str:
    return etree.QName(el).localname if isinstance(el.tag, str) else ""


def _wrap(container, start, end, new_id: str, ids: set[str]):
    """Apply a planned wrap; the element that holds the sentence (its id: the one it had, or new_id)."""
    if start[0] == "before" and end[0] == "after" and start[1] is end[1]:
        element = start[1]
        if not element.get("id"):
            element.set("id", new_id)
        return element
    moved = _moved(container, start, end)
    span = etree.Element(f"{{{XHTML}}}span" if container.tag.startswith("{") else "span")
    span.set("id", new_id)
    if start[0] == "text":
        holder_text = container.text or ""
        first = 0
    elif start[0] == "tail":
        holder_text = start[1].tail or ""
        first = list(container).index(start[1]) + 1
    else:
        holder_text = None
        first = list(container).index(start[1])
    same = (start[0], start[1] if start[0] == "tail" else None) == (end[0], end[1] if end[0] == "tail" else None) \
        and start[0] in ("text", "tail")
    if same:
        a, b = start[-1], end[-1]
        span.text, span.tail = holder_text[a:b], holder_text[b:]
        if start[0] == "text":
            container.text = holder_text[:a]
        else:
            start[1].tail = holder_text[:a]
        container.insert(first, span)
        return span
    if holder_text is not None:
        span.text = holder_text[start[-1]:]
        if start[0] == "text":
            container.text = holder_text[:start[-1]]
        else:
            start[1].tail = holder_text[:start[-1]]
    last = moved[-1]
    if end[0] == "tail":
        tail = last.tail or ""
        last.tail, span.tail = tail[:end[-1]], tail[end[-1]:]
    else:  # "after"
        span.tail, last.tail = last.tail, None
    for child in moved:
        span.append(child)
    container.insert(first, span)
    return span


@dataclass
class _Par:
    chapter: int
    doc: str  # zip name of the content document
    fragment: str
    clip_begin: int  # samples from the chapter's start
    clip_end: int


SHORT_KEY = 8  # letters and digits
NEAR_LETTERS = 40


class _Document:
    def __init__(self, name: str, data: bytes):
        self.name = name
        parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
        self.root = etree.fromstring(data, parser)  # XMLSyntaxError: the caller leaves it alone
        self.tree = self.root.getroottree()
        self.text = _DocText(self.root)
        self.cursor = 0
        self.used: list[tuple[int, int]] = []
        self._notes: _DocText | None = None
        self.notes_used: list[tuple[int, int]] = []
        self._order: dict | None = None
        self.ids = {el.get("id") for el in self.root.iter() if isinstance(el.tag, str) and el.get("id")}
        self.wraps: list[tuple[int, tuple, str]] = []  # (key start, plan, new id)
        self.changed = False

    def find(self, key: str, first: bool = False) -> tuple[int, int] | None:
        """Where `key` is in the document's letters: after the last sentence found, else anywhere
        it does not overlap one (a note read inline comes from elsewhere in the document)."""
        if not key:
            return None
        # A short sentence ("7.", "ii.") is only looked for just ahead: anywhere else it would
        # match inside other words and carry the cursor away from where the reading is. A
        # chapter's first sentence (its title) is looked for anywhere ahead.
        near = len(key) < SHORT_KEY and not first
        at = self.text.text.find(key, self.cursor, self.cursor + NEAR_LETTERS + len(key) if near else None)
        if at >= 0:
            self.cursor = at + len(key)
            return at, at + len(key)
        if near:
            return None
        at = self.text.text.find(key)
        while at >= 0:
            if all(at + len(key) <= a or b <= at for a, b in self.used):
                return at, at + len(key)
            at = self.text.text.find(key, at + 1)
        return None

    def start_at(self, fragment: str) -> None:
        """A chapter that starts at an element (a TOC #fragment): read on from there."""
        target = self.root.xpath("//*[@id=$id]", id=fragment) if fragment else []
        if not target:
            return
        if self._order is None:
            self._order = {el: i for i, el in enumerate(self.root.iter())}
        first = self._order[target[0]]
        for at in range(self.cursor, len(self.text.where)):
            if self.position(self.text, at)[0] >= first:
                self.cursor = at
                return

    def position(self, text: _DocText, at: int) -> tuple[float, int]:
        """Where the letter `at` of a text map is in document order (wraps are applied last first)."""
        if self._order is None:
            self._order = {el: i for i, el in enumerate(self.root.iter())}
        node, kind, offset = text.where[at]
        if kind == "text":
            return self._order[node], offset
        last = node
        for last in node.iter():
            pass
        return self._order[last] + 0.5, offset

    @property
    def notes(self) -> _DocText:
        if self._notes is None:
            self._notes = _DocText(self.root, notes=True)
        return self._notes

    def find_note(self, key: str, after: int = 0) -> tuple[int, int] | None:
        """Where a note read inline is, anywhere in the document after `after` (its own place is
        elsewhere than the reading flow's)."""
        at = self.notes.text.find(key, after) if key else -1
        while at >= 0:
            if all(at + len(key) <= a or b <= at for a, b in self.notes_used):
                return at, at + len(key)
            at = self.notes.text.find(key, at + 1)
        return None

    def plan(self, span: tuple[int, int], text: _DocText | None = None):
        text = text or self.text
        a, b = span
        node, kind, offset = text.where[a]
        start = _start_chain(node, kind, offset)
        node, kind, offset = text.where[b - 1]
        end = _end_chain(node, kind, _end_offset(node, kind, offset))
        return _plan_wrap(start, end)

    def plan_within(self, element, text: _DocText, span: tuple[int, int]):
        """A wrap plan for letters `span` of `text` (the text of `element`) that stays inside it."""
        inside = {id(el) for el in element.iter()}
        a, b = span
        node, kind, offset = text.where[a]
        start = [c for c in _start_chain(node, kind, offset) if id(c[0]) in inside]
        node, kind, offset = text.where[b - 1]
        end = [c for c in _end_chain(node, kind, _end_offset(node, kind, offset)) if id(c[0]) in inside]
        return _plan_wrap(start, end)

    def new_id(self, chapter: int) -> str:
        n = len(self.ids)
        while (candidate := f"ra{chapter + 1}-{n}") in self.ids:
            n += 1
        self.ids.add(candidate)
        return candidate


# How --notes inline and chapter-end introduce a note (book/notes.py): "Note: …", "Note 2: …".
NOTE_INTRO = re.compile(r"^Note(?: \d+)?: ")


def _note_text(group: list[Cue], continued: bool) -> str | None:
    """A note's sentences as they are written: without the "Note: " we put before its first
    one. None: the group is not (part of) a note."""
    text = " ".join(c.text for c in group)
    if continued:
        return text
    intro = NOTE_INTRO.match(text)
    return text[intro.end():] if intro else None


def _place_sentences(timing: ChapterTiming, documents: dict[str, _Document], source: _Source,
                     chapter_start: int, all_docs, word_begins=None) -> tuple[list[tuple], int]:
    """Find each cue of the chapter in its documents: (document, document position, wrap plan,
    id, clip begin, clip end, words) each, and how many cues could not be placed. words: with
    word_begins(cues, text) (--readalong words), the (first letter, end letter, clip begin) of
    each timed word of the sentence, its letters counted in the sentence's key; else None.

    A note read inline ("Note: …", book/notes.py) is not where the reading flow is: it is looked
    for in the text of the chapter's documents with their footnote asides, then in the book's
    other documents (a notes file), and the rest of its paragraph after it."""
    docs = [documents[n] for n in dict.fromkeys(source.path(s) for s in timing.sources) if n in documents]
    for src in timing.sources[:1]:
        if "#" in src and source.path(src) in documents:
            documents[source.path(src)].start_at(src.split("#", 1)[1])
    placed, lost = [], 0
    cues = list(timing.cues)
    note: tuple[_Document, int, tuple] | None = None  # (document, end in its note text, paragraph)

    def in_flow(group):
        said = " ".join(c.text for c in group)
        key = _letters(said)
        for doc in docs:
            saved = doc.cursor
            span = doc.find(key, first=group[0] is cues[0])
            if span is None:
                continue
            plan = doc.plan(span)
            if plan is not None:
                return doc, span, plan, doc.text, said
            doc.cursor = saved
        return None

    def as_note(group):
        continued = note is not None and group[0].place is not None and group[0].place[0] == note[2]
        said = _note_text(group, continued)
        key = _letters(said) if said is not None else None
        if not key:
            return None
        where = [note[0]] if continued else [*docs, *(d for d in all_docs() if d not in docs)]
        for doc in where:
            span = doc.find_note(key, note[1] if continued else 0)
            if span is not None:
                plan = doc.plan(span, doc.notes)
                if plan is not None:
                    return doc, span, plan, doc.notes, said
        return None

    i = 0
    while i < len(cues):
        group, result = [cues[i]], None
        while True:
            result = in_flow(group) or as_note(group)
            if result is not None or not _joinable(group[-1], cues, i + len(group)):
                break
            group.append(cues[i + len(group)])  # join the next sentence of the paragraph and retry
        i += len(group)
        if result is None:
            lost += len(group)
            note = None
            continue
        doc, span, plan, text, said = result
        if text is doc.text:
            doc.used.append(span)
            note = None
        else:
            doc.notes_used.append(span)
            note = (doc, span[1], group[-1].place[0] if group[-1].place else None)
        words = None
        if word_begins is not None:
            words = [(_letter_count(said, a), _letter_count(said, b), begin - chapter_start)
                     for a, b, begin in word_begins(group, said)]
        placed.append((doc, doc.position(text, span[0]), plan, doc.new_id(timing.index),
                       group[0].start - chapter_start, group[-1].end - chapter_start,
                       (text.notes, _letters(said), words)))
    return placed, lost


def _letter_count(text: str, end: int) -> int:
    """How many of _letters(text) come from text[:end]."""
    return len(_letters(text[:end]))


def _joinable(last: Cue, cues: list[Cue], following: int) -> bool:
    return (following < len(cues) and last.place is not None and cues[following].place is not None
            and cues[following].place[0] == last.place[0])


# ------------------------------------------------------------------------------------------
# Upgrading an EPUB 2 package


def _opf_version(opf) -> str:
    return (opf.get("version") or "2.0").strip()


def _modified(epub: Path) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epub.stat().st_mtime)))


def _upgrade_metadata(metadata, modified: str) -> None:
    opf_attr = lambda name: f"{{{OPF}}}{name}"  # noqa: E731
    dates = metadata.findall(f"{{{DC}}}date")
    keep = next((d for d in dates if d.get(opf_attr("event")) == "publication"), dates[0] if dates else None)
    for date in dates:
        if date is not keep:
            metadata.remove(date)
    counter = 0
    for el in list(metadata):
        if not isinstance(el.tag, str) or not el.tag.startswith(f"{{{DC}}}"):
            continue
        role, file_as = el.attrib.pop(opf_attr("role"), None), el.attrib.pop(opf_attr("file-as"), None)
        for name in ("scheme", "event"):
            el.attrib.pop(opf_attr(name), None)
        el.attrib.pop(f"{{{XSI}}}type", None)
        if role or file_as:
            if not el.get("id"):
                counter += 1
                el.set("id", f"ra-meta-{counter}")
            for prop, value, scheme in (("role", role, "marc:relators"), ("file-as", file_as, None)):
                if value:
                    meta = etree.SubElement(metadata, f"{{{OPF}}}meta", refines=f"#{el.get('id')}", property=prop)
                    if scheme:
                        meta.set("scheme", scheme)
                    meta.text = value
    for meta in metadata.findall(f"{{{OPF}}}meta[@property='dcterms:modified']"):
        metadata.remove(meta)
    meta = etree.SubElement(metadata, f"{{{OPF}}}meta", property="dcterms:modified")
    meta.text = modified


def _nav_from_ncx(source: _Source, title: str, language: str,
                  chapters: list[tuple[str, str]] = ()) -> tuple[str, bytes]:
    """A navigation document (zip name, bytes) with the NCX's table of contents; a book with no
    NCX gets the chapters we read instead ((title, manifest href) each, in order)."""
    spine = source.opf.find(f"{{{OPF}}}spine")
    items = {i.get("id"): i for i in _items(source.opf)}
    ncx_item = items.get(spine.get("toc") if spine is not None else None)
    if ncx_item is None:
        ncx_item = next((i for i in _items(source.opf) if i.get("media-type") == "application/x-dtbncx+xml"), None)
    ncx_name = source.path(ncx_item.get("href")) if ncx_item is not None else None
    nav_name = posixpath.join(source.base, f"{FOLDER}-nav.xhtml")  # beside the package document
    landmarks = _landmarks_from_guide(source)
    if ncx_name not in source.entries:
        if not chapters:
            raise ReadalongError("it is an EPUB 2 without an NCX table of contents, so it cannot be upgraded to EPUB 3")
        return nav_name, _nav_document(title, language, [(label or "Untitled", href, []) for label, href in chapters],
                                       landmarks)
    try:
        ncx = etree.fromstring(source.entries[ncx_name], etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError:
        raise ReadalongError("its NCX table of contents cannot be read, so it cannot be upgraded to EPUB 3") from None

    def points(parent) -> list:
        out = []
        for point in parent.findall(f"{{{NCX}}}navPoint"):
            label = " ".join("".join(point.find(f"{{{NCX}}}navLabel").itertext()).split()) \
                if point.find(f"{{{NCX}}}navLabel") is not None else ""
            content = point.find(f"{{{NCX}}}content")
            src = content.get("src") if content is not None else None
            if src:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(ncx_name), src))
                href = posixpath.relpath(target.split("#")[0], posixpath.dirname(nav_name) or ".")
                href += ("#" + src.split("#", 1)[1]) if "#" in src else ""
            else:
                href = None
            out.append((label or "Untitled", href, points(point)))
        return out

    entries = points(ncx.find(f"{{{NCX}}}navMap")) if ncx.find(f"{{{NCX}}}navMap") is not None else []
    entries = [e for e in entries if e[1]] or []
    if not entries:
        raise ReadalongError("its NCX table of contents is empty, so it cannot be upgraded to EPUB 3")
    return nav_name, _nav_document(title, language, entries, landmarks)


# EPUB 2 guide reference types → EPUB 3 landmarks' epub:type (the structural semantics vocabulary).
GUIDE_TYPES = {"cover": "cover", "title-page": "titlepage", "toc": "toc", "text": "bodymatter", "index": "index",
               "glossary": "glossary", "acknowledgements": "acknowledgments", "bibliography": "bibliography",
               "colophon": "colophon", "copyright-page": "copyright-page", "dedication": "dedication",
               "epigraph": "epigraph", "foreword": "foreword", "loi": "loi", "lot": "lot", "notes": "endnotes",
               "preface": "preface"}


def _landmarks_from_guide(source: _Source) -> list[tuple[str, str, str]]:
    """The EPUB 2 guide as EPUB 3 landmarks: (epub:type, href beside the package document, label).
    They are also the links that reach a non-linear cover page, which EPUB 3 requires."""
    out = []
    for reference in source.opf.findall(f"{{{OPF}}}guide/{{{OPF}}}reference"):
        kind, href = GUIDE_TYPES.get((reference.get("type") or "").lower()), reference.get("href")
        if kind and href and source.path(href) in source.entries:
            out.append((kind, href, (reference.get("title") or "").strip() or kind))
    return out


def _nav_document(title: str, language: str, entries: list, landmarks: list = ()) -> bytes:
    """entries: (label, href relative to the navigation document or None, children) each;
    landmarks: (epub:type, href, label) each, in a hidden landmarks nav."""
    html = etree.Element(f"{{{XHTML}}}html", nsmap={None: XHTML, "epub": EPUB_NS})
    if language:
        html.set(XML_LANG, language)
        html.set("lang", language)
    head = etree.SubElement(html, f"{{{XHTML}}}head")
    etree.SubElement(head, f"{{{XHTML}}}title").text = title or "Contents"
    body = etree.SubElement(html, f"{{{XHTML}}}body")
    nav = etree.SubElement(body, f"{{{XHTML}}}nav", id="toc")
    nav.set(f"{{{EPUB_NS}}}type", "toc")
    etree.SubElement(nav, f"{{{XHTML}}}h1").text = "Contents"

    def add(parent, entries) -> None:
        ol = etree.SubElement(parent, f"{{{XHTML}}}ol")
        for label, href, children in entries:
            li = etree.SubElement(ol, f"{{{XHTML}}}li")
            if href:
                etree.SubElement(li, f"{{{XHTML}}}a", href=href).text = label
            else:
                etree.SubElement(li, f"{{{XHTML}}}span").text = label
            children = [c for c in children]
            if children:
                add(li, children)

    add(nav, entries)
    if landmarks:
        marks = etree.SubElement(body, f"{{{XHTML}}}nav", hidden="hidden")
        marks.set(f"{{{EPUB_NS}}}type", "landmarks")
        etree.SubElement(marks, f"{{{XHTML}}}h2").text = "Landmarks"
        ol = etree.SubElement(marks, f"{{{XHTML}}}ol")
        for kind, href, label in landmarks:
            a = etree.SubElement(etree.SubElement(ol, f"{{{XHTML}}}li"), f"{{{XHTML}}}a", href=href)
            a.set(f"{{{EPUB_NS}}}type", kind)
            a.text = label
    return _serialise(html.getroottree(), html5=True)


def _serialise(tree, html5: bool) -> bytes:
    doctype = "<!DOCTYPE html>" if html5 else None
    return etree.tostring(tree, xml_declaration=True, encoding="utf-8", doctype=doctype)


# ------------------------------------------------------------------------------------------
# Audio, overlays, package


def _clock(samples: int, sample_rate: int) -> tuple[str, int]:
    ms = (samples * 1000 + sample_rate // 2) // sample_rate
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours}:{minutes:02d}:{seconds:02d}.{millis:03d}", ms


def _clock_ms(ms: int) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours}:{minutes:02d}:{seconds:02d}.{millis:03d}"


def _encode_chapter(parts: list, sample_rate: int, gain_db: float, work: Path, number: int) -> bytes:
    chapter = AudioChapter(title=str(number), parts=parts)
    length = sum(p if isinstance(p, int) else _frames(p) for p in parts)
    out = work / f"chapter-{number}.m4a"
    cmd = [ffmpeg_exe(), "-hide_banner", "-nostats", "-loglevel", "error", "-y",
           "-f", "s16le", "-ar", str(sample_rate), "-ac", "1", "-i", "pipe:0",
           "-af", levels.filter_chain(gain_db), "-c:a", "aac", "-b:a", AUDIO_BITRATE, "-ac", "1",
           "-ar", str(sample_rate), "-map_metadata", "-1", "-fflags", "+bitexact", "-flags:a", "+bitexact",
           "-f", "mp4", "-movflags", "+faststart", str(out)]
    _run_ffmpeg(cmd, _pcm_chunks([chapter], [length]), f"encoding the read-along audio of chapter {number}")
    return out.read_bytes()


def _frames(path: Path) -> int:
    import wave

    with wave.open(os.fspath(path), "rb") as w:
        return w.getnframes()


def _smil(pars: list[tuple]) -> bytes:
    """pars: (text src, audio src, clipBegin, clipEnd), relative to the SMIL document, or, for a
    sentence read word by word, (its text src, [such a par per word]): a `seq` for the sentence."""
    smil = etree.Element(f"{{{SMIL}}}smil", nsmap={None: SMIL, "epub": EPUB_NS}, version="3.0")
    body = etree.SubElement(smil, f"{{{SMIL}}}body")
    n = 0
    for entry in pars:
        parent = body
        if len(entry) == 2:  # a sentence, word by word
            parent = etree.SubElement(body, f"{{{SMIL}}}seq")
            parent.set(f"{{{EPUB_NS}}}textref", entry[0])
            inner = entry[1]
        else:
            inner = [entry]
        for text, audio, begin, end in inner:
            n += 1
            par = etree.SubElement(parent, f"{{{SMIL}}}par", id=f"par{n}")
            etree.SubElement(par, f"{{{SMIL}}}text", src=text)
            etree.SubElement(par, f"{{{SMIL}}}audio", src=audio, clipBegin=begin, clipEnd=end)
    return etree.tostring(smil, xml_declaration=True, encoding="utf-8", pretty_print=True)


def _wrap_words(doc: _Document, element, notes: bool, key: str, words: list[tuple[int, int, int]]) -> list[tuple[str, int]]:
    """Wrap each timed word group of the sentence held by `element` in a span with an id (a
    word that cannot be wrapped alone, "<em>fa</em>mished", is joined to the next): (id, clip
    begin) of each, or [] where the sentence is read as one (a one-word sentence, or its letters
    are not the ones its words were counted in)."""
    text = _DocText(doc.root, notes=notes, within=element)
    if not words or text.text != key:
        return []
    groups, plans = [], []
    k = 0
    while k < len(words):
        first, begin = words[k][0], words[k][2]
        end_k = k
        while True:
            end = words[end_k + 1][0] if end_k + 1 < len(words) else len(text.text)
            last_letter = words[end_k][1]
            plan = doc.plan_within(element, text, (first, last_letter)) if last_letter > first else None
            if plan is not None or end_k + 1 >= len(words):
                break
            end_k += 1
        if plan is not None:
            groups.append(begin)
            plans.append(plan)
        k = end_k + 1
    if len(plans) < 2:
        return []
    base = element.get("id")
    ids = []
    for n in range(len(plans)):
        word_id = f"{base}-w{n + 1}"
        while word_id in doc.ids:
            word_id += "x"
        doc.ids.add(word_id)
        ids.append(word_id)
    made = [_wrap(*plan, word_id, doc.ids).get("id") for plan, word_id in reversed(list(zip(plans, ids)))]
    return list(zip(reversed(made), groups))


def _rel(from_name: str, to_name: str) -> str:
    return posixpath.relpath(to_name, posixpath.dirname(from_name) or ".")


def _add_stylesheet(doc: _Document, css_name: str) -> None:
    head = doc.root.find(f"{{{XHTML}}}head")
    if head is None:
        head = etree.Element(f"{{{XHTML}}}head")
        doc.root.insert(0, head)
    etree.SubElement(head, f"{{{XHTML}}}link", rel="stylesheet", type="text/css", href=_rel(doc.name, css_name))


def write_readalong(epub: Path, m4b: Path, timings: list[ChapterTiming], store, sample_rate: int, gain_db: float,
                    *, language: str = "", narrator: str = "", word_begins=None) -> ReadalongResult:
    """word_begins(cues, text): (first char, end char, first sample) of each timed word group of
    a sentence's written text (words.py), for `--readalong words`; None: sentences only."""
    epub, out = Path(epub), readalong_path(m4b)
    source = _read_source(epub)
    try:
        data = _build(epub, source, timings, store, sample_rate, gain_db, language, narrator, word_begins)
    except ReadalongError as error:
        if str(error).startswith(epub.name):
            raise
        raise ReadalongError(f"{epub.name}: cannot make a read-along book: {error}") from None
    archive, result = data
    _write_atomically(out, archive)
    result.path = out
    return result


def _build(epub: Path, source: _Source, timings, store, sample_rate, gain_db, language, narrator, word_begins=None):
    opf = source.opf
    version = _opf_version(opf)
    upgrade = not version.startswith("3")
    if not version[:1] in ("2", "3"):
        raise ReadalongError(f"its package version {version!r} is neither EPUB 2 nor EPUB 3")
    replaced: dict[str, bytes] = {}
    added: dict[str, bytes] = {}
    manifest = opf.find(f"{{{OPF}}}manifest")
    metadata = opf.find(f"{{{OPF}}}metadata")
    if manifest is None or metadata is None:
        raise ReadalongError("its package document has no manifest or no metadata")
    items_by_path = {source.path(i.get("href", "")): i for i in _items(opf)}
    taken_ids = {i.get("id") for i in _items(opf)}

    def item_id(stem: str) -> str:
        n = 1
        while f"{stem}{n}" in taken_ids:
            n += 1
        taken_ids.add(f"{stem}{n}")
        return f"{stem}{n}"

    # the content documents the chapters were read from
    documents: dict[str, _Document] = {}
    warnings: list[str] = []
    dropped: Counter = Counter()  # HTML 4 markup the upgrade had no HTML5 form for
    for timing in timings:
        for src in timing.sources:
            name = source.path(src)
            if name in documents or name not in source.entries:
                continue
            try:
                documents[name] = _Document(name, source.entries[name])
            except etree.XMLSyntaxError:
                warnings.append(f"read-along: {src.split('#')[0]} is not well-formed XHTML; it has no highlights")
    # sentences → places, then wraps (last first: a wrap only moves text after its start)
    per_doc: dict[str, list] = {}
    lost_total = 0
    def all_docs():
        """Every XHTML document of the book, in manifest order, read when first asked for."""
        for name, item in items_by_path.items():
            if item.get("media-type") != "application/xhtml+xml" or name not in source.entries:
                continue
            if name not in documents and name not in unreadable:
                try:
                    documents[name] = _Document(name, source.entries[name])
                except etree.XMLSyntaxError:
                    unreadable.add(name)
                    continue
            if name in documents:
                yield documents[name]

    unreadable: set[str] = set()
    for timing in timings:
        placed, lost = _place_sentences(timing, documents, source, timing.start, all_docs, word_begins)
        lost_total += lost
        for doc, key_start, plan, new_id, begin, end, words in placed:
            per_doc.setdefault(doc.name, []).append((timing.index, key_start, plan, new_id, begin, end, words))
    fragments: dict[tuple[str, str], str] = {}
    word_pars: dict[tuple[str, str], list[tuple[str, int]]] = {}  # sentence → (word id, clip begin) each
    for name, placed in per_doc.items():
        doc = documents[name]
        for chapter, _, plan, new_id, _, _, (notes, key, words) in sorted(placed, key=lambda p: p[1], reverse=True):
            element = _wrap(*plan, new_id, doc.ids)
            fragments[(name, new_id)] = element.get("id")
            if words:
                word_pars[(name, new_id)] = _wrap_words(doc, element, notes, key, words)

    css_name = posixpath.join(source.base, FOLDER, "readalong.css")
    audio_names = {t.index: posixpath.join(source.base, FOLDER, f"chapter-{t.index + 1:03d}.m4a") for t in timings}
    layout = {index: parts for index, _, parts in store.layout(sample_rate)}
    overlay_ms: dict[str, int] = {}
    used_chapters = {chapter for placed in per_doc.values() for chapter, *_ in placed}
    with tempfile.TemporaryDirectory(prefix="epub2audio-readalong-") as work:
        for timing in timings:
            if timing.index not in used_chapters:
                continue
            parts = [p for key, pause in layout[timing.index] for p in (store.audio_path(key), pause)]
            added[audio_names[timing.index]] = _encode_chapter(parts, sample_rate, gain_db, Path(work),
                                                               timing.index + 1)
    for n, (name, placed) in enumerate(per_doc.items(), 1):
        doc = documents[name]
        smil_name = posixpath.join(source.base, FOLDER, f"overlay-{n:03d}.smil")
        pars, total = [], 0
        for chapter, _, _, new_id, begin, end, _ in placed:
            (b, b_ms), (e, e_ms) = _clock(begin, sample_rate), _clock(end, sample_rate)
            total += e_ms - b_ms
            text, audio = f"{_rel(smil_name, name)}#{fragments[(name, new_id)]}", _rel(smil_name, audio_names[chapter])
            words = word_pars.get((name, new_id))
            if not words:
                pars.append((text, audio, b, e))
                continue
            # the words' clips tile the sentence's: each lasts until the next word starts
            begins = [begin] + [max(begin, min(w_begin, end)) for _, w_begin in words[1:]] + [end]
            pars.append((text, [(f"{_rel(smil_name, name)}#{word_id}", audio, _clock(begins[k], sample_rate)[0],
                                 _clock(begins[k + 1], sample_rate)[0]) for k, (word_id, _) in enumerate(words)]))
        added[smil_name] = _smil(pars)
        if upgrade:
            _as_html5(doc.root, name, source.entries, dropped)
        _add_stylesheet(doc, css_name)
        replaced[name] = _serialise(doc.tree, html5=upgrade or _has_html5_doctype(source.entries[name]))
        overlay_ms[smil_name] = total
    if not per_doc:
        raise ReadalongError("none of its read sentences could be found in its documents")
    added[css_name] = STYLESHEET.encode()

    # the package document
    if upgrade:
        opf.set("version", "3.0")
        _upgrade_metadata(metadata, _modified(epub))
        if not any("nav" in (i.get("properties") or "").split() for i in _items(opf)):
            title = metadata.findtext(f"{{{DC}}}title") or ""
            nav_name, nav = _nav_from_ncx(source, title, language,
                                          [(t.title, t.sources[0]) for t in timings if t.sources])
            added[nav_name] = nav
            etree.SubElement(manifest, f"{{{OPF}}}item", id=item_id("ra-nav"), href=_rel(source.opf_name, nav_name),
                             properties="nav").set("media-type", "application/xhtml+xml")
        for name, item in items_by_path.items():  # every XHTML document gets the HTML5 doctype
            if item.get("media-type") == "application/xhtml+xml" and name not in replaced and name in source.entries:
                replaced[name] = _html5_doctype(source.entries[name], name, source.entries, dropped)
            elif item.get("media-type") == "application/x-dtbncx+xml" and name in source.entries:
                replaced[name] = _ncx_without_doctype(source.entries[name])
            if item.get("media-type") == "application/xhtml+xml" and name in replaced:
                _declare_content_properties(item, replaced[name])
    else:
        for meta in metadata.findall(f"{{{OPF}}}meta[@property='dcterms:modified']"):
            metadata.remove(meta)
        etree.SubElement(metadata, f"{{{OPF}}}meta", property="dcterms:modified").text = _modified(epub)
    for meta in metadata.findall(f"{{{OPF}}}meta"):  # a source that was a read-along book already
        if (meta.get("property") or "").startswith("media:"):
            metadata.remove(meta)
    for name in added:
        kind = {".m4a": "audio/mp4", ".smil": "application/smil+xml", ".css": "text/css"}.get(
            posixpath.splitext(name)[1])
        if kind is None:
            continue
        item = etree.SubElement(manifest, f"{{{OPF}}}item", id=item_id("ra-"), href=_rel(source.opf_name, name))
        item.set("media-type", kind)
        if kind == "application/smil+xml":
            content = items_by_path[next(d for d, s in _overlay_of(per_doc, source) if s == name)]
            content.set("media-overlay", item.get("id"))
            meta = etree.SubElement(metadata, f"{{{OPF}}}meta", property="media:duration", refines=f"#{item.get('id')}")
            meta.text = _clock_ms(overlay_ms[name])
    etree.SubElement(metadata, f"{{{OPF}}}meta", property="media:duration").text = _clock_ms(sum(overlay_ms.values()))
    if narrator:
        etree.SubElement(metadata, f"{{{OPF}}}meta", property="media:narrator").text = narrator
    etree.SubElement(metadata, f"{{{OPF}}}meta", property="media:active-class").text = ACTIVE_CLASS
    replaced[source.opf_name] = etree.tostring(opf.getroottree(), xml_declaration=True, encoding="utf-8")

    sentences = sum(len(p) for p in per_doc.values())
    if lost_total:
        warnings.append(f"read-along: {lost_total} sentence(s) said in the audiobook were not found in the "
                        f"book's documents; they play without a highlight")
    if dropped_line(dropped):
        warnings.append(dropped_line(dropped))
    archive = _zip(source, replaced, added)
    return archive, ReadalongResult(Path(), sentences, lost_total, warnings)


def _overlay_of(per_doc: dict, source: _Source):
    for n, name in enumerate(per_doc, 1):
        yield name, posixpath.join(source.base, FOLDER, f"overlay-{n:03d}.smil")


def _has_html5_doctype(data: bytes) -> bool:
    head = data[:2048].lower()
    return b"<!doctype html>" in head


def _html5_doctype(data: bytes, name: str, entries: dict, dropped: Counter | None = None) -> bytes:
    """An EPUB 2 XHTML document as EPUB 3 wants it (see _as_html5), all else as it was."""
    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True))
    except etree.XMLSyntaxError:
        return data
    _as_html5(root, name, entries, dropped)
    return _serialise(root.getroottree(), html5=True)


# What a content document holds that EPUB 3 wants its manifest item to declare (EPUB 2 had no such
# properties): inline SVG, MathML, scripts.
CONTENT_PROPERTIES = (("svg", "{http://www.w3.org/2000/svg}svg"), ("mathml", "{http://www.w3.org/1998/Math/MathML}math"),
                      ("scripted", f"{{{XHTML}}}script"))
def _declare_content_properties(item, data: bytes) -> None:
    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True))
    except etree.XMLSyntaxError:
        return
    have = (item.get("properties") or "").split()
    for prop, tag in CONTENT_PROPERTIES:
        if prop not in have and next(root.iter(tag), None) is not None:
            have.append(prop)
    if have:
        item.set("properties", " ".join(have))


def _as_html5(root, name: str, entries: dict, dropped: Counter | None = None) -> None:
    """What HTML5 says differently from XHTML 1.1: in the head, the encoding is declared as
    `text/html; charset=utf-8` (we write UTF-8, whatever the source was), and Content-Style-Type
    is not a pragma HTML5 has; in the body, a `tag` attribute that only repeats its element's
    own name (an old Project Gutenberg converter's leftover: tag="{http://www.w3.org/1999/xhtml}a"
    on an <a>) is dropped; so is a <link> in the head to a stylesheet the book does not have (calibre keeps
    them), which EPUB 3 counts as an error. The rest of HTML 4's obsolete markup (<big>, <font>,
    align=, width="50%", ...) becomes its HTML5 form, or is dropped and counted in `dropped`
    (html5.upgrade_markup). The doctype is the caller's. Nothing else changes."""
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        if el.get("tag") == el.tag:
            del el.attrib["tag"]
        if el.tag == f"{{{XHTML}}}table" and el.get("border") not in (None, "", "1"):
            if el.get("border").strip() in ("0", "0px"):
                del el.attrib["border"]
            else:
                el.set("border", "1")
    found = upgrade_markup(root)
    if dropped is not None:
        dropped.update(found)
    head = root.find(f"{{{XHTML}}}head")
    if head is None:
        return
    from urllib.parse import unquote, urlparse

    for link in head.findall(f"{{{XHTML}}}link"):
        href = link.get("href") or ""
        if "stylesheet" not in (link.get("rel") or "").split() or not href or urlparse(href).scheme:
            continue
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), unquote(href.split("#")[0])))
        if target not in entries:
            _remove_keeping_tail(link)
    for meta in head.findall(f"{{{XHTML}}}meta"):
        pragma = (meta.get("http-equiv") or "").lower()
        if pragma == "content-type":
            meta.set("content", "text/html; charset=utf-8")
        elif pragma == "content-style-type":
            _remove_keeping_tail(meta)


def _remove_keeping_tail(el) -> None:
    parent, previous = el.getparent(), el.getprevious()
    if el.tail:
        if previous is not None:
            previous.tail = (previous.tail or "") + el.tail
        else:
            parent.text = (parent.text or "") + el.tail
    parent.remove(el)


def _ncx_without_doctype(data: bytes) -> bytes:
    """EPUB 3 allows an NCX (for old readers) but not the DTD reference EPUB 2's carries."""
    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError:
        return data
    if root.getroottree().docinfo.doctype:
        return etree.tostring(root, xml_declaration=True, encoding="utf-8")
    return data


def _zip(source: _Source, replaced: dict[str, bytes], added: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        def put(name: str, data: bytes, stored: bool = False) -> None:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3
            z.writestr(info, data)

        put("mimetype", b"application/epub+zip", stored=True)
        for name, data in source.entries.items():
            if name != "mimetype":
                put(name, replaced.get(name, data), stored=name.endswith(".m4a"))
        for name, data in added.items():
            if name not in source.entries:
                put(name, data, stored=name.endswith(".m4a"))
    return buffer.getvalue()


def _write_atomically(out: Path, data: bytes) -> None:
    from ..files import atomic_write

    atomic_write(out, data, shared=True)
