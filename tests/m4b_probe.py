"""Read an M4B back the way players do, to check what write_m4b produced.

Independent checkers on purpose: ffprobe (Debian's 5.1, not the ffmpeg we encode with) shows what
ffmpeg-based players and Audiobookshelf see, including the QuickTime chapter track; mutagen shows
the iTunes atoms and the Nero `chpl` chapters; a tiny box walker shows the container layout.
Used by tests/test_m4b.py and by the end-to-end tests.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
from mutagen.mp4 import MP4

from epub2audio.audiobook.ffmpeg import ffmpeg_exe

FFPROBE = shutil.which("ffprobe") or "/usr/bin/ffprobe"


def have_ffprobe() -> bool:
    return Path(FFPROBE).is_file()


def checker_ffmpeg() -> str:
    """The ffmpeg that ships next to ffprobe (Debian's) if present, else the engine's own."""
    sibling = Path(FFPROBE).with_name("ffmpeg")
    return str(sibling) if sibling.is_file() else ffmpeg_exe()


# ------------------------------------------------------------------------------------------
# ffprobe


def ffprobe(path: Path) -> dict:
    """format + streams + chapters as ffprobe's JSON."""
    out = subprocess.run(
        [FFPROBE, "-v", "error", "-show_format", "-show_streams", "-show_chapters", "-of", "json", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


@dataclass(frozen=True)
class ProbedChapter:
    title: str
    start: int  # in time_base units (1/sample_rate for our files)
    end: int
    time_base: Fraction

    @property
    def start_seconds(self) -> float:
        return float(self.start * self.time_base)

    @property
    def end_seconds(self) -> float:
        return float(self.end * self.time_base)


def chapters(probe: dict) -> list[ProbedChapter]:
    return [
        ProbedChapter(
            title=c.get("tags", {}).get("title", ""),
            start=int(c["start"]),
            end=int(c["end"]),
            time_base=Fraction(c["time_base"]),
        )
        for c in probe.get("chapters", [])
    ]


def format_tags(probe: dict) -> dict[str, str]:
    return probe["format"].get("tags", {})


def audio_streams(probe: dict) -> list[dict]:
    return [s for s in probe["streams"] if s["codec_type"] == "audio"]


def qt_chapter_streams(probe: dict) -> list[dict]:
    """The QuickTime chapter track: a data stream with a 'text' sample entry."""
    return [s for s in probe["streams"] if s["codec_type"] == "data" and s.get("codec_tag_string") == "text"]


def cover_streams(probe: dict) -> list[dict]:
    return [s for s in probe["streams"] if s.get("disposition", {}).get("attached_pic") == 1]


def audio_duration_samples(probe: dict) -> int:
    """The audio track's duration in its own time base (1/sample_rate): exact, no float rounding."""
    (audio,) = audio_streams(probe)
    assert Fraction(audio["time_base"]) == Fraction(1, int(audio["sample_rate"]))
    return int(audio["duration_ts"])


# ------------------------------------------------------------------------------------------
# mutagen


def mp4(path: Path) -> MP4:
    return MP4(path)


def freeform(m: MP4, name: str) -> str | None:
    """An iTunes freeform atom `----:com.apple.iTunes:<name>` as text, None if absent."""
    values = m.tags.get(f"----:com.apple.iTunes:{name}")
    return bytes(values[0]).decode("utf-8") if values else None


def nero_chapters(path: Path) -> list[tuple[float, str]] | None:
    """The `chpl` chapters (start seconds, title) as mutagen reads them; None if there is no chpl."""
    m = MP4(path)
    if m.chapters is None:
        return None
    return [(c.start, c.title) for c in m.chapters]


# ------------------------------------------------------------------------------------------
# Container layout


def top_level_boxes(path: Path) -> list[str]:
    """Names of the top-level ISO-BMFF boxes in file order (faststart: moov before mdat)."""
    names = []
    with open(path, "rb") as f:
        size_total = f.seek(0, 2)
        pos = 0
        while pos + 8 <= size_total:
            f.seek(pos)
            size, kind = struct.unpack(">I4s", f.read(8))
            if size == 1:
                (size,) = struct.unpack(">Q", f.read(8))
            elif size == 0:
                size = size_total - pos
            names.append(kind.decode("latin-1"))
            if size < 8:
                break
            pos += size
    return names


def ftyp_brands(path: Path) -> tuple[str, list[str]]:
    """(major brand, compatible brands) from the ftyp box."""
    with open(path, "rb") as f:
        size, kind = struct.unpack(">I4s", f.read(8))
        assert kind == b"ftyp", kind
        body = f.read(size - 8)
    major = body[:4].decode("latin-1")
    compatible = [body[i : i + 4].decode("latin-1") for i in range(8, len(body), 4)]
    return major, compatible


# ------------------------------------------------------------------------------------------
# Audio


def decode_pcm(path: Path, ffmpeg: str | None = None) -> np.ndarray:
    """The decoded audio as float32 mono, priming and end padding removed per the edit list.

    Decodes with the engine's ffmpeg (9.x) by default: it trims the last AAC frame's padding and
    returns exactly the encoded sample count. Debian's ffmpeg 5.1 skips the priming but keeps the
    padding, so it returns the length rounded up to a multiple of 1024 samples.
    """
    raw = subprocess.run(
        [ffmpeg or ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:a", "-f", "f32le", "-ac", "1", "-"],
        check=True,
        capture_output=True,
    ).stdout
    return np.frombuffer(raw, dtype="<f4")


@dataclass(frozen=True)
class Loudness:
    integrated_lufs: float
    true_peak_dbtp: float


def loudness(path: Path, ffmpeg: str | None = None) -> Loudness:
    """EBU R128 integrated loudness and true peak (4x oversampled) of the decoded audio."""
    err = subprocess.run(
        [ffmpeg or checker_ffmpeg(), "-hide_banner", "-nostats", "-i", str(path), "-map", "0:a",
         "-af", "ebur128=peak=true:framelog=verbose", "-f", "null", "-"],
        check=True,
        capture_output=True,
        text=True,
    ).stderr
    summary = err[err.rindex("Summary:") :]
    integrated = re.search(r"I:\s+(\S+) LUFS", summary)
    peak = re.search(r"True peak:\s+Peak:\s+(\S+) dBFS", summary)
    assert integrated and peak, summary
    return Loudness(float(integrated.group(1)), float(peak.group(1)))
