"""English: written forms → what a good narrator says. Numbers come from num2words.

The rules run in a fixed order, each one a compiled regular expression with a function, so that the
more specific reading wins: eras and dates before years, money and units before plain numbers,
Roman numerals before the all-caps rules. Every pattern is linear (no nested repetition) and each
rule is one pass over the paragraph, so a megabyte of text costs a few dozen scans.
Choices, where English allows several readings:

* 4-digit numbers from 1100 to 2099 standing alone are years ("1867" → "eighteen sixty-seven",
  "1900" → "nineteen hundred", "1905" → "nineteen oh five", "2005" → "two thousand five"); a unit,
  currency sign, percent sign or thousands comma makes them quantities. Before BC/AD any number
  of three or four digits is a year ("753 BC" → "seven fifty-three B.C").
* "4 July 1776" → "the fourth of July seventeen seventy-six"; "July 4, 1776" → "July fourth,
  seventeen seventy-six". Times: "8.15" and "8:15" → "eight fifteen" where they are clock times
  (after "at", "the", "by" …, or before a.m./p.m.), "0600 hours" → "oh six hundred hours".
* Roman numerals are read only where they are numerals: after a word such as Chapter, Book, Part,
  Act, Scene, Volume (cardinal: "Chapter twelve"), after a ruler's name (ordinal: "Henry the
  Eighth"), and as the whole of a heading or its leading "IV." label. A lone C, D, L or M is a
  letter ("Appendix C"). The pronoun "I" is never a number: after "book", "part", "question" …
  it is the pronoun when a lower-case word follows ("the second book I have read").
* Initialisms are spelled for the voice as dotted letters without a final dot ("FBI" → "F.B.I"):
  espeak-ng (Piper) says "F.B.I" as letters with the stress of an initialism, even for the ones
  it would otherwise read as a word ("IRA"), and without the final dot the sentence splitter
  does not end a sentence there. Acronyms said as words (NASA, NATO, UNESCO) stay as written.
* SHOUTED words become lower case (capitalised at a sentence start).
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import islice

from num2words import num2words

from .normalize_common import ROMAN, roman_value
from .normalize_common import splice as _splice

_c = re.compile

# ----------------------------------------------------------------------------------------------
# Number words


@lru_cache(maxsize=4096)  # num2words is slow; books repeat their numbers
def cardinal(number: str | int) -> str:
    """'59,265' → 'fifty-nine thousand two hundred and sixty-five'; '3.14' → 'three point one four'."""
    s = str(number).replace(",", "")
    negative = s.startswith(("-", "−"))
    s = s.lstrip("-−")
    whole, _, frac = s.partition(".")
    words = (num2words(int(whole)) if len(whole) <= _LONGEST else _digits(whole)) if whole else ""
    if frac:
        digits = _digits(frac)
        words = f"{words} point {digits}".strip() if whole else f"point {digits}"
    words = words.replace(",", "")
    return f"minus {words}" if negative else words


_LONGEST = 15  # longer digit strings (serial numbers, a hostile book's million digits) are read digit by digit


_DIGIT_WORDS = {str(d): num2words(d) for d in range(10)}


def _digits(number: str) -> str:
    return " ".join(_DIGIT_WORDS[d] for d in number)


@lru_cache(maxsize=4096)
def ordinal(number: str | int) -> str:
    if len(str(number).replace(",", "")) > _LONGEST:
        return cardinal(number)
    return num2words(int(str(number).replace(",", "")), to="ordinal").replace(",", "")


@lru_cache(maxsize=4096)
def year(number: str | int) -> str:
    n = int(number)
    if 2000 <= n <= 2009:
        return "two thousand" + (f" {cardinal(n - 2000)}" if n > 2000 else "")
    if n < 1000 or n >= 10000:
        return cardinal(n)
    return num2words(n, to="year").replace("oh-", "oh ").replace(",", "")


@lru_cache(maxsize=4096)
def era_year(number: str) -> str:
    """A year before BC/AD: '44' → 'forty-four', '753' → 'seven fifty-three', '500' → 'five hundred'."""
    n = int(number.replace(",", ""))
    if 100 <= n < 10000 and "," not in number:
        return num2words(n, to="year").replace("oh-", "oh ").replace(",", "")
    return cardinal(n)


def _plural_word(words: str) -> str:
    """'nineteen ninety' → 'nineteen nineties'."""
    head, _, last = words.rpartition(" ")
    last = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {last}".strip()


def _is_one(number: str) -> bool:
    return number.replace(",", "") in ("1", "1.0")


def _cap(words: str) -> str:
    return words[:1].upper() + words[1:]


NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
DASH = r"\s?[-–]\s?"  # a hyphen or en dash between the ends of a range

# ----------------------------------------------------------------------------------------------
# Typography and symbols

_FRACTIONS = {"½": "one half", "⅓": "one third", "⅔": "two thirds", "¼": "one quarter",
              "¾": "three quarters", "⅕": "one fifth", "⅛": "one eighth", "⅜": "three eighths",
              "⅝": "five eighths", "⅞": "seven eighths"}
_ELLIPSIS = _c(r"\.\s?\.\s?\.(?:\s?\.)*|…{2,}")
_DOUBLE_HYPHEN = _c(r"(?<=\w)\s*--\s*(?=\w)|\s--\s")
_FRACTION_AFTER_NUMBER = _c(r"(\d)\s?([" + "".join(_FRACTIONS) + "])")
_FRACTION = _c("[" + "".join(_FRACTIONS) + "]")


def _after_number(m) -> str:
    words = _FRACTIONS[m[2]]
    return f"{m[1]} and a {words[4:]}" if words.startswith("one ") else f"{m[1]} and {words}"


def _typography(text: str) -> str:
    # Each rule runs only where its character occurs: `in` is far cheaper than a regex scan.
    if ".." in text or ". ." in text or "……" in text:
        text = _ELLIPSIS.sub("…", text)
    text = text.replace("\u2044", "/")  # fraction slash
    if "--" in text:
        text = _DOUBLE_HYPHEN.sub("—", text)
    if _FRACTION.search(text):
        text = _FRACTION_AFTER_NUMBER.sub(_after_number, text)
        text = _FRACTION.sub(lambda m: _FRACTIONS[m[0]], text)
    return text


_SYMBOL_WORDS = {"+": "plus", "=": "equals", "±": "plus or minus", "≈": "approximately",
                 "÷": "divided by", "≤": "less than or equal to", "≥": "greater than or equal to",
                 "<": "less than", ">": "greater than", "∞": "infinity", "‰": "per mille",
                 "§§": "sections", "§": "section", "¶": "paragraph", "−": "minus"}
_SPECIAL_SLASHES = {"50/50": "fifty-fifty", "24/7": "twenty-four seven", "9/11": "nine eleven",
                    "and/or": "and or"}
_SLASHES = _c(r"(?<![\w/])(?:50/50|24/7|9/11|and/or)(?![\w/])")
# A sign said as a word: between numbers or words (spaced), or in front of a number.
_SYMBOL = _c(r"(?:(?<=\s)|^)(?:[+=±≈÷≤≥<>−])(?=\s)"           # 2 + 2 = 4, x − y
             r"|(?<![\w+])[+±≈~−](?=\d|\.\d)"                 # +5, ±2, ~30, −5
             r"|(?<=\d)[×x](?=\d)|\s×\s"                      # 3×4, 3 × 4
             r"|(?<=\w)\+(?![\w+])"                           # 18+, A+
             r"|§§?|¶|∞|‰|(?<=\d)\s?=\s?(?=\d)")              # § 12, 1=1
_ARTICLE_NUMBER = _c(r"\b[Aa]n?\s[\d.,]+\s?$")
_NUMBER_UNIT = _c(r"\s?[\d.,]+\s?(?:mm|cm|m|km|in|ft|inches|feet|foot|metres|meters|yards|yd)\b")
_REPEATED_SIGNS = _c(r"[=+~*_]{3,}")
_ANY_SYMBOL = _c(r"[+=±≈÷≤≥<>−~×§¶∞‰*_]|\dx\d")  # ===== rules drawn with characters


def _symbol(m) -> str:
    sign = m[0].strip()
    if sign in ("×", "x"):  # "a 3 × 4 grid", "3 × 4 m": dimensions are "by"
        dimension = _ARTICLE_NUMBER.search(m.string, max(0, m.start() - 16), m.start()) \
            or _NUMBER_UNIT.match(m.string, m.end())
        return " by " if dimension else " times "
    if sign == "~":
        return "about "
    glued = m.start() == 0 or m.string[m.start() - 1] in " ([{\"“‘"  # "(−2" → "(minus 2"
    return f"{'' if glued else ' '}{_SYMBOL_WORDS[sign]} "


def _symbols(text: str) -> str:
    if "/" in text:
        text = _SLASHES.sub(lambda m: _SPECIAL_SLASHES[m[0]], text)
    if _ANY_SYMBOL.search(text):
        text = _REPEATED_SIGNS.sub(" ", text)
        text = _SYMBOL.sub(_symbol, text)
    return text


# Patterns start with the dash itself (fast to find); the spaces around dashes are dropped first.
_DASH_ENDING_SPEECH = _c(r"[—―](?=[\"”’»)]|$)")
_DASH_OPENING = _c(r"[—―](?<![^\"“‘«(][—―])")
_DASH = _c(r"[—―]")
_COMMA_BEFORE_STOP = _c(r",\s*([,.;:!?…])")


def _dashes(text: str) -> str:
    """Dashes a narrator pauses at become commas; a dash ending speech is a trailing off."""
    if "—" not in text and "―" not in text and "–" not in text:
        return text
    text = " ".join(text.split())
    for dash in "—―":
        text = text.replace(" " + dash, dash).replace(dash + " ", dash)
    text = _DASH_ENDING_SPEECH.sub("…", text)
    text = _DASH_OPENING.sub("", text)
    text = _DASH.sub(", ", text)
    text = text.replace(" – ", ", ")  # a spaced en dash used as a dash
    return _COMMA_BEFORE_STOP.sub(r"\1", text)


# ----------------------------------------------------------------------------------------------
# Abbreviations

_TITLES = {  # before a name
    "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Messrs": "Messieurs", "Mme": "Madame",
    "Mlle": "Mademoiselle", "Prof": "Professor", "Rev": "Reverend", "Capt": "Captain",
    "Col": "Colonel", "Gen": "General", "Lt": "Lieutenant", "Sgt": "Sergeant", "Gov": "Governor",
    "Sen": "Senator", "Rep": "Representative", "Hon": "Honourable", "Fr": "Father", "Mt": "Mount",
    "Mts": "Mountains", "Ft": "Fort", "Pres": "President", "Supt": "Superintendent",
    "Cmdr": "Commander", "Adm": "Admiral", "Maj": "Major", "Cpl": "Corporal", "Pvt": "Private",
    "MR": "Mister", "MRS": "Missus", "MESSRS": "Messieurs",
}
# A title is followed by a name, by "and Mrs." ("Mr. and Mrs. Smith"), or by a name's particle.
_TITLE = _c(r"(?P<abbr>[A-Z](?<=\b[A-Z])[A-Za-z]{1,5})\b(?:\.\s*|\s+)"
            r"(?=[A-Z]|(?:and|or|de|du|des|di|da|del|della|van|von|le|la|ten|ter)\b|&|[dl]['’])")
_AFTER_NAME = {"Jr": "Junior", "Sr": "Senior", "Esq": "Esquire", "Bros": "Brothers",
               "Inc": "Incorporated", "Ltd": "Limited", "Ave": "Avenue", "Rd": "Road",
               "Blvd": "Boulevard", "Mts": "Mountains"}
# "King, Jr." keeps its period where it also ends the sentence.
_AFTER_NAME_ABBR = _c(r"(?<=[A-Za-z,] )(?P<abbr>" + "|".join(_AFTER_NAME) + r")\."
                      r"(?=(?P<ends>\s+[A-Z]|\s*$)|\s+[a-z]|\s*[,;:)])")
_STOPWORDS = frozenset(
    "a an the in at on to of from for by and or but near into onto with as is was were be said "
    "says visit visited see saw toward towards past via this that these those it he she they we i "
    "you his her their our my when where then there here".split()
)
# Latin and other abbreviations read as words; the period is kept when it also ends the sentence.
_PHRASES = {
    "&c.": "et cetera", "etc.": "et cetera", "e.g.": "for example", "i.e.": "that is",
    "viz.": "namely", "vs.": "versus", "vs": "versus", "cf.": "compare", "Cf.": "Compare",
    "approx.": "approximately", "ibid.": "ibidem", "etal.": "and others", "N.B.": "note well",
    "c.": "circa", "ca.": "circa", "circ.": "circa", "fl.": "flourished", "b.": "born", "d.": "died",
    "l.": "line", "ll.": "lines",
}
# Each Latin abbreviation is its own pattern that starts with its literal text, run only where that
# text occurs: Python's re scans for a literal prefix quickly, but tries a leading \b everywhere.
_LATIN_WRITTEN = ["&c.", "etc.", "Etc.", "ETC.", "e.g.", "e. g.", "E.G.", "i.e.", "i. e.", "I.E.", "viz.",
                  "Viz.", "cf.", "Cf.", "approx.", "ibid.", "Ibid.", "IBID.", "et al.", "N.B.", "N. B."]
_LATIN = [(w, _c(re.escape(w) + ("" if w[0] == "&" else rf"(?<=\b{re.escape(w)})"))) for w in _LATIN_WRITTEN]
_LATIN.append(("vs", _c(r"vs(?<=\bvs)\.?(?=\s)")))
# c. 1500, ca. 1500; (b. 1850, d. 1900); l. 37, ll. 5-8: only before a number.
_BEFORE_NUMBER = _c(r"(?<![\w.])(?:c|ca|circ|fl|ll|l)\.\s?(?=\d)|(?:(?<=\()|(?<=[,;] ))[bd]\.\s?(?=\d{3,4}\b)")
_CAN_END = frozenset(["et cetera", "and others", "ibidem"])  # may also end a sentence
_NEXT_SENTENCE = _c(r"\s*$|\s+[\"“‘(]?[A-Z]")
_SAINT_OR_STREET = _c(r"(?P<abbr>[SD](?<=\b[SD])[tTrR])\b\.?(?=\s|$|[,;:)])")
_LAST_WORD = _c(r"(\S+)\s*$")
_NAME_NEXT = _c(r"\s+[A-Z]")
_END = _c(r"\s*$")


def _phrase(m) -> str:
    written = "".join(m[0].split())
    words = _PHRASES.get(written) or _PHRASES[written.lower()]
    ends_sentence = words in _CAN_END and _NEXT_SENTENCE.match(m.string, m.end())
    before_number = m.end() < len(m.string) and m.string[m.end()].isdigit()
    return words + ("." if ends_sentence else "") + (" " if before_number else "")


def _saint_or_street(m) -> str:
    if m["abbr"] not in ("St", "Dr", "ST", "DR"):
        return m[0]
    kind = m["abbr"].capitalize()
    before = m.string[max(0, m.start() - 40):m.start()]  # a bounded look back keeps this linear
    prev = _LAST_WORD.search(before)
    prev_word = prev.group(1) if prev else ""
    after_name = bool(_NAME_NEXT.match(m.string, m.end()))
    named_before = (prev_word[:1].isupper() and prev_word.strip(",;:").lower() not in _STOPWORDS
                    and not before.rstrip().endswith((".", "!", "?"))) or prev_word[:1].isdigit()
    if not (named_before and not after_name):
        return "Saint" if kind == "St" else "Doctor"
    word = "Street" if kind == "St" else "Drive"
    return word + "." if m[0].endswith(".") and _END.match(m.string, m.end()) else word


def _after_name(m) -> str:
    return _AFTER_NAME[m["abbr"]] + ("." if m["ends"] is not None else "")


def _abbreviations(text: str) -> str:
    for written, pattern in _LATIN:
        if written in text:
            text = pattern.sub(_phrase, text)
    text = text.replace("&", " and ")
    text = _SAINT_OR_STREET.sub(_saint_or_street, text)
    text = _TITLE.sub(lambda m: _TITLES[m["abbr"]] + " " if m["abbr"] in _TITLES else m[0], text)
    if any(f"{abbr}." in text for abbr in _AFTER_NAME):
        text = _AFTER_NAME_ABBR.sub(_after_name, text)
    return text

# ----------------------------------------------------------------------------------------------
# Roman numerals and the pronoun I

# ROMAN (a whole word that is a well-formed numeral), roman_value and _splice are shared with the
# other languages' rules (normalize_common.py).
ROMAN_LOWER = ROMAN.lower()
_IS_ROMAN = _c(ROMAN + r"|" + ROMAN_LOWER)
# Words a numeral counts. Abbreviations may carry their period; a full word may not ("the
# question. I am" is two sentences, not "Question one").
_NUMBERED_WORDS = (
    "Chapter|Book|Part|Act|Scene|Volume|Canto|Section|Psalm|Article|Appendix|Lesson|"
    "Stave|Plate|Table|Figure|Phase|Stage|Round|Class|Type|Case|Letter|Hymn|Sonnet|Ode|Epistle|"
    "Tome|Fytte|Division|Series|Number|War|Vatican|Stanza|Verse|Lecture|Sermon|Essay|Question|Rule"
)
_NUMBERED_ABBREVIATIONS = {"chap": "chapter", "vol": "volume", "sect": "section", "fig": "figure",
                           "art": "article", "pt": "part", "bk": "book", "ch": "chapter"}
_NUMBERED_ABBR = "|".join(_NUMBERED_ABBREVIATIONS)
_REGNAL = (
    "Henry|Edward|George|William|Louis|Charles|James|Richard|Elizabeth|Mary|Philip|Philippe|John|"
    "Pius|Gregory|Leo|Innocent|Benedict|Clement|Urban|Boniface|Paul|Peter|Frederick|Friedrich|"
    "Alexander|Nicholas|Ferdinand|Napoleon|Ptolemy|Ramesses|Rameses|Amenhotep|Thutmose|Darius|Xerxes|"
    "Artaxerxes|Constantine|Otto|Rudolf|Alfonso|Carlos|Gustav|Gustavus|Christian|Wilhelm|Catherine|"
    "Anne|Ivan|Victor Emmanuel|Umberto|Harold|Stephen|David|Robert|Kenneth|Alexios|"
    "Basil|Leopold|Francis|Franz|Joseph|Sixtus|Julius|Felix|Celestine|Honorius|Eugene|Martin|"
    "Adrian|Hadrian|Sancho|Pedro|Juan|Manuel|Afonso|João|Haakon|Olaf|Magnus|Eric|Erik|Valdemar|"
    "Sigismund|Casimir|Ladislaus|Wenceslaus|Bohemond|Baldwin|Amadeus|Cosimo|Lorenzo|Vittorio|"
    "Farouk|Fuad|Hussein|Mehmed|Murad|Selim|Suleiman|Bayezid|Abdul Hamid|Tiglath-Pileser|"
    "Shalmaneser|Sargon|Nebuchadnezzar|Antiochus|Seleucus|Cleopatra|Psammetichus|Cyrus|Cambyses|"
    "Rama|Bhumibol|Akihito|Pepin|Lothair|Conrad|Sweyn|Canute|Cnut|Edmund|Ethelred|Athelstan|Edgar|"
    "Matilda|Victoria"
)
# Words that put a ruler's name before "I": "King Charles I said", "Pope Leo I".
_RULER_TITLES = frozenset("King Queen Pope Emperor Empress Tsar Czar Tsarina Kaiser Pharaoh Sultan "
                          "Shah Prince Princess Duke Saint St Count Margrave Elector".split())
# After "I": words that continue a numbered title ("Book I of the Iliad", "Parts I and II").
_TITLE_GOES_ON = frozenset("of and or to through & in".split())
# Before "book/part/question I": words that make it a noun phrase, so "I" starts a clause.
_DETERMINERS = frozenset("the a an this that these those each every which what whose my his her our "
                         "their your its one any some no first second third last next same other "
                         "another whichever".split())
# After a ruler's name, words that only the pronoun takes ("Cyrus I have never seen").
_PRONOUN_VERBS = frozenset(
    "am have think know suppose guess mean believe hope wish feel want need will shall can must "
    "would could should might may do did don't didn't can't cannot won't shan't never also just "
    "really only still always often saw see said say told tell heard hear thought found felt "
    "remember forgot love like hate fear dare beg pray promise swear assure trust".split())
_NEXT_WORD = _c(r"\s*([\w'’&]+)")
_PREV_WORD = _c(r"([\w'’.]+)[\s,]*$")


def _next_word(m) -> str:
    nxt = _NEXT_WORD.match(m.string, m.end())
    return nxt.group(1) if nxt else ""


def _prev_word(text: str, start: int) -> str:
    prev = _PREV_WORD.search(text[max(0, start - 40):start])  # bounded look back
    return prev.group(1) if prev else ""


def _is_pronoun_after_word(m) -> bool:
    """'I' after a numbered word: 'the second book I have read' (pronoun) or 'Book I' (a title)."""
    following = _next_word(m)
    if following[:1].islower() and following not in _TITLE_GOES_ON:
        return True
    if m["word"][:1].islower():  # "the book I, however, …" but not "in book I, he says"
        return _prev_word(m.string, m.start()).lower() in _DETERMINERS
    return False


def _is_pronoun_after_name(m) -> bool:
    """'I' after a ruler's name: 'Charles I was beheaded' or 'Cyrus I have never seen'."""
    following = _next_word(m)
    if _prev_word(m.string, m.start()).rstrip(".") in _RULER_TITLES:
        return False
    if not following[:1].islower() or following in _TITLE_GOES_ON or following in ("'s", "’s"):
        return False
    if following.lower() in _PRONOUN_VERBS:
        return True
    prev = _prev_word(m.string, m.start())  # "when I met John I was young": a verb before the name
    return bool(prev) and prev[:1].islower() and prev not in ("of", "under", "by", "to", "and", "with",
                                                              "from", "after", "before", "during", "than")


