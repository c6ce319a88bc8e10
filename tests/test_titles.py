"""Chapter titles reach both chapter formats of the M4B exactly: the QuickTime text track (read
here by ffprobe) and the Nero chpl list (read by mutagen), which holds at most 255 bytes a title."""

import wave
from pathlib import Path

import numpy as np
import pytest

import m4b_probe as probe
from epub2audio.audiobook.m4b import AudioChapter, Tags, _find_box, write_m4b
from epub2audio.audiobook.verify import format_report, nero_title, verify_m4b

RATE = 22050
HARD_TITLES = [
    "Ends in a backslash\\", "Two\nlines", "a=b", "semi;colon", "#hash", "-leading dash", "even\\\\", "\\",
    "all =;#\\\n\\", "; starts like a comment", "[CHAPTER]",
]
LONG_TITLES = ["x" * 254 + "é and more", "日" * 100, "y" * 300, "Short"]


def tone(path: Path) -> Path:
    pcm = (0.3 * np.sin(2 * np.pi * 220 * np.arange(RATE // 5) / RATE) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(RATE)
        w.writeframes(pcm.tobytes())
    return path


def m4b(folder: Path, titles: list[str], name: str = "t.m4b") -> Path:
    tags = Tags(title="Book ends in \\", authors=["A = B"], narrator="N")
    wav = tone(folder / "tone.wav")
    return write_m4b(folder / name, [AudioChapter(t, [wav]) for t in titles], tags, None, RATE).path


@pytest.fixture(scope="module")
def hard(tmp_path_factory) -> Path:
    return m4b(tmp_path_factory.mktemp("titles"), HARD_TITLES)


def test_hard_titles_reach_both_formats_exactly(hard):
    probed = probe.ffprobe(hard)
    assert [c.title for c in probe.chapters(probed)] == HARD_TITLES
    assert [t for _, t in probe.nero_chapters(hard)] == HARD_TITLES
    assert probe.format_tags(probed)["title"] == "Book ends in \\"  # and the next tag is not swallowed
    assert probe.format_tags(probed)["artist"] == "A = B"


def test_verify_passes_the_hard_titles(hard):
    report = verify_m4b(hard, None, asr=False)
    assert report.passed, format_report(report)
    assert [c.title for c in report.chapters] == HARD_TITLES


def test_long_titles_nero_holds_255_bytes_cut_at_a_character(tmp_path):
    path = m4b(tmp_path, LONG_TITLES)
    assert [c.title for c in probe.chapters(probe.ffprobe(path))] == LONG_TITLES
    nero = [t for _, t in probe.nero_chapters(path)]  # mutagen reads it at all: no cut character
    assert nero == ["x" * 254, "日" * 85, "y" * 255, "Short"]
    assert nero == [nero_title(t) for t in LONG_TITLES]
    report = verify_m4b(path, None, asr=False)
    assert report.passed, format_report(report)


def test_verify_fails_a_real_nero_mismatch(tmp_path):
    path = m4b(tmp_path, ["First", "Second"])
    with open(path, "r+b") as f:  # change one letter in the chpl list only
        start, size = _find_box(f, [b"moov", b"udta", b"chpl"])
        f.seek(start)
        box = f.read(size)
        assert box.count(b"\x05First") == 1
        f.seek(start)
        f.write(box.replace(b"\x05First", b"\x05Firsx"))
    assert [t for _, t in probe.nero_chapters(path)] == ["Firsx", "Second"]
    report = verify_m4b(path, None, asr=False)
    assert not report.passed
    assert [p.message for p in report.problems if p.check == "container"] == [
        "chapter 1: Nero chpl says 'Firsx' at 0.000 s, QuickTime 'First' at 0.000 s"]
