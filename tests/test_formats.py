"""--format mp3 / opus: one file, chapters inside, the M4B's tags and cover, the M4B's loudness.

A few seconds of synthetic audio per format (one encode each, module-scoped), read back with
mutagen and with ffprobe (Debian's, an independent build: what Audiobookshelf reads). Each
chapter begins with a click after silence, so where the decoded audio has it shows where the
chapter really starts, not only where its mark says it does.
"""

from __future__ import annotations

import base64
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import m4b_probe as probe
from epub2audio.audiobook import AudioChapter, Tags, levels
from epub2audio.audiobook.m4b import write_m4b
from epub2audio.audiobook.mp3 import frame_samples, write_mp3
from epub2audio.audiobook.opus import chapter_clock, opus_rate, write_opus
from epub2audio.book import Cover
from test_m4b import make_cover, write_wav

SR = 22050
needs_ffprobe = pytest.mark.skipif(not probe.have_ffprobe(), reason="ffprobe (Debian ffmpeg) not installed")
TITLES = ["Chapter 1 — L’été; a=b", "Café = Crème #2", "日本語の章"]
LENGTHS = [SR * 2 + 123, SR * 3 - 77, SR * 2]
PAUSE = 1000  # samples of silence after each chapter's WAV
TAGS = Tags(title="The Little Boat", authors=["Ann Author", "Bo Writer"], narrator="joe", date="1911",
            description="A tale of boats.", language="en", publisher="Gutenberg", isbn="9780306406157",
            series="Sea Tales", series_index="2", asin="B00TEST123")
WRITERS = {"m4b": write_m4b, "mp3": write_mp3, "opus": write_opus}


def chapter_audio(n: int, length: int) -> np.ndarray:
    """50 ms of silence, a 5 ms burst at 1 kHz, then a quiet tone: the burst marks the chapter's start."""
    x = np.zeros(length)
    x[1102:1212] = np.round(20000 * np.sin(2 * np.pi * 1000 * np.arange(110) / SR + np.pi / 2))
    t = np.arange(length - 4000)
    x[3000:-1000] = np.round(3000 * np.sin(2 * np.pi * (200 + 100 * n) * t / SR))
    return x


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    folder = tmp_path_factory.mktemp("formats")
    cover = Cover(make_cover(folder / "cover.jpg", ".jpg"), "image/jpeg")
    chapters = [AudioChapter(title, [write_wav(folder / f"c{i}.wav", chapter_audio(i, n)), PAUSE])
                for i, (title, n) in enumerate(zip(TITLES, LENGTHS))]
    return {name: writer(folder / f"book.{name}", chapters, TAGS, cover, SR) for name, writer in WRITERS.items()}


STARTS = [0, LENGTHS[0] + PAUSE, LENGTHS[0] + LENGTHS[1] + 2 * PAUSE]
TOTAL = sum(LENGTHS) + 3 * PAUSE


def decoded(path: Path, rate: int = SR) -> np.ndarray:
    pcm = subprocess.run([probe.checker_ffmpeg(), "-v", "error", "-i", str(path), "-map", "0:a", "-f", "s16le",
                          "-ac", "1", "-ar", str(rate), "-"], check=True, capture_output=True).stdout
    return np.frombuffer(pcm, dtype="<i2").astype(np.float64)


def test_the_same_marks_and_gain_for_every_format(books):
    assert [b.chapter_starts for b in books.values()] == [STARTS] * 3
    assert len({b.gain_db for b in books.values()}) == 1
    assert {b.duration_samples for b in books.values()} == {TOTAL}


@needs_ffprobe
@pytest.mark.parametrize("fmt", ["mp3", "opus"])
def test_ffprobe_reads_the_chapters_back_exactly(books, fmt):
    info = probe.ffprobe(books[fmt].path)
    chapters = info["chapters"]
    assert [c["tags"]["title"] for c in chapters] == TITLES
    starts = [Fraction(c["start_time"]) for c in chapters]
    # MP3's CHAP and the Vorbis comment both hold milliseconds
    assert [round(s * 1000) for s in starts] == [round(s * 1000 / SR) for s in STARTS]
    codec = {"mp3": "mp3", "opus": "opus"}[fmt]
    assert info["streams"][0]["codec_name"] == codec and info["streams"][0]["channels"] == 1


