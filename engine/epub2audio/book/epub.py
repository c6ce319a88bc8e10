"""EPUB → Book: open and validate, walk the spine, cut it into chapters at TOC entries, skip
front/back matter that should not be read, and read the metadata and cover.

How chapters are made
---------------------
Reading order is the spine (items with linear="no" are skipped and reported, unless a TOC entry
points at them: then they are read where the TOC puts them). Chapter boundaries come from the
EPUB3 nav document, else the NCX (book/toc.py); cutting and skipping live in book/chapters.py. An
entry pointing at `file#id` splits that file at the element with that id; text runs from one
entry's target to the next entry's target in spine order, across as many files as lie between
them. Text before the first entry is kept as its own chapter (titled by its first heading, else the
book title) unless it is front matter.

* One chapter (one marker) per TOC entry, titled exactly by its label. A heading-only entry ("Book
  the First", "Act I") keeps its own short chapter that reads its heading; an unlinked <span>
  divider, or one sharing its child's target, reads its label, placed before its first child.
* Skipped and reported, with the evidence (each part's kind is decided in book/classify.py, from
  evidence it names): cover, table of contents, title and half-title pages,
  copyright page / imprint, colophon, index, transcriber's notes, publisher's adverts and the
  Project Gutenberg licence. Evidence, in order: epub:type or DPUB-ARIA role on the target (or
  the file's body / first typed section), EPUB3 landmarks or the EPUB2 guide, the entry's title,
  the file name (titlepage, halftitle, copyright, imprint), then the text of short spans (rights
  text: ©, "All rights reserved", ISBN, "Tous droits", 版权, זכויות, where it is most of the page;
  a note on the e-book: "this e-book", "an illustrated edition of this title"; an advert: four
  kinds of sales talk, "on-demand digital library", "pricing", "subscribers", a URL), a short entry
  named like the book (a title page; the heading-only entries after it in its file are its lines)
  and, before any text is read, a page of short lines with one naming the book or a byline naming
  its author ("[Illustration]", "BY JOHN SMITH": a title page). A note pointing to another
  edition among the first paragraphs read ("There is an illustrated edition of this title") is
  taken out of them. Entries
  nested under a skipped one in the same file go with it. `keep_front_matter` reads title,
  copyright and imprint pages, transcriber's notes and adverts after all. The Project Gutenberg
  header and footer are cut from the text ("*** START/END OF THE PROJECT GUTENBERG EBOOK").
  Each skip carries the characters it leaves unread and its evidence; guesses (title, file name,
  text) are bounded in book/skips.py: a page at most, never a part with TOC sections under it,
  2 % of the text together (past that they are read, with a warning). A © line in a longer text
  is not a copyright page. A book that skips more than 2 % of its text says so in a warning.
* A chapter with no text at all (an image-only page) is reported as skipped.
* Notes (`notes=`): note references are found by EPUB semantics (epub:type noteref,
  role="doc-noteref", and for EPUB2/Gutenberg books a link whose text is only a number or note
  symbol); the note is the element the link points at, widened to the enclosing footnote /
  endnote / rearnote / note / aside (or doc-footnote, doc-endnote), or, when the target is an
  empty anchor (Gutenberg), the text-bearing paragraphs that follow it up to the next anchor.
  - "skip" (default): markers are never read, inline <aside> notes are not read, nor are notes
    that sit in the chapter that refers to them (Gutenberg's "[1]" footnotes gathered at the
    chapter's end, or in a notes file no TOC entry names) when the markup says they are notes
    (note epub:type / role / <aside>, or a label linking back to the reference); notes that live
    in their own section (The Waste Land's NOTES, Herodotus's "NOTES TO BOOK N") stay where they
    are, as chapters: they are part of the book. What is not read is listed under "Skipped"
    with its size ("Footnotes", "N margin notes").
  - A link to an earlier place (a note's label pointing back at its reference) is not a note
    reference, under any policy.
  - Margin notes (epub:type sidenote / marginalia, class "sidenote", "marginnote", ..., an
    <aside> that no reference points at and that is not a sidebar) follow the policy too: not
    read under "skip", "Note: …" after the paragraph they stand beside under "inline", at the
    chapter's end under "chapter-end".
  - "inline": each note is read once, as "Note: …", right after the paragraph (or stanza) that
    first references it, and is no longer read where it lives. A notes section left with
    nothing but headings is skipped ("notes (read inline)"); a sub-heading whose notes all moved
    is dropped.
  - "chapter-end": as inline, but a chapter's notes are read at its end, after "Notes for this
    chapter.", numbered in the order they are referenced ("Note 1: …").
* Scene breaks, headings and ssml:ph pronunciations are carried to `Chapter.breaks`,
  `Chapter.kinds` and `Chapter.pronunciations`; `Book.pronunciation_lexicon` holds the entries
  of the book's PLS lexicons (manifest items of type application/pls+xml).
* Fallback: when the TOC is not usable (it yields no chapter at all, as when every entry points
  into the Gutenberg licence; one chapter over three or more spine files; or one chapter holding
  most of the book and several chapter markers), chapters are cut where the text starts them:
  at chapter markers ("第N回", "Chapter IV"), else at runs of h1-h3 headings, else at spine files
  (book/splitting.py); a piece still over about two hours with nothing to cut at is cut into
  near-equal parts at paragraph ends.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

from ebooklib import epub
from lxml import etree

from ..errors import InputError
from .boilerplate import drop_repeated
from .chapters import Cutter, DocInfo, DocStart, Boundary, doc_info, doc_title, images, to_chapter
from .container import open_container
from .formats import readable_epub
from .metadata import Metadata
from . import skips
from .model import Book, Skipped
from .normalize import reads_numbers
from .notes import NOTE_POLICIES, NOTES_HEADING, Notes  # noqa: F401 (NOTES_HEADING: part of this module's API)
from .package import PackageError, PartUnreadable, read_package
from .splitting import is_chapter_marker, split_without_toc, toc_is_usable
from .text import Anchor, Block, Content, find_body, local_name, parse_document, parse_xhtml, read_blocks
from .toc import TocEntry, flatten, landmarks, read_toc, resolve

XHTML_TYPES = ("application/xhtml+xml", "text/html", "application/x-dtbook+xml")


# ----------------------------------------------------------------------------------------------
# Public entry point


def load_book(path: str | Path, notes: str = "skip", keep_front_matter: bool = False,
              image_alt: bool = True) -> Book:
    """Read an EPUB file into a Book. Raises InputError (one line, naming the file) if unreadable,
    or if it has no text to read at all. `notes`: "skip", "inline" or "chapter-end" (see the module
    docstring). `keep_front_matter`: read title, copyright and imprint pages, transcriber's notes
    and publisher's adverts after all. `image_alt`: read the text alternatives of content pictures
    as a short note ("Image: …")."""
    path = Path(path)
    if notes not in NOTE_POLICIES:
        raise InputError(f"--notes must be one of {', '.join(NOTE_POLICIES)}, not {notes!r}")
    path = readable_epub(path)  # MOBI, DOCX, PDF, ...: the EPUB calibre makes of it (formats.py)
    _check_file(path)
    try:
        package, missing = _open_epub(path)
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
        loader = _Loader(path, package, notes, keep_front_matter, image_alt)
        if missing:
            loader.warnings.append(_missing_warning(missing))
        book = loader.load()
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, KeyError, ValueError, etree.LxmlError,
            epub.EpubException) as exc:
        raise InputError(f"{path.name}: not a readable EPUB ({_describe(exc)})") from None
    if not any(p.strip() for c in book.chapters for p in c.paragraphs):
        # a comic, a fixed-layout picture book, or chapters with nothing in them
        raise InputError(f"{path.name}: contains no text to read ({_nothing_read(book)})")
    return book


def _nothing_read(book: Book) -> str:
    if not book.skipped:
        return "no chapters"
    images = sum(1 for s in book.skipped if "images only" in s.reason)
    parts = f"{len(book.skipped)} part{'s' if len(book.skipped) != 1 else ''} skipped"
    return f"{parts}, {images} of them images only" if images else parts


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


def _open_epub(path: Path) -> tuple[epub.EpubBook, list[str]]:
    """The package as ebooklib reads it, and the hrefs of the files it lists that the archive lacks
    and nothing read needs (pictures, sounds, fonts)."""
    container = open_container(path)  # checked, DRM-free, and only what the book needs, inflated
    if not [el for el in container.package.iter() if local_name(el) == "itemref"]:
        raise InputError(f"{path.name}: not a valid EPUB (the package has no spine)")
    # ebooklib's reader without its nav/NCX parsing: we read nav and NCX ourselves (package.py).
    return read_package(container.archive), container.missing


def _digits_left_to_the_voice(book: Book) -> int:
    """The digits of the book's own language (passages in another are read by their own rules) where
    neither our rules nor num2words read numbers (Chinese, Hindi, Xhosa …)."""
    if not book.language or reads_numbers(book.language):
        return 0
    count = 0
    for chapter in book.chapters:
        for i, paragraph in enumerate(chapter.paragraphs):
            count += sum(c.isdigit() for c in paragraph)
            count -= sum(c.isdigit() for a, b, _tag in chapter.languages.get(i, []) for c in paragraph[a:b])
    return count


def _missing_warning(missing: list[str]) -> str:
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    files = "file" if len(missing) == 1 else "files"
    return (f"{len(missing)} {files} the book lists {'is' if len(missing) == 1 else 'are'} missing from it "
            f"({shown}); nothing read needs {'it' if len(missing) == 1 else 'them'}, so the book is read without")


def _describe(exc: Exception) -> str:
    if isinstance(exc, (zipfile.BadZipFile, zlib.error, EOFError)):
        return "the zip archive is truncated or damaged"
    if isinstance(exc, KeyError):
        return f"a file it lists is missing: {exc.args[0] if exc.args else exc}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__



class _Loader:
    def __init__(self, path: Path, book: epub.EpubBook, notes: str = "skip", keep_front_matter: bool = False,
                 image_alt: bool = True):
        self.path = path
        self.image_alt = image_alt
        self.keep_front_matter = keep_front_matter
        self.book = book
        self.meta = Metadata(book)
        self.roots: dict[str, object] = {}
        self.skipped: list[Skipped] = []
        # What could not be read as it should, one line each naming the part (Book.warnings).
        self.warnings: list[str] = []
        # No dc:title: the file's name, made valid text if it is not UTF-8 (it becomes a tag).
        self.title = self.meta.first("title") or os.fsencode(path.stem).decode("utf-8", "replace")
        self.nav_item = next((i for i in book.get_items() if isinstance(i, epub.EpubNav)), None)
        self.nav_root = self._parse(self.nav_item.get_name(), _raw(self.nav_item)) if self.nav_item else None
        self.landmarks = landmarks(book, self.nav_item, self.nav_root)
        self.cover_images = {i.get_name() for i in self.meta.cover_items()}
        self.raw_toc = read_toc(book, self.nav_item, self.nav_root, self.warnings)
        self.titles_by_doc: dict[str, str] = {}
        for entry in flatten(self.raw_toc):
            if entry.doc:
                self.titles_by_doc.setdefault(entry.doc, entry.title)
        self.notes = Notes(notes, self._root)

    def load(self) -> Book:
        spine = self._linear_spine()
        entries = self._toc(set(spine))
        self.docs: dict[str, DocInfo] = {}
        self.notes.find(spine)
        cutter = Cutter(self.title, self.docs, self.landmarks, "landmarks" if self.nav_item else "guide",
                        self.cover_images, self.skipped, self.keep_front_matter, self.warnings,
                        self.meta.authors())
        stream = self._stream(spine, entries)
        stream = drop_repeated(stream, self.skipped)
        stream = cutter.trim_gutenberg(stream)
        spans = cutter.spans(stream, [e for e in entries if e.doc])
        self.notes.lift(spans)
        titled = cutter.chapters(spans)
        if not toc_is_usable(titled):
            titled = split_without_toc(titled, {name: info.title for name, info in self.docs.items()})
            titled = cutter.skip_front_piece(titled, is_chapter_marker)
        titled = [(title, self.notes.place(span)) for title, span in titled]
        self.skipped.extend(self.notes.skipped())
        cover_docs = [n for n in spine if "cover" in self.docs[n].types] + [
            d for (d, _), types in self.landmarks.items() if "cover" in types and d in self.docs
        ] + self.nonlinear_docs
        book = Book(
            path=str(self.path),
            title=self.title,
            authors=self.meta.authors(),
            language=self.meta.first("language"),
            chapters=[to_chapter(title, span) for title, span in titled],
            skipped=self.skipped,
            date=self.meta.date(),
            description=self.meta.description(),
            publisher=self.meta.first("publisher"),
            identifier=self.meta.identifier(),
            series=self.meta.series()[0],
            series_index=self.meta.series()[1],
            cover=self.meta.cover(cover_docs, self._doc_images),
            pronunciation_lexicon=self._pls_entries(),
            warnings=self.warnings,
        )
        skips.account(book)
        unread = _digits_left_to_the_voice(book)
        if unread:
            self.warnings.append(f"{unread:,} digit{'s are' if unread != 1 else ' is'} left as written: no number "
                                 f"reading for the book's language ({book.language}), so the voice says "
                                 f"{'them' if unread != 1 else 'it'} as its own front end can")
        return book

    def _doc_images(self, name: str) -> list[str]:
        if name in self.docs:
            return self.docs[name].images
        item = self.book.get_item_with_href(name)
        return images(find_body(parse_xhtml(_raw(item))), name) if item is not None else []

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

    def _linear_spine(self) -> list[str]:
        """Spine file names in reading order; the nav document and non-linear items are reported,
        except non-linear items that a TOC entry points at: those are read where the TOC puts them."""
        names, self.nonlinear_docs = [], []
        nonlinear: dict[str, object] = {}
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
                chars, shown = _unread_text(self.nav_root)
                self.skipped.append(Skipped(self._doc_label(item), "table of contents (nav document)", chars,
                                            preview=shown))
            elif str(linear).lower() == "no":
                self.nonlinear_docs.append(name)
                nonlinear.setdefault(name, item)
            elif name not in names:
                names.append(name)
        placed = self._place_by_toc(names, set(nonlinear))
        for name, item in nonlinear.items():
            if name not in placed:
                chars, shown = _unread_text(parse_xhtml(_raw(item)))
                self.skipped.append(Skipped(self._doc_label(item), "non-linear spine item", chars, preview=shown))
        return names

    def _place_by_toc(self, names: list[str], nonlinear: set[str]) -> set[str]:
        """Insert the non-linear files that TOC entries point at after the file of the entry before
        them (at the start if none); returns the files placed."""
        placed: set[str] = set()
        previous = None  # the file, already in reading order, that the previous entry points at
        for entry in flatten(self.raw_toc):
            if entry.doc in nonlinear and entry.doc not in placed and entry.doc not in names:
                at = names.index(previous) + 1 if previous in names else 0
                while at < len(names) and names[at] in placed:  # after those placed there before
                    at += 1
                names.insert(at, entry.doc)
                placed.add(entry.doc)
            if entry.doc in names:
                previous = entry.doc
        return placed

    def _doc_label(self, item) -> str:
        """A name for a spine file in the skip report: its TOC label, heading or <title>."""
        return (self.titles_by_doc.get(item.get_name()) or doc_title(parse_xhtml(_raw(item)))
                or item.get_name())


    def _toc(self, spine: set[str]) -> list[TocEntry]:
        """All entries, flattened; links to files outside the linear spine are unlinked."""
        entries = flatten(self.raw_toc)
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
        opened: set[int] = set()

        def boundaries(entry: TocEntry, source: str) -> list[Boundary]:
            """The entry's boundary, after one for each unlinked divider above it not yet opened."""
            found = [Boundary(a, None) for a in entry.ancestors() if a.doc is None and id(a) not in opened]
            opened.update(id(b.entry) for b in found)
            return found + [Boundary(entry, source)]

        gutenberg_box = 0  # characters of ebookmaker's header/licence boxes, in every file
        tts_skip = 0  # characters the book marks not to be voiced (calibre's data-calibre-tts)
        link_lines, link_texts = 0, []  # characters of blocks that are all links within the book, and their first lines
        order = {name: number for number, name in enumerate(spine)}
        for number, name in enumerate(spine):
            root = self._root(name)
            doc_entries = by_doc.get(name, [])
            anchors = {e.fragment for e in doc_entries if e.fragment}
            content = Content(self.meta.first("language") or None, self.image_alt,
                              lambda src, doc=name: resolve(doc, src)[0] in self.cover_images,
                              lambda href, doc=name, at=number: _earlier(order.get(resolve(doc, href)[0]), at))
            items = read_blocks(root, anchors, self.notes.elements.get(name, frozenset()), content)
            self.warnings.extend(_unread_warning(name, kind, count) for kind, count in content.unread.items())
            gutenberg_box += content.gutenberg_box_chars
            tts_skip += content.tts_skip_chars
            link_lines += content.link_line_chars
            link_texts += content.link_lines
            for it in items:
                if isinstance(it, Block):  # the file a block is read from: for notes and for splitting
                    it.source_doc = name
            self.docs[name] = doc_info(root, name, anchors, items)
            stream.append(DocStart(name))
            # Entries whose anchor is missing start at the top of their file.
            for entry in doc_entries:
                if not entry.fragment or entry.fragment not in self.docs[name].found:
                    stream.extend(boundaries(entry, name))
            for it in items:
                if isinstance(it, Anchor):
                    for e in doc_entries:
                        if e.fragment == it.id:
                            stream.extend(boundaries(e, f"{name}#{it.id}"))
                else:
                    stream.append(it)
        if gutenberg_box:
            self.skipped.append(Skipped("Project Gutenberg header and licence", "Project Gutenberg boilerplate "
                                        "(ebookmaker's pgheader/pgfooter boxes)", gutenberg_box, "structure"))
        if tts_skip:
            self.skipped.append(Skipped("Passages marked not to be read", 'calibre\'s data-calibre-tts="__skip__"',
                                        tts_skip, "structure"))
        if link_lines:
            self.skipped.append(Skipped("Lines of links", "lines whose text is all links within the book "
                                        "(contents, index or back-links inside the text)", link_lines, "structure",
                                        preview=skips.preview(link_texts)))
        return stream


