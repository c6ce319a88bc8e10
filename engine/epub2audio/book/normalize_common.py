"""What the normalisers of French, German, Spanish and Italian share: written forms → spoken words.

A language is a `Rules` subclass that holds its data (titles and abbreviations, month names, units,
currencies, the words that count a Roman numeral, its rulers' names) and says the few things
that differ in grammar: how a number agrees with its noun, how an ordinal is said, how a clock
time is read. The words themselves come from num2words. The rules run in a fixed order so that
the more specific reading wins: abbreviations and eras, Roman numerals, dates, times, fractions,
money, ordinals, units, ranges, then every other number, and last any digits still left (so the
voice never reads a numeral by its own front end). Every pattern is one linear pass.

Numbers are written the continental way: a decimal comma, and thousands grouped by a space (any
Unicode space has become a plain one by the time the rules run), a point or an apostrophe.
"""

from __future__ import annotations

import re
from functools import lru_cache

from num2words import num2words

_c = re.compile

# A whole word that is a well-formed Roman numeral (never the empty string).
ROMAN = r"(?=[MDCLXVI]+\b)M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})(?<=[MDCLXVI])"
_ROMAN_VALUES = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}
_IS_ROMAN = _c(ROMAN + "|" + ROMAN.lower())


def roman_value(numeral: str) -> int:
    numeral = numeral.upper()
    total = 0
    for i, c in enumerate(numeral):
        v = _ROMAN_VALUES[c]
        total += -v if i + 1 < len(numeral) and _ROMAN_VALUES[numeral[i + 1]] > v else v
    return total


def splice(pattern: re.Pattern, reading, text: str) -> str:
    """Like pattern.sub, but `reading` may also replace text just before the match (the word a
    numeral belongs to) and says where its replacement starts and ends, or None to leave it."""
    out, pos = [], 0
    for m in pattern.finditer(text):
        said = reading(m)
        if said is None or said[0] < pos:
            continue
        start, end, words = said
        out.append(text[pos:start])
        out.append(words)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def cap(words: str) -> str:
    return words[:1].upper() + words[1:]


LONGEST = 15  # longer digit strings (serial numbers, a hostile book's million digits) are read digit by digit
UPPER = "A-ZÀ-ÖØ-Þ"
# Where a sentence starts: the text's start, or after a stop, with any opening quote or dash.
_OPENERS = r"[\s«\"“‘(¿¡—–-]*$"
_AFTER_STOP = _c(r"[.!?…]\s+" + _OPENERS)
_AT_START = _c(r"^" + _OPENERS)
# After an abbreviation's period, what says the period also ends the sentence.
_NEXT_SENTENCE = _c(rf"\s*$|\s+[«\"“‘(¿¡—]?[{UPPER}]")
_NAME = _c(rf"[{UPPER}][a-zß-ÿ]{{2,}}")
_NEXT_WORD = _c(r"\s*([^\W\d_][\w’'-]*)")
_PREV_WORD = _c(r"([^\W\d_][\w’'-]*)\s+$")


def starts_sentence(text: str, start: int) -> bool:
    before = text[max(0, start - 12):start]
    return bool(_AFTER_STOP.search(before) or start <= 12 and _AT_START.match(before))


def _written(form: str) -> str:
    """A written abbreviation as a pattern: a space after a period may be missing ("z.B.", "a.C.")."""
    out = []
    for i, ch in enumerate(form):
        if ch == " " and i and form[i - 1] == ".":
            out.append(r"\s?")
        elif ch == " ":
            out.append(r"\s")
        else:
            out.append(re.escape(ch))
    return "".join(out)


