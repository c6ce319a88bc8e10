"""`epub2audio verify`: a good conversion passes; each kind of damage fails for its own reason."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest
from mutagen.mp4 import MP4

from cli_run import THREE_CHAPTERS, epub2audio, story_epub
from epub2audio.audiobook.ffmpeg import ffmpeg_exe
from epub2audio.audiobook.m4b import AudioChapter, Tags, tags_for_book, write_m4b
from epub2audio.audiobook.verify import (
    WER_DOUBT, _Seg, _text_drops, choose_windows, edit_distance, format_report, main, normalize_words,
    score_window, verify_conversion, verify_m4b, wer,
)
from epub2audio.audiobook.verify.quality import MODEL_SAMPLES, VOICE_NORMS, distillmos_installed
from epub2audio.audiobook.verify.speech import WINDOW_PAD_SECONDS, in_transcriber_language, transcriber_language
from epub2audio.audiobook.verify.words import BookWords, collapse_loops, looks_like_verse, reads_as_english
from epub2audio.book.epub import load_book
from epub2audio.render import audio_chapters
from epub2audio.store import SegmentStore
from run_cache import built_once

RATE = 22050


# ------------------------------------------------------------------------------------------
# Fast: the text side


def test_normalisation_spells_numbers_the_same_on_both_sides():
    assert normalize_words("Chapter 1: it's 1851, the 3rd of May; 50% & more.") == [
        "chapter", "one", "its", "eighteen", "fifty", "one", "the", "third", "of", "may", "fifty",
        "percent", "and", "more"]
    assert normalize_words("Two o’clock, Mr. Lorry!") == normalize_words("to o'clock mister lorry")
    assert normalize_words("1,000 café") == ["one", "thousand", "cafe"]


def test_word_edit_distance():
    assert edit_distance([], []) == 0
    assert edit_distance("a b c".split(), "a b c".split()) == 0
    assert edit_distance("a b c".split(), "a x c".split()) == 1  # substitution
    assert edit_distance("a b c".split(), "a c".split()) == 1  # deletion
    assert edit_distance("a b c".split(), "a b c d e".split()) == 2  # insertions
    assert edit_distance("kitten sat on the mat".split(), "sitting on mat".split()) == 3
    assert wer("The morning was cold.", "the morning was cold") == 0
    assert wer("By noon the mist had gone.", "The morning was cold.") == 5 / 6  # only "the" matches


def test_windows_are_whole_segments_chosen_from_the_seed():
    segs = [_Seg(0, i, f"word {i}", i * 10 * RATE, 8 * RATE) for i in range(12)]  # 8 s each
    pick = lambda seed: choose_windows(segs, RATE, 2, 30, random.Random(f"{seed}:0"))  # noqa: E731
    windows = pick(0)
    assert len(windows) == 2 and windows == pick(0)  # deterministic
    assert all(len(w) == 3 for w in windows)  # 3 x 8 s fit in 30 s, a 4th would not
    assert windows[0][0].index < windows[1][0].index  # in chapter order, no overlap
    assert any(pick(s) != windows for s in range(1, 6))  # another seed, other windows
    assert choose_windows(segs[:2], RATE, 2, 30, random.Random(0)) == [segs[:2]]  # short chapter: all of it


def test_windows_last_at_most_30_seconds_pauses_included():
    # 9 s of speech then 2.5 s of pause: 3 segments are 27 s of speech but 32 s of audio
    segs = [_Seg(0, i, f"word {i}", int(i * 11.5 * RATE), 9 * RATE) for i in range(9)]
    for window in choose_windows(segs, RATE, 10, 30, random.Random(0)):
        span = window[-1].start + window[-1].samples - window[0].start
        assert span / RATE + WINDOW_PAD_SECONDS <= 30
    assert [len(w) for w in choose_windows(segs, RATE, 10, 30, random.Random(0))] == [2, 2, 2, 2, 1]
    # a segment of another language ends a window and is never in one
    foreign = {2, 5}
    windows = choose_windows(segs, RATE, 10, 30, random.Random(0), scorable=lambda s: s.index not in foreign)
    assert [[s.index for s in w] for w in windows] == [[0, 1], [3, 4], [6, 7], [8]]


def test_text_not_in_english_is_never_scored():
    epigraph = ("Nam Sibyllam quidem Cumis ego ipse oculis meis vidi in ampulla pendere, et cum illi pueri "
                "dicerent: Σίβυλλα τί θέλεις; respondebat illa: ἀποθανεῖν θέλω.")
    assert not reads_as_english(epigraph)
    assert not reads_as_english("Σίβυλλα τί θέλεις")
    assert not reads_as_english("Mon semblable, mon frère, quand il pleut sur la ville")
    assert reads_as_english("April is the cruellest month, breeding Lilacs out of the dead land.")
    assert reads_as_english("Call me Ishmael.")  # too short to judge: scored
    assert in_transcriber_language(_Seg(0, 0, "The morning was cold and grey.", 0, 1), "en-GB")
    # the plan's own language wins over the text's look: a segment tagged French is heard in French,
    # one in a language no packaged model hears is not heard at all
    assert transcriber_language(_Seg(0, 0, "The morning was cold.", 0, 1, lang="fr"), "en") == "fr"
    assert not in_transcriber_language(_Seg(0, 0, "The morning was cold.", 0, 1, lang="nl"), "en")
    assert looks_like_verse("April is the cruellest month, breeding, Lilacs out of the dead land, mixing, "
                            "Memory and desire, stirring, Dull roots with spring rain.")
    assert not looks_like_verse("It was the best of times, it was the worst of times, it was the age of "
                                "wisdom, it was the age of foolishness, said Mr. Lorry, Jerry nodding.")


def test_a_transcriber_loop_is_left_out_of_the_score():
    reference = ("the morning was cold and the mist lay on the river " * 4).split()  # 44 words
    loop = "and the mist lay on the river".split() * 25  # 175 words of loop
    heard, dropped = collapse_loops(reference[:20] + loop + reference[20:], reference)
    assert dropped == 24 * 7 and edit_distance(reference, heard) <= 7
    # what the text itself repeats is kept: "jug jug jug jug"
    text = "twit twit twit jug jug jug jug jug jug so rudely forc'd".split()
    assert collapse_loops(text, text) == (text, 0)
    score = score_window(" ".join(reference), " ".join(reference[:20] + loop + reference[20:]), None)
    assert score["loop_words"] == 168 and score["wer"] < 0.2


def test_speech_is_scored_against_the_books_own_words():
    """The normaliser reading the pronoun "I" as "one" is invisible against the planned text and an
    error against the book's words, and it is named."""
    book = BookWords("I saw him at 3 o'clock. Then I left.", ["one saw him at three o'clock.", "Then I left."])
    assert book.words(0, 0) == ["i", "saw", "him", "at", "three", "oclock"]
    assert book.words(1, 1) == ["then", "i", "left"]
    score = score_window("one saw him at three o'clock.", "One saw him at three o'clock.", book.words(0, 0))
    assert (score["plan_wer"], score["errors"], score["words"]) == (0.0, 1, 6)
    assert book.readings(0, 0, score["heard"]) == ["'i' read as 'one'"]
    assert book.readings(1, 1, ["then", "i", "left"]) == []


