"""Container checks for `--format mp3` and `--format opus`, in the shape container.py gives for
an M4B: (facts, chapter marks in samples, sample rate).

Both formats hold chapter starts in milliseconds (ID3 CHAP frames; Vorbis CHAPTERnnn comments), so
a mark may sit up to one codec frame from the sample the job put it at: `mark_tolerance` tells
job._check_layout how far (MP3: one Layer III frame; Opus: one 20 ms frame). Marks, tags and the
cover are read with mutagen, from the frames and comments themselves: ffmpeg's own chapter
listing of an MP3 (`-f ffmetadata`) is shifted by the encoder delay it trims, although the
decoded audio and the CHAP times both start at the book's first sample (ffprobe shows them as
written).
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path

from .container import REQUIRED_TAGS
from .report import Problem, VerifyInputError

# The M4B's required atoms, as ID3v2.4 frames and as Vorbis comments.
ID3_FRAMES = {"©nam": "TIT2", "©ART": "TPE1", "©alb": "TALB", "©wrt": "TCOM", "©gen": "TCON"}
VORBIS_KEYS = {"©nam": "title", "©ART": "artist", "©alb": "album", "©wrt": "composer", "©gen": "genre"}


def check_container(path: Path, problems: list[Problem]) -> tuple[dict, list[tuple[int, int, str]], int]:
    suffix = path.suffix.lower()
    info, sample_rate, tolerance, marks = (_mp3 if suffix == ".mp3" else _opus)(path, problems)
    info["mark_tolerance"] = tolerance
    info["chapters"] = len(marks)
    if not marks:
        problems.append(Problem("container", f"no chapters ({'ID3 CHAP/CTOC' if suffix == '.mp3' else 'Vorbis CHAPTERnnn'})"))
    else:
        if marks[0][0] > tolerance:
            problems.append(Problem("container", f"the first chapter starts at {marks[0][0] / sample_rate:.3f} s, not 0"))
        for i, ((s, e, _t), nxt) in enumerate(zip(marks, [*marks[1:], None]), 1):
            if e <= s:
                problems.append(Problem("container", f"chapter {i} ends at or before its start", i))
            if nxt is not None and abs(e - nxt[0]) > tolerance:
                problems.append(Problem("container", f"chapter {i} ends at {e / sample_rate:.3f} s but chapter "
                                                     f"{i + 1} starts at {nxt[0] / sample_rate:.3f} s", i))
    info["chapter_sum_seconds"] = round(sum(e - s for s, e, _t in marks) / sample_rate, 3) if marks else 0
    return info, marks, sample_rate


def _mp3(path: Path, problems: list[Problem]):
    from mutagen import MutagenError
    from mutagen.id3 import ID3NoHeaderError
    from mutagen.mp3 import MP3

    from ..mp3 import frame_samples

    try:
        mp3 = MP3(path)
    except (MutagenError, ID3NoHeaderError) as error:
        raise VerifyInputError(f"{path.name}: not an MP3 file ({error})") from None
    sample_rate = int(mp3.info.sample_rate or 0)
    if not sample_rate:
        raise VerifyInputError(f"{path.name}: has no audio")
    info = {"codec": "mp3", "channels": mp3.info.channels, "sample_rate": sample_rate}
    if mp3.info.channels != 1:
        problems.append(Problem("container", f"audio has {mp3.info.channels} channels, not mono"))
    tags = mp3.tags
    if tags is None or tags.version[:2] != (2, 4):
        problems.append(Problem("container", "no ID3v2.4 tag"))
    frames = {} if tags is None else tags
    info["missing_tags"] = [atom for atom, frame in ID3_FRAMES.items() if not str(frames.get(frame, "")).strip()]
    info["tags"] = {frame: str(frames[frame]) for frame in ID3_FRAMES.values() if frame in frames}
    info["cover"] = bool(tags is not None and tags.getall("APIC"))
    toc = [] if tags is None else tags.getall("CTOC")
    chaps = [] if tags is None else tags.getall("CHAP")
    info["chapters_id3"] = len(chaps)
    top = [t for t in toc if t.flags & 0x01]  # TOP_LEVEL
    if chaps and not top:
        problems.append(Problem("container", "CHAP frames without a top-level CTOC"))
    by_id = {c.element_id: c for c in chaps}
    order = [by_id[e] for e in top[0].child_element_ids if e in by_id] if top else chaps
    marks = [(round(c.start_time * sample_rate / 1000), round(c.end_time * sample_rate / 1000),
              str(c.sub_frames.get("TIT2", ""))) for c in order]
    return info, sample_rate, frame_samples(sample_rate), marks


def _opus(path: Path, problems: list[Problem]):
    from mutagen import MutagenError
    from mutagen.flac import Picture
    from mutagen.oggopus import OggOpus

    try:
        ogg = OggOpus(path)
    except MutagenError as error:
        raise VerifyInputError(f"{path.name}: not an Ogg Opus file ({error})") from None
    sample_rate = _input_rate(path)
    info = {"codec": "opus", "channels": ogg.info.channels, "sample_rate": sample_rate}
    if ogg.info.channels != 1:
        problems.append(Problem("container", f"audio has {ogg.info.channels} channels, not mono"))
    comments = {k.lower(): v for k, v in (ogg.tags or {}).items()}
    info["missing_tags"] = [atom for atom, key in VORBIS_KEYS.items() if not "".join(comments.get(key, [])).strip()]
    info["tags"] = {key: comments[key][0] for key in VORBIS_KEYS.values() if comments.get(key)}
    cover = False
    for value in comments.get("metadata_block_picture", []):
        try:
            cover = cover or bool(Picture(base64.b64decode(value)).data)
        except Exception:
            problems.append(Problem("container", "METADATA_BLOCK_PICTURE cannot be read"))
    info["cover"] = cover
    marks = []
    n = 1
    while f"chapter{n:03d}" in comments:
        start = _clock_seconds(comments[f"chapter{n:03d}"][0])
        if start is None:
            problems.append(Problem("container", f"CHAPTER{n:03d} is not HH:MM:SS.mmm"))
            break
        marks.append([round(start * sample_rate), None, "".join(comments.get(f"chapter{n:03d}name", []))])
        n += 1
    length = round(ogg.info.length * sample_rate)
    for mark, nxt in zip(marks, [*marks[1:], None]):
        mark[1] = nxt[0] if nxt else length
    return info, sample_rate, round(0.020 * sample_rate), [tuple(m) for m in marks]


def _clock_seconds(value: str) -> float | None:
    try:
        h, m, s = value.strip().split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)
    except ValueError:
        return None


def _input_rate(path: Path) -> int:
    """OpusHead's input sample rate: the rate the job's PCM was fed at (Opus itself plays at 48 kHz)."""
    with open(path, "rb") as f:
        head = f.read(4096)
    at = head.find(b"OpusHead")
    if at < 0 or len(head) < at + 16:
        raise VerifyInputError(f"{path.name}: no OpusHead")
    (rate,) = struct.unpack("<I", head[at + 12:at + 16])
    return rate or 48000


__all__ = ["check_container", "REQUIRED_TAGS"]
