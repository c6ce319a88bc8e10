"""English: written forms → what a good narrator says. Numbers come from num2words.

The rules run in a fixed order, each one a regular expression with a function, so that the more
specific reading wins: dates before years, money and units before plain numbers, Roman numerals
before the all-caps rule. Choices, where English allows several readings:

* 4-digit numbers from 1100 to 2099 standing alone are years ("1867" → "eighteen sixty-seven",
  "1900" → "nineteen hundred", "1905" → "nineteen oh five", "2005" → "two thousand five"); a unit,
  currency sign, percent sign or thousands comma makes them quantities.
* "4 July 1776" → "the fourth of July seventeen seventy-six"; "July 4, 1776" → "July fourth,
  seventeen seventy-six".
* Roman numerals are read only where they are numerals: after a word such as Chapter, Book, Part,
  Act, Scene, Volume, Canto, Psalm, War (cardinal: "Chapter twelve", "Scene two"), after a ruler's
  name (ordinal: "Henry the Eighth"; "I", "V" and "X" only after a known regnal name, so the
  pronoun and "Malcolm X" are safe), and as the whole of a heading or its leading "IV." label.
* SHOUTED words become lower case (capitalised at a sentence start); acronyms stay: words without
  vowels (BBC), words of up to four letters standing alone (NASA), and a list of known ones.
"""

from __future__ import annotations

import re

from num2words import num2words

# ----------------------------------------------------------------------------------------------
# Number words


# Longer runs of digits (an ID, a serial number, a run of hostile input) are read digit by digit:
# nobody says "one quadrillion ...", and past 4300 digits Python will not even make them an int.
MAX_NUMBER_DIGITS = 15


def _digit_by_digit(digits: str) -> str:
    return " ".join(num2words(int(d)) for d in digits)


def cardinal(number: str | int) -> str:
    """'59,265' → 'fifty-nine thousand two hundred and sixty-five'; '3.14' → 'three point one four'."""
    s = str(number).replace(",", "")
    negative = s.startswith(("-", "−"))
    s = s.lstrip("-−")
    whole, _, frac = s.partition(".")
    long = len(whole) > MAX_NUMBER_DIGITS
    words = _digit_by_digit(whole) if long else num2words(int(whole)) if whole else ""
    if frac:
        digits = _digit_by_digit(frac)
        words = f"{words} point {digits}".strip() if whole else f"point {digits}"
    words = words.replace(",", "")
    return f"minus {words}" if negative else words


def ordinal(number: str | int) -> str:
    digits = str(number).replace(",", "")
    if len(digits) > MAX_NUMBER_DIGITS:
        return cardinal(digits)
    return num2words(int(digits), to="ordinal").replace(",", "")


def year(number: str | int) -> str:
    n = int(number)
    if 2000 <= n <= 2009:
        return "two thousand" + (f" {cardinal(n - 2000)}" if n > 2000 else "")
    if n < 1000 or n >= 10000:
        return cardinal(n)
    return num2words(n, to="year").replace("oh-", "oh ").replace(",", "")


def _plural_word(words: str) -> str:
    """'nineteen ninety' → 'nineteen nineties'."""
    head, _, last = words.rpartition(" ")
    last = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {last}".strip()


def _is_one(number: str) -> bool:
    return number.replace(",", "") in ("1", "1.0")


NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"

# ----------------------------------------------------------------------------------------------
# Typography

_FRACTIONS = {"½": "one half", "⅓": "one third", "⅔": "two thirds", "¼": "one quarter",
              "¾": "three quarters", "⅕": "one fifth", "⅛": "one eighth", "⅜": "three eighths",
              "⅝": "five eighths", "⅞": "seven eighths"}


