"""MathML → spoken words (epub2audio.book.mathml), and how text.py places them in the reading."""

import pytest
from lxml import etree

from epub_factory import make_epub, xhtml
from epub2audio.book.epub import load_book
from epub2audio.book.mathml import speak
from epub2audio.book.text import Content, parse_xhtml, read_blocks

NS = 'xmlns="http://www.w3.org/1998/Math/MathML"'


def say(markup: str, lang: str = "en", unknown: list | None = None) -> str:
    return speak(etree.fromstring(markup.replace("<math", f"<math {NS}", 1)), lang, unknown)


SUM = ('<math><munderover><mo>∑</mo><mrow><mi>i</mi><mo>=</mo><mn>1</mn></mrow><mi>n</mi></munderover>'
       '<msub><mi>a</mi><mi>i</mi></msub></math>')
INTEGRAL = ('<math><msubsup><mo>∫</mo><mn>0</mn><mn>1</mn></msubsup><mi>f</mi><mo>(</mo><mi>x</mi><mo>)</mo>'
            '<mi>d</mi><mi>x</mi></math>')
LIMIT = ('<math><munder><mo>lim</mo><mrow><mi>x</mi><mo>→</mo><mn>0</mn></mrow></munder>'
         '<mfrac><mrow><mi>sin</mi><mi>x</mi></mrow><mi>x</mi></mfrac></math>')
MATRIX = ('<math><mrow><mo>[</mo><mtable><mtr><mtd><mi>a</mi></mtd><mtd><mi>b</mi></mtd></mtr>'
          '<mtr><mtd><mi>c</mi></mtd><mtd><mi>d</mi></mtd></mtr></mtable><mo>]</mo></mrow></math>')
BINOMIAL = '<math><mrow><mo>(</mo><mfrac linethickness="0"><mi>n</mi><mi>k</mi></mfrac><mo>)</mo></mrow></math>'
ACCENTS = ('<math><mover><mi>x</mi><mo>¯</mo></mover><mo>,</mo><mover><mi>v</mi><mo>→</mo></mover><mo>,</mo>'
           '<mover><mi>p</mi><mo>^</mo></mover></math>')

