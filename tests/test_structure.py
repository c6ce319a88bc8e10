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
            " words\n  here。</p><p>第一行<br/>第二行</p><p>第一回 甄士隱</p><p>한국\n어</p>")
    doc = xhtml(body).replace("<html ", '<html xml:lang="zh" ')
    b = load_book(make_epub(tmp_path, {"a.xhtml": doc}, nav=[("一", "a.xhtml")]))
    (only,) = b.chapters
    assert only.paragraphs == ["甄士隱夢幻識通靈，賈雨村風塵懷閨秀。かなカナ中文 and English words here。",
                               # a <br> and a space on one line are kept; Hangul is written with spaces
                               "第一行 第二行", "第一回 甄士隱", "한국 어"]
    text = only.paragraphs[0]
    assert [text[a:z] for a, z, _ in only.languages[0]] == [
        "甄士隱夢幻識通靈，賈雨村風塵懷閨秀。", "かなカナ", "中文 and English words here。"]
    assert [tag for _, _, tag in only.languages[0]] == ["zh", "ja", "zh"]


def novel(marker_html):
    """Three spine files, one TOC entry (the book) pointing at the first."""
    return {f"c{n}.xhtml": xhtml("".join(marker_html(n * 2 + k) for k in (1, 2)), title="紅樓夢") for n in range(3)}


def test_one_toc_entry_over_a_novel_is_split_at_its_chapter_markers(tmp_path):
    numerals = "〇一二三四五六七"

    def chapter_html(k):
        return (f"<p>第{numerals[k]}回　回目{numerals[k]}</p>"
                f"<p>正文{numerals[k]}的第一行，\n   第二行。</p>")

    docs = novel(chapter_html)
    docs["c0.xhtml"] = docs["c0.xhtml"].replace("<body>", "<body><p>序言。</p>")
    b = load_book(make_epub(tmp_path, docs, nav=[("紅樓夢", "c0.xhtml")]))
    assert [(c.title, c.paragraphs) for c in b.chapters] == [("紅樓夢", ["序言。"])] + [
        (f"第{numerals[k]}回 回目{numerals[k]}", [f"第{numerals[k]}回 回目{numerals[k]}", f"正文{numerals[k]}的第一行，第二行。"])
        for k in range(1, 7)]
    assert [c.sources for c in b.chapters[:3]] == [["c0.xhtml"], ["c0.xhtml"], ["c0.xhtml"]]
    assert b.chapters[3].sources == ["c1.xhtml"]


def test_one_toc_entry_over_many_files_is_split_at_h1_to_h3_headings(tmp_path):
    def chapter_html(k):
        return f"<h2>Chapter {k}</h2><h4>A scene</h4><p>Text {k}.</p>"

    b = load_book(make_epub(tmp_path, novel(chapter_html), nav=[("The Book", "c0.xhtml")]))
    assert [(c.title, c.paragraphs) for c in b.chapters] == [
        (f"Chapter {k}", [f"Chapter {k}", "A scene", f"Text {k}."]) for k in range(1, 7)]


def test_no_toc_and_no_headings_is_split_by_spine_file(tmp_path):
    docs = {"a.xhtml": xhtml("<p>One.</p>", title="Same"), "b.xhtml": xhtml("<p>Two.</p>", title="Same"),
            "c.xhtml": xhtml("<p>Three.</p>", title="Other")}
    b = load_book(make_epub(tmp_path, docs, ncx=[]))
    assert [(c.title, c.paragraphs, c.sources) for c in b.chapters] == [
        ("Same (1)", ["One."], ["a.xhtml"]), ("Same (2)", ["Two."], ["b.xhtml"]), ("Other", ["Three."], ["c.xhtml"])]


def test_a_usable_toc_is_not_split(tmp_path):
    # One entry over one file with h1 sections (an excerpt); markers inside a chapter that holds
    # less than half the book; a sentence that begins "Chapter four" is prose, not a marker.
    one = {"a.xhtml": xhtml("<h1>Part</h1><p>Intro.</p><h1>Section</h1><p>More.</p>")}
    b = load_book(make_epub(tmp_path, one, nav=[("Only", "a.xhtml")]))
    assert [(c.title, c.paragraphs) for c in b.chapters] == [("Only", ["Part", "Intro.", "Section", "More."])]
    long_text = "Long text. " * 40
    docs = {"a.xhtml": xhtml("<p>Chapter I</p><p>x.</p><p>Chapter II</p><p>y.</p>"),
            "b.xhtml": xhtml(f"<p>{long_text}</p><p>Chapter four was written in a hurry, as the author"
                             " says in her preface to this edition of the book.</p>")}
    b = load_book(make_epub(tmp_path, docs, nav=[("A", "a.xhtml"), ("B", "b.xhtml")], name="two.epub"))
    assert [c.title for c in b.chapters] == ["A", "B"]
    assert b.chapters[0].paragraphs == ["Chapter I", "x.", "Chapter II", "y."]


