"""Cutting the reading order into chapters: a stream of blocks with a boundary per TOC entry becomes
spans of text; spans that are front/back matter are skipped (with the reason), the rest are titled."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from .model import Chapter, Skipped
from .text import Anchor, Block, clean, epub_types, find_body, local_name
from .toc import TocEntry, resolve

XLINK_HREF = "{http://www.w3.org/1999/xlink}href"

# epub:type / landmark / guide type → what we call it in the skip report.
SKIP_TYPES = {
    "cover": "cover",
    "toc": "table of contents",
    "loi": "list of illustrations",
    "lot": "list of tables",
    "titlepage": "title page",
    "title-page": "title page",
    "halftitlepage": "half-title page",
    "copyright-page": "copyright page",
    "copyright": "copyright page",
    "imprint": "imprint",
    "colophon": "colophon",
    "index": "index",
}
SKIP_TITLES = [
    (re.compile(r"^(table of contents|contents|brief contents|table des mati[eè]res|inhalt|"
                r"inhaltsverzeichnis|índice|sommaire)$"), "table of contents"),
    (re.compile(r"^(copyright|copyright page|copyright notice|uncopyright|imprint|impressum)$"),
     "copyright page"),
    (re.compile(r"^colophon$"), "colophon"),
    (re.compile(r"^(index|general index|index of names)$"), "index"),
    (re.compile(r"^(cover|cover image|cover page|couverture)$"), "cover"),
    (re.compile(r"^(title ?page|half[- ]?title( page)?|page de titre)$"), "title page"),
    (re.compile(r"^(transcriber'?s'? notes?|notes? (du|de la|des) transcri\w+|notes? de transcription|"
                r"anmerkungen? zur transkription|nota del transcriptor|corrections|errata|erratum|"
                r"(list of )?(typographical )?errors corrected)$"), "transcriber's note"),
    (re.compile(r"^(works by|other works by|other books by|books by|also by|by the same author|du m[eê]me auteur|"
                r"(publishers?'? )?advertisements?|catalogue of (new )?books)\b"), "publisher's adverts"),
    # Legal boilerplate that Project Gutenberg appends to every book; not part of the work.
    (re.compile(r"project gutenberg|full license"), "Project Gutenberg licence"),
]
# File names that say what a file is (Standard Ebooks, Calibre, InDesign and most producers use them).
SKIP_FILES = [
    (re.compile(r"(^|[_-])(title[_-]?page|titlepage)([_-]|$)"), "title page"),
    (re.compile(r"(^|[_-])half[_-]?title([_-]?page)?([_-]|$)"), "half-title page"),
    (re.compile(r"(^|[_-])(copyright|copyright[_-]page)([_-]|$)"), "copyright page"),
    (re.compile(r"(^|[_-])imprint([_-]|$)"), "imprint"),
]
# Text that only a rights / imprint page carries; looked for in short spans only.
COPYRIGHT_TEXT = re.compile(r"©|\ball rights reserved\b|\bISBN[\s:‐-]*[\dX‐-]{10,17}|tous droits|alle rechte vorbehalten|"
                            r"todos los derechos|tutti i diritti|版权|版權|著作権|זכויות", re.IGNORECASE)
# A transcriber's account of the e-book edition (Gutenberg's "Au lecteur", "Transcriber's Note").
TRANSCRIBER_TEXT = re.compile(r"\btranscriber'?s? note|\bthis e-?book\b|ce livre [ée]lectronique|note du transcripteur|"
                              r"dieses e-?book", re.IGNORECASE)
SHORT_TEXT = 2000  # characters of body text: a rights page or a note on the edition is shorter
TITLE_PAGE_TEXT = 1000  # characters of body text under an entry named like the book: its title page
# What --keep-front-matter reads after all: parts of the printed book, not packaging.
FRONT_MATTER = ("title page", "half-title page", "copyright page", "imprint", "transcriber's note",
                "publisher's adverts")
# Sections that only group others; the first typed element inside them says what a file is.
DIVISION_TYPES = frozenset(["frontmatter", "bodymatter", "backmatter"])
PG_START = re.compile(r"^\*+\s*START OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
PG_END = re.compile(r"^(\*+\s*END OF (THE|THIS) PROJECT GUTENBERG|END OF (THE )?PROJECT GUTENBERG)",
                    re.IGNORECASE)


@dataclass(eq=False)
class Span:
    """The text from one chapter boundary to the next."""

    entry: TocEntry | None  # None: text before the first TOC entry
    blocks: list[Block] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    types: set[str] = field(default_factory=set)  # epub:type / landmark evidence at its start
    images: int = 0
    skip: str | None = None

    @property
    def has_body(self) -> bool:
        return any(not b.heading for b in self.blocks)


@dataclass
class DocStart:
    name: str


@dataclass
class Boundary:
    entry: TocEntry
    source: str | None  # None: an unlinked divider


@dataclass
class DocInfo:
    title: str  # <title> or first heading
    types: set[str]  # epub:type of body and its first typed section
    anchor_types: dict[str, set[str]]
    images: list[str]  # resolved src of <img>/<svg:image> that are not data URIs
    found: set[str]  # anchors found
    has_text: bool


class Cutter:
    """Cuts one book's stream into titled spans, reporting what it skips in `skipped`."""

    def __init__(self, title: str, docs: dict[str, DocInfo], landmarks: dict, landmark_source: str,
                 cover_images: set[str], skipped: list[Skipped], keep_front_matter: bool = False):
        self.title = title
        self.docs = docs
        self.landmarks = landmarks
        self.landmark_source = landmark_source  # "landmarks" (EPUB3 nav) or "guide" (EPUB2)
        self.cover_images = cover_images
        self.skipped = skipped
        self.keep_front_matter = keep_front_matter

    def trim_gutenberg(self, stream: list) -> list:
        """Cut the Project Gutenberg header (up to '*** START OF …') and footer ('End of …')."""
        blocks = [i for i, it in enumerate(stream) if isinstance(it, Block)]
        start = next((i for i in blocks if PG_START.match(stream[i].text)), None)
        if start is not None:
            following = next((i for i in blocks if i > start), None)
            if following is not None and stream[following].text.lower().startswith("produced by"):
                start = following
            stream = [it for i, it in enumerate(stream) if i > start or not isinstance(it, Block)]
            self.skipped.append(Skipped("Project Gutenberg header", "Project Gutenberg boilerplate"))
        end = next((i for i, it in enumerate(stream) if isinstance(it, Block) and PG_END.match(it.text)), None)
        if end is not None:
            stream = [it for i, it in enumerate(stream) if i < end or not isinstance(it, Block)]
            self.skipped.append(Skipped("Project Gutenberg footer", "Project Gutenberg boilerplate"))
        return stream

    def spans(self, stream: list, linked: list[TocEntry]) -> list[Span]:
        """Cut the stream at boundaries. Files that are not TOC targets continue the current span,
        unless the file itself is front/back matter to skip (a second, short table of contents)."""
        targets = {e.doc for e in linked}
        spans = [Span(None)]
        skipping_doc = False
        unsourced = None  # a file that continues the current span, noted once it yields text
        for it in stream:
            if isinstance(it, DocStart):
                info = self.docs[it.name]
                reason = None if it.name in targets else self._doc_skip_reason(it.name, info)
                skipping_doc = self._skips(reason)
                if skipping_doc:
                    self.skipped.append(Skipped(info.title or it.name, reason))
                elif reason:  # front matter kept on request: its own chapter, not the end of the last
                    spans.append(Span(None, types=set(info.types)))
                unsourced = it.name
            elif isinstance(it, Boundary):
                skipping_doc, unsourced = False, None
                if it.source is None:  # an unlinked divider (<span> in the nav): a marker of its own
                    spans.append(Span(it.entry))
                    continue
                doc, _, fragment = it.source.partition("#")
                info = self.docs[doc]
                types = info.anchor_types.get(fragment, set()) if fragment else info.types
                spans.append(Span(it.entry, sources=[it.source], types=types,
                                  images=len(info.images) if not fragment else 0))
            elif not skipping_doc:
                if unsourced:
                    if spans[-1].entry is None and not spans[-1].blocks:  # text before the first entry
                        spans[-1].types = set(self.docs[unsourced].types)
                    add_sources(spans[-1], [unsourced])
                    unsourced = None
                spans[-1].blocks.append(it)
        for span in spans:
            span.skip = self._span_skip_reason(span)
        _title_page_lines(spans)
        _inherit_skips(spans)
        return spans

    def _skips(self, reason: str | None) -> bool:
        """Whether a part skipped for `reason` stays unread (--keep-front-matter reads some)."""
        return reason is not None and not (self.keep_front_matter and reason.split(" (")[0] in FRONT_MATTER)

    def _doc_skip_reason(self, name: str, info: DocInfo) -> str | None:
        """Why a file that no TOC entry points at is not read, if it is not."""
        reason = self._marked(info.types, (name, None), "", name)
        if reason or info.has_text:
            return reason
        if set(info.images) & self.cover_images:
            return "cover (cover image page)"
        # A file with nothing at all in it (e.g. only the Gutenberg footer box) is not worth a line.
        return "no text (images only)" if info.images else None

    def _span_skip_reason(self, span: Span) -> str | None:
        """Why a span is not read: how it is marked, else what its text says it is."""
        entry = span.entry
        if entry is None and not span.blocks:
            return None
        doc = entry.doc if entry else (span.sources[0].partition("#")[0] if span.sources else None)
        key = (entry.doc, entry.fragment) if entry and entry.doc else None
        reason = self._marked(span.types, key, span_title(span, ""), doc)
        if reason:
            return reason
        body = sum(len(b.text) for b in span.blocks if not b.heading)
        if span.blocks and body <= SHORT_TEXT:
            text = " ".join(b.text for b in span.blocks)
            if COPYRIGHT_TEXT.search(text):
                return "copyright page (text)"
            if TRANSCRIBER_TEXT.search(text):
                return "transcriber's note (text)"
        if entry is not None and body <= TITLE_PAGE_TEXT and names_book(entry.title, self.title):
            return "title page (the book's title)"
        return None

    def _marked(self, types: set[str], key, title: str, doc: str | None) -> str | None:
        """Front/back matter by its epub:type or role, landmark or guide, title, or file name."""
        for kind, label in SKIP_TYPES.items():
            if kind in types:
                return f"{label} (epub:type)"
        landmark = self.landmarks.get(key, set()) if key else set()
        for kind, label in SKIP_TYPES.items():
            if kind in landmark:
                return f"{label} ({self.landmark_source})"
        folded = re.sub(r"[\s.:]+$", "", clean(title).lower().replace("’", "'"))
        for pattern, label in SKIP_TITLES:
            if pattern.search(folded):
                return f"{label} (title)"
        stem = posixpath.splitext(posixpath.basename(doc or ""))[0].lower()
        for pattern, label in SKIP_FILES:
            if pattern.search(stem):
                return f"{label} (file name)"
        return None

    # -- chapters ----------------------------------------------------------------------------

    def chapters(self, spans: list[Span]) -> list[tuple[str, Span]]:
        """One chapter per TOC entry, titled by its label; skipped and empty spans are reported."""
        titled = []
        carried: list[Block] = []  # a skipped title page's epigraph and dedication, not yet read
        carried_sources: list[str] = []
        for index, span in enumerate(spans):
            if carried and span.blocks and not span.skip:
                span.blocks[:0] = carried
                add_sources(span, carried_sources)
                carried, carried_sources = [], []
            if self._skips(span.skip):
                self.skipped.append(Skipped(span_title(span, self.title), span.skip))
                if span.skip.startswith(("title page", "half-title page")):
                    # the book's title and imprint are packaging; its epigraph is part of the work
                    carried += [b for b in span.blocks if b.inscription]
                    carried_sources += span.sources
            elif span.entry is None:
                if span.blocks:
                    titled.append((span_title(span, self.title), span))
            elif span.blocks:
                titled.append((span.entry.title or "Untitled", span))
            elif (span.entry.title and (span.entry.children or span.entry.doc is None)
                  and not _same_as_next(span, spans[index + 1:index + 2])):
                # A divider that shares its target with its first child (or has none): its label is
                # what there is to read, so "Part Two" is still heard and still has its marker.
                span.blocks = [Block(span.entry.title, heading=True)]
                titled.append((span.entry.title, span))
            else:
                reason = "no text (images only)" if span.images else "no text"
                self.skipped.append(Skipped(span.entry.title, reason))
        return titled