def _typography(text: str) -> str:
    text = re.sub(r"\.\s?\.\s?\.(?:\s?\.)*", "…", text)
    text = re.sub(r"…+", "…", text)
    text = text.replace("\u2044", "/")  # fraction slash
    text = re.sub(r"(?<=\w)\s*--\s*(?=\w)", "—", text)
    text = re.sub(r"\s--\s", " — ", text)
    for sign, words in _FRACTIONS.items():
        text = re.sub(rf"(\d)\s?{sign}", rf"\1 and a {words.split(' ', 1)[1]}" if words.startswith("one ")
                      else rf"\1 and {words}", text)
        text = text.replace(sign, words)
    return text


def _dashes(text: str) -> str:
    """Dashes a narrator pauses at become commas; a dash ending speech is a trailing off."""
    text = re.sub(r"\s*[—―]\s*(?=[\"”’»)]|$)", "…", text)
    text = re.sub(r"(^|(?<=[\"“‘«(]))\s*[—―]\s*", "", text)
    text = re.sub(r"\s*[—―]\s*", ", ", text)
    text = re.sub(r"\s+–\s+", ", ", text)  # spaced en dash used as a dash
    text = re.sub(r",\s*([,.;:!?…])", r"\1", text)
    return text


# ----------------------------------------------------------------------------------------------
# Abbreviations

_TITLES = {  # before a name
    "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Messrs": "Messieurs", "Mme": "Madame",
    "Mlle": "Mademoiselle", "Prof": "Professor", "Rev": "Reverend", "Capt": "Captain",
    "Col": "Colonel", "Gen": "General", "Lt": "Lieutenant", "Sgt": "Sergeant", "Gov": "Governor",
    "Sen": "Senator", "Rep": "Representative", "Hon": "Honourable", "Fr": "Father", "Mt": "Mount",
    "Mts": "Mountains", "Ft": "Fort", "Pres": "President", "Supt": "Superintendent",
    "Cmdr": "Commander", "Adm": "Admiral", "Maj": "Major", "Cpl": "Corporal", "Pvt": "Private",
}
_AFTER_NAME = {"Jr": "Junior", "Sr": "Senior", "Esq": "Esquire", "Bros": "Brothers",
               "Inc": "Incorporated", "Ltd": "Limited", "Ave": "Avenue", "Rd": "Road",
               "Blvd": "Boulevard", "Mts": "Mountains"}
_STOPWORDS = frozenset(
    "a an the in at on to of from for by and or but near into onto with as is was were be said "
    "says visit visited see saw toward towards past via this that these those it he she they we i "
    "you his her their our my when where then there here".split()
)
# Latin and other abbreviations read as words; the period is kept when it also ends the sentence.
_PHRASES = [
    (r"&c\.", "et cetera"), (r"\betc\.", "et cetera"), (r"\be\.\s?g\.", "for example"),
    (r"\bi\.\s?e\.", "that is"), (r"\bviz\.", "namely"), (r"\bvs\.?(?=\s)", "versus"),
    (r"\bcf\.", "compare"), (r"\bCf\.", "Compare"), (r"\bapprox\.", "approximately"),
    (r"\bibid\.", "ibidem"), (r"\bet al\.", "and others"), (r"\bN\.\s?B\.", "note well"),
]
_CAN_END = frozenset(["et cetera", "and others", "ibidem"])  # may also end a sentence
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
_CURRENCY = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence"),
             "€": ("euro", "euros", "cent", "cents"), "¥": ("yen", "yen", None, None),
             "₹": ("rupee", "rupees", "paisa", "paise")}
_SCALES = "thousand|million|billion|trillion"

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_MONTH_ABBR = {"Jan": "January", "Feb": "February", "Mar": "March", "Apr": "April", "Jun": "June",
               "Jul": "July", "Aug": "August", "Sep": "September", "Sept": "September",
               "Oct": "October", "Nov": "November", "Dec": "December"}
MONTH = (r"(?P<month>" + "|".join(_MONTHS) + "|" + "|".join(sorted(_MONTH_ABBR, key=len, reverse=True))
         + r")\.?")


