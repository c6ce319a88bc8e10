"""XHTML → the text to be read aloud, as a list of paragraph-sized blocks.

One block per heading, paragraph, list item, table row, line group of verse or heading group.
What is not read: <script>/<style>, hidden content (`hidden`, inline `display:none`), images,
footnote reference markers (epub:type="noteref" and the bare numeric links Gutenberg books use),
backlinks from notes, page-break numbers, verse line numbers, inline footnote <aside>s, the
ebookmaker Project Gutenberg header/footer boxes, and blocks that are nothing but links to other
places in the book (an inline table of contents).

Notes: note reference markers are never read, but each Block remembers the hrefs of the ones it
held (`Block.notes`), and blocks inside the note bodies the caller names are flagged
(`Block.in_note`), so the loader can apply the --notes policy from EPUB semantics. A scene break
(<hr>, epub:type="z3998:scene-break" or role="separator", or a paragraph that is only a row of
asterisks or a dinkus such as "* * *" or "⁂") is not read; the next block gets `break_before`.
Inline pronunciations (`ssml:ph` with alphabet "ipa", the alphabet inherited from an ancestor)
come out as `Block.phonemes`: (start, end, ipa) spans over the block's text. Languages
(`xml:lang` / `lang`, inherited from the nearest ancestor, the <html> element included) come out
as `Block.langs`: (start, end, tag) spans over the text whose language is known, so the caller can
tell a Latin epigraph from the English around it. The voice calibre's `data-calibre-tts` names for a
passage (a name, or JSON with "voice"; inherited) rides in the same spans' tags (language.with_voice).

Margin notes (epub:type sidenote / marginalia, class "sidenote", "marginnote", ..., an <aside>
that is not a note the caller names, a sidebar or a pull quote) and notes placed in the flow
(<aside epub:type="footnote">) are not read where they stand: each becomes a Block of its own
flagged `margin` / `aside_note`, placed after the block it stands beside, for the notes policy to
read, move or count (book/notes.py). A poem in numbered parts (<section>/<article> inside verse)
is read part by part, each part's heading a heading and each stanza a block. A source line break
between two CJK characters is a line wrap and is removed.

`read_blocks` also drops an `Anchor` marker into the block stream wherever an element with one of
the requested ids starts, so the caller can cut a document into chapters at TOC #fragments.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Callable

from lxml import etree, html

from . import alt_text, mathml
from .language import split_voice, with_voice

EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"
SSML_PH = "{http://www.w3.org/2001/10/synthesis}ph"
SSML_ALPHABET = "{http://www.w3.org/2001/10/synthesis}alphabet"
# Private markers around an ssml:ph span while text is assembled: START ipa MID text END.
PH_START, PH_MID, PH_END = "\ue000", "\ue002", "\ue001"
# Private markers around a run of text in one language: START tag MID text END.
LANG_START, LANG_MID, LANG_END = "\ue003", "\ue004", "\ue005"
MARKERS = re.compile("[\ue000-\ue005]")
# All our markup, the IPA and language tags inside it included: what is left is the shown text.
MARKUP = re.compile("[\ue000\ue003][^\ue002\ue004]*[\ue002\ue004]|[\ue000-\ue005]")
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
LANG_TAG = re.compile(r"^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*$")
INSCRIPTION_TYPES = frozenset(["epigraph", "dedication"])
NOTEREF_TYPES = frozenset(["noteref", "z3998:footnote-ref", "z3998:note-ref"])
NOTEREF_ROLES = frozenset(["doc-noteref"])
SCENE_BREAK_TYPES = frozenset(["z3998:scene-break", "scene-break", "separator", "z3998:section-break"])
SCENE_BREAK_TEXT = re.compile(r"^[\s*⁂•·~#◆◇❧☙✻✽✢✱❦†]*[*⁂•·~#◆◇❧☙✻✽✢✱❦][\s*⁂•·~#◆◇❧☙✻✽✢✱❦.]*$")

BLOCK_TAGS = frozenset(
    "address article aside blockquote body caption center dd details div dl dt figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 header hgroup hr li main nav ol p pre section summary table "
    "tbody td tfoot th thead tr ul".split()
)
HEADING_TAGS = frozenset("h1 h2 h3 h4 h5 h6".split())
UNREAD_TAGS = frozenset(
    "head title script style template noscript img svg math audio video object embed iframe rt rp "
    "canvas picture source map area input button select textarea".split()
)
# epub:type values whose element is never read aloud.
# What a picture or an embedded object is called in a warning; what it holds is not read.
EMBEDDED_TAGS = frozenset("object embed iframe canvas audio video".split())
# Page furniture: what a reading system shows around the text, not the text (boilerplate.py).
FURNITURE_TAGS = frozenset(["header", "footer", "nav"])
FURNITURE_ROLES = frozenset(["banner", "contentinfo", "navigation", "doc-pagelist"])
SECTIONING_TAGS = frozenset(["section", "article", "aside", "main", "blockquote", "figure"])
UNREAD_TYPES = frozenset(["noteref", "backlink", "pagebreak", "z3998:footnote-ref"])
# Note bodies placed in the text flow (<aside epub:type="footnote">) would interrupt the sentence
# they annotate; notes gathered in their own section (endnotes, rearnotes) are read there.
ASIDE_NOTE_TYPES = frozenset(["footnote", "note", "annotation", "endnote", "rearnote"])
# class names (Gutenberg, Standard Ebooks and common EPUB markup) for text that is not prose.
UNREAD_CLASSES = frozenset(
    ["pagenum", "pageno", "page-number", "x-ebookmaker-pageno", "lnum", "linenum", "linenumber",
     "line-number", "pgheader", "pgfooter"]
)
# ebookmaker's boxes around a Project Gutenberg book (its header, its licence): not read, but counted.
GUTENBERG_BOX_CLASSES = frozenset(["pgheader", "pgfooter"])
# A printed page's number (epub:type pagebreak, ARIA doc-pagebreak, Gutenberg's page anchors): not
# read, but where a page starts is evidence (a title page ends at the next page).
PAGE_MARK_CLASSES = frozenset(["pagenum", "pageno", "page-number", "x-ebookmaker-pageno"])
# Margin notes: glosses printed beside the text, with no reference in it. They follow --notes.
MARGIN_TYPES = frozenset(["sidenote", "marginalia", "z3998:sidenote", "z3998:marginalia"])
MARGIN_CLASS = re.compile(r"^(side-?note|margin-?note|marg-?note|marginalia|sidenote[-_]?(left|right)|"
                          r"(left|right)[-_]?(side)?note)s?$", re.IGNORECASE)
# An untyped <aside> longer than this is a box of content, not a gloss in the margin.
MARGIN_NOTE_CHARS = 600
# An <aside> typed as one of these is content beside the text (a sidebar, a pull quote), read.
ASIDE_CONTENT_TYPES = frozenset(["sidebar", "z3998:sidebar", "pullquote", "z3998:pullquote", "tip", "help",
                                 "warning", "important"])
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
# Han, Hiragana, Katakana, CJK punctuation (the ideographic space included), the small and
# fullwidth forms (Gutenberg's Chinese uses U+FE56 "﹖" as its question mark):
# scripts written without spaces between words. Hangul is not among them: Korean spaces words.
CJK = ("\u2e80-\u2fdf\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
       "\uf900-\ufaff\ufe30-\ufe6f\uff00-\uffef\U00020000-\U0003134f")
# A source line break (with the indentation around it) between two such characters is a line wrap,
# not a word break. A space on one line ("第一回 甄士隱", a title after its number) and a <br> are
# kept. Our markers where a pronunciation or language run starts or ends may sit on either side.
_MARKS = "(?:[\ue001\ue005]|[\ue000\ue003][^\ue002\ue004]*[\ue002\ue004])*"
CJK_WRAP = re.compile(f"([{CJK}]{_MARKS})[ \t]*[\r\n][ \t\r\n]*(?={_MARKS}[{CJK}])")
RAW_LINES = re.compile(r"[\n\x1e]")
EMPTY_BRACKETS = re.compile(r"\(\s*\)|\[\s*\]")
LINK_HOLE = "\ue011"  # a private marker: where a link's text was, in Block.skeleton
LINE_BREAK = "\x1e"  # a private marker: raw newlines in the source are only whitespace
CHAR_REF = re.compile(rb"&#(?:[xX]([0-9a-fA-F]{1,16})|([0-9]{1,20}));")
# libxml2 errors after which the rest of a document is lost (entity amplification, depth, ...).
RESOURCE_ERRORS = frozenset([etree.ErrorTypes.ERR_RESOURCE_LIMIT, etree.ErrorTypes.ERR_ENTITY_LOOP])


@dataclass
class Block:
    text: str
    heading: bool = False
    notes: list[str] = field(default_factory=list)  # hrefs of the note references it held
    in_note: bool = False  # part of a note body the caller asked about
    break_before: bool = False  # a scene break comes before it
    page_before: bool = field(default=False, compare=False)  # a printed page starts before it
    inscription: bool = False  # part of an epigraph or dedication (read even on a skipped title page)
    phonemes: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, ipa)
    langs: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, BCP 47 tag)
    # Where it sits, for boilerplate.py: inside <header>/<footer>/<nav> (or their ARIA roles), or
    # inside verse (a refrain repeats on purpose).
    furniture: bool = False
    verse: bool = False
    # A block's own words with each link's text as LINK_HOLE (blocks with links): "Next topic: \ue011"
    # repeats across files where the link texts differ (boilerplate.py).
    skeleton: str = ""

    note_key: str | None = field(default=None, compare=False)  # in_note: which note ("file#id") it is part of
    margin: bool = field(default=False, compare=False)  # a margin note (kept apart, for the notes policy)
    # A note placed in the flow (<aside epub:type="footnote">): never read where it stands; kept
    # apart so that what is not read at all can be counted.
    aside_note: bool = field(default=False, compare=False)
    # A heading's rank: 1-6 for h1-h6 (an hgroup: its highest), 0 for a chapter line.
    level: int = field(default=0, compare=False)
    # Its lines, where <br/> breaks it into several (a list in one paragraph): classify.py weighs them.
    lines: tuple[str, ...] = field(default=(), compare=False)


@dataclass
class Content:
    """What a document holds besides prose, and how to read it (read_blocks)."""
    language: str | None = None  # the book's language, where the markup names none
    image_alt: bool = True  # read content pictures' text alternatives as a short note
    is_cover: Callable[[str], bool] | None = None  # whether an src (as written) is the book's cover image
    # Whether a link (its href as written) points into a file before this one in reading order (None:
    # into this one): a heading linked back to the contents ("II." in Gutenberg's Beowulf) is still
    # the heading.
    points_back: Callable[[str], bool | None] | None = None
    # kind of element not read (or read without its structure) → how many, for Book.warnings
    unread: dict[str, int] = field(default_factory=dict)
    # characters in ebookmaker's Project Gutenberg header/footer boxes, which are never read
    gutenberg_box_chars: int = 0
    # characters under calibre's data-calibre-tts="__skip__" (the book says: do not voice this)
    tts_skip_chars: int = 0
    # characters of blocks whose text is all links within the book (a contents or an index inside a
    # chapter, a back-link line), which are never read
    link_line_chars: int = 0
    link_lines: list[str] = field(default_factory=list)  # the first few, for the skip's preview

    def count(self, kind: str):
        self.unread[kind] = self.unread.get(kind, 0) + 1


def make_block(raw: str, heading: bool = False, **kw) -> Block:
    """Clean text (with ssml:ph and language markers) → a Block with its pronunciation and
    language spans. Markers that do not pair up (a hostile document, a span cut by a chapter
    line) are dropped with the text kept."""
    text = clean(raw)
    if not MARKERS.search(text):
        return Block(text, heading, **kw)
    out: list[str] = []
    length = 0
    phonemes: list[tuple[int, int, str]] = []
    langs: list[tuple[int, int, str]] = []
    open_ph: list[tuple[int, str]] = []  # (start, ipa), innermost last
    open_lang: list[tuple[int, str]] = []
    pos = 0

    def keep(piece: str) -> None:
        # markers removed from between two spaces must not leave a double space (or a leading one)
        nonlocal length
        if piece[:1] == " " and (not out or out[-1].endswith(" ")):
            piece = piece[1:]
        if piece:
            out.append(piece)
            length += len(piece)

    for m in MARKERS.finditer(text):
        if m.start() < pos:  # inside a tag or IPA already read
            continue
        keep(text[pos:m.start()])
        pos = m.end()
        mark = m.group()
        if mark in (PH_START, LANG_START):
            mid = text.find(PH_MID if mark == PH_START else LANG_MID, pos)
            if mid < 0:
                continue
            value, pos = text[pos:mid], mid + 1
            (open_ph if mark == PH_START else open_lang).append((length, value))
        elif mark == PH_END and open_ph:
            start, ipa = open_ph.pop()
            # the innermost pronunciation wins: an outer one that holds another is dropped
            if not (phonemes and phonemes[-1][0] >= start):
                phonemes.append((start, length, clean(MARKERS.sub("", ipa))))
        elif mark == LANG_END and open_lang:
            start, tag = open_lang.pop()
            langs.append((start, length, tag))
    keep(text[pos:])
    for start, tag in open_lang:  # unclosed: runs to the end
        langs.append((start, length, tag))
    text = "".join(out).rstrip()  # no leading space: keep() dropped it
    phonemes = [(a, min(b, len(text)), ipa) for a, b, ipa in phonemes if ipa]
    langs = [(a, min(b, len(text)), tag) for a, b, tag in langs]
    return Block(text, heading, phonemes=_trim_spans(text, phonemes),
                 langs=_trim_spans(text, _flatten_langs(_trim_spans(text, langs))), **kw)


def _trim_spans(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Spans over `text`, each without leading or trailing spaces; empty ones dropped."""
    kept = []
    for start, end, value in spans:
        piece = text[start:end]
        start += len(piece) - len(piece.lstrip())
        end -= len(piece) - len(piece.rstrip())
        if end > start:
            kept.append((start, end, value))
    return kept


