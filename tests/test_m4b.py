"""M4B assembly: chapters, tags, cover, levels, exact length, and never a partial file.

A few seconds of synthetic audio at 22.05 kHz, encoded once per module (plus a few small extra
encodes), read back with ffprobe (Debian 5.1, an independent build), mutagen and a box walker.
"""

from __future__ import annotations

import os
import stat
import subprocess
import wave
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import m4b_probe as probe
from epub2audio.audiobook import (
    AudioChapter,
    FFmpegNotFound,
    M4BError,
    Tags,
    ffmpeg_exe,
    tags_for_book,
    write_m4b,
)
from epub2audio.audiobook import levels
from epub2audio.audiobook import m4b as m4b_module
from epub2audio.book import Book, Cover

SR = 22050

needs_ffprobe = pytest.mark.skipif(not probe.have_ffprobe(), reason="ffprobe (Debian ffmpeg) not installed")

TITLES = [
    "Chapter 1 — L’été; a=b #c \\ d",
    "Café = Crème #2",
    "日本語の章 ; last",
]
LONG_DESCRIPTION = "A tale of boats; sails = wind # 1 \\ end.\nSecond paragraph. " + "More words. " * 30


# ------------------------------------------------------------------------------------------
# Inputs


def write_wav(path: Path, samples: np.ndarray, rate: int = SR) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())
    return path


def tone(frames: int, freq: float, amplitude: float) -> np.ndarray:
    t = np.arange(frames) / SR
    return np.round(amplitude * 32767 * np.sin(2 * np.pi * freq * t))


def noise(frames: int, amplitude: float, seed: int) -> np.ndarray:
    return np.round(np.random.default_rng(seed).uniform(-amplitude, amplitude, frames) * 32767)


def loud_vowel(frames: int) -> np.ndarray:
    """A speech-like vowel (150 Hz + harmonics, syllable-rate envelope) peaking exactly at 32767.

    Without the limiter this measures about -0.3 dBTP after AAC; see test_limiter_is_what_keeps_peaks_down.
    """
    t = np.arange(frames) / SR
    phases = np.random.default_rng(7).uniform(0, 2 * np.pi, 20)
    x = sum(np.sin(2 * np.pi * 150 * k * t + phases[k - 1]) / k for k in range(1, 21))
    x = x * (0.55 + 0.45 * np.sin(2 * np.pi * 3 * t))
    return np.round(x / np.abs(x).max() * 32767)


def make_cover(path: Path, codec_suffix: str) -> bytes:
    subprocess.run(
        [ffmpeg_exe(), "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=orange:s=48x48", "-frames:v", "1", str(path)],
        check=True,
    )
    assert path.suffix == codec_suffix
    return path.read_bytes()


def book_tags() -> Tags:
    return Tags(
        title="The Little Boat; = # \\ été",
        authors=["Ann Author", "Bo Writer"],
        narrator="Joe (Piper)",
        date="2019",
        description=LONG_DESCRIPTION,
        language="en-GB",
        publisher="Harbor Press",
        isbn="9780306406157",
        series="Sea Tales",
        series_index="2",
    )