def _month(name: str) -> str:
    return _MONTH_ABBR.get(name, name)


# ----------------------------------------------------------------------------------------------
# Roman numerals

# A whole word that is a well-formed numeral (never the empty string).
ROMAN = r"(?=[MDCLXVI]+\b)M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})(?<=[MDCLXVI])"
ROMAN_LOWER = ROMAN.lower().replace("\\b", "\\b")
_ROMAN_VALUES = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}
_NUMBERED_WORDS = (
    "Chapter|Chap|Book|Part|Act|Scene|Volume|Vol|Canto|Section|Sect|Psalm|Article|Appendix|Lesson|"
    "Stave|Plate|Table|Figure|Fig|Phase|Stage|Round|Class|Type|Case|Letter|Hymn|Sonnet|Ode|Epistle|"
    "Tome|Fytte|Division|Series|Number|War|Vatican|Stanza|Verse|Lecture|Sermon|Essay|Question|Rule"
)
_REGNAL = (
    "Henry|Edward|George|William|Louis|Charles|James|Richard|Elizabeth|Mary|Philip|Philippe|John|"
    "Pius|Gregory|Leo|Innocent|Benedict|Clement|Urban|Boniface|Paul|Peter|Frederick|Friedrich|"
    "Alexander|Nicholas|Ferdinand|Napoleon|Ptolemy|Ramesses|Rameses|Amenhotep|Thutmose|Darius|Xerxes|"
    "Artaxerxes|Constantine|Otto|Rudolf|Alfonso|Carlos|Gustav|Gustavus|Christian|Wilhelm|Catherine|"
    "Anne|Ivan|Victor Emmanuel|Umberto|Harold|Stephen|David|Robert|Malcolm III|Kenneth|Alexios|"
    "Basil|Leopold|Francis|Franz|Joseph|Sixtus|Julius|Felix|Celestine|Honorius|Eugene|Martin|"
    "Adrian|Hadrian|Sancho|Pedro|Juan|Manuel|Afonso|João|Haakon|Olaf|Magnus|Eric|Erik|Valdemar|"
    "Sigismund|Casimir|Ladislaus|Wenceslaus|Bohemond|Baldwin|Amadeus|Cosimo|Lorenzo|Vittorio|"
    "Farouk|Fuad|Hussein|Mehmed|Murad|Selim|Suleiman|Bayezid|Abdul Hamid|Tiglath-Pileser|"
    "Shalmaneser|Sargon|Nebuchadnezzar|Antiochus|Seleucus|Cleopatra|Psammetichus|Cyrus|Cambyses|"
    "Rama|Bhumibol|Akihito|Pepin|Lothair|Conrad|Sweyn|Canute|Cnut|Edmund|Ethelred|Athelstan|Edgar|Matilda|Victoria"
)


def roman_value(numeral: str) -> int:
    numeral = numeral.upper()
    total = 0
    for i, c in enumerate(numeral):
        v = _ROMAN_VALUES[c]
        total += -v if i + 1 < len(numeral) and _ROMAN_VALUES[numeral[i + 1]] > v else v
    return total


def _cap(words: str) -> str:
    return words[:1].upper() + words[1:]


# ----------------------------------------------------------------------------------------------
# The rules


def _sub(pattern: str, repl, text: str, flags: int = 0) -> str:
    return re.sub(pattern, repl, text, flags=flags)


def _dates(text: str) -> str:
    def day_month(m):
        the = "" if re.search(r"\b[Tt]he\s+$", m.string[:m.start()]) else "the "
        out = f"{the}{ordinal(m['day'])} of {_month(m['month'])}"
        return out + (f" {year(m['year'])}" if m["year"] else "")

    def month_day(m):
        out = f"{_month(m['month'])} {ordinal(m['day'])}"
        return out + (f", {year(m['year'])}" if m["year"] else "")

    text = _sub(rf"\b(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}(?:,?\s+(?P<year>\d{{3,4}})\b)?", day_month, text)
    text = _sub(rf"\b{MONTH}\s+(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\b(?!:)(?:,?\s+(?P<year>\d{{4}})\b)?", month_day, text)
    return text


