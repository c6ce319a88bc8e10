"""German: written forms → what a German narrator says. The shared machinery is normalize_common.py.

Choices, where German allows several readings:

* "3." is an ordinal where the grammar says so: after an article or a preposition that takes one
  ("am dritten Oktober", "der zweite Weltkrieg", "im neunzehnten Jahrhundert"), or before a month
  ("3. Oktober 1990" → "dritter Oktober"). Elsewhere "7." is a number that ends a sentence.
* Years from 1100 to 1999 standing alone are said in hundreds ("siebzehnhundertneunundachtzig").
* A ruler's numeral is an ordinal with its article, declined after a preposition or a genitive
  ("Karl der Fünfte", "unter Karl dem Fünften", "die Zeit Karls des Fünften").
* "1" before a noun is "ein"/"eine" (after a dative preposition "einem"/"einer"); the feminine
  nouns are a list of those books count. Decimals are said digit by digit ("drei Komma eins vier").
"""

from __future__ import annotations

import re

from num2words import num2words

from .normalize_common import ROMAN, Rules, cap, roman_value, starts_sentence

_c = re.compile

_MONTHS = ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober",
           "November", "Dezember"]
_WEAK = frozenset("am im vom zum zur beim den dem des einem einen einer eines seinem seinen seiner seines ihrem "
                  "ihren ihrer ihres diesem diesen dieses jedem jeden jedes keinem keinen keiner bis".split())
_NOMINATIVE = frozenset("der die das eine seine ihre diese jede keine".split())
_STRONG = frozenset("ein sein kein mein dein".split())
_ARTICLES = "|".join(sorted(_WEAK | _NOMINATIVE | _STRONG, key=len, reverse=True))
_DATIVE = frozenset("von vom mit unter bei nach zu seit aus vor gegenüber in".split())
_ACCUSATIVE = frozenset("für gegen um durch ohne".split())
_RULERS = ("Karl Friedrich Wilhelm Ludwig Heinrich Otto Maximilian Leopold Franz Joseph Josef Rudolf Albrecht "
           "Konrad Philipp Johann Georg August Ferdinand Sigismund Peter Iwan Gregor Pius Leo Innozenz Benedikt "
           "Johannes Paul Napoleon Richard Eduard Alexander Nikolaus Gustav Christian Lothar Ottokar Wenzel "
           "Ernst Clemens Klemens Urban Bonifatius Julius Sixtus Pippin Harald Olaf Erich Waldemar Knut").split()
_QUEENS = "Elisabeth Maria Katharina Anna Viktoria Margarete Christina Johanna Isabella Kleopatra".split()
# Nouns an ordinal without an article counts, by gender: "1. Kapitel" is "erstes Kapitel".
_COUNTED = dict.fromkeys("Kapitel Buch Jahrhundert Mal Jahr Stück Bild Lied Gebot Heft Semester".split(), "n") \
    | dict.fromkeys("Teil Band Akt Abschnitt Weltkrieg Tag Stock Platz Preis Versuch Satz Brief Gesang Auftritt "
                    "Aufzug".split(), "m") \
    | dict.fromkeys("Auflage Szene Klasse Liga Strophe Sinfonie Symphonie Etage Runde Staffel Folge Stunde "
                    "Woche".split(), "f")
_GENITIVE = {name + "s": name for name in _RULERS + _QUEENS if not name.endswith(("s", "x", "z"))}


