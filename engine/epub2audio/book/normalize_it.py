"""Italian: written forms → what an Italian narrator says. The shared machinery is normalize_common.py.

Choices, where Italian allows several readings:

* Roman numerals after a ruler's name, a book's part or "secolo" are ordinals, feminine after a
  feminine word ("Luigi quattordicesimo", "Parte seconda", "il diciannovesimo secolo").
* "3°", "2a" are ordinals after an article ("il terzo piano", "la seconda volta"); "°" without
  one is degrees ("fa venti gradi all’ombra"). "º" and "ª" are always ordinals.
* "uno" before a noun is "un" or "una"; a noun ending in -a is feminine, with the common
  exceptions ("problema", "poeta"). Compound numbers stay whole ("ventuno anni").
* Clock times after "alle", "ore", "le" … are "le quattordici e trenta".
* Compounds ending in three take their accent ("cinquantatré"), which num2words leaves off in
  some of them, and "diciotto" after a hundred keeps its vowel ("novecentodiciotto").
"""

from __future__ import annotations

import re

from .normalize_common import ROMAN, Rules, roman_value

_c = re.compile

_ARTICLES = ("il|lo|la|i|gli|le|un|una|del|dello|della|dei|degli|delle|al|allo|alla|ai|agli|alle|nel|nello|"
             "nella|nei|negli|nelle|dal|dallo|dalla|sul|sullo|sulla|suo|sua|mio|mia|questo|questa|quel|quella")
_MASCULINE_A = frozenset("problema tema sistema programma poeta pianeta clima dramma papa duca poema cinema "
                         "telegramma diploma".split())
_NOT_NOUNS = frozenset("di e ed o a ad da in con su per tra fra che è sono era erano del della al alla nel "
                       "nella dal dalla come più meno".split())


