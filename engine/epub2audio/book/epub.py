"""EPUB → Book: open and validate, walk the spine, cut it into chapters at TOC entries, skip
front/back matter that should not be read, and read the metadata and cover.

How chapters are made
---------------------
Reading order is the spine (items with linear="no" are skipped and reported). Chapter boundaries
come from the EPUB3 nav document, else the NCX. An entry pointing at `file#id` splits that file at
the element with that id; text runs from one entry's target to the next entry's target in spine
order, across as many files as lie between them. Text before the first entry is kept as its own
chapter (titled by its first heading, else the book title). Entries are then handled as follows:

* Front and back matter is skipped and reported: cover, table of contents, copyright page /
  imprint, colophon, index, and the Project Gutenberg licence. Evidence is looked for in this
  order: epub:type on the target (or on the file's body/first section), EPUB3 landmarks or the
  EPUB2 guide, then the entry's title. The Project Gutenberg header and footer are cut from the
  text (they are marked by "*** START/END OF THE PROJECT GUTENBERG EBOOK" lines).
* A chapter with no text at all (an image-only title page) is reported as skipped.
* Nested TOCs become flat chapters. An entry whose own text is only its heading ("Book the First",
  "Act I", a title-page line) does not become a chapter of its own: its heading is read at the
  start of the chapter that follows it (or, if it is nested deeper than the entry that follows,
  such as "THE END." under a chapter, at the end of the chapter before it).
* Titles: a chapter is titled by its own TOC label, prefixed by the labels of its ancestors that
  have no text of their own (heading-only entries and unlinked <span> headings), joined with
  " — ". So "Book the First: Recalled to Life — I: The Period" and "Act I — Scene II". An ancestor
  that names the whole book (its label equals the book title, or it is the only top-level entry)
  is left out of titles. Ancestors that have text of their own are chapters themselves and do not
  prefix their children ("Climate and Soils", not "GEORGIA — Climate and Soils").
* Notes (`notes=`): note references are found by EPUB semantics (epub:type noteref,
  role="doc-noteref", and for EPUB2/Gutenberg books a link whose text is only a number or note
  symbol); the note is the element the link points at, widened to the enclosing footnote /
  endnote / rearnote / note / aside (or doc-footnote, doc-endnote), or, when the target is an
  empty anchor (Gutenberg), the text-bearing paragraphs that follow it up to the next anchor.
  - "skip" (default): markers are never read, inline <aside> notes are not read, and notes that
    live in their own section (The Waste Land's NOTES, Herodotus's "NOTES TO BOOK N") stay where
    they are, as chapters: they are part of the book.
  - "inline": each note is read once, as "Note: …", right after the paragraph (or stanza) that
    first references it, and is no longer read where it lives. A notes section left with
    nothing but headings is skipped ("notes (read inline)"); a sub-heading whose notes all moved
    is dropped.
  - "chapter-end": as inline, but a chapter's notes are read at its end, after "Notes for this
    chapter.", numbered in the order they are referenced ("Note 1: …").
* Scene breaks, headings and ssml:ph pronunciations are carried to `Chapter.breaks`,
  `Chapter.kinds` and `Chapter.pronunciations`; `Book.pronunciation_lexicon` holds the entries
  of the book's PLS lexicons (manifest items of type application/pls+xml).
* Fallback: when the TOC yields no chapter at all (missing, or, as in some Gutenberg books, every
  entry points into the licence), chapters are cut at headings instead: each run of headings
  (h1–h6, or a "第N章" / "Chapter N" line of its own in plain-text paragraphs) starts a chapter
  titled by that heading.
"""

from __future__ import annotations

import base64
import binascii
import os
import posixpath
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from ebooklib import epub
from lxml import etree, html

from ..errors import InputError
from .container import open_container
from .model import Book, Chapter, Cover, Skipped
from .package import PackageError, PartUnreadable, read_package
from .text import (BLOCK_TAGS, HEADING_TAGS, RESOURCE_ERRORS, Anchor, Block, clean, drop_invalid_char_refs,
                   epub_types, find_body, is_noteref, _is_internal_link, is_unread, local_name, noteref_href,
                   parse_document, parse_xhtml, read_blocks)

XHTML_TYPES = ("application/xhtml+xml", "text/html", "application/x-dtbook+xml")
RASTER_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
NCX_NS = "{http://www.daisy.org/z3986/2005/ncx/}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
OPF_NS = "{http://www.idpf.org/2007/opf}"
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
NOTE_POLICIES = ("skip", "inline", "chapter-end")
NOTE_TYPES = frozenset(["footnote", "endnote", "rearnote", "note", "annotation",
                        "z3998:footnote", "z3998:endnote", "z3998:rearnote", "z3998:note"])
