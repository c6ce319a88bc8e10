"""One MP3 for the whole book, with ID3v2.4 chapters (`--format mp3`).

Made as the M4B is (m4b.encode_book: the same PCM, gain, limiter and atomic rename), encoded by
LAME at the voice's own rate (MPEG-2 Layer III covers 16, 22.05 and 24 kHz; every decoder plays
it). ffmpeg's mp3 muxer writes, from the same FFMETADATA:
- the tags as ID3v2.4 text frames: TIT2 TALB (title), TPE1 TPE2 (author), TCOM (narrator, which
  Audiobookshelf reads as such), TCON, TDRC, and the description as TXXX:description;
- one CHAP frame per chapter (start and end in milliseconds, a TIT2 with its title) and a
  top-level, ordered CTOC listing them: the chapters players and ffprobe read;
- the cover as APIC (front cover);
- a Xing/LAME header with the encoder delay and padding, so the audio decodes to exactly its
  samples and each chapter starts where its mark says.
The series, ISBN, ASIN, language and publisher go in through ffmpeg too (mp3_global_tags), not
mutagen: mutagen's save reorders the frames, the CHAP frames with them, and ffmpeg 5.1 (so
Audiobookshelf) lists chapters in frame order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..book.model import Cover
from .ffmpeg import ffmpeg_exe
from .m4b import AudioChapter, M4BResult, Tags, _global_tags, encode_book

# Rates LAME encodes without resampling (MPEG-1, 2 and 2.5).
MP3_SAMPLE_RATES = frozenset({8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000})
BITRATE = "64k"  # mono speech: as the M4B's AAC; MPEG-2 allows up to 160k


def frame_samples(sample_rate: int) -> int:
    """Samples in one Layer III frame: 1152 in MPEG-1 (32 kHz and up), 576 in MPEG-2 and 2.5."""
    return 1152 if sample_rate >= 32000 else 576


def mp3_global_tags(tags: Tags) -> list[tuple[str, str]]:
    """The M4B's ffmpeg keys without the iTunes-only ones (stik, the long description), and the
    ones Audiobookshelf's scanner reads that MP4 keeps in freeform atoms. ffmpeg writes grouping
    as TIT1, language as TLAN, publisher as TPUB and any other key as TXXX with that name, which
    ffprobe (and so Audiobookshelf) shows under the same name."""
    series = tags.series.strip()
    extra = [("series", series), ("series-part", tags.series_index.strip() if series else ""), ("grouping", series),
             ("ISBN", tags.isbn.strip()), ("ASIN", tags.asin.strip()), ("language", tags.language.strip()),
             ("publisher", tags.publisher.strip())]
    return [(k, v) for k, v in _global_tags(tags) if k not in ("media_type", "synopsis")] + extra


def write_mp3(out_path: Path, chapters: Sequence[AudioChapter], tags: Tags, cover: Cover | None,
              sample_rate: int, *, bitrate: str = BITRATE) -> M4BResult:
    if sample_rate not in MP3_SAMPLE_RATES:
        raise ValueError(f"MP3 cannot encode at {sample_rate} Hz (allowed: {sorted(MP3_SAMPLE_RATES)})")

    def command(tmp: Path, meta: Path, cover_file: Path | None, audio_filter: str) -> list[str]:
        cmd = [ffmpeg_exe(), "-hide_banner", "-nostats", "-loglevel", "error", "-y"]
        cmd += ["-f", "s16le", "-ar", str(sample_rate), "-ac", "1", "-i", "pipe:0"]
        cmd += ["-f", "ffmetadata", "-i", str(meta)]
        if cover_file:
            cmd += ["-i", str(cover_file), "-map", "0:a", "-map", "2:v", "-c:v", "copy",
                    "-disposition:v:0", "attached_pic", "-metadata:s:v", "comment=Cover (front)"]
        else:
            cmd += ["-map", "0:a"]
        cmd += ["-map_metadata", "1", "-map_chapters", "1"]
        cmd += ["-af", audio_filter, "-c:a", "libmp3lame", "-b:a", bitrate, "-ac", "1", "-ar", str(sample_rate)]
        cmd += ["-fflags", "+bitexact", "-id3v2_version", "4", "-write_xing", "1", "-f", "mp3", str(tmp)]
        return cmd

    return encode_book(out_path, chapters, tags, cover, sample_rate, command, lambda tmp, _starts: None,
                       mp3_global_tags(tags))