class Italian(Rules):
    lang = "it"
    decimal = "virgola"
    minus = "meno"
    to = "a"
    percent = "per cento"
    titles = {"sig.": "signor", "Sig.": "Signor", "sig.ra": "signora", "Sig.ra": "Signora", "sig.na": "signorina",
              "Sig.na": "Signorina", "sigg.": "signori", "Sigg.": "Signori", "dott.": "dottor", "Dott.": "Dottor",
              "dott.ssa": "dottoressa", "Dott.ssa": "Dottoressa", "prof.": "professor", "Prof.": "Professor",
              "prof.ssa": "professoressa", "Prof.ssa": "Professoressa", "avv.": "avvocato", "Avv.": "Avvocato",
              "ing.": "ingegner", "Ing.": "Ingegner", "on.": "onorevole", "On.": "Onorevole", "mons.": "monsignor",
              "Mons.": "Monsignor", "S.": "San"}
    name_joiners = r"(?:e|de|di)\s"
    phrases = {"&": "e", "a. C.": "avanti Cristo", "d. C.": "dopo Cristo", "ecc.": "eccetera", "ad es.": "ad esempio",
               "cfr.": "confronta", "ca.": "circa"}
    can_end = frozenset(["a. C.", "d. C.", "ecc."])
    before_number = {"pag.": "pagina", "pagg.": "pagine", "p.": "pagina", "pp.": "pagine", "n.": "numero",
                     "nn.": "numeri", "cap.": "capitolo", "vol.": "volume", "fig.": "figura", "art.": "articolo"}
    months = ["gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre",
              "ottobre", "novembre", "dicembre"]
    numbered = dict.fromkeys("capitolo libro atto canto volume tomo secolo articolo episodio titolo".split(), "m") \
        | dict.fromkeys("parte scena sezione lezione giornata pagina tavola".split(), "f")
    rulers = dict.fromkeys(
        "Luigi Carlo Vittorio Emanuele Umberto Federico Enrico Filippo Francesco Ferdinando Giovanni Pio Leone "
        "Gregorio Innocenzo Benedetto Paolo Clemente Urbano Bonifacio Giulio Sisto Alessandro Napoleone Guglielmo "
        "Ottone Corrado Lotario Berengario Ludovico Roberto Giacomo Pietro Martino Niccolò Nicola Adriano Eugenio "
        "Callisto Celestino Onorio Lorenzo Cosimo Amedeo Alfonso".split(), "m") \
        | dict.fromkeys("Elisabetta Maria Caterina Giovanna Anna Isabella Vittoria Margherita Cristina "
                        "Cleopatra".split(), "f")
    units = {"km": ("chilometro", "chilometri", "m"), "m": ("metro", "metri", "m"),
             "cm": ("centimetro", "centimetri", "m"), "mm": ("millimetro", "millimetri", "m"),
             "kg": ("chilogrammo", "chilogrammi", "m"), "g": ("grammo", "grammi", "m"),
             "mg": ("milligrammo", "milligrammi", "m"), "l": ("litro", "litri", "m"), "ml": ("millilitro", "millilitri", "m"),
             "ha": ("ettaro", "ettari", "m"), "t": ("tonnellata", "tonnellate", "f"),
             "km/h": ("chilometro orario", "chilometri orari", "m"),
             "°C": ("grado centigrado", "gradi centigradi", "m"), "°F": ("grado Fahrenheit", "gradi Fahrenheit", "m"),
             "°": ("grado", "gradi", "m"), "′": ("primo", "primi", "m"), "″": ("secondo", "secondi", "m"),
             "m²": ("metro quadrato", "metri quadrati", "m"), "km²": ("chilometro quadrato", "chilometri quadrati", "m"),
             "m³": ("metro cubo", "metri cubi", "m")}
    money = {"€": ("euro", "euro", "m", "centesimo", "centesimi"), "$": ("dollaro", "dollari", "m", "centesimo", "centesimi"),
             "£": ("sterlina", "sterline", "f", "penny", "pence"), "L.": ("lira", "lire", "f", "centesimo", "centesimi")}
    fractions = {"½": ("un mezzo", "mezzo"), "⅓": ("un terzo", "un terzo"), "⅔": ("due terzi", "due terzi"),
                 "¼": ("un quarto", "un quarto"), "¾": ("tre quarti", "tre quarti")}
    fraction_and = "e"
    half_after_noun = ("mezzo", "mezza")
    measures = frozenset("anni anno bicchiere bicchieri chili chilo chilometri chilometro giorni giorno lega "
                         "leghe libbra libbre litri litro mese mesi metri metro miglia miglio minuti minuto "
                         "ora ore secoli secolo settimana settimane tazza tazze tonnellata tonnellate".split())
    first_suffix = "º|°"

    def __init__(self):
        super().__init__()
        self._ordinal = _c(rf"(?:\b(?P<art>(?i:{_ARTICLES}))\s+)?(?<![\w.,])(?P<n>\d+)(?P<s>º|ª|°|a|o)(?![\w])")
        self._before_century = _c(rf"\b(?P<num>{ROMAN})(?=\s+secol[oi]\b)")
        self._clock = _c(r"(?P<pre>\b(?i:alle|dalle|delle|sulle|entro le|verso le|le|ore)\s|\b(?i:all|dall)[’'])"
                         r"(?P<h>[01]?\d|2[0-3])[,.:](?P<m>[0-5]\d)"
                         r"(?!\d|\s?(?:[€$£%]|lire\b|euro\b|dollari\b|[ck]?[mg]\b|km\b))")

    def cardinal(self, n: int) -> str:
        # num2words elides the vowel of "diciotto" after a hundred ("centodicotto"); it is "centodiciotto".
        words = super().cardinal(n).replace("dicotto", "diciotto")
        return words[:-3] + "tré" if words.endswith("tre") and len(words) > 3 else words

    def noun_gender(self, word: str) -> str | None:
        w = word.lower()
        if not word or w in _NOT_NOUNS:
            return None
        return "f" if w.endswith("a") and w not in _MASCULINE_A else "m"

    def agree(self, words: str, gender: str | None, before: str = "") -> str:
        if words != "uno" or gender is None:
            return words
        return "una" if gender == "f" else "un"

    def big_of(self, words: str, noun: str) -> str:
        return "di " if words.endswith(("milione", "milioni", "miliardo", "miliardi")) else ""

    def with_cents(self, said: str, cents: int, cent: str, cents_word: str) -> str:
        cents_said = f"{self.cardinal(cents)} {cent if cents == 1 else cents_word}"
        return f"{said} e {cents_said}" if said else cents_said

    def measure(self, said: str, hundredths: int) -> str:
        return f"{said} e {self.cardinal(hundredths)}"

    def title(self, written: str, m) -> str | None:
        if written == "S.":
            if self.after_a_name(m):
                return None  # "Giovanni S. Rossi": an initial
            return "Santa" if self.next_word(m).endswith("a") else "San"
        return super().title(written, m)

    def ordered(self, value: int, gender: str) -> str:
        words = self.ordinal(value)
        return words[:-1] + "a" if gender == "f" else words

    def counted(self, word: str, value: int, gender: str) -> str:
        return self.ordered(value, gender)

    def regnal(self, name: str, value: int, gender: str, m) -> str:
        return self.ordered(value, gender)

    def romans(self, text: str, heading: bool) -> str:
        if "secol" in text:
            text = self._before_century.sub(lambda m: self.ordinal(roman_value(m["num"])), text)
        return super().romans(text, heading)

    def first_of_month(self, m) -> str:
        return "primo "

    def times(self, text: str) -> str:
        def clock(m):
            hour = "una" if m["h"] in ("1", "01") else self.cardinal(int(m["h"]))
            minute = int(m["m"])
            return f"{m['pre']}{hour}" + (f" e {self.cardinal(minute)}" if minute else "")
        return self._clock.sub(clock, text)

    def ordinals(self, text: str) -> str:
        def read(m):
            if m["s"] in ("°", "a", "o") and not m["art"]:
                return m[0]  # degrees, or a letter after a number
            words = self.ordered(int(m["n"]), "f" if m["s"] in ("ª", "a") else "m")
            return f"{m['art']} {words}" if m["art"] else words
        return self._ordinal.sub(read, text)


normalize = Italian().normalize
