"""--notes skip|inline|chapter-end (from EPUB semantics), scene breaks, --say-titles, and the
convert options that carry them."""

import pytest

from epub2audio.book import Chapter
from epub2audio.book.epub import NOTES_HEADING, load_book
from epub2audio.book.segment import (
    PAUSE_CHAPTER_MS, PAUSE_HEADING_MS, PAUSE_PARAGRAPH_MS, PAUSE_SCENE_BREAK_MS, segment_chapter,
)
from epub2audio.cli import convert_parser
from epub2audio.errors import InputError
from epub2audio.render import ConvertOptions, plan_segments, reading_for
from epub_factory import make_epub, xhtml

HERODOTUS = "herodotus-vol1-split-chapters-footnotes-epub2-ncx.epub"
WASTE_LAND = "the-waste-land-poetry-notes-epub3.epub"
SAND = '"But the number of sand I know'
ORACLE_NOTE = ("{oida d' ego}: oracles often have a word of connection such as {de} or {alla} at the "
               "beginning (cp. ch. 55, 174, etc.), which may indicate that they are part of a larger "
               "connected utterance.")
EZEKIEL, ECCLESIASTES = "Cf. Ezekiel 2:1.", "Cf. Ecclesiastes 12:5."
STONY = "Out of this stony rubbish? Son of man"


@pytest.fixture(scope="module")
def books(corpus):
    cache = {}

    def get(name, notes):
        if (name, notes) not in cache:
            cache[name, notes] = load_book(corpus / name, notes=notes)
        return cache[name, notes]
    return get


def chapter(book, prefix):
    return next(c for c in book.chapters if c.title.startswith(prefix))


def all_text(book):
    return [p for c in book.chapters for p in c.paragraphs]


def notes_of(book):
    return [p for c in book.chapters for i, p in enumerate(c.paragraphs) if c.kind(i) == "note"]


# -- Herodotus: 720 Gutenberg-style cross-file footnotes, "NOTES TO BOOK N" sections ----------------


def test_herodotus_skip_keeps_note_sections_as_chapters_and_never_reads_markers(books):
    book = books(HERODOTUS, "skip")
    titles = [c.title for c in book.chapters]
    assert [t for t in titles if t.startswith("NOTES TO")] == [
        "NOTES TO PREFACE", "NOTES TO BOOK I", "NOTES TO BOOK II", "NOTES TO BOOK III", "NOTES TO BOOK IV."]
    assert not notes_of(book)
    book_one = chapter(book, "BOOK I.")
    i = next(i for i, p in enumerate(book_one.paragraphs) if p.startswith(SAND))
    assert "I know, and the measure" in book_one.paragraphs[i]  # the marker "41" is not read
    assert book_one.paragraphs[i + 1].startswith("48. When the Pythian prophetess")
    notes = chapter(book, "NOTES TO BOOK I")
    assert any(p.endswith("connected utterance.]") and "{oida d' ego}" in p for p in notes.paragraphs)


def test_herodotus_inline_reads_each_note_after_its_paragraph(books):
    book = books(HERODOTUS, "inline")
    book_one = chapter(book, "BOOK I.")
    i = next(i for i, p in enumerate(book_one.paragraphs) if p.startswith(SAND))
    assert book_one.paragraphs[i + 1] == f"Note: {ORACLE_NOTE}"
    assert book_one.kinds[i + 1] == "note"
    assert book_one.paragraphs[i + 2].startswith("48. When the Pythian prophetess")
    notes = notes_of(book)
    assert len(notes) == 721 and all(n.startswith("Note: ") for n in notes)
    # Not read again where they live: sections left with only their heading are skipped.
    assert not any("{oida d' ego}: oracles" in p for p in chapter(book, "NOTES TO BOOK I").paragraphs)
    assert ("NOTES TO PREFACE", "notes (read inline)") in [(s.title, s.reason) for s in book.skipped]
    assert "NOTES TO BOOK IV." not in [c.title for c in book.chapters]
    # The preface's own notes (same file) are read inline too.
    preface = chapter(book, "PREFACE")
    assert sum(k == "note" for k in preface.kinds) == 3


