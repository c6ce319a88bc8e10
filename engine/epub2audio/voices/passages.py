"""Who reads which passage under `--voice auto` (issue 21): the voice of each planned segment.

The book's voice (catalog.choose_voice) reads the book. A passage the markup puts in another
language (xml:lang, Segment.lang) is read by an installed voice that speaks that language, chosen
as the book's voice is (catalog.speakers: [preferred_voices], then `voice list` order), unless the
book's voice speaks that language itself (a CosyVoice3 book voice keeps its French passages). A
passage calibre names a voice for (`data-calibre-tts`, inherited by the passage's elements) is read
by that voice if one is installed (a full name "piper:fr_FR-siwis-medium", the name without its
family, or one dash-separated part of it as calibre's own voice names are: "siwis"; the first
in `voice list` order where several match); an unknown name leaves the passage to the
language rule, with one warning line per name. Where no installed voice fits, the book's voice.

A passage voice must give audio at the book voice's sample rate: the M4B, its timings and
`verify` are at one rate and the store keeps each voice's own audio (the segment key is that
voice's), so a voice at another rate is passed over, with one warning line.

An explicit `--voice X` reads everything with X: the user named the reader; this module is not
consulted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..book.language import name as language_name, primary
from . import catalog


@dataclass
class Readers:
    """The voices of one job: the book's, and the other voices that read some of its passages."""
    book: str
    languages: dict[str, str] = field(default_factory=dict)  # primary subtag → voice (not the book's)
    named: dict[str, str] = field(default_factory=dict)  # data-calibre-tts name → voice (installed)
    warnings: list[str] = field(default_factory=list)

    def voice_for(self, lang: str | None, named: str | None = None) -> str:
        """The voice that reads a segment in `lang` (None: the book's language) whose passage
        calibre gave the voice name `named` (None: none)."""
        if named and named in self.named:
            return self.named[named]
        return self.languages.get(primary(lang), self.book) if lang else self.book

    def others(self) -> list[str]:
        """The voices besides the book's, in a fixed order (the order they render in)."""
        return sorted((set(self.languages.values()) | set(self.named.values())) - {self.book})

    def drop(self, voice: str) -> None:
        """`voice` will not read anything after all (it did not load): the book's voice reads its part."""
        self.languages = {k: v for k, v in self.languages.items() if v != voice}
        self.named = {k: v for k, v in self.named.items() if v != voice}

    def summary(self) -> str:
        """One line for people: which other voices read what ('' when the book's voice reads all)."""
        parts = [f"{language_name(code)} passages by {voice}" for code, voice in sorted(self.languages.items())]
        parts += [f"passages the book gives to {wanted!r} by {voice}" for wanted, voice in sorted(self.named.items())
                  if voice != self.book]
        return f"Other voices: {'; '.join(parts)}" if parts else ""


def passage_readers(book_voice: str, book_language: str | None, passage_langs: set[str],
                    calibre_names: set[str], config: dict) -> Readers:
    """The Readers of a book read by `book_voice` under `--voice auto`, whose passages are in
    `passage_langs` (BCP 47 tags other than the book's language) and name `calibre_names`."""
    readers = Readers(book_voice)
    rate = catalog.sample_rate_of(book_voice)
    spoken = catalog.languages_of(book_voice) or ()
    for code in sorted({primary(tag) for tag in passage_langs} - {primary(book_language), "", "und"}):
        if code in spoken:
            continue
        candidates = catalog.speakers(code, config)
        fitting = [v for v in candidates if catalog.sample_rate_of(v) == rate]
        if fitting:
            readers.languages[code] = fitting[0]
        elif candidates:
            readers.warnings.append(
                f"{candidates[0]} speaks {language_name(code)} but at {catalog.sample_rate_of(candidates[0])} Hz, "
                f"the book's voice {book_voice} at {rate} Hz: {book_voice} reads the {language_name(code)} passages")
    installed = [row for row in catalog.listing() if row.family != "test"]
    for wanted in sorted(calibre_names):
        matches = [row for row in installed if catalog.name_matches(wanted, row.name)]
        fitting = [row for row in matches if catalog.sample_rate_of(row.name) == rate]
        if not matches:
            readers.warnings.append(f"the book asks for voice {wanted!r} (data-calibre-tts), which is not installed: "
                                    f"those passages are read as the rest")
        elif not fitting:
            readers.warnings.append(f"the book asks for voice {wanted!r} (data-calibre-tts): {matches[0].name} is "
                                    f"at {catalog.sample_rate_of(matches[0].name)} Hz, the book's voice at {rate} Hz; "
                                    f"those passages are read as the rest")
        else:  # the book's voice too: the passage is still the book's choice, not the language rule's
            readers.named[wanted] = fitting[0].name
    return readers