# Big alternations are slow in Python's re: match any word before a numeral, then look it up.
_NUMBERED_SET = frozenset(w.lower() + plural for w in _NUMBERED_WORDS.split("|") for plural in ("", "s"))
_REGNAL_SET = frozenset(name.rpartition(" ")[2] for name in _REGNAL.split("|"))  # "Victor Emmanuel II"
# One scan finds every word that could be a numeral; the word before it says what it is. (Matching
# "word + numeral" instead would make re try a word at every position: several times slower.)
_NUMERAL = _c(r"(?P<num>[IVXLCDMivxlcdm](?<![^\s][IVXLCDMivxlcdm])[IVXLCDMivxlcdm]*)\b(?!['’]\w)"
              rf"(?P<more>(?:\s?(?:,|and|or|to|&|–)\s?(?:{ROMAN})\b(?!['’]\w))*)")  # "Parts II and III"
_CHAINED = _c(rf"(\s?(?:,|and|or|to|&|–)\s?)({ROMAN})")
_WORD_BEFORE = _c(r"([A-Za-z]+(?:-[A-Z][a-z]+)?\.?)\s+$")
_NAME = _c(r"[A-Z][a-z]+(?:-[A-Z][a-z]+)?")
_INITIALS_NEXT = _c(r"\.\s?[A-Z]\.")  # "Louis V. S. Smith": initials, not a numeral
_LABEL_NEXT = _c(r"\. [A-Z]")


