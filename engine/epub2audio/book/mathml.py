"""MathML → the words a narrator of mathematics says, in the book's language.

`speak(math_element, lang)` returns one string. The author's own words win: `alttext` or
`aria-label` on <math> is read as given, unless it is TeX source (a backslash command, ^{ or _{),
which no voice can say; then the markup is rendered. The rendering covers presentation MathML
(mi, mn, mo, mrow, mfrac, msup, msub, msubsup, msqrt, mroot, mover, munder, munderover, mtable,
mfenced, mtext, mspace, mstyle, mpadded, menclose, mphantom, semantics) the way it is said aloud:
"x squared", "A inverse", "the transpose of A", "x sub i", "n choose k", "the square root of 2",
"the sum from i equals 1 to n of", "the limit as x approaches 0 of", "the 2 by 2 matrix, row 1:
a, b; row 2: c, d". Content MathML and TeX annotations are not read; a text/plain annotation is
read only when the presentation markup gives nothing.

Choices: a short fraction of two tokens is "a over b" (English numerals "one half", "three
quarters"); a longer one is "the fraction … over …" with a pause after it, as is a power or root
whose argument is more than one token, so that "e to the power x plus 1, " is not "e to the power
x, plus 1". Parentheses are not said: a bracketed group after a function name is its argument
("f of x"), a bracketed group raised to a power is "the quantity …, squared". Numbers stay digits
for the language's normaliser to say.

Elements it does not know are read through their children and counted in `unknown` (their
names), so the caller can name them in a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from num2words import num2words

MATHML_NS = "http://www.w3.org/1998/Math/MathML"
PAUSE = "\ue010"  # a private marker: a spoken comma, dropped where punctuation or the end follows
TEX_SOURCE = re.compile(r"\\[A-Za-z]+|[\^_]\{|\$")
# Labels that say only that there is a formula: the markup says more.
GENERIC_LABELS = frozenset(["equation", "formula", "math", "mathematics", "expression", "image", "inline",
                            "display", "équation", "formule", "gleichung", "formel", "ecuación", "fórmula",
                            "equazione", "formula matematica"])
# What a converter writes when it has no description ("Alternative text not available").
PLACEHOLDER = re.compile(r"\b(alt(ernative)?[ -]?text|not available|no description|unavailable|"
                         r"description missing|missing description|todo)\b", re.IGNORECASE)

# -- words -----------------------------------------------------------------------------------------
# Operators by meaning, then the structures (format strings). One table per language.

OPERATOR_KEYS = {
    "+": "plus", "-": "minus", "−": "minus", "±": "plus_minus", "∓": "minus_plus", "×": "times",
    "⋅": "times", "·": "times", "∗": "times", "÷": "divided_by", "/": "divided_by", "=": "equals",
    "≠": "not_equal", "<": "less", ">": "greater", "≤": "less_eq", "≥": "greater_eq", "⩽": "less_eq",
    "⩾": "greater_eq", "≈": "approx", "≃": "approx", "≅": "congruent", "≡": "equiv", "∼": "similar",
    "∝": "proportional", "≪": "much_less", "≫": "much_greater", "∈": "element", "∉": "not_element",
    "∋": "contains", "⊂": "subset", "⊆": "subset_eq", "⊃": "superset", "⊇": "superset_eq",
    "∪": "union", "∩": "intersection", "∖": "set_minus", "→": "to", "⟶": "to", "↦": "maps_to",
    "⇒": "implies", "⟹": "implies", "⇔": "iff", "⟺": "iff", "↔": "iff", "∞": "infinity",
    "…": "dots", "⋯": "dots", "⋮": "dots", "⋱": "dots", "...": "dots", "∀": "for_all",
    "∃": "exists", "∄": "not_exists", "¬": "not", "∧": "and", "∨": "or", "!": "factorial",
    "′": "prime", "″": "double_prime", "'": "prime", "%": "percent", "°": "degrees",
    "∘": "composed", "∂": "partial", "∇": "nabla", "∅": "empty_set", "⊥": "perpendicular",
    "∥": "parallel", "∠": "angle", "△": "triangle", "⊕": "direct_sum", "⊗": "tensor",
    ":": "colon", "∣": "divides", "∴": "therefore", "∵": "because", "≔": "defined_as",
}
# Silent or nearly so: invisible operators, grouping, and separators.
INVISIBLE_TIMES, FUNCTION_APPLICATION, INVISIBLE_SEPARATOR, INVISIBLE_PLUS = "\u2062", "\u2061", "\u2063", "\u2064"
END_OF_PROOF = frozenset("□■∎▪◻")
# Operators whose grouping a bracket changes: a bracketed sum is said as "the quantity …".
GROUPED_OPERATORS = frozenset(["+", "-", "−", "±", "∓", "×", "⋅", "·", "÷", "/", "∪", "∩"])  # a proof's closing box: seen, not said
OPENING = frozenset("([{⟨⌊⌈〈")
CLOSING = frozenset(")]}⟩⌋⌉〉")
LARGE_OPERATORS = {"∑": "sum", "⅀": "sum", "∏": "product", "∐": "coproduct", "∫": "integral",
                   "∬": "double_integral", "∭": "triple_integral", "∮": "contour_integral",
                   "⋃": "big_union", "⋂": "big_intersection"}
ACCENTS = {"¯": "bar", "‾": "bar", "_": "bar", "―": "bar", "-": "bar", "−": "bar", "^": "hat",
           "ˆ": "hat", "̂": "hat", "→": "vector", "⃗": "vector", "⇀": "vector", "~": "tilde",
           "˜": "tilde", "̃": "tilde", "˙": "dot", "̇": "dot", "¨": "double_dot", "̈": "double_dot",
           "⏞": "", "⏟": "", "︷": "", "︸": ""}
FUNCTIONS = frozenset("sin cos tan cot sec csc sinh cosh tanh arcsin arccos arctan log ln lg exp det "
                      "dim ker deg gcd lcm max min sup inf arg mod lim Pr tr rank sgn".split())
GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "ϵ": "epsilon", "ζ": "zeta",
    "η": "eta", "θ": "theta", "ϑ": "theta", "ι": "iota", "κ": "kappa", "λ": "lambda", "μ": "mu",
    "ν": "nu", "ξ": "xi", "ο": "omicron", "π": "pi", "ϖ": "pi", "ρ": "rho", "ϱ": "rho", "σ": "sigma",
    "ς": "sigma", "τ": "tau", "υ": "upsilon", "φ": "phi", "ϕ": "phi", "χ": "chi", "ψ": "psi",
    "ω": "omega",
}
GREEK_CAPITALS = {"Γ": "gamma", "Δ": "delta", "Θ": "theta", "Λ": "lambda", "Ξ": "xi", "Π": "pi",
                  "Σ": "sigma", "Υ": "upsilon", "Φ": "phi", "Ψ": "psi", "Ω": "omega"}
LETTERLIKE = {"ℝ": "real", "ℕ": "natural", "ℤ": "integer", "ℚ": "rational", "ℂ": "complex", "ℏ": "h_bar",
              "ℓ": "ell"}

WORDS: dict[str, dict[str, str]] = {
    "en": {
        "plus": "plus", "minus": "minus", "plus_minus": "plus or minus", "minus_plus": "minus or plus",
        "times": "times", "divided_by": "divided by", "equals": "equals", "not_equal": "is not equal to",
        "less": "is less than", "greater": "is greater than", "less_eq": "is less than or equal to",
        "greater_eq": "is greater than or equal to", "approx": "is approximately equal to",
        "congruent": "is congruent to", "equiv": "is equivalent to", "similar": "is similar to",
        "proportional": "is proportional to", "much_less": "is much less than",
        "much_greater": "is much greater than", "element": "is in", "not_element": "is not in",
        "contains": "contains", "subset": "is a subset of", "subset_eq": "is a subset of or equal to",
        "superset": "is a superset of", "superset_eq": "is a superset of or equal to", "union": "union",
        "intersection": "intersect", "set_minus": "minus", "to": "to", "approaches": "approaches",
        "maps_to": "maps to", "implies": "implies", "iff": "if and only if", "infinity": "infinity",
        "dots": "dot dot dot", "for_all": "for all", "exists": "there exists",
        "not_exists": "there is no", "not": "not", "and": "and", "or": "or", "factorial": "factorial",
        "prime": "prime", "double_prime": "double prime", "percent": "percent", "degrees": "degrees",
        "composed": "composed with", "partial": "partial", "nabla": "del", "empty_set": "the empty set",
        "perpendicular": "is perpendicular to", "parallel": "is parallel to", "angle": "angle",
        "triangle": "triangle", "direct_sum": "direct sum", "tensor": "tensor", "colon": "colon",
        "divides": "divides", "therefore": "therefore", "because": "because", "defined_as": "is defined as",
        "squared": "{b} squared", "cubed": "{b} cubed", "power": "{b} to the power {e}",
        "inverse": "{b} inverse", "transpose": "the transpose of {b}", "sub": "{b} sub {s}",
        "over": "{n} over {d}", "fraction": "the fraction {n} over {d}",
        "sqrt": "the square root of {x}", "cbrt": "the cube root of {x}", "root": "the root of index {n} of {x}",
        "binom": "{n} choose {k}", "from_to": "the {op} from {a} to {b} of", "over_set": "the {op} over {a} of",
        "large": "the {op} of", "op_over": "{op} over {a} of", "limit": "the limit as {u} of", "abs": "the absolute value of {x}",
        "norm": "the norm of {x}", "matrix": "the {r} by {c} matrix", "determinant": "the determinant of the {r} by {c} matrix",
        "row": "row {i}", "quantity": "the quantity {x}", "of": "of", "set": "the set of {x}",
        "bar": "{b} bar", "hat": "{b} hat", "vector": "vector {b}", "tilde": "{b} tilde", "dot": "{b} dot",
        "double_dot": "{b} double dot", "capital": "capital {x}", "log_base": "log base {s}",
        "sum": "sum", "product": "product", "coproduct": "coproduct", "integral": "integral",
        "double_integral": "double integral", "triple_integral": "triple integral",
        "contour_integral": "contour integral", "big_union": "union", "big_intersection": "intersection",
        "real": "the real numbers", "natural": "the natural numbers", "integer": "the integers",
        "rational": "the rational numbers", "complex": "the complex numbers", "h_bar": "h bar", "ell": "ell",
        "sin": "sine", "cos": "cosine", "tan": "tangent", "cot": "cotangent", "sec": "secant",
        "csc": "cosecant", "ln": "natural log", "log": "log", "exp": "exp", "det": "the determinant of",
        "lim": "the limit", "max": "the maximum", "min": "the minimum", "gcd": "the greatest common divisor",
        "mod": "mod",
    },
    "fr": {
        "plus": "plus", "minus": "moins", "plus_minus": "plus ou moins", "minus_plus": "moins ou plus",
        "times": "fois", "divided_by": "divisé par", "equals": "égale", "not_equal": "est différent de",
        "less": "est inférieur à", "greater": "est supérieur à", "less_eq": "est inférieur ou égal à",
        "greater_eq": "est supérieur ou égal à", "approx": "est environ égal à", "congruent": "est congru à",
        "equiv": "est équivalent à", "similar": "est semblable à", "proportional": "est proportionnel à",
        "much_less": "est très inférieur à", "much_greater": "est très supérieur à",
        "element": "appartient à", "not_element": "n'appartient pas à", "contains": "contient",
        "subset": "est inclus dans", "subset_eq": "est inclus dans", "superset": "contient",
        "superset_eq": "contient", "union": "union", "intersection": "inter", "set_minus": "privé de",
        "to": "dans", "approaches": "tend vers", "maps_to": "associe", "implies": "implique",
        "iff": "si et seulement si", "infinity": "l'infini", "dots": "points de suspension",
        "for_all": "pour tout", "exists": "il existe", "not_exists": "il n'existe pas", "not": "non",
        "and": "et", "or": "ou", "factorial": "factorielle", "prime": "prime", "double_prime": "seconde",
        "percent": "pour cent", "degrees": "degrés", "composed": "rond", "partial": "d rond",
        "nabla": "nabla", "empty_set": "l'ensemble vide", "perpendicular": "est perpendiculaire à",
        "parallel": "est parallèle à", "angle": "angle", "triangle": "triangle", "direct_sum": "somme directe",
        "tensor": "tensoriel", "colon": "deux-points", "divides": "divise", "therefore": "donc",
        "because": "car", "defined_as": "est défini par",
        "squared": "{b} au carré", "cubed": "{b} au cube", "power": "{b} puissance {e}",
        "inverse": "l'inverse de {b}", "transpose": "la transposée de {b}", "sub": "{b} indice {s}",
        "over": "{n} sur {d}", "fraction": "la fraction {n} sur {d}",
        "sqrt": "la racine carrée de {x}", "cbrt": "la racine cubique de {x}", "root": "la racine d'indice {n} de {x}",
        "binom": "{k} parmi {n}", "from_to": "{op} de {a} à {b} de", "over_set": "{op} sur {a} de",
        "large": "{op} de", "op_over": "{op} sur {a} de", "limit": "la limite quand {u} de", "abs": "la valeur absolue de {x}",
        "norm": "la norme de {x}", "matrix": "la matrice {r} par {c}", "determinant": "le déterminant de la matrice {r} par {c}",
        "row": "ligne {i}", "quantity": "la quantité {x}", "of": "de", "set": "l'ensemble des {x}",
        "bar": "{b} barre", "hat": "{b} chapeau", "vector": "vecteur {b}", "tilde": "{b} tilde",
        "dot": "{b} point", "double_dot": "{b} deux points", "capital": "{x} majuscule",
        "log_base": "logarithme en base {s}", "sum": "la somme", "product": "le produit",
        "coproduct": "le coproduit", "integral": "l'intégrale", "double_integral": "l'intégrale double",
        "triple_integral": "l'intégrale triple", "contour_integral": "l'intégrale curviligne",
        "big_union": "la réunion", "big_intersection": "l'intersection", "real": "l'ensemble des réels",
        "natural": "l'ensemble des entiers naturels", "integer": "l'ensemble des entiers relatifs",
        "rational": "l'ensemble des rationnels", "complex": "l'ensemble des complexes", "h_bar": "h barre",
        "ell": "l", "sin": "sinus", "cos": "cosinus", "tan": "tangente", "cot": "cotangente",
        "sec": "sécante", "csc": "cosécante", "ln": "logarithme népérien", "log": "logarithme",
        "exp": "exponentielle", "det": "le déterminant de", "lim": "la limite", "max": "le maximum",
        "min": "le minimum", "gcd": "le plus grand commun diviseur", "mod": "modulo",
    },
    "de": {
        "plus": "plus", "minus": "minus", "plus_minus": "plus minus", "minus_plus": "minus plus",
        "times": "mal", "divided_by": "geteilt durch", "equals": "gleich", "not_equal": "ungleich",
        "less": "kleiner als", "greater": "größer als", "less_eq": "kleiner oder gleich",
        "greater_eq": "größer oder gleich", "approx": "ungefähr gleich", "congruent": "kongruent zu",
        "equiv": "äquivalent zu", "similar": "ähnlich zu", "proportional": "proportional zu",
        "much_less": "sehr viel kleiner als", "much_greater": "sehr viel größer als",
        "element": "ist Element von", "not_element": "ist nicht Element von", "contains": "enthält",
        "subset": "ist Teilmenge von", "subset_eq": "ist Teilmenge von", "superset": "ist Obermenge von",
        "superset_eq": "ist Obermenge von", "union": "vereinigt mit", "intersection": "geschnitten mit",
        "set_minus": "ohne", "to": "nach", "approaches": "gegen", "maps_to": "wird abgebildet auf",
        "implies": "daraus folgt", "iff": "genau dann, wenn", "infinity": "unendlich",
        "dots": "Punkt Punkt Punkt", "for_all": "für alle", "exists": "es gibt", "not_exists": "es gibt kein",
        "not": "nicht", "and": "und", "or": "oder", "factorial": "Fakultät", "prime": "Strich",
        "double_prime": "zwei Strich", "percent": "Prozent", "degrees": "Grad", "composed": "verkettet mit",
        "partial": "partiell", "nabla": "Nabla", "empty_set": "die leere Menge",
        "perpendicular": "senkrecht auf", "parallel": "parallel zu", "angle": "Winkel", "triangle": "Dreieck",
        "direct_sum": "direkte Summe", "tensor": "Tensor", "colon": "Doppelpunkt", "divides": "teilt",
        "therefore": "also", "because": "weil", "defined_as": "ist definiert als",
        "squared": "{b} Quadrat", "cubed": "{b} hoch drei", "power": "{b} hoch {e}",
        "inverse": "{b} invers", "transpose": "{b} transponiert", "sub": "{b} Index {s}",
        "over": "{n} durch {d}", "fraction": "der Bruch {n} durch {d}",
        "sqrt": "die Wurzel aus {x}", "cbrt": "die dritte Wurzel aus {x}", "root": "die Wurzel zum Index {n} aus {x}",
        "binom": "{n} über {k}", "from_to": "{op} von {a} bis {b} über", "over_set": "{op} über {a} von",
        "large": "{op} von", "op_over": "{op} über {a} von", "limit": "der Grenzwert für {u} von", "abs": "der Betrag von {x}",
        "norm": "die Norm von {x}", "matrix": "die {r}-mal-{c}-Matrix", "determinant": "die Determinante der {r}-mal-{c}-Matrix",
        "row": "Zeile {i}", "quantity": "Klammer auf {x} Klammer zu", "of": "von", "set": "die Menge der {x}",
        "bar": "{b} quer", "hat": "{b} Dach", "vector": "Vektor {b}", "tilde": "{b} Schlange",
        "dot": "{b} Punkt", "double_dot": "{b} zwei Punkt", "capital": "großes {x}",
        "log_base": "Logarithmus zur Basis {s}", "sum": "die Summe", "product": "das Produkt",
        "coproduct": "das Koprodukt", "integral": "das Integral", "double_integral": "das Doppelintegral",
        "triple_integral": "das Dreifachintegral", "contour_integral": "das Kurvenintegral",
        "big_union": "die Vereinigung", "big_intersection": "der Durchschnitt",
        "real": "die reellen Zahlen", "natural": "die natürlichen Zahlen", "integer": "die ganzen Zahlen",
        "rational": "die rationalen Zahlen", "complex": "die komplexen Zahlen", "h_bar": "h quer", "ell": "l",
        "sin": "Sinus", "cos": "Kosinus", "tan": "Tangens", "cot": "Kotangens", "sec": "Sekans",
        "csc": "Kosekans", "ln": "natürlicher Logarithmus", "log": "Logarithmus", "exp": "Exponentialfunktion",
        "det": "die Determinante von", "lim": "der Limes", "max": "das Maximum", "min": "das Minimum",
        "gcd": "der größte gemeinsame Teiler", "mod": "modulo",
    },
    "es": {
        "plus": "más", "minus": "menos", "plus_minus": "más menos", "minus_plus": "menos más",
        "times": "por", "divided_by": "dividido por", "equals": "es igual a", "not_equal": "es distinto de",
        "less": "es menor que", "greater": "es mayor que", "less_eq": "es menor o igual que",
        "greater_eq": "es mayor o igual que", "approx": "es aproximadamente igual a",
        "congruent": "es congruente con", "equiv": "es equivalente a", "similar": "es semejante a",
        "proportional": "es proporcional a", "much_less": "es mucho menor que",
        "much_greater": "es mucho mayor que", "element": "pertenece a", "not_element": "no pertenece a",
        "contains": "contiene", "subset": "está contenido en", "subset_eq": "está contenido en",
        "superset": "contiene a", "superset_eq": "contiene a", "union": "unión", "intersection": "intersección",
        "set_minus": "menos", "to": "en", "approaches": "tiende a", "maps_to": "se aplica en",
        "implies": "implica", "iff": "si y solo si", "infinity": "infinito", "dots": "puntos suspensivos",
        "for_all": "para todo", "exists": "existe", "not_exists": "no existe", "not": "no", "and": "y",
        "or": "o", "factorial": "factorial", "prime": "prima", "double_prime": "segunda",
        "percent": "por ciento", "degrees": "grados", "composed": "compuesta con", "partial": "parcial",
        "nabla": "nabla", "empty_set": "el conjunto vacío", "perpendicular": "es perpendicular a",
        "parallel": "es paralelo a", "angle": "ángulo", "triangle": "triángulo", "direct_sum": "suma directa",
        "tensor": "tensor", "colon": "dos puntos", "divides": "divide a", "therefore": "por lo tanto",
        "because": "porque", "defined_as": "se define como",
        "squared": "{b} al cuadrado", "cubed": "{b} al cubo", "power": "{b} elevado a {e}",
        "inverse": "la inversa de {b}", "transpose": "la traspuesta de {b}", "sub": "{b} sub {s}",
        "over": "{n} entre {d}", "fraction": "la fracción {n} entre {d}",
        "sqrt": "la raíz cuadrada de {x}", "cbrt": "la raíz cúbica de {x}", "root": "la raíz de índice {n} de {x}",
        "binom": "{n} sobre {k}", "from_to": "{op} desde {a} hasta {b} de", "over_set": "{op} sobre {a} de",
        "large": "{op} de", "op_over": "{op} sobre {a} de", "limit": "el límite cuando {u} de", "abs": "el valor absoluto de {x}",
        "norm": "la norma de {x}", "matrix": "la matriz {r} por {c}", "determinant": "el determinante de la matriz {r} por {c}",
        "row": "fila {i}", "quantity": "la cantidad {x}", "of": "de", "set": "el conjunto de {x}",
        "bar": "{b} barra", "hat": "{b} sombrero", "vector": "vector {b}", "tilde": "{b} tilde",
        "dot": "{b} punto", "double_dot": "{b} dos puntos", "capital": "{x} mayúscula",
        "log_base": "logaritmo en base {s}", "sum": "la suma", "product": "el producto",
        "coproduct": "el coproducto", "integral": "la integral", "double_integral": "la integral doble",
        "triple_integral": "la integral triple", "contour_integral": "la integral de línea",
        "big_union": "la unión", "big_intersection": "la intersección", "real": "los números reales",
        "natural": "los números naturales", "integer": "los números enteros", "rational": "los números racionales",
        "complex": "los números complejos", "h_bar": "h barra", "ell": "l", "sin": "seno", "cos": "coseno",
        "tan": "tangente", "cot": "cotangente", "sec": "secante", "csc": "cosecante", "ln": "logaritmo natural",
        "log": "logaritmo", "exp": "exponencial", "det": "el determinante de", "lim": "el límite",
        "max": "el máximo", "min": "el mínimo", "gcd": "el máximo común divisor", "mod": "módulo",
    },
    "it": {
        "plus": "più", "minus": "meno", "plus_minus": "più o meno", "minus_plus": "meno o più",
        "times": "per", "divided_by": "diviso", "equals": "uguale a", "not_equal": "diverso da",
        "less": "minore di", "greater": "maggiore di", "less_eq": "minore o uguale a",
        "greater_eq": "maggiore o uguale a", "approx": "circa uguale a", "congruent": "congruente a",
        "equiv": "equivalente a", "similar": "simile a", "proportional": "proporzionale a",
        "much_less": "molto minore di", "much_greater": "molto maggiore di", "element": "appartiene a",
        "not_element": "non appartiene a", "contains": "contiene", "subset": "è contenuto in",
        "subset_eq": "è contenuto in", "superset": "contiene", "superset_eq": "contiene", "union": "unione",
        "intersection": "intersezione", "set_minus": "meno", "to": "in", "approaches": "tende a",
        "maps_to": "va in", "implies": "implica", "iff": "se e solo se", "infinity": "infinito",
        "dots": "puntini", "for_all": "per ogni", "exists": "esiste", "not_exists": "non esiste",
        "not": "non", "and": "e", "or": "o", "factorial": "fattoriale", "prime": "primo",
        "double_prime": "secondo", "percent": "per cento", "degrees": "gradi", "composed": "composto",
        "partial": "derivata parziale", "nabla": "nabla", "empty_set": "l'insieme vuoto",
        "perpendicular": "perpendicolare a", "parallel": "parallelo a", "angle": "angolo",
        "triangle": "triangolo", "direct_sum": "somma diretta", "tensor": "tensore", "colon": "due punti",
        "divides": "divide", "therefore": "quindi", "because": "perché", "defined_as": "è definito come",
        "squared": "{b} al quadrato", "cubed": "{b} al cubo", "power": "{b} elevato alla {e}",
        "inverse": "l'inversa di {b}", "transpose": "la trasposta di {b}", "sub": "{b} pedice {s}",
        "over": "{n} fratto {d}", "fraction": "la frazione {n} fratto {d}",
        "sqrt": "la radice quadrata di {x}", "cbrt": "la radice cubica di {x}", "root": "la radice di indice {n} di {x}",
        "binom": "{n} su {k}", "from_to": "{op} da {a} a {b} di", "over_set": "{op} su {a} di",
        "large": "{op} di", "op_over": "{op} su {a} di", "limit": "il limite per {u} di", "abs": "il valore assoluto di {x}",
        "norm": "la norma di {x}", "matrix": "la matrice {r} per {c}", "determinant": "il determinante della matrice {r} per {c}",
        "row": "riga {i}", "quantity": "la quantità {x}", "of": "di", "set": "l'insieme dei {x}",
        "bar": "{b} barra", "hat": "{b} cappello", "vector": "vettore {b}", "tilde": "{b} tilde",
        "dot": "{b} punto", "double_dot": "{b} due punti", "capital": "{x} maiuscola",
        "log_base": "logaritmo in base {s}", "sum": "la sommatoria", "product": "la produttoria",
        "coproduct": "il coprodotto", "integral": "l'integrale", "double_integral": "l'integrale doppio",
        "triple_integral": "l'integrale triplo", "contour_integral": "l'integrale di linea",
        "big_union": "l'unione", "big_intersection": "l'intersezione", "real": "i numeri reali",
        "natural": "i numeri naturali", "integer": "i numeri interi", "rational": "i numeri razionali",
        "complex": "i numeri complessi", "h_bar": "h tagliato", "ell": "elle", "sin": "seno", "cos": "coseno",
        "tan": "tangente", "cot": "cotangente", "sec": "secante", "csc": "cosecante", "ln": "logaritmo naturale",
        "log": "logaritmo", "exp": "esponenziale", "det": "il determinante di", "lim": "il limite",
        "max": "il massimo", "min": "il minimo", "gcd": "il massimo comun divisore", "mod": "modulo",
    },
}
# Greek letter names as each language writes them where they differ from English.
GREEK_NAMES = {
    "fr": {"eta": "êta", "theta": "thêta", "lambda": "lambda", "mu": "mu", "nu": "nu", "xi": "ksi",
           "pi": "pi", "rho": "rhô", "phi": "phi", "chi": "khi", "psi": "psi", "omega": "oméga",
           "epsilon": "epsilon", "upsilon": "upsilon"},
    "de": {"alpha": "Alpha", "beta": "Beta", "gamma": "Gamma", "delta": "Delta", "epsilon": "Epsilon",
           "zeta": "Zeta", "eta": "Eta", "theta": "Theta", "iota": "Iota", "kappa": "Kappa",
           "lambda": "Lambda", "mu": "My", "nu": "Ny", "xi": "Xi", "omicron": "Omikron", "pi": "Pi",
           "rho": "Rho", "sigma": "Sigma", "tau": "Tau", "upsilon": "Ypsilon", "phi": "Phi", "chi": "Chi",
           "psi": "Psi", "omega": "Omega"},
    "es": {"alpha": "alfa", "eta": "eta", "theta": "theta", "lambda": "lambda", "mu": "mi", "nu": "ni",
           "xi": "xi", "rho": "ro", "phi": "fi", "chi": "ji", "psi": "psi", "omicron": "ómicron",
           "upsilon": "ípsilon"},
    "it": {"alpha": "alfa", "eta": "eta", "theta": "teta", "lambda": "lambda", "mu": "mi", "nu": "ni",
           "xi": "xi", "rho": "ro", "phi": "fi", "chi": "chi", "psi": "psi", "upsilon": "ipsilon"},
}
# English names for small numerator/denominator fractions ("one half", "three quarters").
EN_DENOMINATORS = {2: ("half", "halves"), 4: ("quarter", "quarters")}

KNOWN = frozenset(
    "math mi mn mo ms mtext mspace mrow mfrac msup msub msubsup msqrt mroot mover munder munderover "
    "mtable mtr mlabeledtr mtd mfenced mstyle mpadded mphantom menclose merror semantics annotation "
    "annotation-xml maction none mprescripts".split()
)


def language_of(lang: str | None) -> str:
    code = (lang or "en").split("-")[0].split("_")[0].lower()
    return code if code in WORDS else "en"


@dataclass
class _Context:
    words: dict[str, str]
    lang: str
    unknown: list[str] = field(default_factory=list)


def speak(math, lang: str | None = None, unknown: list[str] | None = None) -> str:
    """The spoken form of a <math> element (see the module docstring). Names of MathML elements
    read without their structure are appended to `unknown`."""
    given = _clean(math.get("alttext") or math.get("aria-label") or "")
    if given.casefold().strip(" .") in GENERIC_LABELS or PLACEHOLDER.search(given):
        given = ""
    if given and not TEX_SOURCE.search(given):
        return given
    code = language_of(lang)
    ctx = _Context(WORDS[code], code)
    spoken = _finish(_render(math, ctx))
    if not spoken:
        plain = _plain_annotation(math)
        spoken = plain or (given if given and not TEX_SOURCE.search(given) else "")
    if unknown is not None:
        unknown.extend(ctx.unknown)
    return spoken


def is_display(math) -> bool:
    return (math.get("display") or "").strip().lower() == "block" or (math.get("mode") or "").lower() == "display"


# -- helpers ---------------------------------------------------------------------------------------


def _name(el) -> str:
    tag = el.tag
    return _local(tag) if isinstance(tag, str) else ""


@lru_cache(maxsize=512)
def _local(tag: str) -> str:
    return tag.rpartition("}")[2].lower()


def _kids(el) -> list:
    return [c for c in el if isinstance(c.tag, str)]


def _text(el) -> str:
    return _clean("".join(el.itertext()))


def _clean(text: str) -> str:
    return " ".join(text.replace("\u00a0", " ").split())


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def _finish(text: str) -> str:
    """Spoken commas: one where a pause helps, none at the end or before punctuation."""
    text = re.sub(rf"\s*{PAUSE}(\s*{PAUSE})*", PAUSE, text)
    text = re.sub(rf"{PAUSE}(?=\s*([,;:.]|$))", "", text)
    text = text.replace(PAUSE, ",")
    text = re.sub(r"\s+([,;:.])", r"\1", text)
    return _clean(text)


def _unwrap(el):
    """mrow/mstyle/mpadded with one child → that child (they only group)."""
    while _name(el) in ("mrow", "mstyle", "mpadded", "semantics") and len(_kids(el)) == 1:
        el = _kids(el)[0]
    if _name(el) == "semantics" and _kids(el):
        return _unwrap(_kids(el)[0])
    return el


def _is_token(el) -> bool:
    el = _unwrap(el)
    name = _name(el)
    if name in ("mi", "mn", "mtext", "ms"):
        return True
    if name == "mo":
        return True
    if name == "mrow":  # a signed number ("-1"), or a number written digit by digit ("2" "2")
        kids = _kids(el)
        if kids and all(_name(k) == "mn" for k in kids):
            return True
        return len(kids) == 2 and _name(kids[0]) == "mo" and _text(kids[0]) in ("-", "−") and _name(kids[1]) in ("mn", "mi")
    return False


def _token_text(el) -> str:
    el = _unwrap(el)
    return "".join(_text(k) for k in _kids(el)) if _name(el) == "mrow" else _text(el)


def _w(ctx: _Context, key: str, **values) -> str:
    return ctx.words[key].format(**values)


def _pause_if(complex_: bool) -> str:
    return PAUSE if complex_ else ""


# -- the renderer ----------------------------------------------------------------------------------


def _render(el, ctx: _Context) -> str:
    name = _name(el)
    if not name:
        return ""
    handler = _HANDLERS.get(name)
    if handler is not None:
        return handler(el, ctx)
    if name not in KNOWN:
        ctx.unknown.append(name)
    return _row(_kids(el), ctx) or _clean(el.text or "")


def _math(el, ctx):
    return _row(_kids(el), ctx)


def _mi(el, ctx):
    text = _text(el)
    return "" if text in END_OF_PROOF else _identifier(text, ctx)


def _identifier(text: str, ctx: _Context) -> str:
    if not text:
        return ""
    if text in FUNCTIONS:
        return ctx.words.get(text, text)
    if len(text) == 1:
        return _symbol(text, ctx)
    return " ".join(_symbol(c, ctx) for c in text) if all(c in GREEK or c in GREEK_CAPITALS for c in text) else text


def _greek(name: str, ctx: _Context) -> str:
    return GREEK_NAMES.get(ctx.lang, {}).get(name, name)


def _symbol(c: str, ctx: _Context) -> str:
    if c in GREEK:
        return _greek(GREEK[c], ctx)
    if c in GREEK_CAPITALS:
        return _w(ctx, "capital", x=_greek(GREEK_CAPITALS[c], ctx))
    if c in LETTERLIKE:
        return ctx.words[LETTERLIKE[c]]
    if c in OPERATOR_KEYS:
        return ctx.words[OPERATOR_KEYS[c]]
    if c in LARGE_OPERATORS:
        return ctx.words[LARGE_OPERATORS[c]]
    return c


def _mn(el, ctx):
    return _text(el)


def _mtext(el, ctx):
    return _text(el)


def _mspace(el, ctx):
    return ""


def _mo(el, ctx):
    return _operator(_text(el), ctx)


def _operator(text: str, ctx: _Context) -> str:
    if text in (INVISIBLE_TIMES, "", INVISIBLE_SEPARATOR) or text in OPENING or text in CLOSING or text in END_OF_PROOF:
        return ""
    if text == FUNCTION_APPLICATION:
        return ctx.words["of"]
    if text == INVISIBLE_PLUS:
        return ctx.words["plus"]
    if text == ",":
        return PAUSE
    if text in ("|", "‖"):
        return ""
    if text in OPERATOR_KEYS:
        return ctx.words[OPERATOR_KEYS[text]]
    if text in LARGE_OPERATORS:
        return _w(ctx, "large", op=ctx.words[LARGE_OPERATORS[text]])
    if text in FUNCTIONS:
        return ctx.words.get(text, text)
    return " ".join(_symbol(c, ctx) for c in text) if len(text) <= 3 else text


def _large_operator(el) -> str | None:
    """The large operator (∑, ∫ …) or lim/max/min an element is, if it is one."""
    el = _unwrap(el)
    text = _text(el) if _name(el) in ("mo", "mi") else ""
    if text in LARGE_OPERATORS:
        return LARGE_OPERATORS[text]
    if text in ("lim", "max", "min", "sup", "inf", "limsup", "liminf"):
        return text
    return None


def _scripted_operator(base, under: str, over: str, ctx: _Context) -> str:
    """∑ with limits, ∫ with bounds, lim with what tends: what precedes the operand."""
    op = _large_operator(base)
    if op in LARGE_OPERATORS.values():
        word = ctx.words[op]
        if under and over:
            return _w(ctx, "from_to", op=word, a=under, b=over)
        if under:
            return _w(ctx, "over_set", op=word, a=under)
        return _w(ctx, "large", op=word)
    if op == "lim":
        return _w(ctx, "limit", u=under)
    word = ctx.words.get(op, op)
    return _w(ctx, "op_over", op=word, a=under) if under else _join(word, ctx.words["of"])


def _limit_text(el, ctx: _Context) -> str:
    """What lies under 'lim': its arrow is 'approaches', not 'to'."""
    return _finish(_render(el, ctx)).replace(f" {ctx.words['to']} ", f" {ctx.words['approaches']} ", 1) \
        if _has_arrow(el) else _finish(_render(el, ctx))


def _has_arrow(el) -> bool:
    return any(_name(d) == "mo" and _text(d) in ("→", "⟶") for d in el.iter())


def _row(kids: list, ctx: _Context) -> str:
    """An mrow's children: brackets as groups, functions applied to their arguments, large
    operators with their scripts."""
    out: list[str] = []
    i = 0
    while i < len(kids):
        kid = kids[i]
        name = _name(kid)
        text = _text(kid) if name == "mo" else ""
        if name == "mo" and text in OPENING:
            close = _matching(kids, i)
            if close is not None:
                inner = kids[i + 1:close]
                out.append(_group(inner, text, _text(kids[close]), ctx, applied=_applies(out, kids, i)))
                i = close + 1
                continue
        if name == "mo" and text in ("|", "‖"):
            close = next((j for j in range(i + 1, len(kids)) if _name(kids[j]) == "mo" and _text(kids[j]) == text), None)
            if close is not None and close > i + 1:
                inner = _row(kids[i + 1:close], ctx)
                key = "abs" if text == "|" else "norm"
                out.append(_w(ctx, key, x=inner) + _pause_if(close - i > 2))
                i = close + 1
                continue
        if name == "mfenced" and kid.get("open", "(") == "(" and _applies(out, kids, i):
            out.append(_join(ctx.words["of"], _mfenced(kid, ctx)) + _pause_if(len(_kids(kid)) > 1))
            i += 1
            continue
        if name == "mn" and i > 0 and _name(kids[i - 1]) == "mn" and out:
            out[-1] += _text(kid)  # one number a converter wrote digit by digit: 3 3 is 33
            i += 1
            continue
        out.append(_render(kid, ctx))
        i += 1
    return _join(*out)


def _matching(kids: list, start: int) -> int | None:
    depth = 0
    for j in range(start, len(kids)):
        if _name(kids[j]) != "mo":
            continue
        t = _text(kids[j])
        if t in OPENING:
            depth += 1
        elif t in CLOSING:
            depth -= 1
            if depth == 0:
                return j
    return None


def _applies(out: list[str], kids: list, open_index: int) -> bool:
    """Whether a bracket opened at open_index holds a function's argument: after ⁡, or right
    after a function name or a one-letter f, g, h (and their primes)."""
    if open_index == 0:
        return False
    before = _unwrap(kids[open_index - 1])
    name = _name(before)
    if name == "mo" and _text(before) == FUNCTION_APPLICATION:
        return False  # already said "of"
    if name == "mi":
        t = _text(before)
        return t in FUNCTIONS or t in ("f", "g", "h", "F", "G", "H", "φ", "ψ", "Γ", "P", "E")
    if name in ("msup", "msub", "msubsup") and _kids(before):
        base = _unwrap(_kids(before)[0])
        return _name(base) == "mi" and (_text(base) in FUNCTIONS or _text(base) in ("f", "g", "h", "F", "G", "P"))
    return False


def _group(inner: list, opening: str, closing: str, ctx: _Context, applied: bool = False) -> str:
    if len(inner) == 1 and _name(_unwrap(inner[0])) == "mfrac" and _unwrap(inner[0]).get("linethickness", "").strip() in ("0", "0px", "0pt", "0em"):
        frac = _kids(_unwrap(inner[0]))
        if len(frac) == 2:
            return _w(ctx, "binom", n=_finish(_render(frac[0], ctx)), k=_finish(_render(frac[1], ctx)))
    if len(inner) == 1 and _name(_unwrap(inner[0])) == "mtable" and opening in "([":
        return _matrix(_unwrap(inner[0]), ctx)
    text = _row(inner, ctx)
    if opening == "{" and closing == "}":
        return _w(ctx, "set", x=text) + PAUSE if text else ""
    if applied:
        return _join(ctx.words["of"], text) + _pause_if(len(inner) > 1)
    if any(_name(k) == "mo" and _text(k) in GROUPED_OPERATORS for k in inner[1:]):  # not a sign: (−1)
        return _w(ctx, "quantity", x=text) + PAUSE  # a − (b + c): the brackets change the sum
    return text


def _mrow(el, ctx):
    return _row(_kids(el), ctx)


def _mfrac(el, ctx):
    kids = _kids(el)
    if len(kids) != 2:
        return _row(kids, ctx)
    num, den = kids
    if el.get("linethickness", "").strip() in ("0", "0px", "0pt", "0em"):
        return _w(ctx, "binom", n=_finish(_render(num, ctx)), k=_finish(_render(den, ctx)))
    n, d = _finish(_render(num, ctx)), _finish(_render(den, ctx))
    if ctx.lang == "en" and _name(_unwrap(num)) == "mn" and _name(_unwrap(den)) == "mn":
        said = _english_fraction(_text(_unwrap(num)), _text(_unwrap(den)))
        if said:
            return said
    if _is_token(num) and _is_token(den):
        return _w(ctx, "over", n=n, d=d)
    return _w(ctx, "fraction", n=n, d=d) + PAUSE


def _english_fraction(num: str, den: str) -> str | None:
    if not (num.isdigit() and den.isdigit()):
        return None
    n, d = int(num), int(den)
    if not (1 <= n < d <= 10):
        return None
    one, many = EN_DENOMINATORS.get(d, (num2words(d, to="ordinal"), num2words(d, to="ordinal") + "s"))
    return f"{num2words(n)} {one if n == 1 else many}"


def _script_parts(el, count: int):
    kids = _kids(el)
    return kids if len(kids) == count else None


def _power(base_el, exp_el, ctx: _Context, base: str | None = None) -> str:
    """base_el raised to exp_el ("x squared", "A inverse", "the transpose of A"); `base`: its
    spoken form when the caller has it (a subscripted base)."""
    base = _base(base_el, ctx) if base is None else base
    if not _text(exp_el):  # an empty script (converters leave them): nothing is raised
        return base
    exp_text = _token_text(exp_el) if _is_token(exp_el) else None
    if exp_text == "2":
        return _w(ctx, "squared", b=base)
    if exp_text == "3":
        return _w(ctx, "cubed", b=base)
    if exp_text in ("-1", "−1"):
        return _w(ctx, "inverse", b=base)
    if exp_text in ("T", "⊤", "t") and _name(_unwrap(exp_el)) == "mi":
        return _w(ctx, "transpose", b=base)
    if exp_text in ("′", "'", "″", "*", "∗", "°", "∘", "+", "-", "−"):
        if exp_text in ("*", "∗"):
            return _join(base, "star" if ctx.lang == "en" else "*")
        if exp_text in ("+", "-", "−"):
            return _join(base, ctx.words["plus" if exp_text == "+" else "minus"])
        return _join(base, _symbol(exp_text if exp_text != "∘" else "°", ctx))
    exp = _finish(_render(exp_el, ctx))
    return _w(ctx, "power", b=base, e=exp) + _pause_if(not _is_token(exp_el))


def _base(el, ctx: _Context) -> str:
    """A script's base: a bracketed group is 'the quantity …,'."""
    inner = _unwrap(el)
    kids = _kids(inner) if _name(inner) == "mrow" else []
    if len(kids) >= 3 and _name(kids[0]) == "mo" and _text(kids[0]) in OPENING and _matching(kids, 0) == len(kids) - 1:
        group = kids[1:-1]
        if len(group) == 1 and _is_token(group[0]):
            return _render(group[0], ctx)
        if len(group) == 1 and _name(_unwrap(group[0])) == "mtable":
            return _matrix(_unwrap(group[0]), ctx) + PAUSE
        return _w(ctx, "quantity", x=_row(group, ctx)) + PAUSE
    if _name(inner) == "mfenced":
        fenced = _kids(inner)
        if len(fenced) == 1 and _is_token(fenced[0]):  # [A] sub i j: the entry of A
            return _render(fenced[0], ctx)
        return _w(ctx, "quantity", x=_mfenced(inner, ctx)) + PAUSE
    return _finish(_render(el, ctx))


