"""Cutting the reading order into chapters: a stream of blocks with a boundary per TOC entry becomes
spans of text; spans that are front/back matter are skipped (with the reason), the rest are titled."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from . import skips
from .classify import (ADVERT_CUES, ADVERT_TEXT, COPYRIGHT_TEXT, CREDIT_LINE, CREDIT_TEXT, EDITION_NOTE,  # noqa: F401
                       EDITION_NOTE_TEXT, REFERENCE_LINE, REFERENCE_LINES, SHORT_TEXT, SKIP_TITLES, SKIP_TYPES,
                       TITLE_LINE, TITLE_PAGE_TEXT, Evidence, References, classify, folded_title, list_heading, marked)
from .model import Chapter, Skipped
from .text import Anchor, Block, clean, epub_types, find_body, local_name
from .toc import TocEntry, resolve

XLINK_HREF = "{http://www.w3.org/1999/xlink}href"

# A title page's lines: short, no sentence in them; a byline starts with "by" in some language.
SENTENCES = re.compile(r"[a-z]{2}[.!?]\s+\S.*[a-z]{2}[.!?]")  # two sentences: prose ("BY J. M. BARRIE" is a line)
PLACEHOLDER = re.compile(r"^\[(illustration|frontispiece|image|picture)\b[^\]]*\]$", re.IGNORECASE)
BYLINE = re.compile(r"^(by|par|von|di|por|door|av|af|de)\s+\S", re.IGNORECASE)
TITLE_PAGES = ("title page", "half-title page")
RIGHTS_LINE = 300  # a rights line on a title page ("Entered according to Act of Congress, in the year 1892, …")
# A title page with the book's contents list after it: the list's lines are each checked to be a TOC
# entry's words, so there may be any number of them.
TITLE_AND_CONTENTS = "title page (its lines and contents lines)"
CONTENTS_LINES = 3
CONTENTS_WORDS = frozenset(["page", "pages", "chapter", "chapitre", "kapitel", "capítulo", "seite", "p", "pp"])
ROMAN = re.compile(r"^[ivxlcdm]+$")
# A note's marker at the end of a TOC label: "[131]", "[*]", a superscript number.
LABEL_NOTE_MARKER = re.compile(r"\s*(\[(\d{1,4}|[*†‡§])\]|[¹²³⁴⁵⁶⁷⁸⁹⁰]+|\*)(?P<end>[.:;]?)$")
OPENING = 12  # words: where a list's line is looked for in a paragraph or line elsewhere
CODE = re.compile(r"^[A-Z][A-Z0-9]{1,7}$")  # a label's code ("EOPSS", "TI86")
FORM_LINES = 3  # found lines of one form that vouch for the rest of that form
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

    entry: TocEntry | None  # None: text before the first TOC entry, or a file that no entry names
    blocks: list[Block] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    types: set[str] = field(default_factory=set)  # epub:type / landmark evidence at its start
    images: int = 0
    skip: str | None = None
    # The span whose skip this one shares (the title page whose lines it holds, the skipped entry
    # it is nested under): a guess is bounded by the size of all it takes.
    skip_from: Span | None = None
    label: str | None = None  # the name of a file that no entry names, skipped whole
    # The report of a file skipped whole, made where the file starts (reports keep reading order).
    record: Skipped | None = None
    dropped: list[Skipped] = field(default_factory=list)  # paragraphs taken out of it (a note on the e-book)

    @property
    def has_body(self) -> bool:
        return any(not b.heading for b in self.blocks)

    @property
    def chars(self) -> int:
        return sum(len(b.text) for b in self.blocks)

    @property
    def unread_chars(self) -> int:
        """What skipping it leaves unread: a title page's epigraph and dedication are read anyway."""
        title_page = bool(self.skip) and self.skip.startswith(TITLE_PAGES)
        return sum(len(b.text) for b in self.blocks if not (title_page and b.inscription))

    @property
    def evidence(self) -> str:
        return skips.evidence_of((self.skip_from or self).skip or "")


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
    lone_line: str = ""  # the file's text when it is one short block (a heading over links, say)
    links: int = 0  # links to other files of the book