class _Hit:
    """A numeral and the word before it, shaped like the match the readings below take."""

    def __init__(self, m, word: str, start: int, end: int):
        self.string, self._start, self._end = m.string, start, end
        self.groups = {"num": m["num"], "more": m["more"], "word": word, "name": word}
        self.match = m

    def __getitem__(self, key):
        return self.groups[key] if key else self.string[self._start:self._end]

    def start(self):
        return self._start

    def end(self):
        return self._end


# Names not known as rulers take only II, III, IV, VI … XXXIX ("Rocky II"; not "Malcolm X").
_OTHER_NUMERAL = _c(r"X{0,3}(?:IX|IV|VI{0,3}|I{2,3})|X{1,3}(?:IX|IV|VI{0,3}|I{1,3})?")
_STOP_MID_SENTENCE = _c(r"\.(?=\s+[a-z])")


def _numeral(m) -> tuple[int, int, str] | None:
    num = m["num"]
    if not _IS_ROMAN.fullmatch(num):
        return None
    before = m.string[max(0, m.start() - 30):m.start()]
    w = _WORD_BEFORE.search(before)
    if w:
        word, start = w[1], m.start() - (len(before) - w.start())
        key = word.lower()
        if key in _NUMBERED_SET or key.rstrip(".") in _NUMBERED_ABBREVIATIONS:
            hit = _Hit(m, word, start, m.end())
            said = _counted(hit)
            return None if said == hit[0] else (start, m.end(), said)
        if num.isupper() and _NAME.fullmatch(word) and not _INITIALS_NEXT.match(m.string, m.end("num")):
            hit = _Hit(m, word, start, m.end("num"))
            said = _regnal(hit)
            end = m.end("num")
            if said != hit[0] and _STOP_MID_SENTENCE.match(m.string, end):
                end += 1  # "Charles V. abdicated": the old style's stop after a numeral ends no sentence
            return None if said == hit[0] else (start, end, said)
    if (len(num) >= 2 and num.isupper() and set(num) <= set("IVXL") and _LABEL_NEXT.match(m.string, m.end("num"))
            and (not before.strip() and m.start() == len(before) or before.rstrip().endswith((".", "!", "?", ":")))):
        return m.start(), m.end("num"), _cap(cardinal(roman_value(num)))  # "… Porpoise. II. The Algerine"
    return None