def _times(text: str) -> str:
    def clock(m):
        hour, minute, half = int(m["h"]), m["m"], m["ap"] or m["AP"]
        words = cardinal(hour)
        if minute == "00":
            words += "" if half or re.match(r"\s+(noon|midnight)", m.string[m.end():]) else " o'clock"
        elif minute.startswith("0"):
            words += f" oh {cardinal(minute[1])}"
        else:
            words += f" {cardinal(minute)}"
        if half:
            words += " a.m." if half[0].lower() == "a" else " p.m."
        return words

    text = _sub(r"\b(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)\b(?:\s?(?:(?P<ap>[ap])\.?m\b\.?|(?P<AP>[AP])\.?M\b\.?))?",
                clock, text)

    def hour_only(m):
        return f"{cardinal(m['h'])} {'a.m.' if (m['ap'] or m['AP']).lower() == 'a' else 'p.m.'}"

    # Other n:m — a reference after a name ("Ezekiel 2:1" → "two one"), else a ratio ("two to one").
    text = _sub(r"(?P<name>\b[A-Z][a-z]+\s)?\b(?P<a>\d+):(?P<b>\d+)\b",
                lambda m: f"{m['name'] or ''}{cardinal(m['a'])} {'' if m['name'] else 'to '}{cardinal(m['b'])}", text)
    return _sub(r"\b(?P<h>1[0-2]|0?[1-9])\s?(?:(?P<ap>[ap])\.?m\b\.?|(?P<AP>[AP])\.?M\b\.?)", hour_only, text)


def _money(text: str) -> str:
    def money(m):
        big, small, small_plural = _CURRENCY[m["sign"]][1], _CURRENCY[m["sign"]][2], _CURRENCY[m["sign"]][3]
        whole, cents, scale = m["whole"], m["cents"], m["scale"]
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

    signs = "".join(map(re.escape, _CURRENCY))
    text = _sub(rf"(?P<sign>[{signs}])\s?(?P<whole>\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.(?P<cents>\d{{1,2}}))?"
                rf"(?:\s(?P<scale>{_SCALES})\b)?", money, text)
    text = _sub(r"\b(\d+)\s?¢", lambda m: f"{cardinal(m[1])} {'cent' if m[1] == '1' else 'cents'}", text)
    return text


def _percent(text: str) -> str:
    return _sub(rf"(?<![\w.])(-?(?:{NUM}))\s?%", lambda m: f"{cardinal(m[1])} percent", text)


def _units(text: str) -> str:
    keys = sorted(_UNITS, key=len, reverse=True)
    alternatives = "|".join(re.escape(k).replace(r"\ ", r"\.?\s?") for k in keys)

    def unit(m):
        singular, plural = _UNITS[re.sub(r"\.?\s", " ", m["unit"]).replace(".", "")]
        return f"{cardinal(m['n'])} {singular if _is_one(m['n']) else plural}"

    # A unit word must not run on into more letters ("5 miles" is not "5 mi" + "les").
    text = _sub(rf"(?<![\w.])(?P<n>-?(?:{NUM}))\s?(?P<unit>{alternatives})(?:\.(?=\s+[a-z]|\s*[,;:)]))?(?![\w²])",
                unit, text)
    # Degrees, minutes and seconds of arc; elsewhere ′ ″ after a number are feet and inches.
    text = _sub(r"(?<=degrees )(\d+)\s?[′']\s?(?:(\d+)\s?[″\"])?",
                lambda m: f"{cardinal(m[1])} {'minute' if m[1] == '1' else 'minutes'}"
                + (f" {cardinal(m[2])} {'second' if m[2] == '1' else 'seconds'}" if m[2] else ""), text)
    text = _sub(r"\b(\d+)′\s?(?:(\d+)″)?",
                lambda m: f"{cardinal(m[1])} {'foot' if m[1] == '1' else 'feet'}"
                + (f" {cardinal(m[2])} {'inch' if m[2] == '1' else 'inches'}" if m[2] else ""), text)
    return text


