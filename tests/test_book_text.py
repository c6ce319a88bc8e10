"""XHTML → spoken paragraphs (epub2audio.book.text)."""

from epub_factory import xhtml
from epub2audio.book.text import Anchor, Block, paragraphs, parse_xhtml, read_blocks


def read(body: str) -> list[str]:
    return paragraphs(xhtml(body))


def test_blocks_and_whitespace():
    assert read("<h1>Title</h1><p>One\n   two\u00a0 three.</p><ul><li>a</li><li>b <em>c</em></li></ul>") == [
        "Title", "One two three.", "a", "b c"]


def test_invisible_characters_removed():
    assert read("<p>in\u00adcred\u00adible wa\u200by\u2060—on\ufeff</p>") == ["incredible way—on"]


def test_unread_elements():
    body = ('<p>Keep.</p><script>var x = 1;</script><style>p {}</style><p hidden="">Hidden.</p>'
            '<div style="color: red; display: none">Gone.</div><p>Picture <img src="a.jpg" alt="A red kite"/>here.</p>'
            '<p>Page<span epub:type="pagebreak" title="12">12</span> turn.</p>'
            '<p>Line<span class="lnum">10</span></p><p class="pagenum">[Pg 7]</p>')
    # the picture's alt is a spoken note after its paragraph (tests/test_content.py has the rules)
    assert read(body) == ["Keep.", "Picture here.", "Image: A red kite.", "Page turn.", "Line"]


def test_note_markers_not_read():
    body = ('<p>A<a epub:type="noteref" href="#n1">1</a> b<a href="notes.html#linknote-3" class="pginternal">3</a>'
            ' c<sup><a href="#f4">[4]</a></sup> d<a href="#x">*</a>.</p>'
            '<aside epub:type="footnote" id="n1"><p>Footnote body.</p></aside>'
            '<p>Note 3 (<a href="ch.html#linknoteref-3">return</a>) text <a href="#r" epub:type="backlink">↩</a></p>')
    assert read(body) == ["A b c d.", "Note 3 text"]


def test_links_that_are_prose_are_read_and_navigation_is_not():
    body = ('<p>See <a href="http://example.com">the site</a> and <a href="ch2.xhtml">chapter two</a>.</p>'
            '<p><a href="ch1.xhtml">Chapter I</a></p><p class="x_link"><a>Agrandir</a></p>')
    assert read(body) == ["See the site and chapter two."]


def test_verse_line_groups_become_one_block_with_pauses():
    body = ('<div class="linegroup"><div>April is the cruellest month, breeding</div>'
            '<div>Lilacs out of the dead land</div><div>Dull roots with spring rain.</div></div>'
            '<blockquote epub:type="z3998:verse"><p><span>May you do good</span><br/>'
            '<span>and not evil.</span></p><p><span>Second stanza</span><br/><span>ends</span></p></blockquote>'
            '<div class="poem"><div class="stanza"><span class="i0">"How doth<br/></span>'
            '<span class="i2">the little crocodile</span></div></div>')
    assert read(body) == [
        "April is the cruellest month, breeding, Lilacs out of the dead land, Dull roots with spring rain.",
        "May you do good, and not evil.",
        "Second stanza, ends",
        '"How doth, the little crocodile',
    ]


def test_drama_table_rows_read_as_sentences():
    body = ('<table><tr><td/><td><i>Enter Bernardo.</i></td></tr>'
            '<tr><td epub:type="z3998:persona">Bernardo</td><td>Who’s there?</td></tr>'
            '<tr><td epub:type="z3998:persona">Francisco</td><td epub:type="z3998:verse"><p>'
            '<span>For this relief much thanks</span><br/><span>And I am sick at heart.</span></p></td></tr>'
            '<tr><td>Oglethorpe</td><td>1732</td></tr></table>')
    assert read(body) == ["Enter Bernardo.", "Bernardo: Who’s there?",
                          "Francisco: For this relief much thanks, And I am sick at heart.", "Oglethorpe, 1732"]


def test_heading_group_is_one_heading_block():
    root = parse_xhtml(xhtml('<hgroup><h3 epub:type="z3998:roman">I</h3><p>The Period</p></hgroup><p>It was.</p>'))
    assert read_blocks(root) == [Block("I. The Period", heading=True), Block("It was.")]


def test_anchors_slice_a_document():
    doc = xhtml('<p>Before.</p><section id="a"><h2>A</h2><p>In a.</p></section>'
                '<p>Still a <span id="b"></span>then b.</p><h2 id="c">C</h2><p>In c.</p>')
    assert paragraphs(doc, start="a", end="c") == ["A", "In a.", "Still a then b."]
    assert paragraphs(doc, end="a") == ["Before."]
    assert paragraphs(doc, start="c") == ["C", "In c."]
    items = read_blocks(parse_xhtml(doc), {"b"})
    assert Anchor("b") in items and items.index(Anchor("b")) == 4


def test_chapter_lines_inside_plain_text_paragraphs():
    root = parse_xhtml(xhtml("<p>第一章\n道可道，非常道。\n第二章\n天下皆知美之為美。</p><p>Chapter 3\nText.</p>"))
    assert read_blocks(root) == [Block("第一章", True), Block("道可道，非常道。"), Block("第二章", True),
                                 Block("天下皆知美之為美。"), Block("Chapter 3", True), Block("Text.")]


def test_gutenberg_header_box_and_broken_markup():
    assert read('<div class="pgmonospaced pgheader">The Project Gutenberg EBook</div><p>Story.</p>') == ["Story."]
    # Not well-formed XML: the lenient parser still reads it.
    assert paragraphs(b"<html><body><p>One<p>Two &nbsp; three</body></html>") == ["One", "Two three"]


def test_a_blank_line_of_two_line_breaks_ends_a_paragraph_but_not_a_heading():
    """<br/><br/> is a paragraph break, as a blank line is in a text file (Linear Algebra's rights
    line atop each section, then the section's first paragraph, in one <p>); one <br/> is a line."""
    body = ("<h1>Part One<br/><br/>The Storm</h1>"
            "<p>From the first edition.<br/>Version 2.<br/> <br/>The rain fell on the roofs.</p>"
            "<p>One line<br/>and the next.</p>")
    assert read(body) == ["Part One The Storm", "From the first edition. Version 2.", "The rain fell on the roofs.",
                        "One line and the next."]
