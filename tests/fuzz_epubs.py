"""Hostile EPUBs for fuzzing the reader, made deterministically from (seed, index).

Every input starts from a corpus book cut down to a few small spine documents (so thousands run
quickly), then gets one to four mutations: byte flips inside an entry (inflated, flipped, deflated
again), mangled OPF / nav / NCX / container trees (dropped elements, emptied lists, wrong hrefs,
duplicate ids, missing attributes, deep nesting, huge attributes), raw text inserts (bogus character
references such as &#xD800;, undefined entities, stray markup), random XHTML (well-formed or tag
soup, random namespaces and entities), renamed / dropped / duplicated entries, odd compression,
and zip-level damage (truncation, flipped header bytes).

    python tests/fuzz_epubs.py --seed 1 --index 42 -o /tmp/input.epub   # regenerate one input

The corpus is tests/corpus/.
"""

from __future__ import annotations

import argparse
import copy
import functools
import io
import posixpath
import random
import re
import struct
import sys
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from lxml import etree

# The base books stay the corpus as it was before issue 29 added 34: a seed and index name the
# same input as the corpus grows, and the thousand-input run keeps its time.
from corpus_expectations import ADDED

CORPUS = Path(__file__).resolve().parent / "corpus"
DOC_LIMIT = 12_000  # bytes of a spine document kept in a cut-down book
SPINE_LIMIT = 4  # spine documents kept
ZIP_TIME = (2000, 1, 1, 0, 0, 0)  # fixed, so the same (seed, index) gives the same bytes
XHTML_NS = "http://www.w3.org/1999/xhtml"
EPUB_NS = "http://www.idpf.org/2007/ops"
OPF_NS = "http://www.idpf.org/2007/opf"
NCX_NS = "http://www.daisy.org/z3986/2005/ncx/"


def corpus_dir() -> Path:
    if CORPUS.is_dir():
        return CORPUS
    raise FileNotFoundError(f"no EPUB corpus at {CORPUS}")


def _png_1x1() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\xff\xff")) + chunk(b"IEND", b""))


TINY_IMAGE = _png_1x1()
TINY_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'


# ----------------------------------------------------------------------------------------------
# An EPUB as an ordered list of entries


@dataclass
class Entry:
    name: str
    data: bytes
    method: int = zipfile.ZIP_DEFLATED


@dataclass
class Epub:
    label: str  # which base book
    entries: list[Entry]
    opf: str  # the package document's name
    nav: str | None = None
    ncx: str | None = None
    spine: list[str] = field(default_factory=list)  # spine documents' entry names

    def get(self, name: str) -> Entry | None:
        return next((e for e in self.entries if e.name == name), None)

    def copy(self) -> Epub:
        return Epub(self.label, [Entry(e.name, e.data, e.method) for e in self.entries], self.opf,
                    self.nav, self.ncx, list(self.spine))

    def zip_bytes(self) -> bytes:
        out = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # duplicate names are one of the mutations
            with zipfile.ZipFile(out, "w") as zf:
                for e in self.entries:
                    info = zipfile.ZipInfo(e.name, ZIP_TIME)
                    info.compress_type = e.method
                    zf.writestr(info, e.data, compresslevel=1 if e.method == zipfile.ZIP_DEFLATED else None)
        return out.getvalue()


def _xml(data: bytes):
    return etree.fromstring(data, etree.XMLParser(recover=True, resolve_entities=False, no_network=True,
                                                  huge_tree=True))


def _local(el) -> str:
    return el.tag.rpartition("}")[2] if isinstance(el.tag, str) else ""


def _join(base: str, href: str) -> str:
    return posixpath.normpath(posixpath.join(posixpath.dirname(base), unquote(href.partition("#")[0])))


# ----------------------------------------------------------------------------------------------
# Base books: corpus books cut down


