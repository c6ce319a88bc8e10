"""One Ogg Opus file for the whole book, with Vorbis-comment chapters (`--format opus`).

Made as the M4B is (m4b.encode_book: the same PCM, gain, limiter and atomic rename). libopus
takes 8, 12, 16, 24 or 48 kHz; a voice at another rate (Piper's 22.05 kHz) is resampled to the
next one up, after the limiter. Opus always plays at 48 kHz; the header's pre-skip and the last
page's granule position trim the encoder's delay and padding, so the audio decodes to the book's
length.
- Tags: ffmpeg writes the Vorbis comments from the same FFMETADATA (TITLE, ALBUM, ARTIST,
  ALBUMARTIST, COMPOSER = the narrator, GENRE, DATE, DESCRIPTION).
- Chapters: the Vorbis chapter extension, CHAPTER001=HH:MM:SS.mmm and CHAPTER001NAME=title, from
  001 as the extension numbers them (ffmpeg writes its own from 000; `_finish` rewrites them).
  ffmpeg/ffprobe, mpv, VLC and Audiobookshelf read them.
- Cover: METADATA_BLOCK_PICTURE, a base64 FLAC picture block (type 3, front cover), the way
  Ogg files carry art (ffmpeg's Ogg muxer writes none).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path

from ..book.model import Cover
from .ffmpeg import ffmpeg_exe
from .m4b import AudioChapter, M4BError, M4BResult, Tags, _cover_suffix, encode_book
from .mp3 import mp3_global_tags

OPUS_SAMPLE_RATES = (8000, 12000, 16000, 24000, 48000)
BITRATE = "32k"  # mono speech: Opus at 32 kb/s is about what AAC needs 64 for (half the M4B's size)
FRAME_SECONDS = 0.020  # libopus's default frame


def opus_rate(sample_rate: int) -> int:
    """The rate libopus is fed: the voice's own, else the next one up."""
    return next((r for r in OPUS_SAMPLE_RATES if r >= sample_rate), 48000)


def write_opus(out_path: Path, chapters: Sequence[AudioChapter], tags: Tags, cover: Cover | None,
               sample_rate: int, *, bitrate: str = BITRATE) -> M4BResult:
    rate = opus_rate(sample_rate)

    def command(tmp: Path, meta: Path, cover_file: Path | None, audio_filter: str) -> list[str]:
        cmd = [ffmpeg_exe(), "-hide_banner", "-nostats", "-loglevel", "error", "-y"]
        cmd += ["-f", "s16le", "-ar", str(sample_rate), "-ac", "1", "-i", "pipe:0"]
        cmd += ["-f", "ffmetadata", "-i", str(meta), "-map", "0:a", "-map_metadata", "1", "-map_chapters", "1"]
        if rate != sample_rate:
            audio_filter += f",aresample={rate}"
        cmd += ["-af", audio_filter, "-c:a", "libopus", "-b:a", bitrate, "-ac", "1", "-ar", str(rate)]
        # bitexact: no random Ogg serial number, so the same store gives the same bytes
        cmd += ["-fflags", "+bitexact", "-f", "opus", str(tmp)]
        return cmd

    def finish(tmp: Path, starts: list[int]) -> None:
        _finish(tmp, tags, cover, [(c.title, s / sample_rate) for c, s in zip(chapters, starts)])

    return encode_book(out_path, chapters, tags, cover, sample_rate, command, finish, mp3_global_tags(tags))


def chapter_clock(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def _finish(path: Path, tags: Tags, cover: Cover | None, chapters: list[tuple[str, float]]) -> None:
    from mutagen.flac import Picture
    from mutagen.oggopus import OggOpus

    try:
        ogg = OggOpus(path)
        for key in list(ogg.tags.keys()):
            if key.upper().startswith("CHAPTER"):
                del ogg.tags[key]
        for n, (title, start) in enumerate(chapters, 1):
            ogg.tags[f"CHAPTER{n:03d}"] = [chapter_clock(start)]
            ogg.tags[f"CHAPTER{n:03d}NAME"] = [title]
        if cover is not None and _cover_suffix(cover):
            picture = Picture()
            picture.type = 3  # front cover
            picture.mime = "image/png" if _cover_suffix(cover) == ".png" else "image/jpeg"
            picture.desc = "Cover"
            picture.data = cover.data
            ogg.tags["METADATA_BLOCK_PICTURE"] = [base64.b64encode(picture.write()).decode("ascii")]
        ogg.save()
    except Exception as exc:  # mutagen raises its own error types; the caller expects M4BError
        raise M4BError(f"could not add tags to the encoded Opus file: {exc}") from exc