def test_text_the_segmenter_dropped_is_found():
    book = ["The morning was cold. Mist lay on the river.", "Nobody spoke."]
    assert _text_drops(book, ["The morning was cold.", "Mist lay on the river.", "Nobody spoke."]) == []
    drops = _text_drops(book, ["The morning was cold.", "Nobody spoke."])
    assert drops == [("dropped", "'Mist lay on the river.'", 17)]


def test_a_narrated_number_range_is_not_added_text():
    """The Waste Land's notes: "367-77." is narrated "three hundred and sixty-seven to three
    hundred and seventy-seven", four words more than the neutral reading; that is a reading, while
    four real words that the book lacks are still found."""
    from epub2audio.book.normalize import normalize

    book = ["367-77. Cf. Hermann Hesse, Blick ins Chaos:"]
    planned = [normalize(book[0])]
    assert "to three hundred and seventy-seven" in planned[0]
    assert _text_drops(book, planned) == []
    drops = _text_drops(book, [planned[0] + " and then some more words"])
    assert [kind for kind, _excerpt, _n in drops] == ["added"]


def test_a_numeral_read_in_another_style_is_not_a_drop():
    """Herodotus: "about 585 B.C." is read as a year ("five eighty-five"), where the neutral reading
    is "five hundred and eighty-five"; that is a reading. A numeral left out whole is still a drop."""
    from epub2audio.book.normalize import normalize

    book = ["Periander is thought to have died about 585 B.C.; but see v. 95."]
    planned = [normalize(book[0])]
    assert "five eighty-five" in planned[0]
    assert _text_drops(book, planned) == []
    drops = _text_drops(book, ["Periander is thought to have died about B.C.; but see v. 95."])
    assert drops == [("dropped", "'585'", 24)]
    drops = _text_drops(book, ["Periander is thought to have died about five B.C.; but see v. 95."])
    assert [kind for kind, _excerpt, _n in drops] == ["dropped"]