# -- Margin notes and Gutenberg EPUB 2 footnotes under --notes ------------------------------------

CANTO = (
    "<h2>CANTO I</h2>"
    '<div class="poem"><div class="stanza">'
    '<span class="sidenote">The poet invokes the Muse.</span>'
    '<span>Sing, Muse, the wrath<a id="FNanchor_1" href="#Footnote_1" class="fnanchor">[1]</a></span><br/>'
    '<span>of Achilles</span></div><p class="sidenote">Of the Muse.</p></div>'
    '<div class="sidenote-right">He begins the tale.</div>'
    '<p>Prose paragraph.<a id="FNanchor_2" href="#Footnote_2" class="fnanchor">[2]</a> '
    "<aside><p>A gloss in the margin.</p></aside>Goes on.</p>"
    '<aside epub:type="sidebar"><p>Sidebar text.</p></aside>'
    '<p>More.<a id="r3" href="notes.xhtml#n3">3</a></p>'
    # Gutenberg's footnotes at the chapter's end: each label links back to its reference
    '<div class="footnote"><p><a id="Footnote_1" href="#FNanchor_1" class="label">[1]</a> Wrath: menis.</p>'
    "<p>A second line.</p></div>"
    '<div class="footnote"><p><a id="Footnote_2" href="#FNanchor_2" class="label">[2]</a> Prose note.</p></div>'
)
NOTES = '<h2>NOTES</h2><p><a id="n3" href="canto.xhtml#r3">3</a> Endnote three.</p><p>Unreferenced note.</p>'


def epic(tmp_path, notes):
    path = make_epub(tmp_path, {"canto.xhtml": xhtml(CANTO), "notes.xhtml": xhtml(NOTES)},
                     ncx=[("CANTO I", "canto.xhtml"), ("NOTES", "notes.xhtml")], name=f"{notes}.epub")
    return load_book(path, notes=notes)


def test_margin_notes_and_chapter_end_footnotes_are_not_read_under_skip(tmp_path):
    b = epic(tmp_path, "skip")
    assert chapters(b) == [
        ("CANTO I", ["CANTO I", "Sing, Muse, the wrath, of Achilles", "Prose paragraph. Goes on.", "Sidebar text.",
                     "More."], ["heading", "text", "text", "text", "text"]),
        # a notes section of its own is read as it is
        ("NOTES", ["NOTES", "Endnote three.", "Unreferenced note."], ["heading", "text", "text"]),
    ]
    assert [(s.title, s.reason, s.chars, s.evidence) for s in b.skipped] == [
        ("Footnotes", "footnotes where they stand (--notes skip)",
         len("Wrath: menis.") + len("A second line.") + len("Prose note."), "structure"),
        ("4 margin notes", "margin notes (--notes skip)", len("The poet invokes the Muse.") + len("Of the Muse.")
         + len("He begins the tale.") + len("A gloss in the margin."), "structure"),
    ]


def test_margin_notes_and_footnotes_are_read_inline_where_they_stand(tmp_path):
    b = epic(tmp_path, "inline")
    assert chapters(b) == [
        ("CANTO I", ["CANTO I", "Sing, Muse, the wrath, of Achilles", "Note: Wrath: menis. A second line.",
                     "Note: The poet invokes the Muse.", "Note: Of the Muse.", "Prose paragraph. Goes on.",
                     "Note: Prose note.", "Note: He begins the tale.", "Note: A gloss in the margin.", "Sidebar text.",
                     "More.", "Note: Endnote three."],
         ["heading", "text", "note", "note", "note", "text", "note", "note", "note", "text", "text", "note"]),
        ("NOTES", ["NOTES", "Unreferenced note."], ["heading", "text"]),
    ]
    assert b.skipped == []


def test_margin_notes_and_footnotes_are_read_at_the_chapter_end(tmp_path):
    b = epic(tmp_path, "chapter-end")
    assert chapters(b)[0] == (
        "CANTO I", ["CANTO I", "Sing, Muse, the wrath, of Achilles", "Prose paragraph. Goes on.", "Sidebar text.",
                    "More.", "Notes for this chapter.", "Note 1: Wrath: menis. A second line.",
                    "Note 2: The poet invokes the Muse.", "Note 3: Of the Muse.", "Note 4: Prose note.",
                    "Note 5: He begins the tale.", "Note 6: A gloss in the margin.", "Note 7: Endnote three."],
        ["heading", "text", "text", "text", "text", "heading"] + ["note"] * 7)
    assert b.skipped == []