_HEADING_NUMBER = _c(rf"(?P<num>{ROMAN}|{ROMAN_LOWER})(?P<rest>[.:]?(?:\s.*)?)", re.DOTALL)
_LONE_NUMBER = _c(r"(?P<num>[IVXL]{2,})\.?")


_LETTER_LABEL = _c(r"[A-Z]\.?")
_ROMAN_LABEL = _c(rf"(?:{ROMAN})\.?")


def letter_headings(headings: list[str]) -> set[int]:
    """Which of a book's headings (in reading order) are letters of the alphabet, not Roman
    numerals: a heading that is one capital letter whose neighbour among the book's label headings
    (lone letters and Roman numerals) is a lone letter too, the two in alphabetical order. A
    dictionary's "B", "C", "D" are letters; in "IV", "V", "VI" the V is five, and so is a lone
    "C" among Roman chapter numbers ("XCIX", "C", "CI")."""
    labels = [(i, h.strip().rstrip(".")) for i, h in enumerate(headings)
              if _LETTER_LABEL.fullmatch(h.strip()) or _ROMAN_LABEL.fullmatch(h.strip())]
    letters: set[int] = set()
    for k in range(len(labels) - 1):
        (i, first), (j, second) = labels[k], labels[k + 1]
        if len(first) == 1 and len(second) == 1 and first < second:
            letters.update((i, j))
    return letters


_LABELLED = _c(rf"(?P<word>[A-Z][a-z]+)\.? (?P<num>{ROMAN})\.?")


def numbered_headings(headings: list[str]) -> set[int]:
    """Which headings "Chapter C" (C, D, L, M after a word: a letter, as in "Appendix C") are Roman
    numerals after all: those whose nearest headings with the same word are numbered in Roman
    numerals of more than one letter ("Chapter XCIX", "Chapter C", "Chapter CI")."""
    labelled = [(i, m) for i, h in enumerate(headings) for m in [_LABELLED.fullmatch(h.strip())] if m]
    found: set[int] = set()
    for k, (i, m) in enumerate(labelled):
        if m["num"] not in ("C", "D", "L", "M"):
            continue
        word = m["word"].lower()
        same = [n for _, n in labelled[:k] if n["word"].lower() == word][-1:] + \
            [n for _, n in labelled[k + 1:] if n["word"].lower() == word][:1]
        if any(len(n["num"]) > 1 for n in same):
            found.add(i)
    return found


def numeral_label(heading: str) -> str:
    """ "Chapter C" → "Chapter one hundred" (for a heading numbered_headings found)."""
    m = _LABELLED.fullmatch(heading.strip())
    return f"{m['word']} {cardinal(roman_value(m['num']))}" if m else heading


def _counted(m) -> str:
    num, key = m["num"], m["word"].lower()
    if not (key in _NUMBERED_SET or key.endswith(".") and key[:-1] in _NUMBERED_ABBREVIATIONS
            or key in _NUMBERED_ABBREVIATIONS):
        return m[0]
    if num in ("C", "D", "L", "M"):  # "Appendix C", "Table D": a letter
        return m[0]
    if num == "I" and _is_pronoun_after_word(m):
        return m[0]
    word = m["word"]
    full = _NUMBERED_ABBREVIATIONS.get(word.rstrip(".").lower())
    if full:  # "Vol. IV" → "Volume four"
        word = _cap(full) if word[:1].isupper() else full
    elif word.isupper() and len(word) > 1 and not _prev_word(m.string, m.start()).isupper():
        word = word.capitalize()  # "ends BOOK I." → "ends Book one." (a shouted run is lowered later)
    return f"{word} {cardinal(roman_value(num))}{_chained(m['more'])}"


def _chained(more: str) -> str:
    out, pos = [], 0
    for link in _CHAINED.finditer(more):
        if link[2] == "I":  # "Books II and I went": the pronoun ends the chain
            break
        out.append(f"{link[1]}{cardinal(roman_value(link[2]))}")
        pos = link.end()
    return "".join(out) + more[pos:]


def _regnal(m) -> str:
    if not set(m["num"]) <= set("IVX"):  # "George M. Troup": L, C, D and M after a name are initials
        return m[0]
    return _regnal_reading(m) if m["name"] in _REGNAL_SET else _other_name(m)


def _regnal_reading(m) -> str:
    if m["num"] == "I" and _is_pronoun_after_name(m):
        return m[0]
    return f"{m['name']} the {_cap(ordinal(roman_value(m['num'])))}"


def _other_name(m) -> str:
    if (len(m["num"]) < 2 or m["name"].lower() in _STOPWORDS or m["name"].lower() in _NUMBERED_SET
            or len(m["name"]) < 3 or not _OTHER_NUMERAL.fullmatch(m["num"])):
        return m[0]
    return _regnal_reading(m)


def _romans(text: str, heading: bool) -> str:
    text = _splice(_NUMERAL, _numeral, text)
    if heading:
        # The whole heading, or its leading label: "XII", "IV. The Preparation", "iii."
        m = _HEADING_NUMBER.fullmatch(text)
        if m and m["num"] and (m["num"] != "I" or m["rest"][:1] in (".", ":", "")):
            text = _cap(cardinal(roman_value(m["num"]))) + m["rest"]
    else:
        m = _LONE_NUMBER.fullmatch(text)
        if m and _IS_ROMAN.fullmatch(m["num"]):
            text = _cap(cardinal(roman_value(m["num"]))) + "."
    return text

# ----------------------------------------------------------------------------------------------
# Capitals: eras, initialisms, acronyms and shouting

# Said as words: left as written (espeak-ng and the other voices read them as words).
_SAID_AS_WORDS = frozenset(
    "NASA NATO UNESCO UNICEF NASDAQ OPEC FIFA UEFA ASEAN NORAD INTERPOL AIDS LASER RADAR SCUBA "
    "NAFTA FEMA OSHA SWAT ANZAC NIMBY SARS COVID OFSTED DEFRA ACAS BAFTA PIN GIF JPEG ROM RAM "
    "SIM WASP LOL SONAR QANTAS TESCO".split())
# Spelled as letters, though they have vowels (words without vowels are always spelled).
_INITIALISMS = frozenset(
    "FBI CIA USA UK EU UN US USSR IBM IOU UFO CEO IQ ID AI AD BCE CE GI IRA ITV MIT UCLA NYPD "
    "LAPD HQ ATM SUV UAE EEC ICU IRS NSA KGB YMCA YWCA SOS ER PTA ASAP RAF USAF OBE MBE KC QC "
    "IMF OECD WTO ANC PLO IDF DOA AWOL EMI RCA AOL EA UEA OU UCL VIA IVF IUD OAP OED UPS BA MA "
    "CD DC MC MD CV LP EP PA PE RE DIY FAQ HIV DNA RNA".split()) - {"VIA", "RE", "PE", "PA", "MA", "BA", "EA"}
