"""The EPUB container (the zip), read safely: the only code that inflates an EPUB's bytes.

Every EPUB is hostile. Before anything else looks at a book, this module

* refuses archives whose directory is too big, with too many entries, or with entries that are
  unsafe or unreadable (a `..` or absolute name, a symbolic link, a name twice, zip encryption,
  compression other than the stored/deflate that EPUB allows);
* refuses DRM-protected books (Adobe ADEPT, Readium LCP, Apple FairPlay): their text is
  ciphertext. Font obfuscation (META-INF/encryption.xml naming only the IDPF or Adobe font
  algorithms) is not DRM and such books are read as usual;
* inflates only what the book is made of (container.xml, the package document (OPF) and the
  files its manifest lists), itself, in chunks, counting as it goes and stopping the moment a
  limit below is crossed. The zip's own size fields are never trusted; they are only checked
  against what came out;
* hands back a fresh in-memory zip holding just those files, so that ebooklib never opens the
  original archive.

Audio, video and font files are listed in the new zip but left empty: nothing here reads them,
and a book with a soundtrack should not count its audio against the limits.
"""

from __future__ import annotations

import io
import posixpath
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from lxml import etree

from ..errors import InputError

MiB = 1 << 20

# -- limits: what a real EPUB never comes near, and a hostile one cannot get past ---------------
# Reading a book costs about twice what it inflates (the new zip, then ebooklib's copy of each
# file), so MAX_TOTAL_BYTES keeps a book under 1 GiB; one XHTML file of MAX_ENTRY_BYTES takes the
# chapter code about half a minute (bench/container.py --big-mib measures the first).
MAX_ENTRIES = 10_000  # files in the archive (large illustrated books hold a few thousand)
MAX_DIRECTORY_BYTES = 8 * MiB  # the zip's central directory, read before any entry count is known
MAX_ENTRY_BYTES = 64 * MiB  # one file, inflated (a whole novel is 1-4 MiB of XHTML)
MAX_TOTAL_BYTES = 384 * MiB  # all the files the book needs, inflated
MAX_PACKAGE_BYTES = 16 * MiB  # container.xml, the OPF, encryption.xml: each parsed whole by lxml
# Inflated / compressed. XHTML compresses 3-20x; deflate tops out near 1032x. Checked only once an
# entry has inflated RATIO_FLOOR bytes, so that small, very regular files are never refused
# (100,000 nested <div>s make a legal 1.1 MiB document that deflates about 1000x).
MAX_RATIO = 200
RATIO_FLOOR = 8 * MiB
CHUNK = 64 * 1024  # inflate this much at a time

CONTAINER_XML = "META-INF/container.xml"
ENCRYPTION_XML = "META-INF/encryption.xml"
OPF_MEDIA_TYPE = "application/oebps-package+xml"
# Font obfuscation, which is not DRM: IDPF's and Adobe's.
FONT_OBFUSCATION = {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
# A file in META-INF that marks a DRM scheme by its mere presence.
DRM_MARKERS = {
    "META-INF/license.lcpl": "Readium LCP",
    "META-INF/sinf.xml": "Apple FairPlay",
    "META-INF/rights.xml": "Adobe ADEPT",
}
ADOBE_ADEPT_NS = "http://ns.adobe.com/adept"
LCP_KEY_TYPE = "http://readium.org/2014/01/lcp#EncryptedContentKey"
# Manifest media types nothing downstream reads; they are not inflated.
UNREAD_MEDIA = ("audio/", "video/", "font/", "application/font", "application/x-font",
                "application/vnd.ms-opentype")

# Manifest media types the reader never parses as text; one the archive lacks stands in empty, with
# a warning, and the book is read without it (SVG is markup: a page or a cover the reader opens).
LOOKED_AT_KINDS = UNREAD_MEDIA + ("image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp", "image/bmp",
                                  "image/tiff", "image/avif", "image/x-")
LOOKED_AT = frozenset({"text/css", "text/javascript", "application/javascript", "application/ecmascript",
                       "application/pdf", "application/octet-stream", "application/vnd.adobe-page-template+xml",
                       "application/smil+xml"})

LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # the 30 bytes before each entry's name and data
LOCAL_HEADER_MAGIC = b"PK\x03\x04"
SAFE_PARSER = dict(resolve_entities=False, no_network=True)


@dataclass
class Container:
    archive: io.BytesIO  # a zip holding only what the book needs, checked and inflated
    package_path: str  # the OPF's name in the archive
    package: etree._Element  # the OPF, parsed
    missing: list[str]  # hrefs of the manifest's pictures, sounds, fonts … the archive lacks


def open_container(path: Path) -> Container:
    """Read an EPUB's zip safely (see the module docstring). Raises InputError, one line that
    names the file and, where one is at fault, the entry."""
    try:
        with path.open("rb") as f:
            return _Reader(path.name, f).read()
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, struct.error):
        raise InputError(f"{path.name}: not a readable EPUB (the zip archive is truncated or damaged)") from None