ENGLISH = [
    ('<math><msup><mi>x</mi><mn>2</mn></msup></math>', "x squared"),
    ('<math><msup><mi>x</mi><mn>3</mn></msup></math>', "x cubed"),
    ('<math><msup><mi>x</mi><mi>n</mi></msup></math>', "x to the power n"),
    # a power of more than one token ends with a pause: not "e to the power x plus 1 minus 1"
    ('<math><msup><mi>e</mi><mrow><mi>x</mi><mo>+</mo><mn>1</mn></mrow></msup><mo>-</mo><mn>1</mn></math>',
     "e to the power x plus 1, minus 1"),
    ('<math><mfrac><mi>a</mi><mi>b</mi></mfrac></math>', "a over b"),
    ('<math><mfrac><mn>1</mn><mn>2</mn></mfrac></math>', "one half"),
    ('<math><mfrac><mn>3</mn><mn>4</mn></mfrac></math>', "three quarters"),
    ('<math><mfrac><mn>2</mn><mn>3</mn></mfrac></math>', "two thirds"),
    ('<math><mfrac><mrow><mi>a</mi><mo>+</mo><mi>b</mi></mrow><mi>c</mi></mfrac><mo>=</mo><mn>1</mn></math>',
     "the fraction a plus b over c, equals 1"),
    ('<math><msqrt><mn>2</mn></msqrt></math>', "the square root of 2"),
    ('<math><msqrt><mi>x</mi><mo>+</mo><mn>1</mn></msqrt><mo>&gt;</mo><mn>0</mn></math>',
     "the square root of x plus 1, is greater than 0"),
    ('<math><mroot><mi>x</mi><mn>3</mn></mroot></math>', "the cube root of x"),
    ('<math><mroot><mi>x</mi><mn>5</mn></mroot></math>', "the fifth root of x"),
    ('<math><mroot><mi>x</mi><mi>n</mi></mroot></math>', "the nth root of x"),
    ('<math><msub><mi>x</mi><mi>i</mi></msub></math>', "x sub i"),
    ('<math><msubsup><mi>x</mi><mi>i</mi><mn>2</mn></msubsup></math>', "x sub i squared"),
    (BINOMIAL, "n choose k"),
    ('<math><msup><mi>A</mi><mrow><mo>-</mo><mn>1</mn></mrow></msup></math>', "A inverse"),
    ('<math><msup><mi>A</mi><mi>T</mi></msup></math>', "the transpose of A"),
    ('<math><mi>α</mi><mo>+</mo><mi>β</mi><mo>=</mo><mi>Σ</mi></math>', "alpha plus beta equals capital sigma"),
    ('<math><mi>x</mi><mo>≤</mo><mi>y</mi></math>', "x is less than or equal to y"),
    ('<math><mi>x</mi><mo>≥</mo><mi>y</mi></math>', "x is greater than or equal to y"),
    ('<math><mi>x</mi><mo>≠</mo><mi>y</mi></math>', "x is not equal to y"),
    ('<math><mi>a</mi><mo>±</mo><mi>b</mi></math>', "a plus or minus b"),
    ('<math><mi>m</mi><mo>×</mo><mi>n</mi></math>', "m times n"),
    ('<math><msub><mi>x</mi><mn>1</mn></msub><mo>,</mo><mo>…</mo><mo>,</mo><msub><mi>x</mi><mi>n</mi></msub></math>',
     "x sub 1, dot dot dot, x sub n"),
    (SUM, "the sum from i equals 1 to n of a sub i"),
    (INTEGRAL, "the integral from 0 to 1 of f of x d x"),
    (LIMIT, "the limit as x approaches 0 of the fraction sine x over x"),
    (ACCENTS, "x bar, vector v, p hat"),
    (MATRIX, "the 2 by 2 matrix, row 1: a, b; row 2: c, d"),
    ('<math><mfenced open="|" close="|"><mtable><mtr><mtd><mn>1</mn></mtd><mtd><mn>2</mn></mtd></mtr>'
     '<mtr><mtd><mn>3</mn></mtd><mtd><mn>4</mn></mtd></mtr></mtable></mfenced></math>',
     "the determinant of the 2 by 2 matrix, row 1: 1, 2; row 2: 3, 4"),
    ('<math><mfenced><mi>x</mi><mi>y</mi></mfenced></math>', "x, y"),
    ('<math><mrow><mo>|</mo><mi>x</mi><mo>|</mo></mrow></math>', "the absolute value of x"),
    ('<math><msup><mrow><mo>(</mo><mi>a</mi><mo>+</mo><mi>b</mi><mo>)</mo></mrow><mn>2</mn></msup></math>',
     "the quantity a plus b, squared"),
    ('<math><mi>f</mi><mo>&#x2061;</mo><mo>(</mo><mi>x</mi><mo>)</mo></math>', "f of x"),
    ('<math><mi>g</mi><mo>(</mo><mi>x</mi><mo>,</mo><mi>y</mi><mo>)</mo></math>', "g of x, y"),
    ('<math><mi>x</mi><mo>∈</mo><mi>ℝ</mi></math>', "x is in the real numbers"),
    ('<math><mi>n</mi><mo>!</mo></math>', "n factorial"),
    ('<math><msup><mi>f</mi><mo>′</mo></msup></math>', "f prime"),
    ('<math><msub><mi>log</mi><mn>2</mn></msub><mi>x</mi></math>', "log base 2 x"),
    ('<math><mi>x</mi><mo>→</mo><mi>∞</mi></math>', "x to infinity"),
    ('<math><mi>p</mi><mo>⇒</mo><mi>q</mi></math>', "p implies q"),
    ('<math><mn>2</mn><mo>&#x2062;</mo><mi>x</mi></math>', "2 x"),
    ('<math><mtext>for all</mtext><mspace width="1em"/><mi>x</mi></math>', "for all x"),
    ('<math><semantics><mrow><mi>m</mi><mo>×</mo><mi>n</mi></mrow>'
     '<annotation encoding="application/x-tex">m\\times n</annotation></semantics></math>', "m times n"),
]


