from epub2audio.book import Chapter
from epub2audio.book.segment import (
    MAX_SEGMENT_CHARS, PAUSE_CHAPTER_MS, PAUSE_LANGUAGE_MS, PAUSE_PARAGRAPH_MS, PAUSE_SENTENCE_MS,
    segment_chapter, split_long, split_sentences,
)


def test_sentences_split_at_terminal_punctuation_and_quotes():
    text = 'He said, "Go!" She went. Did he follow? Yes\u2026 at last.'
    assert split_sentences(text) == ['He said, "Go!"', "She went.", "Did he follow?", "Yes\u2026", "at last."]


def test_abbreviations_and_initials_do_not_end_sentences():
    text = "Mr. Lorry met Dr. Manette at St. Paul's. J. R. Smith, e.g. a clerk, was there."
    assert split_sentences(text) == ["Mr. Lorry met Dr. Manette at St. Paul's.", "J. R. Smith, e.g. a clerk, was there."]


def test_long_sentences_split_at_the_strongest_break_under_the_cap():
    clause = "the whale swam on through the grey and endless sea"
    sentence = "; ".join([clause] * 12) + "."
    pieces = split_long(sentence)
    assert all(len(p) <= MAX_SEGMENT_CHARS for p in pieces)
    assert all(p.endswith(";") for p in pieces[:-1])  # cut after a semicolon, not inside a clause
    assert " ".join(pieces) == sentence


def test_a_word_longer_than_the_cap_is_cut_hard():
    word = "x" * (MAX_SEGMENT_CHARS * 2 + 5)
    assert [len(p) for p in split_long(word)] == [MAX_SEGMENT_CHARS, MAX_SEGMENT_CHARS, 5]


def test_pauses_follow_what_ends_there():
    chapter = Chapter("One", ["First sentence. Second sentence.", "New paragraph."])
    segs = segment_chapter(4, chapter)
    assert [(s.chapter, s.index, s.text, s.pause_after_ms) for s in segs] == [
        (4, 0, "First sentence.", PAUSE_SENTENCE_MS),
        (4, 1, "Second sentence.", PAUSE_PARAGRAPH_MS),
        (4, 2, "New paragraph.", PAUSE_CHAPTER_MS),
    ]


def test_no_text_no_segments():
    assert segment_chapter(0, Chapter("Empty", [])) == []


def test_punctuation_closing_a_foreign_passage_stays_with_it():
    # Vingt mille lieues: "… le steamer <i xml:lang="en">Governor-Higginson</i>, de Calcutta …" and a
    # sentence ending on an English name. The comma and the full stop are the passage's: said alone
    # they were a segment of no words ("."), or the French voice's text began with ", de".
    text = "le steamer Governor-Higginson, de Calcutta, avait vu la Company. Donc, ce cétacé était là."
    ship = text.index("Governor")
    company = text.index("Company")
    chapter = Chapter("Un", [text, "Fin de Company."],
                      languages={0: [(ship, ship + len("Governor-Higginson"), "en"), (company, company + 7, "en")],
                                 1: [(7, 14, "en")]})
    assert [(s.text, s.pause_after_ms, s.lang) for s in segment_chapter(0, chapter)] == [
        ("le steamer", PAUSE_LANGUAGE_MS, None),
        ("Governor-Higginson,", PAUSE_LANGUAGE_MS, "en"),
        ("de Calcutta, avait vu la", PAUSE_LANGUAGE_MS, None),
        ("Company.", PAUSE_SENTENCE_MS, "en"),
        ("Donc, ce cétacé était là.", PAUSE_PARAGRAPH_MS, None),
        ("Fin de", PAUSE_LANGUAGE_MS, None),
        ("Company.", PAUSE_CHAPTER_MS, "en"),
    ]