class _Reader:
    def __init__(self, book: str, f):
        self.book = book
        self.f = f
        self.size = f.seek(0, io.SEEK_END)
        self.inflated = 0  # bytes inflated so far, all entries together

    def read(self) -> Container:
        self._check_directory()
        with zipfile.ZipFile(self.f) as zf:
            entries = self._entries(zf.infolist())
        self._check_drm(entries)
        _, container = self._xml(entries, CONTAINER_XML, "META-INF/container.xml is missing")
        package_path = _package_path(container)
        package_bytes, package = self._xml(entries, package_path, "the package document (OPF) is missing")

        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as out:
            out.writestr(CONTAINER_XML, _container_xml(package_path))
            out.writestr(package_path, package_bytes)
            written = {CONTAINER_XML, package_path}
            missing = []
            for href, names, unread, markup in _manifest_files(package, package_path):
                present = [name for name in names if name in entries]
                if not present and not markup and not any(name in written for name in names):
                    # A picture, sound, font or style sheet the archive lacks: nothing read needs
                    # it, so it stands in empty (a missing page is still refused, by ebooklib).
                    missing.append(href)
                    for name in names:
                        out.writestr(name, b"")
                        written.add(name)
                for name in present:
                    if name not in written:
                        self._copy(entries[name], out, empty=unread)
                        written.add(name)
        archive.seek(0)
        return Container(archive, package_path, package, missing)

    # -- the directory ---------------------------------------------------------------------------

    def _check_directory(self):
        """Before zipfile reads the central directory into objects, make sure it is small."""
        end = zipfile._EndRecData(self.f)  # the end record zipfile itself goes by (zip64-aware)
        if end is None:
            raise zipfile.BadZipFile
        count, size = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]
        if count > MAX_ENTRIES:
            raise self._unsafe(f"it holds {count:,} files, more than the {MAX_ENTRIES:,} allowed")
        if size > MAX_DIRECTORY_BYTES:
            raise self._unsafe(f"its zip directory is {size / MiB:.0f} MiB, more than the "
                               f"{MAX_DIRECTORY_BYTES // MiB} MiB allowed")

    def _entries(self, infos: list[zipfile.ZipInfo]) -> dict[str, zipfile.ZipInfo]:
        if len(infos) > MAX_ENTRIES:  # the end record's count can lie; the directory cannot
            raise self._unsafe(f"it holds {len(infos):,} files, more than the {MAX_ENTRIES:,} allowed")
        entries: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            name = info.filename
            parts = name.replace("\\", "/").split("/")
            if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":" and name[0].isalpha()):
                raise self._unsafe(f"entry {_shown(name)} has an absolute path")
            if ".." in parts:
                raise self._unsafe(f"entry {_shown(name)} points outside the book")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise self._unsafe(f"entry {_shown(name)} is a symbolic link")
            if name in entries:
                raise self._unsafe(f"entry {_shown(name)} appears twice")
            if info.flag_bits & 0x1:
                raise self._unreadable(f"entry {_shown(name)} is password-encrypted")
            entries[name] = info
        return entries

    # -- DRM -------------------------------------------------------------------------------------

    def _check_drm(self, entries: dict[str, zipfile.ZipInfo]):
        for marker, scheme in DRM_MARKERS.items():
            if marker in entries:
                raise InputError(f"{self.book}: DRM-protected ({scheme}); epub2audio cannot read it")
        if ENCRYPTION_XML in entries:
            scheme = _drm_scheme(self._xml(entries, ENCRYPTION_XML, "")[1])
            if scheme:
                raise InputError(f"{self.book}: DRM-protected ({scheme}); epub2audio cannot read it")

    # -- inflating -------------------------------------------------------------------------------

    def _xml(self, entries, name: str, missing: str) -> tuple[bytes, etree._Element]:
        """An XML file of the container or package: its bytes (at most MAX_PACKAGE_BYTES), parsed."""
        if name not in entries:
            raise self._invalid(missing)
        data = b"".join(self._inflate(entries[name], MAX_PACKAGE_BYTES))
        try:
            return data, etree.fromstring(data, etree.XMLParser(**SAFE_PARSER))
        except etree.XMLSyntaxError as exc:
            what = "container or package XML" if name != ENCRYPTION_XML else name
            raise self._invalid(f"malformed {what}: {exc}") from None

    def _copy(self, info: zipfile.ZipInfo, out: zipfile.ZipFile, empty: bool):
        with out.open(info.filename, "w") as sink:
            if not empty:
                for chunk in self._inflate(info, MAX_ENTRY_BYTES):
                    sink.write(chunk)

    def _inflate(self, info: zipfile.ZipInfo, limit: int):
        """The entry's bytes, CHUNK at a time, inflated here from its raw data. Each chunk is
        counted against `limit`, MAX_TOTAL_BYTES and MAX_RATIO before it is handed on; the
        directory's size and CRC are only compared with the result at the end."""
        name = info.filename
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise self._unreadable(f"entry {_shown(name)} uses compression method {info.compress_type}, "
                                   "which EPUB does not allow")
        self.f.seek(info.header_offset)
        header = self.f.read(LOCAL_HEADER.size)
        if len(header) < LOCAL_HEADER.size or header[:4] != LOCAL_HEADER_MAGIC:
            raise self._damaged(name)
        *_, name_length, extra_length = LOCAL_HEADER.unpack(header)
        self.f.seek(name_length + extra_length, io.SEEK_CUR)

        inflater = zlib.decompressobj(-zlib.MAX_WBITS) if info.compress_type == zipfile.ZIP_DEFLATED else None
        left = min(info.compress_size, self.size - self.f.tell())  # never read past the archive
        read = produced = 0
        crc = 0
        while True:
            if inflater is not None and inflater.unconsumed_tail:
                raw = inflater.unconsumed_tail
            else:
                raw = self.f.read(min(CHUNK, left))
                left -= len(raw)
                read += len(raw)
                if not raw:
                    break
            try:
                chunk = inflater.decompress(raw, CHUNK) if inflater is not None else raw
            except zlib.error:
                raise self._damaged(name) from None
            produced += len(chunk)
            self.inflated += len(chunk)
            if produced > limit:
                raise self._unsafe(f"entry {_shown(name)} inflates to more than {limit // MiB} MiB")
            if self.inflated > MAX_TOTAL_BYTES:
                raise self._unsafe(f"its files inflate to more than {MAX_TOTAL_BYTES // MiB} MiB")
            if produced > RATIO_FLOOR and produced > MAX_RATIO * read:
                raise self._unsafe(f"entry {_shown(name)} inflates more than {MAX_RATIO} times over: a zip bomb")
            crc = zlib.crc32(chunk, crc)
            yield chunk
            if inflater is not None and inflater.eof:
                break
        if (inflater is not None and not inflater.eof) or produced != info.file_size or crc != info.CRC:
            raise self._damaged(name)

    # -- messages --------------------------------------------------------------------------------

    def _unsafe(self, why: str) -> InputError:
        return InputError(f"{self.book}: unsafe EPUB ({why})")

    def _unreadable(self, why: str) -> InputError:
        return InputError(f"{self.book}: not a readable EPUB ({why})")

    def _damaged(self, name: str) -> InputError:
        return self._unreadable(f"entry {_shown(name)} is damaged")

    def _invalid(self, why: str) -> InputError:
        return InputError(f"{self.book}: not a valid EPUB ({why})")


