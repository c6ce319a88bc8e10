"""Book metadata from the OPF (title, authors, date, identifier, description) and the cover image."""

from __future__ import annotations

import base64
import binascii
import re

from ebooklib import epub
from lxml import etree, html

from .model import Cover
from .text import clean, drop_invalid_char_refs, local_name
from .toc import resolve

RASTER_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
OPF_NS = "{http://www.idpf.org/2007/opf}"
ISBN = re.compile(r"^(urn:isbn:|isbn:?\s*)?((97[89])?[\d-]{9,17}[\dXx])$", re.IGNORECASE)


def _position(value: str) -> str:
    """A series index as people write it: calibre's "2.0" is 2, "1.5" stays."""
    value = (value or "").strip()
    try:
        number = float(value)
    except ValueError:
        return value
    return str(int(number)) if number.is_integer() else value


class Metadata:
    """The package's Dublin Core metadata and cover, as the engine wants them."""

    def __init__(self, book: epub.EpubBook):
        self.book = book

    def meta(self, name: str) -> list[tuple[str, dict]]:
        return [(clean(v or ""), a) for v, a in self.book.get_metadata("DC", name)]

    def first(self, name: str) -> str:
        return next((v for v, _ in self.meta(name) if v), "")

    def authors(self) -> list[str]:
        """dc:creator in order, leaving out creators whose role is explicitly not author."""
        roles = self._refines("role")
        authors = []
        for value, attrs in self.meta("creator"):
            role = attrs.get(f"{OPF_NS}role") or roles.get(attrs.get("id", ""), "aut")
            if value and role == "aut":
                authors.append(value)
        return authors or [v for v, _ in self.meta("creator") if v]

    def _refines(self, prop: str) -> dict[str, str]:
        found = {}
        for value, attrs in self.book.get_metadata("OPF", "meta") or []:
            if attrs.get("property") == prop and attrs.get("refines", "").startswith("#"):
                found[attrs["refines"][1:]] = clean(value or "")
        return found

    def date(self) -> str:
        dates = self.meta("date")
        published = [v for v, a in dates if a.get(f"{OPF_NS}event") == "publication"]
        return (published or [v for v, _ in dates] or [""])[0]

    def identifier(self) -> str:
        ids = self.meta("identifier")
        for value, attrs in ids:
            scheme = attrs.get(f"{OPF_NS}scheme", "").lower()
            match = ISBN.match(value.replace(" ", ""))
            if scheme == "isbn" or (match and len(re.sub(r"[^\dXx]", "", match.group(2))) in (10, 13)):
                return re.sub(r"^(urn:isbn:|isbn:?\s*)", "", value, flags=re.IGNORECASE)
        return ids[0][0] if ids else ""

    def series(self) -> tuple[str, str]:
        """(series, position in it) or ("", ""): calibre's calibre:series / calibre:series_index,
        else an EPUB 3 belongs-to-collection whose collection-type is "series", or that has no
        type but a group-position (an ordered collection). A "set" (a list such as "The Guardian's
        100 Best Novels", which Standard Ebooks books carry) is not a series."""
        metas = self.book.get_metadata("OPF", "meta") or []
        named = {a.get("name"): clean(a.get("content") or "") for _v, a in metas if a.get("name")}
        if named.get("calibre:series"):
            return named["calibre:series"], _position(named.get("calibre:series_index", ""))
        types, positions = self._refines("collection-type"), self._refines("group-position")
        for value, attrs in metas:
            if attrs.get("property") != "belongs-to-collection" or not clean(value or ""):
                continue
            kind = types.get(attrs.get("id", ""), "").strip().lower()
            position = positions.get(attrs.get("id", ""), "")
            if kind == "series" or (not kind and position):
                return clean(value), _position(position)
        return "", ""

    def description(self) -> str:
        raw = self.first("description")
        if "<" in raw:
            raw = html.fromstring(f"<div>{raw}</div>").text_content()
        return clean(raw)

    # -- cover -----------------------------------------------------------------------------

    def cover_items(self) -> list:
        """EPUB3 properties="cover-image", then EPUB2 <meta name="cover">."""
        items = [i for i in self.book.get_items() if isinstance(i, epub.EpubCover)]
        for _, attrs in self.book.get_metadata("OPF", "meta") or []:
            item = self.book.get_item_with_id(attrs.get("content", "")) if attrs.get("name") == "cover" else None
            if item is not None:
                items.append(item)
        return items

    def cover(self, cover_docs: list[str], doc_images) -> Cover | None:
        for item in self.cover_items():
            cover = self._image_cover(item)
            if cover:
                return cover
        for doc in cover_docs:
            for src in doc_images(doc):
                item = self.book.get_item_with_href(src)
                cover = self._image_cover(item) if item is not None else None
                if cover:
                    return cover
        return None

    def _image_cover(self, item) -> Cover | None:
        if not item.get_content():
            return None  # listed but missing from the archive (container.py): no cover
        media_type = "image/jpeg" if item.media_type == "image/jpg" else item.media_type
        if media_type in RASTER_TYPES:
            return Cover(item.get_content(), media_type)
        if media_type == "image/svg+xml":
            return raster_in_svg(item.get_content(), item.get_name(), self.book)
        return None


def raster_in_svg(data: bytes, name: str, book: epub.EpubBook) -> Cover | None:
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
        item = book.get_item_with_href(resolve(name, href)[0]) if href else None
        if item is not None and item.media_type in RASTER_TYPES:
            return Cover(item.get_content(), item.media_type)
    return None