class German(Rules):
    lang = "de"
    decimal = "Komma"
    minus = "minus"
    to = "bis"
    percent = "Prozent"
    digit_by_digit = True
    titles = {"Hr.": "Herr", "Hrn.": "Herrn", "Fr.": "Frau", "Frl.": "Fräulein", "Dr.": "Doktor",
              "Prof.": "Professor", "St.": "Sankt"}
    name_joiners = r"(?:und|von)\s"
    phrases = {"&": "und", "v. Chr.": "vor Christus", "n. Chr.": "nach Christus", "v. u. Z.": "vor unserer Zeitrechnung",
               "n. u. Z.": "nach unserer Zeitrechnung", "z. B.": "zum Beispiel", "usw.": "und so weiter",
               "usf.": "und so fort", "u. a.": "unter anderem", "d. h.": "das heißt", "bzw.": "beziehungsweise",
               "ca.": "circa", "etc.": "et cetera", "vgl.": "vergleiche", "geb.": "geboren", "gest.": "gestorben",
               "Jh.": "Jahrhundert", "Jhs.": "Jahrhunderts", "evtl.": "eventuell", "ggf.": "gegebenenfalls",
               "sog.": "sogenannt", "Mio.": "Millionen", "Mrd.": "Milliarden", "o. Ä.": "oder Ähnliches",
               "u. Ä.": "und Ähnliches", "v. a.": "vor allem", "z. T.": "zum Teil", "s. o.": "siehe oben",
               "s. u.": "siehe unten"}
    can_end = frozenset(["v. Chr.", "n. Chr.", "v. u. Z.", "n. u. Z.", "usw.", "usf.", "etc.", "o. Ä.", "u. Ä."])
    before_number = {"Nr.": "Nummer", "S.": "Seite", "Bd.": "Band", "Kap.": "Kapitel", "Abb.": "Abbildung",
                     "Tab.": "Tabelle", "Art.": "Artikel", "Abs.": "Absatz"}
    months = _MONTHS
    numbered = dict.fromkeys("kapitel teil buch band akt szene abschnitt artikel gesang brief anhang tafel "
                             "aufzug auftritt heft lektion strophe typ klasse stufe phase folge staffel runde "
                             "gruppe".split(), "m")
    rulers = dict.fromkeys(_RULERS, "m") | dict.fromkeys(_QUEENS, "f") \
        | {g: "f" if name in _QUEENS else "m" for g, name in _GENITIVE.items()}
    unknown_rulers = False  # German nouns are capitalised: "Typ II" is no ruler
    roman_period = True
    units = {"km": ("Kilometer", "Kilometer", "m"), "m": ("Meter", "Meter", "m"),
             "cm": ("Zentimeter", "Zentimeter", "m"), "mm": ("Millimeter", "Millimeter", "m"),
             "kg": ("Kilogramm", "Kilogramm", "n"), "g": ("Gramm", "Gramm", "n"), "mg": ("Milligramm", "Milligramm", "n"),
             "l": ("Liter", "Liter", "m"), "ml": ("Milliliter", "Milliliter", "m"), "ha": ("Hektar", "Hektar", "m"),
             "t": ("Tonne", "Tonnen", "f"), "km/h": ("Kilometer pro Stunde", "Kilometer pro Stunde", "m"),
             "°C": ("Grad Celsius", "Grad Celsius", "n"), "°F": ("Grad Fahrenheit", "Grad Fahrenheit", "n"),
             "°": ("Grad", "Grad", "n"), "′": ("Minute", "Minuten", "f"), "″": ("Sekunde", "Sekunden", "f"),
             "m²": ("Quadratmeter", "Quadratmeter", "m"), "km²": ("Quadratkilometer", "Quadratkilometer", "m"),
             "m³": ("Kubikmeter", "Kubikmeter", "m")}
    money = {"€": ("Euro", "Euro", "m", "Cent", "Cent"), "EUR": ("Euro", "Euro", "m", "Cent", "Cent"),
             "DM": ("Mark", "Mark", "f", "Pfennig", "Pfennig"), "$": ("Dollar", "Dollar", "m", "Cent", "Cent"),
             "£": ("Pfund", "Pfund", "n", "Penny", "Pence"), "Pf.": ("Pfennig", "Pfennig", "m", "Pfennig", "Pfennig"),
             "Fr.": ("Franken", "Franken", "m", "Rappen", "Rappen")}
    fractions = {"½": ("ein halb", "einhalb"), "⅓": ("ein Drittel", "ein Drittel"),
                 "⅔": ("zwei Drittel", "zwei Drittel"), "¼": ("ein Viertel", "ein Viertel"),
                 "¾": ("drei Viertel", "drei Viertel")}
    fraction_and = "und"
    feminine = frozenset("Frau Stunde Minute Sekunde Meile Woche Mark Tonne Million Milliarde Nacht Person Seite "
                         "Flasche Stadt Tür Sache Klasse Kugel Frage Münze Krone Elle Linie Tochter Schwester "
                         "Mutter Chance Auflage".split())

    def __init__(self):
        super().__init__()
        month = "|".join(_MONTHS + ["Jänner", "Feber"])
        self._ordinal = _c(rf"(?:\b(?P<art>(?i:{_ARTICLES}))\s+)?(?<![\w.,])(?P<n>\d{{1,4}})\.(?=\s+(?P<next>\S+))")
        self._month = _c(rf"(?:{month})\b")
        self._roman_ordinal = _c(rf"\b(?P<art>(?i:{_ARTICLES}))\s(?P<num>{ROMAN})\.(?=\s)")
        self._year = _c(r"(?<![\w.,])(?P<y>1[1-9]\d\d)(?![\w]|[.,]\d)")
        self._street = _c(r"(?<=[a-zäöüß])str\.")
        self._clock_uhr = _c(r"(?<![\w.,])(?P<h>[01]?\d|2[0-3])[.:](?P<m>[0-5]\d)\s?Uhr\b")
        self._hour_uhr = _c(r"(?<![\w.,])(?P<h>[01]?\d|2[0-3])\s?Uhr(?:\s(?P<m>[0-5]?\d)(?![\w.,]|\s+Minuten))?")
        self._clock = _c(r"\b(?P<pre>(?i:um|gegen|ab|bis|seit|von|nach))\s(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?!\d)")
        self._last_word = _c(r"(\w+)\W*$")

    def with_fraction(self, whole: str, glyph: str) -> str:
        if glyph == "½":
            return whole + "einhalb"  # "zweieinhalb"
        return super().with_fraction(whole, glyph)

    def noun_gender(self, word: str) -> str | None:
        if not word[:1].isupper():
            return None
        return "f" if word in self.feminine else "m"

    def agree(self, words: str, gender: str | None, before: str = "") -> str:
        if words != "eins" or gender is None:
            return words
        last = self._last_word.search(before)
        if last and last[1].lower() in _DATIVE:
            return "einer" if gender == "f" else "einem"
        return "eine" if gender == "f" else "ein"

    def abbreviations(self, text: str) -> str:
        if "str." in text:
            text = self._street.sub("straße", text)
        return super().abbreviations(text)

    def year(self, written: str) -> str:
        return num2words(int(written), lang="de", to="year")

    def years(self, text: str) -> str:
        return self._year.sub(lambda m: self.year(m["y"]), text)

    def written_date(self, day: int, month: str, year: str) -> str:
        return f"{day}. {month} {year}"

    def romans(self, text: str, heading: bool) -> str:
        # "im XIX. Jahrhundert": an ordinal written in Roman figures, read like "im 19. Jahrhundert".
        if "." in text:
            text = self._roman_ordinal.sub(lambda m: f"{m['art']} {roman_value(m['num'])}.", text)
        return super().romans(text, heading)

    def regnal(self, name: str, value: int, gender: str, m) -> str:
        before = m.string[max(0, m.start() - 60):m.start()].rstrip()
        before = before[: len(before) - len(name)]
        prev = self._last_word.search(before)
        prev = prev[1].lower() if prev else ""
        said = cap(self.ordinal(value))
        if name in _GENITIVE:
            return f"des {said}n" if gender == "m" else f"der {said}n"
        if prev in _DATIVE:
            return f"dem {said}n" if gender == "m" else f"der {said}n"
        if prev in _ACCUSATIVE:
            return f"den {said}n" if gender == "m" else f"die {said}"
        return f"der {said}" if gender == "m" else f"die {said}"

    def _hour(self, hour: str) -> str:
        return "ein" if int(hour) == 1 else self.cardinal(int(hour))

    def _clock_said(self, hour: str, minute: str | None) -> str:
        said = f"{self._hour(hour)} Uhr"
        return f"{said} {self.cardinal(int(minute))}" if minute and int(minute) else said

    def times(self, text: str) -> str:
        if "Uhr" in text:
            text = self._clock_uhr.sub(lambda m: self._clock_said(m["h"], m["m"]), text)
            text = self._hour_uhr.sub(lambda m: self._clock_said(m["h"], m["m"]), text)
        if ":" in text:
            text = self._clock.sub(lambda m: f"{m['pre']} {self._clock_said(m['h'], m['m'])}", text)
        return text

    def ordinals(self, text: str) -> str:
        def read(m):
            art = (m["art"] or "").lower()
            words = self.ordinal(int(m["n"]))
            gender = _COUNTED.get(m["next"].rstrip(",.;:"))
            if art in _WEAK:
                words += "n"
            elif art in _STRONG:
                words += "s" if gender == "n" else "r"
            elif not art:
                if self._month.match(m["next"]):
                    gender = "m"
                if gender is None:
                    return m[0]  # "Er war 7. Dann …": a number ending a sentence
                prev = self._last_word.search(m.string, max(0, m.start() - 20), m.start())
                dative = prev is not None and prev[1].lower() in _DATIVE  # "in dritter Auflage"
                words += {"m": "m" if dative else "r", "n": "m" if dative else "s", "f": "r" if dative else ""}[gender]
                return cap(words) if starts_sentence(m.string, m.start()) else words
            return f"{m['art']} {words}" if m["art"] else words
        return self._ordinal.sub(read, text)


normalize = German().normalize