def to_chapter(title: str, span: Span) -> Chapter:
    blocks = span.blocks
    return Chapter(
        title, [b.text for b in blocks], span.sources,
        kinds=["note" if b.in_note and not b.heading else "heading" if b.heading else "text" for b in blocks],
        breaks={i for i, b in enumerate(blocks) if b.break_before and i > 0},
        pronunciations={i: list(b.phonemes) for i, b in enumerate(blocks) if b.phonemes},
        languages={i: list(b.langs) for i, b in enumerate(blocks) if b.langs},
    )


def span_title(span: Span, fallback: str) -> str:
    """A span's TOC label; text before the first entry is named by its first heading."""
    if span.entry is not None:
        return span.entry.title
    return next((b.text for b in span.blocks if b.heading), "") or fallback


def names_book(label: str, book_title: str) -> bool:
    """Whether a label is the book's title, or its main title before a subtitle."""
    main = re.split(r"\s*[/:;—]\s*|\s+-\s+", book_title, maxsplit=1)[0]
    return bool(fold(label)) and fold(label) in (fold(book_title), fold(main))


def fold(s: str) -> str:
    return re.sub(r"\W+", " ", s.casefold()).strip()


def _same_as_next(span: Span, after: list[Span]) -> bool:
    """An empty span whose label the next span repeats: the same place named twice (a TOC nested
    3,000 deep, each level pointing at one file) gives one chapter, not 3,000."""
    return bool(after) and after[0].entry is not None and fold(after[0].entry.title) == fold(span.entry.title)


