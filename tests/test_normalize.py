"""English normalisation: written text → what a good narrator says. One table per category."""

import pytest

from epub2audio.book.normalize import normalize, rules_for

CARDINALS = [
    ("There were 53 mills.", "There were fifty-three mills."),
    ("He was 7.", "He was seven."),
    ("0 errors", "zero errors"),
    ("11 men", "eleven men"),
    ("It weighed 100 pounds.", "It weighed one hundred pounds."),
    ("540 acres", "five hundred and forty acres"),
    ("a crowd of 59,265 people", "a crowd of fifty-nine thousand two hundred and sixty-five people"),
    ("1,057,286 inhabitants", "one million fifty-seven thousand two hundred and eighty-six inhabitants"),
    ("the value was 3.14", "the value was three point one four"),
    ("a score of 0.5", "a score of zero point five"),
    ("it fell to -5 overnight", "it fell to minus five overnight"),
    ("He counted 12 sheep and 3 goats.", "He counted twelve sheep and three goats."),
    ("There are 4768 of them.", "There are four thousand seven hundred and sixty-eight of them."),
    ("2 1/2 miles", "two and a half miles"),
    ("1/2 of the cake", "one half of the cake"),
    ("3/4 of them", "three quarters of them"),
    ("add ½ cup", "add one half cup"),
    ("verses 5-8", "verses five to eight"),
    ("pages 55-7", "pages fifty-five to fifty-seven"),
    ("a 2:1 majority", "a two to one majority"),
    ("Cf. Ezekiel 2:1.", "Compare Ezekiel two one."),
    ("the B2 bomber", "the B two bomber"),
]

ORDINALS = [
    ("the 1st day", "the first day"),
    ("the 2nd time", "the second time"),
    ("the 3rd act", "the third act"),
    ("the 4th man", "the fourth man"),
    ("his 21st birthday", "his twenty-first birthday"),
    ("the 22nd of May", "the twenty-second of May"),
    ("the 103rd regiment", "the one hundred and third regiment"),
    ("the 11th hour", "the eleventh hour"),
    ("the 12th century", "the twelfth century"),
    ("the 100th time", "the one hundredth time"),
]

YEARS = [
    ("In 1867 he left.", "In eighteen sixty-seven he left."),
    ("in 1900", "in nineteen hundred"),
    ("in 1905", "in nineteen oh five"),
    ("in 2005", "in two thousand five"),
    ("in 2000", "in two thousand"),
    ("in 2019", "in twenty nineteen"),
    ("in 1066", "in ten sixty-six"),
    ("In 1907 a state law was passed.", "In nineteen oh seven a state law was passed."),
    ("between 1869-1871", "between eighteen sixty-nine and eighteen seventy-one"),
    ("from 1939–1945", "from nineteen thirty-nine to nineteen forty-five"),
    ("Berlin, 1869-71", "Berlin, eighteen sixty-nine to eighteen seventy-one"),
    ("in 1790, 1800 and 1810", "in seventeen ninety, eighteen hundred and eighteen ten"),
    ("by 1100", "by eleven hundred"),
]

DECADES = [
    ("the 1990s", "the nineteen nineties"),
    ("the 1800s", "the eighteen hundreds"),
    ("the 1920s", "the nineteen twenties"),
    ("the 1960's", "the nineteen sixties"),
    ("the 1910s", "the nineteen tens"),
    ("the 2000s", "the two thousands"),
    ("back in the '60s", "back in the sixties"),
    ("a man in his 40s", "a man in his forties"),
]

DATES = [
    ("On 4 July 1776 they signed.", "On the fourth of July seventeen seventy-six they signed."),
    ("On July 4, 1776, they signed.", "On July fourth, seventeen seventy-six, they signed."),
    ("July 4", "July fourth"),
    ("the 4th of July", "the fourth of July"),
    ("after the 1st of January 1907 no child", "after the first of January nineteen oh seven no child"),
    ("on 1 January 1908", "on the first of January nineteen oh eight"),
    ("December 25, 2005", "December twenty-fifth, two thousand five"),
    ("Dec. 25, 1900", "December twenty-fifth, nineteen hundred"),
    ("on 3rd Sept. 1939", "on the third of September nineteen thirty-nine"),
    ("in May 1945", "in May nineteen forty-five"),
    ("March 15", "March fifteenth"),
    ("11 November 1918", "the eleventh of November nineteen eighteen"),
]

TIMES = [
    ("at 10:30 am", "at ten thirty a.m."),
    ("at 10:30 a.m.", "at ten thirty a.m."),
    ("at 4 o'clock", "at four o'clock"),
    ("at 10:00", "at ten o'clock"),
    ("at 9:05", "at nine oh five"),
    ("at 3 p.m. sharp", "at three p.m. sharp"),
    ("by 7pm", "by seven p.m."),
    ("at 11:45 PM", "at eleven forty-five p.m."),
    ("at 12:00 noon", "at twelve noon"),
    ("at 6:15", "at six fifteen"),
]

