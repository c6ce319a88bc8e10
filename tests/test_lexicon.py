"""Pronunciations: PLS lexicons and inline ssml:ph from the book, the user's lexicon, and how they
reach the voice (Piper speaks the IPA; other voices get the plain word)."""

import re
import zipfile

import pytest

from epub2audio.book.epub import load_book
from epub2audio.book.lexicon import (
    Lexicon, apply, book_settings_path, job_lexicon, load_user_lexicon, mark, parse_pls,
    parse_user_lexicon, plain, voice_text,
)
from epub2audio.errors import InputError
from epub2audio.render import plan_segments, spoken_chapter
from epub2audio.voices.piper import espeak_ipa, phoneme_input

GEORGIA = "georgia-britannica-pls-ssml-epub3.epub"


def first_sentence(book, voice="joe"):
    """The first segment of the Georgia article's first paragraph (after the title)."""
    segments = plan_segments(book, [0], 1, voice, "m")
    assert segments[0].text == "Georgia"  # the heading, de-shouted
    return segments[1].text
PH = re.compile(r"\[\[ (.*?) \]\]")


@pytest.fixture(scope="module")
def georgia(corpus):
    return load_book(corpus / GEORGIA)


# -- the user's lexicon -------------------------------------------------------------------------


def test_user_lexicon_format_case_rules_and_word_boundaries():
    lex = parse_user_lexicon(
        "# names\n"
        "Hermione = her-MY-oh-nee\n"
        "colonel = kernel   # any case\n"
        "Reading = redding\n"
        "New   Orleans = new OR-linz\n"
        "Nguyen = /wɪn/\n"
    )
    assert lex.apply("Hermione met the Colonel.") == f"{mark('her-MY-oh-nee')} met the {mark('kernel')}."
    assert lex.apply("COLONEL") == mark("kernel")
    assert lex.apply("Reading is in reading.") == f"{mark('redding')} is in reading."
    assert lex.apply("to New\u00a0Orleans, then") == f"to {mark('new OR-linz')}, then"
    assert lex.apply("Mr Nguyen") == f"Mr {mark('Nguyen', 'wɪn')}"
    # Whole words only.
    assert lex.apply("Hermiones and colonels") == "Hermiones and colonels"


def test_user_lexicon_errors_name_the_line(tmp_path):
    with pytest.raises(InputError, match="line 2"):
        parse_user_lexicon("ok = fine\nno equals sign here\n", "my.lex")
    with pytest.raises(InputError, match="cannot read"):
        load_user_lexicon(tmp_path / "missing.txt")


def test_toml_lexicon(tmp_path):
    path = tmp_path / "words.toml"
    path.write_text('[lexicon]\nSmaug = "smowg"\nTolkien = "/ˈtɒlkiːn/"\n', encoding="utf-8")
    lex = load_user_lexicon(path)
    assert lex.apply("Smaug and Tolkien") == f"{mark('smowg')} and {mark('Tolkien', 'ˈtɒlkiːn')}"


def test_precedence_cli_over_book_file_over_config(tmp_path):
    book = tmp_path / "My Book.epub"
    book.write_bytes(b"PK")
    assert book_settings_path(book).name == "My Book.epub2audio.toml"
    (tmp_path / "config.lex").write_text("Smaug = from-config\nBilbo = bil-bo\n", encoding="utf-8")
    (tmp_path / "book.lex").write_text("Smaug = from-book\nGandalf = gan-dalf\n", encoding="utf-8")
    (tmp_path / "cli.lex").write_text("Smaug = from-cli\n", encoding="utf-8")
    book_settings_path(book).write_text('lexicon = "book.lex"\nnotes = "inline"\n', encoding="utf-8")
    config = {"lexicon": str(tmp_path / "config.lex")}
    both = job_lexicon(book, config, tmp_path / "cli.lex")
    assert both.apply("Smaug, Bilbo, Gandalf") == (f"{mark('from-cli')}, {mark('bil-bo')}, {mark('gan-dalf')}")
    assert job_lexicon(book, config).apply("Smaug") == mark("from-book")
    book_settings_path(book).unlink()
    assert job_lexicon(book, config).apply("Smaug") == mark("from-config")
    assert not job_lexicon(book, {})


def test_inline_ssml_beats_the_user_lexicon_which_beats_the_pls():
    pls = Lexicon(parse_pls(
        b'<lexicon version="1.0" alphabet="ipa" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon">'
        b"<lexeme><grapheme>Mobile</grapheme><phoneme>mo\xca\x8a\xcb\x88bil</phoneme></lexeme>"
        b"<lexeme><grapheme>Macon</grapheme><phoneme>\xcb\x88me\xc9\xaak\xc9\x99n</phoneme></lexeme></lexicon>"
    ).entries)
    user = parse_user_lexicon("Macon = MAY-kun\n")
    text = "Mobile Bay and Macon and Mobile"
    out = apply(text, [(0, 6, "ˈmoʊbil")], pls, user)
    assert out == f"{mark('Mobile', 'ˈmoʊbil')} Bay and {mark('MAY-kun')} and {mark('Mobile', 'moʊˈbil')}"
    assert plain(out) == "Mobile Bay and MAY-kun and Mobile"


# -- the Georgia book's PLS and ssml:ph -----------------------------------------------------------