def _numbered(text: str) -> str:
    """No. 5, #5, p. 12, pp. 5-8, vol. 3, ch. 4, fig. 2."""
    text = _sub(r"\bNo\.\s?(?=\d)", "number ", text)
    text = _sub(r"\bNos\.\s?(?=\d)", "numbers ", text)
    text = _sub(r"(?<![\w&])#(?=\d)", "number ", text)
    text = _sub(r"\bpp\.\s?(?=\d)", "pages ", text)
    text = _sub(r"\bp\.\s?(?=\d)", "page ", text)
    text = _sub(r"\b[Vv]ol\.\s?(?=\d)", lambda m: "Volume " if m[0][0] == "V" else "volume ", text)
    text = _sub(r"\b[Cc]h(?:ap)?\.\s?(?=\d)", lambda m: "Chapter " if m[0][0] == "C" else "chapter ", text)
    text = _sub(r"\b[Ff]ig\.\s?(?=\d)", lambda m: "Figure " if m[0][0] == "F" else "figure ", text)
    return text


def _romans(text: str, heading: bool) -> str:
    def counted(m):
        return f"{m['word']} {cardinal(roman_value(m['num']))}"

    text = _sub(rf"\b(?P<word>(?:{_NUMBERED_WORDS})\.?)\s+(?P<num>{ROMAN}|{ROMAN_LOWER})\b(?!['’]\w)",
                counted, text, re.IGNORECASE)

    def regnal(m):
        return f"{m['name']} the {_cap(ordinal(roman_value(m['num'])))}"

    # Known rulers take any numeral; other capitalised names only II, III, IV, VI … XXXIX.
    text = _sub(rf"\b(?P<name>{_REGNAL})\s+(?P<num>{ROMAN})\b(?!['’]\w|\.\s?[A-Z]\.)", regnal, text)

    def other_name(m):
        if m["name"].lower() in _STOPWORDS or re.fullmatch(_NUMBERED_WORDS, m["name"], re.IGNORECASE):
            return m[0]
        return regnal(m)

    text = _sub(r"\b(?P<name>[A-Z][a-z]{2,})\s+(?P<num>X{0,3}(?:IX|IV|VI{0,3}|I{2,3})|X{1,3}(?:IX|IV|VI{0,3}|I{1,3})?)\b(?!['’]\w)",
                lambda m: other_name(m) if len(m["num"]) >= 2 else m[0], text)
    if heading:
        # The whole heading, or its leading label: "XII", "IV. The Preparation", "iii."
        m = re.fullmatch(rf"(?P<num>{ROMAN}|{ROMAN_LOWER})(?P<rest>[.:]?(?:\s.*)?)", text, re.DOTALL)
        if m and m["num"] and (m["num"] != "I" or m["rest"][:1] in (".", ":", "")):
            text = _cap(cardinal(roman_value(m["num"]))) + m["rest"]
    else:
        m = re.fullmatch(r"(?P<num>[IVXL]{2,})\.?", text)
        if m and re.fullmatch(ROMAN, m["num"]):
            text = _cap(cardinal(roman_value(m["num"]))) + "."
    return text