class Book3:
    """The module's book: 3 chapters of tones, noise, silence and a full-scale vowel."""

    def __init__(self, root: Path):
        self.root = root
        src = root / "src"
        src.mkdir()
        self.noise_frames = noise(11025, 0.1, seed=1)
        a = write_wav(src / "a.wav", tone(15437, 440, 0.3))
        n = write_wav(src / "n.wav", self.noise_frames)
        loud = write_wav(src / "loud.wav", loud_vowel(13230))
        b = write_wav(src / "b.wav", tone(19847, 660, 0.25))
        self.loud_wav = loud
        self.chapters = [
            AudioChapter(TITLES[0], [a, 2205, n]),
            AudioChapter(TITLES[1], [1103, loud, 1103]),
            AudioChapter(TITLES[2], [b]),
        ]
        self.lengths = [15437 + 2205 + 11025, 1103 + 13230 + 1103, 19847]
        self.starts = [0, self.lengths[0], self.lengths[0] + self.lengths[1]]
        self.total = sum(self.lengths)
        self.noise_offset = 15437 + 2205  # where n.wav starts in the book
        self.cover_bytes = make_cover(src / "cover.jpg", ".jpg")
        self.tags = book_tags()
        self.out_dir = root / "out"
        self.out_dir.mkdir()
        self.path = self.out_dir / "book.m4b"
        self.result = write_m4b(self.path, self.chapters, self.tags, Cover(self.cover_bytes, "image/jpeg"), SR)


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Book3:
    return Book3(tmp_path_factory.mktemp("m4b"))


@pytest.fixture(scope="module")
def probed(book) -> dict:
    if not probe.have_ffprobe():
        pytest.skip("ffprobe (Debian ffmpeg) not installed")
    return probe.ffprobe(book.path)


# ------------------------------------------------------------------------------------------
# Layout, length, chapters


def test_result_reports_sample_exact_layout(book):
    assert book.result.path == book.path
    assert book.result.duration_samples == book.total
    assert book.result.chapter_starts == book.starts
    assert sorted(p.name for p in book.out_dir.iterdir()) == ["book.m4b"]  # no temp file left
    assert book.path.stat().st_mode & stat.S_IRGRP  # umask-based mode, not mkstemp's 0600


def test_input_fixture_really_peaks_at_full_scale(book):
    with wave.open(str(book.loud_wav)) as w:
        samples = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    assert np.abs(samples.astype(int)).max() == 32767


@needs_ffprobe
def test_container_is_faststart_m4b_with_mono_aac_lc(book, probed):
    major, compatible = probe.ftyp_brands(book.path)
    assert major == "M4B "
    assert "isom" in compatible
    boxes = probe.top_level_boxes(book.path)
    assert boxes.index("moov") < boxes.index("mdat")
    (audio,) = probe.audio_streams(probed)
    assert (audio["codec_name"], audio["profile"]) == ("aac", "LC")
    assert (int(audio["sample_rate"]), audio["channels"]) == (SR, 1)
    assert 40_000 < int(audio["bit_rate"]) < 90_000  # 64k target


@needs_ffprobe
def test_duration_is_exactly_the_input_sample_count(book, probed):
    # The container's duration (mdhd/elst, timescale = sample rate) is exact, not frame-rounded.
    assert probe.audio_duration_samples(probed) == book.total
    assert float(probed["format"]["duration"]) == pytest.approx(book.total / SR, abs=1e-6)


def test_decoded_audio_has_exact_length_and_no_delay(book):
    decoded = probe.decode_pcm(book.path)  # ffmpeg 9 applies the edit list exactly
    assert len(decoded) == book.total
    # The noise part must come out at the same sample offset it went in (alimiter without
    # latency=true shifts everything by 110 samples), with only the book's gain (it stays under
    # the limiter's ceiling).
    ref = book.noise_frames[2000:8000] / 32768
    lags = range(-300, 301)
    start = book.noise_offset + 2000
    scores = [np.dot(ref, decoded[start + lag : start + lag + len(ref)]) for lag in lags]
    best = lags[int(np.argmax(scores))]
    assert best == 0
    gain = max(scores) / np.dot(ref, ref)
    assert gain == pytest.approx(10 ** (book.result.gain_db / 20), rel=0.05)


@needs_ffprobe
def test_chapters_as_ffprobe_sees_them(book, probed):
    chapters = probe.chapters(probed)
    assert [c.title for c in chapters] == TITLES
    assert all(c.time_base == Fraction(1, SR) for c in chapters)
    assert [c.start for c in chapters] == book.starts  # exact samples, not ms
    assert [c.end for c in chapters] == [*book.starts[1:], book.total]
    assert all(c.start < c.end for c in chapters)
    assert chapters[-1].end == probe.audio_duration_samples(probed)
    for chapter, start in zip(chapters, book.starts):
        assert chapter.start_seconds == pytest.approx(start / SR, abs=0.0005)