@pytest.mark.parametrize("fmt", ["mp3", "opus"])
def test_the_audio_decodes_whole_and_each_chapter_starts_within_one_frame_of_its_mark(books, fmt):
    x = decoded(books[fmt].path)
    frame = frame_samples(SR) if fmt == "mp3" else round(0.020 * SR)
    assert abs(len(x) - TOTAL) <= frame, (len(x), TOTAL)
    for start in STARTS:  # the click is 1102 samples into each chapter
        window = np.abs(x[start:start + 2500])
        onset = int(np.argmax(window > 6000))
        assert abs(onset - 1102) <= frame, (fmt, start, onset)


def test_mp3_has_id3v24_chap_and_ctoc_frames_with_titles_tags_and_cover(books):
    from mutagen.id3 import ID3

    id3 = ID3(books["mp3"].path)
    assert id3.version[:2] == (2, 4)
    toc = id3.getall("CTOC")
    assert len(toc) == 1 and toc[0].flags & 0x03 == 0x03  # top level, ordered
    chaps = {c.element_id: c for c in id3.getall("CHAP")}
    assert list(toc[0].child_element_ids) == list(chaps)
    assert [str(chaps[e].sub_frames["TIT2"]) for e in toc[0].child_element_ids] == TITLES
    assert [chaps[e].start_time for e in toc[0].child_element_ids] == [round(s * 1000 / SR) for s in STARTS]
    assert chaps[toc[0].child_element_ids[-1]].end_time == round(TOTAL * 1000 / SR)
    assert str(id3["TIT2"]) == str(id3["TALB"]) == "The Little Boat"
    assert str(id3["TPE1"]) == str(id3["TPE2"]) == "Ann Author, Bo Writer"
    assert str(id3["TCOM"]) == "joe" and str(id3["TCON"]) == "Audiobook" and str(id3["TDRC"]) == "1911"
    apic = id3.getall("APIC")
    assert len(apic) == 1 and apic[0].mime == "image/jpeg" and apic[0].type == 3 and apic[0].data.startswith(b"\xff\xd8")


def test_opus_has_vorbis_chapters_from_001_and_a_metadata_block_picture(books):
    from mutagen.flac import Picture
    from mutagen.oggopus import OggOpus

    ogg = OggOpus(books["opus"].path)
    tags = {k.upper(): v for k, v in ogg.tags.items()}
    assert [tags[f"CHAPTER{n:03d}NAME"][0] for n in (1, 2, 3)] == TITLES
    assert [tags[f"CHAPTER{n:03d}"][0] for n in (1, 2, 3)] == [chapter_clock(s / SR) for s in STARTS]
    assert "CHAPTER000" not in tags and "CHAPTER004" not in tags
    assert chapter_clock(3723.4567) == "01:02:03.457"
    picture = Picture(base64.b64decode(tags["METADATA_BLOCK_PICTURE"][0]))
    assert picture.type == 3 and picture.mime == "image/jpeg" and picture.data.startswith(b"\xff\xd8")
    assert tags["TITLE"] == ["The Little Boat"] and tags["COMPOSER"] == ["joe"] and tags["ARTIST"] == ["Ann Author, Bo Writer"]
    assert opus_rate(22050) == 24000 and opus_rate(16000) == 16000 and opus_rate(24000) == 24000


# What Audiobookshelf's scanner reads, through ffprobe, in each format.
SHELF = {"title": "The Little Boat", "album": "The Little Boat", "artist": "Ann Author, Bo Writer",
         "composer": "joe", "date": "1911", "description": "A tale of boats.", "series": "Sea Tales",
         "series-part": "2", "grouping": "Sea Tales", "isbn": "9780306406157", "asin": "B00TEST123",
         "language": "en", "publisher": "Gutenberg", "genre": "Audiobook"}


@needs_ffprobe
@pytest.mark.parametrize("fmt", ["m4b", "mp3", "opus"])
def test_audiobookshelf_tags_through_ffprobe(books, fmt):
    info = probe.ffprobe(books[fmt].path)
    tags = dict(info["streams"][0].get("tags", {}))  # Ogg keeps its comments on the stream
    tags.update(info["format"].get("tags", {}))
    tags = {k.lower(): v for k, v in tags.items()}
    if fmt == "opus":  # ffmpeg shows a Vorbis DESCRIPTION as comment, which Audiobookshelf falls back to
        tags["description"] = tags.pop("comment", None)
    assert {k: tags.get(k) for k in SHELF} == SHELF