NOTE_ROLES = frozenset(["doc-footnote", "doc-endnote"])
NOTE_LABEL = re.compile(r"^[\[(]?\s*(\d{1,4}|[*†‡§¶]{1,3})\s*[\])]?\.?\s+")
NOTES_HEADING = "Notes for this chapter."
ISBN = re.compile(r"^(urn:isbn:|isbn:?\s*)?((97[89])?[\d-]{9,17}[\dXx])$", re.IGNORECASE)


# ----------------------------------------------------------------------------------------------
# Public entry point


def load_book(path: str | Path, notes: str = "skip") -> Book:
    """Read an EPUB file into a Book. Raises InputError (one line, naming the file) if unreadable.
    `notes`: "skip", "inline" or "chapter-end" (see the module docstring)."""
    path = Path(path)
    if notes not in NOTE_POLICIES:
        raise InputError(f"--notes must be one of {', '.join(NOTE_POLICIES)}, not {notes!r}")
    _check_file(path)
    try:
        package = _open_epub(path)
    except NotImplementedError as exc:  # zipfile: a compression method or zip version it cannot undo
        raise InputError(f"{path.name}: not a readable EPUB ({exc})") from None
    except RuntimeError as exc:  # zipfile: "File 'x' is encrypted, password required for extraction"
        if isinstance(exc, RecursionError):
            raise
        raise InputError(f"{path.name}: not a readable EPUB (encrypted zip entries: {exc})") from None
    except PackageError as exc:
        raise InputError(f"{path.name}: not {'a readable' if isinstance(exc, PartUnreadable) else 'a valid'} "
                         f"EPUB ({exc})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, KeyError, ValueError, etree.LxmlError,
            epub.EpubException) as exc:
        raise InputError(f"{path.name}: not a readable EPUB ({_describe(exc)})") from None
    try:
        return _Loader(path, package, notes).load()
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, KeyError, ValueError, etree.LxmlError,
            epub.EpubException) as exc:
        raise InputError(f"{path.name}: not a readable EPUB ({_describe(exc)})") from None


def _check_file(path: Path):
    if not path.exists():
        raise InputError(f"{path.name}: file not found")
    if path.is_dir():
        raise InputError(f"{path.name}: is a directory, not an EPUB file")
    if path.stat().st_size == 0:
        raise InputError(f"{path.name}: empty file, not an EPUB")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        raise InputError(f"{path.name}: not an EPUB (not a zip archive)")


def _open_epub(path: Path) -> epub.EpubBook:
    container = open_container(path)  # checked, DRM-free, and only what the book needs, inflated
    if not [el for el in container.package.iter() if local_name(el) == "itemref"]:
        raise InputError(f"{path.name}: not a valid EPUB (the package has no spine)")
    # ebooklib's reader without its nav/NCX parsing: we read nav and NCX ourselves (package.py).
    return read_package(container.archive)


def _describe(exc: Exception) -> str:
    if isinstance(exc, (zipfile.BadZipFile, zlib.error, EOFError)):
        return "the zip archive is truncated or damaged"
    if isinstance(exc, KeyError):
        return f"a file it lists is missing: {exc.args[0] if exc.args else exc}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# ----------------------------------------------------------------------------------------------
# The table of contents


@dataclass(eq=False)
class TocEntry:
    title: str
    doc: str | None  # manifest-relative file name, None for an unlinked heading
    fragment: str | None
    depth: int
    parent: TocEntry | None = None
    children: list[TocEntry] = field(default_factory=list)

    def ancestors(self) -> list[TocEntry]:
        chain, node = [], self.parent
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain[::-1]


def _resolve(base_doc: str, href: str) -> tuple[str, str | None]:
    """An href inside base_doc → (manifest-relative file name, fragment or None)."""
    target, _, fragment = href.partition("#")
    target = unquote(target)
    name = posixpath.normpath(posixpath.join(posixpath.dirname(base_doc), target)) if target else base_doc
    return name, unquote(fragment) or None


def _flatten(entries: list[TocEntry]) -> list[TocEntry]:
    """Every entry, depth first (iteratively: a TOC may nest as deep as its document)."""
    flat, stack = [], list(reversed(entries))
    while stack:
        entry = stack.pop()
        flat.append(entry)
        stack.extend(reversed(entry.children))
    return flat


