"""Chapters → segments: sentence-sized pieces of text, each synthesised on its own.

A segment is the unit of work, of caching and of retry, so it must be short enough that a crash
loses little and a voice never gets a paragraph it cannot say in one breath, and long enough that
the voice keeps a natural sentence melody. Sentences longer than the cap are split at the
strongest punctuation before the cap, then at a word boundary. Pronunciation markup (`⟦…⟧`, see
lexicon.py) is never cut and never ends a sentence.

Pauses follow what ends there: a sentence, a paragraph, a heading (a little longer than a
paragraph, so the title stands apart), a scene break (`Chapter.breaks`: <hr/>, "* * *") and the
chapter.

A segment is in one language: where the markup says a passage is in another language than the
book (`Chapter.languages`), the passage is segmented on its own and its segments carry its tag
(`Segment.lang`; None is the book's language), so a voice that speaks it can read it as such.
Where a language changes inside a sentence the pause is a short one.

A segment the voice cannot say within its length cap (its speech would be cut) is said in two
pieces instead (`split_in_two`), again and again if need be, down to single words (render.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .language import runs as language_runs
from .lexicon import protect, restore
from .model import Chapter

MAX_SEGMENT_CHARS = 300

# Silence after a segment, by what ends there. Chosen to sound like an unhurried human reader.
PAUSE_SENTENCE_MS = 250
PAUSE_LANGUAGE_MS = 100  # a language change inside a sentence: about a comma's breath
PAUSE_PARAGRAPH_MS = 700
PAUSE_HEADING_MS = 1000
PAUSE_SCENE_BREAK_MS = 1600
PAUSE_CHAPTER_MS = 2000
PAUSE_CLAUSE_MS = 100  # between the pieces of a re-split segment cut at its punctuation: a comma's breath

# Words that end in a period without ending a sentence.
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "rev", "capt", "col", "gen", "lt", "sgt",
    "mt", "messrs", "mme", "mlle", "no", "vol", "vols", "ch", "chap", "fig", "p", "pp", "vs", "etc",
    "e.g", "i.e", "viz", "cf", "ed", "eds", "inc", "ltd", "co", "jan", "feb", "mar", "apr", "jun",
    "jul", "aug", "sep", "sept", "oct", "nov", "dec", "esq", "hon", "gov", "sen", "rep",
    "a.m", "p.m",
}

# A sentence ends at . ! ? or an ellipsis, optionally followed by closing quotes/brackets, then space.
_SENTENCE_END = re.compile(r"""([.!?…]+["'”’»)\]]*)\s+""")
_ENDS_SENTENCE = re.compile(r"""[.!?…]+["'”’»)\]]*$""")
# Closing punctuation at the start of a language run belongs to the run before it ("… the
# *Governor-Higginson*, de Calcutta"): said alone it is a segment of no words, or it starts the next
# voice's text with a comma.
_CLOSING_PUNCTUATION = re.compile(r"""^[.,;:!?…)\]}»”’]+\s*""")
_SOFT_BREAKS = [re.compile(p) for p in (r"[;:]\s+", r"[,—–]\s*", r"\s+")]
_CLAUSE_BREAKS, _WORD_BREAK = _SOFT_BREAKS[:2], _SOFT_BREAKS[2]


@dataclass(frozen=True)
class Segment:
    chapter: int  # index of the chapter in the book
    index: int  # position within the chapter
    text: str
    pause_after_ms: int
    # BCP 47 tag of a passage not in the book's language; None: the book's. It also names the voice
    # the book gives the passage (data-calibre-tts), where one does: language.with_voice/split_voice.
    lang: str | None = None


def split_sentences(paragraph: str) -> list[str]:
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(paragraph):
        end = match.end(1)
        # The word the punctuation ends, found without copying the sentence so far (a paragraph
        # of "Mr. Mr. Mr. ..." would make that quadratic).
        word_start = end
        while word_start > start and not paragraph[word_start - 1].isspace():
            word_start -= 1
        last_word = paragraph[word_start:end]
        stem = last_word.rstrip(".").lstrip("(\"'“‘").lower()
        if last_word.endswith(".") and (stem in _ABBREVIATIONS or _is_initial(stem)):
            continue  # "Mr. Lorry", "J. Smith": not the end of a sentence
        sentences.append(paragraph[start:end].strip())
        start = match.end()
    tail = paragraph[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def _is_initial(word: str) -> bool:
    return len(word) == 1 and word.isalpha()


def split_long(sentence: str, limit: int = MAX_SEGMENT_CHARS) -> list[str]:
    """Split a sentence longer than `limit` at the strongest break that keeps pieces under it.
    Left to right, looking only at the next `limit` characters each time, so a 5 MB run of words
    costs linear time and no copies of what is left."""
    pieces, start, end = [], 0, len(sentence)
    while end - start > limit:
        cut = 0
        for pattern in _SOFT_BREAKS:
            cut = _last_break(pattern, sentence, start, limit)
            if cut:
                break
        if cut:
            pieces.append(sentence[start:cut].rstrip())
        else:  # a single "word" longer than the limit (a URL, a run of symbols): cut it hard
            cut = start + limit
            pieces.append(sentence[start:cut])
        start = cut
        while start < end and sentence[start].isspace():
            start += 1
    if start < end:
        pieces.append(sentence[start:])
    return pieces


def _last_break(pattern: re.Pattern, text: str, start: int, limit: int) -> int:
    """Where the last break in text[start:start + limit] ends (0 if none): the piece before it,
    trailing spaces dropped, must fit in `limit` and not be tiny."""
    best = 0
    for match in pattern.finditer(text, start, start + limit + 1):
        kept = match.start() + len(match.group().rstrip())  # the break's own punctuation stays
        if kept - start <= limit and match.end() - start > limit // 3:
            best = match.end()
    return best


def split_in_two(text: str) -> tuple[str, str, int] | None:
    """A segment's text as two shorter pieces and the pause between them (ms), for a voice that
    could not say it within its length cap: at the strongest clause punctuation (; : then , — –)
    that leaves each piece at least a quarter of the text, the one nearest the middle; else at
    the word boundary nearest the middle, with no pause. None for a single word, which cannot be
    split without cutting it. Pronunciation markup is never cut."""
    protected, kept = protect(text.strip())
    n = len(protected)
    for pattern, pause in ((p, PAUSE_CLAUSE_MS) for p in _CLAUSE_BREAKS):
        best = _nearest_middle(pattern, protected, min_piece=n / 4)
        if best:
            break
    else:
        best, pause = _nearest_middle(_WORD_BREAK, protected, min_piece=1), 0
    if not best:
        return None
    left, right = protected[:best[0]].rstrip(), protected[best[1]:].lstrip()
    return restore(left, kept), restore(right, kept), pause


def _nearest_middle(pattern: re.Pattern, text: str, min_piece: float) -> tuple[int, int] | None:
    """(end of the left piece, start of the right) of the break nearest the middle of `text` whose
    pieces are both at least `min_piece` characters; the break's punctuation stays on the left."""
    best = None
    for match in pattern.finditer(text):
        left_end = match.start() + len(match.group().rstrip())
        left, right = len(text[:left_end].rstrip()), len(text) - match.end()
        if min(left, right) >= min_piece and (best is None or abs(left_end - len(text) / 2) < best[0]):
            best = (abs(left_end - len(text) / 2), left_end, match.end())
    return best and best[1:]


def segment_chapter(chapter_index: int, chapter: Chapter, limit: int = MAX_SEGMENT_CHARS) -> list[Segment]:
    pieces: list[tuple[str, int, str | None]] = []
    for index, paragraph in enumerate(chapter.paragraphs):
        if index in chapter.breaks and pieces:
            pieces[-1] = (pieces[-1][0], max(pieces[-1][1], PAUSE_SCENE_BREAK_MS), pieces[-1][2])
        end_pause = PAUSE_HEADING_MS if chapter.kind(index) == "heading" else PAUSE_PARAGRAPH_MS
        # The spans are the spoken chapter's: already in terms of other languages than the book's.
        runs = language_runs(paragraph, chapter.languages.get(index), "")
        first_piece = len(pieces)
        for r, (start, end, lang) in enumerate(runs):
            protected, kept = protect(paragraph[start:end])
            sentences = [restore(p, kept) for s in split_sentences(protected) for p in split_long(s, limit)]
            sentences = [s for s in sentences if s]
            if r and sentences and len(pieces) > first_piece:
                closing = _CLOSING_PUNCTUATION.match(sentences[0])
                if closing:
                    text, pause, previous_lang = pieces[-1]
                    pieces[-1] = (text + closing.group().rstrip(), pause, previous_lang)
                    sentences[0] = sentences[0][closing.end():]
                    sentences = [s for s in sentences if s]
                    if not sentences and r == len(runs) - 1:  # the paragraph ended with that punctuation
                        pause = end_pause
                    elif _ENDS_SENTENCE.search(pieces[-1][0]):
                        pause = max(pause, PAUSE_SENTENCE_MS)
                    pieces[-1] = (pieces[-1][0], pause, previous_lang)
            for i, text in enumerate(sentences):
                if i < len(sentences) - 1:
                    pause = PAUSE_SENTENCE_MS
                elif r == len(runs) - 1:
                    pause = end_pause
                else:  # the language changes here: a sentence end, or within a sentence
                    pause = PAUSE_SENTENCE_MS if _ENDS_SENTENCE.search(text) else PAUSE_LANGUAGE_MS
                pieces.append((text, pause, lang))
    segments = [Segment(chapter_index, i, text, pause, lang) for i, (text, pause, lang) in enumerate(pieces)]
    if segments:
        last = segments[-1]
        segments[-1] = Segment(chapter_index, last.index, last.text, PAUSE_CHAPTER_MS, last.lang)
    return segments
