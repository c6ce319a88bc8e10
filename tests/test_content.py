"""All the content a book has (issue 20, item 3): pictures' descriptions, content we do not read
named in warnings, repeated navigation boilerplate, letters that are not Roman numerals, and books
with nothing to read."""

from __future__ import annotations

import json

import pytest

from cli_run import epub2audio
from epub_factory import make_epub, xhtml
from epub2audio.book.epub import load_book
from epub2audio.book.model import Book, Chapter, Skipped
from epub2audio.book.normalize_en import letter_headings, numbered_headings
from epub2audio.errors import InputError
from epub2audio.render import ConvertOptions, letter_paragraphs, reading_for, spoken_chapter

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


def one_file(tmp_path, body: str, name: str = "book.epub", **kw) -> Book:
    path = make_epub(tmp_path, {"a.xhtml": xhtml(body)}, nav=[("One", "a.xhtml")], name=name)
    return load_book(path, **kw)


def text(tmp_path, body: str, **kw) -> list[str]:
    return one_file(tmp_path, body, **kw).chapters[0].paragraphs


# -- 2. pictures -------------------------------------------------------------------------------


def test_a_content_picture_is_a_short_note_after_its_paragraph(tmp_path):
    assert text(tmp_path, '<p>The river <img src="map.png" alt="A map of the river"/> bends.</p><p>Next.</p>') == [
        "The river bends.", "Image: A map of the river.", "Next."]


def test_a_figure_keeps_its_caption_and_its_description(tmp_path):
    body = '<figure><img src="m.png" alt="A map of the river"/><figcaption>Fig. 1</figcaption></figure>'
    assert text(tmp_path, body) == ["Image: A map of the river.", "Fig. 1"]


@pytest.mark.parametrize("picture", [
    '<img src="a.png" alt=""/>',  # HTML's own mark for decoration
    '<img src="a.png"/>',
    '<img src="a.png" alt="A river" role="presentation"/>',
    '<img src="a.png" alt="A river" role="none"/>',
    '<img src="a.png" alt="A river" aria-hidden="true"/>',
    '<img src="a.png" alt="image"/>', '<img src="a.png" alt="[Illustration]"/>',
    '<img src="a.png" alt="Illustration"/>', '<img src="a.png" alt="cover"/>', '<img src="a.png" alt="Logo"/>',
    '<img src="a.png" alt="IMG_0012.jpg"/>', '<img src="a.png" alt="fig3"/>', '<img src="a.png" alt="Figure 3"/>',
    '<img src="a.png" alt="Abbildung"/>', '<img src="a.png" alt="The frontispiece"/>',
    '<img src="a.png" alt="chapter_head_ornament"/>', '<img src="a.png" alt="* * *"/>',
    '<img src="a.png" alt="The Standard Ebooks logo."/>',
])
def test_decorative_pictures_and_empty_descriptions_are_not_read(tmp_path, picture):
    assert text(tmp_path, f"<p>Before.</p><div>{picture}</div><p>After.</p>") == ["Before.", "After."]


def test_a_description_the_caption_repeats_is_not_read(tmp_path):
    body = ('<figure><img src="a.png" alt="The ford at dawn"/><figcaption>The ford at dawn.</figcaption></figure>'
            '<div class="figcenter"><img src="b.png" alt="The Mad Hatter"/><p class="caption">THE MAD HATTER</p></div>')
    assert text(tmp_path, body) == ["The ford at dawn.", "THE MAD HATTER"]


def test_gutenberg_illustration_label_keeps_its_description(tmp_path):
    assert text(tmp_path, '<p>Text.</p><div><img src="a.png" alt="[Illustration: The Mad Hatter’s tea party]"/></div>') == [
        "Text.", "Image: The Mad Hatter’s tea party."]


def test_the_cover_image_is_not_read(tmp_path):
    path = make_epub(tmp_path, {"a.xhtml": xhtml('<p>Text.</p><img src="cover.png" alt="A red cover with a ship"/>'
                                                 '<img src="ship.png" alt="A ship at sea"/>')},
                     nav=[("One", "a.xhtml")],
                     extra_items={"cover.png": (PNG, "image/png", "cover-image"), "ship.png": (PNG, "image/png", "")})
    assert load_book(path).chapters[0].paragraphs == ["Text.", "Image: A ship at sea."]


def test_a_drop_cap_drawn_as_a_picture_reads_as_its_letter(tmp_path):
    assert text(tmp_path, '<p><img src="t.png" alt="T"/>he day began.</p>') == ["The day began."]


