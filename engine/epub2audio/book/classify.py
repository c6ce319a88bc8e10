"""What a part of a book is: one function (`classify`) from a part's evidence (`Evidence`) to the
reason it is not read, or None when it is read.

A part is a TOC entry's text, the text before the first entry, or a spine file no entry names. Its
evidence, by strength:

* structure: the epub:type or DPUB-ARIA role at its start (or its file's body / first typed
  section), and the EPUB 3 landmarks or EPUB 2 guide entry naming it;
* its name: the TOC label (or first heading) and the file name;
* its lines, each checked: a transcriber's corrections, Project Gutenberg's header fields, a title
  page's lines, and lines that are references to the book itself (`Evidence.references`: a line
  that is a TOC label, or that opens a paragraph or line elsewhere in the book, as a contents page's
  lines and a list of theorems or figures do);
* its text, in a short part only: rights text, a note on the e-book, sales talk; a licence's own
  words under a licence's name;
* where it stands: before any text is read (`front`), and its size.

The reason names the kind and the evidence ("copyright page (epub:type)", "list (its lines found
elsewhere in the book)"); skips.py turns the evidence into its bounds. The nav document and
non-linear spine items are decided where the spine is read (epub.py), Gutenberg's START/END markers
and repeated page furniture where the stream is cut (chapters.py, boilerplate.py).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from . import skips
from .text import Block, clean

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
    # (an edition statement or the publisher's address under a heading of its own: Linear Algebra's)
    (re.compile(r"^(edition|publisher|publication (data|details|information)|publishing (details|information)|"
                r"about this edition)$"), "imprint"),
    (re.compile(r"^colophon$"), "colophon"),
    (re.compile(r"^(index|general index|index of names)$"), "index"),
    (re.compile(r"^(list of (illustrations|plates|figures|maps)|illustrations|liste des (illustrations|gravures)|"
                r"table des (illustrations|gravures)|verzeichnis der abbildungen|abbildungsverzeichnis|"
                r"(í|i)ndice de (ilustraciones|láminas|grabados)|elenco delle illustrazioni)$"), "list of illustrations"),
    (re.compile(r"^(cover|cover image|cover page|couverture)$"), "cover"),
    (re.compile(r"^(title ?page|half[- ]?title( page)?|page de titre)$"), "title page"),
    (re.compile(r"^(transcriber'?s'? notes?|notes? (du|de la|des) transcri\w+|notes? de transcription|"
                r"anmerkungen? zur transkription|nota del transcriptor|corrections|errata|erratum|"
                r"(list of )?(typographical )?errors corrected)$"), "transcriber's note"),
    (re.compile(r"^(works by|other works by|other books by|books by|also by|by the same author|du m[eê]me auteur|"
                r"(publishers?'? )?advertisements?|catalogue of (new )?books)\b"), "publisher's adverts"),
    # Legal boilerplate that Project Gutenberg appends to every book; not part of the work.
    # (Not its header's entry, "The Project Gutenberg eBook of Beowulf, by": what follows it is the book's.)
    (re.compile(r"^(?!the project gutenberg e-?book of\b).*(project gutenberg|full license)"), "Project Gutenberg licence"),
]
# File names that say what a file is (Standard Ebooks, Calibre, InDesign and most producers use them).
SKIP_FILES = [
    (re.compile(r"(^|[_-])(title[_-]?page|titlepage)([_-]|$)"), "title page"),
    (re.compile(r"(^|[_-])half[_-]?title([_-]?page)?([_-]|$)"), "half-title page"),
    (re.compile(r"(^|[_-])(copyright|copyright[_-]page)([_-]|$)"), "copyright page"),
    (re.compile(r"(^|[_-])imprint([_-]|$)"), "imprint"),
]
# Text that only a rights / imprint page carries; looked for in short spans only.
COPYRIGHT_TEXT = re.compile(r"©|\ball rights reserved\b|\bcopyright,? (by|\(c\)|\d{4})\b|derechos reservados|droits (de \w+ )?réservés|diritti riservati|\bentered according to act of congress\b|\bISBN[\s:‐-]*[\dX‐-]{10,17}|tous droits|alle rechte vorbehalten|"
                            r"todos los derechos|tutti i diritti|版权|版權|著作権|זכויות", re.IGNORECASE)
# What else a rights page says: a paragraph with one of these is part of it, not of a text that
# merely carries a copyright line.
RIGHTS_TEXT = re.compile(COPYRIGHT_TEXT.pattern + r"|\bcopyright\b|\breproduc|\bpermission\b|\bpublished by\b|"
                         r"\bprinted in\b|\bfirst (published|edition|printing)\b|\blibrary of congress\b|"
                         r"\bcatalogu?ing\b|\btrademark|\blicen[cs]|\bpublisher\b|\bdroits\b|\bverlag\b",
                         re.IGNORECASE)
# A transcriber's account of the e-book edition (Gutenberg's "Au lecteur", "Transcriber's Note",
# "There is an illustrated edition of this title …", "an HTML version of this file").
TRANSCRIBER_TEXT = re.compile(r"\btranscriber'?s? note|\bthis e-?(book|text)\b|ce livre [ée]lectronique|note du transcripteur|"
                              r"dieses e-?book|\b(version|edition)s? of this (e-?book|e-?text|file|title)\b",
                              re.IGNORECASE)
# What an advert for a publisher's service or other books says; a page that says ADVERT_CUES of
# them is one (Safari Books Online: "on-demand digital library", "pricing", "subscribers", a URL).
ADVERT_TEXT = re.compile(r"https?://|\bwww\.|®|™|\bsubscri(be|bers?|ption)\b|\bfree trial\b|\btry it (for )?free\b|"
                         r"\bon-demand\b|\b(digital|virtual|online) (library|bookshelf|bookstore|edition)\b|"
                         r"\bpricing\b|\bvisit us\b|\bfor more information\b|\border (online|now|from)\b|"
                         r"\bspecial offers?\b|\bdiscounts?\b|\bnewsletter\b|\bsign up\b|\bbuy (it|now|online)\b",
                         re.IGNORECASE)
ADVERT_CUES = 4
# A paragraph that points to another edition of the e-book: Gutenberg's "There is an illustrated
# edition of this title which may be viewed at EBook #…", "An HTML version of this file …".
EDITION_NOTE = re.compile(r"\b(html|illustrated|other|original|plain[- ]text|text|audio) (version|edition)s? of this "
                          r"(e-?book|e-?text|file|title|book)\b", re.IGNORECASE)
EDITION_NOTE_TEXT = 300
# A line of a transcriber's list of corrections: «chrysostones» remplacé par «chrysostomes»,
# "hte" changed to "the", ersetzt durch. A part whose lines nearly all (ERRATA_SHARE) are ones is that list, whatever its
# size: its lines are checked to be such (the guess budget still holds).
ERRATA_LINE = re.compile(r"\b(remplac[ée]e?s? par|corrig[ée]e?s? en|replaced (by|with)|changed (to|from)|corrected (to|from)|"
                         r"ersetzt durch|ge[äa]ndert in|cambiad[oa] (a|por)|sustituid[oa] por|reemplazad[oa] por)\b|→|"
                         r"\b(ins[ée]r[ée]e?|ajout[ée]e?|supprim[ée]e?|inserted|added|removed|deleted|omitted|eingef[üu]gt|"
                         r"gestrichen|a[ñn]adid[oa]|suprimid[oa])\s*[«“\"‘']", re.IGNORECASE)
ERRATA_LINES = 5  # lines at least: one correction in a short note is no list
ERRATA_SHARE = 0.9  # of its lines (a heading line or an "as follows:" may sit among them)
ERRATA = "transcriber's note (errata lines)"
# The fields of Project Gutenberg's header, where no pgheader box holds them ("Title: 苦悶の欄",
# "Author: …", "Release date: …"): a part made only of such lines is that header.
PG_HEADER_LINE = re.compile(r"^(title|author|authors|translator|editor|illustrator|contributor|release date|posting date|"
                            r"last updated|most recently updated|language|original publication|credits|produced by|"
                            r"character set encoding|e-?text prepared by)\s*:", re.IGNORECASE)
PG_HEADER = "Project Gutenberg header (its lines)"
# A producer's credit ("Produced by Jian-Lun Huang", "E-text prepared by …"): e-book packaging.
CREDIT_LINE = re.compile(r"^(produced by|e-?text prepared by|prepared by|transcribed by|digiti[sz]ed by|scanned by|"
                         r"proofread by|html version by)\s+\S", re.IGNORECASE)
CREDIT_TEXT = 300  # characters: a credit is a line

# Characters of body text: a rights page or a note on the edition is shorter.
SHORT_TEXT = skips.PAGE_SIZE
TITLE_LINE = 120  # characters: a title page's line, a list's heading
TITLE_PAGE_TEXT = 1000  # characters of body text under an entry named like the book: its title page

# A licence's own words: its name as a title, one of its fixed sentences in its text.
LICENCE_TITLE = re.compile(r"\b(gnu (free documentation|general public|lesser general public|affero general public) "
                           r"licen[cs]e|gfdl|creative commons|open publication licen[cs]e)\b", re.IGNORECASE)
LICENCE_TEXT = re.compile(r"everyone is permitted to copy and distribute verbatim copies of this licen[cs]e document|"
                          r"the purpose of this licen[cs]e is to make a manual, textbook|"  # the GFDL's preamble
                          r"the licenses for most software (and other practical works )?are designed to take away your "
                          r"freedom|"  # the GPL's
                          r"creative commons corporation (\(\W*creative commons\W*\) )?is not a law firm|"
                          r"by exercising the licensed rights", re.IGNORECASE)
LICENCE = "licence (its title and text)"
# A list of references to the book itself: at least REFERENCE_LINES lines, short ones (a median of
# at most REFERENCE_LINE characters), REFERENCE_SHARE of its characters in lines found elsewhere.
REFERENCE_LINES = 5
REFERENCE_LINE = 100
REFERENCE_SHARE = 0.9
REFERENCES = "its lines found elsewhere in the book"


@dataclass
class References:
    """A part's lines set against the rest of the book: how many, and how many of their characters,
    are a TOC label (or its start), or open a paragraph or line elsewhere."""
    lines: int = 0
    chars: int = 0
    found_chars: int = 0
    label_lines: int = 0  # lines found as TOC labels (a contents page) rather than elsewhere (a list)
    found_lines: int = 0


@dataclass
class Evidence:
    """What a part's kind may be decided on (see the module docstring)."""
    title: str  # its TOC label, else its first heading
    blocks: list[Block]
    types: set[str] = field(default_factory=set)  # epub:type / role at its start
    landmark: set[str] = field(default_factory=set)  # landmark or guide types naming it
    landmark_source: str = "landmarks"  # "landmarks" (EPUB 3 nav) or "guide" (EPUB 2)
    file_name: str = ""
    front: bool = False  # no text has been read before it
    is_entry: bool = True  # a TOC entry's part (not text before the first, nor a file no entry names)
    names_book: bool = False  # its TOC label is the book's title
    title_page: str | None = None  # why its lines make a title page, if they do (Cutter)
    references: References | None = None  # for a part shaped like a list

    @property
    def lines(self) -> list[Block]:
        return [b for b in self.blocks if not b.heading]

    @property
    def size(self) -> int:
        return sum(len(b.text) for b in self.lines)