def _abbreviations(text: str) -> str:
    for pattern, words in _PHRASES:
        def phrase(m, words=words):
            after = m.string[m.end():]
            ends_sentence = words in _CAN_END and (not after.strip() or re.match(r"\s+[\"“‘(]?[A-Z]", after))
            return words + ("." if ends_sentence else "")
        text = _sub(pattern, phrase, text)
    text = _sub(r"&", lambda m: " and ", text)

    def saint_or_street(m):
        kind = m["abbr"]
        before = m.string[:m.start()].rstrip()
        prev = re.search(r"(\S+)$", before)
        prev_word = prev.group(1) if prev else ""
        after_name = bool(re.match(r"\s+[A-Z]", m.string[m.end():]))
        named_before = (prev_word[:1].isupper() and prev_word.strip(",;:").lower() not in _STOPWORDS
                        and not before.endswith((".", "!", "?"))) or prev_word[:1].isdigit()
        if not (named_before and not after_name):
            return "Saint" if kind == "St" else "Doctor"
        word = "Street" if kind == "St" else "Drive"
        return word + "." if m[0].endswith(".") and not m.string[m.end():].strip() else word

    text = _sub(r"\b(?P<abbr>St|Dr)\b\.?(?=\s|$|[,;:)])", saint_or_street, text)
    for abbr, word in _TITLES.items():
        text = _sub(rf"\b{abbr}\b\.?(?=\s+[A-Z])", word, text)
    for abbr, word in _AFTER_NAME.items():
        text = _sub(rf"(?<=[A-Za-z,] ){abbr}\.(?=\s+[a-z]|\s*[,;:)])", word, text)
        text = _sub(rf"(?<=[A-Za-z,] ){abbr}\.(?=\s+[A-Z]|\s*$)", word + ".", text)
    return text


def _years_and_numbers(text: str) -> str:
    # Decades: the 1990s, the 1800s, the '60s, in his 60s.
    text = _sub(r"\b(1[1-9]\d0|20[0-9]0)['’]?s\b", lambda m: _plural_word(year(m[1])), text)
    text = _sub(r"(?:(?<=\s)|^)['’]([1-9]0)['’]?s\b", lambda m: _plural_word(cardinal(m[1])), text)
    text = _sub(r"\b([2-9]0)['’]?s\b", lambda m: _plural_word(cardinal(m[1])), text)
    # Ordinals: 1st, 22nd, 103rd.
    text = _sub(r"\b(\d{1,3}(?:,\d{3})*|\d+)(st|nd|rd|th)\b", lambda m: ordinal(m[1]), text)
    # Ranges: 1869-1871, 1869-71, 5-8, 55-7 (the second number may repeat only the changing digits).
    def span(m):
        a, b = m["a"], m["b"]
        if len(b) < len(a) and int(b) > 0:
            full = a[: len(a) - len(b)] + b
            if int(full) > int(a):
                b = full
        to = "and" if re.search(r"\bbetween\s+$", m.string[:m.start()], re.IGNORECASE) else "to"
        if re.fullmatch(r"1[1-9]\d\d|20\d\d", a) and re.fullmatch(r"1[1-9]\d\d|20\d\d", b) and int(b) > int(a):
            return f"{year(a)} {to} {year(b)}"
        if int(b) <= int(a):
            return m[0]
        return f"{cardinal(a)} {to} {cardinal(b)}"

    text = _sub(r"(?<![\w.,/-])(?P<a>\d+)\s?[-–]\s?(?P<b>\d+)(?![\w.,/-]\d)", span, text)
    # Fractions: 1/2, 3/4, 2 1/2.
    def fraction(m):
        num, den = int(m["num"]), int(m["den"])
        if den == 2:
            words = "half" if num == 1 else f"{cardinal(num)} halves"
        elif den == 4:
            words = "quarter" if num == 1 else f"{cardinal(num)} quarters"
        else:
            words = ordinal(den) if num == 1 else f"{cardinal(num)} {ordinal(den)}s"
        if m["whole"]:
            return f"{cardinal(m['whole'])} and {'a ' + words if num == 1 else words}"
        return f"one {words}" if num == 1 else words

    text = _sub(r"(?<![\w/])(?:(?P<whole>\d+)\s)?(?P<num>\d{1,2})/(?P<den>\d{1,2})(?![\w/])", fraction, text)
    # Years, then every other number. 1000-1099 are years only where a year is expected.
    text = _sub(r"\b(in|of|since|until|till|from|by|year|circa|about|around|c\.|AD|A\.D\.) (10\d\d)\b(?![\w%]|[.,]\d)",
                lambda m: f"{m[1]} {year(m[2])}", text)
    text = _sub(r"(?<![\w.,$£€])(1[1-9]\d\d|20\d\d)(?![\w%]|[.,]\d)", lambda m: year(m[1]), text)
    text = _sub(rf"(?<![\w.])(?:(?<=\s)-|^-)?(?:{NUM})(?![\w])", lambda m: cardinal(m[0]), text)
    # Digits glued to letters: "B2" → "B two".
    text = _sub(r"\d+", lambda m: (" " if m.start() and m.string[m.start() - 1].isalpha() else "") + cardinal(m[0])
                + (" " if m.end() < len(m.string) and m.string[m.end()].isalpha() else ""), text)
    return text


