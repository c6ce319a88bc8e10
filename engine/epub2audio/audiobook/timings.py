"""When each sentence of the book is said, on the M4B's timeline, from the job's store.

The subtitles and the read-along EPUB are fed from here, the M4B from store.layout: both walk the
same plan and the same WAV frame counts, so a cue starts on the very sample its audio starts in
the M4B. A cue is one sentence of the book (store `sources`): the segments that say it together,
from the first one's first sample to the last one's last (the pause after it is not part of
it). A segment the plan could not place in the book is a cue of its own, with its spoken text.
"""

from __future__ import annotations

import wave
from dataclasses import dataclass, field

from ..store import SegmentStore


@dataclass
class Cue:
    chapter: int
    text: str  # the book's own words (or the spoken text, where the plan could not place it)
    start: int  # samples on the book's timeline
    end: int
    # (paragraph of the chapter, where the sentence starts in it); None: only the spoken text is known
    place: tuple[int, int] | None = None
    segments: list[tuple[int, int, int]] = field(default_factory=list)  # (index, start, end) each


@dataclass
class ChapterTiming:
    index: int
    title: str
    start: int  # samples on the book's timeline
    end: int
    sources: list[str]  # the chapter's content documents (manifest hrefs, maybe with #fragment)
    cues: list[Cue]


def book_timings(store: SegmentStore, sample_rate: int) -> list[ChapterTiming]:
    sources = store.sources()
    documents = store.chapter_sources()
    titles = dict(store.chapters())
    chapters: list[ChapterTiming] = []
    at = 0
    for chapter, index, key, pause_ms in store.plan():
        if not chapters or chapters[-1].index != chapter:
            chapters.append(ChapterTiming(chapter, titles[chapter], at, at, documents.get(chapter, []), []))
        timing = chapters[-1]
        with wave.open(str(store.audio_path(key)), "rb") as w:
            length = w.getnframes()
        source = sources.get((chapter, index))
        place = (source[0], source[1]) if source else None
        last = timing.cues[-1] if timing.cues else None
        if place is not None and last is not None and last.place == place:
            last.end = at + length
        else:
            text = source[2] if source else store.segment_row(key)["text"]
            last = Cue(chapter, text, at, at + length, place)
            timing.cues.append(last)
        last.segments.append((index, at, at + length))
        at += length + pause_ms * sample_rate // 1000
        timing.end = at
    return chapters