def nav_toc(nav_name: str, root) -> list[TocEntry]:
    """Top-level entries of the nav document's epub:type="toc" list."""
    nav = _find_nav(root, "toc")
    ol = next((c for c in nav if local_name(c) in ("ol", "ul")), None) if nav is not None else None
    return _nav_list(nav_name, ol) if ol is not None else []


def _find_nav(root, kind: str):
    for el in root.iter():
        if local_name(el) == "nav" and kind in epub_types(el):
            return el
    return None


def _nav_list(nav_name, top_ol) -> list[TocEntry]:
    """The entries of a nav <ol>, nested <ol>s as children; a work list, not recursion."""
    top: list[TocEntry] = []
    work = [(top_ol, 0, None)]  # (list element, depth, parent entry)
    while work:
        ol, depth, parent = work.pop()
        for li in ol:
            if local_name(li) != "li":
                continue
            label_el = next((c for c in li if local_name(c) in ("a", "span")), None)
            if label_el is None:
                continue
            href = label_el.get("href") if local_name(label_el) == "a" else None
            doc, fragment = _resolve(nav_name, href) if href else (None, None)
            entry = TocEntry(clean("".join(label_el.itertext())), doc, fragment, depth, parent)
            (parent.children if parent else top).append(entry)
            sub = next((c for c in li if local_name(c) in ("ol", "ul")), None)
            if sub is not None:
                work.append((sub, depth + 1, entry))
    return top


def ncx_toc(ncx_name: str, root) -> list[TocEntry]:
    nav_map = root.find(f"{NCX_NS}navMap")
    return _ncx_points(ncx_name, nav_map) if nav_map is not None else []


def _ncx_points(ncx_name, nav_map) -> list[TocEntry]:
    """The navPoints under navMap, nested ones as children; a work list, not recursion."""
    top: list[TocEntry] = []
    work = [(nav_map, 0, None)]
    while work:
        parent_el, depth, parent = work.pop()
        for point in parent_el.findall(f"{NCX_NS}navPoint"):
            label_el = point.find(f"{NCX_NS}navLabel")
            label = clean("".join(label_el.itertext())) if label_el is not None else ""
            content = point.find(f"{NCX_NS}content")
            src = content.get("src") if content is not None else None
            doc, fragment = _resolve(ncx_name, src) if src else (None, None)
            entry = TocEntry(label, doc, fragment, depth, parent)
            (parent.children if parent else top).append(entry)
            work.append((point, depth + 1, entry))
    return top


# ----------------------------------------------------------------------------------------------
# Spans of text between TOC entries


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


