"""ebooklib's EPUB reader, minus the ways hostile input crashes it.

ebooklib assumes parts a broken package may lack: with no <metadata>, <manifest> or <spine>, a
manifest item without href, or a spine toc= naming no item, it fails with AttributeError or
TypeError; and its nav/NCX parsers index lists that may be empty (IndexError), call methods on
lists that may be missing (AttributeError) and recurse once per nesting level (RecursionError).
So we check the package document for what ebooklib relies on before it reads it, and we do not
let ebooklib parse the nav or the NCX at all: the loader reads both itself (epub.py), iteratively,
and falls back from one to the other and to headings.
"""

from __future__ import annotations

import posixpath
import zipfile
import zlib

from ebooklib import epub
from ebooklib.utils import parse_string
from lxml import etree


OPF = "{http://www.idpf.org/2007/opf}"
ROOTFILE = "{urn:oasis:names:tc:opendocument:xmlns:container}rootfile"
OPF_TYPE = "application/oebps-package+xml"


class PackageError(Exception):
    """The package document lacks something every reader needs; the message names the part."""


class PartUnreadable(PackageError):
    """A file inside the zip cannot be extracted; the message names it."""


class PackageReader(epub.EpubReader):
    """epub.EpubReader that checks the package first and leaves TOC parsing to us."""

    def read_file(self, name):
        try:
            data = super().read_file(name)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise PartUnreadable(f"{name}: damaged in the zip archive ({exc})") from None
        except NotImplementedError as exc:  # a compression method zipfile cannot undo
            raise PartUnreadable(f"{name}: {exc}") from None
        except RuntimeError as exc:  # zipfile says "File ... is encrypted, password required"
            if isinstance(exc, RecursionError):
                raise
            raise PartUnreadable(f"{name}: encrypted in the zip archive") from None
        return data

    def _load_container(self):
        # ebooklib takes the last OPF rootfile, with or without a full-path; we take the first
        # that has one.
        root = parse_string(self.read_file("META-INF/container.xml")).getroot()
        paths = [el.get("full-path") for el in (root.iter(ROOTFILE) if root is not None else [])
                 if el.get("full-path") and el.get("media-type", OPF_TYPE) == OPF_TYPE]
        if not paths:
            raise PackageError("META-INF/container.xml: no rootfile names a package document")
        self.opf_file = paths[0]
        self.opf_dir = posixpath.dirname(self.opf_file)

    def _load_metadata(self):
        # The first step after ebooklib has parsed the package document into self.container.
        root = self.container.getroot()
        check_package(root, self.opf_file)
        _drop_comments(root)
        super()._load_metadata()

    def _parse_nav(self, data, base_path, navtype="toc"):
        pass  # book.toc / book.pages stay empty: epub.py reads the nav itself

    def _parse_ncx(self, data):
        pass  # likewise the NCX


def _drop_comments(root) -> None:
    """ebooklib reads every child's .tag as a string: a comment or processing instruction in the
    package (whose .tag is a function) would crash it."""
    for node in list(root.iter(etree.Comment, etree.ProcessingInstruction)):
        parent = node.getparent()
        if parent is not None:
            if node.tail:  # keep the text that followed it
                prev = node.getprevious()
                if prev is not None:
                    prev.tail = (prev.tail or "") + node.tail
                else:
                    parent.text = (parent.text or "") + node.tail
            parent.remove(node)


def read_package(file) -> epub.EpubBook:
    """Like epub.read_epub(file, {"ignore_ncx": True}); raises PackageError for a package
    document ebooklib cannot read (and its usual errors for zip and file problems)."""
    reader = PackageReader(file, {"ignore_ncx": True})
    book = reader.load()
    reader.process()
    return book


def check_package(root, opf_name: str) -> None:
    """What ebooklib's reader takes for granted in the package document."""
    if root is None:
        raise PackageError(f"{opf_name}: the package document is empty")
    sections = {}
    for name in ("metadata", "manifest", "spine"):
        sections[name] = root.find(f"{OPF}{name}")
        if sections[name] is None:
            raise PackageError(f"{opf_name}: the package has no <{name}>")
    items = sections["manifest"].findall(f"{OPF}item")
    for item in items:
        if item.get("href") is None:
            raise PackageError(f"{opf_name}: manifest item {item.get('id')!r} has no href")
    for el in sections["metadata"]:
        if isinstance(el.tag, str) and el.tag != f"{OPF}meta" and el.prefix not in el.nsmap:
            raise PackageError(f"{opf_name}: metadata element {el.tag!r} has no namespace")
    toc = sections["spine"].get("toc")
    if toc:
        ids = {item.get("id") for item in items}
        if toc not in ids:
            # ebooklib looks the NCX up by this id and fails; the reference is only a hint to a
            # TOC we can do without, so we drop it rather than refuse the book.
            del sections["spine"].attrib["toc"]