class Rules:
    """One language's normaliser. Subclasses set the data below and override the grammar hooks."""

    lang = ""                     # num2words' language code
    decimal = ""                  # the word for the decimal comma
    minus = ""
    to = ""                       # between the ends of a range
    percent = ""
    digit_by_digit = False        # decimals said digit by digit (German) or as a number
    thousands = " .’'"            # characters that group thousands
    titles: dict[str, str] = {}   # before a name: "M." → "Monsieur"
    phrases: dict[str, str] = {}  # anywhere: "etc." → "et cetera", eras
    can_end: frozenset[str] = frozenset()  # the phrases whose period may also end the sentence
    before_number: dict[str, str] = {}  # only before a number: "p." → "page"
    months: list[str] = []
    numbered: dict[str, str] = {}  # lower-case word that counts a numeral → its gender ("m"/"f")
    rulers: dict[str, str] = {}    # a ruler's name → gender
    units: dict[str, tuple[str, str, str]] = {}    # written → (singular, plural, gender)
    money: dict[str, tuple[str, str, str, str, str]] = {}  # sign → (one, many, gender, cent, cents)
    feminine: frozenset[str] = frozenset()  # nouns a number agrees with as feminine
    fractions: dict[str, tuple[str, str]] = {}  # "½" → (alone, after a whole number): ("un demi", "demi")
    fraction_and = ""             # between a whole number and its fraction ("deux et demi")
    half_after_noun: tuple[str, str] | None = None  # "2 ½ lieues" → "deux lieues et demie": (masculine, feminine)
    measures: frozenset[str] = frozenset()  # the nouns a half follows ("lieues", "horas"), not any next word
    ordinal_suffix = ""           # a suffix that makes a Roman numeral an ordinal (French "XIXe")
    roman_period = False          # a period after a ruler's numeral belongs to it (German "Karl V.")
    unknown_rulers = True         # any capitalised name takes II … XXXIX ("Rocky II"; not German nouns)
    name_joiners = r"et\s"       # after a title, what may come before the name ("M. et Mme …", "M. de …")
    first_suffix = ""            # what may follow the 1 of the first of a month ("1er", "1.º")

    def __init__(self):
        num = rf"\d{{1,3}}(?:[{re.escape(self.thousands)}]\d{{3}})+(?!\d)(?:,\d+)?|\d+(?:,\d+)?"
        signed = rf"(?P<sign>(?:(?<=[\s(\[])|^)[-−])?(?P<n>{num})"  # "-5", "(−2": a minus sign, not a dash
        self._plain = _c(rf"(?<![\w.,]){signed}(?![\w])")
        self._phrase_rules = [(_c(rf"(?<![\w.]){_written(w)}(?!\w)"), said, w in self.can_end)
                              for w, said in sorted(self.phrases.items(), key=lambda kv: -len(kv[0]))]
        titles = "|".join(_written(t) for t in sorted(self.titles, key=len, reverse=True))
        self._title = _c(rf"(?<![\w.-])(?P<t>{titles})(?!\w)\s*(?=[{UPPER}]|{self.name_joiners})")
        self._title_keys = {re.sub(r"\s", "", t): said for t, said in self.titles.items()}
        before = "|".join(_written(t) for t in sorted(self.before_number, key=len, reverse=True))
        self._before_number = _c(rf"(?<![\w.])(?P<t>{before})\s*(?=\d)")
        self._before_keys = {re.sub(r"\s", "", t): said for t, said in self.before_number.items()}
        suffix = rf"(?P<suffix>{self.ordinal_suffix})?" if self.ordinal_suffix else "(?P<suffix>)"
        period = r"(?P<period>\.)?" if self.roman_period else "(?P<period>)"
        self._numeral = _c(rf"(?<![\w’'])(?P<num>[IVXLCDM]+){suffix}(?![\w’']){period}")
        self._word_before = _c(r"([^\W\d_][\w’'-]*)[\s,]*$")
        month = "|".join(self.months)
        self._numeric_date = _c(r"(?<![\w.,/:-])(?P<d>[0-3]?\d)(?P<s>[./-])(?P<mo>[01]?\d)(?P=s)(?P<y>\d{4})"
                                r"(?![\w]|[.,/-]\d)")
        self._first_of_month = _c(rf"(?<![\w.,])1(?P<suffix>{self.first_suffix})?\s+(?P<de>de\s+)?"
                                  rf"(?={month}\b)")
        signs_after = "|".join(re.escape(s) for s in sorted(self.money, key=len, reverse=True))
        signs_before = "|".join(re.escape(s) for s in self.money if not s[0].isalpha() or s.endswith("."))
        self._money_after = _c(rf"(?<![\w.,])(?P<n>{num})\s?(?P<sign>{signs_after})(?:(?<=\.)|(?![\w]))")
        self._money_before = _c(rf"(?<![\w])(?P<sign>{signs_before})\s?(?P<n>{num})(?![\w])")
        units = "|".join(re.escape(u).replace("°", r"°\s?") for u in sorted(self.units, key=len, reverse=True))
        self._unit = _c(rf"(?<![\w.,]){signed}\s?(?P<unit>{units})(?![\w²’'])")
        self._percent = _c(rf"(?<![\w.,]){signed}\s?%")
        self._range = _c(r"(?<![\w.,/-])(?P<a>\d+)\s?[-–]\s?(?P<b>\d+)(?![\w]|[.,/-]\d)")
        self._fraction = _c(r"(?:(?<![\d.,])(?P<whole>\d+)\s?)?(?P<f>[½⅓⅔¼¾]|(?<![\d/])(?:1/2|1/3|2/3|1/4|3/4)(?![\d/]))"
                            r"(?:\s(?P<noun>[^\W\d_][\w’'-]*))?")
        self._digits = _c(r"\d+")
        self._long = _c(rf"\d{{{LONGEST + 1},}}")
        self._heading = _c(rf"(?P<num>{ROMAN}|{ROMAN.lower()})(?P<rest>[.:]?(?:\s.*)?)", re.DOTALL)
        self._lone = _c(r"(?P<num>[IVXL]{2,})\.?")

    # ------------------------------------------------------------------------------------------
    # Numbers

    @lru_cache(maxsize=4096)  # num2words is slow; books repeat their numbers
    def cardinal(self, n: int) -> str:
        return num2words(n, lang=self.lang) if n < 10 ** LONGEST else self.digits(str(n))

    @lru_cache(maxsize=4096)
    def ordinal(self, n: int) -> str:
        return num2words(n, lang=self.lang, to="ordinal") if n < 10 ** LONGEST else self.cardinal(n)

    def digits(self, digits: str) -> str:
        return " ".join(num2words(int(d), lang=self.lang) for d in digits)

    def number(self, written: str, sign: str = "") -> str:
        """'1 234,5' → the words; the thousands groups and the decimal comma of the language."""
        whole, _, frac = written.partition(",")
        whole = re.sub(r"\D", "", whole)
        words = self.cardinal(int(whole)) if len(whole) <= LONGEST else self.digits(whole)
        if frac:
            if self.digit_by_digit:
                said = self.digits(frac)
            else:
                zeros = len(frac) - len(frac.lstrip("0"))
                said = " ".join([self.cardinal(0)] * zeros + ([self.cardinal(int(frac))] if frac.strip("0") else []))
            words = f"{words} {self.decimal} {said}"
        return f"{self.minus} {words}" if sign else words

    @staticmethod
    def value(written: str) -> float:
        whole, _, frac = written.partition(",")
        return float(re.sub(r"\D", "", whole) + "." + (frac or "0"))

    def agree(self, words: str, gender: str | None, before: str = "") -> str:
        """The number's words as they stand before a noun of `gender` (None: no noun follows)."""
        return words

    def noun_gender(self, word: str) -> str | None:
        """The gender of the word after a number, or None where it is no noun the number counts."""
        if not word:
            return None
        return "f" if word.lower() in self.feminine else "m"

    def singular(self, written: str) -> bool:
        return written == "1"

    def year(self, written: str) -> str:
        return self.number(written)

    def big_of(self, words: str, noun: str) -> str:
        """Between a count ending in million(s) and the noun ("un million d’euros"); empty for none."""
        return ""

    # ------------------------------------------------------------------------------------------
    # Abbreviations

    def _keep_period(self, written: str, m) -> str:
        return "." if written.endswith(".") and _NEXT_SENTENCE.match(m.string, m.end()) else ""

    def _said(self, said: str, m) -> str:
        return cap(said) if starts_sentence(m.string, m.start()) else said

    def title(self, written: str, m) -> str | None:
        """The words for a title before a name, or None to leave it as written."""
        return self._title_keys[re.sub(r"\s", "", written)]

    @staticmethod
    def after_a_name(m) -> bool:
        """A capitalised word before the match: "José D. Pérez" holds an initial, not a title."""
        before = m.string[max(0, m.start() - 30):m.start()]
        prev = _PREV_WORD.search(before)
        return bool(prev) and prev[1][:1].isupper()

    @staticmethod
    def next_word(m) -> str:
        nxt = _NEXT_WORD.match(m.string, m.end())
        return nxt[1] if nxt else ""

    def abbreviations(self, text: str) -> str:
        for pattern, said, can_end in self._phrase_rules:
            text = pattern.sub(lambda m, said=said, can_end=can_end: said + (self._keep_period(m[0], m) if can_end
                                                                             else ""), text)
        if self.titles:
            def title(m):
                said = self.title(m["t"], m)
                return m[0] if said is None else self._said(said, m) + " "
            text = self._title.sub(title, text)
        if self.before_number:
            text = self._before_number.sub(
                lambda m: self._said(self._before_keys[re.sub(r"\s", "", m["t"])], m) + " ", text)
        return text

    # ------------------------------------------------------------------------------------------
    # Roman numerals

    def counted(self, word: str, value: int, gender: str) -> str:
        """A numeral after a word that counts it ("Chapitre XII")."""
        return self.cardinal(value)

    def regnal(self, name: str, value: int, gender: str, m) -> str:
        """A numeral after a ruler's name ("Louis XIV"); the name is said before it."""
        return self.cardinal(value)

    def suffixed(self, value: int, suffix: str) -> str:
        """A numeral with an ordinal suffix ("XIXe")."""
        return self.ordinal(value)

    def numeral(self, m) -> tuple[int, int, str] | None:
        num = m["num"]
        if not _IS_ROMAN.fullmatch(num):
            return None
        if m["suffix"]:
            if not set(num) <= set("IVX"):  # "De", "Me", "Le": words, not "500th"
                return None
            return m.start(), m.end(), self.suffixed(roman_value(num), m["suffix"])
        before = m.string[max(0, m.start() - 30):m.start()]
        w = self._word_before.search(before)
        if not w:
            return None
        word = w[1]
        start = m.start() - (len(before) - w.start())
        key = word.lower()
        if key in self.numbered and num not in ("C", "D", "L", "M"):
            said = f"{word} {self.counted(key, roman_value(num), self.numbered[key])}"
            return start, m.end("num"), said
        if word.isupper() and word.capitalize() in self.rulers:  # a shouted heading: "LOUIS XIV ET SON TEMPS"
            word = word.capitalize()
        name_ok = word in self.rulers or (self.unknown_rulers and len(num) >= 2 and set(num) <= set("IVX")
                                          and bool(_NAME.fullmatch(word)))
        if name_ok and "," not in before[w.end(1):]:
            end = m.end()
            said = f"{w[1]} {self.regnal(word, roman_value(num), self.rulers.get(word, 'm'), m)}"
            if m["period"]:
                said += self._keep_period(".", m)
            return start, end, said
        return None

    def romans(self, text: str, heading: bool) -> str:
        if any(c in text for c in "IVXLCDM"):
            text = splice(self._numeral, self.numeral, text)
        if heading:
            m = self._heading.fullmatch(text)
            if m and m["num"] and (m["num"] != "I" or m["rest"][:1] in (".", ":", "")):
                text = cap(self.cardinal(roman_value(m["num"]))) + m["rest"]
        else:
            m = self._lone.fullmatch(text)
            if m and _IS_ROMAN.fullmatch(m["num"]):
                text = cap(self.cardinal(roman_value(m["num"]))) + "."
        return text

    # ------------------------------------------------------------------------------------------
    # Dates, times, money, units

    def written_date(self, day: int, month: str, year: str) -> str:
        return f"{day} {month} {year}"

    def first_of_month(self, m) -> str:
        return m[0]

    def dates(self, text: str) -> str:
        def numeric(m):
            day, month = int(m["d"]), int(m["mo"])
            if not (1 <= day <= 31 and 1 <= month <= 12):
                return m[0]
            return self.written_date(day, self.months[month - 1], m["y"])
        text = self._numeric_date.sub(numeric, text)
        return self._first_of_month.sub(self.first_of_month, text)

    def times(self, text: str) -> str:
        return text

    def count(self, written: str, gender: str, m, one: str, many: str) -> str:
        """'21', 'f', … → 'vingt et une livres': the number agreeing with the noun after it."""
        words = self.number(written)
        if "," not in written:
            words = self.agree(words, gender, m.string[max(0, m.start() - 30):m.start()])
        noun = one if self.singular(written) else many
        return f"{words} {self.big_of(words, noun)}{noun}"

    def amount(self, units: str, cents: int, sign: str, m) -> str:
        one, many, gender, cent, cents_word = self.money[sign]
        said = self.count(units, gender, m, one, many) if units != "0" or not cents else ""
        if cents:
            said = self.with_cents(said, cents, cent, cents_word)
        return said

    def with_cents(self, said: str, cents: int, cent: str, cents_word: str) -> str:
        if not said:
            return f"{self.cardinal(cents)} {cent if cents == 1 else cents_word}"
        return f"{said} {self.cardinal(cents)}"

    def currency(self, text: str) -> str:
        if not self.money:
            return text

        def read(m):
            whole, _, frac = m["n"].partition(",")
            cents = int(frac.ljust(2, "0")[:2]) if frac and len(frac) <= 2 else 0
            if frac and len(frac) > 2:
                return f"{self.number(m['n'])} {self.money[m['sign']][1]}"
            said = self.amount(re.sub(r"\D", "", whole) or "0", cents, m["sign"], m)
            return said + (self._keep_period(m["sign"], m) if m.end("sign") == m.end() else "")
        text = self._money_after.sub(read, text)
        return self._money_before.sub(read, text)

    def units_and_percent(self, text: str) -> str:
        if "%" in text:
            text = self._percent.sub(lambda m: f"{self.number(m['n'], m['sign'])} {self.percent}", text)
        if not self.units:
            return text

        def read(m):
            one, many, gender = self.units[re.sub(r"\s", "", m["unit"])]
            whole, _, frac = m["n"].partition(",")
            if m["unit"] == "m" and len(frac) == 2 and not m["sign"]:  # "1,80 m": "un mètre quatre-vingts"
                return self.measure(self.count(re.sub(r"\D", "", whole), gender, m, one, many), int(frac))
            if m["sign"]:
                return f"{self.number(m['n'], m['sign'])} {one if self.singular(m['n']) else many}"
            return self.count(m["n"], gender, m, one, many)
        return self._unit.sub(read, text)

    def with_fraction(self, whole: str, glyph: str) -> str:
        return f"{whole} {self.fraction_and} {self.fractions[glyph][1]}"

    def fraction(self, m) -> str:
        glyph = {"1/2": "½", "1/3": "⅓", "2/3": "⅔", "1/4": "¼", "3/4": "¾"}.get(m["f"], m["f"])
        noun = m["noun"] or ""
        gender = self.noun_gender(noun)
        if m["whole"] and glyph == "½" and self.half_after_noun and noun.lower() in self.measures:
            whole = self.agree(self.cardinal(int(m["whole"])), gender)
            return f"{whole} {noun} {self.fraction_and} {self.half_after_noun[gender == 'f']}"
        said = self.with_fraction(self.cardinal(int(m["whole"])), glyph) if m["whole"] else self.fractions[glyph][0]
        return f"{said} {noun}" if noun else said

    def measure(self, said: str, hundredths: int) -> str:
        """A length in metres and centimetres: 'un mètre' + 80 → 'un mètre quatre-vingts'."""
        return f"{said} {self.cardinal(hundredths)}"

    def ordinals(self, text: str) -> str:
        return text

    # ------------------------------------------------------------------------------------------
    # Every other number

    def years(self, text: str) -> str:
        return text

    def plain_numbers(self, text: str) -> str:
        def read(m):
            words = self.number(m["n"], m["sign"])
            if "," in m["n"] or m["sign"]:
                return words
            nxt = _NEXT_WORD.match(m.string, m.end())
            gender = self.noun_gender(nxt[1]) if nxt else None
            return self.agree(words, gender, m.string[max(0, m.start() - 30):m.start()])
        return self._plain.sub(read, text)

    def leftover(self, m) -> str:
        """Digits no rule read: glued to letters ("B2") or to other numbers ("5.5.5", "3.14")."""
        s = m.string
        before = " " if m.start() and s[m.start() - 1].isalpha() else ""
        after = " " if m.end() < len(s) and s[m.end()].isalpha() else ""
        return before + self.cardinal(int(m[0])) + after

    def normalize(self, text: str, heading: bool = False) -> str:
        text = self._long.sub(lambda m: f" {self.digits(m[0])} ", text)
        if self.fractions and any(c in text for c in "½⅓⅔¼¾"):
            text = self._fraction.sub(self.fraction, text)
        text = self.abbreviations(text)
        text = self.romans(text, heading)
        if any(c.isdigit() for c in text):
            text = self.dates(text)
            text = self.times(text)
            if self.fractions:
                text = self._fraction.sub(self.fraction, text)
            text = self.currency(text)
            text = self.ordinals(text)
            text = self.units_and_percent(text)
            text = self._range.sub(lambda m: f"{m['a']} {self.to} {m['b']}", text)
            text = self.years(text)
            text = self.plain_numbers(text)
            text = self._digits.sub(self.leftover, text)
        text = " ".join(text.split())
        return text.replace(" ,", ",").replace(" .", ".")