def test_georgia_pls_entries_are_loaded(corpus, georgia):
    data = zipfile.ZipFile(corpus / GEORGIA).read("EPUB/lexicon/en.pls")
    assert len(georgia.pronunciation_lexicon) == data.count(b"<lexeme>") > 50
    assert ("Altamaha", "ˈɔltəməˌhɔ") in georgia.pronunciation_lexicon
    assert ("abolition", "ˌæbəˈlɪʃən") in georgia.pronunciation_lexicon


def test_georgia_ssml_ph_spans_cover_their_words(corpus, georgia):
    data = zipfile.ZipFile(corpus / GEORGIA).read("EPUB/georgia.xhtml").decode()
    in_body = data.count("ssml:ph=")
    spans = [(c.paragraphs[i], span) for c in georgia.chapters for i, spans in c.pronunciations.items()
             for span in spans]
    assert len(spans) == in_body == 102  # (the book has 102 spans with ssml:ph in its body)
    first = georgia.chapters[0]
    index = next(i for i, p in enumerate(first.paragraphs) if p.startswith("GEORGIA, a southern"))
    assert first.paragraphs[0] == "GEORGIA" and first.kinds[0] == "heading"
    text, found = first.paragraphs[index], first.pronunciations[index]
    assert text.startswith("GEORGIA, a southern state")
    assert [(text[a:b], ipa) for a, b, ipa in found[:5]] == [
        ("30°", "ˈθɜrti dɪˈgriz"), ("31′", "ˈθɜrtiˈwʌn ˈmɪnɪtz"), ("39″", "ˈθɜrtiˈnaɪn ˈsɛkəndz"),
        ("35°", "ˈθɜrtiˈfaɪv dɪˈgriz"), ("N.", "nɔrθ"),
    ]
    # The text itself is unchanged: what --list-chapters counts and what other voices read.
    assert "between 30° 31′ 39″ and 35° N., and between" in text


def test_georgia_pronunciations_reach_the_piper_input(georgia):
    first = first_sentence(georgia)
    assert first.startswith("Georgia, a southern state")
    assert mark("thirty degrees", "ˈθɜrti dɪˈgriz") in first
    fed = phoneme_input(first)
    assert PH.findall(fed)[:2] == [espeak_ipa("ˈθɜrti dɪˈgriz"), espeak_ipa("ˈθɜrtiˈwʌn ˈmɪnɪtz")]
    assert espeak_ipa("ˈθɜrti dɪˈgriz") == "θˈɜːti dɪɡɹˈiz"
    assert "thirty degrees" not in fed and "\u27e6" not in fed
    # A PLS word reaches Piper too.
    pls_segment = next(s.text for s in plan_segments(georgia, range(len(georgia.chapters)), 1, "joe", "m")
                       if "Altamaha" in s.text)
    assert espeak_ipa("ˈɔltəməˌhɔ") in PH.findall(phoneme_input(pls_segment))


def test_other_voices_get_the_plain_words_normalised_in_context(georgia):
    for voice in ("tone", "cosyvoice3:anna"):
        first = first_sentence(georgia, voice)
        assert "\u27e6" not in first and "[[" not in first
        assert "between thirty degrees thirty-one minutes thirty-nine seconds and" in first
    assert voice_text(mark("N.", "nɔrθ"), "joe") == mark("N.", "nɔrθ")


def test_a_lexicon_changes_segment_texts_and_keys(georgia):
    plain_plan = plan_segments(georgia, [1], 1, "joe", "m")
    lex = parse_user_lexicon("Georgia = JOR-juh\n")
    with_lex = plan_segments(georgia, [1], 1, "joe", "m", lexicon=lex)
    assert len(plain_plan) == len(with_lex)
    changed = [(a, b) for a, b in zip(plain_plan, with_lex) if a.text != b.text]
    assert changed and all(a.key != b.key for a, b in changed)
    assert all(mark("JOR-juh") in b.text for _, b in changed)


def test_markup_is_never_split_across_segments(georgia):
    chapter = spoken_chapter(georgia, georgia.chapters[0])
    for seg in plan_segments(georgia, [0], 1, "joe", "m"):
        assert seg.text.count("\u27e6") == seg.text.count("\u27e7")
    assert chapter.paragraphs[1].count("\u27e6") == 15  # 14 ssml:ph and the PLS word "Alabama"


# -- Piper, for real ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def piper_voice():
    from epub2audio.voices import piper

    return piper.load()


def test_piper_phonemes_use_the_ipa(piper_voice, georgia):
    segment = first_sentence(georgia)
    fed = "".join("".join(s) for s in piper_voice.phonemes(segment))
    import unicodedata
    assert unicodedata.normalize("NFD", "θˈɜːti dɪɡɹˈiz") in fed


def test_piper_speaks_an_ssml_word_differently_from_the_plain_word(piper_voice, georgia):
    # "Mobile Bay": the book says ˈmoʊbil (MOH-beel), espeak alone says "mobile" like the phone.
    segment = next(s.text for s in plan_segments(georgia, [0], 1, "joe", "m") if mark("Mobile", "ˈmoʊbil") in s.text)
    sentence = re.search(r"[^.]*" + re.escape(mark("Mobile", "ˈmoʊbil")) + r"[^.]*", segment).group(0)
    with_ph = piper_voice.synthesize(sentence, 7)
    without = piper_voice.synthesize(plain(sentence), 7)
    assert with_ph and without and with_ph != without
    assert piper_voice.phonemes(sentence) != piper_voice.phonemes(plain(sentence))
