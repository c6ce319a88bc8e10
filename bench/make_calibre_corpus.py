"""Make the corpus books that we produce ourselves, from the texts of books already in tests/corpus.

    .venv/bin/python bench/make_calibre_corpus.py [--out DIR]    # default: tests/corpus

Three are EPUBs as calibre's own `ebook-convert` makes them from other formats, because a calibre
library is full of them (calibre must be installed; its version is printed and recorded in
tests/corpus/NOTICE.md):

* moby-dick-calibre-from-txt.epub: Moby-Dick chapters 1-3 as a Project Gutenberg-style plain text
  file (a title block, "CHAPTER 1. Loomings." lines, paragraphs hard-wrapped at 70 columns).
* a-tale-of-two-cities-calibre-from-html.epub: Book the First, chapters I-III of the Standard
  Ebooks edition, as one HTML file with h1 (the Book) and h2 (the chapters) headings.
* vingt-mille-lieues-calibre-from-docx.epub: the first three chapters of the French Gutenberg
  edition as a Word document with Title / Heading 1 / Heading 2 styles. The DOCX is written here
  with zipfile (WordprocessingML is a handful of XML parts), so no Office suite is needed.
* the-waste-land-calibre-from-epub.epub: the IDPF Waste Land converted EPUB to EPUB, as calibre
  does to a book on "Convert books" (EPUB 3 in, calibre's EPUB 2 out). That book is CC BY-SA 3.0,
  and so is this one.

Three are hand-made EPUBs of kinds the corpus lacked:

* drawn-panels-comic-fixed-layout-epub3.epub: a fixed-layout (rendition:layout pre-paginated)
  comic of four pages of panels drawn here (PNG written with zlib), with no text at all.
* laozi-no-toc-hard-wrapped-zh-epub2.epub: the Dao De Jing with no NCX and no nav, split across
  nine spine files, the 第N章 markers as plain paragraphs and the text hard-wrapped at 20
  characters, as a plain-text conversion leaves it.
* whaling-glossary-dictionary-a-z-epub3.epub: a glossary of sea and whaling words we wrote, one
  section per letter A-Z, the letters as headings.

Calibre writes a random uuid and the time into each book, so a rerun gives other identifiers (then
update their 'identifier' in tests/corpus_expectations.py and the SHA-256 list in NOTICE.md); the
hand-made books come out the same byte for byte.
"""

from __future__ import annotations

import argparse
import html
import re
import struct
import subprocess
import tempfile
import textwrap
import zipfile
import zlib
from pathlib import Path

from lxml import etree

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus"
XHTML_NS = "http://www.w3.org/1999/xhtml"
FIXED_TIME = (2024, 1, 1, 0, 0, 0)


# -- reading the source books -------------------------------------------------------------------


def _local(el) -> str:
    return etree.QName(el.tag).localname if isinstance(el.tag, str) else ""


def _doc(epub: Path, name: str):
    with zipfile.ZipFile(epub) as zf:
        return etree.fromstring(zf.read(name), etree.XMLParser(recover=True, resolve_entities=False))


def _text(el) -> str:
    return " ".join("".join(el.itertext()).split())


def _blocks(root, names: set[str]) -> list[tuple[str, str]]:
    """(element name, text) of the block elements under <body>, in document order."""
    return [(_local(el), _text(el)) for el in root.iter() if _local(el) in names and _text(el)]


def moby_dick_chapters(n: int = 3) -> list[tuple[str, list[str]]]:
    book = CORPUS / "moby-dick-epub3.epub"
    chapters = []
    for i in range(1, n + 1):
        blocks = _blocks(_doc(book, f"OPS/chapter_{i:03d}.xhtml"), {"h1", "p"})
        chapters.append((blocks[0][1], [t for _, t in blocks[1:]]))
    return chapters