def classify(ev: Evidence) -> str | None:
    """Why the part is not read ("kind (evidence)"), or None: structure first, then its lines, its
    name, its text, where it stands."""
    reason = marked(ev.types, ev.landmark, ev.landmark_source, ev.title, ev.file_name)
    if reason and skips.evidence_of(reason) != "guess":
        return reason
    lines = ev.lines
    if len(lines) >= ERRATA_LINES and _share_at_least(lines, ERRATA_LINE, ERRATA_SHARE):
        return ERRATA  # its lines are the evidence, whatever its title says
    if ev.front and len(lines) >= 2 and all(PG_HEADER_LINE.match(b.text) for b in lines):
        return PG_HEADER
    if reason:
        return reason
    size = ev.size
    if size <= SHORT_TEXT and (heading := list_heading(ev.blocks)):
        return f"{heading} (its heading)"
    if ev.blocks and size <= SHORT_TEXT:
        if _mostly(ev.blocks, COPYRIGHT_TEXT, RIGHTS_TEXT):
            return "copyright page (text)"
        if any(TRANSCRIBER_TEXT.search(b.text) for b in ev.blocks):
            return "transcriber's note (text)"
        cues = {m.group(0).lower() for m in ADVERT_TEXT.finditer(" ".join(b.text for b in ev.blocks))}
        if len(cues) >= ADVERT_CUES:
            return "publisher's adverts (text)"
    if ev.is_entry and size <= TITLE_PAGE_TEXT and ev.names_book:
        return "title page (the book's title)"
    if ev.front and ev.title_page:
        return ev.title_page
    if LICENCE_TITLE.search(ev.title) and any(LICENCE_TEXT.search(b.text) for b in lines):
        return LICENCE
    refs = ev.references
    if refs and refs.found_chars >= REFERENCE_SHARE * refs.chars and refs.chars - refs.found_chars <= skips.PAGE_SIZE:
        kind = "table of contents" if 2 * refs.label_lines >= refs.found_lines else "list"
        return f"{kind} ({REFERENCES})"
    return None