def cut_down(path: Path) -> Epub | None:
    """The book with its first SPINE_LIMIT spine documents (each trimmed to about DOC_LIMIT bytes),
    its nav / NCX trimmed to entries that still point somewhere, fonts dropped and images shrunk.
    None if the book is not a readable EPUB to begin with."""
    try:
        with zipfile.ZipFile(path) as zf:
            entries = [Entry(i.filename, zf.read(i), i.compress_type) for i in zf.infolist()]
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error):
        return None
    by_name = {e.name: e for e in entries}
    container = _xml(by_name["META-INF/container.xml"].data)
    opf_name = next(el.get("full-path") for el in container.iter() if _local(el) == "rootfile")
    opf = _xml(by_name[opf_name].data)
    items = {el.get("id"): el for el in opf.iter() if _local(el) == "item"}
    itemrefs = [el for el in opf.iter() if _local(el) == "itemref"]
    spine_docs = [_join(opf_name, items[r.get("idref")].get("href")) for r in itemrefs]
    middle = len(spine_docs) // 3  # past the front matter, where chapters are
    keep_docs = set(spine_docs[:2] + spine_docs[middle:middle + SPINE_LIMIT - 2])
    nav = ncx = None
    for item in items.values():
        name = _join(opf_name, item.get("href"))
        if "nav" in (item.get("properties") or "").split():
            nav = name
        if item.get("media-type") == "application/x-dtbncx+xml":
            ncx = name
    dropped = set()
    for item in items.values():
        name, kind = _join(opf_name, item.get("href")), item.get("media-type") or ""
        droppable_doc = kind == "application/xhtml+xml" and name not in keep_docs and name != nav
        fonts = "font" in kind or "opentype" in kind or name.lower().endswith((".otf", ".ttf", ".woff", ".woff2"))
        if droppable_doc or fonts or kind.startswith(("audio/", "video/")):
            item.getparent().remove(item)
            dropped.add(name)
    for ref in itemrefs:
        if _join(opf_name, items[ref.get("idref")].get("href")) in dropped:
            ref.getparent().remove(ref)
    kept = []
    for e in entries:
        if e.name in dropped:
            continue
        if e.name == opf_name:
            e.data = etree.tostring(opf, xml_declaration=True, encoding="utf-8")
        elif e.name in keep_docs:
            e.data = _trim_doc(e.data)
        elif e.name in (nav, ncx):
            e.data = _trim_toc(e.name, e.data, keep_docs)
        elif e.name.lower().endswith((".jpg", ".jpeg", ".png", ".gif", ".svg", ".css")) and len(e.data) > 8000:
            e.data = {".svg": TINY_SVG, ".css": b"p { margin: 0 }"}.get(posixpath.splitext(e.name)[1], TINY_IMAGE)
        kept.append(e)
    return Epub(path.stem, kept, opf_name, nav, ncx, [d for d in spine_docs if d in keep_docs])


def _trim_doc(data: bytes) -> bytes:
    if len(data) <= DOC_LIMIT:
        return data
    try:
        root = etree.fromstring(data)
    except etree.XMLSyntaxError:
        return data[:DOC_LIMIT]  # left broken: the reader must cope with that too
    body = next((el for el in root if _local(el) == "body"), None)
    while body is not None:
        size = len(etree.tostring(root))
        if size <= DOC_LIMIT:
            break
        node = body
        while len(node) == 1:  # one wrapping <section>: cut inside it
            node = node[0]
        if len(node) == 0:
            break
        keep = max(1, int(len(node) * DOC_LIMIT / size))
        if keep >= len(node):
            keep = len(node) - 1
        for child in list(node)[keep:]:
            node.remove(child)
    return etree.tostring(root, xml_declaration=True, encoding="utf-8")


def _trim_toc(name: str, data: bytes, keep_docs: set[str]) -> bytes:
    root = _xml(data)
    if root is None:
        return data
    for el in reversed(list(root.iter())):  # deepest first, so parents see their trimmed children
        if _local(el) not in ("li", "navPoint", "pageTarget"):
            continue
        links = [a.get("href") or a.get("src") for a in el.iter() if _local(a) in ("a", "content")]
        if not any(link and _join(name, link) in keep_docs for link in links):
            el.getparent().remove(el)
    return etree.tostring(root, xml_declaration=True, encoding="utf-8")


@functools.lru_cache(maxsize=1)
def base_books() -> tuple[Epub, ...]:
    books = []
    for path in sorted(corpus_dir().glob("*.epub")):
        if path.name in ADDED:
            continue
        book = cut_down(path)
        if book is not None:
            books.append(book)
    if not books:
        raise FileNotFoundError(f"no readable EPUB in {corpus_dir()}")
    return tuple(books)


# ----------------------------------------------------------------------------------------------
# Hostile values