def test_herodotus_chapter_end_reads_the_chapters_notes_at_its_end(books):
    book = books(HERODOTUS, "chapter-end")
    book_one = chapter(book, "BOOK I.")
    i = next(i for i, p in enumerate(book_one.paragraphs) if p.startswith(SAND))
    assert book_one.paragraphs[i + 1].startswith("48. When the Pythian prophetess")
    start = book_one.paragraphs.index(NOTES_HEADING)
    assert book_one.kinds[start] == "heading" and start == len(book_one.paragraphs) - 227
    tail = book_one.paragraphs[start + 1:]
    assert tail[0].startswith("Note 1: {'Erodotou 'Alikarnesseos istories apodexis ede")
    assert tail[41] == f"Note 42: {ORACLE_NOTE}"
    assert [p.split(":", 1)[0] for p in tail] == [f"Note {n}" for n in range(1, 227)]
    assert ("NOTES TO BOOK IV.", "notes (read at chapter ends)") in [(s.title, s.reason) for s in book.skipped]


# -- The Waste Land: 50 EPUB 3 rearnotes with backlinks --------------------------------------------


def test_waste_land_skip(books):
    book = books(WASTE_LAND, "skip")
    burial = chapter(book, "I. THE BURIAL")
    stanza = next(i for i, p in enumerate(burial.paragraphs) if STONY in p)
    assert burial.kind(stanza + 1) == "text" and not notes_of(book)
    notes = chapter(book, "NOTES ON")
    assert "Line 20. Cf. Ezekiel 2:1." in notes.paragraphs  # read where it lives, as today


def test_waste_land_inline(books):
    book = books(WASTE_LAND, "inline")
    burial = chapter(book, "I. THE BURIAL")
    stanza = next(i for i, p in enumerate(burial.paragraphs) if STONY in p)
    assert burial.paragraphs[stanza + 1:stanza + 3] == [f"Note: {EZEKIEL}", f"Note: {ECCLESIASTES}"]
    assert len(notes_of(book)) == 50
    last = chapter(book, "V. WHAT THE THUNDER")
    assert last.paragraphs[-2] == "Shantih shantih shantih"
    assert last.paragraphs[-1] == ("Note: Shantih. Repeated as here, a formal ending to an Upanishad. "
                                   "'The Peace which passeth understanding' is a feeble translation of "
                                   "the content of this word.")
    # The notes section keeps its prose, loses the notes and the sub-headings left empty.
    notes = chapter(book, "NOTES ON")
    assert notes.paragraphs[0] == 'NOTES ON "THE WASTE LAND"'
    assert notes.kinds == ["heading", "text", "text", "heading", "text"]
    assert notes.paragraphs[3] == "V. WHAT THE THUNDER SAID"


def test_waste_land_chapter_end(books):
    book = books(WASTE_LAND, "chapter-end")
    burial = chapter(book, "I. THE BURIAL")
    start = burial.paragraphs.index(NOTES_HEADING)
    assert burial.paragraphs[start + 1:start + 3] == [f"Note 1: {EZEKIEL}", f"Note 2: {ECCLESIASTES}"]
    assert len(burial.paragraphs) - start - 1 == 11
    assert sum(c.paragraphs.count(NOTES_HEADING) for c in book.chapters) == 4  # IV has no notes
    assert NOTES_HEADING not in chapter(book, "IV. DEATH").paragraphs


# -- Synthetic books: aside footnotes, ARIA roles, scene breaks ----------------------------------