def _earlier(target: int | None, at: int) -> bool | None:
    """Whether spine file `target` comes before file `at`; None for the same file (or one not in
    the spine, which no earlier text holds)."""
    if target is None:
        return False
    return None if target == at else target < at


def _unread_text(root) -> tuple[int, str]:
    """The characters of the text a file would be read as, and its first words (for the skip
    report of a file not read)."""
    texts = [it.text for it in read_blocks(root) if isinstance(it, Block)] if root is not None else []
    return sum(map(len, texts)), skips.preview(texts)


def _unread_warning(name: str, kind: str, count: int) -> str:
    """One line per file and kind of content not read ("ch2.xhtml: 3 <iframe> elements not read")."""
    plural = "s" if count != 1 else ""
    if kind.startswith("MathML"):
        return f"{name}: {count} {kind} element{plural} read without their structure (only their text)"
    if kind.startswith("formula picture"):
        return f"{name}: {count} formula{plural} drawn as a picture with a TeX description not read"
    if kind == "SVG <text>":
        return f"{name}: {count} SVG drawing{plural} with <text> not read (only its title)"
    return f"{name}: {count} {kind} element{plural} not read (nothing to read aloud in them)"


def _raw(item) -> bytes:
    """The file's bytes as stored. (ebooklib's EpubHtml.get_content() rebuilds the document from
    its body, dropping <head> and costing a re-parse.)"""
    return item.content if item.content is not None else item.get_content()
