"""Cutting the reading order into chapters: a stream of blocks with a boundary per TOC entry becomes
spans of text; spans that are front/back matter are skipped (with the reason), the rest are titled."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .model import Chapter, Skipped
from .text import Anchor, Block, clean, epub_types, find_body, local_name
from .toc import TocEntry, resolve

XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
TITLE_SEPARATOR = " — "

# epub:type / landmark / guide type → what we call it in the skip report.
SKIP_TYPES = {
    "cover": "cover",
    "toc": "table of contents",
    "loi": "list of illustrations",
    "lot": "list of tables",
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
    # Legal boilerplate that Project Gutenberg appends to every book; not part of the work.
    (re.compile(r"project gutenberg|full license"), "Project Gutenberg licence"),
]
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
    source: str


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
                 cover_images: set[str], skipped: list[Skipped]):
        self.title = title
        self.docs = docs
        self.landmarks = landmarks
        self.landmark_source = landmark_source  # "landmarks" (EPUB3 nav) or "guide" (EPUB2)
        self.cover_images = cover_images
        self.skipped = skipped

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
                skipping_doc = reason is not None
                if skipping_doc:
                    self.skipped.append(Skipped(info.title or it.name, reason))
                unsourced = it.name
            elif isinstance(it, Boundary):
                skipping_doc, unsourced = False, None
                doc, _, fragment = it.source.partition("#")
                info = self.docs[doc]
                types = info.anchor_types.get(fragment, set()) if fragment else info.types
                spans.append(Span(it.entry, sources=[it.source], types=types,
                                  images=len(info.images) if not fragment else 0))
            elif not skipping_doc:
                if unsourced:
                    add_sources(spans[-1], [unsourced])
                    unsourced = None
                spans[-1].blocks.append(it)
        for span in spans:
            key = (span.entry.doc, span.entry.fragment) if span.entry else None
            title = span.entry.title if span.entry else ""
            span.skip = self._skip_reason(span.types, key, title) if span.entry else None
        return spans

    def _doc_skip_reason(self, name: str, info: DocInfo) -> str | None:
        """Why a file that no TOC entry points at is not read, if it is not."""
        reason = self._skip_reason(info.types, (name, None), "")
        if reason or info.has_text:
            return reason
        if set(info.images) & self.cover_images:
            return "cover (cover image page)"
        # A file with nothing at all in it (e.g. only the Gutenberg footer box) is not worth a line.
        return "no text (images only)" if info.images else None

    def _skip_reason(self, types: set[str], key, title: str) -> str | None:
        for kind, label in SKIP_TYPES.items():
            if kind in types:
                return f"{label} (epub:type)"
        landmark = self.landmarks.get(key, set()) if key else set()
        for kind, label in SKIP_TYPES.items():
            if kind in landmark:
                return f"{label} ({self.landmark_source})"
        folded = re.sub(r"[\s.:]+$", "", clean(title).lower())
        for pattern, label in SKIP_TITLES:
            if pattern.search(folded):
                return f"{label} (title)"
        return None

    # -- chapters ----------------------------------------------------------------------------

    def chapters(self, spans: list[Span], entries: list[TocEntry]) -> list[tuple[str, Span]]:
        """Report skipped and empty spans, merge heading-only ones, and title the rest."""
        kept = []
        for span in spans:
            if span.skip:
                self.skipped.append(Skipped(span.entry.title, span.skip))
            elif span.blocks:
                kept.append(span)
            elif span.entry is not None and not span.entry.children:
                reason = "no text (images only)" if span.images else "no text"
                self.skipped.append(Skipped(span.entry.title, reason))
        no_text = {id(s.entry) for s in spans if s.entry and not s.has_body and not s.skip}
        wrappers = book_wrappers(entries, self.title)
        titled = []
        for span in merge_heading_only(kept):
            if span.entry is not None:
                title = chapter_title(span, no_text, wrappers)
            else:
                title = next((b.text for b in span.blocks if b.heading), "") or self.title
            titled.append((title, span))
        return titled

    @staticmethod
    def chapters_from_headings(titled: list[tuple[str, Span]]) -> list[tuple[str, Span]]:
        """The TOC gave nothing usable: start a chapter at every run of headings."""
        result = []
        for title, span in titled:
            current = Span(None, sources=span.sources)
            previous_heading = False
            for block in span.blocks:
                if block.heading and not previous_heading and current.blocks:
                    result.append((title, current))
                    current = Span(None, sources=span.sources)
                if block.heading and not previous_heading:
                    title = block.text
                current.blocks.append(block)
                previous_heading = block.heading
            if current.blocks:
                result.append((title, current))
        return result


def to_chapter(title: str, span: Span) -> Chapter:
    blocks = span.blocks
    return Chapter(
        title, [b.text for b in blocks], span.sources,
        kinds=["note" if b.in_note and not b.heading else "heading" if b.heading else "text" for b in blocks],
        breaks={i for i, b in enumerate(blocks) if b.break_before and i > 0},
        pronunciations={i: list(b.phonemes) for i, b in enumerate(blocks) if b.phonemes},
    )


def merge_heading_only(spans: list[Span]) -> list[Span]:
    """Join spans that hold only headings to the span that follows them (or precedes them, when
    they are nested deeper than what follows, like 'THE END.' closing a chapter)."""
    result: list[Span] = []
    pending: list[Span] = []
    for index, span in enumerate(spans):
        if not span.has_body and span.entry is not None:
            nxt = spans[index + 1] if index + 1 < len(spans) else None
            closes_previous = result and (nxt is None or (
                nxt.entry is not None and span.entry.depth > nxt.entry.depth and not span.entry.children))
            if closes_previous and not pending:
                result[-1].blocks.extend(span.blocks)
                add_sources(result[-1], span.sources)
                continue
            pending.append(span)
            continue
        if pending:
            span = join(pending + [span], body=span)
            pending = []
        result.append(span)
    if pending:
        if result:
            for span in pending:
                result[-1].blocks.extend(span.blocks)
                add_sources(result[-1], span.sources)
        else:
            result.append(join(pending, body=pending[-1]))
    return result


def join(spans: list[Span], body: Span) -> Span:
    joined = Span(body.entry)
    for span in spans:
        joined.blocks.extend(span.blocks)
        add_sources(joined, span.sources)
    return joined


def add_sources(span: Span, sources: list[str]):
    for source in sources:
        if source not in span.sources:
            span.sources.append(source)


def book_wrappers(entries: list[TocEntry], book_title: str) -> set[int]:
    """Entries that name the whole book rather than a part of it."""
    top = [e for e in entries if e.parent is None]
    wrappers = {id(e) for e in entries if same_title(e.title, book_title)}
    if len(top) == 1:
        wrappers.add(id(top[0]))
    return wrappers


def same_title(a: str, b: str) -> bool:
    def fold(s):
        return re.sub(r"\W+", " ", s.casefold()).strip()
    return fold(a) == fold(b)


def chapter_title(span: Span, no_text: set[int], wrapper: set[int]) -> str:
    prefix = [a.title for a in span.entry.ancestors()
              if (a.doc is None or id(a) in no_text) and id(a) not in wrapper and a.title]
    return TITLE_SEPARATOR.join(prefix + [span.entry.title or "Untitled"])


# Per-document facts


def doc_info(root, name: str, anchors: set[str], items) -> DocInfo:
    body = find_body(root)
    types = set(epub_types(body))
    for el in body.iter():
        if el is not body and isinstance(el.tag, str) and epub_types(el):
            types |= epub_types(el)
            break
    anchor_types: dict[str, set[str]] = {}
    if anchors:
        for el in body.iter():
            el_id = el.get("id") if isinstance(el.tag, str) else None
            if el_id in anchors:
                found = set(epub_types(el))
                for parent in el.iterancestors():
                    found |= epub_types(parent)
                first_child = next((c for c in el if isinstance(c.tag, str) and epub_types(c)), None)
                if first_child is not None:
                    found |= epub_types(first_child)
                anchor_types[el_id] = found
    found = {it.id for it in items if isinstance(it, Anchor)}
    has_text = any(isinstance(it, Block) for it in items)
    return DocInfo(doc_title(root), types, anchor_types, images(body, name), found, has_text)


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
