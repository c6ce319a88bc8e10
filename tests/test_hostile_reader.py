"""Hostile EPUBs the reader must survive: absurd nesting and length, invalid character references,
broken TOCs and packages, entity bombs. Each either loads (with a warning naming what was lost)
or is refused in one line with exit code 2 — never a traceback or "internal error"."""

import pytest

from cli_run import epub2audio
from epub2audio.book.epub import load_book
from epub2audio.book.model import Chapter
from epub2audio.book.segment import MAX_SEGMENT_CHARS, segment_chapter
from epub2audio.errors import InputError
from epub_factory import edit_epub, make_epub, xhtml

TWO = {"a.xhtml": xhtml("<h1>One</h1><p>First text.</p>"), "b.xhtml": xhtml("<h1>Two</h1><p>Second text.</p>")}


def nested(depth: int, tag: str = "div") -> str:
    return (f"<{tag}>" * depth + "<p>Deep one.</p><p>Deep two.</p>" + f"</{tag}>" * depth)


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deeply_nested_divs_are_read_in_order(tmp_path, depth):
    path = make_epub(tmp_path, {"a.xhtml": xhtml(f"<h1>One</h1>{nested(depth)}<p>After.</p>")},
                     nav=[("One", "a.xhtml")])
    book = load_book(path)
    assert [c.paragraphs for c in book.chapters] == [["One", "Deep one.", "Deep two.", "After."]]
    # Past libxml2's 2048 levels the flattening parser reads it, and says so.
    assert [w.split(":")[0] for w in book.warnings] == (["a.xhtml"] if depth > 2048 else [])
    run = epub2audio(path, "--list-chapters")
    assert run.code == 0 and "Deep" not in run.stderr, run.stderr


def test_deep_spans_verse_and_notes(tmp_path):
    spans = "<span>" * 3000 + "deep words" + "</span>" * 3000
    verse = '<div class="poem">' * 1500 + "<p>A line</p>" + "</div>" * 1500
    note = ('<p>See<a epub:type="noteref" href="#n1">1</a>.</p>'
            f'<aside epub:type="footnote" id="n1">{"<div>" * 1800}Deep note.{"</div>" * 1800}</aside>')
    path = make_epub(tmp_path, {"a.xhtml": xhtml(f"<h1>One</h1><p>{spans}</p>{verse}{note}")},
                     nav=[("One", "a.xhtml")])
    assert load_book(path, notes="inline").chapters[0].paragraphs == [
        "One", "deep words", "A line", "See.", "Note: Deep note."]


def test_deeply_nested_nav_and_ncx(tmp_path):
    depth = 3000
    nav = ('<nav epub:type="toc">' + "<ol><li><a href='a.xhtml'>One</a>" * depth
           + "<ol><li><a href='b.xhtml'>Two</a></li></ol>" + "</li></ol>" * depth + "</nav>")
    path = make_epub(tmp_path, dict(TWO), extra_items={"nav.xhtml": (xhtml(nav).encode(), "application/xhtml+xml", "nav")})
    book = load_book(path)  # read flattened: the innermost entry is lost, the text is all there
    assert [p for c in book.chapters for p in c.paragraphs] == ["One", "First text.", "Two", "Second text."]
    assert book.warnings == ["nav.xhtml: elements nested too deep for the XML parser; read with nesting below 256 "
                             "levels flattened"]
    point = '<navPoint><navLabel><text>One</text></navLabel><content src="a.xhtml"/>'
    ncx = ('<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
           f"<navMap>{point * depth}{'</navPoint>' * depth}</navMap></ncx>")
    path = make_epub(tmp_path, dict(TWO), extra_items={"toc.ncx": (ncx.encode(), "application/x-dtbncx+xml", "")})
    book = load_book(path)  # libxml2 stops at 2048 levels: what it read is used, the loss reported
    assert [p for c in book.chapters for p in c.paragraphs] == ["One", "First text.", "Two", "Second text."]
    assert book.warnings == ["toc.ncx: only partly read (Excessive depth in document: 2048, use XML_PARSE_HUGE option)"]


