"""A finished job's files, from its store: the audiobook (M4B, MP3 or Opus: the same PCM, marks,
gain and limiter in each) and, beside it, the subtitles and the read-along EPUB asked for.

render.convert() and render.regen() call these once the segments are stored; they read the store
and never render.
"""

from __future__ import annotations

from pathlib import Path

from .audiobook.m4b import AudioChapter, tags_for_book, write_m4b
from .book import Book
from .progress import Progress
from .store import SegmentStore
from .worker.supervisor import VoiceDetails


def writer(audio_format: str):
    """write_m4b, write_mp3 or write_opus: one signature, one file."""
    if audio_format == "mp3":
        from .audiobook.mp3 import write_mp3

        return write_mp3
    if audio_format == "opus":
        from .audiobook.opus import write_opus

        return write_opus
    return write_m4b


def audio_chapters(store: SegmentStore, sample_rate: int) -> dict[int, AudioChapter]:
    """The book's audio as assemble() lays it out (store.layout), by chapter index: for each planned
    segment in plan order, its WAV then its planned pause (in samples)."""
    chapters: dict[int, AudioChapter] = {}
    for chapter, title, parts in store.layout(sample_rate):
        chapters[chapter] = AudioChapter(title=title, parts=[p for key, pause in parts
                                                             for p in (store.audio_path(key), pause)])
    return chapters


def assemble(store: SegmentStore, book: Book, out_path: Path, details: VoiceDetails, audio_format: str = "m4b"):
    """The audiobook from the stored segments, in plan order, with the planned pauses."""
    chapters = audio_chapters(store, details.sample_rate)
    tags = tags_for_book(book, narrator=details.narrator)
    return writer(audio_format)(out_path, list(chapters.values()), tags, book.cover, details.sample_rate)


def write_outputs(store: SegmentStore, book: Book, out_path: Path, m4b, details: VoiceDetails, outputs: dict,
                  progress: Progress | None = None) -> list[Path]:
    """The subtitles and the read-along EPUB asked for, beside the M4B, from the store's timings;
    under --layout audiobookshelf the cover, desc.txt and reader.txt too."""
    written = []
    if outputs.get("layout") == "audiobookshelf":
        from .audiobook.m4b import _plain_text
        from .audiobook.shelf import write_beside

        written += write_beside(out_path, book.cover, _plain_text(book.description), details.narrator)
    sample_rate = details.sample_rate
    if outputs.get("subtitles") or outputs.get("readalong"):
        from .audiobook.timings import book_timings

        timings = book_timings(store, sample_rate)
    if outputs.get("subtitles"):
        from .audiobook.subtitles import write_subtitles

        written.append(write_subtitles(out_path, outputs["subtitles"], timings, sample_rate))
    if outputs.get("readalong"):
        from .audiobook.readalong import write_readalong

        word_begins = None
        if outputs["readalong"] == "words":
            word_begins = _word_begins(store, details, progress)
        made = write_readalong(Path(book.path), out_path, timings, store, sample_rate, m4b.gain_db,
                               language=book.language, narrator=details.narrator, word_begins=word_begins)
        written.append(made.path)
        for warning in made.warnings:
            if progress is not None:
                progress.emit("warning", message=warning)
    if progress is not None:
        for path in written:
            progress.emit("output", path=str(path))
    return written


def _word_begins(store: SegmentStore, details: VoiceDetails, progress: Progress | None):
    """`--readalong words`: a word_begins for write_readalong from the voice's word times
    (audiobook/words.py), or None, with one warning line, where the voice cannot say them."""
    from .audiobook import words

    try:
        times = words.collect_word_times(store, store.job_dir / "worker.log")
    except words.VoiceCannotTimeWords as error:
        if progress is not None:
            why = "cannot say when each word starts" if str(error) == words.UNTIMED else f"gave no word times ({error})"
            progress.emit("warning", message=f"read-along: voice {details.name} {why}; "
                                             f"the read-along book highlights whole sentences")
        return None
    keys = {(c, i): k for c, i, k, _ in store.plan()}
    texts = {k: (store.segment_row(k) or {}).get("text", "") for k in keys.values()}

    def word_begins(cues, text):
        spoken = words.spoken_words(cues, keys, texts, times)
        return words.written_word_begins(text, spoken) if spoken else []

    return word_begins
