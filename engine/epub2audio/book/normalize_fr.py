"""French: written forms → what a French narrator says. The shared machinery is normalize_common.py.

Choices, where French allows several readings:

* Years are read as numbers ("mille sept cent quatre-vingt-neuf"), the form num2words gives; the
  older "dix-sept cent" is heard too, and the tests accept it.
* A number agrees with a feminine noun after it ("vingt et une heures", "une lieue"); the nouns
  are a list of those that books count (no lexicon of genders is at hand).
* Regnal numbers and counted numerals are cardinals ("Louis quatorze", "Chapitre douze") except
  one, which is "premier"/"première" ("François Ier", "Chapitre I").
* "1°, 2°" at the head of an enumeration are "primo, secundo"; elsewhere "°" is degrees.
* Units are singular below two ("un virgule cinq kilomètre"), as the French rule has it.
"""

from __future__ import annotations

import re

from .normalize_common import Rules

_c = re.compile

_SUFFIX = "èmes|ème|ère|er|es|re|e|ᵉʳ|ʳᵉ|ᵉˢ|ᵉ"
_LATIN = ["primo", "secundo", "tertio", "quarto", "quinto", "sexto", "septimo", "octavo", "nono", "decimo"]


class French(Rules):
    lang = "fr"
    decimal = "virgule"
    minus = "moins"
    to = "à"
    percent = "pour cent"
    titles = {"M.": "Monsieur", "MM.": "Messieurs", "Mme": "Madame", "Mmes": "Mesdames",
              "Mlle": "Mademoiselle", "Mlles": "Mesdemoiselles", "Dr": "docteur", "Dr.": "docteur",
              "Me": "Maître", "Mgr": "Monseigneur", "Pr": "professeur", "St": "Saint", "Ste": "Sainte",
              "St.": "Saint", "Ste.": "Sainte"}
    name_joiners = r"(?:et|de|du|des|la|le)\s|d[’\']"
    phrases = {"&": "et", "av. J.-C.": "avant Jésus-Christ", "apr. J.-C.": "après Jésus-Christ",
               "ap. J.-C.": "après Jésus-Christ", "etc.": "et cetera", "p. ex.": "par exemple",
               "c.-à-d.": "c’est-à-dire", "c-à-d": "c’est-à-dire", "cf.": "confer", "Cie": "Compagnie"}
    can_end = frozenset(["etc.", "av. J.-C.", "apr. J.-C.", "ap. J.-C."])
    before_number = {"p.": "page", "pp.": "pages", "n°": "numéro", "nº": "numéro", "N°": "numéro",
                     "chap.": "chapitre", "t.": "tome", "vol.": "volume"}
    months = ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre",
              "octobre", "novembre", "décembre"]
    numbered = dict.fromkeys("chapitre livre tome acte volume titre article chant épisode fascicule".split(), "m") \
        | dict.fromkeys("partie scène section leçon annexe lettre planche figure".split(), "f")
    rulers = dict.fromkeys(
        "Louis Henri Charles François Philippe Napoléon Jean Pierre Paul Jean-Paul Pie Léon Grégoire "
        "Benoît Clément Innocent Urbain Boniface Jules Sixte Alexandre Nicolas Frédéric Guillaume Édouard "
        "Richard Georges Jacques Robert Hugues Raoul Lothaire Pépin Childéric Clovis Dagobert Othon "
        "Rodolphe Ferdinand Alphonse Victor-Emmanuel Humbert Léopold Albert Sanche Gustave Christian "
        "Olaf Ptolémée Ramsès Amenhotep Thoutmosis Darius Xerxès Artaxerxès Constantin Justinien "
        "Théodose Michel Basile Manuel Ivan Baudouin Amédée".split(), "m") | dict.fromkeys(
        "Catherine Élisabeth Elisabeth Marie Anne Jeanne Isabelle Victoria Marguerite Christine "
        "Cléopâtre".split(), "f")
    units = {"km": ("kilomètre", "kilomètres", "m"), "m": ("mètre", "mètres", "m"),
             "cm": ("centimètre", "centimètres", "m"), "mm": ("millimètre", "millimètres", "m"),
             "kg": ("kilogramme", "kilogrammes", "m"), "g": ("gramme", "grammes", "m"),
             "mg": ("milligramme", "milligrammes", "m"), "l": ("litre", "litres", "m"),
             "cl": ("centilitre", "centilitres", "m"), "ml": ("millilitre", "millilitres", "m"),
             "ha": ("hectare", "hectares", "m"), "t": ("tonne", "tonnes", "f"),
             "km/h": ("kilomètre à l’heure", "kilomètres à l’heure", "m"),
             "°C": ("degré Celsius", "degrés Celsius", "m"), "°F": ("degré Fahrenheit", "degrés Fahrenheit", "m"),
             "°": ("degré", "degrés", "m"), "′": ("minute", "minutes", "f"), "″": ("seconde", "secondes", "f"),
             "m²": ("mètre carré", "mètres carrés", "m"), "km²": ("kilomètre carré", "kilomètres carrés", "m"),
             "m³": ("mètre cube", "mètres cubes", "m")}
    money = {"€": ("euro", "euros", "m", "centime", "centimes"), "F": ("franc", "francs", "m", "centime", "centimes"),
             "fr.": ("franc", "francs", "m", "centime", "centimes"), "FF": ("franc", "francs", "m", "centime", "centimes"),
             "$": ("dollar", "dollars", "m", "cent", "cents"), "£": ("livre", "livres", "f", "penny", "pence")}
    feminine = frozenset(
        w + s for w in "heure lieue année page semaine minute seconde tonne personne femme brasse encablure "
        "journée nuit ligne victime piastre toise fille chose classe place île espèce dent jambe bouteille "
        "balle fenêtre maison ville âme lettre mer partie guinée couronne pièce ration étoile main "
        "tête porte marche chambre".split() for s in ("", "s")) | {"fois", "voix"}
    ordinal_suffix = _SUFFIX
    fractions = {"½": ("un demi", "demi"), "⅓": ("un tiers", "un tiers"), "⅔": ("deux tiers", "deux tiers"),
                 "¼": ("un quart", "un quart"), "¾": ("trois quarts", "trois quarts")}
    fraction_and = "et"
    half_after_noun = ("demi", "demie")
    measures = frozenset("an année années ans brasse brasses encablure encablures heure heures jour jours "
                         "kilo kilogramme kilogrammes kilomètre kilomètres kilos lieue lieues litre litres "
                         "livre livres mille milles minute minutes mois mètre mètres pied pieds pouce pouces "
                         "semaine semaines siècle siècles tasse tasses toise toises tonne tonnes verre verres".split())
    first_suffix = "er|ᵉʳ"

    def __init__(self):
        super().__init__()
        self._ordinal = _c(rf"(?<![\w.,])(?P<n>\d+)(?P<suffix>{_SUFFIX})(?![\w])")
        self._enumeration = _c(r"(?:^|(?<=[;:,.]\s))(?P<n>10|[1-9])°(?=\s+[^\W\d])")
        self._saint = _c(r"(?<![\w.])St(?P<e>e?)-(?=[A-ZÀ-Ý])")
        self._clock = _c(r"(?<![\w,.])(?P<h>[01]?\d|2[0-3])\s?h\s?(?P<m>[0-5]\d)?(?![\w])"
                         r"|(?<![\w,.:])(?P<h2>[01]?\d|2[0-3]):(?P<m2>[0-5]\d)(?![\d:])")

    def agree(self, words: str, gender: str | None, before: str = "") -> str:
        return words[:-2] + "une" if gender == "f" and (words == "un" or words.endswith((" un", "-un"))) else words

    def singular(self, written: str) -> bool:
        return abs(self.value(written)) < 2

    def big_of(self, words: str, noun: str) -> str:
        if not words.endswith(("million", "millions", "milliard", "milliards")):
            return ""
        return "d’" if noun[:1] in "aeéiouy" else "de "

    def abbreviations(self, text: str) -> str:
        if "St" in text:
            text = self._saint.sub(lambda m: "Sainte-" if m["e"] else "Saint-", text)
        return super().abbreviations(text)

    def title(self, written: str, m) -> str | None:
        if written == "Me" and not self.next_word(m)[:1].isupper():
            return None  # "Me le dira-t-il ?": the pronoun
        return super().title(written, m)

    def first(self, gender: str) -> str:
        return "première" if gender == "f" else "premier"

    def counted(self, word: str, value: int, gender: str) -> str:
        return self.first(gender) if value == 1 else self.cardinal(value)

    def regnal(self, name: str, value: int, gender: str, m) -> str:
        return self.first(gender) if value == 1 else self.cardinal(value)

    def suffixed(self, value: int, suffix: str) -> str:
        if value == 1 and suffix in ("er", "ᵉʳ"):
            return "premier"
        if value == 1 and suffix in ("re", "ère", "ʳᵉ"):
            return "première"
        return self.ordinal(value) + ("s" if suffix in ("es", "èmes", "ᵉˢ") else "")

    def first_of_month(self, m) -> str:
        return "premier "

    def times(self, text: str) -> str:
        def clock(m):
            hour, minute = int(m["h"] or m["h2"]), m["m"] or m["m2"]
            said = self.agree(self.cardinal(hour), "f") + (" heure" if hour <= 1 else " heures")
            return f"{said} {self.cardinal(int(minute))}" if minute and minute != "00" else said
        return self._clock.sub(clock, text)

    def ordinals(self, text: str) -> str:
        text = self._ordinal.sub(lambda m: self.suffixed(int(m["n"]), m["suffix"]), text)
        if "°" in text:
            text = self._enumeration.sub(lambda m: _LATIN[int(m["n"]) - 1].capitalize()
                                         if m.start() == 0 else _LATIN[int(m["n"]) - 1], text)
        return text


normalize = French().normalize
