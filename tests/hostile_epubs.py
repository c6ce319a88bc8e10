"""Build hostile EPUBs at test time (no binary blobs in the repository).

Each builder takes a folder and returns the path of a small book (two chapters, "One" and "Two",
made by epub_factory) with one hostile twist. The zip is written here byte by byte, so that the
twists zipfile would refuse to write (lying sizes, flags, symlinks, a precompressed bomb) are
possible:

    path = hostile_epubs.zip_bomb(tmp_path)       # OEBPS/bomb.xhtml inflates to 2 GiB of zeros
"""

from __future__ import annotations

import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from epub_factory import make_epub, xhtml

GiB = 1 << 30
BOMB_SIZE = 2 * GiB
CHAPTERS = {"c1.xhtml": xhtml("<h1>One</h1><p>The first chapter.</p>", "One"),
            "c2.xhtml": xhtml("<h1>Two</h1><p>The second chapter.</p>", "Two")}
NAV = [("One", "c1.xhtml"), ("Two", "c2.xhtml")]


@dataclass
class Entry:
    """One zip entry as written: `data` is the payload after compression."""

    name: str
    data: bytes
    method: int = zipfile.ZIP_STORED
    crc: int = 0
    size: int = 0  # uncompressed size, as the headers claim it
    flags: int = 0
    external_attr: int = 0


def stored(name: str, data: bytes, **kw) -> Entry:
    return Entry(name, data, zipfile.ZIP_STORED, zlib.crc32(data), len(data), **kw)


def deflated(name: str, data: bytes, **kw) -> Entry:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return Entry(name, c.compress(data) + c.flush(), zipfile.ZIP_DEFLATED, zlib.crc32(data), len(data), **kw)


def write_zip(path: Path, entries: list[Entry]) -> Path:
    """Local headers and data, then the central directory and its end record (no zip64)."""
    with path.open("wb") as f:
        offsets = []
        for e in entries:
            offsets.append(f.tell())
            name = e.name.encode()
            f.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, e.flags, e.method, 0, 0x21,
                                e.crc, len(e.data), e.size, len(name), 0))
            f.write(name + e.data)
        start = f.tell()
        for e, offset in zip(entries, offsets):
            name = e.name.encode()
            f.write(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 3 << 8 | 20, 20, e.flags, e.method, 0, 0x21,
                                e.crc, len(e.data), e.size, len(name), 0, 0, 0, 0, e.external_attr, offset))
            f.write(name)
        end = f.tell()
        f.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries), end - start, start, 0))
    return path


def book_entries(folder: Path, docs: dict[str, str] | None = None, **make) -> list[Entry]:
    """The entries of a sound little book made by epub_factory (extra `docs` join the spine)."""
    source = make_epub(folder, {**CHAPTERS, **(docs or {})}, nav=NAV, name="source.epub", **make)
    with zipfile.ZipFile(source) as zf:
        entries = [(stored if i.filename == "mimetype" else deflated)(i.filename, zf.read(i))
                   for i in zf.infolist()]
    source.unlink()
    return entries


def hostile(folder: Path, name: str, replace: dict[str, Entry] | None = None, add: list[Entry] = (),
            docs: dict[str, str] | None = None, **make) -> Path:
    entries = [(replace or {}).get(e.name, e) for e in book_entries(folder, docs, **make)]
    return write_zip(folder / name, entries + list(add))


# -- bombs ------------------------------------------------------------------------------------