class _Loader:
    def __init__(self, path: Path, book: epub.EpubBook, notes: str = "skip"):
        self.path = path
        self.book = book
        self.notes = notes
        self.roots: dict[str, object] = {}
        self.skipped: list[Skipped] = []
        # What could not be read as it should, one line each naming the part (Book.warnings).
        self.warnings: list[str] = []
        # No dc:title: the file's name, made valid text if it is not UTF-8 (it becomes a tag).
        self.title = self._first_meta("title") or os.fsencode(path.stem).decode("utf-8", "replace")
        self.nav_item = next((i for i in book.get_items() if isinstance(i, epub.EpubNav)), None)
        self.nav_root = self._parse(self.nav_item.get_name(), _raw(self.nav_item)) if self.nav_item else None
        self.landmarks = self._landmarks()
        self.cover_images = {i.get_name() for i in self._cover_items()}
        self.raw_toc = self._read_toc()
        self.titles_by_doc: dict[str, str] = {}
        for entry in _flatten(self.raw_toc):
            if entry.doc:
                self.titles_by_doc.setdefault(entry.doc, entry.title)

    # -- metadata --------------------------------------------------------------------------

    def _meta(self, name: str) -> list[tuple[str, dict]]:
        return [(clean(v or ""), a) for v, a in self.book.get_metadata("DC", name)]

    def _first_meta(self, name: str) -> str:
        return next((v for v, _ in self._meta(name) if v), "")

    def _authors(self) -> list[str]:
        """dc:creator in order, leaving out creators whose role is explicitly not author."""
        roles = self._refines("role")
        authors = []
        for value, attrs in self._meta("creator"):
            role = attrs.get(f"{OPF_NS}role") or roles.get(attrs.get("id", ""), "aut")
            if value and role == "aut":
                authors.append(value)
        return authors or [v for v, _ in self._meta("creator") if v]

    def _refines(self, prop: str) -> dict[str, str]:
        found = {}
        for value, attrs in self.book.get_metadata("OPF", "meta") or []:
            if attrs.get("property") == prop and attrs.get("refines", "").startswith("#"):
                found[attrs["refines"][1:]] = clean(value or "")
        return found

    def _date(self) -> str:
        dates = self._meta("date")
        published = [v for v, a in dates if a.get(f"{OPF_NS}event") == "publication"]
        return (published or [v for v, _ in dates] or [""])[0]

    def _identifier(self) -> str:
        ids = self._meta("identifier")
        for value, attrs in ids:
            scheme = attrs.get(f"{OPF_NS}scheme", "").lower()
            match = ISBN.match(value.replace(" ", ""))
            if scheme == "isbn" or (match and len(re.sub(r"[^\dXx]", "", match.group(2))) in (10, 13)):
                return re.sub(r"^(urn:isbn:|isbn:?\s*)", "", value, flags=re.IGNORECASE)
        return ids[0][0] if ids else ""

    def _description(self) -> str:
        raw = self._first_meta("description")
        if "<" in raw:
            raw = html.fromstring(f"<div>{raw}</div>").text_content()
        return clean(raw)

    # -- cover -----------------------------------------------------------------------------

    def _cover_items(self) -> list:
        """EPUB3 properties="cover-image", then EPUB2 <meta name="cover">."""
        items = [i for i in self.book.get_items() if isinstance(i, epub.EpubCover)]
        for _, attrs in self.book.get_metadata("OPF", "meta") or []:
            item = self.book.get_item_with_id(attrs.get("content", "")) if attrs.get("name") == "cover" else None
            if item is not None:
                items.append(item)
        return items

    def _cover(self, cover_docs: list[str]) -> Cover | None:
        for item in self._cover_items():
            cover = self._image_cover(item)
            if cover:
                return cover
        for doc in cover_docs:
            for src in self._doc_images(doc):
                item = self.book.get_item_with_href(src)
                cover = self._image_cover(item) if item is not None else None
                if cover:
                    return cover
        return None

    def _doc_images(self, name: str) -> list[str]:
        if name in self.docs:
            return self.docs[name].images
        item = self.book.get_item_with_href(name)
        return _images(find_body(parse_xhtml(_raw(item))), name) if item is not None else []

    def _image_cover(self, item) -> Cover | None:
        media_type = "image/jpeg" if item.media_type == "image/jpg" else item.media_type
        if media_type in RASTER_TYPES:
            return Cover(item.get_content(), media_type)
        if media_type == "image/svg+xml":
            return _raster_in_svg(item.get_content(), item.get_name(), self.book)
        return None

    # -- landmarks / guide -----------------------------------------------------------------

    def _landmarks(self) -> dict[tuple[str, str | None], set[str]]:
        found: dict[tuple[str, str | None], set[str]] = {}
        nav = _find_nav(self.nav_root, "landmarks") if self.nav_root is not None else None
        if nav is not None:
            for a in nav.iter():
                if local_name(a) == "a" and a.get("href"):
                    key = _resolve(self.nav_item.get_name(), a.get("href"))
                    found.setdefault(key, set()).update(epub_types(a))
        for ref in self.book.guide or []:
            if ref.get("href") and ref.get("type"):
                key = _resolve("", ref["href"])
                found.setdefault(key, set()).add(ref["type"].lower())
        return found

    # -- spine and text ----------------------------------------------------------------------

    def load(self) -> Book:
        spine = self._linear_spine()
        entries = self._toc(set(spine))
        self.docs: dict[str, DocInfo] = {}
        self.note_bodies: dict[str, list] = {}  # "doc#id" → the elements that make the note
        if self.notes != "skip":
            self._find_notes(spine)
        stream = self._stream(spine, entries)
        stream = self._trim_gutenberg(stream)
        spans = self._spans(stream, [e for e in entries if e.doc])
        if self.notes != "skip":
            self._lift_notes(spans)
        titled = self._chapters(spans, entries)
        if not any(span.entry is not None for _, span in titled):
            titled = self._chapters_from_headings(titled)
        if self.notes != "skip":
            titled = [(title, self._place_notes(span)) for title, span in titled]
        cover_docs = [n for n in spine if "cover" in self.docs[n].types] + [
            d for (d, _), types in self.landmarks.items() if "cover" in types and d in self.docs
        ] + self.nonlinear_docs
        return Book(
            path=str(self.path),
            title=self.title,
            authors=self._authors(),
            language=self._first_meta("language"),
            chapters=[_chapter(title, span) for title, span in titled],
            skipped=self.skipped,
            date=self._date(),
            description=self._description(),
            publisher=self._first_meta("publisher"),
            identifier=self._identifier(),
            cover=self._cover(cover_docs),
            pronunciation_lexicon=self._pls_entries(),
            warnings=self.warnings,
        )

    # -- pronunciation lexicons ------------------------------------------------------------

    def _pls_entries(self) -> list[tuple[str, str]]:
        from .lexicon import parse_pls

        entries = []
        for item in self.book.get_items():
            if item.media_type == "application/pls+xml":
                for e in parse_pls(item.get_content()).entries:
                    if e.ipa:
                        entries.append((e.key, e.ipa))
        return entries

    # -- notes ----------------------------------------------------------------------------

    def _root(self, name: str):
        if name not in self.roots:
            item = self.book.get_item_with_href(name)
            self.roots[name] = self._parse(name, _raw(item)) if item is not None else None
        return self.roots[name]

    def _parse(self, name: str, data: bytes):
        """A content document's tree; what the parser lost becomes a warning naming the file."""
        root, problems = parse_document(data)
        self.warnings.extend(f"{name}: {problem}" for problem in problems)
        return root

    def _find_notes(self, spine: list[str]):
        """Every note that a reference in the linear spine points at, and its body elements."""
        targets: dict[str, list[str]] = {}
        for name in spine:
            root = self._root(name)
            for el in find_body(root).iter():
                if (isinstance(el.tag, str) and is_noteref(el)
                        and not any(is_unread(a) or _is_note(a) for a in el.iterancestors())):
                    href = noteref_href(el)
                    if href and "#" in href:
                        doc, fragment = _resolve(name, href)
                        if fragment:
                            targets.setdefault(doc, [])
                            if fragment not in targets[doc]:
                                targets[doc].append(fragment)
        for doc, fragments in targets.items():
            root = self._root(doc)
            if root is None:
                continue
            by_id = {el.get("id"): el for el in root.iter() if isinstance(el.tag, str) and el.get("id")}
            wanted = set(fragments)
            for fragment in fragments:
                el = by_id.get(fragment)
                if el is not None:
                    body = _note_body(el, wanted)
                    if body:
                        self.note_bodies[f"{doc}#{fragment}"] = body
        self.note_elements: dict[str, set] = {}
        for key, body in self.note_bodies.items():
            self.note_elements.setdefault(key.partition("#")[0], set()).update(body)

    def _lift_notes(self, spans: list[Span]):
        """Take note bodies out of the text where they live; report sections left empty."""
        for span in spans:
            if not any(b.in_note for b in span.blocks):
                continue
            kept: list[Block] = []
            removed_after: set[int] = set()  # ids of kept headings that notes followed
            for block in span.blocks:
                if block.in_note:
                    if kept:
                        removed_after.add(id(kept[-1]))
                    continue
                if block.heading and kept and kept[-1].heading and id(kept[-1]) in removed_after:
                    kept.pop()  # a sub-heading whose notes have all moved
                kept.append(block)
            while kept and kept[-1].heading and id(kept[-1]) in removed_after and len(kept) > 1:
                kept.pop()
            span.blocks = kept
            if not span.has_body and span.entry is not None and not span.skip:
                how = "read inline" if self.notes == "inline" else "read at chapter ends"
                span.skip = f"notes ({how})"

    def _place_notes(self, span: Span) -> Span:
        read: set[str] = getattr(self, "_notes_read", set())
        self._notes_read = read
        blocks: list[Block] = []
        at_end: list[Block] = []
        for block in span.blocks:
            blocks.append(block)
            for href in block.notes:
                key = self._note_key(block, href, span)
                if key is None or key in read:
                    continue
                text = _note_text(self.note_bodies[key], href_marker=None)
                if not text:
                    continue
                read.add(key)
                if self.notes == "inline":
                    blocks.append(Block(f"Note: {text}", notes=[], in_note=True))
                else:
                    at_end.append(Block(f"Note {len(at_end) + 1}: {text}", in_note=True))
        if at_end:
            blocks.append(Block(NOTES_HEADING, heading=True, in_note=True, break_before=True))
            blocks.extend(at_end)
        span.blocks = blocks
        return span

    def _note_key(self, block: Block, href: str, span: Span) -> str | None:
        source = getattr(block, "source_doc", None)
        for doc in ([source] if source else []) + [s.partition("#")[0] for s in span.sources]:
            target, fragment = _resolve(doc, href)
            if fragment is None:  # "#" or "doc.xhtml#": points at no note
                return None
            key = f"{target}#{fragment}"
            if key in self.note_bodies:
                return key
        return None

    def _linear_spine(self) -> list[str]:
        """Spine file names in reading order; non-linear items and the nav document are reported."""
        names, self.nonlinear_docs = [], []
        nav_name = self.nav_item.get_name() if self.nav_item else None
        for idref, linear in self.book.spine:
            item = self.book.get_item_with_id(idref)
            if item is None:
                self.warnings.append(f"spine item {idref!r}: no such item in the manifest; not read")
                continue
            if item.media_type not in XHTML_TYPES:
                continue
            name = item.get_name()
            if name == nav_name:
                self.skipped.append(Skipped(self._doc_label(item), "table of contents (nav document)"))
            elif str(linear).lower() == "no":
                self.nonlinear_docs.append(name)
                self.skipped.append(Skipped(self._doc_label(item), "non-linear spine item"))
            elif name not in names:
                names.append(name)
        return names

    def _doc_label(self, item) -> str:
        """A name for a spine file in the skip report: its TOC label, heading or <title>."""
        return (self.titles_by_doc.get(item.get_name()) or _doc_title(parse_xhtml(_raw(item)))
                or item.get_name())

    def _read_toc(self) -> list[TocEntry]:
        """Nav document first (EPUB3), else the NCX. (Not ebooklib's book.toc: it prefers the NCX.)
        A TOC that is there but gives nothing is reported; the next source is tried."""
        if self.nav_item is not None:
            entries = nav_toc(self.nav_item.get_name(), self.nav_root)
            if entries:
                return entries
            nav = _find_nav(self.nav_root, "toc")
            why = ('no <nav epub:type="toc">' if nav is None else
                   "the nav has no list" if not any(local_name(c) in ("ol", "ul") for c in nav) else
                   "the nav's list has no entries")
            self.warnings.append(f"{self.nav_item.get_name()}: {why}; chapters come from the NCX or the headings")
        ncx = next((i for i in self.book.get_items() if i.media_type == "application/x-dtbncx+xml"), None)
        if ncx is None:
            return []
        parser = etree.XMLParser(recover=True, no_network=True, resolve_entities=False, huge_tree=True)
        root = etree.fromstring(drop_invalid_char_refs(ncx.content)[0], parser)
        entries = ncx_toc(ncx.get_name(), root) if root is not None else []
        lost = next((e.message.strip() for e in parser.error_log if e.type in RESOURCE_ERRORS), None)
        if lost:
            self.warnings.append(f"{ncx.get_name()}: only partly read ({lost.rstrip('.')})")
        if not entries:
            why = ("not XML" if root is None else "the NCX has no navMap" if root.find(f"{NCX_NS}navMap") is None
                   else "the navMap has no navPoints")
            self.warnings.append(f"{ncx.get_name()}: {why}; chapters come from the headings")
        return entries

    def _toc(self, spine: set[str]) -> list[TocEntry]:
        """All entries, flattened; links to files outside the linear spine are unlinked."""
        entries = _flatten(self.raw_toc)
        for entry in entries:
            if entry.doc and entry.doc not in spine:
                entry.doc = entry.fragment = None
        return entries

    def _stream(self, spine: list[str], entries: list[TocEntry]) -> list:
        """One pass over the spine: blocks, with a DocStart per file and a Boundary per TOC entry."""
        by_doc: dict[str, list[TocEntry]] = {}
        for entry in entries:
            if entry.doc:
                by_doc.setdefault(entry.doc, []).append(entry)
        stream: list = []
        for name in spine:
            root = self._root(name)
            doc_entries = by_doc.get(name, [])
            anchors = {e.fragment for e in doc_entries if e.fragment}
            items = read_blocks(root, anchors, getattr(self, "note_elements", {}).get(name, frozenset()))
            for it in items:
                if isinstance(it, Block) and it.notes:
                    it.source_doc = name
            self.docs[name] = _doc_info(root, name, anchors, items)
            stream.append(DocStart(name))
            # Entries whose anchor is missing start at the top of their file.
            for entry in doc_entries:
                if not entry.fragment or entry.fragment not in self.docs[name].found:
                    stream.append(Boundary(entry, name))
            for it in items:
                if isinstance(it, Anchor):
                    stream.extend(Boundary(e, f"{name}#{it.id}") for e in doc_entries if e.fragment == it.id)
                else:
                    stream.append(it)
        return stream

    def _trim_gutenberg(self, stream: list) -> list:
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

    def _spans(self, stream: list, linked: list[TocEntry]) -> list[Span]:
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
                    _add_sources(spans[-1], [unsourced])
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
                return f"{label} ({'landmarks' if self.nav_item else 'guide'})"
        folded = re.sub(r"[\s.:]+$", "", clean(title).lower())
        for pattern, label in SKIP_TITLES:
            if pattern.search(folded):
                return f"{label} (title)"
        return None

    # -- chapters ----------------------------------------------------------------------------

    def _chapters(self, spans: list[Span], entries: list[TocEntry]) -> list[tuple[str, Span]]:
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
        wrappers = _book_wrappers(entries, self.title)
        titled = []
        for span in _merge_heading_only(kept):
            if span.entry is not None:
                title = _chapter_title(span, no_text, wrappers)
            else:
                title = next((b.text for b in span.blocks if b.heading), "") or self.title
            titled.append((title, span))
        return titled

    @staticmethod
    def _chapters_from_headings(titled: list[tuple[str, Span]]) -> list[tuple[str, Span]]:
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