def test_the_m4b_also_names_its_series_as_a_movement(books):
    """tone's movementName / movement (Audiobookshelf's mvnm / mvin), beside series and grouping."""
    from mutagen.mp4 import MP4

    tags = MP4(books["m4b"].path).tags
    assert (tags["©mvn"], tags["©mvi"], tags["©grp"]) == (["Sea Tales"], [2], ["Sea Tales"])


@pytest.mark.parametrize("fmt", ["mp3", "opus"])
def test_the_same_loudness_as_the_m4b(books, fmt):
    def lufs(path):
        run = subprocess.run([probe.checker_ffmpeg(), "-hide_banner", "-nostats", "-i", str(path), "-map", "0:a",
                              "-af", "ebur128", "-f", "null", "-"], capture_output=True, text=True)
        return float(run.stderr.rsplit("I:", 1)[1].split("LUFS")[0])

    assert abs(lufs(books[fmt].path) - lufs(books["m4b"].path)) < 0.5


@pytest.mark.parametrize("fmt", ["mp3", "opus"])
def test_a_failed_encode_leaves_no_file(tmp_path, fmt, monkeypatch):
    wav = write_wav(tmp_path / "c.wav", chapter_audio(0, SR))
    out = tmp_path / f"book.{fmt}"
    out.write_bytes(b"old")
    monkeypatch.setattr(levels, "filter_chain", lambda gain: "nosuchfilter")
    with pytest.raises(Exception, match="ffmpeg failed"):
        WRITERS[fmt](out, [AudioChapter("One", [wav])], TAGS, None, SR)
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["book." + fmt, "c.wav"]


# ------------------------------------------------------------------------------------------
# The command: --format, verify, resume and regen


@pytest.mark.parametrize("fmt", ["mp3", "opus"])
def test_format_converts_verifies_resumes_and_regens_the_same_bytes(tmp_path, fmt, monkeypatch):
    import hashlib

    from cli_run import epub2audio, story_epub

    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))
    book = story_epub(tmp_path, [("One", ["The morning was cold.", "Nobody spoke."]), ("Two", ["A bell rang."])])
    out, work = tmp_path / f"story.{fmt}", tmp_path / "job"
    args = [book, "--format", fmt, "--voice", "tone", "--progress", "json", "--work-dir", work, "--subtitles", "srt"]
    run = epub2audio(*args)  # -o left out: story.<fmt> beside the book
    assert run.code == 0, run.stderr
    (verdict,) = run.events("verify")
    assert verdict["passed"] and verdict["problems"] == [], verdict
    assert not (tmp_path / "story.m4b").exists() and (tmp_path / "story.srt").exists()
    first = hashlib.sha256(out.read_bytes()).hexdigest()
    out.unlink()
    run = epub2audio("regen", out, "--segment", "1.2", "--work-dir", work)
    assert run.code == 0, run.stderr
    assert hashlib.sha256(out.read_bytes()).hexdigest() == first
    run = epub2audio(*args)  # resumed: nothing to render, the same file
    assert run.code == 0, run.stderr
    assert run.events("plan")[0]["to_render"] == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() == first
    run = epub2audio("verify", out, "--work-dir", work, "--no-asr")
    assert run.code == 0, run.stdout + run.stderr


def test_the_output_suffix_must_match_the_format(tmp_path, monkeypatch):
    from cli_run import epub2audio, story_epub

    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))
    book = story_epub(tmp_path, [("One", ["The morning was cold."])])
    run = epub2audio(book, "-o", tmp_path / "story.m4b", "--format", "opus", "--voice", "tone", "--progress", "none")
    assert run.code == 2 and run.stderr.strip().endswith("the output must be a .opus file (--format opus)")
    (tmp_path / "config.toml").write_text('format = "flac"\n')
    run = epub2audio(book, "--voice", "tone", "--progress", "none")
    assert run.code == 2 and "setting format must be one of m4b, mp3, opus, got 'flac'" in run.stderr
    assert len(run.stderr.splitlines()) == 1 and not list(tmp_path.glob("story.*[!b]"))