HOSTILE_HREFS = ["", "#", "#missing", "missing.xhtml", "missing.xhtml#x", "../../../../etc/passwd", "/abs.xhtml",
                 "http://example.com/x.xhtml", "javascript:alert(1)", "data:text/html,<p>x</p>", "%ZZ%",
                 "a%00b.xhtml", "C:\\x\\y.xhtml", "?query", "x" * 300, "\u202eevil.xhtml", "#" * 50, "..", ".",
                 "./", "%2e%2e/%2e%2e/x"]
CHAR_REFS = ["&#xD800;", "&#0;", "&#x0;", "&#x110000;", "&#99999999999;", "&#xFFFE;", "&#1;", "&#x1F;",
             "&#;", "&#x;", "&#-1;", "&#xDFFF;&#xD800;"]
SNIPPETS = CHAR_REFS + [
    "&bogus;", "&nbsp;", "&amp", "&", "<", ">", "]]>", "<![CDATA[", "<![CDATA[x]]>", "<!--", "-->", "<?pi x?>",
    "<!DOCTYPE html>", "</p>", "</body>", "</html>", "<p>", "<p", "<foo:bar xmlns:foo='urn:x'>y</foo:bar>",
    "<x:p>", "\x00", "\ufeff", "\u202e", "\u0301" * 20, "<a href='#'>1</a>", "<h1>Chapter 1</h1>",
    "<section epub:type='footnote' id='fn1'><p>note</p></section>", "<br/>" * 30, "<svg><image/></svg>",
    '<ssml:ph xmlns:ssml="http://www.w3.org/2001/10/synthesis" ssml:ph="">x</ssml:ph>',
]
ATTR_VALUES = HOSTILE_HREFS + ["no", "yes", "maybe", "nav", "cover-image", "nav cover-image scripted",
                               "application/xhtml+xml", "image/png", "text/css", "application/x-dtbncx+xml",
                               "toc", "cover", "copyright-page", "noteref", "footnote", "endnote", "0", "-1",
                               "99999999999999999999", "4.0", "3.0", "2.0", "\t", " "]
WORDS = ["the", "whale", "chapter", "I", "II", "Chapter 3", "第三章", "مرحبا", "ça", "Nö", "1", "*", "†",
         "*** START OF THE PROJECT GUTENBERG EBOOK X ***", "*** END OF THE PROJECT GUTENBERG EBOOK X ***",
         "Contents", "Copyright", "Index", "Notes", "THE END.", "…", "—", "\u00a0", "𝔘𝔫𝔦", "\u200b"]
IDS = ["c1", "c2", "fn1", "fn2", "n1", "note", "toc", "x"]
EPUB_TYPES = ["chapter", "footnote", "endnote", "rearnote", "noteref", "toc", "cover", "bodymatter",
              "z3998:roman", "pagebreak", "landmarks", "colophon", "index", "bogus", "footnotes"]
ROLES = ["doc-noteref", "doc-footnote", "doc-endnote", "doc-pagebreak", "doc-chapter"]
TAGS = ["p", "p", "p", "div", "span", "a", "a", "h1", "h2", "h3", "h6", "section", "aside", "hgroup", "nav",
        "ol", "ul", "li", "table", "tr", "td", "br", "hr", "img", "em", "blockquote", "pre", "sup", "body",
        "html", "script", "style", "svg", "math", "ruby", "rt", "figure", "figcaption", "header", "footer"]
NAMESPACES = [XHTML_NS, "", "urn:bogus", "http://www.w3.org/2000/svg", "http://www.w3.org/1998/Math/MathML",
              EPUB_NS, "http://www.w3.org/2001/10/synthesis", "\u202e", "x y"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))