def test_vingt_mille_lieues_footnotes_follow_the_notes_policy(corpus):
    path = corpus / "vingt-mille-lieues-sous-les-mers-fr-epub2-ncx.epub"
    note = "Environ 106 mètres. Le pied anglais n'est que de 30,40 centimètres."
    first = "CHAPITRE PREMIER UN ÉCUEIL FUYANT."
    skipped = load_book(path)
    text = next(c for c in skipped.chapters if c.title == first).paragraphs
    assert note not in text and len(text) == 31
    assert [(s.title, s.chars) for s in skipped.skipped if s.reason.startswith("footnotes")] == [("Footnotes", 508)]
    inline = load_book(path, notes="inline")
    text = next(c for c in inline.chapters if c.title == first).paragraphs
    # the note's label links back to its reference: that backlink is not a note of its own, so the
    # paragraph it points at stays where it is (it used to be taken out, with two whole chapters)
    assert text[:2] == ["CHAPITRE PREMIER", "UN ÉCUEIL FUYANT."] and f"Note: {note}" in text
    assert len(inline.chapters) == len(skipped.chapters)


def test_notes_in_the_flow_are_counted_when_not_read(tmp_path):
    body = ('<div epub:type="z3998:poem"><p><span>A line<a epub:type="noteref" href="#n1">1</a></span><br/>'
            '<span>and another.</span><aside epub:type="footnote" id="n1"><p>A note in a stanza.</p></aside></p></div>'
            '<p>Prose.</p><aside epub:type="footnote" id="n2"><p>No reference points here.</p></aside>')
    orphan = ("Notes with no reference", len("No reference points here."))
    for notes, paragraphs, skipped in [
        ("skip", ["A line, and another.", "Prose."], [("Footnotes", len("A note in a stanza.")), orphan]),
        ("inline", ["A line, and another.", "Note: A note in a stanza.", "Prose."], [orphan]),
    ]:
        b = load_book(make_epub(tmp_path, {"a.xhtml": xhtml(body)}, nav=[("One", "a.xhtml")], name=f"{notes}.epub"),
                      notes=notes)
        assert b.chapters[0].paragraphs == paragraphs
        assert [(s.title, s.chars) for s in b.skipped] == skipped


def test_a_footnotes_heading_goes_with_the_footnotes(tmp_path):
    body = ('<h2>CHAPTER I</h2><p>Text<a id="FNanchor_1" href="#Footnote_1" class="fnanchor">[1]</a>.</p>'
            '<div class="footnotes"><h3>FOOTNOTES:</h3><div class="footnote"><p>'
            '<a id="Footnote_1" href="#FNanchor_1" class="label">[1]</a> The note.</p></div></div>')
    path = make_epub(tmp_path, {"a.xhtml": xhtml(body)}, ncx=[("CHAPTER I", "a.xhtml")])
    read = {notes: load_book(path, notes=notes) for notes in ("skip", "inline", "chapter-end")}
    assert read["skip"].chapters[0].paragraphs == ["CHAPTER I", "Text."]
    assert [(s.title, s.chars) for s in read["skip"].skipped] == [("Footnotes", len("The note."))]
    assert read["inline"].chapters[0].paragraphs == ["CHAPTER I", "Text.", "Note: The note."]
    assert read["chapter-end"].chapters[0].paragraphs == ["CHAPTER I", "Text.", "Notes for this chapter.",
                                                          "Note 1: The note."]


def test_one_chapter_holding_chapter_markers_is_split_at_them(tmp_path):
    # one spine file, two TOC entries; the second holds most of the book and its chapter lines
    body = ("<h1>Vorwort</h1><p>Kurz.</p>"
            '<div id="main"><p>Kapitel I</p><p>Erster Text, lang genug.</p><p>Kapitel II. Die Reise</p>'
            "<p>Zweiter Text, lang genug.</p><p>Kapitel III</p><p>Dritter Text, lang genug.</p></div>")
    b = load_book(make_epub(tmp_path, {"a.xhtml": xhtml(body)}, nav=[("Vorwort", "a.xhtml"), ("Roman", "a.xhtml#main")]))
    assert [(c.title, c.paragraphs) for c in b.chapters] == [
        ("Vorwort", ["Vorwort", "Kurz."]),
        ("Kapitel I", ["Kapitel I", "Erster Text, lang genug."]),
        ("Kapitel II. Die Reise", ["Kapitel II. Die Reise", "Zweiter Text, lang genug."]),
        ("Kapitel III", ["Kapitel III", "Dritter Text, lang genug."]),
    ]