_ACRONYMS = frozenset(
    "NASA NATO UNESCO UNICEF NASDAQ OPEC FIFA NAACP USSR USA UK EU UN BBC CNN FBI CIA IBM NHS AIDS "
    "HIV DNA RNA LASER RADAR SCUBA UEFA ASEAN NORAD INTERPOL OK TV US GPS ID AM PM BC AD CE BCE".split()
)
_VOWELS = set("AEIOUY")


def _shouting(text: str) -> str:
    """SHOUTED words → lower case; acronyms stay."""
    tokens = list(re.finditer(r"\b[A-Z][A-Z'’]*[A-Z]\b|\b[AI]\b", text))
    if not tokens:
        return text
    letters = [c for c in text if c.isalpha()]
    all_caps = (letters and sum(c.isupper() for c in letters) / len(letters) > 0.9
                and len(re.findall(r"[A-Za-z]{2,}", text)) >= 2)

    def candidate(word: str) -> bool:
        return word not in _ACRONYMS and bool(_VOWELS & set(word)) and len(word) >= 2

    # Runs: two or more all-caps words with only spaces or punctuation between them.
    in_run: set[int] = set()
    run: list[int] = []
    for i, t in enumerate(tokens):
        if run and re.fullmatch(r"[\s,;:.!?\"'“”‘’—-]*", text[tokens[run[-1]].end():t.start()]):
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
        if len(word) == 1 and not (all_caps or i in in_run):
            continue
        shout = candidate(word) and (len(word) >= 5 or i in in_run or all_caps)
        if word == "I" or (not shout and not (word == "A" and (all_caps or i in in_run))):
            continue
        lower = word.lower()
        before = text[:t.start()].rstrip(" \"'“‘(")
        if not before or before.endswith((".", "!", "?", "…", ":")):
            lower = _cap(lower)
        out.append(text[pos:t.start()])
        out.append(lower)
        pos = t.end()
    out.append(text[pos:])
    return "".join(out)


# A run of more digits than MAX_NUMBER_DIGITS, plain or in thousands groups.
_LONG_NUMBER = re.compile(rf"\d{{{MAX_NUMBER_DIGITS + 1},}}|\d{{1,3}}(?:,\d{{3}}){{{MAX_NUMBER_DIGITS // 3},}}")


def normalize(text: str, heading: bool = False) -> str:
    # Long digit runs first, so no later rule (money, ranges, fractions) sees a number it cannot say.
    text = _LONG_NUMBER.sub(lambda m: f" {_digit_by_digit(m[0].replace(',', ''))} ", text)
    text = _typography(text)
    text = _romans(text, heading)
    text = _shouting(text)
    text = _abbreviations(text)
    text = _dates(text)
    text = _times(text)
    text = _money(text)
    text = _percent(text)
    text = _units(text)
    text = _numbered(text)
    text = _years_and_numbers(text)
    text = _dashes(text)
    text = re.sub(r"\s+([,;:.!?])", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()
