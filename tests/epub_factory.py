"""Build small synthetic EPUBs in a temp folder, for edge cases the real corpus does not cover.

    path = make_epub(tmp_path, docs={"a.xhtml": xhtml("<h1>One</h1><p>Text.</p>")},
                     nav=[("One", "a.xhtml")])

`nav` and `ncx` are lists of (label, href) or (label, href, children); href None makes an unlinked
<span> heading in the nav. `spine` defaults to the docs in order; a name ending in "?nonlinear"
gets linear="no".
"""

from __future__ import annotations

import zipfile
from pathlib import Path

CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""


def xhtml(body: str, title: str = "Doc", body_attrs: str = "") -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
        f"<head><title>{title}</title></head><body{body_attrs}>{body}</body></html>"
    )


def _nav_list(entries) -> str:
    items = []
    for label, href, *rest in entries:
        head = f'<a href="{href}">{label}</a>' if href else f"<span>{label}</span>"
        sub = f"<ol>{_nav_list(rest[0])}</ol>" if rest and rest[0] else ""
        items.append(f"<li>{head}{sub}</li>")
    return "".join(items)


def nav_doc(entries, landmarks: list[tuple[str, str, str]] = ()) -> str:
    marks = "".join(f'<li><a epub:type="{kind}" href="{href}">{label}</a></li>' for kind, href, label in landmarks)
    land = f'<nav epub:type="landmarks"><ol>{marks}</ol></nav>' if landmarks else ""
    return xhtml(f'<nav epub:type="toc"><ol>{_nav_list(entries)}</ol></nav>{land}', "Contents")


def _ncx_points(entries, counter) -> str:
    points = []
    for label, href, *rest in entries:
        counter[0] += 1
        sub = _ncx_points(rest[0], counter) if rest and rest[0] else ""
        points.append(f'<navPoint id="np{counter[0]}"><navLabel><text>{label}</text></navLabel>'
                      f'<content src="{href}"/>{sub}</navPoint>')
    return "".join(points)


def ncx_doc(entries) -> str:
    return ('<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
            f"<head/><docTitle><text>T</text></docTitle><navMap>{_ncx_points(entries, [0])}</navMap></ncx>")


def make_epub(
    folder: Path,
    docs: dict[str, str],
    nav=None,
    ncx=None,
    spine: list[str] | None = None,
    title: str = "Test Book",
    metadata: str = "",
    extra_items: dict[str, tuple[bytes, str, str]] | None = None,
    landmarks=(),
    guide: str = "",
    name: str = "book.epub",
) -> Path:
    """Write an EPUB (3.0 when `nav` is given, else 2.0) and return its path.

    extra_items: file name → (bytes, media type, properties) for images and the like.
    """
    extra_items = extra_items or {}
    spine = spine or list(docs)
    manifest = [f'<item id="d{i}" href="{n}" media-type="application/xhtml+xml"/>' for i, n in enumerate(docs)]
    files = {f"OEBPS/{n}": body for n, body in docs.items()}
    if nav is not None:
        manifest.append('<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>')
        files["OEBPS/nav.xhtml"] = nav_doc(nav, landmarks)
    if ncx is not None:
        manifest.append('<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>')
        files["OEBPS/toc.ncx"] = ncx_doc(ncx)
    for i, (n, (data, media_type, props)) in enumerate(extra_items.items()):
        prop = f' properties="{props}"' if props else ""
        manifest.append(f'<item id="x{i}" href="{n}" media-type="{media_type}"{prop}/>')
        files[f"OEBPS/{n}"] = data
    ids = {n: f"d{i}" for i, n in enumerate(docs)}
    refs = []
    for entry in spine:
        doc, _, flag = entry.partition("?")
        linear = ' linear="no"' if flag == "nonlinear" else ""
        refs.append(f'<itemref idref="{ids[doc]}"{linear}/>')
    version = "3.0" if nav is not None else "2.0"
    toc_attr = ' toc="ncx"' if ncx is not None else ""
    opf = (
        f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="{version}" '
        'unique-identifier="uid"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/" '
        'xmlns:opf="http://www.idpf.org/2007/opf">'
        f'<dc:identifier id="uid">urn:uuid:1234</dc:identifier><dc:title>{title}</dc:title>'
        f"<dc:language>en</dc:language>{metadata}</metadata>"
        f"<manifest>{''.join(manifest)}</manifest><spine{toc_attr}>{''.join(refs)}</spine>{guide}</package>"
    )
    files["OEBPS/content.opf"] = opf
    path = folder / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        zf.writestr("META-INF/container.xml", CONTAINER, zipfile.ZIP_DEFLATED)
        for file_name, content in files.items():
            zf.writestr(file_name, content, zipfile.ZIP_DEFLATED)
    return path


def edit_epub(path: Path, member: str, old: str, new: str) -> Path:
    """Rewrite one file of an EPUB made by make_epub, replacing `old` (which must occur) by `new`."""
    with zipfile.ZipFile(path) as zf:
        files = {info.filename: zf.read(info) for info in zf.infolist()}
    text = files[member].decode("utf-8")
    assert old in text, f"{old!r} not in {member}"
    files[member] = text.replace(old, new).encode("utf-8")
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data, zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED)
    return path


def in_language(path: Path, code: str) -> Path:
    """The factory's book (dc:language en) rewritten to say dc:language `code`."""
    with zipfile.ZipFile(path) as zf:
        (opf,) = [name for name in zf.namelist() if name.endswith(".opf")]
    return edit_epub(path, opf, "<dc:language>en</dc:language>", f"<dc:language>{code}</dc:language>")