def test_a_heading_drawn_as_a_picture_is_not_read_twice(tmp_path):
    assert text(tmp_path, '<h2><img src="h.png" alt="Chapter the First: The Storm"/></h2><p>Rain.</p>') == ["Rain."]


def test_svg_title_and_desc(tmp_path):
    body = ('<p>See.</p><svg xmlns="http://www.w3.org/2000/svg"><title>A diagram of the pump</title>'
            '<desc>Long description</desc><rect/></svg>'
            '<svg xmlns="http://www.w3.org/2000/svg" aria-label="The valve"><rect/></svg>'
            '<svg xmlns="http://www.w3.org/2000/svg" aria-hidden="true"><title>Hidden</title></svg>')
    assert text(tmp_path, body) == ["See.", "Image: A diagram of the pump.", "Image: The valve."]


def test_a_cover_page_svg_wrapper_is_not_read(tmp_path):
    body = ('<p>Text.</p><svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
            '<image xlink:href="cover.png"/><title>Cover: a red cover with a ship</title></svg>')
    path = make_epub(tmp_path, {"a.xhtml": xhtml(body)}, nav=[("One", "a.xhtml")],
                     extra_items={"cover.png": (PNG, "image/png", "cover-image")})
    assert load_book(path).chapters[0].paragraphs == ["Text."]


def test_the_note_is_in_the_language_of_the_picture(tmp_path):
    assert text(tmp_path, '<div xml:lang="fr"><p>Voici.</p><img src="a.png" alt="Une carte du fleuve"/></div>') == [
        "Voici.", "Image : Une carte du fleuve."]


def test_image_alt_no_reads_no_description(tmp_path):
    body = '<p>Text.</p><img src="a.png" alt="A map of the river"/>'
    assert text(tmp_path, body, image_alt=False) == ["Text."]


def test_image_alt_option_setting_order(tmp_path):
    path = make_epub(tmp_path, {"a.xhtml": xhtml("<p>x</p>")}, nav=[("One", "a.xhtml")])
    assert reading_for(path, ConvertOptions(), config={}).image_alt is True
    assert reading_for(path, ConvertOptions(), config={"image_alt": False}).image_alt is False
    path.with_suffix(".epub2audio.toml").write_text("image_alt = false\n", encoding="utf-8")
    assert reading_for(path, ConvertOptions(), config={"image_alt": True}).image_alt is False
    assert reading_for(path, ConvertOptions(image_alt=True), config={}).image_alt is True


def test_image_alt_on_the_command_line(tmp_path):
    path = make_epub(tmp_path, {"a.xhtml": xhtml('<p>Text.</p><img src="a.png" alt="A map of the river"/>')},
                     nav=[("One", "a.xhtml")])
    said = epub2audio(path, "--list-chapters", "--progress", "json")
    quiet = epub2audio(path, "--list-chapters", "--progress", "json", "--image-alt", "no")
    assert (said.code, quiet.code) == (0, 0)
    # "Text." and "Image: A map of the river."
    assert json.loads(said.stdout)["chapters"][0]["characters"] == 5 + 26
    assert json.loads(quiet.stdout)["chapters"][0]["characters"] == 5
    bad = epub2audio(path, "--list-chapters", "--image-alt", "maybe")
    assert bad.code == 2 and "--image-alt" in bad.stderr


# -- 3. what is not read is named ----------------------------------------------------------------


def test_embedded_objects_are_named_once_per_file_and_kind(tmp_path):
    docs = {"a.xhtml": xhtml('<p>One.</p><iframe src="x.html"></iframe><p>Two.<embed src="a.swf"/></p>'
                             '<iframe src="y.html"></iframe><canvas></canvas>'),
            "b.xhtml": xhtml('<p>Three.</p><object data="m.swf"></object>'
                             '<object data="n.swf"><p>A film of the launch.</p></object>')}
    book = load_book(make_epub(tmp_path, docs, nav=[("A", "a.xhtml"), ("B", "b.xhtml")]))
    assert [c.paragraphs for c in book.chapters] == [["One.", "Two."], ["Three.", "A film of the launch."]]
    assert book.warnings == [
        "a.xhtml: 2 <iframe> elements not read (nothing to read aloud in them)",
        "a.xhtml: 1 <embed> element not read (nothing to read aloud in them)",
        "a.xhtml: 1 <canvas> element not read (nothing to read aloud in them)",
        "b.xhtml: 1 <object> element not read (nothing to read aloud in them)",
    ]