def tale_of_two_cities_book_one(n: int = 3) -> tuple[str, list[tuple[str, list[str]]]]:
    book = CORPUS / "a-tale-of-two-cities-nested-books-se-epub3.epub"
    divider = _doc(book, "epub/text/book-1.xhtml")
    label = _text(next(el for el in divider.iter() if _local(el) == "h2"))
    subtitle = _text(next(el for el in divider.iter() if _local(el) == "p"))
    chapters = []
    for i in range(1, n + 1):
        root = _doc(book, f"epub/text/chapter-1-{i}.xhtml")
        hgroup = next(el for el in root.iter() if _local(el) == "hgroup")
        number, title = (_text(el) for el in hgroup)
        paragraphs = [_text(p) for p in root.iter() if _local(p) == "p" and p.getparent() is not hgroup]
        chapters.append((f"Chapter {number}. {title}", [p for p in paragraphs if p]))
    return f"{label}: {subtitle}", chapters


def vingt_mille_lieues_chapters(n: int = 3) -> list[tuple[list[str], list[str]]]:
    """(heading lines, paragraphs) of the first n chapters: each h2 holds "CHAPITRE …<br/>TITLE"."""
    book = CORPUS / "vingt-mille-lieues-sous-les-mers-fr-epub2-ncx.epub"
    root = _doc(book, "OEBPS/@public@vhost@g@gutenberg@html@files@54873@54873-h@54873-h-0.htm.html")
    chapters: list[tuple[list[str], list[str]]] = []
    for el in root.iter():
        name = _local(el)
        if name == "h2":
            if len(chapters) == n:
                break
            lines, line = [], [el.text or ""]
            for child in el:
                if _local(child) == "br":
                    lines.append(line)
                    line = [child.tail or ""]
                else:
                    line.append("".join(child.itertext()) + (child.tail or ""))
            lines.append(line)
            chapters.append(([" ".join("".join(ln).split()) for ln in lines if "".join(ln).strip()], []))
        elif name == "p" and chapters and _text(el) and not _in_figure(el):
            chapters[-1][1].append(_text(el))
    return chapters


def _in_figure(el) -> bool:
    """Gutenberg's picture blocks (div.figcenter…): a caption and an "Agrandir" (enlarge) link."""
    return any("fig" in (a.get("class") or "") for a in el.iterancestors())


def laozi_chapters() -> list[tuple[str, str]]:
    """(第N章, text) for the 81 chapters, from between Gutenberg's START and END lines, without
    Gutenberg's "End of the Project Gutenberg EBook" line, the two section lines of the 德經, and
    spaces: the only whitespace left in the book is the wraps we put in."""
    book = CORPUS / "laozi-daodejing-zh-epub2-ncx.epub"
    root = _doc(book, "OEBPS/7707970969783376317_24039-0-0.txt.html")
    lines = "\n".join("".join(p.itertext()) for p in root.iter() if _local(p) == "p").split("\n")
    lines = [ln.strip() for ln in lines]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("*** START"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("*** END"))
    chapters: list[tuple[str, list[str]]] = []
    for ln in lines[start + 1:end]:
        if re.fullmatch(r"第[一二三四五六七八九十]+章", ln):
            chapters.append((ln, []))
        elif chapters and ln and not ln.startswith(("老子下篇", "（三十八章", "End of the Project Gutenberg")):
            chapters[-1][1].append("".join(ln.split()))  # two lines hold a space after a stop: not a wrap
    assert len(chapters) == 81, len(chapters)
    return [(title, "".join(body)) for title, body in chapters]


# -- pictures, drawn here -----------------------------------------------------------------------


def png(width: int, height: int, draw) -> bytes:
    """An RGB PNG; draw(x, y) gives each pixel's (r, g, b)."""
    rows = bytearray()
    for y in range(height):
        rows.append(0)
        for x in range(width):
            rows.extend(draw(x, y))
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b""))


WHITE, BLACK = (255, 255, 255), (20, 20, 20)
PALETTE = [(214, 69, 65), (52, 120, 198), (240, 190, 50), (70, 160, 90), (150, 90, 170), (240, 130, 40)]