def _msup(el, ctx):
    parts = _script_parts(el, 2)
    if parts is None:
        return _row(_kids(el), ctx)
    base, exp = parts
    if _large_operator(base):
        return _scripted_operator(base, "", _finish(_render(exp, ctx)), ctx)
    return _power(base, exp, ctx)


def _subscript(base_el, sub_el, ctx: _Context) -> str:
    base_u = _unwrap(base_el)
    if _name(base_u) == "mi" and _text(base_u) == "log":
        return _w(ctx, "log_base", s=_finish(_render(sub_el, ctx)))
    sub = _finish(_render(sub_el, ctx))
    if not sub:
        return _base(base_el, ctx)
    return _w(ctx, "sub", b=_base(base_el, ctx), s=sub) + _pause_if(not _is_token(sub_el))


def _msub(el, ctx):
    parts = _script_parts(el, 2)
    if parts is None:
        return _row(_kids(el), ctx)
    base, sub = parts
    if _large_operator(base):
        under = _limit_text(sub, ctx) if _large_operator(base) == "lim" else _finish(_render(sub, ctx))
        return _scripted_operator(base, under, "", ctx)
    return _subscript(base, sub, ctx)


def _msubsup(el, ctx):
    parts = _script_parts(el, 3)
    if parts is None:
        return _row(_kids(el), ctx)
    base, sub, sup = parts
    if _large_operator(base):
        return _scripted_operator(base, _finish(_render(sub, ctx)), _finish(_render(sup, ctx)), ctx)
    return _power(base, sup, ctx, base=_subscript(base, sub, ctx))