def test_svg_text_is_named(tmp_path):
    body = ('<p>Plan.</p><svg xmlns="http://www.w3.org/2000/svg"><title>The plan of the fort</title>'
            '<text x="1" y="1">North gate</text></svg>')
    book = one_file(tmp_path, body)
    assert book.chapters[0].paragraphs == ["Plan.", "Image: The plan of the fort."]
    assert book.warnings == ["a.xhtml: 1 SVG drawing with <text> not read (only its title)"]


# -- 4. repeated navigation boilerplate ------------------------------------------------------------

NAV_BAR = ('<p class="nav"><a href="index.xhtml">Parent</a> / <a href="s1.xhtml">Previous</a> / '
           '<a href="s2.xhtml">Next topic</a></p>')
FOOTER = "<p>Copyright © 2004 A. Author, http://example.org/book</p>"
# Longer than a copyright page, so that the short-page guess of chapters.py has no say here.
LONG = "<p>" + "All the leaves are brown. " * 90 + "</p>"
LONG_TEXT = ("All the leaves are brown. " * 90).strip()


def sections(tmp_path, count: int, body, name="book.epub") -> Book:
    docs = {f"s{i}.xhtml": xhtml(body(i)) for i in range(1, count + 1)}
    return load_book(make_epub(tmp_path, docs, nav=[(f"Section {i}", f"s{i}.xhtml") for i in range(1, count + 1)],
                               name=name))


def test_link_bars_and_footers_repeated_in_every_file_are_dropped(tmp_path):
    book = sections(tmp_path, 4, lambda i: f"{NAV_BAR}<h1>Section {i}</h1><p>Body {i}.</p>{NAV_BAR}{FOOTER}")
    assert [c.paragraphs for c in book.chapters] == [[f"Section {i}", f"Body {i}."] for i in range(1, 5)]
    assert book.skipped == [
        Skipped("Parent / Previous / Next topic", "repeated text (8 times, in 4 of 4 files)", chars=240,
                evidence="repetition"),
        Skipped("Copyright © 2004 A. Author, http://example.org/book",
                "repeated text (4 times, in 4 of 4 files)", chars=204, evidence="repetition"),
    ]


def test_a_running_header_in_header_elements_is_dropped(tmp_path):
    book = sections(tmp_path, 3, lambda i: f"<header><p>The Art of Tea</p></header><h1>Part {i}</h1>"
                                           f"<p>Leaves.</p><p>Water {i}.</p>")
    assert [c.paragraphs for c in book.chapters] == [[f"Part {i}", "Leaves.", f"Water {i}."] for i in range(1, 4)]
    assert [(s.title, s.chars, s.evidence) for s in book.skipped] == [("The Art of Tea", 42, "repetition")]


def test_a_copyright_line_in_one_file_is_kept(tmp_path):
    book = sections(tmp_path, 4, lambda i: f"<h1>Section {i}</h1>{LONG}" + (FOOTER if i == 2 else ""))
    assert book.chapters[1].paragraphs == ["Section 2", LONG_TEXT, "Copyright © 2004 A. Author, http://example.org/book"]
    assert not [s for s in book.skipped if s.evidence == "repetition"]


def test_repetition_in_fewer_than_half_the_files_is_kept(tmp_path):
    book = sections(tmp_path, 8, lambda i: f"<h1>S{i}</h1>{LONG}" + (FOOTER if i <= 3 else ""))
    assert sum(FOOTER[3:-4] in c.paragraphs for c in book.chapters) == 3
    assert book.skipped == []


def test_a_refrain_in_verse_is_kept(tmp_path):
    refrain = '<div class="stanza"><p>Sing hey, the rain.</p></div>'
    book = sections(tmp_path, 4, lambda i: f'<h1>Song {i}</h1><div class="poem"><div class="stanza">'
                                           f'<p>Verse {i}.</p></div>{refrain}</div>')
    assert [c.paragraphs[-1] for c in book.chapters] == ["Sing hey, the rain."] * 4
    assert book.skipped == []


def test_speaker_names_in_the_middle_of_their_files_are_kept(tmp_path):
    book = sections(tmp_path, 4, lambda i: f"<h1>Scene {i}</h1><p>Enter both.</p><p>HAMLET.</p><p>Line {i}.</p>"
                                           f"<p>Exeunt {i}.</p>")
    assert [c.paragraphs for c in book.chapters][0] == ["Scene 1", "Enter both.", "HAMLET.", "Line 1.", "Exeunt 1."]
    assert book.skipped == []