@needs_ffprobe
def test_both_chapter_formats_present(book, probed):
    # QuickTime chapter track (what Apple reads): one text sample per chapter.
    (qt,) = probe.qt_chapter_streams(probed)
    assert int(qt["nb_frames"]) == len(TITLES)
    # Nero chpl (what mutagen and many Android players read), 100 ns resolution.
    nero = probe.nero_chapters(book.path)
    assert nero is not None
    assert [title for _, title in nero] == TITLES
    assert [start for start, _ in nero] == pytest.approx([s / SR for s in book.starts], abs=1e-6)


# ------------------------------------------------------------------------------------------
# Tags and cover


def test_itunes_tags(book):
    m = probe.mp4(book.path)
    t = m.tags
    assert t["©nam"] == [book.tags.title]
    assert t["©alb"] == [book.tags.title]
    assert t["©ART"] == ["Ann Author, Bo Writer"]
    assert t["aART"] == ["Ann Author, Bo Writer"]
    assert t["©wrt"] == ["Joe (Piper)"]
    assert t["©gen"] == ["Audiobook"]
    assert t["©day"] == ["2019"]
    assert t["desc"] == [LONG_DESCRIPTION.strip()]
    assert t["ldes"] == [LONG_DESCRIPTION.strip()]  # long: also the long-description atom
    assert t["stik"] == [2]
    # use_metadata_tags would have replaced these with numeric mdta keys
    assert not [k for k in t.keys() if k.isdigit()]


def test_freeform_tags_and_grouping(book):
    m = probe.mp4(book.path)
    assert probe.freeform(m, "series") == "Sea Tales"
    assert probe.freeform(m, "series-part") == "2"
    assert probe.freeform(m, "ISBN") == "9780306406157"
    assert probe.freeform(m, "language") == "en-GB"
    assert probe.freeform(m, "publisher") == "Harbor Press"
    assert m.tags["©grp"] == ["Sea Tales"]


@needs_ffprobe
def test_tags_as_audiobookshelf_sees_them(probed):
    tags = probe.format_tags(probed)
    expected = {
        "title": "The Little Boat; = # \\ été",
        "album": "The Little Boat; = # \\ été",
        "artist": "Ann Author, Bo Writer",
        "album_artist": "Ann Author, Bo Writer",
        "composer": "Joe (Piper)",
        "genre": "Audiobook",
        "date": "2019",
        "media_type": "2",
        "series": "Sea Tales",
        "series-part": "2",
        "ISBN": "9780306406157",
        "publisher": "Harbor Press",
        "language": "en-GB",
    }
    assert {k: tags.get(k) for k in expected} == expected
    assert tags["description"] == LONG_DESCRIPTION.strip()


def test_cover_bytes_round_trip(book):
    (covr,) = probe.mp4(book.path).tags["covr"]
    assert covr.imageformat == covr.FORMAT_JPEG
    assert bytes(covr) == book.cover_bytes


@needs_ffprobe
def test_cover_is_an_attached_picture(probed):
    (cover,) = probe.cover_streams(probed)
    assert cover["codec_name"] == "mjpeg"


def test_png_cover_short_description_and_no_freeform(tmp_path):
    wav = write_wav(tmp_path / "a.wav", tone(4000, 440, 0.2))
    png = make_cover(tmp_path / "cover.png", ".png")
    tags = Tags(title="Short", authors=["A"], narrator="N", description="Brief.")
    out = tmp_path / "short.m4b"
    write_m4b(out, [AudioChapter("Only", [wav])], tags, Cover(png, "image/png"), SR)
    t = probe.mp4(out).tags
    (covr,) = t["covr"]
    assert covr.imageformat == covr.FORMAT_PNG and bytes(covr) == png
    assert t["desc"] == ["Brief."]
    assert "ldes" not in t
    assert not [k for k in t.keys() if k.startswith("----")]


