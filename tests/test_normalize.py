"""English normalisation: written text → what a good narrator says. The table is normalize_cases.py."""

import pytest

from epub2audio.book.normalize import normalize, rules_for
from normalize_cases import CATEGORIES, HEADINGS


def _failures(category: str) -> list[str]:
    heading = category in HEADINGS
    failed = []
    for written, *readings in CATEGORIES[category]:
        spoken = normalize(written, "en-US", heading=heading)
        if spoken not in readings:
            failed.append(f"  {written!r} → {spoken!r}, want {' or '.join(map(repr, readings))}")
    return failed


def test_the_table_has_at_least_400_cases():
    assert sum(len(cases) for cases in CATEGORIES.values()) >= 400


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_category(category):
    failed = _failures(category)
    total = len(CATEGORIES[category])
    passed = total - len(failed)
    assert not failed, f"{category}: {passed}/{total} pass ({100 * passed / total:.0f} %)\n" + "\n".join(failed)


def test_a_number_too_long_for_num2words_is_read_digit_by_digit():
    # A hostile book's digit string: int() refuses over 4300 digits and num2words far fewer.
    spoken = normalize("code " + "12" * 3000 + " ends", "en")
    assert spoken.split()[:4] == ["code", "one", "two", "one"] and spoken.endswith("one two ends")
    assert len(spoken.split()) == 6002
    assert normalize("the 1234567890123456789th", "en").split()[1:4] == ["one", "two", "three"]


def test_languages_num2words_does_not_know_are_only_tidied():
    # French, German, Spanish and Italian have rules of their own, Russian and the others num2words
    # knows its numbers (tests/test_normalize_languages.py); Chinese neither.
    assert normalize("  第1章  ", "zh") == "第1章"
    assert normalize("  Ему было 53 года  ", "ru") == "Ему было пятьдесят три года"


def test_missing_language_means_english_only_for_latin_text():
    assert rules_for("", "He was 7.") is not None
    assert rules_for("", "老子第1章") is None
    assert normalize("He was 7.", "") == "He was seven."


def test_pronunciation_markup_is_left_alone():
    text = "between \u27e630°|ipa:ˈθɜrti dɪˈgriz\u27e7 and \u27e6her-MY-oh-nee\u27e7 in 1900"
    assert normalize(text, "en") == ("between \u27e6thirty degrees|ipa:ˈθɜrti dɪˈgriz\u27e7 and "
                                     "\u27e6her-MY-oh-nee\u27e7 in nineteen hundred")