# Words that are never spelled: interjections, titles handled elsewhere, typographic stand-ins.
_NOT_SPELLED = frozenset("HMM HM SHH SH PSST PST BRR BRRR GRR GRRR ZZZ TSK PFFT PHT TCH MM MMM NTH "
                         "MR MRS DR ST JR SR LTD MT".split())
_SPELL_WORDS = {"OK": "okay", "PhD": "P.H.D", "PhDs": "P.H.Ds", "MS": "manuscript", "MSS": "manuscripts"}
_VOWELS = set("AEIOUY")
# An all-caps word (with a plural s or possessive 's), or a dotted one ("U.S.", "R.S.V.P.").
_CAPS_WORD = _c(r"(?P<first>[A-Z])(?<![\w.'’][A-Z])(?:(?P<rest>[A-Z]{1,5}|hDs?)(?P<suffix>s|['’]s)?"
                r"|(?P<drest>\.(?:[A-Z]\.)+[A-Z]?)(?P<dsuffix>s|['’]s)?)(?P<dot>\.(?=\s+[a-z]|\s*[,;)]))?(?![\w'’]|\.[A-Za-z])")
_DOTTED_OK = _c(r"O\.K\.?")
_LOWER_NEXT = _c(r"\s*(?:[a-z]|[,;:)\d])")


def _starts_sentence(text: str, start: int) -> bool:
    before = text[max(0, start - 8):start].rstrip(_OPENING)
    return (not before and start <= 8) or before.endswith((".", "!", "?", "…", ":"))


def _letters(word: str) -> str:
    return ".".join(word)


def _initialism(m) -> str:
    if m["drest"]:
        dotted = m["first"] + m["drest"]
        if _DOTTED_OK.fullmatch(dotted):
            return "okay" + ("." if dotted.endswith(".") and not _LOWER_NEXT.match(m.string, m.end()) else "")
        if dotted.endswith(".") and not m["dsuffix"] and _LOWER_NEXT.match(m.string, m.end()):
            return dotted[:-1]  # "the U.S. army": a final period the sentence splitter would end at
        return m[0]
    # A period before a lower-case word is the abbreviation's ("the MSS. give"): spelled, it goes.
    word, suffix = m["first"] + m["rest"], m["suffix"] or ""
    if word in _SPELL_WORDS:
        said = _SPELL_WORDS[word]
        return (_cap(said) if _starts_sentence(m.string, m.start()) else said) + suffix
    if word in _SAID_AS_WORDS or word in _NOT_SPELLED:
        return m[0]
    if word in _INITIALISMS or not (_VOWELS & set(word)) and not _IS_ROMAN.fullmatch(word) \
            and len(set(word)) > 1:
        return _letters(word) + ("." + suffix if suffix == "s" else suffix)
    return m[0]


def _initialisms(text: str) -> str:
    text = _COMPASS.sub(_compass, text)
    return _CAPS_WORD.sub(_initialism, text)


# Compass points, dotted or not: "S.E." → "south-east", "NNW" → "north-north-west".
_POINTS = {"N": "north", "S": "south", "E": "east", "W": "west"}
_COMPASS_POINTS = frozenset("NE NW SE SW NNE NNW SSE SSW ENE ESE WNW WSW".split())
_COMPASS = _c(r"(?P<c>[NSEW](?<![\w.'’][NSEW])\.?[NSEW]\.?(?:[NSEW]\.?)?)(?![\w'’]|\.\w)")


def _compass(m) -> str:
    letters = m["c"].replace(".", "")
    if letters not in _COMPASS_POINTS:
        return m[0]
    words = "-".join(_POINTS[c] for c in letters[-2:])
    if len(letters) == 3:
        words = f"{_POINTS[letters[0]]}-{words}"
    ends = m["c"].endswith(".") and _NEXT_SENTENCE.match(m.string, m.end())
    return words + ("." if ends else "")


# "44 BC", "AD 1066", "c. 500 B.C.E." The era is spelled like any initialism.
_ERAS = {"BC": "B.C", "BCE": "B.C.E", "AD": "A.D", "CE": "C.E"}
_ERA_AFTER = _c(r"(?<![\w.,])(?P<n>\d{1,3}(?:,\d{3})+|\d+)\s?(?P<era>BCE|BC|AD|CE|B\.\s?C\.(?:\s?E\.)?|"
                r"A\.\s?D\.|C\.\s?E\.)(?![\w])")
_ERA_BEFORE = _c(r"\b(?P<era>AD|A\.\s?D\.)\s?(?P<n>\d+)\b(?![.,]\d)")


def _era(m) -> str:
    written = m["era"]
    era = _ERAS["".join(c for c in written if c.isalpha())]
    if m.start("era") < m.start("n"):
        return f"{era} {era_year(m['n'])}"
    # A period after the era may also end the sentence: kept there, dropped mid-sentence.
    ends = written.endswith(".") and _NEXT_SENTENCE.match(m.string, m.end())
    return f"{era_year(m['n'])} {era}" + ("." if ends else "")


def _eras(text: str) -> str:
    text = _ERA_BEFORE.sub(_era, text)
    return _ERA_AFTER.sub(_era, text)


_EXCLUDED_FROM_SHOUTING = _SAID_AS_WORDS | _INITIALISMS | frozenset(["OK", "TV", "GPS", "HIV", "DNA", "RNA"])
_AMBIGUOUS_CAPS = frozenset(["US", "AD", "ID", "AI", "ER", "IT", "AM", "PM"])  # also plain words
# A capital first keeps the scan fast (a leading \b would make re try every position).
_CAPS_TOKEN = _c(r"[A-Z](?<=\b[A-Z])(?:[A-Z'’]*[A-Z])?\b")
_UPPER = _c(r"[A-ZÀ-ÖØ-Þ]")
_LOWER = _c(r"[a-zß-öø-ÿ]")
_BETWEEN_SHOUTED = _c(r"[\s,;:.!?\"'“”‘’—-]*")
_LETTER_WORD = _c(r"[A-Za-z]{2,}")
_OPENING = " \"'“‘("