def test_five_megabyte_paragraph_is_cut_into_capped_segments_that_cover_it():
    words = ("alpha", "be", "gamma", "delta", "epsilonzetaeta", "x")
    text = " ".join(words[i % 6] for i in range(900_000))[:5_000_000]
    text += " " + "y" * 1000  # a "word" longer than the cap: cut hard
    segments = segment_chapter(0, Chapter("Long", [text]))
    assert all(0 < len(s.text) <= MAX_SEGMENT_CHARS for s in segments)
    position = 0
    for segment in segments:  # in order, nothing left out but the spaces between them
        found = text.index(segment.text, position)
        assert text[position:found].strip() == ""
        position = found + len(segment.text)
    assert position == len(text)
    assert len(segments) < len(text) / (MAX_SEGMENT_CHARS / 3)  # cut at word boundaries, not tiny


def test_invalid_character_references_drop_the_character_not_the_book(tmp_path):
    docs = dict(TWO, **{"a.xhtml": xhtml("<h1>One</h1><p>Bad&#xD800; char&#0;, far&#x110000; &#65;ok.</p>")})
    path = make_epub(tmp_path, docs, nav=[("One", "a.xhtml"), ("Two", "b.xhtml")])
    book = load_book(path)
    assert [c.paragraphs for c in book.chapters] == [["One", "Bad char, far Aok."], ["Two", "Second text."]]
    assert book.warnings == ["a.xhtml: 3 invalid character reference(s) dropped (&#xD800;, &#0;, &#x110000;)"]


def test_nav_without_its_list_falls_back_to_the_ncx_with_a_warning(tmp_path):
    path = make_epub(tmp_path, dict(TWO), nav=[("One", "a.xhtml")], ncx=[("Uno", "a.xhtml"), ("Dos", "b.xhtml")])
    edit_epub(path, "OEBPS/nav.xhtml", '<ol><li><a href="a.xhtml">One</a></li></ol>', "")
    book = load_book(path)
    assert [c.title for c in book.chapters] == ["Uno", "Dos"]
    assert book.warnings == ["nav.xhtml: the nav has no list; chapters come from the NCX or the headings"]


def test_nav_without_toc_nav_and_ncx_without_navmap_fall_back_to_headings(tmp_path):
    path = make_epub(tmp_path, dict(TWO), nav=[("One", "a.xhtml")], ncx=[("Uno", "a.xhtml")])
    edit_epub(path, "OEBPS/nav.xhtml", 'epub:type="toc"', 'epub:type="landmarks"')
    edit_epub(path, "OEBPS/toc.ncx", "navMap", "navList")
    book = load_book(path)
    assert [c.title for c in book.chapters] == ["One", "Two"]
    assert book.warnings == [
        'nav.xhtml: no <nav epub:type="toc">; chapters come from the NCX or the headings',
        "toc.ncx: the NCX has no navMap; chapters come from the headings"]
    run = epub2audio(path, "--list-chapters", "--progress", "json")
    assert run.code == 0 and run.events()[0]["warnings"] == book.warnings


def test_ncx_without_navmap_and_navpoints_without_labels(tmp_path):
    path = make_epub(tmp_path, dict(TWO), ncx=[("Uno", "a.xhtml"), ("Dos", "b.xhtml")])
    edit_epub(path, "OEBPS/toc.ncx", "<navLabel><text>Uno</text></navLabel>", "<navLabel/>")
    assert [c.title for c in load_book(path).chapters] == ["Untitled", "Dos"]


@pytest.mark.parametrize("old, new, message", [
    ("<metadata", "<metadatum", "OEBPS/content.opf: the package has no <metadata>"),
    ("<manifest>", "<manifesto>", "OEBPS/content.opf: the package has no <manifest>"),
    ('href="b.xhtml"', "", "OEBPS/content.opf: manifest item 'd1' has no href"),
])
def test_broken_package_is_refused_in_one_line(tmp_path, old, new, message):
    path = make_epub(tmp_path, dict(TWO), nav=[("One", "a.xhtml")])
    if old == "<manifest>":
        new_text = new
        edit_epub(path, "OEBPS/content.opf", "</manifest>", "</manifesto>")
        edit_epub(path, "OEBPS/content.opf", old, new_text)
    else:
        edit_epub(path, "OEBPS/content.opf", old, new)
        if old == "<metadata":
            edit_epub(path, "OEBPS/content.opf", "</metadata>", "</metadatum>")
    with pytest.raises(InputError) as err:
        load_book(path)
    assert str(err.value) == f"book.epub: not a valid EPUB ({message})"
    run = epub2audio(path, "--list-chapters")
    assert (run.code, run.stderr) == (2, f"epub2audio: error: book.epub: not a valid EPUB ({message})\n")


