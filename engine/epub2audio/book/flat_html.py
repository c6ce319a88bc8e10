"""A parser for documents nested deeper than libxml2 will go (it stops at 2048 levels and drops
the rest): Python's own tokenizer, building an lxml tree whose depth is capped.

Below the cap an element is not nested in its parent but placed after it, as its parent's
sibling, so every word stays in reading order and paragraphs stay paragraphs; only the
(absurd) nesting is lost. Tag and attribute names lose their namespaces (`epub:type` stays an
attribute of that name, which the reader understands).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from lxml import etree

MAX_DEPTH = 256
EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"
# Characters XML (and so lxml) cannot hold: C0 controls but tab/newline/CR, surrogates, U+FFFE/F.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
NAME = re.compile(r"^[A-Za-z_][\w.-]*$")


def parse_flat(data: bytes) -> etree._Element:
    """The document as an <html> tree at most MAX_DEPTH deep, all its text kept in order."""
    builder = _FlatBuilder()
    builder.feed(data.decode("utf-8", "replace"))
    builder.close()
    return builder.root


class _FlatBuilder(HTMLParser):
    VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = etree.Element("html")
        self.open = [self.root]  # the elements text goes into, outermost first
        self.overflow = 0  # elements open below the cap
        self.after_top = False  # text now follows open[-1] (an element closed below the cap)

    def handle_starttag(self, tag, attrs):
        name = tag.rpartition(":")[2] or "span"
        if name == "html":
            return
        parent = self.open[-1] if len(self.open) < MAX_DEPTH else self.open[-2]
        el = etree.SubElement(parent, name if NAME.match(name) else "span")
        for key, value in attrs:
            key = EPUB_TYPE if key == "epub:type" else key
            if key == EPUB_TYPE or NAME.match(key):
                el.set(key, NOT_XML.sub("", value or ""))
        if name in self.VOID:
            if len(self.open) >= MAX_DEPTH:
                self.open[-1], self.after_top = el, True
            return
        if len(self.open) < MAX_DEPTH:
            self.open.append(el)
        else:
            self.open[-1] = el
            self.overflow += 1
        self.after_top = False

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag.rpartition(":")[2] not in self.VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag.rpartition(":")[2] in self.VOID or tag == "html":
            return
        if self.overflow:
            self.overflow -= 1
            self.after_top = True
        elif len(self.open) > 1:
            self.open.pop()
            self.after_top = False

    def handle_data(self, data):
        data = NOT_XML.sub("", data)
        if not data:
            return
        top = self.open[-1]
        if self.after_top:
            top.tail = (top.tail or "") + data
        elif len(top):
            top[-1].tail = (top[-1].tail or "") + data
        else:
            top.text = (top.text or "") + data