def _accent(base_el, mark_el, ctx: _Context) -> str | None:
    mark = _text(mark_el) if _name(_unwrap(mark_el)) in ("mo", "mi", "mtext") else None
    if mark is None or mark not in ACCENTS:
        return None
    key = ACCENTS[mark]
    base = _finish(_render(base_el, ctx))
    return _w(ctx, key, b=base) if key else base


def _mover(el, ctx):
    parts = _script_parts(el, 2)
    if parts is None:
        return _row(_kids(el), ctx)
    base, over = parts
    if _large_operator(base):
        return _scripted_operator(base, "", _finish(_render(over, ctx)), ctx)
    accented = _accent(base, over, ctx)
    if accented is not None:
        return accented
    return _join(_finish(_render(base, ctx)), _finish(_render(over, ctx)))


def _munder(el, ctx):
    parts = _script_parts(el, 2)
    if parts is None:
        return _row(_kids(el), ctx)
    base, under = parts
    if _large_operator(base):
        text = _limit_text(under, ctx) if _large_operator(base) == "lim" else _finish(_render(under, ctx))
        return _scripted_operator(base, text, "", ctx)
    accented = _accent(base, under, ctx)
    if accented is not None:
        return accented
    return _join(_finish(_render(base, ctx)), _finish(_render(under, ctx)))