def _chapter(title: str, span: Span) -> Chapter:
    blocks = span.blocks
    return Chapter(
        title, [b.text for b in blocks], span.sources,
        kinds=["note" if b.in_note and not b.heading else "heading" if b.heading else "text" for b in blocks],
        breaks={i for i, b in enumerate(blocks) if b.break_before and i > 0},
        pronunciations={i: list(b.phonemes) for i, b in enumerate(blocks) if b.phonemes},
        languages={i: list(b.langs) for i, b in enumerate(blocks) if b.langs},
    )


def _is_note(el) -> bool:
    """An element holding a note (its links are labels and backlinks, not references)."""
    return bool(epub_types(el) & NOTE_TYPES) or (el.get("role") or "") in NOTE_ROLES or (
        local_name(el) == "aside")


def _note_body(el, targets: set[str]) -> list:
    """The elements that make up the note an id points at."""
    for node in [el, *el.iterancestors()]:
        if local_name(node) in ("body", "section") and not (epub_types(node) & NOTE_TYPES):
            break
        if epub_types(node) & NOTE_TYPES or (node.get("role") or "") in NOTE_ROLES:
            return [node]
        if local_name(node) == "aside":
            return [node]
    if clean("".join(el.itertext())):
        block = el
        while block is not None and local_name(block) not in BLOCK_TAGS:
            block = block.getparent()
        return [block] if block is not None and local_name(block) not in ("body", "section") else [el]
    # An empty anchor (Gutenberg): the paragraphs with text that follow it, up to the next one.
    start = el
    parent = el.getparent()
    if parent is not None and local_name(parent) in ("p", "div", "span") and not clean("".join(parent.itertext())):
        start = parent
    body = []
    for sibling in start.itersiblings():
        if not isinstance(sibling.tag, str):
            continue
        tag = local_name(sibling)
        if tag in HEADING_TAGS or tag in ("hr", "section", "h1") or not clean("".join(sibling.itertext())):
            break
        if any(d.get("id") in targets for d in sibling.iter() if isinstance(d.tag, str)):
            break
        body.append(sibling)
        if len(body) >= 20:
            break
    return body


