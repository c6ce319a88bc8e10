"""Spanish: written forms → what a Spanish narrator says. The shared machinery is normalize_common.py.

Choices, where Spanish allows several readings:

* A number agrees with the noun after it: "uno" shortens before a masculine noun ("veintiún
  años", "ciento un soldados") and turns feminine before a feminine one, as do the hundreds
  ("veintiuna pesetas", "doscientas millas"). A noun's gender is guessed from its ending (-a,
  -ión, -dad, -tud are feminine) with the common exceptions ("día", "mapa", "problema").
* Regnal numbers are ordinals up to ten and cardinals above ("Felipe segundo", "Alfonso trece");
  a century and a counted numeral are cardinals ("siglo diecinueve", "Capítulo doce").
* Clock times after "la"/"las" are read with "y cuarto", "y media" ("las ocho y cuarto").
* The first of a month is "primero" ("el primero de enero"), as it is read across the Americas
  and more and more in Spain.
"""

from __future__ import annotations

import re

from .normalize_common import Rules

_c = re.compile

_MASCULINE_A = frozenset(w + s for w in "día mapa problema idioma tema sistema programa planeta clima poema "
                         "drama telegrama poeta papa cometa".split() for s in ("", "s"))
_FEMININE = frozenset("razón razones vez veces mujer mujeres flor flores noche noches parte partes leche "
                      "nave naves calle calles gente torre torres llave llaves clase clases mano manos "
                      "sed fe red redes piel imagen imágenes orden".split())
_NOT_NOUNS = frozenset("de del y o u e ni a al en que por para con sin entre hasta desde más menos se no es son "
                       "fue era eran ha han hay como sobre tras según durante contra".split())
_ARTICLES = "el|la|los|las|del|al|un|una|su|sus|este|esta|ese|esa|aquel|aquella|mi|tu"


