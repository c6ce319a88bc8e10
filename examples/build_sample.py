"""Builds examples/aesop-three-fables.epub, the sample book of the README demo.

Three of Aesop's fables in George Fyler Townsend's translation (1867, public domain), as an EPUB 3
with a nav document, an NCX for EPUB 2 readers, a cover image, a title page and a copyright page
(the last three are what a converter should skip). The archive is written deterministically (fixed
timestamps, fixed order), so rebuilding it gives the same bytes.

    python examples/build_sample.py
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

OUT = Path(__file__).with_name("aesop-three-fables.epub")
TITLE = "Three Fables of Aesop"
AUTHOR = "Aesop"
TRANSLATOR = "George Fyler Townsend"
BOOK_ID = "urn:uuid:6f1d2c3e-9a4b-4c1d-8e2f-ae50f0000001"

FABLES = [
    ("The Fox and the Grapes", [
        "A famished Fox saw some clusters of ripe black grapes hanging from a trellised vine. "
        "She resorted to all her tricks to get at them, but wearied herself in vain, for she could not reach them.",
        "At last she turned away, hiding her disappointment and saying: "
        "\u201cThe Grapes are sour, and not ripe as I thought.\u201d",
    ]),
    ("The Hare and the Tortoise", [
        "A Hare one day ridiculed the short feet and slow pace of the Tortoise, who replied, laughing: "
        "\u201cThough you be swift as the wind, I will beat you in a race.\u201d",
        "The Hare, believing her assertion to be simply impossible, assented to the proposal; and they "
        "agreed that the Fox should choose the course and fix the goal.",
        "On the day appointed for the race the two started together. The Tortoise never for a moment "
        "stopped, but went on with a slow but steady pace straight to the end of the course. The Hare, "
        "lying down by the wayside, fell fast asleep.",
        "At last waking up, and moving as fast as he could, he saw the Tortoise had reached the goal, "
        "and was comfortably dozing after her fatigue.",
        "Slow but steady wins the race.",
    ]),
    ("The North Wind and the Sun", [
        "The North Wind and the Sun disputed as to which was the most powerful, and agreed that he "
        "should be declared the victor who could first strip a wayfaring man of his clothes.",
        "The North Wind first tried his power and blew with all his might, but the keener became his "
        "blasts, the closer the Traveler wrapped his cloak around him, until at last, resigning all "
        "hope of victory, the Wind called upon the Sun to see what he could do.",
        "The Sun suddenly shone out with all his warmth. The Traveler no sooner felt his genial rays "
        "than he took off one garment after another, and at last, fairly overcome with heat, undressed "
        "and bathed in a stream that lay in his path.",
        "Persuasion is better than Force.",
    ]),
]

XHTML_HEAD = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" xml:lang="en" lang="en">
<head><title>{title}</title></head>
"""


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cover_png(width: int = 300, height: int = 450) -> bytes:
    """A plain cover: a dark field with a lighter band, as a PNG written by hand (no imaging library)."""
    rows = []
    for y in range(height):
        band = height // 3 <= y < height // 3 + 60
        pixel = bytes((200, 170, 90)) if band else bytes((40, 60, 90))
        rows.append(b"\x00" + pixel * width)
    raw = zlib.compress(b"".join(rows), 9)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def chapter_xhtml(number: int, title: str, paragraphs: list[str]) -> str:
    body = "\n".join(f"<p>{_xml_escape(p)}</p>" for p in paragraphs)
    return (XHTML_HEAD.format(title=title)
            + f'<body epub:type="bodymatter">\n<section epub:type="chapter" id="fable-{number}">\n'
            + f"<h1>{_xml_escape(title)}</h1>\n{body}\n</section>\n</body>\n</html>\n")