def _note_text(elements: list, href_marker: str | None = None) -> str:
    """What is read of a note: its text without its label, backlinks or a leading link back to
    the place it annotates ("Line 20."), and without the [ … ] Gutenberg wraps notes in."""
    parts: list[str] = []
    state = {"seen_text": False}

    def read(root):
        # Depth first with an explicit stack (any depth of nesting); strings are tails.
        stack: list = [(root, True)]
        while stack:
            el, top = stack.pop()
            if isinstance(el, str):
                parts.append(el)
                state["seen_text"] = state["seen_text"] or bool(el.strip())
                continue
            if not isinstance(el.tag, str) or (is_unread(el) and not top) or is_noteref(el):
                continue
            if "backlink" in epub_types(el) or el.get("role") == "doc-backlink":
                continue
            tag = local_name(el)
            if tag == "a" and _is_internal_link(el) and not state["seen_text"]:
                state["seen_text"] = True  # the note's own label, linking back to the text
                continue
            if tag in BLOCK_TAGS or tag == "br":
                parts.append(" ")
            if el.text:
                parts.append(el.text)
                state["seen_text"] = state["seen_text"] or bool(el.text.strip())
            after: list = []
            for child in el:
                after.append((child, False))
                if child.tail:
                    after.append((child.tail, False))
            stack.extend(reversed(after))

    for element in elements:
        read(element)
        parts.append(" ")
    text = clean("".join(parts))
    text = NOTE_LABEL.sub("", text, count=1)
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return text