# ------------------------------------------------------------------------------------------
# Fast: the container, on a tone M4B written directly (no job, no ASR)


def _tone_wav(path: Path, seconds: float, freq: float = 220.0) -> Path:
    t = np.arange(int(seconds * RATE)) / RATE
    pcm = (0.3 * np.sin(2 * np.pi * freq * t) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(RATE)
        w.writeframes(pcm.tobytes())
    return path


@pytest.fixture(scope="module")
def tone_m4b(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tone")
    chapters = [AudioChapter("First", [_tone_wav(folder / "a.wav", 1.5), RATE // 2]),
                AudioChapter("Second", [_tone_wav(folder / "b.wav", 1.0, 330.0), RATE // 4])]
    tags = Tags(title="Tones", authors=["Ann Author"], narrator="A Tone")
    return write_m4b(folder / "tones.m4b", chapters, tags, None, RATE).path


def _problems(report, check: str) -> list[str]:
    return [p.message for p in report.problems if p.check == check]


def test_a_sound_m4b_passes_the_container_checks(tone_m4b):
    report = verify_m4b(tone_m4b, None, asr=False)
    assert report.passed, format_report(report)
    assert (report.container["chapters_quicktime"], report.container["chapters_nero"]) == (2, 2)
    assert [c.title for c in report.chapters] == ["First", "Second"]
    assert [c.seconds for c in report.chapters] == [2.0, 1.25]
    assert report.duration_seconds == 3.25


def _remux(src: Path, dst: Path, *extra: str) -> Path:
    subprocess.run([ffmpeg_exe(), "-v", "error", "-y", "-i", str(src), "-map", "0:a", "-c", "copy", *extra,
                    "-f", "ipod", str(dst)], check=True)
    return dst


def test_an_m4b_without_chapters_fails(tone_m4b, tmp_path):
    report = verify_m4b(_remux(tone_m4b, tmp_path / "bare.m4b", "-map_chapters", "-1"), None, asr=False)
    assert not report.passed
    problems = _problems(report, "container")
    assert any("no QuickTime chapter track" in p for p in problems)
    assert any("no Nero chpl" in p for p in problems)


def test_an_m4b_with_only_quicktime_chapters_fails(tone_m4b, tmp_path):
    report = verify_m4b(_remux(tone_m4b, tmp_path / "qt.m4b", "-movflags", "disable_chpl"), None, asr=False)
    assert _problems(report, "container") == ["no Nero chpl chapters (the chapters mutagen and Android players read)"]
    assert report.container["chapters_quicktime"] == 2


def test_an_m4b_without_stik_or_title_fails(tone_m4b, tmp_path):
    damaged = tmp_path / "nostik.m4b"
    shutil.copy(tone_m4b, damaged)
    mp4 = MP4(damaged)
    del mp4["stik"], mp4["©nam"]
    mp4.save()
    report = verify_m4b(damaged, None, asr=False)
    problems = _problems(report, "container")
    assert len(problems) == 2 and not report.passed
    assert "missing tags: ©nam (title)" in problems
    assert any(p.startswith("stik (media kind) is None") for p in problems)


def test_command_exit_codes(tone_m4b, tmp_path, capsys):
    assert main([str(tone_m4b), "--no-asr"]) == 0
    assert "tones.m4b: PASS" in capsys.readouterr().out
    not_m4b = tmp_path / "x.m4b"
    not_m4b.write_bytes(b"not an mp4 at all")
    assert main([str(not_m4b)]) == 2
    assert main([str(tmp_path / "missing.m4b")]) == 2
    assert main([str(tone_m4b), "--work-dir", str(tmp_path)]) == 2  # no job there
    assert main([str(_remux(tone_m4b, tmp_path / "bare.m4b", "-map_chapters", "-1")), "--no-asr", "--json"]) == 1
    assert '"passed": false' in capsys.readouterr().out


# ------------------------------------------------------------------------------------------
# Slow: a real conversion with the embedded voice, then damaged copies of it


def _convert_two_chapters(folder: Path) -> Path:
    book = story_epub(folder, THREE_CHAPTERS)
    env = dict(os.environ, EPUB2AUDIO_CACHE_DIR=str(folder / "cache"))
    run = epub2audio(book, "-o", folder / "story.m4b", "--chapters", "1-2", "--work-dir", folder / "job",
                     "--voice", "joe", "--progress", "none", env=env)
    assert run.code == 0, run.stderr
    return book


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Chapters One and Two of THREE_CHAPTERS read by Joe; (m4b, job dir, epub), read only (a test
    that damages it copies the job). Once per test run (its tests run in both xdist workers), in its
    final folder, as the job names its book and output."""
    book = built_once(tmp_path_factory, "verify-joe-two-chapters", _convert_two_chapters, in_place=True)
    return book.parent / "story.m4b", book.parent / "job", book


def _damage(converted, tmp_path, change) -> tuple[Path, Path]:
    """Copy the job, let change(store, plan) rewrite segment WAVs, and assemble a new M4B from it."""
    _out, job, book_path = converted
    job_copy = tmp_path / "job"
    shutil.copytree(job, job_copy)
    store = SegmentStore(job_copy)
    plan = {(c, i): store.audio_path(k) for c, i, k, _p in store.plan()}
    change(plan)
    book = load_book(book_path)
    out = tmp_path / "damaged.m4b"
    write_m4b(out, list(audio_chapters(store, RATE).values()), tags_for_book(book, "Joe"), book.cover, RATE)
    store.close()
    return out, job_copy


def _read(path: Path) -> bytes:
    with wave.open(str(path), "rb") as w:
        return w.readframes(w.getnframes())


def _write(path: Path, pcm: bytes) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(RATE)
        w.writeframes(pcm)


@pytest.mark.slow
def test_a_good_conversion_passes(converted, capsys):
    out, job, _book = converted
    report = verify_m4b(out, job)
    assert report.passed, format_report(report)
    assert report.asr == "done"
    assert [(c.title, c.book_chapter, c.segments) for c in report.chapters] == [("One", 1, 4), ("Two", 2, 4)]
    for chapter in report.chapters:
        assert chapter.windows and chapter.wer is not None and chapter.wer <= WER_DOUBT
        assert all(w.seconds <= 30 and w.book_reference for w in chapter.windows)
        assert chapter.coverage == 1.0 and chapter.read_characters == chapter.book_characters
    assert [(s.title, s.reason) for s in report.skipped] == [("Three", "chapter not selected (--chapters)")]
    assert report.coverage == pytest.approx(2 / 3, abs=0.05)
    # The command finds the job by itself only for outputs converted without --work-dir; given it, it passes.
    assert main([str(out), "--work-dir", str(job), "--windows", "1"]) == 0
    text = capsys.readouterr().out
    assert "story.m4b: PASS" in text and "Three: chapter not selected" in text
    assert f"speech quality: {'done' if distillmos_installed() else 'unavailable'}" in text  # the command's default
    # What render.py calls after a conversion: the report plus two progress events.
    events = []

    class Recorder:
        def emit(self, event, **fields):
            events.append((event, fields))

    assert verify_conversion(out, job, Recorder(), asr=False).passed
    assert events == [("stage", {"stage": "verify"}),
                      ("verify", {"passed": True, "problems": [], "doubts": [], "asr": "off",
                                  "coverage": report.coverage, "wer": None})]


@pytest.mark.slow
def test_a_silent_chapter_fails(converted, tmp_path):
    def silence_chapter_two(plan):
        for (chapter, _i), wav in plan.items():
            if chapter == 1:
                _write(wav, bytes(len(_read(wav))))

    out, job = _damage(converted, tmp_path, silence_chapter_two)
    report = verify_m4b(out, job)
    assert not report.passed
    one, two = report.chapters
    assert one.passed and not two.passed
    assert two.silent_segments == 4 and two.long_silences == 1
    assert {(p.check, p.severity) for p in report.problems} == {("silence", "fail"), ("gap", "fail"),
                                                                 ("asr", "doubt")}
    assert all(p.chapter == 2 for p in report.problems)
    assert any("nothing intelligible" in m for m in _problems(report, "asr"))


@pytest.mark.slow
@pytest.mark.skipif(not distillmos_installed(), reason="distillmos is not installed (make test does)")
def test_a_noisy_chapter_is_doubtful_by_its_speech_quality(converted, tmp_path):
    def noise_on_chapter_two(plan):  # white noise at 5 dB SNR on every segment of chapter Two
        rng = np.random.default_rng(0)
        for (chapter, _i), wav in plan.items():
            if chapter == 1:
                x = np.frombuffer(_read(wav), dtype="<i2").astype(float)
                x += rng.standard_normal(len(x)) * np.sqrt(np.mean(x ** 2) / 10 ** 0.5)
                _write(wav, np.clip(np.round(x), -32768, 32767).astype("<i2").tobytes())

    out, job = _damage(converted, tmp_path, noise_on_chapter_two)
    report = verify_m4b(out, job, asr=False, quality=True)
    assert report.passed and report.quality == "done"
    one, two = report.chapters
    assert one.distillmos >= VOICE_NORMS["joe"][1] and not one.doubtful
    assert two.distillmos < VOICE_NORMS["joe"][1] and two.doubtful
    assert [(p.check, p.severity, p.chapter) for p in report.problems] == [("quality", "doubt", 2)]
    assert all(w.seconds <= MODEL_SAMPLES / 16000 for r in report.chapters for w in r.quality_windows)
    assert "DistillMOS" in format_report(report)


@pytest.mark.slow
def test_a_truncated_segment_fails(converted, tmp_path):
    def cut(plan):  # chapter 1, segment 2: "The morning was cold." to 10 % of its audio
        wav = plan[(0, 1)]
        pcm = _read(wav)
        _write(wav, pcm[: len(pcm) // 20 * 2])

    out, job = _damage(converted, tmp_path, cut)
    report = verify_m4b(out, job, asr=False)
    assert not report.passed
    assert [(p.check, p.chapter, p.segment) for p in report.problems] == [("pace", 1, 2)]
    assert "too short for its text" in report.problems[0].message
    # The undamaged M4B no longer matches the damaged job: it is reported as stale, not checked.
    stale = verify_m4b(converted[0], job, asr=False)
    assert [p.check for p in stale.problems] == ["layout"]


@pytest.mark.slow
def test_audio_of_the_wrong_text_fails(converted, tmp_path):
    def swap_chapters(plan):  # chapter One's segments now hold chapter Two's audio and vice versa
        for i in range(4):
            a, b = plan[(0, i)], plan[(1, i)]
            pcm_a, pcm_b = _read(a), _read(b)
            _write(a, pcm_b), _write(b, pcm_a)

    out, job = _damage(converted, tmp_path, swap_chapters)
    report = verify_m4b(out, job)
    # Speech is a doubt, never a failure (tiny.en is too weak a judge): named with where to listen.
    assert report.passed and all(c.doubtful and c.passed for c in report.chapters)
    assert {(p.check, p.severity) for p in report.problems} == {("asr", "doubt")}
    assert [p.chapter for p in report.problems] == [1, 2]
    assert all(p.at_seconds is not None and "into the chapter" in p.message for p in report.problems)
    assert all(c.wer > 0.7 for c in report.chapters)
    assert main([str(out), "--work-dir", str(job)]) == 0
    assert main([str(out), "--work-dir", str(job), "--strict"]) == 1
    assert all(c.coverage == 1.0 for c in report.chapters)  # the plan was right, the audio is not


def test_verify_never_imports_render():
    """render calls verify; verify reads the job from the store and never imports render back,
    not even inside a function."""
    import ast

    import epub2audio.audiobook.verify as package

    found = []
    for path in Path(package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and "render" in (node.module or "").split("."):
                found.append(f"{path.name}:{node.lineno}")
            elif isinstance(node, ast.Import) and any("render" in a.name.split(".") for a in node.names):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_a_job_from_before_the_books_words_were_kept_still_opens(tmp_path):
    import sqlite3

    db = sqlite3.connect(tmp_path / "job.sqlite3")
    db.execute("CREATE TABLE chapters (idx INTEGER PRIMARY KEY, title TEXT NOT NULL, sources TEXT NOT NULL)")
    db.execute("INSERT INTO chapters VALUES (0, 'One', 'a.xhtml')")
    db.commit(), db.close()
    store = SegmentStore(tmp_path)
    assert store.chapter_texts() == {0: ""}  # verify then reads the words from the EPUB
    store.replace_plan([(0, "One", "a.xhtml", "I saw him.")], [])
    assert store.chapter_texts() == {0: "I saw him."} and store.plan_languages() == {}
    store.close()
