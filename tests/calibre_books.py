"""The same small book, two Moby-Dick chapters from tests/corpus, in every format calibre reads:
TXT, HTML, FB2, RTF, ODT, DOCX and PDF written here byte by byte, MOBI and AZW3 made from the HTML
by calibre's ebook-convert (it has no writer for the others' readers to trust: no ODT output, and
its PDF output needs a GPU-less Chromium sandbox that root cannot start)."""

from __future__ import annotations

import html
import importlib.util
import subprocess
import textwrap
import zipfile
from pathlib import Path

from lxml import etree

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
TITLE, AUTHOR = "Moby-Dick", "Herman Melville"
FORMATS = ("txt", "html", "fb2", "rtf", "odt", "docx", "pdf", "mobi", "azw3")
STAMP = (2024, 1, 1, 0, 0, 0)


def chapters(count: int = 2, paragraphs: int = 2) -> list[tuple[str, list[str]]]:
    """(heading, paragraphs) from the corpus Moby-Dick: 'Chapter 1. Loomings.' and its first paragraphs."""
    found = []
    with zipfile.ZipFile(CORPUS / "moby-dick-epub3.epub") as book:
        for i in range(1, count + 1):
            root = etree.fromstring(book.read(f"OPS/chapter_{i:03d}.xhtml"))
            blocks = [" ".join("".join(el.itertext()).split()) for el in root.iter()
                      if isinstance(el.tag, str) and etree.QName(el).localname in ("h1", "p")]
            blocks = [b for b in blocks if b]
            found.append((blocks[0], blocks[1:1 + paragraphs]))
    return found


def write_txt(path: Path, book) -> None:
    lines = [TITLE, "", f"By {AUTHOR}", "", ""]
    for heading, paragraphs in book:
        lines += ["", heading.replace("Chapter", "CHAPTER", 1), ""]
        for p in paragraphs:
            lines += textwrap.wrap(p, 70, break_on_hyphens=False) + [""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_html(path: Path, book) -> None:
    body = "".join(f"<h2>{html.escape(h)}</h2>" + "".join(f"<p>{html.escape(p)}</p>" for p in ps) for h, ps in book)
    path.write_text(f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/><title>{TITLE}</title>'
                    f'<meta name="author" content="{AUTHOR}"/></head>\n<body>\n<h1>{TITLE}</h1>\n{body}\n'
                    "</body></html>\n", encoding="utf-8")


def write_fb2(path: Path, book) -> None:
    sections = "".join(f"<section><title><p>{html.escape(h)}</p></title>"
                       + "".join(f"<p>{html.escape(p)}</p>" for p in ps) + "</section>" for h, ps in book)
    path.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0">'
        "<description><title-info><genre>prose</genre><author><first-name>Herman</first-name><last-name>Melville"
        f"</last-name></author><book-title>{TITLE}</book-title><lang>en</lang></title-info></description>"
        f"<body>{sections}</body></FictionBook>\n", encoding="utf-8")


def _rtf_text(text: str) -> str:
    out = []
    for c in text:
        if c in "\\{}":
            out.append("\\" + c)
        elif ord(c) < 128:
            out.append(c)
        else:
            out.append(f"\\u{ord(c) if ord(c) < 32768 else ord(c) - 65536}?")
    return "".join(out)


def write_rtf(path: Path, book) -> None:
    parts = [r"{\rtf1\ansi\deff0{\fonttbl{\f0 Times New Roman;}}",
             r"{\stylesheet{\s0 Normal;}{\s1\b\fs36 heading 1;}}",
             rf"{{\info{{\title {TITLE}}}{{\author {AUTHOR}}}}}"]
    for heading, paragraphs in book:
        parts.append(rf"\pard\s1\b\fs36 {_rtf_text(heading)}\b0\fs24\par")
        parts += [rf"\pard\s0 {_rtf_text(p)}\par" for p in paragraphs]
    path.write_text("\n".join(parts) + "}\n", encoding="ascii")


