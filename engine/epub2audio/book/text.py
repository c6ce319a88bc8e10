"""XHTML → the text to be read aloud, as a list of paragraph-sized blocks.

One block per heading, paragraph, list item, table row, line group of verse or heading group.
What is not read: <script>/<style>, hidden content (`hidden`, inline `display:none`), images,
footnote reference markers (epub:type="noteref" and the bare numeric links Gutenberg books use),
backlinks from notes, page-break numbers, verse line numbers, inline footnote <aside>s, the
ebookmaker Project Gutenberg header/footer boxes, and blocks that are nothing but links to other
places in the book (an inline table of contents).

`read_blocks` also drops an `Anchor` marker into the block stream wherever an element with one of
the requested ids starts, so the caller can cut a document into chapters at TOC #fragments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree, html

EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"

BLOCK_TAGS = frozenset(
    "address article aside blockquote body caption center dd details div dl dt figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 header hgroup hr li main nav ol p pre section summary table "
    "tbody td tfoot th thead tr ul".split()
)
HEADING_TAGS = frozenset("h1 h2 h3 h4 h5 h6".split())
UNREAD_TAGS = frozenset(
    "head title script style template noscript img svg math audio video object embed iframe "
    "canvas picture source map area input button select textarea".split()
)
# epub:type values whose element is never read aloud.
UNREAD_TYPES = frozenset(["noteref", "backlink", "pagebreak", "z3998:footnote-ref"])
# Note bodies placed in the text flow (<aside epub:type="footnote">) would interrupt the sentence
# they annotate; notes gathered in their own section (endnotes, rearnotes) are read there.
ASIDE_NOTE_TYPES = frozenset(["footnote", "note", "annotation", "endnote", "rearnote"])
# class names (Gutenberg, Standard Ebooks and common EPUB markup) for text that is not prose.
UNREAD_CLASSES = frozenset(
    ["pagenum", "pageno", "page-number", "x-ebookmaker-pageno", "lnum", "linenum", "linenumber",
     "line-number", "pgheader", "pgfooter"]
)
VERSE_TYPES = frozenset(["z3998:verse", "z3998:poem", "z3998:song", "z3998:lyrics", "z3998:hymn"])
VERSE_CLASSES = frozenset(["poem", "poetry", "verse", "stanza", "linegroup", "lg"])
STANZA_CLASSES = frozenset(["stanza", "linegroup", "lg"])
PERSONA_TYPE = "z3998:persona"

NOTE_MARKER = re.compile(r"^[\[(]?\s*(\d{1,4}|[*†‡§¶]{1,3})\s*[\])]?\.?$")
BACKLINK_TEXTS = frozenset(["return", "back", "↩", "↑", "↩︎", "[back]", "[return]", "(return)"])
IMAGE_LINK_TEXTS = frozenset(["agrandir", "enlarge", "[enlarge]", "full size", "larger image", "view larger"])
IMAGE_HREF = re.compile(r"\.(jpe?g|png|gif|webp|svg)$", re.IGNORECASE)
HIDDEN_STYLE = re.compile(r"(display\s*:\s*none|visibility\s*:\s*hidden)", re.IGNORECASE)
# A line of its own that names a chapter, inside plain-text paragraphs (Gutenberg .txt conversions).
CHAPTER_LINE = re.compile(
    r"^(第[一二三四五六七八九十百千〇零两0-9]+[章回節节篇]|"
    r"(chapter|chapitre|capítulo|capitolo|kapitel|глава)\s+[\w]+\.?)$",
    re.IGNORECASE,
)
# Soft hyphen, zero-width space, word joiner, BOM. ZWJ/ZWNJ stay: they change how Persian and
# Indic words are spelled.
INVISIBLE = re.compile("[\u00ad\u200b\u2060\ufeff\u180e]")
SPACES = re.compile(r"[\s\x1e]+")
RAW_LINES = re.compile(r"[\n\x1e]")
EMPTY_BRACKETS = re.compile(r"\(\s*\)|\[\s*\]")
LINE_BREAK = "\x1e"  # a private marker: raw newlines in the source are only whitespace


@dataclass
class Block:
    text: str
    heading: bool = False


@dataclass
class Anchor:
    id: str


def parse_xhtml(data: bytes | str) -> etree._Element:
    """Parse a content document leniently: XML first (keeps namespaces), then the HTML parser."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, huge_tree=True)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError:
        root = None
    if root is None or local_name(root) != "html":
        try:
            root = html.fromstring(data)
        except etree.ParserError:  # an empty or unreadable document reads as nothing
            root = html.fromstring("<html><body></body></html>")
    return root