def _package_path(container: etree._Element) -> str:
    """The default rendition's OPF: the first rootfile of the OPF type, else the first rootfile."""
    rootfiles = [el for el in container.iter() if _local(el) == "rootfile"]
    typed = [el for el in rootfiles if el.get("media-type") == OPF_MEDIA_TYPE]
    chosen = (typed or rootfiles or [None])[0]
    return chosen.get("full-path") or "" if chosen is not None else ""


def _container_xml(package_path: str) -> bytes:
    """A container.xml naming only the chosen OPF (ebooklib would take the last one listed)."""
    ns = "urn:oasis:names:tc:opendocument:xmlns:container"
    root = etree.Element(f"{{{ns}}}container", nsmap={None: ns}, version="1.0")
    rootfiles = etree.SubElement(root, f"{{{ns}}}rootfiles")
    etree.SubElement(rootfiles, f"{{{ns}}}rootfile", {"full-path": package_path, "media-type": OPF_MEDIA_TYPE})
    return etree.tostring(root, xml_declaration=True, encoding="utf-8")


def _manifest_files(package: etree._Element, package_path: str):
    """(href, archive names, unread?, markup?) of each manifest item: its names are the two
    ebooklib may look it up by (the href percent-decoded, and as written); markup is what the
    reader parses (pages, the navigation, the NCX), where the other items are only looked at."""
    base = posixpath.dirname(package_path)
    spine = {el.get("idref") for el in package.iter() if _local(el) == "itemref"}
    for item in package.iter():
        if _local(item) != "item" or _local(item.getparent()) != "manifest" or not item.get("href"):
            continue
        media_type = (item.get("media-type") or "").lower()
        unread = media_type.startswith(UNREAD_MEDIA)
        markup = item.get("id") in spine or "nav" in (item.get("properties") or "").split() or \
            media_type not in LOOKED_AT and not media_type.startswith(LOOKED_AT_KINDS)
        href = item.get("href")
        names = [posixpath.normpath(posixpath.join(base, variant)) for variant in dict.fromkeys([unquote(href), href])]
        yield href, list(dict.fromkeys(names)), unread, markup


def _drm_scheme(encryption: etree._Element) -> str | None:
    """The DRM scheme encryption.xml reveals, or None when it only obfuscates fonts."""
    for data in encryption.iter():
        if _local(data) != "EncryptedData":
            continue
        method = next((el for el in data.iter() if _local(el) == "EncryptionMethod"), None)
        if method is not None and method.get("Algorithm") in FONT_OBFUSCATION:
            continue
        for el in data.iter():
            if _local(el) == "RetrievalMethod" and (
                    el.get("Type") == LCP_KEY_TYPE or (el.get("URI") or "").startswith("license.lcpl#")):
                return "Readium LCP"
            if isinstance(el.tag, str) and el.tag.startswith(f"{{{ADOBE_ADEPT_NS}}}"):
                return "Adobe ADEPT"
        return "unknown scheme"
    return None


def _local(el) -> str:
    return etree.QName(el).localname if el is not None and isinstance(el.tag, str) else ""


def _shown(name: str) -> str:
    """An entry name fit for a one-line message: control characters escaped, length capped."""
    name = "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)
    return name if len(name) <= 200 else name[:200] + "…"