@pytest.mark.parametrize("markup,spoken", ENGLISH)
def test_english(markup, spoken):
    assert say(markup) == spoken


FRENCH = [
    ('<math><msup><mi>x</mi><mn>2</mn></msup></math>', "x au carré"),
    ('<math><msup><mi>x</mi><mi>n</mi></msup></math>', "x puissance n"),
    ('<math><mfrac><mi>a</mi><mi>b</mi></mfrac></math>', "a sur b"),
    ('<math><msqrt><mn>2</mn></msqrt></math>', "la racine carrée de 2"),
    ('<math><msub><mi>x</mi><mi>i</mi></msub></math>', "x indice i"),
    (BINOMIAL, "k parmi n"),
    ('<math><msup><mi>A</mi><mrow><mo>-</mo><mn>1</mn></mrow></msup></math>', "l'inverse de A"),
    ('<math><msup><mi>A</mi><mi>T</mi></msup></math>', "la transposée de A"),
    ('<math><mi>x</mi><mo>≤</mo><mi>y</mi></math>', "x est inférieur ou égal à y"),
    ('<math><mi>a</mi><mo>±</mo><mi>b</mi></math>', "a plus ou moins b"),
    ('<math><mi>Ω</mi><mo>=</mo><mi>θ</mi></math>', "oméga majuscule égale thêta"),
    (SUM, "la somme de i égale 1 à n de a indice i"),
    (INTEGRAL, "l'intégrale de 0 à 1 de f de x d x"),
    (LIMIT, "la limite quand x tend vers 0 de la fraction sinus x sur x"),
    (MATRIX, "la matrice 2 par 2, ligne 1: a, b; ligne 2: c, d"),
    ('<math><msup><mrow><mo>(</mo><mi>a</mi><mo>+</mo><mi>b</mi><mo>)</mo></mrow><mn>2</mn></msup></math>',
     "la quantité a plus b, au carré"),
]


@pytest.mark.parametrize("markup,spoken", FRENCH)
def test_french(markup, spoken):
    assert say(markup, "fr-FR") == spoken


@pytest.mark.parametrize("lang,spoken", [
    ("de", "x Quadrat plus y hoch n"), ("es", "x al cuadrado más y elevado a n"),
    ("it", "x al quadrato più y elevato alla n"),
])
def test_other_languages(lang, spoken):
    assert say('<math><msup><mi>x</mi><mn>2</mn></msup><mo>+</mo><msup><mi>y</mi><mi>n</mi></msup></math>',
               lang) == spoken


def test_unknown_language_reads_english():
    assert say('<math><msup><mi>x</mi><mn>2</mn></msup></math>', "nl") == "x squared"


def test_alttext_and_aria_label_win():
    assert say('<math alttext="x squared plus one"><mi>x</mi></math>') == "x squared plus one"
    assert say('<math aria-label="the area of the circle"><mi>A</mi></math>') == "the area of the circle"


def test_tex_alttext_is_not_read():
    # TeX source is for machines: the markup is rendered instead
    assert say('<math alttext="\\frac{a}{b}"><mfrac><mi>a</mi><mi>b</mi></mfrac></math>') == "a over b"


def test_plain_text_annotation_only_when_the_markup_says_nothing():
    assert say('<math><semantics><mrow/><annotation encoding="text/plain">a + b</annotation></semantics></math>') == "a + b"