def local_name(el) -> str:
    tag = el.tag
    if not isinstance(tag, str):
        return ""  # comments and processing instructions
    return tag.rpartition("}")[2].lower()


def epub_types(el) -> set[str]:
    value = el.get(EPUB_TYPE) or el.get("epub:type") or ""
    return set(value.split())


def find_body(root):
    for el in root.iter():
        if local_name(el) == "body":
            return el
    return root


def clean(text: str) -> str:
    """Normalise whitespace and drop invisible characters."""
    text = INVISIBLE.sub("", text)
    text = EMPTY_BRACKETS.sub("", text)
    return SPACES.sub(" ", text).strip()


def read_blocks(root, anchors: set[str] | frozenset[str] = frozenset()) -> list[Block | Anchor]:
    """The spoken blocks of a parsed document, with an Anchor wherever an id in `anchors` starts."""
    reader = _Reader(anchors)
    reader.walk(find_body(root))
    reader.flush()
    return reader.out


def paragraphs(data: bytes | str, start: str | None = None, end: str | None = None) -> list[str]:
    """The paragraphs of a document, or of its slice from the element with id `start` up to the
    element with id `end` (either may be None: from the top / to the bottom)."""
    wanted = {a for a in (start, end) if a}
    items = read_blocks(parse_xhtml(data), wanted)
    inside = start is None
    result = []
    for item in items:
        if isinstance(item, Anchor):
            if item.id == start:
                inside = True
            elif item.id == end:
                break
        elif inside:
            result.append(item.text)
    return result


def is_unread(el) -> bool:
    tag = local_name(el)
    if not tag or tag in UNREAD_TAGS:
        return True
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    style = el.get("style")
    if style and HIDDEN_STYLE.search(style):
        return True
    types = epub_types(el)
    if types & UNREAD_TYPES:
        return True
    if tag == "aside" and types & ASIDE_NOTE_TYPES:
        return True
    classes = el.get("class")
    if classes and UNREAD_CLASSES.intersection(classes.split()):
        return True
    return tag == "a" and _is_marker_link(el)


def _is_marker_link(a) -> bool:
    """Footnote numbers, backlinks and 'enlarge image' links: links that are not prose."""
    href = a.get("href") or ""
    text = clean("".join(a.itertext())).lower()
    if IMAGE_HREF.search(href.split("#")[0]) or text in IMAGE_LINK_TEXTS:
        return True
    if "#" not in href:
        return False
    return bool(NOTE_MARKER.match(text)) or text in BACKLINK_TEXTS


def _is_internal_link(a) -> bool:
    href = a.get("href")
    return href is not None and not re.match(r"^[a-z][a-z0-9+.-]*:", href, re.IGNORECASE)


def _is_verse(el) -> bool:
    if epub_types(el) & VERSE_TYPES:
        return True
    classes = el.get("class")
    return bool(classes and VERSE_CLASSES.intersection(classes.split()))


def join_verse_lines(lines: list[str]) -> str:
    """One line group → one block; a line that ends without punctuation gets a comma so that the
    voice pauses at the line end."""
    lines = [clean(line) for line in lines]
    lines = [line for line in lines if line]
    spoken = [line + "," if line[-1].isalnum() else line for line in lines[:-1]]
    return " ".join(spoken + lines[-1:])


