"""Languages of the text: BCP 47 tags as the book gives them (dc:language, xml:lang/lang).

A paragraph is a sequence of runs, each in one language. A run's language is None when it is the
book's own (same primary subtag: an en-GB quotation in an en-US book is not foreign), so that a
book without foreign passages plans exactly the segments it always did.
"""

from __future__ import annotations

# English names of the languages the voices speak, for messages.
NAMES = {
    "en": "English", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "de": "German", "es": "Spanish",
    "fr": "French", "it": "Italian", "ru": "Russian", "la": "Latin", "grc": "Ancient Greek", "el": "Greek",
    "sa": "Sanskrit", "ar": "Arabic", "pt": "Portuguese", "nl": "Dutch",
}


# A run of text may also carry the voice the book names for it (calibre's `data-calibre-tts`): its
# tag is then LANGUAGE + VOICE_MARK + VOICE, LANGUAGE empty where it is the book's. A private-use
# character: it is neither whitespace (clean() would fold it) nor one of text.py's markers.
VOICE_MARK = "\ue006"


def with_voice(lang: str | None, voice: str | None) -> str | None:
    """A run's tag: its language (None: the book's) and the voice the book names for it, if any."""
    return f"{lang or ''}{VOICE_MARK}{voice}" if voice else lang


def split_voice(tag: str | None) -> tuple[str | None, str | None]:
    """A run's tag → (its language or None, the voice the book names for it or None)."""
    if tag and VOICE_MARK in tag:
        lang, voice = tag.split(VOICE_MARK, 1)
        return lang or None, voice or None
    return tag, None


def primary(tag: str | None) -> str:
    """'en-US' → 'en', 'zh_Hant' → 'zh', None → ''."""
    return (tag or "").replace("_", "-").split("-")[0].lower()


def name(tag: str) -> str:
    code = primary(tag)
    return f"{NAMES[code]} ({tag})" if code in NAMES else tag


def foreign(tag: str | None, book_language: str) -> str | None:
    """`tag` if it names a language other than the book's, else None; a tag that names a voice
    (with_voice) keeps the voice, its language kept only where it is not the book's."""
    lang, voice = split_voice(tag)
    if voice:
        return with_voice(foreign(lang, book_language), voice)
    if not tag or primary(tag) == "und" or primary(tag) == primary(book_language):
        return None
    return tag


def runs(text: str, spans: list[tuple[int, int, str]] | None, book_language: str) -> list[tuple[int, int, str | None]]:
    """`text` cut into (start, end, language) runs covering all of it, language None for the
    book's; neighbouring runs of one language merge. Spans are (start, end, tag), in order and
    not overlapping (text.Block.langs). A run with nothing to say (the colon between two
    quotations) joins the run before it (or after it, at the start): it is no segment of its own."""
    out: list[tuple[int, int, str | None]] = []

    def add(start: int, end: int, lang: str | None) -> None:
        if end <= start:
            return
        silent = not any(c.isalnum() for c in text[start:end])
        if out and (out[-1][2] == lang or silent):
            out[-1] = (out[-1][0], end, out[-1][2])
        elif out and not any(c.isalnum() for c in text[out[-1][0]:out[-1][1]]):
            out[-1] = (out[-1][0], end, lang)  # a silent first run joins this one
        else:
            out.append((start, end, lang))

    pos = 0
    for start, end, tag in spans or []:
        start, end = max(start, pos), min(end, len(text))
        if end <= start:
            continue
        add(pos, start, None)
        add(start, end, foreign(tag, book_language))
        pos = end
    add(pos, len(text), None)
    return out
