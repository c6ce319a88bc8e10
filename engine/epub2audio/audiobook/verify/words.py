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


def normalize_words(text: str) -> list[str]:
    """Lower-case words without punctuation, with numerals spelt out the same way on both sides
    (num2words: "1851" → "eighteen fifty-one" → two words, "3rd" → "third")."""
    from num2words import num2words

    text = unicodedata.normalize("NFKC", text).lower()
    text = text.replace("’", "'").replace("‘", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000 → 1000
    text = _ORDINAL.sub(lambda m: f" {num2words(int(m.group(1)), to='ordinal')} ", text)
    text = text.replace("%", " percent ").replace("&", " and ")
    text = _NUMBER.sub(_number_words, text)
    text = re.sub(r"'", "", text)  # don't → dont, on both sides
    text = "".join(ch if ch.isalnum() else " " for ch in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(ch))
    return [_HOMOPHONES.get(w, w) for w in text.split()]


# Words a listener cannot tell apart and tiny.en picks between at random ("Two" → "to"): folded the
# same way on both sides so they never count as errors.
_HOMOPHONES = {"two": "to", "too": "to", "four": "for", "fore": "for", "won": "one", "eight": "ate",
               "ok": "okay", "mr": "mister", "mrs": "missus", "dr": "doctor", "st": "saint"}


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


def wer(reference: str, hypothesis: str) -> float:
    ref = normalize_words(reference)
    return edit_distance(ref, normalize_words(hypothesis)) / max(1, len(ref))


def spoken_text(segment_text: str) -> str:
    """A segment's text as words: pronunciation markup ⟦TEXT|ipa:…⟧ / ⟦TEXT⟧ becomes TEXT."""
    return _MARKUP.sub(lambda m: m.group(1), segment_text)


_MARKUP = re.compile(r"\u27e6([^\u27e6\u27e7|]*)(?:\|ipa:[^\u27e6\u27e7]*)?\u27e7")  # as book/lexicon.py


def _alnum(text: str) -> int:
    return sum(ch.isalnum() for ch in text)
