"""--subtitles srt|vtt: one cue per sentence of the book, in its own words, on the M4B's timeline."""

import os
import re
from pathlib import Path

import pytest

from cli_run import epub2audio, story_epub
from epub2audio.store import SegmentStore
from m4b_probe import ffprobe, have_ffprobe

AAC_FRAME = 1024
TONE_RATE = 16000

CHAPTERS = [
    ("One", ["The morning was cold. Dr. Watson paid 3 pounds for a coat.", "Nobody spoke."]),
    ("Two", ["By noon the mist had gone. The boats came out.", "A bell rang twice."]),
]
# The book's words, not the spoken ones ("Doctor Watson paid three pounds").
ONE_CUES = ["One", "The morning was cold.", "Dr. Watson paid 3 pounds for a coat.", "Nobody spoke."]
TWO_CUES = ["Two", "By noon the mist had gone.", "The boats came out.", "A bell rang twice."]

SRT_TIME = r"(\d\d):(\d\d):(\d\d),(\d\d\d)"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))


def seconds(h, m, s, ms) -> float:
    return int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000


def parse_srt(text: str) -> list[tuple[int, float, float, str]]:
    cues = []
    for block in text.strip().split("\n\n"):
        number, timing, *lines = block.split("\n")
        found = re.fullmatch(f"{SRT_TIME} --> {SRT_TIME}", timing)
        assert found, timing
        cues.append((int(number), seconds(*found.groups()[:4]), seconds(*found.groups()[4:]), "\n".join(lines)))
    return cues


def expected_starts(m4b: Path, work: Path) -> list[tuple[float, float]]:
    """Each segment's (start, end) in seconds: the M4B's own chapter starts (ffprobe) plus the
    stored segments' sample counts and the planned pauses before it in its chapter."""
    starts = [float(c["start_time"]) for c in ffprobe(m4b)["chapters"]]
    store = SegmentStore(work)
    times = []
    for chapter, parts in enumerate(p for _, _, p in store.layout(TONE_RATE)):
        at = 0
        for key, pause in parts:
            samples = store.segment_row(key)["samples"]
            times.append((starts[chapter] + at / TONE_RATE, starts[chapter] + (at + samples) / TONE_RATE))
            at += samples + pause
    store.close()
    return times


@pytest.mark.skipif(not have_ffprobe(), reason="needs ffprobe (Debian's ffmpeg) as an independent checker")
def test_srt_cues_are_the_books_sentences_at_the_m4bs_segment_starts(tmp_path):
    book = story_epub(tmp_path, CHAPTERS)
    out, work = tmp_path / "story.m4b", tmp_path / "job"
    run = epub2audio(book, "-o", out, "--voice", "tone", "--no-verify", "--progress", "none",
                     "--work-dir", work, "--subtitles", "srt")
    assert run.code == 0, run.stderr
    cues = parse_srt((tmp_path / "story.srt").read_text(encoding="utf-8"))
    assert [c[3] for c in cues] == ONE_CUES + TWO_CUES
    assert [c[0] for c in cues] == list(range(1, 9))
    # one segment per sentence here, so each cue is one segment: within one AAC frame of it
    for (_, start, end, text), (want_start, want_end) in zip(cues, expected_starts(out, work), strict=True):
        assert abs(start - want_start) <= AAC_FRAME / TONE_RATE, text
        assert abs(end - want_end) <= AAC_FRAME / TONE_RATE, text
    # written atomically: nothing else beside the M4B
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job", "story.epub", "story.m4b", "story.srt"]


def test_vtt_marks_each_chapter_with_a_note_and_names_its_cues(tmp_path):
    book = story_epub(tmp_path, CHAPTERS)
    out = tmp_path / "story.m4b"
    run = epub2audio(book, "-o", out, "--voice", "tone", "--no-verify", "--progress", "none", "--subtitles", "vtt")
    assert run.code == 0, run.stderr
    text = (tmp_path / "story.vtt").read_text(encoding="utf-8")
    assert text.startswith("WEBVTT\n\nNOTE Chapter 1: One, starts 00:00:00.000\n\nc1-s1\n00:00:00.000 --> ")
    blocks = text.strip().split("\n\n")
    notes = [b for b in blocks if b.startswith("NOTE")]
    assert [n.split(",")[0] for n in notes] == ["NOTE Chapter 1: One", "NOTE Chapter 2: Two"]
    cues = [b.split("\n") for b in blocks[1:] if not b.startswith("NOTE")]
    assert [c[0] for c in cues] == ["c1-s1", "c1-s2", "c1-s3", "c1-s4", "c2-s1", "c2-s2", "c2-s3", "c2-s4"]
    assert [c[2] for c in cues] == ONE_CUES + TWO_CUES
    # the second chapter's note gives the time its first cue starts
    second = blocks.index(notes[1])
    assert notes[1].endswith(blocks[second + 1].split("\n")[1].split(" --> ")[0])


def test_srt_without_spoken_titles_marks_chapters_with_their_titles(tmp_path):
    book = story_epub(tmp_path, CHAPTERS)
    run = epub2audio(book, "-o", tmp_path / "story.m4b", "--voice", "tone", "--no-verify", "--progress", "none",
                     "--say-titles", "no", "--subtitles", "srt")
    assert run.code == 0, run.stderr
    cues = parse_srt((tmp_path / "story.srt").read_text(encoding="utf-8"))
    # the first sentence starts at the chapter's start, so the title is that cue's first line
    assert [c[3] for c in cues] == (["One\nThe morning was cold."] + ONE_CUES[2:]
                                    + ["Two\nBy noon the mist had gone."] + TWO_CUES[2:])


def test_config_key_writes_subtitles_and_a_bad_value_is_one_line(tmp_path):
    book = story_epub(tmp_path, CHAPTERS)
    config = Path(os.environ["EPUB2AUDIO_CONFIG"])
    config.write_text('subtitles = "vtt"\n', encoding="utf-8")
    run = epub2audio(book, "-o", tmp_path / "story.m4b", "--voice", "tone", "--no-verify", "--progress", "none")
    assert run.code == 0, run.stderr
    assert (tmp_path / "story.vtt").read_text(encoding="utf-8").startswith("WEBVTT\n")
    config.write_text('subtitles = "ass"\n', encoding="utf-8")
    run = epub2audio(book, "-o", tmp_path / "other.m4b", "--voice", "tone", "--no-verify", "--progress", "none")
    assert run.code == 2
    assert run.stderr == "epub2audio: error: setting subtitles must be one of srt, vtt, got 'ass'\n"
    assert not (tmp_path / "other.m4b").exists()