CURRENCY = [
    ("It costs $3.50.", "It costs three dollars and fifty cents."),
    ("£10 each", "ten pounds each"),
    ("€5 a day", "five euros a day"),
    ("a salary of $5000", "a salary of five thousand dollars"),
    ("$1", "one dollar"),
    ("$0.50", "fifty cents"),
    ("$1.01", "one dollar and one cent"),
    ("$5.00", "five dollars"),
    ("$2 million", "two million dollars"),
    ("£2.5 billion", "two point five billion pounds"),
    ("It cost $17,664,675 in 1890.",
     "It cost seventeen million six hundred and sixty-four thousand six hundred and seventy-five dollars in eighteen ninety."),
    ("£1.50", "one pound and fifty pence"),
    ("¥100", "one hundred yen"),
    ("5¢", "five cents"),
]

PERCENT = [
    ("50% of them", "fifty percent of them"),
    ("3.5% growth", "three point five percent growth"),
    ("100%", "one hundred percent"),
    ("a 1% rise", "a one percent rise"),
    ("fell by 12 %", "fell by twelve percent"),
    ("50 per cent", "fifty per cent"),
]

ROMAN = [
    ("Chapter XII", "Chapter twelve"),
    ("Chapter I", "Chapter one"),
    ("CHAPTER IV.", "Chapter four."),
    ("Book IV", "Book four"),
    ("Act III, Scene ii", "Act three, Scene two"),
    ("Part II", "Part two"),
    ("Volume III", "Volume three"),
    ("Canto XXXIV", "Canto thirty-four"),
    ("Psalm XXIII", "Psalm twenty-three"),
    ("World War II", "World War two"),
    ("Henry VIII was king.", "Henry the Eighth was king."),
    ("Henry V", "Henry the Fifth"),
    ("Charles I", "Charles the First"),
    ("Elizabeth II", "Elizabeth the Second"),
    ("Louis XIV", "Louis the Fourteenth"),
    ("Pope John XXIII", "Pope John the Twenty-third"),
    ("Pius X", "Pius the Tenth"),
    ("Psammetichus II", "Psammetichus the Second"),
    ("Amenhotep III", "Amenhotep the Third"),
    ("I think I can.", "I think I can."),
    ("Then I ran.", "Then I ran."),
    ("Malcolm X spoke.", "Malcolm X spoke."),
    ("Vitamin C", "Vitamin C"),
    ("MIX", "MIX"),
]

ROMAN_HEADINGS = [
    ("I. The Period", "One. The Period"),
    ("XII.", "Twelve."),
    ("IV", "Four"),
    ("I", "One"),
    ("iii.", "Three."),
    ("NOTES TO BOOK I", "Notes to book one"),
    ("I. THE BURIAL OF THE DEAD", "One. The burial of the dead"),
    ("CHAPTER XII. THE SHOEMAKER", "Chapter twelve. The shoemaker"),
]

ABBREVIATIONS = [
    ("Mr. Smith", "Mister Smith"),
    ("Mrs. Jones", "Missus Jones"),
    ("Ms. Brown", "Miz Brown"),
    ("Dr. Watson", "Doctor Watson"),
    ("Mr Smith and Dr Watson", "Mister Smith and Doctor Watson"),
    ("St. Paul's Cathedral", "Saint Paul's Cathedral"),
    ("He lived on Baker St. for years.", "He lived on Baker Street for years."),
    ("in St. Louis", "in Saint Louis"),
    ("221 Baker St.", "two hundred and twenty-one Baker Street."),
    ("Prof. Moriarty", "Professor Moriarty"),
    ("Rev. Mr. Collins", "Reverend Mister Collins"),
    ("Capt. Ahab", "Captain Ahab"),
    ("Col. Brandon", "Colonel Brandon"),
    ("Gen. Lee", "General Lee"),
    ("Lt. Dan", "Lieutenant Dan"),
    ("Mt. Everest", "Mount Everest"),
    ("Lookout and Sand Mts.", "Lookout and Sand Mountains."),
    ("Martin Luther King, Jr.", "Martin Luther King, Junior."),
    ("fruit, e.g. apples", "fruit, for example apples"),
    ("food, i.e. bread", "food, that is bread"),
    ("pens, paper, etc.", "pens, paper, et cetera."),
    ("apples, pears, etc. Then he left.", "apples, pears, et cetera. Then he left."),
    ("pears, etc., and figs", "pears, et cetera, and figs"),
    ("Kramer vs. Kramer", "Kramer versus Kramer"),
    ("the rest, viz. the poor", "the rest, namely the poor"),
    ("cf. the note", "compare the note"),
    ("Smith et al. found", "Smith and others found"),
    ("No. 5", "number five"),
    ("Nos. 5 and 6", "numbers five and six"),
    ("see p. 12", "see page twelve"),
    ("see pp. 5-8", "see pages five to eight"),
    ("Vol. 3", "Volume three"),
    ("ch. 4", "chapter four"),
    ("fig. 2", "figure two"),
    ("#1 hit", "number one hit"),
    ("approx. 5 miles", "approximately five miles"),
    ("Messrs. Smith and Jones", "Messieurs Smith and Jones"),
    ("Mme. Defarge", "Madame Defarge"),
    ("Mlle. Manette", "Mademoiselle Manette"),
]