def test_an_aside_that_is_a_box_of_content_is_read(tmp_path):
    body = ('<p>Text.</p><aside data-type="sidebar"><p>HTMLBook sidebar.</p></aside>'
            '<aside class="pullquote"><p>Pulled quote.</p></aside>'
            "<aside><h3>Box title</h3><p>Box text.</p></aside>"
            f"<aside><p>{'Long aside. ' * 60}</p></aside>"
            "<aside><p>A gloss.</p></aside>")
    b = load_book(make_epub(tmp_path, {"a.xhtml": xhtml(body)}, nav=[("One", "a.xhtml")]))
    assert b.chapters[0].paragraphs == ["Text.", "HTMLBook sidebar.", "Pulled quote.", "Box title", "Box text.",
                                        ("Long aside. " * 60).strip()]
    assert [(s.title, s.chars) for s in b.skipped] == [("1 margin note", len("A gloss."))]


def test_notes_whose_reference_is_not_read_are_counted(tmp_path):
    docs = {"legal.xhtml": xhtml('<section epub:type="copyright-page"><p>Rights<a epub:type="noteref" '
                                 'href="notes.xhtml#n1">1</a>.</p></section>'),
            "ch.xhtml": xhtml('<h2>One</h2><p>Text<a epub:type="noteref" href="notes.xhtml#n2">2</a>.</p>'),
            "notes.xhtml": xhtml('<section epub:type="endnotes"><h2>Notes</h2><ol>'
                                 '<li id="n1" epub:type="endnote"><p>Legal note.</p></li>'
                                 '<li id="n2" epub:type="endnote"><p>Story note.</p></li></ol></section>')}
    nav = [("Copyright", "legal.xhtml"), ("One", "ch.xhtml"), ("Notes", "notes.xhtml")]
    b = load_book(make_epub(tmp_path, docs, nav=nav), notes="inline")
    assert [(c.title, c.paragraphs) for c in b.chapters] == [("One", ["One", "Text.", "Note: Story note."])]
    assert [(s.title, s.reason, s.chars) for s in b.skipped] == [
        ("Copyright", "copyright page (epub:type)", len("Rights.")), ("Notes", "notes (read inline)", len("Notes")),
        ("Notes not placed", "notes whose reference is not read", len("Legal note."))]


def test_parts_of_a_poem_in_an_article_inside_a_chapter_section(tmp_path):
    # Standard Ebooks' markup for a poem in parts inside a cluster ("By Blue Ontario's Shore")
    body = ('<section id="shore" epub:type="chapter"><h2 epub:type="title">By Blue Ontario’s Shore</h2>'
            '<article id="shore-article" epub:type="z3998:poem">'
            '<section id="shore-1" epub:type="part"><h3 epub:type="z3998:ordinal">1</h3>'
            "<p><span>By blue Ontario’s shore,</span><br/><span>As I mused</span></p></section>"
            '<section id="shore-2" epub:type="part"><h3 epub:type="z3998:ordinal">2</h3>'
            "<p><span>A Phantom gigantic</span></p><p><span>Chant me the poem</span></p></section></article></section>")
    nav = [("By Blue Ontario’s Shore", "s.xhtml", [("1", "s.xhtml#shore-1"), ("2", "s.xhtml#shore-2")])]
    b = load_book(make_epub(tmp_path, {"s.xhtml": xhtml(body)}, nav=nav))
    assert [(c.title, c.paragraphs) for c in b.chapters] == [
        ("By Blue Ontario’s Shore", ["By Blue Ontario’s Shore"]),
        ("1", ["1", "By blue Ontario’s shore, As I mused"]),
        ("2", ["2", "A Phantom gigantic", "Chant me the poem"]),
    ]


def test_a_long_text_with_nothing_to_cut_at_is_cut_into_parts(tmp_path):
    paragraph = "Word " * 2000  # 10,000 characters
    body = "".join(f"<p>{n} {paragraph}</p>" for n in range(25))  # 250,000 characters: three parts
    b = load_book(make_epub(tmp_path, {"a.xhtml": xhtml(body, title="Long")}, ncx=[]))
    assert [c.title for c in b.chapters] == ["Long (1)", "Long (2)", "Long (3)"]
    assert [len(c.paragraphs) for c in b.chapters] == [9, 8, 8]
    assert [c.paragraphs[0].split()[0] for c in b.chapters] == ["0", "9", "17"]