def random_xhtml(rng: random.Random, well_formed: bool) -> bytes:
    """A random content document: real tags, epub:type / role / ids / links a nav might point at,
    random namespaces and entities; `well_formed=False` leaves tags unclosed and mismatched."""
    out = []
    budget = [rng.randint(5, 80)]

    def element(depth: int):
        budget[0] -= 1
        tag = rng.choice(TAGS)
        prefix = ""
        attrs = []
        if rng.random() < 0.1:
            prefix = rng.choice(["h:", "x:", "epub:", "ssml:", "svg:"])
            attrs.append(f'xmlns:{prefix[:-1]}="{rng.choice(NAMESPACES)}"')
        if rng.random() < 0.05:
            attrs.append(f'xmlns="{rng.choice(NAMESPACES)}"')
        if rng.random() < 0.4:
            attrs.append(f'id="{rng.choice(IDS)}"')
        if rng.random() < 0.3:
            attrs.append(f'epub:type="{" ".join(rng.sample(EPUB_TYPES, rng.randint(1, 2)))}"')
        if rng.random() < 0.1:
            attrs.append(f'role="{rng.choice(ROLES)}"')
        if tag == "a" or rng.random() < 0.05:
            target = rng.choice(["#" + rng.choice(IDS), rng.choice(HOSTILE_HREFS), "c.xhtml#" + rng.choice(IDS)])
            attrs.append(f'href="{target}"')
        if rng.random() < 0.05:
            attrs.append(f'{rng.choice(["xml:lang", "lang", "dir", "class", "ssml:ph", "src"])}="{rng.choice(ATTR_VALUES)}"')
        name = prefix + tag
        out.append(f"<{name}{''.join(' ' + a for a in attrs)}>")
        out.append(_text(rng))
        if rng.random() < 0.2:
            out.append(rng.choice(SNIPPETS) if not well_formed else rng.choice(["&amp;", "&#160;", "&#x2014;", "&lt;"]))
        while budget[0] > 0 and depth < 12 and rng.random() < 0.6:
            element(depth + 1)
            out.append(_text(rng))
        if well_formed or rng.random() < 0.6:
            out.append(f"</{name}>")
        elif rng.random() < 0.5:
            out.append(f"</{rng.choice(TAGS)}>")

    head = rng.choice(['<?xml version="1.0" encoding="utf-8"?>', "", '<?xml version="1.1"?>',
                       '<?xml version="1.0" encoding="latin-1"?>'])
    doctype = rng.choice(["", "<!DOCTYPE html>", '<!DOCTYPE html [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'])
    out.append(f'{head}{doctype}<html xmlns="{XHTML_NS if rng.random() < 0.9 else rng.choice(NAMESPACES)}" '
               f'xmlns:epub="{EPUB_NS}"><head><title>{_text(rng)}</title></head><body>')
    while budget[0] > 0:
        element(0)
    if doctype.startswith("<!DOCTYPE html ["):
        out.append("<p>&b;&b;&b;</p>")
    out.append("</body></html>" if well_formed or rng.random() < 0.5 else "")
    return "".join(out).encode("utf-8")


# ----------------------------------------------------------------------------------------------
# Mutations. Each takes (epub, rng), changes the epub, and returns a short description.


def _pick_entry(epub: Epub, rng: random.Random, structural: float = 0.5) -> Entry:
    names = [n for n in (epub.opf, epub.nav, epub.ncx, "META-INF/container.xml") if n and epub.get(n)]
    if names and rng.random() < structural:
        return epub.get(rng.choice(names))
    docs = [epub.get(n) for n in epub.spine if epub.get(n)]
    if docs and rng.random() < 0.8:
        return rng.choice(docs)
    return rng.choice(epub.entries)


def flip_bytes(epub: Epub, rng: random.Random) -> str:
    entry = _pick_entry(epub, rng)
    data = bytearray(entry.data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(data) + 1)
        how = rng.random()
        if how < 0.4 and at < len(data):
            data[at] = rng.randrange(256)
        elif how < 0.7:
            data[at:at] = rng.choice([b"<", b">", b"&", b'"', b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"]]>"])
        else:
            del data[at:at + rng.randint(1, 64)]
    entry.data = bytes(data)
    return f"flip_bytes({entry.name})"


def truncate_entry(epub: Epub, rng: random.Random) -> str:
    entry = _pick_entry(epub, rng)
    cut = rng.randrange(len(entry.data) + 1)
    entry.data = entry.data[:cut]
    return f"truncate_entry({entry.name},{cut})"


def insert_snippet(epub: Epub, rng: random.Random) -> str:
    """Raw text where a parser will see it: after a tag, or inside an attribute value."""
    entry = _pick_entry(epub, rng)
    data = entry.data
    snippets = []
    for _ in range(rng.randint(1, 4)):
        snippet = rng.choice(SNIPPETS).encode("utf-8")
        if rng.random() < 0.3:
            at = data.find(b'="', rng.randrange(len(data) + 1)) + 2  # into an attribute value
        else:
            at = data.find(b">", rng.randrange(len(data) + 1)) + 1
        if at <= 1:
            at = len(data)
        data = data[:at] + snippet + data[at:]
        snippets.append(snippet.decode()[:12])
    entry.data = data
    return f"insert_snippet({entry.name},{snippets!r})"


