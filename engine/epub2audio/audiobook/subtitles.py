"""Subtitles beside the M4B (`--subtitles srt|vtt`): BOOK.srt or BOOK.vtt, for Audiobookshelf and players.

One cue per sentence of the book, in the book's own words (before normalisation: "Dr. Watson",
not "Doctor Watson"), timed from the first sample of the first segment that says it to the last
sample of the last one, on the M4B's timeline (timings.py). Sentence times are known exactly
because a sentence is said by whole segments; where the plan could not tell which sentence a
segment says, its cue holds the segment's spoken text.

Chapter starts, as each format allows:
- WebVTT: a `NOTE` block before each chapter's cues ("NOTE Chapter 2: Title, starts 0:01:02.500"),
  and each cue's identifier names its chapter and sentence (`c2-s5`).
- SRT has no comments: a chapter whose spoken title is not its first cue (titles not read) gets a
  cue with its title from the chapter's start to its first sentence; where the first sentence
  starts at the chapter's start, the title is that cue's first line.

Times are written to the millisecond (SRT allows no finer), rounded to the nearest one, so a cue is
at most half a millisecond from its sample. Written atomically, like the M4B.
"""

from __future__ import annotations

from pathlib import Path

from ..files import atomic_write
from .timings import ChapterTiming

FORMATS = ("srt", "vtt")


def subtitles_path(m4b: Path, kind: str) -> Path:
    return Path(m4b).with_suffix(f".{kind}")


def _ms(samples: int, sample_rate: int) -> int:
    return (samples * 1000 + sample_rate // 2) // sample_rate


def _clock(ms: int, separator: str) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{separator}{millis:03d}"


def _one_line(text: str) -> str:
    # A blank line ends a cue in both formats; "-->" inside a cue would read as a timing line.
    return " ".join(text.split()).replace("-->", "->")


def srt(chapters: list[ChapterTiming], sample_rate: int) -> str:
    blocks: list[tuple[int, int, str]] = []
    for chapter in chapters:
        cues = [(_ms(c.start, sample_rate), _ms(c.end, sample_rate), _one_line(c.text)) for c in chapter.cues]
        title = _one_line(chapter.title)
        if title and cues and cues[0][2] != title:
            start = _ms(chapter.start, sample_rate)
            if cues[0][0] > start:
                blocks.append((start, cues[0][0], title))
            else:
                cues[0] = (cues[0][0], cues[0][1], f"{title}\n{cues[0][2]}")
        blocks += cues
    out = [f"{n}\n{_clock(a, ',')} --> {_clock(b, ',')}\n{text}\n" for n, (a, b, text) in enumerate(blocks, 1)]
    return "\n".join(out)


def vtt(chapters: list[ChapterTiming], sample_rate: int) -> str:
    out = ["WEBVTT\n"]
    for number, chapter in enumerate(chapters, 1):
        # NOTE text may not contain "-->"; _one_line sees to it
        out.append(f"NOTE Chapter {number}: {_one_line(chapter.title)}, starts "
                   f"{_clock(_ms(chapter.start, sample_rate), '.')}\n")
        for s, cue in enumerate(chapter.cues, 1):
            out.append(f"c{number}-s{s}\n{_clock(_ms(cue.start, sample_rate), '.')} --> "
                       f"{_clock(_ms(cue.end, sample_rate), '.')}\n{_one_line(cue.text)}\n")
    return "\n".join(out)


def write_subtitles(m4b: Path, kind: str, chapters: list[ChapterTiming], sample_rate: int) -> Path:
    if kind not in FORMATS:
        raise ValueError(f"subtitles must be one of {FORMATS}, not {kind!r}")
    text = (srt if kind == "srt" else vtt)(chapters, sample_rate)
    path = subtitles_path(m4b, kind)
    atomic_write(path, text.encode("utf-8"), shared=True)
    return path
