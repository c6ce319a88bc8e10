"""French, German, Spanish and Italian normalisation: every case of the four tables
(tests/normalize_cases_{fr,de,es,it}.py), and the dispatcher that picks the language's rules."""

import importlib

import pytest

from epub2audio.book import normalize_de, normalize_en, normalize_es, normalize_fr, normalize_it
from epub2audio.book.epub import load_book
from epub2audio.book.normalize import normalize, rules_for
from epub2audio.book.segment import segment_chapter
from epub2audio.render import spoken_chapter
from epub_factory import in_language, make_epub, xhtml

LANGUAGES = ["fr", "de", "es", "it"]
TABLES = {lang: importlib.import_module(f"normalize_cases_{lang}") for lang in LANGUAGES}


def _failures(lang: str, category: str) -> list[str]:
    table = TABLES[lang]
    failed = []
    for written, readings in table.CATEGORIES[category]:
        spoken = normalize(written, lang, heading=category in table.HEADINGS)
        if spoken not in readings:
            failed.append(f"  {written!r} → {spoken!r}, want {' or '.join(map(repr, readings))}")
    return failed


@pytest.mark.parametrize("lang", LANGUAGES)
def test_each_table_has_at_least_150_cases_with_readings(lang):
    cases = [case for rows in TABLES[lang].CATEGORIES.values() for case in rows]
    assert len(cases) >= 150
    assert all(isinstance(written, str) and readings and all(isinstance(r, str) for r in readings)
               for written, readings in cases)
    assert len({written for written, _ in cases}) == len(cases)  # no case written twice


@pytest.mark.parametrize("lang,category", [(lang, c) for lang in LANGUAGES for c in TABLES[lang].CATEGORIES])
def test_category(lang, category):
    failed = _failures(lang, category)
    total = len(TABLES[lang].CATEGORIES[category])
    passed = total - len(failed)
    assert not failed, f"{lang} {category}: {passed}/{total} pass ({100 * passed / total:.0f} %)\n" + "\n".join(failed)


def test_the_share_passing_over_all_four_tables_is_100_percent():
    total = sum(len(rows) for t in TABLES.values() for rows in t.CATEGORIES.values())
    failed = [f for lang in LANGUAGES for category in TABLES[lang].CATEGORIES for f in _failures(lang, category)]
    share = 100 * (total - len(failed)) / total
    print(f"fr/de/es/it normalisation: {total - len(failed)}/{total} cases pass ({share:.1f} %)")  # pytest -rP
    assert not failed, f"{total - len(failed)}/{total} pass ({share:.1f} %)\n" + "\n".join(failed)


@pytest.mark.parametrize("tag,rules", [
    ("fr", normalize_fr.normalize), ("fr-CA", normalize_fr.normalize), ("de-AT", normalize_de.normalize),
    ("de_CH", normalize_de.normalize), ("es-MX", normalize_es.normalize), ("ES", normalize_es.normalize),
    ("it-IT", normalize_it.normalize), ("en-GB", normalize_en.normalize),
])
def test_the_primary_subtag_picks_the_module(tag, rules):
    assert rules_for(tag) is rules


# In the languages num2words knows and we have no rules of our own for (normalize_num2words.py):
# what a narrator says, where the plain cardinal (or num2words' decimal) is what is said.
NUM2WORDS_CASES = [
    ("ru", "Ему было 53 года.", "Ему было пятьдесят три года."),
    ("ru", "Население — 1 500 000 человек.", "Население — один миллион пятьсот тысяч человек."),
    ("ru", "Ночью было до -5, днём 3,5 градуса.", "Ночью было до минус пять, днём три целых пять десятых градуса."),
    ("ru", "Это было в 1812 — тысяча восемьсот двенадцать.", "Это было в тысяча восемьсот двенадцать — тысяча "
                                                             "восемьсот двенадцать."),
    ("uk", "Йому було 33 роки.", "Йому було тридцять три роки."),
    ("pt-BR", "Em 1500, Cabral chegou com 13 navios.", "Em mil e quinhentos, Cabral chegou com treze navios."),
    ("pt", "Custou 1.200 escudos.", "Custou mil e duzentos escudos."),
    ("nl", "Hij was 21 jaar en had 3,5 gulden.", "Hij was eenentwintig jaar en had drie komma vijf gulden."),
    ("pl", "Miał 40 lat.", "Miał czterdzieści lat."),
    ("sv", "Han var 30 år gammal.", "Han var trettio år gammal."),
    ("nb", "Hun hadde 12 barn.", "Hun hadde tolv barn."),
    ("da", "Der var 25 mænd.", "Der var femogtyve mænd."),
    ("fi", "Talossa oli 7 huonetta.", "Talossa oli seitsemän huonetta."),
    ("cs", "Bylo mu 25 let.", "Bylo mu dvacet pět let."),
    ("ja", "1868年に明治が始まった。", "千八百六十八年に明治が始まった。"),
    # Run into letters, a part of a name or a code: left as written.
    ("ru", "Формат A4 и 3D-печать.", "Формат A4 и 3D-печать."),
    # Too long for a number: a phone number or an ISBN, digit by digit.
    ("nl", "Bel 12345678901234567", "Bel één twee drie vier vijf zes zeven acht negen nul één twee drie vier vijf "
                                    "zes zeven"),
]
# What a narrator says that the plain cardinal is not: a year or a date in a declined ordinal.
NUM2WORDS_BEYOND = [
    ("ru", "Это было в 1812 году.", "Это было в тысяча восемьсот двенадцатом году."),
    ("pl", "W 1918 roku.", "W tysiąc dziewięćset osiemnastym roku."),
]