def write_odt(path: Path, book) -> None:
    office = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
    text_ns = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
    body = "".join(f'<text:h text:outline-level="1">{html.escape(h)}</text:h>'
                   + "".join(f"<text:p>{html.escape(p)}</text:p>" for p in ps) for h, ps in book)
    content = (f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content xmlns:office="{office}" '
               f'xmlns:text="{text_ns}" office:version="1.2"><office:body><office:text>{body}'
               "</office:text></office:body></office:document-content>")
    meta = (f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-meta xmlns:office="{office}" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
            f'office:version="1.2"><office:meta><dc:title>{TITLE}</dc:title><meta:initial-creator>{AUTHOR}'
            f"</meta:initial-creator><dc:creator>{AUTHOR}</dc:creator><dc:language>en</dc:language></office:meta>"
            "</office:document-meta>")
    manifest = ('<?xml version="1.0" encoding="UTF-8"?>\n<manifest:manifest '
                'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
                '<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>'
                '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
                '<manifest:file-entry manifest:full-path="meta.xml" manifest:media-type="text/xml"/>'
                "</manifest:manifest>")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype", STAMP), "application/vnd.oasis.opendocument.text")
        for name, data in (("content.xml", content), ("meta.xml", meta), ("META-INF/manifest.xml", manifest)):
            zf.writestr(zipfile.ZipInfo(name, STAMP), data, zipfile.ZIP_DEFLATED)


def write_docx(path: Path, book) -> None:
    spec = importlib.util.spec_from_file_location("make_calibre_corpus", ROOT / "bench" / "make_calibre_corpus.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    paragraphs = [("Title", [TITLE])]
    for heading, ps in book:
        paragraphs.append(("Heading1", [heading]))
        paragraphs += [("Normal", [p]) for p in ps]
    maker.docx(path, TITLE, AUTHOR, "en-US", paragraphs)


def write_pdf(path: Path, book) -> None:
    """One A4 page a chapter, Helvetica, lines wrapped at 80 characters (WinAnsi text)."""
    pages = []
    for heading, paragraphs in book:
        lines = [("F2", 16, heading), ("F1", 11, "")]
        for p in paragraphs:
            lines += [("F1", 11, line) for line in textwrap.wrap(p, 80, break_on_hyphens=False)] + [("F1", 11, "")]
        ops, y = ["BT"], 800
        for font, size, line in lines:
            escaped = line.encode("cp1252", "replace").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
            ops.append(f"/{font} {size} Tf 1 0 0 1 60 {y} Tm (".encode() + escaped + b") Tj")
            y -= size + 5
        ops.append("ET")
        pages.append(b"\n".join(o if isinstance(o, bytes) else o.encode() for o in ops))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", None,
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
               f"<< /Title ({TITLE}) /Author ({AUTHOR}) >>".encode()]
    kids = []
    for stream in pages:
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R "
                       b"/F2 4 0 R >> >> /Contents %d 0 R >>" % (len(objects)))
        kids.append(len(objects))
    objects[1] = ("<< /Type /Pages /Kids [" + " ".join(f"{k} 0 R" for k in kids) + f"] /Count {len(kids)} >>").encode()
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 5 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))


WRITERS = {"txt": write_txt, "html": write_html, "fb2": write_fb2, "rtf": write_rtf, "odt": write_odt,
           "docx": write_docx, "pdf": write_pdf}


def make_books(folder: Path) -> dict[str, Path]:
    """moby-dick.FORMAT for every format, in `folder`; MOBI and AZW3 need ebook-convert."""
    book = chapters()
    made = {}
    for kind, write in WRITERS.items():
        made[kind] = folder / f"moby-dick.{kind}"
        write(made[kind], book)
    for kind in ("mobi", "azw3"):
        made[kind] = folder / f"moby-dick.{kind}"
        subprocess.run(["ebook-convert", str(made["html"]), str(made[kind]), "--title", TITLE, "--authors", AUTHOR,
                        "--language", "en"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return made
