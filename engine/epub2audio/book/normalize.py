"""Written text → the words a narrator says.

Every language gets the tidying every voice needs (stray whitespace, typographic characters with no
sound). Languages with rules of their own plug in through `LANGUAGES`: language code (the primary
subtag of dc:language, or of a passage's xml:lang: render.py normalises each run of a paragraph
with its own language) → a function `(text, heading) -> text`. English lives in normalize_en.py
(numbers, years, dates, times, money, units, Roman numerals, abbreviations, shouting, dashes);
French, German, Spanish and Italian in normalize_fr/_de/_es/_it.py on the machinery they share in
normalize_common.py. In the other languages num2words knows (Russian, Portuguese, Dutch, Polish,
Swedish …), its numbers are read by normalize_num2words.py; in the rest (Chinese, Hindi, Xhosa …)
they are left to the voice's own front end, and the book says so in a warning.

A book with no dc:language is treated as English when its paragraph is mostly Latin letters.

Pronunciation markup (`⟦…⟧`, see lexicon.py) is opaque here: the IPA is never touched, and the
written side is normalised on its own (it is what voices without phoneme support read).
"""

from __future__ import annotations

from typing import Callable

from . import normalize_de, normalize_en, normalize_es, normalize_fr, normalize_it, normalize_num2words
from .lexicon import MARKUP, OPEN, SEP, protect, restore

_SILENT = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))  # soft hyphen, zero-widths

LANGUAGES: dict[str, Callable[[str, bool], str]] = {
    "en": normalize_en.normalize,
    "fr": normalize_fr.normalize,
    "de": normalize_de.normalize,
    "es": normalize_es.normalize,
    "it": normalize_it.normalize,
}


def _tidy(text: str) -> str:
    text = text.translate(_SILENT)
    return " ".join(text.split())  # str.split is several times faster than a regex on long text


def rules_for(language: str, text: str = "") -> Callable[[str, bool], str] | None:
    code = (language or "").split("-")[0].split("_")[0].lower()
    if not code:
        letters = [c for c in text if c.isalpha()]
        latin = sum(1 for c in letters if c.isascii())
        code = "en" if letters and latin / len(letters) > 0.9 else ""
    return LANGUAGES.get(code) or normalize_num2words.rules(code)


def reads_numbers(language: str) -> bool:
    """Whether numbers in this language become words here (our rules, or num2words's); a book in
    another language leaves its digits to the voice, and its reader says so in one warning."""
    code = (language or "en").split("-")[0].split("_")[0].lower()
    return code in LANGUAGES or normalize_num2words.covered(code)


def normalize(text: str, language: str = "en", *, heading: bool = False) -> str:
    text = _tidy(text)
    rules = rules_for(language, text)
    if rules is None or not text:
        return text
    protected, kept = protect(text)
    spoken = rules(protected, heading)
    # The written side of each markup is normalised on its own (voices without phonemes read it).
    kept = [_normalize_markup(m, rules) for m in kept]
    return _tidy(restore(spoken, kept))


def _normalize_markup(markup: str, rules) -> str:
    m = MARKUP.fullmatch(markup)
    if m is None or m.group(2) is None:
        return markup  # a respelling is said as written
    shown = _tidy(rules(m.group(1), False)) or m.group(1)
    return f"{OPEN}{shown}{SEP}ipa:{m.group(2)}{markup[-1]}"
