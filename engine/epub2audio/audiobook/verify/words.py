"""Text as words, the same way for the book, the plan and the transcript: numerals spelt out,
punctuation and case dropped; and the word-level edit distance between two such lists."""

from __future__ import annotations

import re
import unicodedata


_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _number_words(match: re.Match) -> str:
    from num2words import num2words

    text = match.group(0)
    try:
        value = int(text) if "." not in text else float(text)
        if isinstance(value, int) and 1100 <= value <= 2099 and len(text) == 4:
            return f" {num2words(value, to='year')} "
        return f" {num2words(value)} "
    except (OverflowError, ValueError, NotImplementedError):
        return f" {' '.join(text)} "


def normalize_words(text: str, language: str = "en") -> list[str]:
    """Lower-case words without punctuation or accents, with numerals spelt out the same way on
    both sides. English: num2words ("1851" → "eighteen fifty-one" → two words, "3rd" → "third").
    French, German, Spanish, Italian: the reading our normaliser gives the narrator (book/normalize.py:
    "XIXe siècle" → "dix-neuvième siècle", "z.B." → "zum Beispiel"), so a transcript's digits are
    read as the plan read them; other languages: num2words in that language."""
    code = primary_language(language)
    if code != "en":
        return _normalize_other(text, code)
    from num2words import num2words

    text = unicodedata.normalize("NFKC", text).lower()
    text = text.replace("’", "'").replace("‘", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000 → 1000
    text = _ORDINAL.sub(lambda m: f" {num2words(int(m.group(1)), to='ordinal')} ", text)
    text = text.replace("%", " percent ").replace("&", " and ")
    text = _NUMBER.sub(_number_words, text)
    text = re.sub(r"'", "", text)  # don't → dont, on both sides
    return [_HOMOPHONES.get(w, w) for w in _fold(text).split()]


def primary_language(language: str | None) -> str:
    """The primary subtag of a BCP 47 tag, lower case; English when there is none."""
    return (language or "en").split("-")[0].split("_")[0].lower() or "en"


def _fold(text: str) -> str:
    """Accents off, everything but letters and digits a space: é and e, ü and u are one letter on
    both sides (Whisper and the book disagree on accents more often than on words)."""
    return "".join(ch if ch.isalnum() else " " for ch in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(ch))


def _normalize_other(text: str, code: str) -> list[str]:
    from num2words import num2words

    from ...book.normalize import LANGUAGES, normalize

    text = unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'")
    if code in LANGUAGES:
        text = normalize(text, code)  # before lower-casing: Roman numerals and abbreviations need case

    def spell(match: re.Match) -> str:
        try:
            return f" {num2words(int(match.group(0)), lang=code)} "
        except (OverflowError, NotImplementedError):
            return f" {' '.join(match.group(0))} "

    text = re.sub(r"\d+", spell, text.lower())  # what the normaliser left, or a language without one
    # l'homme, dell'anno: the elided article is a word of its own (Whisper writes "l' homme" too);
    # ß is ss (Swiss spelling, and Whisper's when unsure).
    text = text.replace("'", " ").replace("ß", "ss")
    return _fold(text).split()


# Words a listener cannot tell apart and tiny.en picks between at random ("Two" → "to"): folded the
# same way on both sides so they never count as errors.
_HOMOPHONES = {"two": "to", "too": "to", "four": "for", "fore": "for", "won": "one", "eight": "ate",
               "ok": "okay", "mr": "mister", "mrs": "missus", "dr": "doctor", "st": "saint"}


# Every word num2words spells a cardinal with, plus the joiners a narrator puts in ranges and
# decimals ("to", "oh", "point"): runs of only these are readings of numerals.
NUMBER_READING_WORDS = frozenset(
    "zero oh one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety "
    "hundred thousand million billion trillion and to point minus".split()
) | frozenset(_HOMOPHONES[w] for w in ("two", "four", "eight"))


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance (substitutions + deletions + insertions)."""
    if not ref:
        return len(hyp)
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i]
        for j, h in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1]


def wer(reference: str, hypothesis: str, language: str = "en") -> float:
    ref = normalize_words(reference, language)
    return edit_distance(ref, normalize_words(hypothesis, language)) / max(1, len(ref))


def spoken_text(segment_text: str) -> str:
    """A segment's text as words: pronunciation markup ⟦TEXT|ipa:…⟧ / ⟦TEXT⟧ becomes TEXT."""
    return _MARKUP.sub(lambda m: m.group(1), segment_text)


_MARKUP = re.compile(r"\u27e6([^\u27e6\u27e7|]*)(?:\|ipa:[^\u27e6\u27e7]*)?\u27e7")  # as book/lexicon.py


def _alnum(text: str) -> int:
    return sum(ch.isalnum() for ch in text)


def collapse_loops(hypothesis: list[str], reference: list[str], min_repeats: int = 3) -> tuple[list[str], int]:
    """Whisper sometimes loops: the same few words over and over, 100+ words where the audio says
    them once. A run of at least `min_repeats` back-to-back copies of a 1-20 word phrase keeps only
    as many copies as the reference itself has in a row ("jug jug jug" in a poem stays). Returns the
    words and how many were left out."""
    out, i, dropped = [], 0, 0
    while i < len(hypothesis):
        best = None  # (copies, phrase length)
        for n in range(1, 21):
            phrase = hypothesis[i:i + n]
            if len(phrase) < n:
                break
            copies = 1
            while hypothesis[i + copies * n:i + (copies + 1) * n] == phrase:
                copies += 1
            if copies >= min_repeats and (best is None or copies * n > best[0] * best[1]):
                best = (copies, n)
        if best is None:
            out.append(hypothesis[i])
            i += 1
            continue
        copies, n = best
        keep = min(copies, max(1, _longest_run(reference, hypothesis[i:i + n])))
        out += hypothesis[i:i + keep * n]
        dropped += (copies - keep) * n
        i += copies * n
    return out, dropped


def _longest_run(words: list[str], phrase: list[str]) -> int:
    n, best, i = len(phrase), 0, 0
    while i <= len(words) - n:
        copies = 0
        while words[i + copies * n:i + (copies + 1) * n] == phrase:
            copies += 1
        best, i = max(best, copies), i + max(1, copies * n)
    return best


# The commonest English words: real English prose or verse has one in every three or four words,
# Latin, French or Greek next to none (a few shared ones like "in", "a" aside).
_ENGLISH = set("""the of and to a in is it that was he i for on you with as his her she they be at by
had not but this have from or an are were which we all my me him one so their there what if no when
would who will them been your our out up then do said into could more some than its any only can now
us o little like did over down upon yet very should where how such these may those has shall thy thee
thou must before after nor well old again through here every about own""".split())
ENGLISH_MIN_SHARE = 0.2  # of a text's words, for a text of at least ENGLISH_MIN_WORDS words
ENGLISH_MIN_WORDS = 5
NON_LATIN_MAX_SHARE = 0.2  # of its letters: Greek, Cyrillic, CJK ... is not English


def reads_as_english(text: str) -> bool:
    """Whether text looks English enough to score with an English-only transcriber: a book's Latin
    epigraph, Greek or French is never scored (tiny.en makes up English for it)."""
    letters = [ch for ch in text if ch.isalpha()]
    if letters:
        foreign = sum(not unicodedata.name(ch, "LATIN").startswith("LATIN") for ch in letters)
        if foreign > NON_LATIN_MAX_SHARE * len(letters):
            return False
    words = normalize_words(text)
    if len(words) < ENGLISH_MIN_WORDS:
        return True
    return sum(w in _ENGLISH for w in words) >= ENGLISH_MIN_SHARE * len(words)


# The commonest words of each language the multilingual model hears, folded as normalize_words
# folds them: real prose has one in every three to five words, a Latin or English quotation few.
_COMMON = {
    "fr": "le la les de des du un une et est en que qui dans il elle ne pas pour par sur au aux se sa son "
          "ses ce cette avec plus nous vous je on mais ou etait a lui leur l d qu s n",
    "de": "der die das und ist nicht ein eine zu den dem des in mit sich er sie es ich auf fur von war auch "
          "als an wie so dass aus noch nur bei hat",
    "es": "el la los las de del y que en un una es no se por con su para lo al como mas pero sus le ya o fue "
          "ha me si sin sobre este",
    "it": "il la le di che e un una in non per con si del della lo gli i da al ma come piu sono era ha anche "
          "se questo suo l",
    "pt": "o a os as de do da dos das e que em um uma nao para com se por no na mais como mas ao foi ele ela "
          "seu sua",
}
COMMON_WORDS = {code: frozenset(words.split()) for code, words in _COMMON.items()}


def reads_as(text: str, language: str) -> bool:
    """Whether text looks like `language` enough to score it with that language's transcriber:
    English as reads_as_english; French, German, Spanish, Italian and Portuguese by the same test
    on their own common words. An untagged Latin epigraph in a French book is left out."""
    code = primary_language(language)
    if code == "en":
        return reads_as_english(text)
    letters = [ch for ch in text if ch.isalpha()]
    if letters:
        foreign = sum(not unicodedata.name(ch, "LATIN").startswith("LATIN") for ch in letters)
        if foreign > NON_LATIN_MAX_SHARE * len(letters):
            return False
    words = normalize_words(text, code)
    if len(words) < ENGLISH_MIN_WORDS or code not in COMMON_WORDS:
        return True
    return sum(w in COMMON_WORDS[code] for w in words) >= ENGLISH_MIN_SHARE * len(words)


# A verse line starts with a capital: a book's line group, joined into one block, reads
# "month, breeding, Lilacs out of the dead land, mixing, Memory and desire". Prose rarely has a
# capitalised word (other than "I") after a comma; The Waste Land has one every 5-11 words
# (only the line starts that follow punctuation are seen).
_LINE_START = re.compile(r"[,;:]\s+(?!I\b)[A-Z][a-z]")
VERSE_WORDS_PER_LINE = 15


def looks_like_verse(text: str) -> bool:
    starts = len(_LINE_START.findall(text))
    return starts >= 3 and starts * VERSE_WORDS_PER_LINE >= len(text.split())


class BookWords:
    """The book's own words of a chapter, aligned to its planned segments, so a window of
    segments can be scored against what the book says rather than what the normaliser made of
    it ("I" read as "one" is then an error). Both sides are normalised the neutral way
    (normalize_words: case, punctuation, numerals, in the chapter's language)."""

    def __init__(self, book_text: str, segment_texts: list[str], language: str = "en"):
        import difflib

        self.book = normalize_words(book_text, language)
        self.plan, self.starts = [], []  # plan words; where each segment's words start
        for text in segment_texts:
            self.starts.append(len(self.plan))
            self.plan += normalize_words(spoken_text(text), language)
        self.starts.append(len(self.plan))
        matcher = difflib.SequenceMatcher(None, self.book, self.plan, autojunk=False)
        self.opcodes = matcher.get_opcodes()
        self._at = [0] * (len(self.plan) + 1)  # plan word position → book word position
        for tag, i1, i2, j1, j2 in self.opcodes:
            for j in range(j1, j2):
                self._at[j] = i1 if tag == "insert" else i1 + (j - j1) * (i2 - i1) // (j2 - j1)
        self._at[len(self.plan)] = len(self.book)

    def span(self, first: int, last: int) -> tuple[int, int]:
        """Book word positions [a, b) read by segments first..last (0-based positions in the chapter)."""
        return self._at[self.starts[first]], self._at[self.starts[last + 1]]

    def words(self, first: int, last: int) -> list[str]:
        a, b = self.span(first, last)
        return self.book[a:b]

    def readings(self, first: int, last: int, transcript: list[str]) -> list[str]:
        """Where the plan says other words than the book in these segments and the audio follows
        the plan: "'i' read as 'one'". Numbers, abbreviations and the like are normalised alike on
        both sides, so what is left is the normaliser's own choices, right or wrong."""
        j1, j2 = self.starts[first], self.starts[last + 1]
        heard = " " + " ".join(transcript) + " "
        found = []
        for tag, a1, a2, b1, b2 in self.opcodes:
            if tag != "replace" or b2 <= j1 or b1 >= j2:
                continue
            said, book = " ".join(self.plan[b1:b2]), " ".join(self.book[a1:a2])
            if f" {said} " in heard and f" {book} " not in heard and a2 - a1 <= 4:
                found.append(f"{book!r} read as {said!r}")
        return found