def _tree_op(root, rng: random.Random) -> str:
    elements = [el for el in root.iter() if isinstance(el.tag, str)]
    el = rng.choice(elements)
    op = rng.choice(["drop", "drop", "empty", "href", "href", "dup_id", "drop_attr", "drop_attr", "nest",
                     "huge_attr", "attr", "attr", "clone", "shuffle", "text", "ns"])
    if op == "drop" and el is not root:
        el.getparent().remove(el)
    elif op == "empty":
        lists = [e for e in elements if _local(e) in ("ol", "ul", "navMap", "spine", "manifest", "metadata",
                                                      "rootfiles", "body", "head", "navPoint", "nav", "li")]
        el = rng.choice(lists or elements)
        for child in list(el):
            el.remove(child)
        el.text = None
    elif op == "href":
        linked = [e for e in elements if set(e.attrib) & {"href", "src", "full-path", "idref", "toc"}]
        el = rng.choice(linked or elements)
        attr = rng.choice([a for a in el.attrib if a in ("href", "src", "full-path", "idref", "toc")] or ["href"])
        el.set(attr, rng.choice(HOSTILE_HREFS + IDS))
        return f"href({_local(el)}@{attr})"
    elif op == "dup_id":
        with_id = [e for e in elements if e.get("id")]
        if len(with_id) >= 2:
            a, b = rng.sample(with_id, 2)
            b.set("id", a.get("id"))
    elif op == "drop_attr" and el.attrib:
        attr = rng.choice(list(el.attrib))
        del el.attrib[attr]
        return f"drop_attr({_local(el)}@{attr.rpartition('}')[2]})"
    elif op == "nest" and el is not root:
        levels = rng.choice([20, 100, 300, 1000, 3000])
        parent, index = el.getparent(), el.getparent().index(el)
        outer = inner = etree.Element(el.tag, dict(el.attrib))
        for _ in range(levels - 1):
            inner = etree.SubElement(inner, el.tag)
            if rng.random() < 0.1:
                inner.text = _text(rng)
        parent.remove(el)
        inner.append(el)
        parent.insert(index, outer)
        return f"nest({_local(el)}x{levels})"
    elif op == "huge_attr":
        size = rng.choice([10_000, 100_000, 1_000_000])
        attr = rng.choice(list(el.attrib) or ["id"])
        el.set(attr, rng.choice("x#/é") * size)
        return f"huge_attr({_local(el)}@{attr.rpartition('}')[2]},{size})"
    elif op == "attr":
        attr = rng.choice(list(el.attrib) + ["linear", "properties", "media-type", f"{{{EPUB_NS}}}type", "version",
                                             "playOrder", "id"])
        el.set(attr, rng.choice(ATTR_VALUES))
        return f"attr({_local(el)}@{attr.rpartition('}')[2]})"
    elif op == "clone" and el is not root:
        copies = rng.choice([2, 10, 200])
        parent = el.getparent()
        for _ in range(copies):
            parent.append(copy.deepcopy(el))
        return f"clone({_local(el)}x{copies})"
    elif op == "shuffle" and len(el):
        children = list(el)
        rng.shuffle(children)
        el[:] = children
    elif op == "text":
        el.text = _text(rng) if rng.random() < 0.8 else rng.choice(WORDS) * rng.choice([100, 10_000])
    elif op == "ns" and el is not root:
        el.tag = "{%s}%s" % (rng.choice([n for n in NAMESPACES if n.isprintable() and " " not in n] or [""]), _local(el))
    else:
        return "noop"
    return f"{op}({_local(el)})"


def mangle_tree(epub: Epub, rng: random.Random) -> str:
    entry = _pick_entry(epub, rng, structural=0.8)
    try:
        root = _xml(entry.data)
    except etree.XMLSyntaxError:
        root = None
    if root is None:
        return flip_bytes(epub, rng)
    ops = [_tree_op(root, rng) for _ in range(rng.randint(1, 3))]
    entry.data = etree.tostring(root, xml_declaration=True, encoding="utf-8")
    return f"mangle_tree({entry.name},{'+'.join(ops)})"


def replace_doc(epub: Epub, rng: random.Random) -> str:
    """A spine document (sometimes the nav) becomes random XHTML."""
    names = epub.spine + ([epub.nav] if epub.nav else [])
    name = rng.choice(names) if names else epub.entries[-1].name
    well_formed = rng.random() < 0.6
    entry = epub.get(name)
    if entry is None:
        return "noop"
    entry.data = random_xhtml(rng, well_formed)
    return f"replace_doc({name},{'well_formed' if well_formed else 'soup'})"