def zeros_deflated(size: int, block: int = 1 << 20) -> tuple[bytes, int]:
    """A raw deflate stream of `size` zero bytes (about size/1000 bytes long) and its CRC-32,
    without ever holding the zeros: after a full flush the compressor starts afresh, so every
    block of zeros compresses to the same bytes."""
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    piece = c.compress(bytes(block)) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(bytes(block)) + c.flush(zlib.Z_FULL_FLUSH) == piece
    crc, zeros = 0, bytes(block)
    for _ in range(size // block):
        crc = zlib.crc32(zeros, crc)
    return piece * (size // block) + c.flush(), crc


def _bomb(size: int, claimed: int | None) -> Entry:
    data, crc = zeros_deflated(size)
    return Entry("OEBPS/bomb.xhtml", data, zipfile.ZIP_DEFLATED, crc, size if claimed is None else claimed)


BOMB_DOC = {"bomb.xhtml": xhtml("<p>Replaced by the bomb.</p>")}


def zip_bomb(folder: Path, size: int = BOMB_SIZE) -> Path:
    """A chapter that inflates to `size` zero bytes, its headers honest about it."""
    return hostile(folder, "bomb.epub", {"OEBPS/bomb.xhtml": _bomb(size, None)}, docs=BOMB_DOC)


def lying_bomb(folder: Path, size: int = BOMB_SIZE) -> Path:
    """The same bomb, its local and central headers claiming it inflates to 1,000 bytes."""
    return hostile(folder, "lying-bomb.epub", {"OEBPS/bomb.xhtml": _bomb(size, 1000)}, docs=BOMB_DOC)


def unlisted_bomb(folder: Path) -> Path:
    """A bomb the manifest does not list: nothing needs it, so it must never be inflated."""
    return hostile(folder, "unlisted-bomb.epub", add=[_bomb(BOMB_SIZE, None)])


def many_entries(folder: Path, total: int) -> Path:
    """The book padded with tiny files to `total` entries."""
    extra = total - len(book_entries(folder))
    return hostile(folder, "many.epub", add=[stored(f"OEBPS/x/{i}.txt", b"x") for i in range(extra)])


# -- unsafe entries ----------------------------------------------------------------------------

SYMLINK = (stat.S_IFLNK | 0o777) << 16


def traversal(folder: Path) -> Path:
    return hostile(folder, "traversal.epub", add=[deflated("../evil.xhtml", b"<p>evil</p>")])


def absolute(folder: Path) -> Path:
    return hostile(folder, "absolute.epub", add=[stored("/etc/x", b"root:x:0:0")])


def symlink(folder: Path) -> Path:
    return hostile(folder, "symlink.epub", add=[stored("OEBPS/passwd.xhtml", b"/etc/passwd", external_attr=SYMLINK)])


def duplicate(folder: Path) -> Path:
    return hostile(folder, "duplicate.epub", add=[deflated("OEBPS/c1.xhtml", b"<p>another first chapter</p>")])


def zip_encrypted(folder: Path) -> Path:
    """OEBPS/c1.xhtml marked as zip-password encrypted (flag bit 0)."""
    c1 = deflated("OEBPS/c1.xhtml", CHAPTERS["c1.xhtml"].encode(), flags=0x1)
    return hostile(folder, "zip-encrypted.epub", {c1.name: c1})


def deflate64(folder: Path) -> Path:
    """OEBPS/c1.xhtml claiming compression method 9 (Deflate64), which EPUB does not allow."""
    c1 = deflated("OEBPS/c1.xhtml", CHAPTERS["c1.xhtml"].encode())
    c1.method = 9
    return hostile(folder, "deflate64.epub", {c1.name: c1})


# -- DRM and font obfuscation -----------------------------------------------------------------

ENCRYPTION = ('<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
              'xmlns:enc="http://www.w3.org/2001/04/xmlenc#" xmlns:ds="http://www.w3.org/2000/09/xmldsig#">'
              '{}</encryption>')
AES = "http://www.w3.org/2001/04/xmlenc#aes128-cbc"
IDPF_FONT = "http://www.idpf.org/2008/embedding"
ADOBE_FONT = "http://ns.adobe.com/pdf/enc#RC"
ADEPT_KEY = '<ds:KeyInfo><resource xmlns="http://ns.adobe.com/adept">urn:uuid:0</resource></ds:KeyInfo>'
LCP_KEY = ('<ds:KeyInfo><ds:RetrievalMethod URI="license.lcpl#/encryption/content_key" '
           'Type="http://readium.org/2014/01/lcp#EncryptedContentKey"/></ds:KeyInfo>')


def encrypted_data(uri: str, algorithm: str, key: str = "") -> str:
    return (f'<enc:EncryptedData><enc:EncryptionMethod Algorithm="{algorithm}"/>{key}'
            f'<enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData></enc:EncryptedData>')


def _ciphertext(name: str) -> Entry:
    return stored(name, bytes(range(256)) * 8)  # what an encrypted chapter looks like to us


def _drm(folder: Path, name: str, meta_inf: dict[str, str], encrypted: bool = True) -> Path:
    replace = {n: _ciphertext(n) for n in ("OEBPS/c1.xhtml", "OEBPS/c2.xhtml")} if encrypted else {}
    return hostile(folder, name, replace, [deflated(f"META-INF/{n}", d.encode()) for n, d in meta_inf.items()])


def adept_rights(folder: Path) -> Path:
    rights = '<rights xmlns="http://ns.adobe.com/adept"><licenseToken/></rights>'
    return _drm(folder, "adept-rights.epub", {"rights.xml": rights})


def adept_encryption(folder: Path) -> Path:
    """ADEPT with rights.xml gone: encryption.xml encrypts the chapters under an Adobe key."""
    xml = ENCRYPTION.format(encrypted_data("OEBPS/c1.xhtml", AES, ADEPT_KEY) + encrypted_data("OEBPS/c2.xhtml", AES, ADEPT_KEY))
    return _drm(folder, "adept-encryption.epub", {"encryption.xml": xml})


def lcp(folder: Path) -> Path:
    xml = ENCRYPTION.format(encrypted_data("OEBPS/c1.xhtml", AES, LCP_KEY))
    return _drm(folder, "lcp.epub", {"license.lcpl": '{"id": "x", "encryption": {}}', "encryption.xml": xml})


def lcp_encryption(folder: Path) -> Path:
    """LCP with the license gone: encryption.xml's key points into license.lcpl."""
    xml = ENCRYPTION.format(encrypted_data("OEBPS/c1.xhtml", AES, LCP_KEY))
    return _drm(folder, "lcp-encryption.epub", {"encryption.xml": xml})


def fairplay(folder: Path) -> Path:
    sinf = '<fairplay:sinf xmlns:fairplay="http://itunes.apple.com/ns/epub"><fairplay:sData/></fairplay:sinf>'
    return _drm(folder, "fairplay.epub", {"sinf.xml": sinf})


def unknown_drm(folder: Path) -> Path:
    """Chapters encrypted under a key encryption.xml does not say where to find."""
    xml = ENCRYPTION.format(encrypted_data("OEBPS/c2.xhtml", AES))
    return _drm(folder, "unknown-drm.epub", {"encryption.xml": xml})


def obfuscated_fonts(folder: Path) -> Path:
    """Fonts obfuscated with the IDPF and the Adobe algorithms: not DRM, the book reads as usual."""
    fonts = {"f1.otf": (bytes(range(256)) * 16, "font/otf", ""),
             "f2.ttf": (bytes(range(255, -1, -1)) * 16, "application/vnd.ms-opentype", "")}
    xml = ENCRYPTION.format(encrypted_data("OEBPS/f1.otf", IDPF_FONT) + encrypted_data("OEBPS/f2.ttf", ADOBE_FONT))
    return hostile(folder, "fonts.epub", add=[deflated("META-INF/encryption.xml", xml.encode())],
                   extra_items=fonts)