def test_a_book_of_two_files_keeps_everything(tmp_path):
    book = sections(tmp_path, 2, lambda i: f"<h1>S{i}</h1>{LONG}{FOOTER}")
    assert [c.paragraphs[-1] for c in book.chapters] == [FOOTER[3:-4]] * 2


# -- 5. letters, not Roman numerals ---------------------------------------------------------------


def spoken_headings(book: Book) -> list[str]:
    letters = letter_paragraphs(book)
    return [spoken_chapter(book, c, letters=letters.get(i)).paragraphs[0] for i, c in enumerate(book.chapters)]


def heading_book(titles: list[str], language: str = "en") -> Book:
    return Book(path="x.epub", title="T", authors=[], language=language,
                chapters=[Chapter(t, [t, "Text."], kinds=["heading", "text"]) for t in titles])


def test_a_dictionary_reads_its_letters():
    letters = ["A", "B", "C", "D", "I", "L", "M", "V", "X"]
    assert spoken_headings(heading_book(letters)) == letters


def test_roman_chapter_numbers_stay_numbers():
    assert spoken_headings(heading_book(["IV", "V", "VI"])) == ["Four", "Five", "Six"]
    assert spoken_headings(heading_book(["XCIX", "C", "CI"])) == ["Ninety-nine", "One hundred", "One hundred and one"]
    assert spoken_headings(heading_book(["I", "I", "II"])) == ["One", "One", "Two"]  # a part, then its chapter


def test_chapter_c_is_a_number_among_roman_chapters_and_a_letter_among_letters():
    assert spoken_headings(heading_book(["Chapter XCIX", "Chapter C", "Chapter CI"])) == [
        "Chapter ninety-nine", "Chapter one hundred", "Chapter one hundred and one"]
    assert spoken_headings(heading_book(["Chapter A", "Chapter B", "Chapter C"])) == ["Chapter A", "Chapter B", "Chapter C"]
    assert spoken_headings(heading_book(["Appendix C"])) == ["Appendix C"]


def test_letter_rules_over_a_book_read_from_its_files(tmp_path):
    docs = {f"{c}.xhtml": xhtml(f"<h2>{c}</h2><p>Words beginning with {c}.</p>") for c in "BCDIL"}
    book = load_book(make_epub(tmp_path, docs, nav=[(c, f"{c}.xhtml") for c in "BCDIL"]))
    assert spoken_headings(book) == list("BCDIL")