class Cutter:
    """Cuts one book's stream into titled spans, reporting what it skips in `skipped`."""

    def __init__(self, title: str, docs: dict[str, DocInfo], landmarks: dict, landmark_source: str,
                 cover_images: set[str], skipped: list[Skipped], keep_front_matter: bool = False,
                 warnings: list[str] | None = None, authors: list[str] = ()):
        self.title = title
        # Surnames of the book's authors: a byline that names one is a title page's line.
        self.surnames = {fold(a).split()[-1] for a in authors if fold(a)}
        # Their names as a title page prints them on a line of their own ("CHARLES BAUDELAIRE" under
        # a lone "par"), in either order ("Baudelaire, Charles" in the package).
        self.author_lines = {fold(a) for a in authors if fold(a)} | {
            fold(" ".join(reversed(a.split(",", 1)))) for a in authors if "," in a}
        self.warnings = warnings if warnings is not None else []
        self.docs = docs
        self.landmarks = landmarks
        self.landmark_source = landmark_source  # "landmarks" (EPUB3 nav) or "guide" (EPUB2)
        self.cover_images = cover_images
        self.skipped = skipped
        self.keep_front_matter = keep_front_matter
        self.label_words: list[set[str]] = []  # each TOC label's words, folded (contents lines are made of them)
        self.label_texts: set[str] = set()  # each TOC label, folded
        self.label_starts: set[str] = set()  # their first two words and more ("section wila" of "Section WILA …")
        self.openings: dict[str, list] | None = None  # _openings

    def trim_gutenberg(self, stream: list) -> list:
        """Cut the Project Gutenberg header (up to '*** START OF …') and footer ('End of …')."""
        blocks = [i for i, it in enumerate(stream) if isinstance(it, Block)]
        start = next((i for i in blocks if PG_START.match(stream[i].text)), None)
        if start is not None:
            following = next((i for i in blocks if i > start), None)
            if following is not None and stream[following].text.lower().startswith("produced by"):
                start = following
            chars = sum(len(it.text) for it in stream[:start + 1] if isinstance(it, Block))
            stream = [it for i, it in enumerate(stream) if i > start or not isinstance(it, Block)]
            self.skipped.append(Skipped("Project Gutenberg header", "Project Gutenberg boilerplate", chars,
                                        preview=skips.preview(it.text for it in stream[:start + 1] if isinstance(it, Block))))
        end = next((i for i, it in enumerate(stream) if isinstance(it, Block) and PG_END.match(it.text)), None)
        if end is not None:
            chars = sum(len(it.text) for it in stream[end:] if isinstance(it, Block))
            shown = skips.preview(it.text for it in stream[end:] if isinstance(it, Block))
            stream = [it for i, it in enumerate(stream) if i < end or not isinstance(it, Block)]
            self.skipped.append(Skipped("Project Gutenberg footer", "Project Gutenberg boilerplate", chars, preview=shown))
        return stream

    def spans(self, stream: list, linked: list[TocEntry]) -> list[Span]:
        """Cut the stream at boundaries. Files that are not TOC targets continue the current span,
        unless the file itself is front/back matter to skip (a second, short table of contents)."""
        targets = {e.doc for e in linked}
        spans = [Span(None)]
        current = spans[0]  # the span that text goes on
        # A file skipped whole is a part of its own, so that its size is known and it can be read
        # after all; the file after it continues the span before it, as if it were not there.
        skipped_file = None
        unsourced = None  # a file that continues the current span, noted once it yields text
        for it in stream:
            if isinstance(it, DocStart):
                info = self.docs[it.name]
                reason = None if it.name in targets else self._doc_skip_reason(it.name, info)
                skipped_file = None
                if self._skips(reason):
                    skipped_file = Span(None, sources=[it.name], types=set(info.types), skip=reason,
                                        label=info.title or it.name)
                    skipped_file.record = Skipped(skipped_file.label, reason, evidence=skipped_file.evidence)
                    self.skipped.append(skipped_file.record)
                    spans.append(skipped_file)
                elif reason or self._marks_only_its_file(current):
                    # Front matter kept on request is its own chapter, not the end of the last. So is
                    # a file after a part the markup calls a cover, title page or contents: the marking
                    # is that file's, not the next one's (calibre's TXT books: one TOC entry, "Start",
                    # on its cover page, and the whole book after it in files no entry names).
                    current = Span(None, types=set(info.types) if reason else set())
                    spans.append(current)
                unsourced = it.name
            elif isinstance(it, Boundary):
                skipped_file, unsourced = None, None
                if it.source is None:  # an unlinked divider (<span> in the nav): a marker of its own
                    current = Span(it.entry)
                    spans.append(current)
                    continue
                doc, _, fragment = it.source.partition("#")
                info = self.docs[doc]
                types = info.anchor_types.get(fragment, set()) if fragment else info.types
                current = Span(it.entry, sources=[it.source], types=types,
                               images=len(info.images) if not fragment else 0)
                spans.append(current)
            elif skipped_file is not None:
                skipped_file.blocks.append(it)
            else:
                if unsourced:
                    if current.entry is None and not current.blocks:  # text before the first entry
                        current.types = set(self.docs[unsourced].types)
                    add_sources(current, [unsourced])
                    unsourced = None
                current.blocks.append(it)
        self.label_words = [set(fold(s.entry.title).split()) for s in spans if s.entry is not None]
        for s in spans:
            words = fold(s.entry.title).split() if s.entry is not None else []
            self.label_texts.add(" ".join(words))
            self.label_starts.update(" ".join(words[:n]) for n in range(2, len(words)))
        front = True  # no text read yet: where a title page is
        for span in spans:
            if span.record is None:
                span.skip = self._span_skip_reason(span, front, spans)
                if span.skip and span.evidence == "guess" and span.unread_chars > page_bound(span):
                    span.skip = None  # a guess skips a page at most
            front = front and (bool(span.skip) or not span.has_body)
        _title_page_lines(spans)
        _inherit_skips(spans)
        self._bound_guesses(spans)
        self._drop_edition_note(spans)
        return spans

    def _marks_only_its_file(self, span: Span) -> bool:
        """Whether `span` is a TOC entry's part whose own file the markup (epub:type, landmarks,
        guide) marks as front or back matter: what follows it in other files is not marked."""
        if span.entry is None or not span.entry.doc:
            return False
        landmark = self.landmarks.get((span.entry.doc, span.entry.fragment), set())
        return any(kind in span.types or kind in landmark for kind in SKIP_TYPES)

    def _drop_edition_note(self, spans: list[Span]):
        """A note on the e-book edition among the first paragraphs of the first part read, in a
        part too long to skip whole ("There is an illustrated edition of this title …"), is taken
        out of it, if the guesses' budget allows."""
        opening = next((s for s in spans if not self._skips(s.skip) and s.has_body), None)
        if opening is None or not self._skips("transcriber's note (text)"):
            return
        first = [b for b in opening.blocks if not b.heading][:3]
        note = next((b for b in first if len(b.text) <= EDITION_NOTE_TEXT and EDITION_NOTE.search(b.text)), None)
        if note is None:
            return
        recorded = {id(s.record) for s in spans if s.record is not None}
        total = sum(s.chars for s in spans) + sum(r.chars for r in self.skipped if id(r) not in recorded)
        guessed = sum(s.unread_chars for s in spans if self._skips(s.skip) and s.evidence == "guess")
        if skips.over_budget(guessed + len(note.text), total):
            return
        opening.blocks.remove(note)
        title = skips.short_title(note.text)
        opening.dropped.append(Skipped(title, "transcriber's note (text)", len(note.text), "guess",
                                       preview=skips.preview([note.text])))

    def _bound_guesses(self, spans: list[Span]):
        """Read what a guess would skip past its bounds (book/skips.py): a part larger than a page
        with all it takes along, a part with TOC sections under it, and, in reading order, every
        guessed part from the one that takes the guesses past their budget on (said in a warning:
        front matter comes first, so the title and rights pages stay skipped, a rule misfiring
        through the book does not)."""
        groups: dict[int, tuple[Span, list[Span]]] = {}
        for span in spans:
            if span.record is not None:
                span.record.chars = span.unread_chars
            if self._skips(span.skip):
                root = span.skip_from or span
                groups.setdefault(id(root), (root, []))[1].append(span)
        by_entry = {id(s.entry): s for s in spans if s.entry is not None}
        guessed = []
        for root, members in groups.values():
            if root.evidence != "guess":
                continue
            # (a title page's lines naming the book and its author, "A DOG'S TALE / by Mark Twain /
            # Image: Frontpiece.jpg", with the book nested under them, are still the title page;
            # "Introduction / Par l'éditeur." with its sections is the editor's introduction)
            sections = _has_sections(root, by_entry) and not (
                root.skip.startswith(TITLE_PAGES) and self._title_page_text(root) and self._names_author(root))
            if sum(m.unread_chars for m in members) > page_bound(root) or sections:
                self._read_back(members)
            else:
                guessed.append((root, members))
        if not guessed:
            return
        recorded = {id(s.record) for s in spans if s.record is not None}
        total = sum(s.chars for s in spans) + sum(r.chars for r in self.skipped if id(r) not in recorded)
        cost, past = 0, []
        for root, members in guessed:
            size = sum(m.unread_chars for m in members)
            cost += size
            if past or skips.over_budget(cost, total):
                past.append((Skipped(root.label or span_title(root, self.title), root.skip, size, "guess"), members))
        if past:
            self.warnings.append(skips.read_back_warning([part for part, _ in past], cost, total))
            for _, members in past:
                self._read_back(members)

    def _read_back(self, members: list[Span]):
        for span in members:
            if span.record is not None:
                self.skipped.remove(span.record)
                span.record = None
            span.skip, span.skip_from = None, None

    def _skips(self, reason: str | None) -> bool:
        """Whether a part skipped for `reason` stays unread (--keep-front-matter reads some)."""
        return reason is not None and not (self.keep_front_matter and reason.split(" (")[0] in FRONT_MATTER)

    def _doc_skip_reason(self, name: str, info: DocInfo) -> str | None:
        """Why a file that no TOC entry points at is not read, if it is not."""
        reason = marked(info.types, self.landmarks.get((name, None), set()), self.landmark_source, "", name)
        if not reason and info.lone_line and info.links >= 2 and SKIP_TITLES[0][0].search(folded_title(info.lone_line)):
            # "Table of Contents" over a list of links (calibre's MOBI and AZW3 put one at the end):
            # the links are not read (text.py), and the heading is no part of the chapter before it
            return "table of contents (a heading over links)"
        if reason or info.has_text:
            return reason
        if set(info.images) & self.cover_images:
            return "cover (cover image page)"
        # A file with nothing at all in it (e.g. only the Gutenberg footer box) is not worth a line.
        return "no text (images only)" if info.images else None

    def _span_skip_reason(self, span: Span, front: bool = False, spans: list[Span] = ()) -> str | None:
        """Why a span is not read (classify.py), from its evidence. `front`: no text has been read
        before it; `spans`: all of the book's, which a list's lines are checked against."""
        entry = span.entry
        if entry is None and not span.blocks:
            return None
        doc = entry.doc if entry else (span.sources[0].partition("#")[0] if span.sources else None)
        key = (entry.doc, entry.fragment) if entry and entry.doc else None
        evidence = Evidence(
            title=span_title(span, ""), blocks=span.blocks, types=span.types,
            landmark=self.landmarks.get(key, set()) if key else set(), landmark_source=self.landmark_source,
            file_name=doc or "", front=front, is_entry=entry is not None,
            names_book=entry is not None and names_book(entry.title, self.title),
            title_page=self._title_page_text(span) if front else None,
            references=self._references(span, spans))
        return classify(evidence)

    def _references(self, span: Span, spans: list[Span]) -> References | None:
        """For a part shaped like a list (REFERENCE_LINES short lines or more), how much of it is
        lines found elsewhere in the book: a TOC label or the start of one, or the opening words
        of a paragraph or line in another part ("Theorem EOPSS Equation Operations Preserve
        Solution Sets" is the theorem's own first line). None for any other part."""
        lines = [line for b in span.blocks if not b.heading for line in (b.lines or (b.text,))]
        lengths = sorted(map(len, lines))
        if len(lines) < REFERENCE_LINES or lengths[len(lengths) // 2] > REFERENCE_LINE:
            return None
        index = self._openings(spans)
        found = References(lines=len(lines), chars=sum(lengths))
        forms: dict[str, int] = {}  # a found line's form ("theorem CODE") → how many found lines have it
        unfound: list[str] = []
        for line in lines:
            words = fold(line).split()
            if not words:
                continue
            text = " ".join(words)
            as_label = text in self.label_texts or (len(words) >= 2 and text in self.label_starts)
            elsewhere = not as_label and len(words) >= 2 and any(
                owner is not span and f" {text} " in f" {opening} "
                for owner, opening in min((index.get(w, []) for w in words), key=len))
            if as_label or elsewhere:
                found.found_lines += 1
                found.label_lines += as_label
                found.found_chars += len(line)
                if form := _line_form(line):
                    forms[form] = forms.get(form, 0) + 1
            else:
                unfound.append(line)
        # A line of the same form as lines found elsewhere ("Theorem RCLS Recognizing …" beside
        # "Theorem EOPSS …" found as its theorem's first line) refers as they do, to a part the
        # book may not hold.
        for line in unfound:
            if forms.get(_line_form(line) or "", 0) >= FORM_LINES:
                found.found_lines += 1
                found.found_chars += len(line)
        return found

    def _openings(self, spans: list[Span]) -> dict[str, list]:
        """The first OPENING words of every paragraph and line of the book, folded, by each of
        their words: (its span, the words). Made once a book, when a part shaped like a list asks."""
        if self.openings is None:
            self.openings = {}
            for owner in spans:
                for block in owner.blocks:
                    for line in (block.text, *block.lines):
                        words = fold(line).split()[:OPENING]
                        opening = " ".join(words)
                        for word in set(words):
                            self.openings.setdefault(word, []).append((owner, opening))
        return self.openings

    def _title_page_text(self, span: Span) -> str | None:
        """Short lines only, none of them prose, one naming the book or a byline naming its author
        ("BY LEWIS CARROLL"), the rest such lines, picture placeholders ("[Illustration]") or a
        rights line; and it may hold the book's contents list, each line of it a TOC entry's
        words ("The Life and Death of Scyld (I.)" for "I. THE LIFE AND DEATH OF SCYLD.")."""
        if not span.blocks:
            return None
        named, page_chars, listed = False, 0, 0
        for block in span.blocks:
            text = block.text
            if PLACEHOLDER.match(text):
                continue
            if names_book(text, self.title) or self._author_line(text, alone=span.has_body):
                # (an entry that is the author's name alone is a line of the title page before
                # it, which _title_page_lines names so)
                named = True
            elif len(text) <= TITLE_LINE and self._contents_line(text):
                listed += 1
                continue
            page_chars += len(text)
            if (COPYRIGHT_TEXT.search(text) or CREDIT_LINE.match(text)) and len(text) <= RIGHTS_LINE:
                continue
            if len(text) > TITLE_LINE or SENTENCES.search(text):
                return None
        if not named or page_chars > TITLE_PAGE_TEXT:
            return None
        return TITLE_AND_CONTENTS if listed >= CONTENTS_LINES else "title page (text)"

    def skip_front_piece(self, titled: list[tuple[str, Span]], is_marker) -> list[tuple[str, Span]]:
        """After a book is cut at its chapter markers (splitting.py), the text before the first,
        where it is the title page ("MOBY-DICK; / or, THE WHALE. / By Herman Melville") or the
        producer's credit ("Produced by Jian-Lun Huang"), is skipped as a guess, a page at most and
        within the guesses' budget."""
        if len(titled) < 2:
            return titled
        _, first = titled[0]
        if first.entry is not None or not first.blocks or is_marker(first.blocks[0]):
            return titled
        lines = [b.text for b in first.blocks]
        if all(CREDIT_LINE.match(text) and len(text) <= CREDIT_TEXT for text in lines):
            reason = "production credits (text)"
        else:
            reason = self._title_page_text(first)
        chars = sum(map(len, lines))
        if reason is None or chars > skips.page_bound(reason):
            return titled
        guessed = sum(s.chars for s in self.skipped if s.evidence == "guess") + chars
        total = sum(s.chars for _, s in titled) + sum(s.chars for s in self.skipped)
        if skips.over_budget(guessed, total):
            return titled
        label = next((b.text for b in first.blocks if b.heading), lines[0])
        self.skipped.append(Skipped(skips.short_title(label), reason, chars, "guess",
                                    preview=skips.preview(lines)))
        return titled[1:]

    def _names_author(self, span: Span) -> bool:
        """Whether a line of the span is a byline naming the book's author, or the name alone."""
        return any(self._author_line(b.text) for b in span.blocks)

    def _author_line(self, text: str, alone: bool = True) -> bool:
        """A byline naming the book's author ("BY LEWIS CARROLL"), or (where `alone`) the name alone."""
        return bool((BYLINE.match(text) and set(fold(text).split()) & self.surnames)
                    or (alone and fold(text) in self.author_lines))

    def _contents_line(self, text: str) -> bool:
        """A line of a contents list: its words, but for numbers, all in one TOC label."""
        words = set(fold(text).split()) - CONTENTS_WORDS
        words = {w for w in words if not (w.isdigit() or ROMAN.match(w))}
        return bool(words) and any(words <= label for label in self.label_words)

    # -- chapters ----------------------------------------------------------------------------

    def chapters(self, spans: list[Span]) -> list[tuple[str, Span]]:
        """One chapter per TOC entry, titled by its label; skipped and empty spans are reported."""
        titled = []
        carried: list[Block] = []  # a skipped title page's epigraph and dedication, not yet read
        carried_sources: list[str] = []
        for index, span in enumerate(spans):
            self.skipped.extend(span.dropped)
            if carried and span.blocks and not span.skip:
                span.blocks[:0] = carried
                add_sources(span, carried_sources)
                carried, carried_sources = [], []
            if self._skips(span.skip):
                shown = skips.preview(b.text for b in span.blocks)
                if span.record is None:  # a file skipped whole was reported where it starts
                    self.skipped.append(Skipped(span_title(span, self.title), span.skip, span.unread_chars,
                                                span.evidence, preview=shown))
                else:
                    span.record.preview = shown
                if span.skip.startswith(TITLE_PAGES):
                    # the book's title and imprint are packaging; its epigraph is part of the work
                    carried += [b for b in span.blocks if b.inscription]
                    carried_sources += span.sources
            elif span.entry is None:
                if span.blocks:
                    titled.append((span_title(span, self.title), span))
            elif span.blocks:
                titled.append((_spoken_label(span), span))
            elif (span.entry.title and (span.entry.children or span.entry.doc is None)
                  and not _same_as_next(span, spans[index + 1:index + 2])):
                # A divider that shares its target with its first child (or has none): its label is
                # what there is to read, so "Part Two" is still heard and still has its marker.
                span.blocks = [Block(span.entry.title, heading=True)]
                titled.append((span.entry.title, span))
            else:
                reason = "no text (images only)" if span.images else "no text"
                self.skipped.append(Skipped(span.entry.title, reason, 0, "empty"))
        return titled


def _spoken_label(span: Span) -> str:
    """The entry's label, unless it is the heading it points at with word breaks lost: calibre builds
    NCX labels from a heading's text with its <br/> dropped ("CHAPITRE PREMIERUN ÉCUEIL FUYANT."
    for "CHAPITRE PREMIER<br/>UN ÉCUEIL FUYANT.", which reads as two blocks); then the heading's
    words, as the book prints them. A note's marker at its end is dropped (LABEL_NOTE_MARKER)."""
    label = span.entry.title or "Untitled"
    marker = LABEL_NOTE_MARKER.search(label)
    if marker and any(b.heading and b.notes for b in span.blocks[:2]):
        # a note's marker the label took from its heading ("INTRODUCTION[1]"), where the heading
        # holds a note reference: the marker is no part of the title
        label = label[:marker.start()] + marker.group("end") if marker.start() else label
    squeezed = "".join(label.split())
    words: list[str] = []
    for block in span.blocks[:3]:  # a heading, and what a <br/> in it may have split off
        words += block.text.split()
        if len("".join(words)) >= len(squeezed):
            break
    if "".join(words) == squeezed and len(words) > len(label.split()):
        return " ".join(words)
    return label


def to_chapter(title: str, span: Span) -> Chapter:
    blocks = span.blocks
    return Chapter(
        title, [b.text for b in blocks], span.sources,
        kinds=["note" if b.in_note and not b.heading else "heading" if b.heading else "text" for b in blocks],
        breaks={i for i, b in enumerate(blocks) if b.break_before and i > 0},
        pronunciations={i: list(b.phonemes) for i, b in enumerate(blocks) if b.phonemes},
        languages={i: list(b.langs) for i, b in enumerate(blocks) if b.langs},
    )


def page_bound(span: Span) -> float:
    """The characters the guess that skips `span` (or the part it goes with) may take."""
    return skips.page_bound((span.skip_from or span).skip or "")


def span_title(span: Span, fallback: str) -> str:
    """A span's TOC label; text before the first entry is named by its first heading."""
    if span.entry is not None:
        return span.entry.title
    if span.label:
        return span.label
    return next((b.text for b in span.blocks if b.heading), "") or fallback


def names_book(label: str, book_title: str) -> bool:
    """Whether a label is the book's title, or its main title before a subtitle."""
    main = re.split(r"\s*[/:;—]\s*|\s+-\s+", book_title, maxsplit=1)[0]
    return bool(fold(label)) and fold(label) in (fold(book_title), fold(main))


def fold(s: str) -> str:
    return re.sub(r"\W+", " ", s.casefold()).strip()


def _has_sections(span: Span, by_entry: dict[int, Span]) -> bool:
    """Whether TOC entries under the span's entry are sections: entries with text of their own
    that are read, or would go with it, rather than skipped on their own evidence. (Heading-only
    entries in its file are its lines: "PUBLISHED BY".) A title's line alone (a heading-only
    entry) takes no section with it (_inherit_skips): the book nested under it is no reason to
    read it. An entry named like the book with text of its own and sections is a chapter."""
    if span.entry is None or ((span.skip or "").startswith(TITLE_PAGES) and not span.has_body):
        return False
    for entry in flatten_under(span.entry):
        under = by_entry.get(id(entry))
        if under is not None and under.has_body and (under.skip is None or under.skip_from is not None):
            return True
    return False


def flatten_under(entry: TocEntry) -> list[TocEntry]:
    """The entries nested under one, depth first (a work list: TOCs nest deep)."""
    found, stack = [], list(reversed(entry.children))
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(reversed(node.children))
    return found


def _same_as_next(span: Span, after: list[Span]) -> bool:
    """An empty span whose label the next span repeats: the same place named twice (a TOC nested
    3,000 deep, each level pointing at one file) gives one chapter, not 3,000."""
    return bool(after) and after[0].entry is not None and fold(after[0].entry.title) == fold(span.entry.title)


def _title_page_lines(spans: list[Span]):
    """Heading-only spans beside a title page in its own file are lines of it (Gutenberg's NCX
    makes an entry of every line: "MONTESQUIEU", "ESPRIT DES LOIS", "BY", "1886"): those after
    it up to the next printed page, and those just before it while nothing has been read. A
    heading-only entry at the front that repeats one of its lines is the half-title."""
    run_doc, reason, page = None, None, None
    before: list[Span] = []  # heading-only entries at the front, in one file, since the last page break
    lines: set[str] = set()  # the title pages' lines, folded
    front = True
    for span in spans:
        doc = span.entry.doc if span.entry else None
        line = span.entry is not None and not span.skip and not span.has_body and bool(span.blocks)
        new_page = bool(span.blocks) and span.blocks[0].page_before
        if span.skip and span.skip.startswith(TITLE_PAGES):
            run_doc, reason = doc, span.skip.split(" (")[0] + " (a line of the title page)"
            page = span.skip_from or span
            for earlier in ([] if new_page else before):
                if earlier.entry.doc == doc:
                    earlier.skip, earlier.skip_from = reason, page
            lines.update(fold(s.entry.title) for s in before + [span] if s.entry is not None and s.skip)
            before = []
        elif run_doc and doc == run_doc and line and not new_page:
            span.skip, span.skip_from = reason, page
            lines.add(fold(span.entry.title))
        elif front and line and fold(span.entry.title) in lines:
            run_doc = None
            span.skip = "half-title page (a line of the title page)"
        else:
            run_doc = None
            if front and line:
                before = [s for s in before if s.entry.doc == doc and not new_page] + [span]
            elif not (front and span.entry is None and not span.has_body):
                before = []
        front = front and (bool(span.skip) or not span.has_body)


def _inherit_skips(spans: list[Span]):
    """An entry nested under a skipped one, in the same file, is part of it (the publisher's
    "WORKS BY …" page and its "PUBLISHED BY" line). Entries in other files are not: Standard
    Ebooks nests the whole book under its half-title page. Nor are entries under a title page:
    Gutenberg's NCX nests the book under its title's line (the page's own lines are found by
    _title_page_lines, up to the next printed page)."""
    skipped = {id(s.entry): s for s in spans if s.entry is not None and s.skip}
    for span in spans:
        if span.entry is None or span.skip:
            continue
        for ancestor in span.entry.ancestors():
            if id(ancestor) in skipped and ancestor.doc == span.entry.doc:
                root = skipped[id(ancestor)]
                if (root.skip_from or root).skip.startswith(TITLE_PAGES) and not _on_title_page(root, spans):
                    break
                span.skip, span.skip_from = root.skip, root.skip_from or root
                skipped[id(span.entry)] = span
                break


def _on_title_page(root: Span, spans: list[Span]) -> bool:
    """Whether the entries nested under a title page's entry, in its file, are still that page:
    together no longer than a page and no printed page starting among them ("IN TWO VOLUMES
    VOL. I" and the preparer's note under Herodotus's translator line; not Struwwelpeter's eleven
    stories under its title)."""
    under = {id(e) for e in flatten_under(root.entry)} - {id(root.entry)}
    nested = [s for s in spans if s.entry is not None and id(s.entry) in under and s.entry.doc == root.entry.doc]
    return (sum(s.chars for s in nested) <= SHORT_TEXT
            and not any(s.blocks and s.blocks[0].page_before for s in nested))


def _line_form(line: str) -> str | None:
    """A list line's form: its first word and a code after it ("Theorem EOPSS Equation …" →
    "theorem CODE"), or None."""
    words = line.split()
    if len(words) >= 2 and CODE.match(words[1]):
        return f"{fold(words[0])} CODE"
    return None


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
    blocks = [it for it in items if isinstance(it, Block)]
    lone_line = blocks[0].text if len(blocks) == 1 and len(blocks[0].text) <= 60 else ""
    links = sum(1 for el in body.iter() if local_name(el) == "a"
                and (el.get("href") or "").partition("#")[0] not in ("", posixpath.basename(name))
                and "://" not in (el.get("href") or "") and not (el.get("href") or "").startswith("mailto:"))
    return DocInfo(doc_title(root), types, anchor_types, images(body, name), found, bool(blocks), lone_line, links)


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