class _Reader:
    """Walks a document body once, in order, turning it into blocks."""

    def __init__(self, anchors):
        self.anchors = anchors
        self.out: list[Block | Anchor] = []
        self.parts: list[str] = []  # text of the block being built
        self.link_chars = 0  # characters of it that came from internal links
        self.text_chars = 0  # characters of it that came from anything else
        self.in_link = 0

    def add(self, text: str | None):
        if not text:
            return
        self.parts.append(text)
        if not text.isspace():
            if self.in_link:
                self.link_chars += len(text)
            else:
                self.text_chars += len(text)

    def flush(self, heading: bool = False):
        raw = "".join(self.parts)
        nav_only = self.link_chars and not self.text_chars
        self.parts, self.link_chars, self.text_chars = [], 0, 0
        if nav_only:
            return
        lines = RAW_LINES.split(raw)
        if len(lines) > 1 and any(CHAPTER_LINE.match(clean(line)) for line in lines):
            self._emit_with_chapter_lines(lines)
            return
        text = clean(raw)
        if text:
            self.out.append(Block(text, heading))

    def _emit_with_chapter_lines(self, lines: list[str]):
        pending: list[str] = []
        for line in lines:
            if CHAPTER_LINE.match(clean(line)):
                self._emit_text(" ".join(pending))
                pending = []
                self.out.append(Block(clean(line), heading=True))
            else:
                pending.append(line)
        self._emit_text(" ".join(pending))

    def _emit_text(self, raw: str):
        text = clean(raw)
        if text:
            self.out.append(Block(text))

    def mark_anchor(self, el):
        el_id = el.get("id")
        if el_id and el_id in self.anchors:
            self.flush()
            self.out.append(Anchor(el_id))

    def walk(self, el):
        if is_unread(el):
            return
        self.mark_anchor(el)
        tag = local_name(el)
        if tag == "tr":
            self.flush()
            self.add(row_text(el))
            self.flush()
            return
        if tag == "hgroup":
            self.flush()
            self.add(heading_group_text(el))
            self.flush(heading=True)
            return
        if _is_verse(el) or tag == "pre":
            self.flush()
            self.add_line_group(el)
            return
        if tag == "br":
            self.add(LINE_BREAK)
            return
        block = tag in BLOCK_TAGS
        if block:
            self.flush()
        link = tag == "a" and _is_internal_link(el)
        self.in_link += link
        self.add(el.text)
        for child in el:
            self.walk(child)
            self.add(child.tail)
        self.in_link -= link
        if block:
            self.flush(heading=tag in HEADING_TAGS)

    def add_line_group(self, el):
        """Verse: each stanza (or the whole group if it has no stanzas) becomes one block."""
        stanzas = [c for c in el if _is_stanza(c)]
        if not stanzas:
            lines = inline_lines(el)
            if lines:
                self.out.append(Block(join_verse_lines(lines)))
            return
        for child in el:
            if _is_stanza(child):
                self.mark_anchor(child)
                lines = inline_lines(child)
                if lines:
                    self.out.append(Block(join_verse_lines(lines)))
            elif not is_unread(child):
                self.walk(child)
                self.flush()


def _is_stanza(el) -> bool:
    tag = local_name(el)
    if tag == "p":
        return True
    classes = el.get("class")
    return bool(classes and STANZA_CLASSES.intersection(classes.split()))


def inline_text(el) -> str:
    """All the readable text inside el, block boundaries and <br> kept as line breaks."""
    parts: list[str] = []
    _collect(el, parts)
    return "".join(parts)


def _collect(el, parts: list[str]):
    if is_unread(el):
        return
    tag = local_name(el)
    if tag == "br" or tag in BLOCK_TAGS:
        parts.append(LINE_BREAK)
    if el.text:
        parts.append(el.text)
    for child in el:
        _collect(child, parts)
        if child.tail:
            parts.append(child.tail)
    if tag in BLOCK_TAGS:
        parts.append(LINE_BREAK)


def inline_lines(el) -> list[str]:
    return [line for line in (clean(x) for x in inline_text(el).split(LINE_BREAK)) if line]


def row_text(tr) -> str:
    """A table row read as one sentence: 'Speaker: line' for drama, else cells joined by commas."""
    spoken = ""
    for cell in tr:
        if local_name(cell) not in ("td", "th") or is_unread(cell):
            continue
        lines = inline_lines(cell)
        text = join_verse_lines(lines) if _is_verse(cell) or _has_verse(cell) else clean(" ".join(lines))
        if not text:
            continue
        if not spoken:
            spoken = text
        elif spoken.endswith(":"):
            spoken += " " + text
        else:
            spoken += ", " + text
        if PERSONA_TYPE in epub_types(cell):
            spoken += ":"
    return spoken


def _has_verse(el) -> bool:
    return any(_is_verse(d) for d in el.iterdescendants() if isinstance(d.tag, str))


def heading_group_text(el) -> str:
    """<hgroup><h3>I</h3><p>The Period</p></hgroup> → 'I. The Period'."""
    parts = [clean(inline_text(child)) for child in el if not is_unread(child)]
    parts = [p for p in parts if p]
    spoken = [p + "." if p[-1].isalnum() else p for p in parts[:-1]]
    return " ".join(spoken + parts[-1:])