def test_spine_toc_naming_no_item_and_spine_item_without_manifest_entry(tmp_path):
    path = make_epub(tmp_path, dict(TWO), ncx=[("Uno", "a.xhtml"), ("Dos", "b.xhtml")])
    edit_epub(path, "OEBPS/content.opf", '<spine toc="ncx">', '<spine toc="nowhere"><itemref idref="ghost"/>')
    book = load_book(path)
    assert [c.title for c in book.chapters] == ["Uno", "Dos"]
    assert book.warnings == ["spine item 'ghost': no such item in the manifest; not read"]
    run = epub2audio(path, "--list-chapters")
    assert run.code == 0
    assert run.stdout.endswith("Warnings:\n  - spine item 'ghost': no such item in the manifest; not read\n")


def test_billion_laughs_is_reported_and_bounded(tmp_path):
    entities = '<!ENTITY a "aaaaaaaaaa">' + "".join(
        f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in zip("abcdefgh", "bcdefghi"))
    bomb = ('<?xml version="1.0"?><!DOCTYPE html [' + entities + ']><html xmlns="http://www.w3.org/1999/xhtml">'
            "<head><title>x</title></head><body><h1>Laughs</h1><p>Before &i; after.</p><p>Lost.</p></body></html>")
    path = make_epub(tmp_path, dict(TWO, **{"a.xhtml": bomb}), nav=[("Laughs", "a.xhtml"), ("Two", "b.xhtml")])
    book = load_book(path)
    assert book.chapters[0].char_count < 100  # nothing expanded
    (warning,) = book.warnings
    assert warning.startswith("a.xhtml: only partly read (") and "entity" in warning
    run = epub2audio(path, "--list-chapters")
    assert run.code == 0 and run.stdout.endswith(f"Warnings:\n  - {warning}\n")


def test_note_reference_to_an_empty_fragment_is_ignored(tmp_path):
    doc = xhtml('<h1>One</h1><p>See<a epub:type="noteref" href="#">1</a> and<a epub:type="noteref" '
                'href="#n1">2</a>.</p><aside epub:type="footnote" id="n1"><p>The note.</p></aside>')
    path = make_epub(tmp_path, {"a.xhtml": doc}, nav=[("One", "a.xhtml")])
    assert load_book(path, notes="inline").chapters[0].paragraphs == ["One", "See and.", "Note: The note."]


def test_svg_cover_with_broken_base64_is_no_cover_not_a_refusal(tmp_path):
    svg = (b'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
           b'<image xlink:href="data:image/png;base64,!!!notbase64"/></svg>')
    path = make_epub(tmp_path, dict(TWO), nav=[("One", "a.xhtml"), ("Two", "b.xhtml")],
                     extra_items={"cover.svg": (svg, "image/svg+xml", "cover-image")})
    book = load_book(path)
    assert book.cover is None and len(book.chapters) == 2


def test_comments_and_processing_instructions_in_the_package_are_ignored(tmp_path):
    """Found by bench/fuzz.py (seed 7, input 6226): ebooklib crashed on a comment in <metadata>."""
    book = make_epub(tmp_path, {"c1.xhtml": xhtml("<h1>One</h1><p>Words here.</p>", "One")},
                     nav=[("One", "c1.xhtml")], metadata="<!-- a note --><?pi x?><dc:creator>Ann</dc:creator>")
    loaded = load_book(book)
    assert [c.title for c in loaded.chapters] == ["One"]
    assert loaded.authors == ["Ann"]