def _munderover(el, ctx):
    parts = _script_parts(el, 3)
    if parts is None:
        return _row(_kids(el), ctx)
    base, under, over = parts
    if _large_operator(base):
        return _scripted_operator(base, _finish(_render(under, ctx)), _finish(_render(over, ctx)), ctx)
    return _join(_finish(_render(base, ctx)), _finish(_render(under, ctx)), _finish(_render(over, ctx)))


def _msqrt(el, ctx):
    kids = _kids(el)
    inner = _row(kids, ctx)
    return _w(ctx, "sqrt", x=inner) + _pause_if(not (len(kids) == 1 and _is_token(kids[0])))


def _mroot(el, ctx):
    parts = _script_parts(el, 2)
    if parts is None:
        return _row(_kids(el), ctx)
    base, index = parts
    x = _finish(_render(base, ctx))
    pause = _pause_if(not _is_token(base))
    idx = _token_text(index) if _is_token(index) else None
    if idx == "2":
        return _w(ctx, "sqrt", x=x) + pause
    if idx == "3":
        return _w(ctx, "cbrt", x=x) + pause
    n = _finish(_render(index, ctx))
    if ctx.lang == "en":
        if idx and idx.isdigit():
            return f"the {num2words(int(idx), to='ordinal')} root of {x}" + pause
        if idx and len(idx) == 1 and idx.isalpha():
            return f"the {idx}th root of {x}" + pause
    return _w(ctx, "root", n=n, x=x) + pause