def marked(types: set[str], landmark: set[str], landmark_source: str, title: str, file_name: str) -> str | None:
    """Front/back matter by its epub:type or role, landmark or guide, title, or file name."""
    for kind, label in SKIP_TYPES.items():
        if kind in types:
            return f"{label} (epub:type)"
    for kind, label in SKIP_TYPES.items():
        if kind in landmark:
            return f"{label} ({landmark_source})"
    folded = folded_title(title)
    for pattern, label in SKIP_TITLES:
        if pattern.search(folded):
            return f"{label} (title)"
    stem = posixpath.splitext(posixpath.basename(file_name or ""))[0].lower()
    for pattern, label in SKIP_FILES:
        if pattern.search(stem):
            return f"{label} (file name)"
    return None


def list_heading(blocks: list[Block]) -> str | None:
    """The kind a short part's own heading line names, where its TOC label names something else
    (a list of illustrations under the entry of the picture before it, "Frontpiece")."""
    for block in blocks[:2]:
        if len(block.text) <= TITLE_LINE:
            folded = folded_title(block.text)
            for pattern, label in SKIP_TITLES:
                if pattern.search(folded) and label in ("table of contents", "list of illustrations", "index"):
                    return label
    return None


def folded_title(title: str) -> str:
    return re.sub(r"[\s.:]+$", "", clean(title).lower().replace("’", "'"))


def _share_at_least(lines: list[Block], pattern: re.Pattern, share: float) -> bool:
    """Whether `pattern` is found in at least `share` of the lines; it stops at the first line too
    many without it (a chapter of prose is thousands of lines, and the first few settle it)."""
    misses_allowed = len(lines) - share * len(lines)
    misses = 0
    for b in lines:
        if not pattern.search(b.text):
            misses += 1
            if misses > misses_allowed:
                return False
    return True


def _mostly(body: list[Block], mark: re.Pattern, kin: re.Pattern) -> bool:
    """Whether `mark` is found and the paragraphs that share its subject (`kin`) are at least as
    long as the others: a rights page, not a section that carries a copyright line."""
    if not any(mark.search(b.text) for b in body):
        return False
    kin_chars = sum(len(b.text) for b in body if kin.search(b.text))
    return kin_chars >= sum(len(b.text) for b in body) - kin_chars