def test_unknown_elements_are_read_through_and_named():
    unknown: list[str] = []
    assert say('<math><mmultiscripts><mi>X</mi><mi>a</mi><mi>b</mi></mmultiscripts></math>', "en", unknown) == "X a b"
    assert unknown == ["mmultiscripts"]


MATH_DOC = (
    '<p>An <math xmlns="http://www.w3.org/1998/Math/MathML"><mi>m</mi><mo>×</mo><mi>n</mi></math> matrix '
    'has <math xmlns="http://www.w3.org/1998/Math/MathML"><mi>m</mi></math> rows.</p>'
    '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"><msup><mi>x</mi><mn>2</mn></msup>'
    '<mo>+</mo><msup><mi>y</mi><mn>2</mn></msup><mo>=</mo><msup><mi>r</mi><mn>2</mn></msup></math>'
    '<p>So it is.</p>'
    '<table><tr><td>Area</td><td><math xmlns="http://www.w3.org/1998/Math/MathML"><mi>π</mi>'
    '<msup><mi>r</mi><mn>2</mn></msup></math></td></tr></table>'
)


def test_inline_math_joins_its_sentence_display_math_is_its_own():
    blocks = read_blocks(parse_xhtml(xhtml(MATH_DOC)))
    assert [b.text for b in blocks] == [
        "An m times n matrix has m rows.",
        "x squared plus y squared equals r squared.",
        "So it is.",
        "Area, pi r squared",
    ]


