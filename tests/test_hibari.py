"""hibari (voices/hibari.py): hibari-tts's bundled heart voice through our seam — upstream's own
default call gives the same samples, the same text and seed the same bytes in any worker, the
durations output changes no byte and times each word within one phoneme, and regen is identical."""

import hashlib

import numpy as np
import pytest

from cli_run import SAMPLE, epub2audio
from epub2audio.voices import catalog, hibari

TEXT = "The old lighthouse keeper climbed the stairs. He lit the lamp, and watched the ships."


@pytest.fixture(autouse=True)
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))


@pytest.fixture(scope="module")
def heart():
    return hibari.load()


def test_the_bundled_model_is_the_pinned_one():
    assert hashlib.sha256(hibari.heart_path().read_bytes()).hexdigest() == hibari.HEART_SHA256


def test_upstreams_default_call_gives_the_same_samples(heart):
    from hibari import Hibari

    upstream = Hibari()(TEXT, seed=7)  # its own session (no durations output), its own noise
    ours = np.frombuffer(heart.synthesize(TEXT, 7), dtype="<i2")
    assert len(ours) == len(upstream) > 24000
    assert np.array_equal(ours, (np.clip(upstream, -1.0, 1.0) * 32767.0).round().astype("<i2"))
    assert heart.synthesize(TEXT, 7) == heart.synthesize(TEXT, 7) != heart.synthesize(TEXT, 8)


def test_the_duration_output_changes_no_byte_and_adds_up_to_the_audio(heart, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(hibari, "expose_durations", lambda model: None)
        plain = hibari.load()
    assert not plain.times_words and heart.times_words
    assert plain.synthesize(TEXT, 3) == heart.synthesize(TEXT, 3)
    chunks = heart.phonemes(TEXT)
    assert len(chunks) == 2
    rng = np.random.Generator(np.random.PCG64(3))
    for chunk in chunks:
        audio, frames = heart.run(chunk, rng)
        assert len(frames) == len(chunk) + 2 and frames.min() >= 1
        assert int(frames.sum()) * hibari.FRAME_SAMPLES == len(audio)
        assert np.array_equal(heart.frames(chunk), frames)  # the durations graph: the same frames
    assert heart.word_times(TEXT, 3)["samples"] == len(heart.synthesize(TEXT, 3)) // 2


def test_the_same_text_gives_the_same_bytes_in_fresh_workers():
    from test_kokoro import synthesize_in_a_fresh_worker

    [first] = synthesize_in_a_fresh_worker("hibari", {}, TEXT, [7])
    assert [first] == synthesize_in_a_fresh_worker("hibari", {}, TEXT, [7], threads=2)
    assert first == hibari.load().synthesize(TEXT, 7)


def test_voice_list_and_resolve_name_hibari():
    assert catalog.hibari_installed()
    row = next(r for r in catalog.listing() if r.name == "hibari")
    assert (row.family, row.languages, row.sample_rate) == ("hibari", ("en",), 24000)
    assert catalog.resolve("hibari", config={}).name == "hibari"
    assert catalog.languages_of("hibari") == ("en",)


def hibari_word_starts(voice, text: str, seed: int) -> list[list[tuple[int, int, int]]]:
    """Per chunk, (start of the word's first phoneme, duration of the phoneme before it, duration
    of its first phoneme) of each word (a space starts one), from the frames the full graph reported
    while making the audio."""
    out, at = [], 0
    rng = np.random.Generator(np.random.PCG64(seed))
    for chunk in [c for c in voice.phonemes(text) if c]:
        samples = voice.run(chunk, rng)[1] * hibari.FRAME_SAMPLES
        position = at + int(samples[0])
        words, previous, new_word = [], int(samples[0]), True
        for phoneme, length in zip(chunk, samples[1:-1]):
            if phoneme == " ":
                new_word = True
            elif new_word and phoneme not in "ˈˌ":
                words.append((position, previous, int(length)))
                new_word = False
            previous = int(length)
            position += int(length)
        out.append(words)
        at += int(samples.sum())
    return out


def test_readalong_words_within_one_phoneme_and_regen_identical(heart, tmp_path):
    from test_readalong_words import _check_words_against_durations

    found = _check_words_against_durations(tmp_path, SAMPLE, "hibari", heart, hibari_word_starts)
    print(f"hibari: {found['checked']} word starts checked of {found['words']} words; deviation "
          f"{found['mean_in_phonemes']:.3f} phonemes on average, {found['worst_in_phonemes']:.3f} at worst")
    book = tmp_path / "book.m4b"
    first = hashlib.sha256(book.read_bytes()).hexdigest()
    run = epub2audio("regen", book, "--segment", "1.2", "--work-dir", tmp_path / "job")
    assert run.code == 0, run.stderr
    assert "identical to the stored audio" in run.stdout
    assert hashlib.sha256(book.read_bytes()).hexdigest() == first