def _notes_book(tmp_path):
    body = ('<h1>One</h1><p>Said so<a epub:type="noteref" href="#n1">1</a> today.</p>'
            '<aside epub:type="footnote" id="n1"><p>1 Pop-up note.</p></aside>'
            '<p>Then<a role="doc-noteref" href="notes.xhtml#e1">2</a> more.</p>'
            '<hr/><p>Later that day.</p><p class="x">* * *</p><p>Much later.</p>')
    notes = ('<h1>Notes</h1><ol role="doc-endnotes"><li role="doc-endnote" id="e1"><p>An endnote. '
             '<a role="doc-backlink" href="a.xhtml">↩</a></p></li></ol>')
    docs = {"a.xhtml": xhtml(body), "notes.xhtml": xhtml(notes)}
    return make_epub(tmp_path, docs, nav=[("One", "a.xhtml"), ("Notes", "notes.xhtml")])


def test_synthetic_policies(tmp_path):
    path = _notes_book(tmp_path)
    skip = load_book(path)
    assert skip.chapters[0].paragraphs == ["One", "Said so today.", "Then more.", "Later that day.", "Much later."]
    assert skip.chapters[0].breaks == {3, 4}
    assert [c.title for c in skip.chapters] == ["One", "Notes"]
    inline = load_book(path, notes="inline")
    assert inline.chapters[0].paragraphs == ["One", "Said so today.", "Note: Pop-up note.", "Then more.",
                                             "Note: An endnote.", "Later that day.", "Much later."]
    assert inline.chapters[0].breaks == {5, 6}
    assert [c.title for c in inline.chapters] == ["One"]
    assert ("Notes", "notes (read inline)") in [(s.title, s.reason) for s in inline.skipped]
    end = load_book(path, notes="chapter-end")
    assert end.chapters[0].paragraphs[-3:] == [NOTES_HEADING, "Note 1: Pop-up note.", "Note 2: An endnote."]
    with pytest.raises(InputError, match="--notes"):
        load_book(path, notes="footer")


def test_a_note_on_a_note_is_read_after_it(tmp_path, books):
    # Yeats's endnote 19 cites endnote 35 ("In 1917 and later editions Yeats replaced the above
    # with: …"): the second is read right after the first, inline or at the chapter's end, never
    # left unplaced.
    notes = ('<h1>Notes</h1><ol role="doc-endnotes">'
             '<li role="doc-endnote" id="e1"><p>First note<a role="doc-noteref" href="#e2">2</a>.</p></li>'
             '<li role="doc-endnote" id="e2"><p>A note on the first note.</p></li></ol>')
    docs = {"a.xhtml": xhtml('<h1>One</h1><p>Said so<a role="doc-noteref" href="notes.xhtml#e1">1</a>.</p>'
                             '<p>And on.</p>'), "notes.xhtml": xhtml(notes)}
    path = make_epub(tmp_path, docs, nav=[("One", "a.xhtml"), ("Notes", "notes.xhtml")])
    inline = load_book(path, notes="inline")
    assert inline.chapters[0].paragraphs == ["One", "Said so.", "Note: First note.", "Note: A note on the first note.",
                                             "And on."]
    assert [s.title for s in inline.skipped] == ["Notes"]
    end = load_book(path, notes="chapter-end")
    assert end.chapters[0].paragraphs[-2:] == ["Note 1: First note.", "Note 2: A note on the first note."]
    yeats = books("yeats-poetry-collection-sections-se-epub3.epub", "inline")
    texts = notes_of(yeats)
    at = next(i for i, t in enumerate(texts) if t.startswith("Note: Poems Beginning with That “To a Wealthy Man”"))
    assert texts[at + 1].startswith("Note: In 1917 and later editions Yeats replaced the above with: I leave out two")
    assert "Notes not placed" not in [s.title for s in yeats.skipped]


