"""The table of contents: entries from the EPUB3 nav document, else the NCX, and the landmarks /
guide that say what a file is (cover, copyright page, ...). TOCs nest as deep as their documents,
so every walk here is a work list, never recursion."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from urllib.parse import unquote

from lxml import etree

from .text import RESOURCE_ERRORS, clean, drop_invalid_char_refs, epub_types, local_name

NCX_NS = "{http://www.daisy.org/z3986/2005/ncx/}"


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


def resolve(base_doc: str, href: str) -> tuple[str, str | None]:
    """An href inside base_doc → (manifest-relative file name, fragment or None)."""
    target, _, fragment = href.partition("#")
    target = unquote(target)
    name = posixpath.normpath(posixpath.join(posixpath.dirname(base_doc), target)) if target else base_doc
    return name, unquote(fragment) or None


def flatten(entries: list[TocEntry]) -> list[TocEntry]:
    """Every entry, depth first (iteratively: a TOC may nest as deep as its document)."""
    flat, stack = [], list(reversed(entries))
    while stack:
        entry = stack.pop()
        flat.append(entry)
        stack.extend(reversed(entry.children))
    return flat


def nav_toc(nav_name: str, root) -> list[TocEntry]:
    """Top-level entries of the nav document's epub:type="toc" list."""
    nav = find_nav(root, "toc")
    ol = next((c for c in nav if local_name(c) in ("ol", "ul")), None) if nav is not None else None
    return _nav_list(nav_name, ol) if ol is not None else []


def find_nav(root, kind: str):
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
            doc, fragment = resolve(nav_name, href) if href else (None, None)
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
            doc, fragment = resolve(ncx_name, src) if src else (None, None)
            entry = TocEntry(label, doc, fragment, depth, parent)
            (parent.children if parent else top).append(entry)
            work.append((point, depth + 1, entry))
    return top


def read_toc(book, nav_item, nav_root, warnings: list[str]) -> list[TocEntry]:
    """Nav document first (EPUB3), else the NCX. (Not ebooklib's book.toc: it prefers the NCX.)
    A TOC that is there but gives nothing is reported; the next source is tried."""
    if nav_item is not None:
        entries = nav_toc(nav_item.get_name(), nav_root)
        if entries:
            return entries
        nav = find_nav(nav_root, "toc")
        why = ('no <nav epub:type="toc">' if nav is None else
               "the nav has no list" if not any(local_name(c) in ("ol", "ul") for c in nav) else
               "the nav's list has no entries")
        warnings.append(f"{nav_item.get_name()}: {why}; chapters come from the NCX or the headings")
    ncx = next((i for i in book.get_items() if i.media_type == "application/x-dtbncx+xml"), None)
    if ncx is None:
        return []
    parser = etree.XMLParser(recover=True, no_network=True, resolve_entities=False, huge_tree=True)
    root = etree.fromstring(drop_invalid_char_refs(ncx.content)[0], parser)
    entries = ncx_toc(ncx.get_name(), root) if root is not None else []
    lost = next((e.message.strip() for e in parser.error_log if e.type in RESOURCE_ERRORS), None)
    if lost:
        warnings.append(f"{ncx.get_name()}: only partly read ({lost.rstrip('.')})")
    if not entries:
        why = ("not XML" if root is None else "the NCX has no navMap" if root.find(f"{NCX_NS}navMap") is None
               else "the navMap has no navPoints")
        warnings.append(f"{ncx.get_name()}: {why}; chapters come from the headings")
    return entries


def landmarks(book, nav_item, nav_root) -> dict[tuple[str, str | None], set[str]]:
    """(file, fragment) → the landmark (EPUB3) or guide (EPUB2) types that name it."""
    found: dict[tuple[str, str | None], set[str]] = {}
    nav = find_nav(nav_root, "landmarks") if nav_root is not None else None
    if nav is not None:
        for a in nav.iter():
            if local_name(a) == "a" and a.get("href"):
                key = resolve(nav_item.get_name(), a.get("href"))
                found.setdefault(key, set()).update(epub_types(a))
    for ref in book.guide or []:
        if ref.get("href") and ref.get("type"):
            key = resolve("", ref["href"])
            found.setdefault(key, set()).add(ref["type"].lower())
    return found
