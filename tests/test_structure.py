"""Structure from the markup (issue 20): poems in numbered parts, books without a usable TOC,
line wraps inside CJK text, and margin notes / Gutenberg footnotes under --notes."""

from epub2audio.book.epub import load_book
from epub_factory import make_epub, xhtml

POEM = (
    '<section id="song" epub:type="chapter z3998:poem"><h2 epub:type="title">Song of Myself</h2>'
    '<section id="song-1" epub:type="part"><h3 epub:type="z3998:ordinal">1</h3>'
    "<p><span>I celebrate myself, and sing myself,</span><br/><span>And what I assume you shall assume</span></p>"
    "<p><span>I loafe and invite my soul</span><br/><span>I lean and loafe at my ease.</span></p></section>"
    '<section id="song-2" epub:type="part"><h3 epub:type="z3998:ordinal">2</h3>'
    "<p><span>Houses and rooms are full of perfumes</span><br/><span>I breathe the fragrance.</span></p></section>"
    # a plain <section> with an id the TOC points at, no epub:type
    '<section id="song-3"><h3>3</h3><p><span>I have heard</span><br/><span>what the talkers were talking.</span></p>'
    "</section></section>"
)


def chapters(book):
    return [(c.title, c.paragraphs, c.kinds) for c in book.chapters]


def test_parts_of_a_poem_are_chapters_under_their_toc_entries(tmp_path):
    nav = [("Song of Myself", "song.xhtml", [("1", "song.xhtml#song-1"), ("2", "song.xhtml#song-2"),
                                               ("3", "song.xhtml#song-3")])]
    b = load_book(make_epub(tmp_path, {"song.xhtml": xhtml(POEM)}, nav=nav))
    assert chapters(b) == [
        ("Song of Myself", ["Song of Myself"], ["heading"]),
        ("1", ["1", "I celebrate myself, and sing myself, And what I assume you shall assume",
               "I loafe and invite my soul, I lean and loafe at my ease."], ["heading", "text", "text"]),
        ("2", ["2", "Houses and rooms are full of perfumes, I breathe the fragrance."], ["heading", "text"]),
        ("3", ["3", "I have heard, what the talkers were talking."], ["heading", "text"]),
    ]
    assert b.skipped == []


def test_poem_in_parts_without_toc_entries_keeps_stanzas_and_headings(tmp_path):
    b = load_book(make_epub(tmp_path, {"song.xhtml": xhtml(POEM)}, nav=[("Song of Myself", "song.xhtml")]))
    assert chapters(b) == [
        ("Song of Myself", ["Song of Myself", "1", "I celebrate myself, and sing myself, And what I assume you shall assume",
                            "I loafe and invite my soul, I lean and loafe at my ease.", "2",
                            "Houses and rooms are full of perfumes, I breathe the fragrance.", "3",
                            "I have heard, what the talkers were talking."],
         ["heading", "heading", "text", "text", "heading", "text", "heading", "text"])]


def test_source_line_wraps_inside_cjk_text_are_not_word_breaks(tmp_path):
    body = ('<p>甄士隱夢幻識通靈，\n    賈雨村風塵懷閨秀。<span xml:lang="ja">かな\n  カナ</span>\n  中文 and\n  English'
            " words\n  here。</p><p>第一行<br/>第二行</p><p>한국 어</p>")
    doc = xhtml(body).replace("<html ", '<html xml:lang="zh" ')
    b = load_book(make_epub(tmp_path, {"a.xhtml": doc}, nav=[("一", "a.xhtml")]))
    (only,) = b.chapters
    assert only.paragraphs == ["甄士隱夢幻識通靈，賈雨村風塵懷閨秀。かなカナ中文 and English words here。",
                               "第一行 第二行", "한국 어"]  # a <br> is kept; Hangul is written with spaces
    text = only.paragraphs[0]
    assert [text[a:z] for a, z, _ in only.languages[0]] == [
        "甄士隱夢幻識通靈，賈雨村風塵懷閨秀。", "かなカナ", "中文 and English words here。"]
    assert [tag for _, _, tag in only.languages[0]] == ["zh", "ja", "zh"]