def test_a_gutenberg_note_whose_empty_anchor_opens_its_paragraph_is_read_whole(tmp_path, books):
    # L'Esprit des lois: "<p><a id='Footnote_5_5'/><a href='…#FNanchor_5_5'>[5]</a> Lettre
    # <span class='sc'>xxxviii</span>.</p>": the note is the paragraph, not the elements after the
    # anchor ("Note: xxxviii" lost its words, which are the label's tail).
    notes = ('<h2>NOTES</h2><p><a id="Footnote_1"/><a href="a.xhtml#FN1">[1]</a> Lettre <span class="sc">xxxviii</span>.</p>'
             '<p><a id="Footnote_2"/><a href="a.xhtml#FN2">[2]</a> Voir la lettre <i>cxxiv</i>.</p>')
    body = ('<h1>Un</h1><p>Une ville<a id="FN1"/><a href="notes.xhtml#Footnote_1">[1]</a> et le pape'
            '<a id="FN2"/><a href="notes.xhtml#Footnote_2">[2]</a>.</p>')
    path = make_epub(tmp_path, {"a.xhtml": xhtml(body), "notes.xhtml": xhtml(notes)},
                     ncx=[("Un", "a.xhtml"), ("NOTES", "notes.xhtml")])
    assert load_book(path, notes="inline").chapters[0].paragraphs == [
        "Un", "Une ville et le pape.", "Note: Lettre xxxviii.", "Note: Voir la lettre cxxiv."]
    esprit = notes_of(books("esprit-des-lois-fr-deep-toc-epub2-ncx.epub", "inline"))
    assert "Note: Lettre xxxviii." in esprit and "Note: xxxviii" not in esprit


def test_scene_breaks_and_headings_set_the_pauses():
    chapter_ = Chapter("One", ["One", "First part.", "Second part.", "End."], kinds=["heading", "text", "text", "text"],
                       breaks={2})
    pauses = [s.pause_after_ms for s in segment_chapter(0, chapter_)]
    assert pauses == [PAUSE_HEADING_MS, PAUSE_SCENE_BREAK_MS, PAUSE_PARAGRAPH_MS, PAUSE_CHAPTER_MS]


def test_say_titles_no_drops_the_leading_headings(tmp_path, books):
    path = _notes_book(tmp_path)
    book = load_book(path)
    said = [s.text for s in plan_segments(book, [0], 1, "joe", "m")]
    silent = [s.text for s in plan_segments(book, [0], 1, "joe", "m", say_titles=False)]
    assert said[0] == "One" and silent == said[1:]
    tale = books("a-tale-of-two-cities-nested-books-se-epub3.epub", "skip")
    index = next(i for i, c in enumerate(tale.chapters) if c.title == "I: The Period")
    said = [s.text for s in plan_segments(tale, [index], 1, "joe", "m")]
    silent = [s.text for s in plan_segments(tale, [index], 1, "joe", "m", say_titles=False)]
    assert silent[0].startswith("It was the best of times")
    # The chapter's heading (hgroup "I. The Period") is its title; the book divider is a chapter of its own.
    assert said[:said.index(silent[0])] == ["One.", "The Period"]
    assert said[said.index(silent[0]):] == silent


def test_notes_change_segment_texts(tmp_path):
    path = _notes_book(tmp_path)
    skip = plan_segments(load_book(path), [0], 1, "joe", "m")
    inline = plan_segments(load_book(path, notes="inline"), [0], 1, "joe", "m")
    assert {s.key for s in inline} - {s.key for s in skip}
    assert "Note: Pop-up note." in [s.text for s in inline]


# -- Options ----------------------------------------------------------------------------------


def test_convert_parser_options_and_per_book_settings(tmp_path):
    args = convert_parser().parse_args(["b.epub", "--notes", "inline", "--say-titles", "no", "--lexicon", "x.txt"])
    assert (args.notes, args.say_titles, str(args.lexicon)) == ("inline", "no", "x.txt")
    defaults = convert_parser().parse_args(["b.epub"])
    assert (defaults.notes, defaults.say_titles, defaults.lexicon) == (None, None, None)
    book = tmp_path / "b.epub"
    (tmp_path / "b.epub2audio.toml").write_text('notes = "chapter-end"\nsay_titles = false\n', encoding="utf-8")
    reading = reading_for(book, ConvertOptions(), config={})
    assert (reading.notes, reading.say_titles) == ("chapter-end", False)
    reading = reading_for(book, ConvertOptions(notes="inline", say_titles=True), config={})
    assert (reading.notes, reading.say_titles) == ("inline", True)
    assert (reading_for(tmp_path / "other.epub", ConvertOptions(), config={}).notes) == "skip"