def _title_page_lines(spans: list[Span]):
    """Heading-only spans that follow a title page in its own file are lines of it (Gutenberg's
    NCX makes an entry of every line: "BY", "LEWIS CARROLL", "1886")."""
    run_doc, reason = None, None
    for span in spans:
        doc = span.entry.doc if span.entry else None
        if span.skip and span.skip.startswith(("title page", "half-title page")):
            run_doc, reason = doc, span.skip.split(" (")[0] + " (a line of the title page)"
        elif run_doc and doc == run_doc and span.entry is not None and not span.skip and not span.has_body:
            span.skip = reason
        else:
            run_doc = None


def _inherit_skips(spans: list[Span]):
    """An entry nested under a skipped one, in the same file, is part of it (the publisher's
    "WORKS BY …" page and its "PUBLISHED BY" line). Entries in other files are not: Standard
    Ebooks nests the whole book under its half-title page."""
    skipped = {id(s.entry): s.skip for s in spans if s.entry is not None and s.skip}
    for span in spans:
        if span.entry is None or span.skip:
            continue
        for ancestor in span.entry.ancestors():
            if id(ancestor) in skipped and ancestor.doc == span.entry.doc:
                span.skip = skipped[id(ancestor)]
                skipped[id(span.entry)] = span.skip
                break