def test_math_in_the_book_language(tmp_path):
    body = '<p>Soit <math xmlns="http://www.w3.org/1998/Math/MathML"><msup><mi>x</mi><mn>2</mn></msup></math>.</p>'
    path = make_epub(tmp_path, {"a.xhtml": xhtml(body)}, nav=[("Un", "a.xhtml")])
    # make_epub writes dc:language en; a French book names its language in the package
    french = make_epub(tmp_path, {"a.xhtml": xhtml(body)}, nav=[("Un", "a.xhtml")], name="fr.epub")
    import zipfile
    with zipfile.ZipFile(french) as zf:
        files = {i.filename: zf.read(i) for i in zf.infolist()}
    files["OEBPS/content.opf"] = files["OEBPS/content.opf"].replace(b"<dc:language>en<", b"<dc:language>fr<")
    with zipfile.ZipFile(french, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    assert load_book(path).chapters[0].paragraphs == ["Soit x squared."]
    assert load_book(french).chapters[0].paragraphs == ["Soit x au carré."]


def test_element_language_wins_over_the_book_language():
    body = ('<p xml:lang="de">Also <math xmlns="http://www.w3.org/1998/Math/MathML"><msup><mi>x</mi><mn>2</mn>'
            '</msup></math>.</p>')
    blocks = read_blocks(parse_xhtml(xhtml(body)), content=Content(language="en"))
    assert blocks[0].text == "Also x Quadrat."


def test_unknown_mathml_is_a_warning_naming_the_file(tmp_path):
    body = ('<p>See <math xmlns="http://www.w3.org/1998/Math/MathML"><mmultiscripts><mi>X</mi><mi>a</mi>'
            '<mi>b</mi></mmultiscripts></math> and <math xmlns="http://www.w3.org/1998/Math/MathML">'
            '<mmultiscripts><mi>Y</mi><mi>c</mi><mi>d</mi></mmultiscripts></math>.</p>')
    book = load_book(make_epub(tmp_path, {"a.xhtml": xhtml(body)}, nav=[("One", "a.xhtml")]))
    assert book.chapters[0].paragraphs == ["See X a b and Y c d."]
    assert book.warnings == ["a.xhtml: 2 MathML <mmultiscripts> elements read without their structure (only their text)"]


def test_a_label_that_only_says_equation_is_not_read():
    assert say('<math alttext="equation"><msup><mi>x</mi><mn>2</mn></msup></math>') == "x squared"


def test_epub_switch_reads_the_mathml_case_only():
    body = ('<p>So <epub:switch id="s1"><epub:case required-namespace="http://www.w3.org/1998/Math/MathML">'
            '<math xmlns="http://www.w3.org/1998/Math/MathML"><msqrt><mn>2</mn></msqrt></math></epub:case>'
            '<epub:default><img src="sqrt2.png" alt="root two"/></epub:default></epub:switch> is irrational.</p>'
            '<p>Or <epub:switch id="s2"><epub:case required-namespace="urn:other"><x>?</x></epub:case>'
            '<epub:default>one half</epub:default></epub:switch>.</p>')
    assert [b.text for b in read_blocks(parse_xhtml(xhtml(body)))] == [
        "So the square root of 2 is irrational.", "Or one half."]


def test_a_formula_drawn_as_a_picture_with_tex_is_named_not_read(tmp_path):
    body = '<p>Hence <img src="f.png" alt="\\frac{a}{b}"/> holds.</p>'
    book = load_book(make_epub(tmp_path, {"a.xhtml": xhtml(body)}, nav=[("One", "a.xhtml")]))
    assert book.chapters[0].paragraphs == ["Hence holds."]
    assert book.warnings == ["a.xhtml: 1 formula drawn as a picture with a TeX description not read"]


def test_placeholder_alttext_and_empty_scripts():
    # seen in a real textbook: every formula labelled so, and empty exponents left by its converter
    assert say('<math alttext="Alternative text not available"><msup><mrow><mi>ℂ</mi></mrow><mrow/></msup></math>') == \
        "the complex numbers"
    assert say('<math><msub><mi>x</mi><mrow/></msub></math>') == "x"


def test_numbers_written_digit_by_digit_are_one_number():
    assert say('<math><mn>3</mn><mn>3</mn><mo>+</mo><mo>−</mo><mn>1</mn><mn>6</mn></math>') == "33 plus minus 16"


def test_a_bracketed_argument_after_a_function_in_mfenced():
    assert say('<math><msub><mi>f</mi><mi>T</mi></msub><mfenced><mi>x</mi></mfenced></math>') == "f sub T of x"


def test_the_end_of_proof_box_is_silent():
    assert say('<math><mi>□</mi></math>') == ""


def test_a_subscript_written_digit_by_digit_is_one_token():
    assert say('<math><msub><mi>M</mi><mrow><mn>2</mn><mn>2</mn></mrow></msub><mo>→</mo><msub><mi>P</mi><mn>2</mn>'
               '</msub></math>') == "M sub 22 to P sub 2"


def test_brackets_around_a_sum_are_the_quantity():
    assert say('<math><mi>a</mi><mo>−</mo><mo>(</mo><mi>b</mi><mo>+</mo><mi>c</mi><mo>)</mo></math>') == \
        "a minus the quantity b plus c"
    assert say('<math><mfrac><mrow><mi>n</mi><mo>(</mo><mi>n</mi><mo>+</mo><mn>1</mn><mo>)</mo></mrow><mn>2</mn>'
               '</mfrac></math>') == "the fraction n the quantity n plus 1 over 2"
    assert say('<math><mo>(</mo><mn>0</mn><mo>,</mo><mn>1</mn><mo>)</mo></math>') == "0, 1"  # an interval
    assert say('<math><mi>T</mi><mo>−</mo><mo>(</mo><mo>−</mo><mn>1</mn><mo>)</mo></math>') == "T minus minus 1"


def test_a_subscripted_transpose_and_a_bracketed_entry():
    assert say('<math><msubsup><mi>I</mi><mi>n</mi><mi>t</mi></msubsup></math>') == "the transpose of I sub n"
    assert say('<math><msub><mfenced open="[" close="]"><mi>A</mi></mfenced><mrow><mi>i</mi><mi>j</mi></mrow>'
               '</msub></math>') == "A sub i j"
    assert say('<math><mi>x</mi><mo>=</mo><mn>0</mn><mo>.</mo></math>') == "x equals 0."