class Spanish(Rules):
    lang = "es"
    decimal = "coma"
    minus = "menos"
    to = "a"
    percent = "por ciento"
    titles = {"Sr.": "señor", "Sra.": "señora", "Srta.": "señorita", "Sres.": "señores", "Sras.": "señoras",
              "D.": "don", "Dña.": "doña", "D.ª": "doña", "Dª": "doña", "Dr.": "doctor", "Dra.": "doctora",
              "Sto.": "santo", "Sta.": "santa", "Fr.": "fray"}
    name_joiners = r"(?:y|de)\s"
    phrases = {"&": "y", "a. C.": "antes de Cristo", "a. de C.": "antes de Cristo", "a. J. C.": "antes de Jesucristo",
               "d. C.": "después de Cristo", "d. de C.": "después de Cristo", "d. J. C.": "después de Jesucristo",
               "etc.": "etcétera", "p. ej.": "por ejemplo", "Ud.": "usted", "Vd.": "usted", "Uds.": "ustedes",
               "Vds.": "ustedes", "S. M.": "Su Majestad", "EE. UU.": "Estados Unidos", "aprox.": "aproximadamente",
               "Avda.": "avenida"}
    can_end = frozenset(["a. C.", "a. de C.", "a. J. C.", "d. C.", "d. de C.", "d. J. C.", "etc.", "Ud.", "Vd.",
                         "Uds.", "Vds.", "EE. UU."])
    before_number = {"pág.": "página", "págs.": "páginas", "p.": "página", "núm.": "número", "n.º": "número",
                     "nº": "número", "N.º": "número", "cap.": "capítulo", "vol.": "volumen"}
    months = ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
              "noviembre", "diciembre"]
    numbered = dict.fromkeys("capítulo libro tomo acto canto volumen título artículo siglo tratado apéndice".split(),
                             "m") | dict.fromkeys("parte escena sección lección jornada página lámina".split(), "f")
    rulers = dict.fromkeys(
        "Felipe Carlos Fernando Alfonso Juan Enrique Luis Pedro Sancho Jaime Pío León Gregorio Inocencio Benedicto "
        "Pablo Napoleón Francisco Ramiro Ordoño Bermudo García Amadeo Leopoldo Guillermo Jorge Eduardo Federico "
        "Clemente Urbano Bonifacio Alejandro Nicolás Martín Sixto Julio Ricardo Manuel".split(), "m") \
        | dict.fromkeys("Isabel Juana María Catalina Urraca Berenguela Cristina Victoria".split(), "f")
    units = {"km": ("kilómetro", "kilómetros", "m"), "m": ("metro", "metros", "m"),
             "cm": ("centímetro", "centímetros", "m"), "mm": ("milímetro", "milímetros", "m"),
             "kg": ("kilogramo", "kilogramos", "m"), "g": ("gramo", "gramos", "m"), "mg": ("miligramo", "miligramos", "m"),
             "l": ("litro", "litros", "m"), "ml": ("mililitro", "mililitros", "m"), "ha": ("hectárea", "hectáreas", "f"),
             "t": ("tonelada", "toneladas", "f"), "km/h": ("kilómetro por hora", "kilómetros por hora", "m"),
             "°C": ("grado centígrado", "grados centígrados", "m"), "°F": ("grado Fahrenheit", "grados Fahrenheit", "m"),
             "°": ("grado", "grados", "m"), "′": ("minuto", "minutos", "m"), "″": ("segundo", "segundos", "m"),
             "m²": ("metro cuadrado", "metros cuadrados", "m"), "km²": ("kilómetro cuadrado", "kilómetros cuadrados", "m"),
             "m³": ("metro cúbico", "metros cúbicos", "m")}
    money = {"€": ("euro", "euros", "m", "céntimo", "céntimos"), "$": ("dólar", "dólares", "m", "centavo", "centavos"),
             "£": ("libra", "libras", "f", "penique", "peniques"),
             **dict.fromkeys(["ptas.", "pts.", "pta.", "Ptas.", "Pts."], ("peseta", "pesetas", "f", "céntimo", "céntimos"))}
    fractions = {"½": ("un medio", "medio"), "⅓": ("un tercio", "un tercio"), "⅔": ("dos tercios", "dos tercios"),
                 "¼": ("un cuarto", "un cuarto"), "¾": ("tres cuartos", "tres cuartos")}
    fraction_and = "y"
    half_after_noun = ("medio", "media")
    measures = frozenset("año años día días hora horas kilo kilos kilómetro kilómetros legua leguas libra "
                         "libras litro litros mes meses metro metros milla millas minuto minutos semana "
                         "semanas siglo siglos taza tazas tonelada toneladas vaso vasos".split())
    first_suffix = r"\.?º|\.?°"

    def __init__(self):
        super().__init__()
        self._ordinal = _c(rf"(?:\b(?P<art>(?i:{_ARTICLES}))\s+)?(?<![\w.,])(?P<n>\d+)\.?(?P<s>º|ª|°|er)(?![\w])")
        self._clock = _c(r"\b(?P<art>[Ll]as?)\s(?P<h>[01]?\d|2[0-3])(?:[:.](?P<m>[0-5]\d))?(?P<hh>\s?h\b\.?)?(?!\d)")

    def noun_gender(self, word: str) -> str | None:
        w = word.lower()
        if not word or w in _NOT_NOUNS:
            return None
        if w in _FEMININE or w.endswith(("ión", "iones", "dad", "dades", "tud", "tudes", "umbre", "umbres")):
            return "f"
        return "f" if w.endswith(("a", "as")) and w not in _MASCULINE_A else "m"

    def agree(self, words: str, gender: str | None, before: str = "") -> str:
        if gender is None:
            return words
        if gender == "f":
            if "mill" not in words:  # "doscientas mil pesetas", but "doscientos millones de pesetas"
                words = re.sub(r"ientos\b", "ientas", words)
            return re.sub(r"uno$", "una", words)
        return re.sub(r"veintiuno$", "veintiún", re.sub(r"(?<![a-zé])uno$", "un", words))

    def big_of(self, words: str, noun: str) -> str:
        return "de " if words.endswith(("millón", "millones", "millardo", "millardos")) else ""

    def with_cents(self, said: str, cents: int, cent: str, cents_word: str) -> str:
        cents_said = f"{self.cardinal(cents)} {cent if cents == 1 else cents_word}"
        return f"{said} con {cents_said}" if said else cents_said

    def ordinal(self, n: int) -> str:
        if 11 <= n <= 19:  # num2words writes "décimo cuarto"; the academy writes "decimocuarto"
            return "decimo" + super().ordinal(n - 10)
        return super().ordinal(n)

    @staticmethod
    def feminine_ordinal(words: str) -> str:
        return re.sub(r"o\b", "a", words)

    def title(self, written: str, m) -> str | None:
        if written == "D." and self.after_a_name(m):
            return None  # "José D. Pérez": an initial
        return super().title(written, m)

    def counted(self, word: str, value: int, gender: str) -> str:
        return self.feminine_ordinal(self.ordinal(1)) if value == 1 and gender == "f" else self.cardinal(value)

    def regnal(self, name: str, value: int, gender: str, m) -> str:
        if value > 10:
            return self.cardinal(value)
        return self.feminine_ordinal(self.ordinal(value)) if gender == "f" else self.ordinal(value)

    def written_date(self, day: int, month: str, year: str) -> str:
        return f"{day} de {month} de {year}"

    def first_of_month(self, m) -> str:
        return "primero " + (m["de"] or "")

    def times(self, text: str) -> str:
        def clock(m):
            if not (m["m"] or m["hh"]):
                return m[0]
            hour = self.agree(self.cardinal(int(m["h"])), "f")
            minute = int(m["m"] or 0)
            said = {0: "", 15: " y cuarto", 30: " y media"}.get(minute, f" y {self.cardinal(minute)}")
            return f"{m['art']} {hour}{said}"
        return self._clock.sub(clock, text)

    def ordinals(self, text: str) -> str:
        def read(m):
            if m["s"] == "°" and not m["art"]:
                return m[0]  # degrees
            words = self.ordinal(int(m["n"]))
            if m["s"] == "ª":
                words = self.feminine_ordinal(words)
            elif m["s"] == "er" or self.noun_gender(self.next_word(m)) is not None:
                words = re.sub(r"(prim|terc)ero$", r"\1er", words)
            return f"{m['art']} {words}" if m["art"] else words
        return self._ordinal.sub(read, text)


normalize = Spanish().normalize