def _merge_heading_only(spans: list[Span]) -> list[Span]:
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
                _add_sources(result[-1], span.sources)
                continue
            pending.append(span)
            continue
        if pending:
            span = _join(pending + [span], body=span)
            pending = []
        result.append(span)
    if pending:
        if result:
            for span in pending:
                result[-1].blocks.extend(span.blocks)
                _add_sources(result[-1], span.sources)
        else:
            result.append(_join(pending, body=pending[-1]))
    return result


def _join(spans: list[Span], body: Span) -> Span:
    joined = Span(body.entry)
    for span in spans:
        joined.blocks.extend(span.blocks)
        _add_sources(joined, span.sources)
    return joined


def _add_sources(span: Span, sources: list[str]):
    for source in sources:
        if source not in span.sources:
            span.sources.append(source)


def _book_wrappers(entries: list[TocEntry], book_title: str) -> set[int]:
    """Entries that name the whole book rather than a part of it."""
    top = [e for e in entries if e.parent is None]
    wrappers = {id(e) for e in entries if _same_title(e.title, book_title)}
    if len(top) == 1:
        wrappers.add(id(top[0]))
    return wrappers


def _same_title(a: str, b: str) -> bool:
    def fold(s):
        return re.sub(r"\W+", " ", s.casefold()).strip()
    return fold(a) == fold(b)