def _shouting(text: str) -> str:
    """SHOUTED words → lower case; acronyms and initialisms stay."""
    tokens = [t for t in _CAPS_TOKEN.finditer(text) if len(t[0]) > 1 or t[0] in "AI"]
    if not tokens:
        return text
    # Mostly capitals (over 90 % of the letters) and at least two words: the whole text shouts.
    upper = len(_UPPER.findall(text))
    lower_past_limit = next(islice(_LOWER.finditer(text), upper // 9, None), None)  # stops early
    all_caps = lower_past_limit is None and len(list(islice(_LETTER_WORD.finditer(text), 2))) == 2

    def candidate(word: str) -> bool:
        return word not in _EXCLUDED_FROM_SHOUTING and bool(_VOWELS & set(word)) and len(word) >= 2

    # Runs: two or more all-caps words with only spaces or punctuation between them.
    in_run: set[int] = set()
    run: list[int] = []
    for i, t in enumerate(tokens):
        if run and _BETWEEN_SHOUTED.fullmatch(text, tokens[run[-1]].end(), t.start()):
            run.append(i)
        else:
            if sum(1 for j in run if candidate(tokens[j][0])) >= 2:
                in_run.update(run)
            run = [i]
    if sum(1 for j in run if candidate(tokens[j][0])) >= 2:
        in_run.update(run)

    out, pos = [], 0
    for i, t in enumerate(tokens):
        word = t[0]
        shouted = all_caps or i in in_run
        if len(word) == 1 and not shouted:
            continue
        shout = (candidate(word) and (len(word) >= 5 or shouted)) or (word in _AMBIGUOUS_CAPS and shouted)
        if word == "I" or (not shout and not (word == "A" and shouted)):
            continue
        lower = word.lower()
        if _starts_sentence(text, t.start()):
            lower = _cap(lower)
        out.append(text[pos:t.start()])
        out.append(lower)
        pos = t.end()
    out.append(text[pos:])
    return "".join(out)

# ----------------------------------------------------------------------------------------------
# Dates and times

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_MONTH_ABBR = {"Jan": "January", "Feb": "February", "Mar": "March", "Apr": "April", "Jun": "June",
               "Jul": "July", "Aug": "August", "Sep": "September", "Sept": "September",
               "Oct": "October", "Nov": "November", "Dec": "December"}
MONTH = (r"(?P<month>" + "|".join(_MONTHS) + "|" + "|".join(sorted(_MONTH_ABBR, key=len, reverse=True))
         + r")\.?")
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_DAY_ABBR = {"Mon": "Monday", "Tue": "Tuesday", "Tues": "Tuesday", "Wed": "Wednesday",
             "Thu": "Thursday", "Thur": "Thursday", "Thurs": "Thursday", "Fri": "Friday",
             "Sat": "Saturday", "Sun": "Sunday"}
_NAMED = "|".join(_DAYS + _MONTHS + sorted({**_DAY_ABBR, **_MONTH_ABBR}, key=len, reverse=True))
# "Monday–Friday", "May–June", "Mon.–Fri.": said with "to" ("between … and").
_NAMED_RANGE = _c(rf"\b(?P<between>between\s+)?(?P<a>{_NAMED})\.?\s?[–-]\s?(?P<b>{_NAMED})\b(?:\.(?=\s[a-z]))?")
_DAY_MONTH = _c(rf"\b(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}(?:,?\s+(?P<year>\d{{3,4}})\b)?")
_MONTH_DAY = _c(rf"\b{MONTH}\s+(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\b(?!:)(?:,?\s+(?P<year>\d{{4}})\b)?")
_THE_BEFORE = _c(r"\b[Tt]he\s+$")


def _named(word: str) -> str:
    return _DAY_ABBR.get(word.capitalize()) or _MONTH_ABBR.get(word.capitalize()) or word


def _named_range(m) -> str:
    joiner = "and" if m["between"] else "to"
    return f"{m['between'] or ''}{_named(m['a'])} {joiner} {_named(m['b'])}"


def _day_month(m) -> str:
    the = "" if _THE_BEFORE.search(m.string[max(0, m.start() - 6):m.start()]) else "the "
    out = f"{the}{ordinal(m['day'])} of {_MONTH_ABBR.get(m['month'], m['month'])}"
    return out + (f" {year(m['year'])}" if m["year"] else "")


def _month_day(m) -> str:
    out = f"{_MONTH_ABBR.get(m['month'], m['month'])} {ordinal(m['day'])}"
    return out + (f", {year(m['year'])}" if m["year"] else "")


def _dates(text: str) -> str:
    text = _DAY_MONTH.sub(_day_month, text)
    return _MONTH_DAY.sub(_month_day, text)


HALF_DAY = r"(?:(?P<ap>[ap])\.?m\b\.?|(?P<AP>[AP])\.?M\b\.?)"
_CLOCK = _c(r"\b(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)\b(?:\s?" + HALF_DAY + ")?")
# "0600 hours", "1430 hrs": the military reading.
_HOURS_24 = _c(r"\b(?P<h>[01]\d|2[0-3])(?P<m>[0-5]\d)\s?(?:hours|hrs\.?|hr\.?)(?!\w)")
# Clock times written with a dot become colon times where a time is meant: before a.m./p.m., or
# after "at", "the" ("the 8.15 from Paddington"), "by", "until" … and not before a unit or a price.
_DOT_TIME_BEFORE_HALF_DAY = _c(r"\b(?P<h>1[0-2]|0?[1-9])\.(?P<m>[0-5]\d)(?=\s?(?:[ap]\.?m\b|[AP]\.?M\b))")
_NOT_A_TIME_AFTER = (r"(?!\d|\.\d|\s?(?:%|per\b|percent|pounds?\b|dollars?\b|euros?\b|[ckm]?m\b|kg\b|g\b|"
                     r"miles?\b|metres?\b|meters?\b|inch|feet\b|foot\b|ft\b|lbs?\b|oz\b|times\b|points?\b|"
                     r"each\b|a\s(?:share|pound|head|piece|unit|ton|yard|foot|metre)\b|x\b|×))")
_DOT_TIME = _c(r"\b(?P<pre>[Aa]t|[Tt]he|[Bb]y|till|[Uu]ntil|[Ff]rom|[Aa]fter|[Bb]efore|to|and|[Bb]etween|past|"
               r"[Ss]ince)\s(?P<h>[01]?\d|2[0-3])\.(?P<m>[0-5]\d)" + _NOT_A_TIME_AFTER)
_DOT_TIME_RANGE = _c(r"(?<=:\d\d)\s?[–-]\s?(?P<h>[01]?\d|2[0-3])[.:](?P<m>[0-5]\d)\b" + _NOT_A_TIME_AFTER)
_NOON = _c(r"\s+(?:noon|midnight)")
_RATIO_OR_VERSE = _c(r"(?P<name>\b[A-Z][a-z]+\s)?\b(?P<a>\d+):(?P<b>\d+)\b")
_HOUR_ONLY = _c(r"\b(?:(?P<h0>1[0-2]|0?[1-9])\s?[–-]\s?)?(?P<h>1[0-2]|0?[1-9])\s?" + HALF_DAY)


def _minutes(minute: str) -> str:
    return f"oh {cardinal(minute[1])}" if minute.startswith("0") else cardinal(minute)


def _clock(m) -> str:
    hour, minute, half = int(m["h"]), m["m"], m["ap"] or m["AP"]
    words = cardinal(hour)
    if minute == "00":
        words += "" if half or _NOON.match(m.string, m.end()) else " o'clock"
    else:
        words += f" {_minutes(minute)}"
    if half:
        words += " a.m." if half[0].lower() == "a" else " p.m."
    return words


def _hours_24(m) -> str:
    hour = "zero" if m["h"] == "00" else ("oh " if m["h"][0] == "0" else "") + cardinal(int(m["h"]))
    minutes = "hundred" if m["m"] == "00" else _minutes(m["m"])
    return f"{hour} {minutes} hours"


def _hour_only(m) -> str:
    half = "a.m." if (m["ap"] or m["AP"]).lower() == "a" else "p.m."
    start = f"{cardinal(m['h0'])} to " if m["h0"] else ""
    return f"{start}{cardinal(m['h'])} {half}"


def _times(text: str) -> str:
    text = _HOURS_24.sub(_hours_24, text)
    text = _DOT_TIME_BEFORE_HALF_DAY.sub(r"\g<h>:\g<m>", text)
    text = _DOT_TIME.sub(r"\g<pre> \g<h>:\g<m>", text)
    text = _DOT_TIME_RANGE.sub(r" to \g<h>:\g<m>", text)
    text = _CLOCK.sub(_clock, text)
    # Other n:m — a reference after a name ("Ezekiel 2:1" → "two one"), else a ratio ("two to one").
    text = _RATIO_OR_VERSE.sub(
        lambda m: f"{m['name'] or ''}{cardinal(m['a'])} {'' if m['name'] else 'to '}{cardinal(m['b'])}", text)
    return _HOUR_ONLY.sub(_hour_only, text)

# ----------------------------------------------------------------------------------------------
# Money, percentages, units

_CURRENCY = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence"),
             "€": ("euro", "euros", "cent", "cents"), "¥": ("yen", "yen", None, None),
             "₹": ("rupee", "rupees", "paisa", "paise")}
_SCALES = "thousand|million|billion|trillion"
_SIGNS = "".join(map(re.escape, _CURRENCY))
_MONEY = _c(rf"(?P<sign>[{_SIGNS}])\s?(?P<whole>\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.(?P<cents>\d{{1,2}}))?"
            rf"(?:{DASH}(?P=sign)?(?P<upto>\d{{1,3}}(?:,\d{{3}})+|\d+)(?![.\d]))?(?:\s(?P<scale>{_SCALES})\b)?")
_CENTS = _c(r"\b(\d+)\s?¢")
# Pounds, shillings and pence: "£5 10s 6d", "2s. 6d.", "10s. a week", "6d. each".
_PENCE_WORDS = {2: "twopence", 3: "threepence", 4: "fourpence", 5: "fivepence", 6: "sixpence",
                7: "sevenpence", 8: "eightpence", 9: "ninepence", 10: "tenpence", 11: "elevenpence"}
_LSD = _c(r"£\s?(?P<l>\d+)(?:\s|,\s?)(?P<s>\d+)s\b(?:\.(?=,?\s?\d|\s+[a-z]|\s*[,;:)]))?"
          r"(?:,?\s?(?P<d>\d+)d\b(?:\.(?=\s+[a-z]|\s*[,;:)]))?)?"                 # £5 10s 6d
          r"|\b(?P<s2>\d+)s\.?,?\s?(?P<d2>\d+)d\b(?:\.(?=\s+[a-z]|\s*[,;:)]))?"  # 2s. 6d.
          r"|\b(?P<s3>\d+)s\.(?=\s(?:a|an|each|per|apiece|for)\b)")             # 10s. a week
_PENCE = _c(r"\b(?P<d>\d+)d\.(?=\s(?:a|an|each|per|apiece|for|in)\b|[,;)])")


def _money(m) -> str:
    big, small, small_plural = _CURRENCY[m["sign"]][1:]
    whole, cents, scale = m["whole"], m["cents"], m["scale"]
    if m["upto"]:  # "$5–10" → "five to ten dollars"
        return f"{cardinal(whole)} to {cardinal(m['upto'])}{' ' + scale if scale else ''} {big}"
    if scale:
        amount = whole + (f".{cents}" if cents else "")
        return f"{cardinal(amount)} {scale} {big}"
    units = int(whole.replace(",", "") or 0)
    parts = []
    if units or not cents or not small:
        parts.append(f"{cardinal(units)} {_CURRENCY[m['sign']][0] if units == 1 else big}")
    if cents and small and int(cents.ljust(2, "0")):
        c = int(cents.ljust(2, "0"))
        parts.append(f"{cardinal(c)} {small if c == 1 else small_plural}")
    return " and ".join(parts)


def _pence(n: int) -> str:
    return "a penny" if n == 1 else _PENCE_WORDS.get(n) or f"{cardinal(n)} pence"


def _lsd(m) -> str:
    pounds, shillings, pence = m["l"], m["s"] or m["s2"] or m["s3"], m["d"] or m["d2"]
    said = f"{cardinal(shillings)} {_plural(shillings, 'shilling', 'shillings')}"
    if pounds:
        said = f"{cardinal(pounds)} {_plural(pounds, 'pound', 'pounds')} {said}"
    return f"{said} and {_pence(int(pence))}" if pence and int(pence) else said


def _currency(text: str) -> str:
    text = _LSD.sub(_lsd, text)
    text = _PENCE.sub(lambda m: _pence(int(m["d"])), text)
    text = _MONEY.sub(_money, text)
    return _CENTS.sub(lambda m: f"{cardinal(m[1])} {'cent' if m[1] == '1' else 'cents'}", text)


_PERCENT = _c(rf"(?<![\w.])(?:(?P<a>-?(?:{NUM})){DASH})?(?P<n>-?(?:{NUM}))\s?%")


def _percent(text: str) -> str:
    return _PERCENT.sub(lambda m: (f"{cardinal(m['a'])} to " if m["a"] else "") + f"{cardinal(m['n'])} percent", text)


_UNITS = {
    # abbreviation: (singular, plural); matched after a number
    "km/h": ("kilometer per hour", "kilometers per hour"), "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"), "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"), "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"), "kg": ("kilogram", "kilograms"), "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"), "lbs": ("pound", "pounds"), "lb": ("pound", "pounds"),
    "oz": ("ounce", "ounces"), "ft": ("foot", "feet"), "yd": ("yard", "yards"), "yds": ("yard", "yards"),
    "mi": ("mile", "miles"), "ml": ("milliliter", "milliliters"), "cc": ("cubic centimeter", "cubic centimeters"),
    "hrs": ("hour", "hours"), "hr": ("hour", "hours"), "min": ("minute", "minutes"),
    "mins": ("minute", "minutes"), "sec": ("second", "seconds"), "secs": ("second", "seconds"),
    "kW": ("kilowatt", "kilowatts"), "kWh": ("kilowatt hour", "kilowatt hours"), "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"), "GHz": ("gigahertz", "gigahertz"),
    "KB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"), "sq ft": ("square foot", "square feet"),
    "sq mi": ("square mile", "square miles"), "sq km": ("square kilometer", "square kilometers"),
    "km²": ("square kilometer", "square kilometers"), "m²": ("square meter", "square meters"),
    "°C": ("degree Celsius", "degrees Celsius"), "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
}
_UNIT_KEYS = "|".join(re.escape(k).replace(r"\ ", r"\.?\s?") for k in sorted(_UNITS, key=len, reverse=True))
# A unit word must not run on into more letters ("5 miles" is not "5 mi" + "les"). A range shares
# its unit ("20–25 °C"); after "a" the measure is an adjective ("a 45° angle", "a 5 km walk").
_UNIT = _c(rf"(?:\b(?P<article>[Aa]n?)\s)?(?<![\w.])(?:(?P<a>-?(?:{NUM})){DASH})?(?P<n>-?(?:{NUM}))\s?"
           rf"(?P<unit>{_UNIT_KEYS})(?:\.(?=\s+[a-z]|\s*[,;:)]))?(?![\w²])")