# ------------------------------------------------------------------------------------------
# Levels


def assert_on_target(path: Path) -> probe.Loudness:
    level = probe.loudness(path)
    print(f"decoded M4B: {level.integrated_lufs} LUFS, {level.true_peak_dbtp} dBTP")
    assert -20.0 <= level.integrated_lufs <= -18.0
    assert level.true_peak_dbtp <= -3.0
    return level


@needs_ffprobe
def test_book_is_at_the_target_loudness_under_the_peak_limit(book):
    assert_on_target(book.path)


def speech_like(seconds: float, peak: float, clicks: bool = False) -> np.ndarray:
    """Vowels with syllable-rate envelope and short pauses; with clicks, a full-scale plosive-like
    burst every 0.4 s puts the peaks ~25 dB above the loudness, where the limiter must work hard."""
    frames = int(seconds * SR)
    x = loud_vowel(frames) / 32767
    t = np.arange(frames) / SR
    x = x * (np.sin(2 * np.pi * 0.7 * t) > -0.6)  # pauses between phrases
    if clicks:
        x = x * 0.06
        burst = np.random.default_rng(3).uniform(-1, 1, 60) * np.hanning(60)
        for start in range(0, frames - 60, int(0.4 * SR)):
            x[start : start + 60] += burst
    return np.round(x / np.abs(x).max() * peak * 32767)