def comic_page(page: int, width: int = 600, height: int = 800) -> bytes:
    """Four panels with a border; in each a sun, a hill or a figure: pictures, no words."""
    margin, gutter, border = 24, 16, 5
    pw, ph = (width - 2 * margin - gutter) // 2, (height - 2 * margin - gutter) // 2

    def draw(x, y):
        col = 0 if x < margin + pw + gutter // 2 else 1
        row = 0 if y < margin + ph + gutter // 2 else 1
        x0, y0 = margin + col * (pw + gutter), margin + row * (ph + gutter)
        lx, ly = x - x0, y - y0
        if not (0 <= lx < pw and 0 <= ly < ph):
            return WHITE
        if lx < border or ly < border or lx >= pw - border or ly >= ph - border:
            return BLACK
        kind = (page * 4 + row * 2 + col) % 3
        colour = PALETTE[(page + row * 2 + col) % len(PALETTE)]
        cx, cy = pw // 2 + (page * 17 % 40) - 20, ph // 2
        if kind == 0 and (lx - cx) ** 2 + (ly - cy + 40) ** 2 < (50 + page * 6) ** 2:
            return colour  # a sun
        if kind == 1 and ly > ph - 60 - (pw // 2 - abs(lx - cx)) * 0.8:
            return colour  # a hill
        body = abs(lx - cx) < 12 and cy - 60 < ly < cy + 70
        if kind == 2 and (body or (lx - cx) ** 2 + (ly - cy + 85) ** 2 < 26 ** 2):
            return colour  # a figure: a body and a head
        return (235, 240, 248) if ly < ph * 0.6 else (225, 215, 190)

    return png(width, height, draw)


def cover_picture(colour: tuple[int, int, int], width: int = 400, height: int = 600) -> bytes:
    """A plain cover: a coloured field and a band; the titles are in the metadata, not the image."""
    def draw(x, y):
        if height * 0.35 < y < height * 0.5:
            return WHITE
        return colour if (x // 40 + y // 40) % 2 else tuple(max(0, c - 30) for c in colour)
    return png(width, height, draw)


# -- writing EPUBs by hand ----------------------------------------------------------------------


def write_epub(path: Path, files: dict[str, bytes | str]):
    """An OCF container: mimetype first and stored, then every file deflated, with a fixed date."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype", FIXED_TIME), "application/epub+zip", zipfile.ZIP_STORED)
        container = ('<?xml version="1.0" encoding="UTF-8"?>\n<container version="1.0" '
                     'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile '
                     'full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
                     "</rootfiles></container>\n")
        for name, data in {"META-INF/container.xml": container, **files}.items():
            zf.writestr(zipfile.ZipInfo(name, FIXED_TIME), data, zipfile.ZIP_DEFLATED)


def xhtml_page(title: str, body: str, lang: str, head: str = "", body_attrs: str = "") -> str:
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
            f'<html xmlns="{XHTML_NS}" xmlns:epub="http://www.idpf.org/2007/ops" xml:lang="{lang}" lang="{lang}">\n'
            f"<head><meta charset=\"utf-8\"/><title>{html.escape(title)}</title>{head}</head>\n"
            f"<body{body_attrs}>\n{body}\n</body>\n</html>\n")


def comic(out: Path):
    pages = 4
    files: dict[str, bytes | str] = {}
    items, refs = [], []
    for n in range(1, pages + 1):
        files[f"OEBPS/images/page-{n}.png"] = comic_page(n)
        body = f'<div class="page"><img src="images/page-{n}.png" alt="" width="600" height="800"/></div>'
        files[f"OEBPS/page-{n}.xhtml"] = xhtml_page(
            f"Page {n}", body, "en", '<meta name="viewport" content="width=600, height=800"/>'
            '<style>body{margin:0}img{display:block}</style>')
        props = ' properties="cover-image"' if n == 1 else ""
        items.append(f'<item id="img{n}" href="images/page-{n}.png" media-type="image/png"{props}/>')
        items.append(f'<item id="p{n}" href="page-{n}.xhtml" media-type="application/xhtml+xml"/>')
        refs.append(f'<itemref idref="p{n}" properties="page-spread-{"right" if n % 2 else "left"}"/>')
    nav_items = "".join(f'<li><a href="page-{n}.xhtml">{"Cover" if n == 1 else f"Page {n}"}</a></li>'
                        for n in range(1, pages + 1))
    files["OEBPS/nav.xhtml"] = xhtml_page(
        "Contents", f'<nav epub:type="toc" id="toc"><h1>Contents</h1><ol>{nav_items}</ol></nav>', "en")
    files["OEBPS/content.opf"] = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
        'unique-identifier="uid" xml:lang="en"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        '<dc:identifier id="uid">urn:uuid:5b0c2f59-6b0e-4f43-9d3e-2c3c1f8a7e01</dc:identifier>'
        "<dc:title>Four Panels of Weather</dc:title><dc:creator>epub2audio project</dc:creator>"
        "<dc:language>en</dc:language><dc:rights>CC0 1.0</dc:rights>"
        '<meta property="dcterms:modified">2024-01-01T00:00:00Z</meta>'
        '<meta property="rendition:layout">pre-paginated</meta>'
        '<meta property="rendition:spread">landscape</meta></metadata><manifest>'
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        + "".join(items) + "</manifest><spine>" + "".join(refs) + "</spine></package>\n")
    write_epub(out / "drawn-panels-comic-fixed-layout-epub3.epub", files)


def wrap_cjk(text: str, width: int = 20) -> str:
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


def laozi_no_toc(out: Path):
    chapters = laozi_chapters()
    files: dict[str, bytes | str] = {"OEBPS/images/cover.png": cover_picture((120, 40, 30))}
    items = ['<item id="cover-img" href="images/cover.png" media-type="image/png"/>']
    refs = []
    for part in range(9):
        body = "\n".join(f'<p class="marker">{title}</p>\n<p>{wrap_cjk(text)}</p>'
                         for title, text in chapters[part * 9:part * 9 + 9])
        name = f"text-{part + 1}.html"
        files[f"OEBPS/{name}"] = ('<?xml version="1.0" encoding="UTF-8"?>\n'
                                  f'<html xmlns="{XHTML_NS}" xml:lang="zh"><head><title>老子</title></head>\n'
                                  f"<body>\n{body}\n</body></html>\n")
        items.append(f'<item id="t{part + 1}" href="{name}" media-type="application/xhtml+xml"/>')
        refs.append(f'<itemref idref="t{part + 1}"/>')
    files["OEBPS/content.opf"] = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="2.0" '
        'unique-identifier="uid"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/" '
        'xmlns:opf="http://www.idpf.org/2007/opf">'
        '<dc:identifier id="uid">urn:uuid:0f7c3a2e-9d41-4b8e-a7a5-6a9f0f1e2d02</dc:identifier>'
        "<dc:title>老子</dc:title><dc:creator opf:role=\"aut\">Laozi</dc:creator><dc:language>zh</dc:language>"
        '<meta name="cover" content="cover-img"/></metadata><manifest>'
        + "".join(items) + "</manifest><spine>" + "".join(refs) + "</spine></package>\n")
    write_epub(out / "laozi-no-toc-hard-wrapped-zh-epub2.epub", files)


# Our own short definitions, two or three words a letter (CC0, see tests/corpus/NOTICE.md).
GLOSSARY = {
    "A": [
        ('Aft', 'Towards the stern of a ship.'),
        ('Ambergris', 'A grey, waxy matter found in the gut of a sperm whale and once prized by makers of perfume.'),
    ],
    "B": [
        ('Baleen', 'The comb-like plates in the mouth of some whales, through which they strain their food.'),
        ('Blubber', "The thick layer of fat under a whale's skin, boiled down for its oil."),
    ],
    "C": [
        ('Cutting in', 'Stripping the blubber from a whale made fast alongside the ship.'),
        ("Crow's nest", 'A lookout platform high on a mast.'),
    ],
    "D": [
        ('Davit', "A small crane on the ship's side from which a boat is hung."),
        ('Dogwatch', 'One of the two short watches of the early evening.'),
    ],
    "E": [
        ('Ensign', "The flag that shows a ship's nation."),
        ('Eye of the wind', 'The exact direction from which the wind blows.'),
    ],
    "F": [
        ('Fluke', "Either half of a whale's tail."),
        ('Forecastle', "The crew's quarters in the bow of the ship."),
    ],
    "G": [
        ('Gam', 'A friendly visit between the crews of two whaling ships that meet at sea.'),
        ('Gunwale', "The upper edge of a boat's side."),
    ],
    "H": [
        ('Harpoon', 'A barbed spear, thrown by hand, that makes a line fast to a whale.'),
        ('Hold', 'The space below decks where cargo and casks are stowed.'),
    ],
    "I": [
        ('Iron', "The whalemen's word for a harpoon."),
        ('In irons', 'Said of a ship head to wind that cannot turn either way.'),
    ],
    "J": [
        ('Jib', 'A triangular sail set ahead of the foremost mast.'),
        ('Jury rig', 'A makeshift mast or sail put up after damage.'),
    ],
    "K": [
        ('Keel', 'The backbone of a ship, running along the bottom from bow to stern.'),
        ('Knot', 'One nautical mile an hour.'),
    ],
    "L": [
        ('Lance', 'A long, sharp spear used to kill a whale once it is fast.'),
        ('Lay', "A whaleman's share of the profits of a voyage."),
    ],
    "M": [
        ('Mast-head', 'The top of a mast, where the lookouts stand.'),
        ('Mincing', 'Slicing blubber thin so that it gives up its oil quickly.'),
    ],
    "N": [
        ('Nantucket sleigh ride', 'The wild tow of a whaleboat by a harpooned whale.'),
        ("Nor'easter", 'A storm blowing from the north-east.'),
    ],
    "O": [
        ('Oakum', 'Old rope picked apart and used to caulk seams.'),
        ('Offing', 'The part of the sea that can be seen from the shore, far from land.'),
    ],
    "P": [
        ('Pod', 'A group of whales swimming together.'),
        ('Ports', "Openings in a ship's side."),
    ],
    "Q": [
        ('Quarter-deck', 'The raised deck towards the stern, kept by the officers.'),
        ('Quarter boat', 'A whaleboat hung near the stern.'),
    ],
    "R": [
        ('Rigging', 'All the ropes that hold up and work the masts and sails.'),
        ('Right whale', 'A slow whale that floats when killed, and so was thought the right one to hunt.'),
    ],
    "S": [
        ('Scrimshaw', 'Carving done by sailors on whale teeth and bone.'),
        ('Spermaceti', 'The clear wax from the head of a sperm whale.'),
    ],
    "T": [
        ('Try-works', 'The brick furnaces on deck where blubber is boiled.'),
        ('Thole pin', 'A peg in the gunwale against which an oar is worked.'),
    ],
    "U": [
        ('Unship', 'To take something out of its place, such as an oar from its lock.'),
        ('Under way', 'Moving through the water.'),
    ],
    "V": [
        ('Vang', 'A rope that steadies a gaff or boom.'),
        ('Voyage', 'For a whaler, often three or four years from home.'),
    ],
    "W": [
        ('Waif', 'A small flag planted on a dead whale to mark it as taken.'),
        ('Windlass', 'A winch turned by hand to raise the anchor.'),
    ],
    "X": [
        ('Xebec', 'A small three-masted ship of the Mediterranean.'),
        ('X-marked chart', 'A chart on which the places where whales were seen are crossed.'),
    ],
    "Y": [
        ('Yard', 'A spar across a mast from which a square sail hangs.'),
        ('Yaw', 'To swing off course from side to side.'),
    ],
    "Z": [
        ('Zenith', 'The point of the sky straight overhead, used in taking a sight.'),
        ('Zephyr', 'A gentle westerly breeze.'),
    ],
}


def glossary(out: Path):
    title = "A Little Glossary of the Whale Fishery"
    sections = []
    for letter, words in GLOSSARY.items():
        entries = "".join(f"<dt>{html.escape(w)}</dt><dd>{html.escape(d)}</dd>" for w, d in words)
        sections.append(f'<section id="letter-{letter}"><h2>{letter}</h2><dl>{entries}</dl></section>')
    nav_items = "".join(f'<li><a href="glossary.xhtml#letter-{letter}">{letter}</a></li>' for letter in GLOSSARY)
    files: dict[str, bytes | str] = {
        "OEBPS/images/cover.png": cover_picture((40, 80, 130)),
        "OEBPS/title.xhtml": xhtml_page(title, f'<section epub:type="titlepage"><h1>{title}</h1>'
                                        "<p>Words of ships and whaling, A to Z</p></section>", "en"),
        "OEBPS/glossary.xhtml": xhtml_page(title, "\n".join(sections), "en"),
        "OEBPS/nav.xhtml": xhtml_page("Contents", f'<nav epub:type="toc" id="toc"><h1>Contents</h1><ol>'
                                      f'<li><a href="title.xhtml">Title Page</a></li>{nav_items}</ol></nav>', "en"),
        "OEBPS/content.opf": (
            '<?xml version="1.0" encoding="UTF-8"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
            'unique-identifier="uid" xml:lang="en"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
            '<dc:identifier id="uid">urn:uuid:7d1e9b3c-2a6f-4e0d-8c55-3b2a1d4e5f03</dc:identifier>'
            f"<dc:title>{title}</dc:title><dc:creator>epub2audio project</dc:creator>"
            "<dc:language>en</dc:language><dc:rights>CC0 1.0</dc:rights>"
            '<meta property="dcterms:modified">2024-01-01T00:00:00Z</meta></metadata><manifest>'
            '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
            '<item id="cover" href="images/cover.png" media-type="image/png" properties="cover-image"/>'
            '<item id="title" href="title.xhtml" media-type="application/xhtml+xml"/>'
            '<item id="glossary" href="glossary.xhtml" media-type="application/xhtml+xml"/>'
            '</manifest><spine><itemref idref="title"/><itemref idref="glossary"/></spine></package>\n'),
    }
    write_epub(out / "whaling-glossary-dictionary-a-z-epub3.epub", files)


# -- the calibre books --------------------------------------------------------------------------


# What a book exported from a calibre library carries: calibre:title_sort and opf:file-as.
def library_sort(title_sort: str, author_sort: str) -> list[str]:
    return ["--title-sort", title_sort, "--author-sort", author_sort]


def ebook_convert(src: Path, dst: Path, *options: str):
    subprocess.run(["ebook-convert", str(src), str(dst), *options], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def moby_dick_txt(out: Path, work: Path):
    lines = ["MOBY-DICK;", "", "or, THE WHALE.", "", "By Herman Melville", "", "", ""]
    for title, paragraphs in moby_dick_chapters():
        lines += ["", title.replace("Chapter", "CHAPTER", 1), ""]
        for p in paragraphs:
            lines += textwrap.wrap(p, 70, break_on_hyphens=False) + [""]
    src = work / "moby-dick.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ebook_convert(src, out / "moby-dick-calibre-from-txt.epub", "--title", "Moby-Dick", "--authors",
                  "Herman Melville", "--language", "en", *library_sort("Moby-Dick", "Melville, Herman"))


def tale_of_two_cities_html(out: Path, work: Path):
    book_title, chapters = tale_of_two_cities_book_one()
    body = [f"<h1>{html.escape(book_title)}</h1>"]
    for title, paragraphs in chapters:
        body.append(f"<h2>{html.escape(title)}</h2>")
        body += [f"<p>{html.escape(p)}</p>" for p in paragraphs]
    src = work / "a-tale-of-two-cities.html"
    src.write_text('<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"/>'
                   "<title>A Tale of Two Cities</title></head>\n<body>\n" + "\n".join(body)
                   + "\n</body>\n</html>\n", encoding="utf-8")
    ebook_convert(src, out / "a-tale-of-two-cities-calibre-from-html.epub", "--title", "A Tale of Two Cities",
                  "--authors", "Charles Dickens", "--language", "en",
                  *library_sort("Tale of Two Cities, A", "Dickens, Charles"))


W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx(path: Path, title: str, author: str, lang: str, paragraphs: list[tuple[str, list[str]]]):
    """A minimal Word document: (style id, lines) paragraphs, lines joined by line breaks."""
    def para(style: str, lines: list[str]) -> str:
        runs = "<w:r><w:br/></w:r>".join(f'<w:r><w:t xml:space="preserve">{html.escape(t)}</w:t></w:r>' for t in lines)
        props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style != "Normal" else ""
        return f"<w:p>{props}{runs}</w:p>"

    def style(sid: str, name: str, level: int | None, size: int) -> str:
        outline = f'<w:outlineLvl w:val="{level}"/>' if level is not None else ""
        return (f'<w:style w:type="paragraph" w:styleId="{sid}"><w:name w:val="{name}"/><w:basedOn w:val="Normal"/>'
                f'<w:next w:val="Normal"/><w:qFormat/><w:pPr><w:keepNext/><w:spacing w:before="240" w:after="120"/>'
                f"{outline}</w:pPr><w:rPr><w:b/><w:sz w:val=\"{size}\"/></w:rPr></w:style>")

    document = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="{W_NS}"><w:body>'
                + "".join(para(s, lines) for s, lines in paragraphs) + "<w:sectPr/></w:body></w:document>")
    styles = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:styles xmlns:w="{W_NS}">'
              f'<w:docDefaults><w:rPrDefault><w:rPr><w:lang w:val="{lang}"/></w:rPr></w:rPrDefault></w:docDefaults>'
              '<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/><w:qFormat/>'
              '<w:pPr><w:spacing w:after="160"/></w:pPr></w:style>'
              + style("Title", "Title", None, 56) + style("Heading1", "heading 1", 0, 36)
              + style("Heading2", "heading 2", 1, 28) + "</w:styles>")
    core = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<cp:coreProperties '
            'xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f"<dc:title>{html.escape(title)}</dc:title><dc:creator>{html.escape(author)}</dc:creator>"
            f"<dc:language>{lang}</dc:language></cp:coreProperties>")
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            '<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>'
            '<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>'
            "</Types>"),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{rel}/officeDocument" Target="word/document.xml"/>'
            '<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/>'
            "</Relationships>"),
        "word/_rels/document.xml.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{rel}/styles" Target="styles.xml"/></Relationships>'),
        "word/document.xml": document,
        "word/styles.xml": styles,
        "docProps/core.xml": core,
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in parts.items():
            zf.writestr(zipfile.ZipInfo(name, FIXED_TIME), data, zipfile.ZIP_DEFLATED)


def vingt_mille_lieues_docx(out: Path, work: Path):
    paragraphs: list[tuple[str, list[str]]] = [("Title", ["Vingt mille lieues sous les mers"]),
                                               ("Heading1", ["PREMIÈRE PARTIE"])]
    for heading, body in vingt_mille_lieues_chapters():
        paragraphs.append(("Heading2", heading))
        paragraphs += [("Normal", [p]) for p in body]
    src = work / "vingt-mille-lieues.docx"
    docx(src, "Vingt mille lieues sous les mers", "Jules Verne", "fr-FR", paragraphs)
    ebook_convert(src, out / "vingt-mille-lieues-calibre-from-docx.epub", "--title",
                  "Vingt mille lieues sous les mers", "--authors", "Jules Verne", "--language", "fr",
                  *library_sort("Vingt mille lieues sous les mers", "Verne, Jules"))


def waste_land_epub(out: Path):
    ebook_convert(CORPUS / "the-waste-land-poetry-notes-epub3.epub", out / "the-waste-land-calibre-from-epub.epub",
                  *library_sort("Waste Land, The", "Eliot, T. S."))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CORPUS)
    args = parser.parse_args()
    print(subprocess.run(["ebook-convert", "--version"], capture_output=True, text=True).stdout.splitlines()[0])
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        moby_dick_txt(args.out, work)
        tale_of_two_cities_html(args.out, work)
        vingt_mille_lieues_docx(args.out, work)
    waste_land_epub(args.out)
    comic(args.out)
    laozi_no_toc(args.out)
    glossary(args.out)
    for p in sorted(args.out.glob("*calibre*.epub")) + [args.out / n for n in (
            "drawn-panels-comic-fixed-layout-epub3.epub", "laozi-no-toc-hard-wrapped-zh-epub2.epub",
            "whaling-glossary-dictionary-a-z-epub3.epub")]:
        print(f"{p.stat().st_size:9,d}  {p.name}")


if __name__ == "__main__":
    main()