_NOUN_NEXT = _c(r"\s+(?!(?:of|in|to|and|or|per|from|by|at|on|for|a|an|the|is|was|away|long|high|wide|"
                r"deep|tall|thick|across|apart|north|south|east|west|above|below|off)\b)[a-z]")
_FEET_INCHES = _c(r"(?<![\w.])(?<!°)(?<!° )(?P<ft>\d{1,2})\s?(?:['′]|ft\.?)\s?(?P<inch>\d{1,2})\s?(?:\"|″|''|”|in\.|in\b)")
_ARC = _c(r"(?<=degrees )(\d+)\s?[′']\s?(?:(\d+)\s?[″\"])?")
_FEET = _c(r"\b(\d+)(?:′|'(?=\s(?:tall|high|long|wide|deep|across|square|above|below)\b))")
_INCHES = _c(r"\b(\d+)″")


def _plural(n: str, singular: str, plural: str) -> str:
    return singular if _is_one(n) else plural


def _unit(m) -> str:
    singular, plural = _UNITS[re.sub(r"\.?\s", " ", m["unit"]).replace(".", "")]
    adjective = m["article"] and not m["a"] and _NOUN_NEXT.match(m.string, m.end())
    words = f"{cardinal(m['n'])} {singular if adjective else _plural(m['n'], singular, plural)}"
    if m["a"]:
        words = f"{cardinal(m['a'])} to {words}"
    return f"{m['article']} {words}" if m["article"] else words


def _feet_inches(ft: str, inch: str | None) -> str:
    words = f"{cardinal(ft)} {_plural(ft, 'foot', 'feet')}"
    return words + (f" {cardinal(inch)} {_plural(inch, 'inch', 'inches')}" if inch else "")


def _units(text: str) -> str:
    text = _FEET_INCHES.sub(lambda m: _feet_inches(m["ft"], m["inch"]), text)
    text = _UNIT.sub(_unit, text)
    # Degrees, minutes and seconds of arc; elsewhere ′ ″ after a number are feet and inches.
    text = _ARC.sub(lambda m: f"{cardinal(m[1])} {_plural(m[1], 'minute', 'minutes')}"
                    + (f" {cardinal(m[2])} {_plural(m[2], 'second', 'seconds')}" if m[2] else ""), text)
    text = _FEET.sub(lambda m: _feet_inches(m[1], None), text)
    return _INCHES.sub(lambda m: f"{cardinal(m[1])} {_plural(m[1], 'inch', 'inches')}", text)

# ----------------------------------------------------------------------------------------------
# Numbered things and plain numbers