def _mfenced(el, ctx):
    opening = el.get("open", "(")
    closing = el.get("close", ")")
    separators = (el.get("separators", ",") or "").split() or [""]
    kids = _kids(el)
    if len(kids) == 1 and _name(_unwrap(kids[0])) == "mfrac" and _unwrap(kids[0]).get("linethickness", "").strip() in ("0", "0px", "0pt", "0em"):
        return _mfrac(_unwrap(kids[0]), ctx)
    if len(kids) == 1 and _name(_unwrap(kids[0])) == "mtable":
        table = _unwrap(kids[0])
        if opening == "|" and closing == "|":
            return _matrix(table, ctx, determinant=True)
        return _matrix(table, ctx)
    parts = [_finish(_render(k, ctx)) for k in kids]
    sep = PAUSE if "".join(separators).strip() else " "
    text = (sep + " ").join(p for p in parts if p) if sep == PAUSE else " ".join(p for p in parts if p)
    if opening == "|" and closing == "|":
        return _w(ctx, "abs", x=text) + _pause_if(len(kids) != 1 or not _is_token(kids[0]))
    if opening == "‖":
        return _w(ctx, "norm", x=text)
    if opening == "{" and closing == "}":
        return _w(ctx, "set", x=text) + PAUSE
    return text


def _cells(table, ctx: _Context) -> list[list[str]]:
    rows = []
    for tr in _kids(table):
        name = _name(tr)
        if name not in ("mtr", "mlabeledtr"):
            continue
        cells = [c for c in _kids(tr) if _name(c) == "mtd"]
        if name == "mlabeledtr":
            cells = cells[1:]
        rows.append([_finish(_row(_kids(c), ctx)) for c in cells])
    return rows