def add_sources(span: Span, sources: list[str]):
    for source in sources:
        if source not in span.sources:
            span.sources.append(source)


def doc_info(root, name: str, anchors: set[str], items) -> DocInfo:
    body = find_body(root)
    types = set(semantic_types(body))
    for el in body.iter():  # the first typed element, looking inside frontmatter/bodymatter wrappers
        if el is not body and isinstance(el.tag, str) and semantic_types(el):
            types |= semantic_types(el)
            if not semantic_types(el) <= DIVISION_TYPES:
                break
    anchor_types: dict[str, set[str]] = {}
    if anchors:
        for el in body.iter():
            el_id = el.get("id") if isinstance(el.tag, str) else None
            if el_id in anchors:
                found = set(semantic_types(el))
                for parent in el.iterancestors():
                    found |= semantic_types(parent)
                first_child = next((c for c in el if isinstance(c.tag, str) and semantic_types(c)), None)
                if first_child is not None:
                    found |= semantic_types(first_child)
                anchor_types[el_id] = found
    found = {it.id for it in items if isinstance(it, Anchor)}
    has_text = any(isinstance(it, Block) for it in items)
    return DocInfo(doc_title(root), types, anchor_types, images(body, name), found, has_text)


def semantic_types(el) -> set[str]:
    """epub:type values and DPUB-ARIA roles ("doc-colophon" → "colophon") of an element."""
    roles = (el.get("role") or "").split()
    return epub_types(el) | {r[4:] for r in roles if r.startswith("doc-")}


def images(body, name: str) -> list[str]:
    """Resolved file names of the <img> and SVG <image> pictures in a document."""
    images = []
    for el in body.iter():
        tag = local_name(el)
        src = el.get("src") if tag == "img" else el.get(XLINK_HREF) or el.get("href") if tag == "image" else None
        if src and not src.startswith("data:"):
            images.append(resolve(name, src)[0])
    return images


def doc_title(root) -> str:
    """A name for a file that no TOC entry names: its first heading, else its <title>."""
    for wanted in (("h1", "h2", "h3"), ("title",)):
        for el in root.iter():
            if local_name(el) in wanted:
                text = clean("".join(el.itertext())).strip("\"'“”")
                if text:
                    return text
    return ""
