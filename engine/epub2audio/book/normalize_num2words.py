"""Numbers in the languages we have no rules of our own for, read by num2words where it knows the
language (Russian, Portuguese, Dutch, Polish, Swedish, Danish, Norwegian, Finnish, Czech, Turkish,
Ukrainian, Japanese, Hebrew, Arabic … : `covered()`; not Korean, see LEFT_TO_THE_VOICE).

Only what is a number whatever the grammar around it: a whole number, its thousands groups and
minus sign, and a decimal where num2words says one well (DECIMALS). A narrator would often decline
the number ("в 1812 году" is "в тысяча восемьсот двенадцатом году"); num2words gives the plain
cardinal, which is still a number the listener hears, where digits are left to whatever the
voice's own front end makes of them. A number run into letters ("A4", "3D") is left as written.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from typing import Callable

from num2words import CONVERTER_CLASSES, num2words

LONGEST = 15  # digits: longer runs (a phone number, an ISBN) are said digit by digit

# Languages that write a decimal point and group thousands with a comma ("1,234.5"); the others
# write a decimal comma and group thousands with a space or a point ("1 234,5", "1.234,5").
DECIMAL_POINT = frozenset({"ja", "he", "th", "am", "bn", "kn", "te", "cy", "tet", "ar", "fa"})
# Where num2words reads a decimal as a narrator would ("три целых пять десятых", "drie komma vijf");
# elsewhere (Turkish, Arabic, Vietnamese, Welsh) it misreads them, and a decimal is left as written.
DECIMALS = frozenset({"ru", "pt", "nl", "pl", "sv", "da", "no", "fi", "cs", "sk", "sl", "ro", "hu", "id", "lt",
                      "lv", "uk", "be", "sr", "ja", "he", "ca", "is", "az", "eo", "th", "fa"})
# Where num2words says a thousand as "one thousand" and a narrator says "thousand" ("тысяча
# восемьсот двенадцать").
ONE_THOUSAND = {"ru": ("одна тысяча", "тысяча"), "uk": ("одна тисяча", "тисяча"), "be": ("адна тысяча", "тысяча")}

UNSPACED = frozenset({"ja", "th"})
# Korean counts with two sets of numbers, native ("스물다섯 살") and Sino-Korean ("이십오 분"), as
# the counter after it decides; num2words knows only the second, so Korean digits stay for the voice.
LEFT_TO_THE_VOICE = frozenset({"ko"})

# num2words' code for a language tag's primary subtag where the two differ.
_CODES = {"nb": "no", "nn": "no"}


def covered(code: str) -> bool:
    """Whether num2words reads whole numbers in this language (a primary subtag, lower case)."""
    return _rules(_CODES.get(code, code)) is not None


def rules(code: str) -> Callable[[str, bool], str] | None:
    """The normaliser for this language (text, heading) → text, or None where num2words has none."""
    return _rules(_CODES.get(code, code))


@lru_cache(maxsize=None)
def _rules(code: str) -> Callable[[str, bool], str] | None:
    if code not in CONVERTER_CLASSES or code in LEFT_TO_THE_VOICE:
        return None
    try:
        num2words(21, lang=code)
    except (NotImplementedError, ValueError, TypeError):  # listed, yet cannot say a number (hi)
        return None
    return _Numbers(code).normalize


class _Numbers:
    def __init__(self, code: str):
        self.code = code
        point = code in DECIMAL_POINT
        group, mark = (",", r"\.") if point else (r" .", ",")
        number = rf"\d{{1,3}}(?:[{group}]\d{{3}})+(?!\d)(?:{mark}\d+)?|\d+(?:{mark}\d+)?"
        # A minus sign only after a space or a bracket: "5-7" is a range, not minus seven.
        # A number run into letters is no number ("A4"), but Japanese, Korean and Thai write words
        # without spaces, so there only Latin letters around it count ("1868年" is a year).
        word = r"[A-Za-z\u00c0-\u024f\d]" if code in UNSPACED else r"\w"
        self._number = re.compile(rf"(?<!{word})(?<![.,])(?P<sign>(?:(?<=[\s(\[])|^)[-−](?=\d))?(?P<n>{number})"
                                  rf"(?!{word}|[.,]\d)")
        self._mark = "." if point else ","
        self._group = re.compile(r"[ ,]" if point else r"[ .]")

    @lru_cache(maxsize=4096)  # num2words is slow; books repeat their numbers
    def say(self, value: Decimal | int) -> str:
        words = num2words(value, lang=self.code)
        if self.code in ONE_THOUSAND:
            one, plain = ONE_THOUSAND[self.code]
            words = re.sub(rf"^{one}\b", plain, words)
        return words

    def digits(self, digits: str) -> str:
        return " ".join(self.say(int(d)) for d in digits)

    def number(self, m: re.Match) -> str:
        whole, _, fraction = m["n"].partition(self._mark)
        whole = self._group.sub("", whole)
        if len(whole) > LONGEST:
            return m[0] if fraction or m["sign"] else f" {self.digits(whole)} "
        if fraction and (self.code not in DECIMALS or len(fraction) > LONGEST):
            return m[0]
        value = Decimal(f"{int(whole)}.{fraction}") if fraction else int(whole)
        try:
            return self.say(-value if m["sign"] else value)
        except (ValueError, TypeError, ArithmeticError):  # num2words cannot say it (a negative in Polish)
            return m[0]

    def normalize(self, text: str, heading: bool = False) -> str:
        if not any(c.isdigit() for c in text):
            return text
        text = self._number.sub(self.number, text)
        return " ".join(text.split())