@pytest.mark.parametrize("notes", ["skip", "inline", "chapter-end"])
def test_a_contents_lists_page_numbers_are_no_note_references(tmp_path, notes):
    # Beowulf: "Scyld's Successors (II.) 3", the 3 a link to the page mark before line 50; under
    # --notes inline the lines after the mark were taken out of the poem as the page number's note.
    contents = ('<h2 id="c">CONTENTS.</h2><p>The Life and Death of Scyld <a href="b.xhtml#I">(I.)</a> '
                '<a class="tocpagenum" href="b.xhtml#page_1">1</a></p><p>Scyld’s Successors <a href="b.xhtml#II">(II.)</a> '
                '<a class="tocpagenum" href="b.xhtml#page_3">3</a></p>')
    lines = ["High o’er his head, let the holm-currents bear him,", "Seaward consigned him: sad was their spirit,"]
    poem = ('<h2 id="I">I. THE LIFE AND DEATH OF SCYLD.</h2><span class="x-ebookmaker-pageno" id="page_1"></span>'
            '<div class="l">Lo! the Spear-Danes’ glory through splendid achievements</div>'
            '<span class="x-ebookmaker-pageno" id="page_3" title="[3]"></span>'
            + "".join(f'<div class="l">{line}</div>' for line in lines)
            + '<h2 id="II">II. SCYLD’S SUCCESSORS.</h2><p>In the boroughs then Beowulf, bairn of the Scyldings.</p>')
    path = make_epub(tmp_path, {"a.xhtml": xhtml(contents), "b.xhtml": xhtml(poem)},
                     nav=[("Contents", "a.xhtml#c"), ("I. THE LIFE AND DEATH OF SCYLD.", "b.xhtml#I"),
                          ("II. SCYLD’S SUCCESSORS.", "b.xhtml#II")])
    b = load_book(path, notes=notes)
    [first] = [c for c in b.chapters if c.title.startswith("I.")]
    assert first.paragraphs[-2:] == lines
    assert not any("holm-currents" in p for c in b.chapters if c is not first for p in c.paragraphs)


def test_a_notes_marker_never_reaches_a_title(tmp_path, books):
    # L'Esprit des lois: the NCX label "INTRODUCTION[1]" is its heading with the note's marker; the
    # heading holds the reference, so the marker is dropped. A label whose heading holds no note
    # keeps its brackets ("Psalm [23]" is a title the book prints).
    docs = {"a.xhtml": xhtml('<h1 id="i">INTRODUCTION<a href="n.xhtml#f1">[1]</a></h1><p>Le plus grand livre.</p>'
                             '<h1 id="p">Psalm [23]</h1><p>The Lord is my shepherd.</p>'),
            "n.xhtml": xhtml('<h2>NOTES</h2><p><a id="f1"/><a href="a.xhtml#i">[1]</a> Extraite de notre histoire.</p>')}
    b = load_book(make_epub(tmp_path, docs, ncx=[("INTRODUCTION[1]", "a.xhtml#i"), ("Psalm [23]", "a.xhtml#p"),
                                                 ("NOTES", "n.xhtml")]))
    assert [c.title for c in b.chapters] == ["INTRODUCTION", "Psalm [23]", "NOTES"]
    esprit = books("esprit-des-lois-fr-deep-toc-epub2-ncx.epub", "skip")
    titles = [c.title for c in esprit.chapters]
    assert "INTRODUCTION" in titles and "CHAPITRE XIV" in titles and not [t for t in titles if "[" in t]