UNITS = [
    ("10 km away", "ten kilometers away"),
    ("1 km", "one kilometer"),
    ("2.5 km", "two point five kilometers"),
    ("5 kg of flour", "five kilograms of flour"),
    ("at 60 mph", "at sixty miles per hour"),
    ("30°C", "thirty degrees Celsius"),
    ("98.6 °F", "ninety-eight point six degrees Fahrenheit"),
    ("-5°C", "minus five degrees Celsius"),
    ("an angle of 45°", "an angle of forty-five degrees"),
    ("575 ft. at Milledgeville", "five hundred and seventy-five feet at Milledgeville"),
    ("(4768 ft.)", "(four thousand seven hundred and sixty-eight feet)"),
    ("1 ft", "one foot"),
    ("100 m", "one hundred meters"),
    ("5 cm", "five centimeters"),
    ("12 lbs", "twelve pounds"),
    ("8 oz", "eight ounces"),
    ("a disk of 500 GB", "a disk of five hundred gigabytes"),
    ("120 km/h", "one hundred and twenty kilometers per hour"),
    ("3 mi", "three miles"),
    ("5 miles", "five miles"),
    ("10 min", "ten minutes"),
    ("between 30° 31′ 39″ and 35°", "between thirty degrees thirty-one minutes thirty-nine seconds and thirty-five degrees"),
    ("He was 6′ 2″ tall.", "He was six feet two inches tall."),
    ("50 sq ft", "fifty square feet"),
]

PUNCTUATION = [
    ("Wait... what?", "Wait… what?"),
    ("Wait. . . what?", "Wait… what?"),
    ("And then…", "And then…"),
    ("He stopped—then ran.", "He stopped, then ran."),
    ("He stopped -- then ran.", "He stopped, then ran."),
    ("He stopped--then ran.", "He stopped, then ran."),
    ("“But—”", "“But…”"),
    ("—Yes, he said.", "Yes, he said."),
    ("the years 1914 – 1918", "the years nineteen fourteen to nineteen eighteen"),
    ("Paris – the city of light – was quiet.", "Paris, the city of light, was quiet."),
    ("Smith & Sons", "Smith and Sons"),
    ("R&D", "R and D"),
    ("AT&T", "AT and T"),
    ("bread, butter, &c.", "bread, butter, et cetera."),
    ("  spaced   out  ", "spaced out"),
    ("soft\u00adhyphen", "softhyphen"),
]

CAPITALS = [
    ("I said GET OUT NOW.", "I said get out now."),
    ("GEORGIA, a southern state of the USA.", "Georgia, a southern state of the USA."),
    ("NASA and the BBC", "NASA and the BBC"),
    ("The FBI and the CIA", "The FBI and the CIA"),
    ("He was ABSOLUTELY sure.", "He was absolutely sure."),
    ("THE END", "The end"),
    ("STOP", "STOP"),
    ("It was NATO policy.", "It was NATO policy."),
    ("UNESCO met.", "UNESCO met."),
    ("She read it on TV.", "She read it on TV."),
    ("He said, NEVER AGAIN!", "He said, never again!"),
    ("A NOTE ON THE TEXT", "A note on the text"),
    ("HIV and AIDS", "HIV and AIDS"),
]

CATEGORIES = {
    "cardinal": CARDINALS, "ordinal": ORDINALS, "year": YEARS, "decade": DECADES, "date": DATES,
    "time": TIMES, "currency": CURRENCY, "percent": PERCENT, "roman": ROMAN,
    "abbreviation": ABBREVIATIONS, "unit": UNITS, "punctuation": PUNCTUATION, "capitals": CAPITALS,
}
CASES = [(cat, src, want) for cat, cases in CATEGORIES.items() for src, want in cases]


def test_at_least_150_cases():
    assert len(CASES) + len(ROMAN_HEADINGS) >= 150


@pytest.mark.parametrize("category,written,spoken", CASES, ids=[f"{c}:{s}" for c, s, _ in CASES])
def test_english(category, written, spoken):
    assert normalize(written, "en-US") == spoken


@pytest.mark.parametrize("written,spoken", ROMAN_HEADINGS, ids=[s for s, _ in ROMAN_HEADINGS])
def test_headings(written, spoken):
    assert normalize(written, "en", heading=True) == spoken


def test_other_languages_are_only_tidied():
    assert normalize("  Il avait 53 ans  ", "fr") == "Il avait 53 ans"
    assert normalize("第1章", "zh") == "第1章"


def test_missing_language_means_english_only_for_latin_text():
    assert rules_for("", "He was 7.") is not None
    assert rules_for("", "老子第1章") is None
    assert normalize("He was 7.", "") == "He was seven."


def test_pronunciation_markup_is_left_alone():
    text = "between \u27e630°|ipa:ˈθɜrti dɪˈgriz\u27e7 and \u27e6her-MY-oh-nee\u27e7 in 1900"
    assert normalize(text, "en") == ("between \u27e6thirty degrees|ipa:ˈθɜrti dɪˈgriz\u27e7 and "
                                     "\u27e6her-MY-oh-nee\u27e7 in nineteen hundred")