@needs_ffprobe
@pytest.mark.parametrize(
    "name, peak, clicks",
    [("quiet", 0.02, False), ("loud", 1.0, False), ("peaky", 1.0, True)],
)
def test_quiet_loud_and_peaky_books_all_land_on_target(tmp_path, name, peak, clicks):
    wav = write_wav(tmp_path / f"{name}.wav", speech_like(12, peak, clicks))
    out = tmp_path / f"{name}.m4b"
    result = write_m4b(out, [AudioChapter("One", [wav, SR // 2])], Tags("t", ["a"], "n"), None, SR)
    print(f"{name}: gain {result.gain_db} dB")
    assert_on_target(out)


@needs_ffprobe
def test_limiter_is_what_keeps_peaks_down(tmp_path, monkeypatch):
    # Control: at the target loudness the peaky book goes far over -3 dBTP without the limiter,
    # so the test above can fail.
    monkeypatch.setattr(levels, "LIMITER_FILTER", "anull")
    wav = write_wav(tmp_path / "peaky.wav", speech_like(12, 1.0, clicks=True))
    out = tmp_path / "unlimited.m4b"
    write_m4b(out, [AudioChapter("One", [wav])], Tags("t", ["a"], "n"), None, SR)
    level = probe.loudness(out)
    assert -20.0 <= level.integrated_lufs <= -18.0
    assert level.true_peak_dbtp > 0.0


def test_gain_stage_does_not_clip_before_the_limiter(tmp_path):
    # +12 dB on a full-scale vowel: in double precision the peaks reach 4x full scale for the
    # limiter to bring down, instead of being flattened at 1.0 on the way in.
    wav = write_wav(tmp_path / "loud.wav", loud_vowel(4410))
    raw = subprocess.run(
        [ffmpeg_exe(), "-v", "error", "-i", str(wav), "-af", levels.gain_stage(12.0), "-f", "f64le", "-"],
        check=True, capture_output=True,
    ).stdout
    assert np.abs(np.frombuffer(raw, "<f8")).max() == pytest.approx(10 ** (12 / 20), rel=1e-3)


def fake_measure(answers: dict):
    calls = []

    def measure(chains):
        calls.append(dict(chains))
        return {name: answers[name] for name in chains}

    return measure, calls


def test_gain_when_the_limiter_stays_idle():
    # A sine: 3 dB from loudness to peak, nothing for the limiter to do; one pass is enough.
    measure, calls = fake_measure({"raw": levels.Level(-30.0, -27.0)})
    assert levels.book_gain(measure) == 11.0
    assert calls == [{"raw": "anull"}]


def limited_curve(*lufs: float) -> dict:
    return {f"g{i}": levels.Level(value, levels.CEILING_DBFS) for i, value in enumerate(lufs)}


def test_gain_makes_up_what_the_limiter_takes():
    # Piper-like: the plain +4.6 dB lands at -20.6 through the limiter, +7.6 dB at -19.0.
    measure, calls = fake_measure({"raw": levels.Level(-23.6, -0.8), **limited_curve(-20.6, -19.0, -17.6, -16.3, -15.0)})
    assert levels.book_gain(measure) == 7.6
    assert calls[1] == {f"g{i}": levels.filter_chain(4.6 + offset) for i, offset in enumerate(levels.PROBE_OFFSETS_DB)}
    # Between measured points the gain is interpolated: -19 lies a quarter of the way from +6 to +9.
    measure, _ = fake_measure({"raw": levels.Level(-23.0, 0.0), **limited_curve(-24.0, -22.0, -19.5, -17.5, -16.0)})
    assert levels.book_gain(measure) == 4.0 + 6.0 + 0.75


def test_gain_stops_short_of_crushing_and_ignores_silence():
    measure, _ = fake_measure({"raw": levels.Level(-23.0, 0.0), **limited_curve(-22.0, -21.5, -21.0, -20.5, -20.2)})
    assert levels.book_gain(measure) == 4.0 + levels.PROBE_OFFSETS_DB[-1]
    measure, calls = fake_measure({"raw": levels.Level(-70.0, -80.0)})
    assert levels.book_gain(measure) == 0.0 and len(calls) == 1


def test_same_input_gives_identical_bytes(book, tmp_path):
    again = tmp_path / "again.m4b"
    write_m4b(again, book.chapters, book.tags, Cover(book.cover_bytes, "image/jpeg"), SR)
    assert again.read_bytes() == book.path.read_bytes()


# ------------------------------------------------------------------------------------------
# More than 255 chapters


@needs_ffprobe
def test_300_chapters_qt_keeps_all_chpl_keeps_255(tmp_path):
    rate = 8000
    chapters = [AudioChapter(f"Part {i}", [400]) for i in range(300)]  # 50 ms of silence each
    out = tmp_path / "many.m4b"
    result = write_m4b(out, chapters, Tags("Many", ["A"], "N"), None, rate)
    probed = probe.ffprobe(out)
    assert len(probe.chapters(probed)) == 300
    assert int(probe.qt_chapter_streams(probed)[0]["nb_frames"]) == 300
    assert probe.chapters(probed)[-1].end == result.duration_samples == 300 * 400
    nero = probe.nero_chapters(out)
    assert len(nero) == 255 and nero[-1][1] == "Part 254"  # ffmpeg's chpl writer stops at 255


# ------------------------------------------------------------------------------------------
# Failures leave nothing behind


@pytest.fixture
def dest(tmp_path) -> Path:
    """A destination that already holds an older book, which a failed run must not touch."""
    out = tmp_path / "out"
    out.mkdir()
    path = out / "book.m4b"
    path.write_bytes(b"previous book")
    return path


def assert_untouched(dest: Path) -> None:
    assert dest.read_bytes() == b"previous book"
    assert [p.name for p in dest.parent.iterdir()] == ["book.m4b"]


def test_missing_wav_part(dest, tmp_path):
    chapters = [AudioChapter("One", [tmp_path / "nope.wav"])]
    with pytest.raises(M4BError, match="nope.wav"):
        write_m4b(dest, chapters, book_tags(), None, SR)
    assert_untouched(dest)


def test_wrong_wav_format_is_refused(dest, tmp_path):
    wav = write_wav(tmp_path / "fast.wav", tone(2000, 440, 0.2), rate=24000)
    with pytest.raises(M4BError, match="24000 Hz"):
        write_m4b(dest, [AudioChapter("One", [wav])], book_tags(), None, SR)
    assert_untouched(dest)


def test_truncated_wav_is_detected(dest, tmp_path):
    wav = write_wav(tmp_path / "cut.wav", tone(20000, 440, 0.2))
    os.truncate(wav, wav.stat().st_size - 10000)  # header still promises 20000 frames
    with pytest.raises(M4BError, match="delivered"):
        write_m4b(dest, [AudioChapter("One", [wav])], book_tags(), None, SR)
    assert_untouched(dest)


def fake_ffmpeg(tmp_path: Path, monkeypatch) -> None:
    """A stand-in ffmpeg that reads a little, writes junk to its output, complains and dies."""
    fake = tmp_path / "fake-ffmpeg"
    fake.write_text(
        '#!/bin/sh\nfor last; do :; done\nhead -c 50000 >/dev/null\nprintf junk > "$last"\n'
        'echo "simulated ffmpeg crash" >&2\nexit 3\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("EPUB2AUDIO_FFMPEG", str(fake))


def test_encoder_crash_reports_its_stderr(dest, tmp_path, monkeypatch):
    fake_ffmpeg(tmp_path, monkeypatch)
    monkeypatch.setattr(levels, "book_gain", lambda measure: 0.0)  # the fake is the encoder, not the meter
    chapters = [AudioChapter("One", [SR * 10])]  # 441 kB of silence: more than the pipe holds
    with pytest.raises(M4BError, match=r"(?s)exit code 3\) while encoding the M4B.*simulated ffmpeg crash"):
        write_m4b(dest, chapters, book_tags(), None, SR)
    assert_untouched(dest)


def test_loudness_measurement_crash_reports_its_stderr(dest, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the fake writes its junk to the last argument, "-" here
    fake_ffmpeg(tmp_path, monkeypatch)
    chapters = [AudioChapter("One", [SR * 10])]
    with pytest.raises(M4BError, match=r"(?s)exit code 3\) while measuring the loudness.*simulated ffmpeg crash"):
        write_m4b(dest, chapters, book_tags(), None, SR)
    assert_untouched(dest)


class _Recorder:
    """Wraps subprocess.Popen in the m4b module so a test can reach the ffmpeg it started."""

    def __init__(self, monkeypatch):
        self.procs = []
        real = subprocess.Popen

        def popen(*args, **kwargs):
            proc = real(*args, **kwargs)
            self.procs.append(proc)
            return proc

        monkeypatch.setattr(m4b_module.subprocess, "Popen", popen)


def _interrupting_chunks(monkeypatch, action, in_pass):
    """Make the `in_pass`-th stream of the PCM (0: the loudness measurement; for silence, which
    needs no second measurement, 1: the encode) run `action` after its first chunk."""
    real = m4b_module._pcm_chunks
    passes = []

    def chunks(*args):
        passes.append(args)
        for i, chunk in enumerate(real(*args)):
            if i == 1 and len(passes) - 1 == in_pass:
                action()
            yield chunk

    monkeypatch.setattr(m4b_module, "_pcm_chunks", chunks)


@pytest.mark.parametrize("in_pass, doing", [(0, "measuring the loudness"), (1, "encoding the M4B")])
def test_ffmpeg_killed_midway(dest, monkeypatch, in_pass, doing):
    rec = _Recorder(monkeypatch)
    _interrupting_chunks(monkeypatch, lambda: (rec.procs[-1].kill(), rec.procs[-1].wait()), in_pass)
    with pytest.raises(M4BError, match=f"ffmpeg failed .* while {doing}"):
        write_m4b(dest, [AudioChapter("One", [SR * 10])], book_tags(), None, SR)
    assert len(rec.procs) == in_pass + 1
    assert_untouched(dest)


@pytest.mark.parametrize("in_pass", [0, 1])
def test_keyboard_interrupt_midway(dest, monkeypatch, in_pass):
    rec = _Recorder(monkeypatch)

    def interrupt():
        raise KeyboardInterrupt

    _interrupting_chunks(monkeypatch, interrupt, in_pass)
    with pytest.raises(KeyboardInterrupt):
        write_m4b(dest, [AudioChapter("One", [SR * 10])], book_tags(), None, SR)
    assert len(rec.procs) == in_pass + 1
    assert rec.procs[-1].returncode is not None  # the ffmpeg was stopped and reaped
    assert_untouched(dest)


def test_invalid_arguments(dest):
    with pytest.raises(ValueError, match="22051"):
        write_m4b(dest, [AudioChapter("One", [100])], book_tags(), None, 22051)
    with pytest.raises(ValueError, match="at least one chapter"):
        write_m4b(dest, [], book_tags(), None, SR)
    with pytest.raises(ValueError, match="no audio"):
        write_m4b(dest, [AudioChapter("One", [100]), AudioChapter("Empty", [0])], book_tags(), None, SR)
    with pytest.raises(ValueError, match="JPEG or PNG"):
        write_m4b(dest, [AudioChapter("One", [100])], book_tags(), Cover(b"GIF89a", "image/gif"), SR)
    assert_untouched(dest)


# ------------------------------------------------------------------------------------------
# Small pieces


def test_ffmetadata_escapes_syntax_characters():
    text = m4b_module.ffmetadata(
        [AudioChapter("a=b;c#d\\e\nf", [10])], [0], 10, Tags("T=1;#\\", ["A"], "N", description="x\ny"), 8000
    )
    # A value ending in a backslash ends in NUL too: ffmpeg would read the newline as escaped.
    assert "title=T\\=1\\;\\#\\\\\0\n" in text
    assert "description=x\\\ny\n" in text
    assert "title=a\\=b\\;c\\#d\\\\e\\\nf\n" in text  # chapter titles exactly as given
    assert "TIMEBASE=1/8000\nSTART=0\nEND=10\n" in text


def test_tags_for_book():
    book = Book(
        path="x.epub",
        title=" The Title ",
        authors=["Ann", " ", "Bo"],
        language="fr-CA",
        chapters=[],
        date="2011-04-05T00:00:00Z",
        description="<p>One &amp; two.</p><p>Three<br/>four</p>",
        publisher="Pub",
        identifier="urn:isbn:978-0-306-40615-7",
    )
    tags = tags_for_book(book, narrator="Joe")
    assert tags == Tags(
        title="The Title",
        authors=["Ann", "Bo"],
        narrator="Joe",
        date="2011",
        description="One & two.\nThree\nfour",
        language="fr-CA",
        publisher="Pub",
        isbn="9780306406157",
    )
    assert tags_for_book(Book("x", "T", [], "", [], identifier="urn:uuid:1234"), "Joe").isbn == ""
    assert tags_for_book(Book("x", "T", [], "", [], identifier="0-306-40615-2"), "Joe").isbn == "0306406152"
    assert tags_for_book(Book("x", "T", [], "", [], identifier="9780306406158"), "Joe").isbn == ""  # bad check digit


def test_ffmpeg_override(monkeypatch, tmp_path):
    monkeypatch.setenv("EPUB2AUDIO_FFMPEG", str(tmp_path / "missing-ffmpeg"))
    with pytest.raises(FFmpegNotFound, match="EPUB2AUDIO_FFMPEG"):
        ffmpeg_exe()
    monkeypatch.delenv("EPUB2AUDIO_FFMPEG")
    assert "imageio_ffmpeg" in ffmpeg_exe()