def test_a_notes_section_holding_most_of_the_book_is_never_cut_at_its_chapter_lines(tmp_path):
    # The Art of War: its endnotes (epub:type="endnotes", 234K) name the chapter of each note,
    # "Chapter III “If you know the enemy …”"; they were cut into 43 chapters.
    notes = "".join(f'<li id="n{i}" epub:type="endnote"><p>Chapter {r} “A saying …”</p><p>{"A long note. " * 30}</p></li>'
                    for i, r in enumerate(["I", "VII", "III", "V", "III", "I"]))
    docs = {"a.xhtml": xhtml("<h2>I: Laying Plans</h2><p>Sun Tzŭ said: The art of war is of vital importance.</p>"),
            "b.xhtml": xhtml("<h2>II: Waging War</h2><p>In the operations of war, where there are chariots.</p>"),
            "n.xhtml": xhtml(f'<section epub:type="endnotes"><h2>Endnotes</h2><ol>{notes}</ol></section>')}
    nav = [("I: Laying Plans", "a.xhtml"), ("II: Waging War", "b.xhtml"), ("Endnotes", "n.xhtml")]
    b = load_book(make_epub(tmp_path, docs, nav=nav))
    assert [c.title for c in b.chapters] == ["I: Laying Plans", "II: Waging War", "Endnotes"]
    # Without its markup it is a chapter like the Vorwort test's: cut at its lines.
    docs["n.xhtml"] = docs["n.xhtml"].replace(' epub:type="endnotes"', "")
    b = load_book(make_epub(tmp_path, docs, nav=nav, name="untyped.epub"))
    assert [c.title for c in b.chapters][:4] == ["I: Laying Plans", "II: Waging War", "Chapter I “A saying …”",
                                                 "Chapter VII “A saying …”"]


def test_cjk_chapter_markers_written_with_the_circle_zero_and_the_credit_before_them(tmp_path):
    # 三國志演義 (Gutenberg, no TOC): "Produced by Jian-Lun Huang", then 第一回 … 第一百回 … 第一二○回.
    numbers = ["一", "二", "一百", "一○一", "一二○"]
    body = "<p>Produced by Jian-Lun Huang</p>" + "".join(
        f"<p>第{n}回：回目{n}</p><p>{'話說天下大勢，分久必合，合久必分。' * 40}</p>" for n in numbers)
    b = load_book(make_epub(tmp_path, {"a.xhtml": xhtml(body)}, ncx=[], title="三國志演義"))
    assert [c.title for c in b.chapters] == [f"第{n}回：回目{n}" for n in numbers]
    assert [(s.title, s.reason, s.chars) for s in b.skipped] == [
        ("Produced by Jian-Lun Huang", "production credits (text)", 26)]


def test_the_title_block_before_the_first_chapter_line_is_a_title_page(tmp_path):
    # calibre's Moby-Dick from plain text: no TOC but its cover, the title block, then "CHAPTER N." lines.
    chapters = "".join(f"<p>CHAPTER {n}. {t}</p><p>{'Call me Ishmael. Some years ago I went to sea. ' * 40}</p>"
                       for n, t in [(1, "Loomings."), (2, "The Carpet-Bag."), (3, "The Spouter-Inn.")])
    body = "<p>MOBY-DICK;</p><p>or, THE WHALE.</p><p>By Herman Melville</p>" + chapters
    meta = "<dc:creator>Herman Melville</dc:creator>"
    b = load_book(make_epub(tmp_path, {"a.xhtml": xhtml(body)}, ncx=[], title="Moby-Dick", metadata=meta))
    assert [c.title for c in b.chapters] == ["CHAPTER 1. Loomings.", "CHAPTER 2. The Carpet-Bag.", "CHAPTER 3. The Spouter-Inn."]
    assert [(s.title, s.reason) for s in b.skipped] == [("MOBY-DICK;", "title page (text)")]
    # A first paragraph of prose before the first chapter line is read, under the book's title.
    b = load_book(make_epub(tmp_path, {"a.xhtml": xhtml("<p>An opening remark, made in prose. It runs on.</p>" + chapters)},
                            ncx=[], title="Moby-Dick", metadata=meta, name="prose.epub"))
    assert [c.title for c in b.chapters][0] == "Moby-Dick" and b.skipped == []