def _flatten_langs(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Nested language spans → non-overlapping runs in text order, the innermost language
    winning; neighbouring runs of one language merge. A voice the book names (with_voice) is
    inherited by the spans inside it, as is a language by a span that names only a voice."""
    runs: list[tuple[int, int, str]] = []
    stack: list[tuple[int, int, str]] = []
    pos = 0

    def run_to(upto: int) -> None:
        nonlocal pos
        if stack and upto > pos:
            tag = _inherited_tag([t for *_, t in stack])
            if runs and runs[-1][2] == tag and runs[-1][1] == pos:
                runs[-1] = (runs[-1][0], upto, tag)
            else:
                runs.append((pos, upto, tag))
        pos = max(pos, upto)

    # outer before inner; of two spans over the same text the one closed later is the outer
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], -spans[i][1], -i))
    for span in (spans[i] for i in order):
        while stack and stack[-1][1] <= span[0]:
            run_to(stack[-1][1])
            stack.pop()
        run_to(span[0])
        stack.append(span)
    while stack:
        run_to(stack[-1][1])
        stack.pop()
    return runs


def _inherited_tag(tags: list[str]) -> str:
    """The innermost of nested tags, with the voice (and, where it names none, the language) of
    the nearest outer tag that has one."""
    lang, voice = split_voice(tags[-1])
    for outer in reversed(tags[:-1]):
        outer_lang, outer_voice = split_voice(outer)
        lang, voice = lang or outer_lang, voice or outer_voice
    return with_voice(lang, voice)


def reading_tag(el, outer: str | None) -> str | None:
    """The run tag in effect inside `el`, given the one around it: its language (xml:lang, else
    the outer one's) and the voice calibre's `data-calibre-tts` names (its own, else the outer one's)."""
    lang, voice = split_voice(outer)
    named = calibre_tts(el)
    if named == CALIBRE_TTS_SKIP:
        named = None
    return with_voice(element_lang(el) or lang, MARKERS.sub("", named) if named else voice)


def element_lang(el) -> str | None:
    """The language an element declares (xml:lang wins over lang), if it is a well-formed tag."""
    value = el.get(XML_LANG) or el.get("lang") or el.get("xml:lang")
    value = (value or "").strip()
    return value if LANG_TAG.match(value) else None


def inherited_lang(el) -> str | None:
    """The language in effect at an element: its own, else its nearest ancestor's."""
    node = el
    while node is not None:
        if isinstance(node.tag, str):
            lang = element_lang(node)
            if lang:
                return lang
        node = node.getparent()
    return None


def _inherited_reading(el) -> str | None:
    """The run tag in effect at an element: its language and the voice calibre names, each its
    own or its nearest ancestor's."""
    chain = [el, *el.iterancestors()][::-1]
    tag = None
    for node in chain:
        if isinstance(node.tag, str):
            tag = reading_tag(node, tag)
    return tag


def lang_marked(text: str, lang: str | None) -> str:
    return f"{LANG_START}{lang}{LANG_MID}{text}{LANG_END}" if lang and text else text


@dataclass
class Anchor:
    id: str


def parse_xhtml(data: bytes | str) -> etree._Element:
    """Parse a content document leniently (see parse_document); what was lost is not reported."""
    return parse_document(data)[0]


def parse_document(data: bytes | str) -> tuple[etree._Element, list[str]]:
    """Parse a content document leniently: XML first (keeps namespaces), then the HTML parser.
    Returns the tree and what could not be read, one line each ("only partly read: ..."): the
    parsers recover from broken markup, but a resource limit (entity expansion, a billion
    laughs) ends the document early. Invalid character references are dropped beforehand
    (libxml2 would keep &#xD800; as bytes no string can hold); nesting deeper than libxml2's
    limit is read by the flattening parser in flat_html.py."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    data, dropped = drop_invalid_char_refs(data)
    problems = [invalid_refs_warning(dropped)] if dropped else []
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, huge_tree=True)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError:
        root = None
    errors = parser.error_log
    if root is None or local_name(root) != "html":
        html_parser = html.HTMLParser(recover=True, no_network=True, huge_tree=True)
        try:
            root = html.document_fromstring(data, parser=html_parser)
        except etree.ParserError:  # an empty or unreadable document reads as nothing
            root = html.fromstring("<html><body></body></html>")
        errors = html_parser.error_log
    limits = [e for e in errors if e.type in RESOURCE_ERRORS]
    if any("depth" in e.message for e in limits):
        from .flat_html import MAX_DEPTH, parse_flat

        root = parse_flat(data)
        problems.append(f"elements nested too deep for the XML parser; read with nesting below {MAX_DEPTH} "
                        f"levels flattened")
    elif limits:
        problems.append(f"only partly read ({limits[0].message.strip().rstrip('.')}): the text after that point is lost")
    return root, problems


def drop_invalid_char_refs(data: bytes) -> tuple[bytes, list[str]]:
    """Remove character references to code points XML does not allow (&#0;, &#xD800;, &#x110000;);
    returns the cleaned bytes and the references removed."""
    dropped: list[str] = []

    def check(m: re.Match) -> bytes:
        digits = m.group(1) or m.group(2)
        value = int(digits, 16) if m.group(1) else int(digits)
        if value in (0x9, 0xA, 0xD) or 0x20 <= value <= 0xD7FF or 0xE000 <= value <= 0xFFFD or (
                0x10000 <= value <= 0x10FFFF):
            return m.group(0)
        dropped.append(m.group(0).decode("ascii"))
        return b""

    if b"&#" not in data:
        return data, []
    return CHAR_REF.sub(check, data), dropped


def invalid_refs_warning(dropped: list[str]) -> str:
    return f"{len(dropped)} invalid character reference(s) dropped ({', '.join(dict.fromkeys(dropped[:3]))})"


def local_name(el) -> str:
    tag = el.tag
    if not isinstance(tag, str):
        return ""  # comments and processing instructions
    return _local(tag)


@functools.lru_cache(maxsize=1024)
def _local(tag: str) -> str:
    # (A book has a few dozen tags and asks millions of times.)
    return tag.rpartition("}")[2].lower()


def epub_types(el) -> set[str]:
    value = el.get(EPUB_TYPE) or el.get("epub:type") or ""
    return set(value.split())


def is_inscription(el) -> bool:
    """An epigraph or a dedication: the author's words, even where the page around them is not."""
    roles = set((el.get("role") or "").split())
    return bool(epub_types(el) & INSCRIPTION_TYPES or roles & {"doc-epigraph", "doc-dedication"})


def find_body(root):
    for el in root.iter():
        if local_name(el) == "body":
            return el
    return root


def clean(text: str) -> str:
    """Normalise whitespace and drop invisible characters."""
    text = INVISIBLE.sub("", text)
    # (Most pieces hold no bracket and no raw line break; the corpus's books clean a million.)
    if "(" in text or "[" in text:
        text = EMPTY_BRACKETS.sub("", text)
    if "\n" in text or "\r" in text:
        text = CJK_WRAP.sub(r"\1", text)
    return SPACES.sub(" ", text).strip()


def read_blocks(root, anchors: set[str] | frozenset[str] = frozenset(),
                note_elements=frozenset(), content: Content | None = None) -> list[Block | Anchor]:
    """The spoken blocks of a parsed document, with an Anchor wherever an id in `anchors` starts.
    Blocks read inside an element of `note_elements` are flagged in_note. `content`: how MathML
    and pictures are read, and where what is not read is counted (None: the defaults)."""
    reader = _Reader(anchors, note_elements, content or Content())
    body = find_body(root)
    parent = body.getparent()
    reader.lang = [_inherited_reading(parent) if parent is not None else None]
    reader.walk(body)
    reader.flush()
    reader.place_margins()
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
        elif inside and not (item.margin or item.aside_note):  # kept apart for the notes policy
            result.append(item.text)
    return result


def is_noteref(el) -> bool:
    """A note reference marker: by EPUB/ARIA semantics, or (EPUB2, Gutenberg) a link to an anchor
    whose text is only a number or a note symbol."""
    if local_name(el) not in ("a", "span", "sup"):
        return False
    if epub_types(el) & NOTEREF_TYPES or (el.get("role") or "") in NOTEREF_ROLES:
        return True
    if local_name(el) != "a":
        return False
    href = el.get("href") or ""
    text = clean("".join(el.itertext())).lower()
    return "#" in href and not IMAGE_HREF.search(href.split("#")[0]) and bool(NOTE_MARKER.match(text))


def noteref_href(el) -> str | None:
    if local_name(el) == "a":
        return el.get("href")
    link = next((a for a in el.iter() if local_name(a) == "a" and a.get("href")), None)
    return link.get("href") if link is not None else None


def is_scene_break(el) -> bool:
    tag = local_name(el)
    if tag == "hr":
        return True
    if epub_types(el) & SCENE_BREAK_TYPES or el.get("role") == "separator":
        return tag in BLOCK_TAGS and not clean("".join(el.itertext())).strip("*⁂•·~#◆◇❧☙✻✽✢✱❦. ")
    return False


def ssml_phonemes(el) -> str | None:
    """The IPA an element's ssml:ph gives, if its alphabet (own or inherited) is IPA."""
    ph = el.get(SSML_PH)
    if not ph:
        return None
    node = el
    while node is not None:
        alphabet = node.get(SSML_ALPHABET) if isinstance(node.tag, str) else None
        if alphabet:
            return ph if alphabet.lower() == "ipa" else None
        node = node.getparent()
    return ph  # no alphabet given: EPUB content docs use IPA in practice


def is_aside_note(el) -> bool:
    """A note placed in the text flow (<aside epub:type="footnote">), not hidden."""
    return local_name(el) == "aside" and bool(epub_types(el) & ASIDE_NOTE_TYPES) and not is_hidden(el)


def is_hidden(el) -> bool:
    """Hidden by the markup: `hidden`, aria-hidden, an inline display:none."""
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    style = el.get("style")
    return bool(style and HIDDEN_STYLE.search(style))


CALIBRE_TTS_SKIP = "__skip__"


def calibre_tts(el) -> str | None:
    """calibre's per-passage narration setting: `data-calibre-tts="VOICE"` or a JSON object
    with "voice"; "__skip__" means the passage is not read."""
    value = (el.get("data-calibre-tts") or "").strip() if isinstance(el.tag, str) else ""
    if value.startswith("{"):
        try:
            value = str(json.loads(value).get("voice") or "")
        except (ValueError, AttributeError):
            return None
    return value or None


def is_unread(el) -> bool:
    tag = local_name(el)
    if not tag or tag in UNREAD_TAGS:
        return True
    if is_hidden(el):
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


def is_margin_note(el) -> bool:
    """A margin note by its epub:type or class, or an <aside> that no note reference points at
    (the caller passes those as note elements) and that is not a sidebar or pull quote."""
    types = epub_types(el)
    if types & MARGIN_TYPES:
        return True
    classes = el.get("class")
    if classes and any(MARGIN_CLASS.match(c) for c in classes.split()):
        return True
    if local_name(el) != "aside" or types & (ASIDE_NOTE_TYPES | ASIDE_CONTENT_TYPES) or (
            el.get("role") or "").startswith("doc-"):
        return False
    # An untyped <aside>: a gloss beside the text, unless it is a box of content (HTMLBook's
    # data-type="sidebar", a class saying so, a heading of its own, or longer than a gloss).
    marks = set((el.get("data-type") or "").split()) | set((el.get("class") or "").lower().split())
    if marks & ASIDE_CONTENT_TYPES or any(local_name(d) in HEADING_TAGS or local_name(d) == "hgroup"
                                          for d in el.iterdescendants()):
        return False
    return len(clean("".join(el.itertext()))) <= MARGIN_NOTE_CHARS


def is_page_mark(el) -> bool:
    return ("pagebreak" in epub_types(el) or el.get("role") == "doc-pagebreak"
            or bool(PAGE_MARK_CLASSES.intersection((el.get("class") or "").split())))


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


def shown(raw: str) -> str:
    """Raw block text as it will read: markup gone, whitespace cleaned."""
    return clean(MARKUP.sub("", raw))


def source_text(text: str | None) -> str | None:
    """Text from the document, without characters that would read as our private markers."""
    return MARKERS.sub("", text) if text and MARKERS.search(text) else text


def join_verse_lines(lines: list[str]) -> str:
    """One line group → one block; a line that ends without punctuation gets a comma so that the
    voice pauses at the line end."""
    lines = [clean(line) for line in lines]
    lines = [line for line in lines if line]
    spoken = [line + "," if line.rstrip(PH_END + LANG_END)[-1:].isalnum() else line for line in lines[:-1]]
    return " ".join(spoken + lines[-1:])


class _Reader:
    """Walks a document body once, in order, turning it into blocks."""

    def __init__(self, anchors, note_elements=frozenset(), content: Content | None = None):
        self.anchors = anchors
        self.content = content or Content()
        self.in_furniture = 0
        self.pending_notes: list[str] = []  # picture notes, read after the block that holds them
        self.note_elements = note_elements
        self.in_note = 0
        self.note_keys: list = []  # keys of the notes being read, innermost last
        self.in_inscription = 0
        self.block_notes: list[str] = []  # noterefs seen in the block being built
        self.pending_break = False
        self.pending_page = False
        self.out: list[Block | Anchor] = []
        self.parts: list[str] = []  # text of the block being built
        self.part_langs: list[str | None] = []  # the language each part was read in
        self.lang: list[str | None] = [None]  # the language in effect, innermost last
        self.skeleton: list[str] = []  # the block's text with link texts as LINK_HOLE
        self.link_chars = 0  # characters of it that came from internal links
        self.text_chars = 0  # characters of it that came from anything else
        self.forward_links = 0  # internal links in it that point anywhere but back
        self.seen_ids: set[str] = set()  # ids met so far in this document
        self.in_link = 0
        self.scheduled: list[tuple] = []  # steps _enter leaves for the element's children and end
        self.margins: list[Block] = []  # margin notes met, placed after the block they stand beside
        self.open_blocks: list[str] = []  # the block elements we are inside, innermost last

    def _ends_with_line_break(self) -> bool:
        """Whether the block being built ends with a line break, whitespace aside."""
        for part in reversed(self.parts):
            rest = part.rstrip(" \t\r\n\f\v\xa0")  # (not rstrip(): LINE_BREAK is whitespace to Python)
            if rest:
                return rest.endswith(LINE_BREAK)
        return False

    def add(self, text: str | None):
        if not text:
            return
        self.parts.append(text)
        self.part_langs.append(self.lang[-1])
        if not text.isspace():
            if self.in_link:
                self.link_chars += len(text)
            else:
                self.text_chars += len(text)
        self.skeleton.append(LINK_HOLE if self.in_link and not text.isspace() else text)

    def flush(self, heading: bool = False, level: int = 0):
        raw = self._marked_text()
        # (a heading whose links all lead back, to the contents, is the heading all the same)
        nav_only = self.link_chars and not self.text_chars and (self.forward_links or not heading)
        skeleton = re.sub(f"{LINK_HOLE}+", LINK_HOLE, shown("".join(self.skeleton))) if self.link_chars else ""
        self.parts, self.part_langs, self.link_chars, self.text_chars, self.skeleton = [], [], 0, 0, []
        self.forward_links = 0
        if nav_only:
            line = shown(raw)
            self.content.link_line_chars += len(line)
            if len(self.content.link_lines) < 8:
                self.content.link_lines.append(line)
            self._emit_picture_notes()
            return
        lines = RAW_LINES.split(raw)
        if len(lines) > 1:
            lines = [shown(line) for line in lines]  # (hard-wrapped prose: a block of many lines)
            if any(CHAPTER_LINE.match(line) for line in lines):
                self._emit_with_chapter_lines(re.split(f"({RAW_LINES.pattern})", raw))
                self._emit_picture_notes()
                return
        block = make_block(raw, heading, level=level if heading else 0)
        block.skeleton = skeleton
        if len(lines) > 1:
            block.lines = tuple(line for line in lines if line)
        self.emit(block)
        self._emit_picture_notes()

    def _emit_picture_notes(self):
        notes, self.pending_notes = self.pending_notes, []
        for note in notes:
            self.emit(make_block(note))

    def mark(self, marker: str):
        """A private marker into the block being built (not counted as text)."""
        self.parts.append(marker)
        self.part_langs.append(self.lang[-1])

    def _marked_text(self) -> str:
        """The block's parts, each run of one language wrapped in language markers."""
        if not any(self.part_langs):
            return "".join(self.parts)
        out, run, run_lang = [], [], None
        for text, lang in zip(self.parts, self.part_langs):
            if lang != run_lang and run:
                out.append(lang_marked("".join(run), run_lang))
                run = []
            run.append(text)
            run_lang = lang
        out.append(lang_marked("".join(run), run_lang))
        return "".join(out)

    def push_lang(self, el):
        self.lang.append(reading_tag(el, self.lang[-1]))

    def pop_lang(self, _=None):
        self.lang.pop()

    def emit(self, block: Block):
        """Add a finished block, carrying the notes, note flag and scene break."""
        if not block.text:
            return
        if SCENE_BREAK_TEXT.match(block.text):
            self.pending_break = True
            self.block_notes = []
            return
        block.notes, self.block_notes = self.block_notes, []
        block.in_note = self.in_note > 0
        block.note_key = self.note_keys[-1] if self.note_keys else None
        block.inscription = self.in_inscription > 0
        block.break_before, self.pending_break = self.pending_break, False
        block.page_before, self.pending_page = self.pending_page, False
        block.furniture = block.furniture or self.in_furniture > 0
        self.out.append(block)
        self.place_margins()

    def margin(self, el):
        """A margin note, or a note placed in the flow: kept apart, placed after the block it
        stands beside, for the notes policy to read, move or count."""
        block = make_block(lang_marked(" ".join(inline_lines(el, self.content.language)),
                                       reading_tag(el, self.lang[-1])))
        block.inscription = self.in_inscription > 0
        if is_aside_note(el):
            block.aside_note = True
            block.note_key = self.note_elements.get(el) if isinstance(self.note_elements, dict) else None
        else:
            block.margin = True
        self.margins.append(block)

    def place_margins(self):
        self.out.extend(b for b in self.margins if b.text)
        self.margins = []

    def _verse_margins(self, found: list):
        """Margin notes that inline_lines set aside inside a stanza or a table row."""
        for el in found:
            self.margin(el)

    def _emit_with_chapter_lines(self, pieces: list[str]):
        """pieces: lines and, between them, what ended each (a source newline or a <br>), kept
        so that clean() can tell a CJK line wrap from a break."""
        pending: list[str] = []
        for index, piece in enumerate(pieces):
            if index % 2:  # a separator
                if pending:
                    pending.append(piece)
            elif CHAPTER_LINE.match(shown(piece)):
                self._emit_text("".join(pending))
                pending = []
                self.emit(make_block(piece, heading=True))
            else:
                pending.append(piece)
        self._emit_text("".join(pending))

    def _emit_text(self, raw: str):
        self.emit(make_block(raw))

    def _points_back(self, href: str) -> bool:
        """Whether a link leads to an earlier place: an earlier file, or in this file an id already met."""
        doc, _, fragment = href.partition("#")
        earlier = self.content.points_back(href) if doc and self.content.points_back else None
        if earlier is None:  # this file (or no way to tell)
            return bool(fragment) and fragment in self.seen_ids
        return earlier

    def mark_anchor(self, el):
        el_id = el.get("id")
        if el_id:
            self.seen_ids.add(el_id)
        if el_id and el_id in self.anchors:
            self.flush()
            self.place_margins()
            self.out.append(Anchor(el_id))

    def walk(self, root):
        """Read root's subtree in document order. An explicit stack, not recursion: a document
        may nest elements as deep as it likes. Each entry is (step, argument)."""
        stack = [(self._enter, root)]
        while stack:
            step, arg = stack.pop()
            step(arg)
            if self.scheduled:  # what a step scheduled (an element's children, its end) comes next
                stack.extend(reversed(self.scheduled))
                self.scheduled = []

    def _enter(self, el):
        if is_noteref(el):
            href = noteref_href(el)
            if href:
                self.block_notes.append(href)
            return
        tag = local_name(el)
        if tag in ("math", "img", "svg") or tag in EMBEDDED_TAGS:
            if not is_hidden(el):
                self._content(el, tag)
            return
        if tag == "a" and IMAGE_HREF.search((el.get("href") or "").split("#")[0]):
            # a link to a larger copy of a picture: the link is not read, the picture is
            for picture in el.iter():
                if local_name(picture) in ("img", "svg") and not is_hidden(picture):
                    self._content(picture, local_name(picture))
            return
        if tag == "switch":  # EPUB 3.0 epub:switch: the MathML case, else the fallback, never both
            chosen = switch_choice(el)
            if chosen is not None:
                self._enter(chosen)
            return
        if is_aside_note(el):
            self.margin(el)
            return
        if calibre_tts(el) == CALIBRE_TTS_SKIP:
            self.content.tts_skip_chars += len(clean("".join(el.itertext())))
            return
        if is_unread(el):
            if is_page_mark(el):
                self.pending_page = True
            if GUTENBERG_BOX_CLASSES.intersection((el.get("class") or "").split()):
                self.content.gutenberg_box_chars += len(clean("".join(el.itertext())))
            return
        if el not in self.note_elements and is_margin_note(el):
            self.margin(el)
            return
        if is_scene_break(el):
            self.flush()
            self.pending_break = True
            return
        if el in self.note_elements:
            self.flush()
            self.in_note += 1
            self.note_keys.append(self.note_elements.get(el) if isinstance(self.note_elements, dict) else None)
            self._open(el)
            self.scheduled.append((self._end_note, None))
            return
        if is_furniture(el, tag):
            self.flush()
            self.in_furniture += 1
            self._open(el)
            self.scheduled.append((self._end_furniture, None))
            return
        if is_inscription(el):
            self.flush()
            self.in_inscription += 1
            self._open(el)
            self.scheduled.append((self._end_inscription, None))
            return
        self._open(el)

    # -- MathML, pictures, embedded objects -------------------------------------------------------

    def _content(self, el, tag: str):
        if tag == "math":
            self._math(el)
        elif tag == "img":
            self._picture(el, alt_text.raw_alternative(el))
        elif tag == "svg":
            self._svg(el)
        elif clean("".join(el.itertext())):  # <object>, <canvas>, <video>: their fallback is content
            self._open(el)
        elif tag in ("object", "embed", "iframe", "canvas"):
            self.content.count(f"<{tag}>")

    def _math(self, el):
        unknown: list[str] = []
        lang = split_voice(self.lang[-1])[0] or self.content.language
        spoken = mathml.speak(el, lang, unknown)
        for name in unknown:
            self.content.count(f"MathML <{name}>")
        if not spoken:
            if clean("".join(el.itertext())).strip("".join(mathml.END_OF_PROOF)):
                self.content.count("<math>")  # it had text, and none of it could be said
            return
        if mathml.is_display(el):
            self.flush()
            self.mark_anchor(el)
            self.add(lang_marked(spoken + ".", self.lang[-1]))
            self.flush()
        else:
            self.mark_anchor(el)
            after = " " if (el.tail or "")[:1].isalnum() else ""  # "x²." keeps its full stop close
            self.add(" " + lang_marked(spoken, self.lang[-1]) + after)

    def _picture(self, el, alt: str):
        if alt_text.is_decorative(el):
            return
        if 0 < len(alt) <= 2 and alt.isalpha() and (el.tail or "")[:1].isalpha():
            self.add(alt)  # a drop cap drawn as a picture: the first letter of the word it begins
            return
        if not self.content.image_alt:
            return
        if mathml.TEX_SOURCE.search(alt):  # a formula drawn as a picture, described in TeX
            self.content.count("formula picture (TeX description)")
            return
        src = el.get("src") or el.get("{http://www.w3.org/1999/xlink}href") or el.get("href") or ""
        if src and callable(self.content.is_cover) and self.content.is_cover(src):
            return
        said = alt_text.informative(alt)
        if not said or alt_text.repeats(said, _caption_beside(el)):
            return
        if any(local_name(a) in HEADING_TAGS for a in el.iterancestors()):
            return  # a heading drawn as a picture repeats the title the TOC gives
        language = split_voice(self.lang[-1])[0] or self.content.language
        self.pending_notes.append(lang_marked(alt_text.spoken_note(said, language), self.lang[-1]))

    def _svg(self, el):
        if any(local_name(d) == "text" and clean("".join(d.itertext())) for d in el.iter()):
            self.content.count("SVG <text>")
        images = [d for d in el.iter() if local_name(d) == "image"]
        alt = alt_text.raw_alternative(el, svg=True)
        if not alt and len(images) == 1:
            alt = alt_text.raw_alternative(images[0])
        target = images[0] if images and not alt_text.is_decorative(el) else el
        if target is not el and callable(self.content.is_cover):
            src = target.get("{http://www.w3.org/1999/xlink}href") or target.get("href") or ""
            if src and self.content.is_cover(src):
                return
        self._picture(el, alt)

    def _end_note(self, _):
        self.flush()
        self.in_note -= 1
        self.note_keys.pop()

    def _end_furniture(self, _):
        self.flush()
        self.in_furniture -= 1

    def _end_inscription(self, _):
        self.flush()
        self.in_inscription -= 1

    def _open(self, el):
        self.mark_anchor(el)
        tag = local_name(el)
        if tag == "tr":
            self.flush()
            self._note_refs(el)
            found: list = []
            self.add(lang_marked(row_text(el, self.content.language, found), reading_tag(el, self.lang[-1])))
            self._verse_margins(found)
            self.flush()
            return
        if tag == "hgroup":
            self.flush()
            self._note_refs(el)
            self.add(lang_marked(heading_group_text(el, self.content.language), reading_tag(el, self.lang[-1])))
            ranks = [int(local_name(c)[1]) for c in el.iter() if local_name(c) in HEADING_TAGS]
            self.flush(heading=True, level=min(ranks, default=0))
            return
        if _is_verse(el) or tag == "pre":
            self.flush()
            self.add_line_group(el)
            return
        if tag == "br":
            if self._ends_with_line_break() and not (self.open_blocks and self.open_blocks[-1] in HEADING_TAGS):
                # A blank line (<br/><br/>) ends a paragraph, as in the paragraph breaks of a text
                # file: a rights line atop a section, or a list's groups, kept apart from what
                # follows them in the same <p>. (Not in a heading, which stays one block.)
                self.flush()
            else:
                self.add(LINE_BREAK)
            return
        block = tag in BLOCK_TAGS
        if block:
            self.flush()
            self.open_blocks.append(tag)
        self.push_lang(el)
        link = tag == "a" and _is_internal_link(el)
        self.in_link += link
        if link and not self._points_back(el.get("href")):
            self.forward_links += 1
        ph = ssml_phonemes(el)
        if ph:
            self.mark(PH_START + source_text(ph) + PH_MID)
        self.add(source_text(el.text))
        for child in el:
            self.scheduled.append((self._enter, child))
            self.scheduled.append((self.add, source_text(child.tail)))
        self.scheduled.append((self._close, (tag if block else None, link, ph)))

    def _close(self, opened):
        block_tag, link, ph = opened
        if ph:
            self.mark(PH_END)
        self.in_link -= link
        self.pop_lang()
        if block_tag:
            self.open_blocks.pop()
            heading = block_tag in HEADING_TAGS
            self.flush(heading=heading, level=int(block_tag[1]) if heading else 0)

    def add_line_group(self, el):
        """Verse: each stanza (or the whole group if it has no stanzas) becomes one block. A poem
        in numbered parts (<section>s inside the poem, which the TOC may point at) is read part
        by part: each part's heading is a heading and its stanzas keep their own blocks."""
        stanzas = [c for c in el if _is_stanza(c) or _is_verse_part(c)]
        if not stanzas:
            self._note_refs(el)
            found: list = []
            lines = inline_lines(el, self.content.language, found)  # marks el's own language
            self._verse_margins(found)
            if lines:
                self.emit(make_block(lang_marked(join_verse_lines(lines), reading_tag(el, self.lang[-1])),
                                     verse=True))
            return
        self.push_lang(el)
        for child in el:
            if is_aside_note(child) or (child not in self.note_elements and is_margin_note(child)):
                self.scheduled.append((self._enter, child))  # kept apart, even a <p class="sidenote">
            elif _is_stanza(child):
                self.scheduled.append((self._stanza, child))
            elif _is_verse_part(child):
                self.scheduled.append((self._verse_part, child))
            elif not is_unread(child):
                self.scheduled.append((self._enter, child))
                self.scheduled.append((self.flush, False))
        self.scheduled.append((self._end_line_group, None))

    def _end_line_group(self, _):
        self.pop_lang()
        self.place_margins()  # a margin note beside the verse stays with it

    def _verse_part(self, el):
        """A part of a poem: entered like any element (anchor, notes, language), read as verse."""
        if is_noteref(el) or is_unread(el) or el in self.note_elements or is_inscription(el):
            self._enter(el)
            return
        self.mark_anchor(el)
        self.add_line_group(el)

    def _stanza(self, el):
        self.mark_anchor(el)
        self._note_refs(el)
        found: list = []
        lines = inline_lines(el, self.content.language, found)
        self._verse_margins(found)
        if lines:
            self.emit(make_block(lang_marked(join_verse_lines(lines), reading_tag(el, self.lang[-1])), verse=True))

    def _note_refs(self, el):
        """Note references inside verse, which is read through inline_text rather than walk."""
        for d in el.iter():
            if isinstance(d.tag, str) and is_noteref(d) and not any(is_unread(a) for a in d.iterancestors()
                                                                   if a is not el):
                href = noteref_href(d)
                if href:
                    self.block_notes.append(href)


def is_furniture(el, tag: str) -> bool:
    """Page furniture: a <nav>, the page's own <header>/<footer> (not a section's: Standard Ebooks
    puts chapter titles in one), or an element with a banner/contentinfo/navigation role."""
    if FURNITURE_ROLES & set((el.get("role") or "").split()) or tag == "nav":
        return True
    return tag in FURNITURE_TAGS and not any(local_name(a) in SECTIONING_TAGS for a in el.iterancestors())


def switch_choice(el):
    """Which part of an epub:switch is read: the first case for MathML, else the default."""
    cases = [c for c in el if local_name(c) == "case"]
    chosen = next((c for c in cases if "MathML" in (c.get("required-namespace") or "")), None)
    return chosen if chosen is not None else next((c for c in el if local_name(c) == "default"), None)


def _caption_beside(el) -> str:
    """The words next to a picture: its <figure>'s, else those of the block that holds it."""
    own = clean("".join(el.itertext()))
    for ancestor in el.iterancestors():
        tag = local_name(ancestor)
        if tag == "body":
            return ""
        if tag == "figure" or tag in BLOCK_TAGS:
            text = clean("".join(ancestor.itertext()))
            text = clean(text.replace(own, "", 1)) if own else text
            if text or tag == "figure":
                return text
    return ""


def _is_verse_part(el) -> bool:
    """A <section> or <article> inside verse: a numbered part of a poem, or a poem of a cycle."""
    return local_name(el) in ("section", "article")


def _is_stanza(el) -> bool:
    tag = local_name(el)
    if tag == "p":
        return True
    classes = el.get("class")
    return bool(classes and STANZA_CLASSES.intersection(classes.split()))


def inline_text(el, language: str | None = None, margins: list | None = None) -> str:
    """All the readable text inside el, block boundaries and <br> kept as line breaks. Margin
    notes are not part of it; they are added to `margins` when it is given. `language`: the
    book's, for MathML where the markup names none."""
    parts: list[str] = []
    _collect(el, parts, language, margins)
    return "".join(parts)


def _collect(root, parts: list[str], math_language: str | None = None, margins: list | None = None):
    """inline_text's walk: iterative, like _Reader.walk, for any depth of nesting."""
    stack: list = [root]
    while stack:
        el = stack.pop()
        if isinstance(el, str):  # text or a marker scheduled for after an element's children
            parts.append(el)
            continue
        if el is not root and margins is not None and is_aside_note(el):
            margins.append(el)
            continue
        tag = local_name(el)
        if tag == "switch":
            chosen = switch_choice(el)
            if chosen is not None:
                stack.append(chosen)
            continue
        if tag == "math" and not is_hidden(el):
            spoken = mathml.speak(el, inherited_lang(el) or math_language)
            if spoken:
                parts.append(f" {spoken}{'.' if mathml.is_display(el) else ''}"
                             f"{' ' if (el.tail or '')[:1].isalnum() else ''}")
            continue
        if (is_unread(el) and not (el is root and is_aside_note(el))) or is_noteref(el):
            continue
        if el is not root and is_margin_note(el):
            if margins is not None:
                margins.append(el)
            continue
        if tag == "br" or tag in BLOCK_TAGS:
            parts.append(LINE_BREAK)
        lang = element_lang(el)
        if lang:
            parts.append(LANG_START + lang + LANG_MID)
        ph = ssml_phonemes(el)
        if ph:
            parts.append(PH_START + source_text(ph) + PH_MID)
        if el.text:
            parts.append(source_text(el.text))
        after: list = []
        for child in el:
            after.append(child)
            if child.tail:
                after.append(source_text(child.tail))
        if ph:
            after.append(PH_END)
        if lang:
            after.append(LANG_END)
        if tag in BLOCK_TAGS:
            after.append(LINE_BREAK)
        stack.extend(reversed(after))


def inline_lines(el, language: str | None = None, margins: list | None = None) -> list[str]:
    """The lines of inline_text, cleaned; a line that is only markers joins its neighbour."""
    lines: list[str] = []
    carry = ""
    for line in (clean(x) for x in inline_text(el, language, margins).split(LINE_BREAK)):
        if not line:
            continue
        if not shown(line):
            if lines:
                lines[-1] += line
            else:
                carry += line
            continue
        lines.append(carry + line)
        carry = ""
    return lines


def row_text(tr, language: str | None = None, margins: list | None = None) -> str:
    """A table row read as one sentence: 'Speaker: line' for drama, else cells joined by commas."""
    spoken = ""
    for cell in tr:
        if local_name(cell) not in ("td", "th") or is_unread(cell):
            continue
        lines = inline_lines(cell, language, margins)
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


def heading_group_text(el, language: str | None = None) -> str:
    """<hgroup><h3>I</h3><p>The Period</p></hgroup> → 'I. The Period'."""
    parts = [clean(inline_text(child, language)) for child in el if not is_unread(child)]
    parts = [p for p in parts if p]
    spoken = [p + "." if p[-1].isalnum() else p for p in parts[:-1]]
    return " ".join(spoken + parts[-1:])