def test_a_corpus_dictionary_says_its_letters_and_a_corpus_poem_its_numbers(corpus):
    """Issue 29: The Devil's Dictionary's C, D, I, L, M, V and X were spoken as numerals; The Waste
    Land's part numbers are Roman numerals, and stay numbers."""
    dictionary = load_book(corpus / "devils-dictionary-letter-chapters-se-epub3.epub")
    assert spoken_headings(dictionary) == ["Author’s Preface", *"ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    poem = load_book(corpus / "the-waste-land-poetry-notes-epub3.epub")
    assert spoken_headings(poem)[1:5] == ["Two. A game of chess", "Three. The fire sermon", "Four. Death by water",
                                          "Five. What the thunder said"]


def test_letter_headings_rule():
    assert letter_headings(["A", "Aardvark", "B"]) == {0, 2}  # other headings between are not labels
    assert letter_headings(["V", "IV"]) == set()
    assert letter_headings(["C"]) == set()
    assert letter_headings(["A.", "Abacus", "B.", "C."]) == {0, 2, 3}  # with a full stop
    assert numbered_headings(["Book XC", "Chapter C", "Book XCI"]) == set()  # a different word


# -- 6. nothing to read ------------------------------------------------------------------------------


def test_a_comic_is_refused_in_one_line(tmp_path):
    docs = {f"p{i}.xhtml": xhtml(f'<div><img src="p{i}.png" alt=""/></div>') for i in range(1, 4)}
    path = make_epub(tmp_path, docs, nav=[(f"Page {i}", f"p{i}.xhtml") for i in range(1, 4)], name="comic.epub",
                     metadata='<meta property="rendition:layout">pre-paginated</meta>',
                     extra_items={f"p{i}.png": (PNG, "image/png", "") for i in range(1, 4)})
    with pytest.raises(InputError, match=r"^comic\.epub: contains no text to read \(3 parts skipped, "
                                         r"3 of them images only\)$"):
        load_book(path)
    for args in (["--list-chapters"], []):
        run = epub2audio(path, *args)
        assert run.code == 2
        assert run.stderr == ("epub2audio: error: comic.epub: contains no text to read "
                              "(3 parts skipped, 3 of them images only)\n")


def test_a_book_of_empty_files_is_refused(tmp_path):
    docs = {"a.xhtml": xhtml(""), "b.xhtml": xhtml("<div> </div>")}
    path = make_epub(tmp_path, docs, nav=[("A", "a.xhtml"), ("B", "b.xhtml")], name="empty.epub")
    run = epub2audio(path, "--list-chapters")
    assert (run.code, run.stderr) == (2, "epub2audio: error: empty.epub: contains no text to read "
                                         "(2 parts skipped)\n")


def test_next_and_previous_links_naming_different_topics_are_one_repeated_text(tmp_path):
    def body(i):
        return (f"<h1>Section {i}</h1>{LONG}<div><strong>Previous topic:</strong> <a href='s{i - 1}.xhtml'>S{i - 1}</a></div>"
                f"<div><strong>Next topic:</strong> <a href='s{i + 1}.xhtml'>Section number {i + 1}</a></div>")
    book = sections(tmp_path, 4, body)
    assert [c.paragraphs for c in book.chapters] == [[f"Section {i}", LONG_TEXT] for i in range(1, 5)]
    assert [(s.title, s.reason, s.chars) for s in book.skipped] == [
        ("Previous topic: …", "repeated text (4 times, in 4 of 4 files)", 4 * len("Previous topic: S1")),
        ("Next topic: …", "repeated text (4 times, in 4 of 4 files)", 4 * len("Next topic: Section number 2")),
    ]


def test_a_sentence_around_a_link_repeated_in_every_file_is_text_not_a_link_bar(tmp_path):
    # The EPUB 3.0 specification: each of its documents lists its companion documents, "EPUB Media
    # Overlays 3.0 [MediaOverlays30], which defines a format and a processing model for …". The
    # sentence is read in every file; only a link with a few words of its own is a link bar.
    item = ("<p><a href='s9.xhtml'>EPUB Media Overlays 3.0</a>, which defines a format and a processing model "
            "for synchronization of text and audio.</p>")

    def body(i):
        return f"<h1>Section {i}</h1>{LONG}{item}{LONG}"
    book = sections(tmp_path, 4, body)
    said = "EPUB Media Overlays 3.0, which defines a format and a processing model for synchronization of text and audio."
    assert [c.paragraphs for c in book.chapters] == [[f"Section {i}", LONG_TEXT, said, LONG_TEXT] for i in range(1, 5)]
    assert book.skipped == []


@pytest.mark.parametrize("alt", ["Alternative text not available", "alt text", "No description"])
def test_placeholder_descriptions_are_not_read(tmp_path, alt):
    assert text(tmp_path, f'<p>Text.</p><img src="a.png" alt="{alt}"/>') == ["Text."]


def test_a_drop_cap_is_read_even_without_picture_notes(tmp_path):
    assert text(tmp_path, '<p><img src="t.png" alt="T"/>he day began.</p>', image_alt=False) == ["The day began."]


def test_a_picture_inside_a_link_to_its_larger_copy_is_read(tmp_path):
    body = '<p>Text.</p><div><a href="images/big.jpg"><img src="images/small.jpg" alt="The old mill"/></a></div>'
    assert text(tmp_path, body) == ["Text.", "Image: The old mill."]


def test_a_corpus_book_reads_its_map_and_not_its_cover(corpus):
    # Georgia (IDPF sample): the state map in "Agriculture" has alt="Georgia state map"; its cover
    # image ("Cover Image") is the cover.
    book = load_book(corpus / "georgia-britannica-pls-ssml-epub3.epub")
    notes = [(c.title, p) for c in book.chapters for p in c.paragraphs if p.startswith("Image")]
    assert notes == [("Agriculture", "Image: Georgia state map.")]
    agriculture = next(c for c in book.chapters if c.title == "Agriculture")
    assert agriculture.paragraphs[-1] == "Image: Georgia state map."
    quiet = load_book(corpus / "georgia-britannica-pls-ssml-epub3.epub", image_alt=False)
    assert next(c for c in quiet.chapters if c.title == "Agriculture").paragraphs == agriculture.paragraphs[:-1]


def test_repeated_titles_are_kept(tmp_path):
    # Standard Ebooks: a section's <header> holds its title; many poems are called "Sonnet"
    book = sections(tmp_path, 4, lambda i: f'<section><header><h2>Sonnet</h2><p>To a friend</p></header>{LONG}'
                                           f'<footer><p>Written in {1800 + i}.</p></footer></section>')
    assert [c.paragraphs[:2] for c in book.chapters] == [["Sonnet", "To a friend"]] * 4
    assert book.skipped == []