def files() -> list[tuple[str, bytes]]:
    chapters = [(f"fable-{i}.xhtml", t, ps) for i, (t, ps) in enumerate(FABLES, 1)]
    cover_page = (XHTML_HEAD.format(title="Cover")
                  + '<body epub:type="cover"><img src="cover.png" alt="Cover"/></body>\n</html>\n')
    title_page = (XHTML_HEAD.format(title=TITLE)
                  + f'<body epub:type="frontmatter"><section epub:type="titlepage"><h1>{TITLE}</h1>'
                  + f"<p>Translated by {TRANSLATOR}</p></section></body>\n</html>\n")
    copyright_page = (XHTML_HEAD.format(title="Copyright")
                      + '<body epub:type="backmatter"><section epub:type="copyright-page"><h1>Copyright</h1>'
                      + "<p>The text is in the public domain. This edition was made for the epub2audio demo "
                      + "and is dedicated to the public domain (CC0).</p></section></body>\n</html>\n")
    nav_items = "\n".join(f'<li><a href="{href}">{_xml_escape(t)}</a></li>' for href, t, _ in chapters)
    nav = (XHTML_HEAD.format(title="Contents")
           + '<body><nav epub:type="toc" id="toc"><h1>Contents</h1><ol>\n' + nav_items + "\n</ol></nav>\n"
           + '<nav epub:type="landmarks" hidden=""><ol>'
           + '<li><a epub:type="cover" href="cover.xhtml">Cover</a></li>'
           + '<li><a epub:type="bodymatter" href="fable-1.xhtml">Begin Reading</a></li>'
           + '<li><a epub:type="copyright-page" href="copyright.xhtml">Copyright</a></li>'
           + "</ol></nav></body>\n</html>\n")
    ncx_points = "\n".join(
        f'<navPoint id="np{i}" playOrder="{i}"><navLabel><text>{_xml_escape(t)}</text></navLabel>'
        f'<content src="{href}"/></navPoint>' for i, (href, t, _) in enumerate(chapters, 1))
    ncx = ('<?xml version="1.0" encoding="utf-8"?>\n<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
           f'<head><meta name="dtb:uid" content="{BOOK_ID}"/></head><docTitle><text>{TITLE}</text></docTitle>'
           f"<navMap>\n{ncx_points}\n</navMap></ncx>\n")
    manifest = "\n".join(
        [f'<item id="{Path(h).stem}" href="{h}" media-type="application/xhtml+xml"/>' for h, _, _ in chapters]
        + ['<item id="cover-page" href="cover.xhtml" media-type="application/xhtml+xml"/>',
           '<item id="title-page" href="title.xhtml" media-type="application/xhtml+xml"/>',
           '<item id="copyright" href="copyright.xhtml" media-type="application/xhtml+xml"/>',
           '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>',
           '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>',
           '<item id="cover-image" href="cover.png" media-type="image/png" properties="cover-image"/>'])
    spine = "\n".join(['<itemref idref="cover-page" linear="no"/>', '<itemref idref="title-page"/>']
                      + [f'<itemref idref="{Path(h).stem}"/>' for h, _, _ in chapters]
                      + ['<itemref idref="copyright"/>'])
    opf = f"""<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="book-id" xml:lang="en">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
<dc:identifier id="book-id">{BOOK_ID}</dc:identifier>
<dc:title>{TITLE}</dc:title>
<dc:creator id="author">{AUTHOR}</dc:creator>
<dc:contributor id="translator">{TRANSLATOR}</dc:contributor>
<dc:language>en</dc:language>
<dc:date>1867</dc:date>
<dc:publisher>epub2audio examples</dc:publisher>
<dc:description>Three fables of Aesop, in the 1867 translation by George Fyler Townsend.</dc:description>
<meta property="dcterms:modified">2026-11-29T00:00:00Z</meta>
<meta name="cover" content="cover-image"/>
</metadata>
<manifest>
{manifest}
</manifest>
<spine toc="ncx">
{spine}
</spine>
</package>
"""
    container = ('<?xml version="1.0" encoding="utf-8"?>\n<container version="1.0" '
                 'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                 '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
                 "</rootfiles></container>\n")
    out = [("META-INF/container.xml", container.encode()), ("OEBPS/content.opf", opf.encode()),
           ("OEBPS/nav.xhtml", nav.encode()), ("OEBPS/toc.ncx", ncx.encode()),
           ("OEBPS/cover.xhtml", cover_page.encode()), ("OEBPS/title.xhtml", title_page.encode()),
           ("OEBPS/copyright.xhtml", copyright_page.encode()), ("OEBPS/cover.png", cover_png())]
    out += [(f"OEBPS/{h}", chapter_xhtml(i, t, ps).encode()) for i, (h, t, ps) in enumerate(chapters, 1)]
    return out


def build(path: Path = OUT) -> Path:
    stamp = (2026, 11, 29, 0, 0, 0)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype", stamp), b"application/epub+zip", compress_type=zipfile.ZIP_STORED)
        for name, data in files():
            z.writestr(zipfile.ZipInfo(name, stamp), data, compress_type=zipfile.ZIP_DEFLATED)
    return path


if __name__ == "__main__":
    print(build())