def reencode(epub: Epub, rng: random.Random) -> str:
    entry = _pick_entry(epub, rng, structural=0.3)
    text = entry.data.decode("utf-8", "replace")
    how = rng.choice(["utf-16", "utf-16-le", "latin-1", "bom", "bogus-declaration", "cp1252-declared"])
    if how in ("utf-16", "utf-16-le"):
        entry.data = text.encode(how)
    elif how == "latin-1":
        entry.data = text.encode("latin-1", "replace")
    elif how == "bom":
        entry.data = b"\xef\xbb\xbf" + entry.data
    elif how == "bogus-declaration":
        entry.data = b'<?xml version="1.0" encoding="x-bogus-42"?>' + entry.data.split(b"?>", 1)[-1]
    else:
        entry.data = b'<?xml version="1.0" encoding="windows-1252"?>' + entry.data.split(b"?>", 1)[-1]
    return f"reencode({entry.name},{how})"


def entries_op(epub: Epub, rng: random.Random) -> str:
    """Drop, rename, duplicate or add zip entries; odd compression methods."""
    entry = _pick_entry(epub, rng, structural=0.4)
    op = rng.choice(["drop", "drop", "rename", "rename", "duplicate", "stored", "bzip2", "lzma", "many",
                     "mimetype", "empty"])
    if op == "drop":
        epub.entries.remove(entry)
    elif op == "rename":
        new = rng.choice(["../" + entry.name, "/" + entry.name, entry.name.upper(), entry.name.replace("/", "\\"),
                          entry.name + "\x00x", entry.name + "/", "ü/" + entry.name, entry.name + " "])
        entry.name = new
        return f"entries(rename->{new!r})"
    elif op == "duplicate":
        clone = Entry(entry.name, entry.data[: len(entry.data) // 2], entry.method)
        epub.entries.insert(rng.randrange(len(epub.entries) + 1), clone)
    elif op in ("stored", "bzip2", "lzma"):
        entry.method = {"stored": zipfile.ZIP_STORED, "bzip2": zipfile.ZIP_BZIP2, "lzma": zipfile.ZIP_LZMA}[op]
    elif op == "many":
        count = rng.choice([100, 1000])
        epub.entries.extend(Entry(f"OEBPS/junk{i}.xhtml", b"<p/>") for i in range(count))
        return f"entries(many,{count})"
    elif op == "mimetype":
        mimetype = epub.get("mimetype")
        if mimetype is not None:
            epub.entries.remove(mimetype)
            mimetype.data = rng.choice([b"application/epub+zip ", b"", b"text/plain", b"application/epub+zip" * 1000])
            epub.entries.insert(rng.randrange(len(epub.entries) + 1), mimetype)
    elif op == "empty":
        entry.data = b""
    return f"entries({op},{entry.name})"


def retarget_toc(epub: Epub, rng: random.Random) -> str:
    """Point nav / NCX links at other documents and at ids that exist (or almost do) in them:
    well-formed input that reaches the chapter cutting."""
    tocs = [epub.get(n) for n in (epub.nav, epub.ncx) if n and epub.get(n)]
    if not tocs or not epub.spine:
        return mangle_tree(epub, rng)
    entry = rng.choice(tocs)
    root = _xml(entry.data)
    links = [el for el in root.iter() if _local(el) in ("a", "content")] if root is not None else []
    if not links:
        return mangle_tree(epub, rng)
    for el in rng.sample(links, min(len(links), rng.randint(1, 6))):
        doc = rng.choice(epub.spine)
        ids = re.findall(rb'\sid="([^"]{1,64})"', epub.get(doc).data if epub.get(doc) else b"")
        fragment = rng.choice([None, rng.choice(IDS)] + [i.decode("utf-8", "replace") for i in ids[:50]])
        href = posixpath.relpath(doc, posixpath.dirname(entry.name)) + (f"#{fragment}" if fragment else "")
        el.set("src" if _local(el) == "content" else "href", href)
    if rng.random() < 0.3:  # and some in reverse order
        parent = rng.choice(links).getparent().getparent()
        if parent is not None and len(parent) > 1:
            parent[:] = list(parent)[::-1]
    entry.data = etree.tostring(root, xml_declaration=True, encoding="utf-8")
    return f"retarget_toc({entry.name})"


def add_notes(epub: Epub, rng: random.Random) -> str:
    """Note references and notes in a spine document: plain, self-referring, circular, nested,
    pointing nowhere (for --notes inline / chapter-end)."""
    entry = epub.get(rng.choice(epub.spine)) if epub.spine else None
    if entry is None:  # the document was dropped or renamed by an earlier mutation
        return insert_snippet(epub, rng)
    data = entry.data
    ns = f'xmlns:epub="{EPUB_NS}"'
    notes = []
    for n in range(rng.randint(1, 5)):
        target = rng.choice([f"fz{n}", f"fz{rng.randint(0, 5)}", "missing", ""])
        style = rng.choice([f'{ns} epub:type="noteref"', 'role="doc-noteref"', ""])
        ref = f'<a {style} href="#{target}">{rng.choice([str(n + 1), "*", "†", "[1]", ""])}</a>'
        at = data.find(b"<p", rng.randrange(len(data) + 1))
        at = data.find(b">", at) + 1 if at >= 0 else -1
        if at > 0:
            data = data[:at] + ref.encode() + data[at:]
        inner = rng.choice(["", f'<a {ns} epub:type="noteref" href="#fz{rng.randint(0, 5)}">2</a>', ref])
        kind = rng.choice([f'{ns} epub:type="footnote"', f'{ns} epub:type="endnote"', 'role="doc-footnote"', ""])
        tag = rng.choice(["aside", "div", "p", "li", "section"])
        notes.append(f'<{tag} {kind} id="fz{n}"><p>{rng.choice(WORDS)} note {inner}</p></{tag}>')
    end = data.rfind(b"</body>")
    entry.data = data[:end] + "".join(notes).encode() + data[end:] if end >= 0 else data + "".join(notes).encode()
    return f"add_notes({entry.name},{len(notes)})"


def _laughs(levels: int) -> str:
    return ('<!ENTITY a0 "xxxxxxxxxx">' + "".join(f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">' for i in range(1, levels)))


def cover_op(epub: Epub, rng: random.Random) -> str:
    """A hostile cover: an SVG wrapping a bad data: URI, a missing or non-image target, an entity
    bomb; or the cover property / <meta name="cover"> on the wrong kind of item."""
    opf_entry = epub.get(epub.opf)
    root = _xml(opf_entry.data) if opf_entry else None
    manifest = next((el for el in root.iter() if _local(el) == "manifest"), None) if root is not None else None
    if manifest is None:
        return mangle_tree(epub, rng)
    items = [el for el in manifest if _local(el) == "item"]
    how = rng.choice(["svg", "svg", "svg", "property", "meta", "raster"])
    if how in ("property", "meta") and items:
        victim = rng.choice(items)
        if how == "property":
            victim.set("properties", "cover-image")
        else:
            meta = etree.SubElement(next((el for el in root.iter() if _local(el) == "metadata"), root),
                                    f"{{{OPF_NS}}}meta", name="cover", content=victim.get("id") or "")
        opf_entry.data = etree.tostring(root, xml_declaration=True, encoding="utf-8")
        return f"cover({how},{victim.get('href')})"
    image = rng.choice(["data:image/png;base64,!!!notbase64", "data:image/png;base64," + "QUFB" * 250_000,
                        "data:image/jpeg;base64,", "data:image/gif;base64,R0lGODlhAQABAAAAACw=", "missing.png",
                        "../../../etc/passwd", "#x", "", epub.spine[0] if epub.spine else "x.xhtml"])
    name = posixpath.join(posixpath.dirname(epub.opf), "fzcover.svg" if how == "svg" else "fzcover.png")
    if how == "svg":
        bomb = rng.random() < 0.3
        data = ((f'<!DOCTYPE svg [{_laughs(rng.choice([5, 9]))}]>' if bomb else "")
                + '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
                + ("<text>&a4;</text>" if bomb else "")
                + f'<image xlink:href="{image}"/></svg>').encode()
        kind = "image/svg+xml"
    else:
        data, kind = rng.choice([b"", b"not an image", TINY_IMAGE[:20]]), rng.choice(["image/png", "image/jpg"])
    etree.SubElement(manifest, f"{{{OPF_NS}}}item", id="fzcover", href=posixpath.basename(name),
                     properties="cover-image").set("media-type", kind)
    opf_entry.data = etree.tostring(root, xml_declaration=True, encoding="utf-8")
    epub.entries.append(Entry(name, data))
    return f"cover({how},{image[:30]!r})"


MUTATIONS = [(flip_bytes, 3), (truncate_entry, 1), (insert_snippet, 3), (mangle_tree, 6), (replace_doc, 3),
             (reencode, 1), (entries_op, 2), (retarget_toc, 3), (add_notes, 2),
             (cover_op, 1)]
NOTES_OPTIONS = [[], [], ["--notes", "inline"], ["--notes", "chapter-end"]]


def _zip_damage(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    op = rng.choice(["truncate", "truncate", "flip", "method", "encrypted", "junk_tail", "comment"])
    if op == "truncate":
        cut = rng.choice([rng.randrange(len(data)), len(data) - rng.randint(1, 100), rng.randint(4, 200)])
        return data[: max(4, cut)], f"zip_truncate({max(4, cut)})"
    if op == "flip":
        out = bytearray(data)
        central = data.rfind(b"PK\x01\x02")
        for _ in range(rng.randint(1, 6)):
            lo = central if central > 0 and rng.random() < 0.6 else 4
            at = rng.randrange(lo, len(out))
            out[at] = rng.randrange(256)
        return bytes(out), "zip_flip"
    if op in ("method", "encrypted"):
        # Patch one central-directory record: an unknown compression method, or the encryption bit.
        out = bytearray(data)
        records = [i for i in range(len(data)) if data.startswith(b"PK\x01\x02", i)] if len(data) < 400_000 else []
        if not records:
            return data, "noop"
        at = rng.choice(records)
        if op == "method":
            struct.pack_into("<H", out, at + 10, rng.choice([1, 6, 97, 99, 0xFFFF]))
            local = struct.unpack_from("<I", out, at + 42)[0]
            if local + 10 < len(out):
                out[local + 8: local + 10] = out[at + 10: at + 12]
        else:
            out[at + 8] |= 1
            local = struct.unpack_from("<I", out, at + 42)[0]
            if local + 8 < len(out):
                out[local + 6] |= 1
        return bytes(out), f"zip_{op}"
    if op == "junk_tail":
        return data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))), "zip_junk_tail"
    end = data.rfind(b"PK\x05\x06")
    if end < 0:
        return data, "noop"
    comment = b"x" * rng.choice([10, 65535])
    out = bytearray(data[: end + 22])
    struct.pack_into("<H", out, end + 20, min(65535, len(comment) + rng.choice([0, 1, -5])))
    return bytes(out) + comment, "zip_comment"


@dataclass
class FuzzInput:
    seed: int
    index: int
    data: bytes
    mutations: list[str]
    options: list[str] = field(default_factory=list)  # extra command-line options (--notes)

    @property
    def description(self) -> str:
        return " + ".join(self.mutations)


def make_input(seed: int, index: int) -> FuzzInput:
    """The index-th input of this seed: always the same bytes."""
    rng = random.Random(f"epub2audio-fuzz/{seed}/{index}")
    base = rng.choice(base_books())
    epub = base.copy()
    done = [f"base={base.label}"]
    count = rng.choices([1, 2, 3, 4], weights=[5, 3, 1, 1])[0]
    for _ in range(count):
        mutation = rng.choices([m for m, _ in MUTATIONS], weights=[w for _, w in MUTATIONS])[0]
        try:
            done.append(mutation(epub, rng))
        except (ValueError, TypeError, etree.LxmlError) as exc:  # e.g. a recovered tag lxml won't rebuild
            done.append(f"{mutation.__name__}:gave-up({type(exc).__name__})")
    data = epub.zip_bytes()
    if rng.random() < 0.15:
        data, what = _zip_damage(data, rng)
        done.append(what)
    options = rng.choice(NOTES_OPTIONS)
    return FuzzInput(seed, index, data, done + [" ".join(options)] if options else done, options)


def reproduce_command(seed: int, index: int, out: str = "/tmp/fuzz-input.epub") -> str:
    return f"python tests/fuzz_epubs.py --seed {seed} --index {index} -o {out}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write one fuzz input to a file.")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("-o", "--output", type=Path, required=True)
    args = p.parse_args(argv)
    item = make_input(args.seed, args.index)
    args.output.write_bytes(item.data)
    print(f"{args.output}: {len(item.data)} bytes; {item.description}")
    if item.options:
        print(f"run it with: {' '.join(item.options)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