@pytest.mark.parametrize("lang, written, said", NUM2WORDS_CASES)
def test_languages_num2words_knows_read_their_numbers(lang, written, said):
    assert normalize(written, lang) == said


@pytest.mark.xfail(strict=True, reason="a declined ordinal (a year, a date) is past num2words' cardinal: "
                                       "normalize_num2words.py says the plain number")
@pytest.mark.parametrize("lang, written, said", NUM2WORDS_BEYOND)
def test_a_declined_year_is_past_the_num2words_fallback(lang, written, said):
    assert normalize(written, lang) == said


def test_languages_without_number_rules_are_only_tidied_and_their_book_says_so(tmp_path):
    assert rules_for("zh") is None and rules_for("xh") is None and rules_for("hi") is None
    assert normalize("  第 12 回  ", "zh") == "第 12 回"
    path = make_epub(tmp_path, {"c1.xhtml": xhtml("<p>第1回 宴桃園豪傑三結義。</p><p lang='en' xml:lang='en'>In 1522.</p>"
                                                  "<p>Umama wayenabantwana aba-3.</p>")},
                     nav=[("One", "c1.xhtml")])
    assert load_book(in_language(path, "zh")).warnings == ["2 digits are left as written: no number reading for the book's language (zh), "
                                        "so the voice says them as its own front end can"]  # not the English 1522


def test_one_text_in_each_language():
    written = "Le 14 juillet 1789, 20 % de 1 234 hommes"
    assert normalize(written, "fr") == ("Le quatorze juillet mille sept cent quatre-vingt-neuf, vingt pour cent "
                                        "de mille deux cent trente-quatre hommes")
    assert normalize("Am 3. Oktober 1990 um 14.30 Uhr", "de") == \
        "Am dritten Oktober neunzehnhundertneunzig um vierzehn Uhr dreißig"
    assert normalize("El 12 de octubre de 1492, Felipe II", "es") == \
        "El doce de octubre de mil cuatrocientos noventa y dos, Felipe segundo"
    assert normalize("Il 2 giugno 1946 alle 14,30", "it") == \
        "Il due giugno millenovecentoquarantasei alle quattordici e trenta"
    # The same digits in English are English words: the language decides, not the text.
    assert normalize("20 %", "en") == "twenty percent"


def test_english_goes_to_the_english_rules_unchanged():
    # The English table (tests/test_normalize.py, 517 cases) is the proof of the readings; this is
    # the proof that the dispatcher still hands English text to them and to nothing else.
    for text in ["On 4 July 1776 at 8:15 a.m. Mr. Smith paid $5.50 for Chapter XII.", "Louis XIV", "in 1789"]:
        assert normalize(text, "en-US") == " ".join(normalize_en.normalize(text).split())
    assert normalize("Louis XIV", "en") == "Louis the Fourteenth"
    assert normalize("Louis XIV", "fr") == "Louis quatorze"


def test_a_number_too_long_for_num2words_is_read_digit_by_digit():
    for lang, one, two in [("fr", "un", "deux"), ("de", "eins", "zwei"), ("es", "uno", "dos"), ("it", "uno", "due")]:
        spoken = normalize("code " + "12" * 3000 + " fin", lang)
        assert spoken.split()[:3] == ["code", one, two] and len(spoken.split()) == 6002


def _book(tmp_path, body: str, language: str):
    path = make_epub(tmp_path, {"c1.xhtml": xhtml(body, "One")}, nav=[("One", "c1.xhtml")])
    book = load_book(path)
    book.language = language
    return book


def test_a_french_book_is_read_in_french_words(tmp_path):
    book = _book(tmp_path, "<p>M. Aronnax avait 40 ans en 1866.</p>", "fr-FR")
    spoken = spoken_chapter(book, book.chapters[0])
    assert spoken.paragraphs[-1] == "Monsieur Aronnax avait quarante ans en mille huit cent soixante-six."


def test_a_passage_in_another_language_is_read_by_its_own_rules(tmp_path):
    book = _book(tmp_path, '<p>He paid 12 pounds, <span xml:lang="de">also 12 Mark</span>, '
                           '<span xml:lang="es">o sea 21 pesetas</span>.</p>', "en")
    planned = segment_chapter(0, spoken_chapter(book, book.chapters[0]))
    assert [(s.text, s.lang) for s in planned][-3:] == [
        ("He paid twelve pounds,", None), ("also zwölf Mark,", "de"), ("o sea veintiuna pesetas.", "es")]


ODD = ["5.5.5", "3.14", "0.4.30", "12:99", "31.13.2000", "B2x", "1’234’567", "-0", "1 000 000 000", "n° 0",
       "7ᵉ", "x" + "9" * 40, "1/0", "2½", "99,999 €", "1.000,5 km", "0 h 0", "24:00", "00.00 Uhr", "le 0/0/0000"]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_digit_reaches_the_voice_from_odd_text(lang):
    # A numeral no rule reads as a whole is still read: the voice never gets digits to read in
    # whatever language its own front end assumes.
    for written in ODD:
        spoken = normalize(f"avant {written} après", lang)
        assert not any(c.isdigit() for c in spoken), (written, spoken)
        assert spoken.startswith("avant ") and spoken.endswith(" après"), (written, spoken)