_NUMBERED = [
    (_c(r"\bNo\.\s?(?=\d)"), "number "), (_c(r"\bNos\.\s?(?=\d)"), "numbers "),
    (_c(r"(?<![\w&])#(?=\d)"), "number "), (_c(r"\bpp\.\s?(?=\d)"), "pages "), (_c(r"\bp\.\s?(?=\d)"), "page "),
    (_c(r"\bVol\.\s?(?=\d)"), "Volume "), (_c(r"\bvol\.\s?(?=\d)"), "volume "),
    (_c(r"\bCh(?:ap)?\.\s?(?=\d)"), "Chapter "), (_c(r"\bch(?:ap)?\.\s?(?=\d)"), "chapter "),
    (_c(r"\bFig\.\s?(?=\d)"), "Figure "), (_c(r"\bfig\.\s?(?=\d)"), "figure "),
]
_DECADE = _c(r"\b(1[1-9]\d0|20[0-9]0)['’]?s\b")
_SHORT_DECADE = _c(r"(?:(?<=\s)|^)['’]([1-9]0)['’]?s\b")
_TENS = _c(r"\b([2-9]0)['’]?s\b")
_ORDINAL = _c(r"\b(\d{1,3}(?:,\d{3})*|\d+)(?i:st|nd|rd|th)\b")  # 4th, 4TH
_SPAN = _c(r"(?<![\w.,/-])(?P<a>\d+)\s?[-–]\s?(?P<b>\d+)(?![\w.,/-]\d)")
_BETWEEN_BEFORE = _c(r"\bbetween\s+$", re.IGNORECASE)
_YEAR_SHAPE = _c(r"1[1-9]\d\d|20\d\d")
# A year-shaped number that counts things: after a verb of having or being, or a word of amount,
# and before a word ("there were 1522 manufacturing establishments", "with 1200 men"). A year there
# reads as a year ("in 1867 he left", "about 1850 the railway came": "about" is a circa as often).
_COUNT_OF_THINGS = _c(r"\b((?:were|are|had|has|have|with|only|nearly|almost|some|over|than) )"
                      r"(1[1-9]\d\d|20\d\d)(?= [a-z])")
_FRACTION_NUMBERS = _c(r"(?<![\w/])(?:(?P<whole>\d+)\s)?(?P<num>\d{1,2})/(?P<den>\d{1,2})(?![\w/])")
_EARLY_YEAR = _c(r"\b(in|of|since|until|till|from|by|year|circa|about|around) (10\d\d)\b(?![\w%]|[.,]\d)")
_YEAR = _c(r"(?<![\w.,$£€])(1[1-9]\d\d|20\d\d)(?![\w%]|[.,]\d)")
_NUMBER = _c(rf"(?<![\w.])(?:(?<=[\s(\[])-|^-)?(?:{NUM})(?![\w])")
_GLUED_DIGITS = _c(r"\d+")


def _span(m) -> str:
    """1869-1871, 1869-71, 5-8, 55-7 (the second number may repeat only the changing digits), 9–5."""
    a, b = m["a"], m["b"]
    if len(b) < len(a) and int(b) > 0:
        full = a[: len(a) - len(b)] + b
        if int(full) > int(a):
            b = full
    to = "and" if _BETWEEN_BEFORE.search(m.string[max(0, m.start() - 12):m.start()]) else "to"
    if _YEAR_SHAPE.fullmatch(a) and _YEAR_SHAPE.fullmatch(b) and int(b) > int(a):
        return f"{year(a)} {to} {year(b)}"
    return f"{cardinal(a)} {to} {cardinal(b)}"


def _fraction(m) -> str:
    num, den = int(m["num"]), int(m["den"])
    if den == 0:
        return f"{cardinal(num)} over zero"
    if den == 2:
        words = "half" if num == 1 else f"{cardinal(num)} halves"
    elif den == 4:
        words = "quarter" if num == 1 else f"{cardinal(num)} quarters"
    else:
        words = ordinal(den) if num == 1 else f"{cardinal(num)} {ordinal(den)}s"
    if m["whole"]:
        return f"{cardinal(m['whole'])} and {'a ' + words if num == 1 else words}"
    return f"one {words}" if num == 1 else words


def _glued(m) -> str:
    """Digits glued to letters: "B2" → "B two"."""
    s = m.string
    before = " " if m.start() and s[m.start() - 1].isalpha() else ""
    after = " " if m.end() < len(s) and s[m.end()].isalpha() else ""
    return before + cardinal(m[0]) + after


def _numbered(text: str) -> str:
    """No. 5, #5, p. 12, pp. 5-8, vol. 3, ch. 4, fig. 2."""
    for pattern, words in _NUMBERED:
        text = pattern.sub(words, text)
    return text


def _years_and_numbers(text: str) -> str:
    text = _DECADE.sub(lambda m: _plural_word(year(m[1])), text)
    text = _SHORT_DECADE.sub(lambda m: _plural_word(cardinal(m[1])), text)
    text = _TENS.sub(lambda m: _plural_word(cardinal(m[1])), text)
    text = _ORDINAL.sub(lambda m: ordinal(m[1]), text)
    text = _SPAN.sub(_span, text)
    text = _FRACTION_NUMBERS.sub(_fraction, text)
    # Years, then every other number. 1000-1099 are years only where a year is expected.
    text = _EARLY_YEAR.sub(lambda m: f"{m[1]} {year(m[2])}", text)
    text = _COUNT_OF_THINGS.sub(lambda m: f"{m[1]}{cardinal(m[2])}", text)
    text = _YEAR.sub(lambda m: year(m[1]), text)
    text = _NUMBER.sub(lambda m: cardinal(m[0]), text)
    return _GLUED_DIGITS.sub(_glued, text)


# ----------------------------------------------------------------------------------------------



def _number_rules(text: str) -> str:
    text = _BEFORE_NUMBER.sub(_phrase, text)
    text = _eras(text)
    text = _dates(text)
    text = _times(text)
    text = _currency(text)
    text = _percent(text)
    text = _units(text)
    text = _numbered(text)
    return _years_and_numbers(text)


_DIGITS = _c(r"\d+")
_MARGIN = 100  # characters of context every number rule needs around its digits ("the 4th of July 1776")


def _around_digits(text: str, rules) -> str:
    """Apply `rules` only to the stretches of a long text that hold digits, each with a margin of
    context cut at a space: a long paragraph with few numbers costs little more than one scan."""
    if len(text) < 20 * _MARGIN:
        return rules(text) if _DIGITS.search(text) else text
    out, pos = [], 0
    windows: list[list[int]] = []
    for m in _DIGITS.finditer(text):
        start, end = m.start() - _MARGIN, m.end() + _MARGIN
        if windows and start <= windows[-1][1]:
            windows[-1][1] = end
        else:
            windows.append([start, end])
    for start, end in windows:
        cut = max(pos, text.rfind(" ", pos, max(pos, start)) + 1)
        stop = text.find(" ", min(len(text), end))
        stop = len(text) if stop < 0 else stop
        if stop <= pos:
            continue
        out.append(text[pos:cut])
        out.append(rules(text[cut:stop]))
        pos = stop
    out.append(text[pos:])
    return "".join(out)


# A run of more digits than _LONGEST, plain or in thousands groups.
_LONG_NUMBER = re.compile(rf"\d{{{_LONGEST + 1},}}|\d{{1,3}}(?:,\d{{3}}){{{_LONGEST // 3},}}")


def normalize(text: str, heading: bool = False) -> str:
    # Long digit runs first, so no later rule (money, ranges, fractions) sees a number it cannot say.
    text = _LONG_NUMBER.sub(lambda m: f" {_digits(m[0].replace(',', ''))} ", text)
    text = _typography(text)
    text = _symbols(text)
    text = _romans(text, heading)
    text = _shouting(text)
    text = _abbreviations(text)
    if "–" in text or "-" in text:
        text = _NAMED_RANGE.sub(_named_range, text)
    text = _around_digits(text, _number_rules)
    text = _initialisms(text)  # after units: "500 GB" is gigabytes
    text = " ".join(_dashes(text).split())
    for stop in ",;:.!?":
        text = text.replace(" " + stop, stop)
    return text