def _chapter_title(span: Span, no_text: set[int], wrapper: set[int]) -> str:
    prefix = [a.title for a in span.entry.ancestors()
              if (a.doc is None or id(a) in no_text) and id(a) not in wrapper and a.title]
    return TITLE_SEPARATOR.join(prefix + [span.entry.title or "Untitled"])


# ----------------------------------------------------------------------------------------------
# Per-document facts


def _doc_info(root, name: str, anchors: set[str], items) -> DocInfo:
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
    return DocInfo(_doc_title(root), types, anchor_types, _images(body, name), found, has_text)


def _images(body, name: str) -> list[str]:
    """Resolved file names of the <img> and SVG <image> pictures in a document."""
    images = []
    for el in body.iter():
        tag = local_name(el)
        src = el.get("src") if tag == "img" else el.get(XLINK_HREF) or el.get("href") if tag == "image" else None
        if src and not src.startswith("data:"):
            images.append(_resolve(name, src)[0])
    return images


def _doc_title(root) -> str:
    """A name for a file that no TOC entry names: its first heading, else its <title>."""
    for wanted in (("h1", "h2", "h3"), ("title",)):
        for el in root.iter():
            if local_name(el) in wanted:
                text = clean("".join(el.itertext())).strip("\"'“”")
                if text:
                    return text
    return ""


def _raw(item) -> bytes:
    """The file's bytes as stored. (ebooklib's EpubHtml.get_content() rebuilds the document from
    its body, dropping <head> and costing a re-parse.)"""
    return item.content if item.content is not None else item.get_content()


def _raster_in_svg(data: bytes, name: str, book: epub.EpubBook) -> Cover | None:
    """An SVG cover that wraps a raster <image> (inline data URI or a file in the book)."""
    root = etree.fromstring(drop_invalid_char_refs(data)[0],
                            etree.XMLParser(recover=True, no_network=True, huge_tree=True))
    if root is None:
        return None
    for el in root.iter():
        if local_name(el) != "image":
            continue
        href = el.get(XLINK_HREF) or el.get("href") or ""
        match = re.match(r"data:(image/[\w+.-]+);base64,(.*)", href, re.DOTALL)
        if match and match.group(1) in RASTER_TYPES:
            try:
                return Cover(base64.b64decode(match.group(2)), match.group(1))
            except binascii.Error:  # a broken cover is no cover; the book is still readable
                return None
        item = book.get_item_with_href(_resolve(name, href)[0]) if href else None
        if item is not None and item.media_type in RASTER_TYPES:
            return Cover(item.get_content(), item.media_type)
    return None