def _matrix(table, ctx: _Context, determinant: bool = False) -> str:
    rows = _cells(table, ctx)
    if not rows:
        return ""
    cols = max(len(r) for r in rows)
    head = _w(ctx, "determinant" if determinant else "matrix", r=len(rows), c=cols)
    said = [f"{_w(ctx, 'row', i=i)}: " + (PAUSE + " ").join(c for c in row if c) for i, row in enumerate(rows, 1)]
    return head + PAUSE + " " + "; ".join(said) + PAUSE


def _mtable(el, ctx):
    """A table not inside brackets: aligned equations, one after another."""
    rows = _cells(el, ctx)
    return "; ".join(" ".join(c for c in row if c) for row in rows if any(row))


def _mtd(el, ctx):
    return _row(_kids(el), ctx)


def _semantics(el, ctx):
    kids = _kids(el)
    presentation = [k for k in kids if _name(k) not in ("annotation", "annotation-xml")]
    return _row(presentation[:1], ctx)


def _annotation(el, ctx):
    return ""


def _plain_annotation(math) -> str:
    for el in math.iter():
        if _name(el) == "annotation" and (el.get("encoding") or "").lower() in ("text/plain", "text"):
            return _text(el)
    return ""


def _maction(el, ctx):
    kids = _kids(el)
    try:
        chosen = int(el.get("selection", "1")) - 1
    except ValueError:
        chosen = 0
    return _render(kids[chosen], ctx) if 0 <= chosen < len(kids) else ""


def _nothing(el, ctx):
    return ""


def _menclose(el, ctx):
    notation = (el.get("notation") or "longdiv").split()
    inner = _row(_kids(el), ctx)
    if "radical" in notation:
        return _w(ctx, "sqrt", x=inner)
    return inner


def _ms(el, ctx):
    return _text(el)


_HANDLERS = {
    "math": _math, "mi": _mi, "mn": _mn, "mo": _mo, "mtext": _mtext, "ms": _ms, "mspace": _mspace,
    "mrow": _mrow, "mstyle": _mrow, "mpadded": _mrow, "merror": _mrow, "mfrac": _mfrac, "msup": _msup,
    "msub": _msub, "msubsup": _msubsup, "mover": _mover, "munder": _munder, "munderover": _munderover,
    "msqrt": _msqrt, "mroot": _mroot, "mfenced": _mfenced, "mtable": _mtable, "mtd": _mtd,
    "semantics": _semantics, "annotation": _annotation, "annotation-xml": _annotation, "maction": _maction,
    "mphantom": _nothing, "none": _nothing, "mprescripts": _nothing, "menclose": _menclose,
}
