"""Foreign passages: the language of each run of text, from the markup to the voice."""

from __future__ import annotations

import io
import json
import sqlite3
from types import SimpleNamespace

import pytest

from cli_run import epub2audio
from epub2audio.book.epub import load_book
from epub2audio.book.lexicon import Lexicon
from epub2audio.book.segment import PAUSE_CHAPTER_MS, PAUSE_LANGUAGE_MS, PAUSE_PARAGRAPH_MS, segment_chapter
from epub2audio.book.text import parse_xhtml, read_blocks
from epub2audio.render import plan_segments, spoken_chapter
from epub2audio.store import PlannedSegment, SegmentStore, segment_key, segment_seed
from epub2audio.voices.catalog import language_warning
from epub2audio.worker import child, protocol
from epub2audio.worker.supervisor import Worker
from epub_factory import make_epub, xhtml

FRENCH_BOOK = "vingt-mille-lieues-sous-les-mers-fr-epub2-ncx.epub"


def segments(book, chapter: int):
    return [(s.text, s.lang) for s in segment_chapter(chapter, spoken_chapter(book, book.chapters[chapter]))]


def test_waste_land_epigraph_segments_are_latin_and_greek(corpus):
    book = load_book(corpus / "the-waste-land-poetry-notes-epub3.epub")
    assert book.language == "en-US"
    # the title page is skipped, its epigraph and dedication open the first chapter
    assert segments(book, 0)[:6] == [
        ('"Nam Sibyllam quidem Cumis ego ipse oculis meis vidi in ampulla pendere, et cum illi pueri '
         'dicerent:', "la"),  # the colon after the span joins it: no segment of punctuation alone
        ("Σίβυλλα τί θέλεις;", "grc"),
        ("respondebat illa:", "la"),
        ('ἀποθανεῖν θέλω."', "grc"),
        ("For Ezra Pound:", None),  # the html element's xml:lang="en" is the book's language
        ("il miglior fabbro", "it"),
    ]


def one_chapter_book(tmp_path, body: str, language: str = "en"):
    path = make_epub(tmp_path, {"c1.xhtml": xhtml(body, "One")}, nav=[("One", "c1.xhtml")])
    book = load_book(path)
    book.language = language
    return book


def test_inline_french_span_is_its_own_segment(tmp_path):
    book = one_chapter_book(tmp_path, '<h1>One</h1><p>He said <i xml:lang="fr">bonjour, mon ami</i> and left.</p>')
    planned = segment_chapter(0, spoken_chapter(book, book.chapters[0]))
    assert [(s.text, s.lang, s.pause_after_ms) for s in planned[1:]] == [
        ("He said", None, PAUSE_LANGUAGE_MS),
        ("bonjour, mon ami", "fr", PAUSE_LANGUAGE_MS),
        ("and left.", None, PAUSE_CHAPTER_MS),
    ]


def test_nested_and_inherited_languages(tmp_path):
    root = parse_xhtml('<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><body>'
                       '<div xml:lang="de"><p>Guten <span lang="fr">jour</span> Tag</p></div><p>Home</p></body></html>')
    blocks = read_blocks(root)
    assert [(b.text, [(b.text[s:e], lang) for s, e, lang in b.langs]) for b in blocks] == [
        ("Guten jour Tag", [("Guten", "de"), ("jour", "fr"), ("Tag", "de")]),
        ("Home", [("Home", "en")]),
    ]


def test_each_run_is_normalised_by_its_own_language(tmp_path):
    book = one_chapter_book(tmp_path, '<p>He paid 12 pounds, <span xml:lang="fr">soit 12 francs</span>.</p>')
    assert segments(book, 0) == [("He paid twelve pounds,", None), ("soit douze francs.", "fr")]


def test_same_language_as_the_book_is_no_foreign_passage(tmp_path):
    book = one_chapter_book(tmp_path, '<p>Colour, <span xml:lang="en-GB">honour</span> and labour.</p>', "en-US")
    assert segments(book, 0) == [("Colour, honour and labour.", None)]


def test_piper_keys_ignore_the_language(tmp_path):
    """Piper's audio does not change with the language, so neither does a segment's address:
    jobs made before languages were known keep their finished audio."""
    book = one_chapter_book(tmp_path, '<p>Plain words. He said <i xml:lang="fr">bonjour</i>.</p>')
    planned = plan_segments(book, [0], 1986, "joe", "joe:1")
    assert [(p.text, p.lang) for p in planned] == [("Plain words.", None), ("He said", None), ("bonjour.", "fr")]
    for p in planned:
        assert p.key == segment_key("joe", "joe:1", p.text, segment_seed(1986, p.text, 0))
    assert segment_key("v", "m", "t", 1, "fr") != segment_key("v", "m", "t", 1)


def test_store_keeps_the_language_and_upgrades_old_jobs(tmp_path):
    db = sqlite3.connect(tmp_path / "job.sqlite3")  # a job made before languages: no lang columns
    db.executescript("""
        CREATE TABLE plan (chapter INTEGER NOT NULL, idx INTEGER NOT NULL, segment_key TEXT NOT NULL,
                           pause_ms INTEGER NOT NULL, PRIMARY KEY (chapter, idx));
        INSERT INTO plan VALUES (0, 0, 'old', 250);""")
    db.close()
    store = SegmentStore(tmp_path)
    assert store.plan() == [(0, 0, "old", 250)]
    fr = PlannedSegment(0, 1, "k1", "bonjour", 5, 100, "fr")
    store.replace_plan([(0, "One", "c1.xhtml")], [PlannedSegment(0, 0, "k0", "Hello", 4, 100), fr])
    assert store.plan_langs() == {(0, 1): "fr"}
    store.record_done(fr, "tone", SimpleNamespace(backend="python", precision="int16", model_id="tone:2",
                                                  sample_rate=16000), b"\0\0", 0.1)
    assert store.segment_row("k1")["lang"] == "fr"
    store.close()


def test_french_book_with_joe_warns_and_names_the_voices_that_speak_french(corpus, tmp_path, without_official_packs):
    data = tmp_path / "data"
    (data / "voices" / "anna").mkdir(parents=True)
    (data / "voices" / "anna" / "profile.json").write_text("{}")
    env = {**__import__("os").environ, "EPUB2AUDIO_DATA_DIR": str(data), "EPUB2AUDIO_CACHE_DIR": str(tmp_path / "c")}
    # A chapter the book lacks stops the job right after the book is read, before any audio.
    run = epub2audio(corpus / FRENCH_BOOK, "--voice", "joe", "--chapters", "999", "-o", tmp_path / "v.m4b",
                     "--progress", "json", env=env)
    expected = ("the book is in French (fr) but voice joe speaks English (en); "
                "voices that speak French: cosyvoice3:anna")
    assert run.code == 2
    # (its skipped parts, 3.1 % of the text, are the summary line's: its markup and a checked list skip them)
    assert [e["message"] for e in run.events("warning")] == [expected]
    assert "warning" not in run.stderr  # JSON mode: the event is the warning
    run = epub2audio(corpus / FRENCH_BOOK, "--voice", "joe", "--chapters", "999", "-o", tmp_path / "v.m4b", env=env)
    assert run.code == 2
    assert [line for line in run.stderr.splitlines() if line.startswith("warning:")] == [f"warning: {expected}"]


def test_no_warning_when_the_voice_speaks_the_book():
    assert language_warning("en-US", "joe") is None
    assert language_warning("fr", "cosyvoice3:anna") is None
    assert language_warning("fr", "tone") is None  # the test tone has no language
    assert language_warning("", "joe") is None
    assert language_warning("ar", "joe").endswith("voices that speak Arabic: none installed; add one with "
                                                  "`epub2audio voice add NAME --piper FILE.onnx` (a Piper model and its .onnx.json)")


class FakeVoice:
    def __init__(self):
        self.calls = []

    def synthesize(self, text, seed, language=None):
        self.calls.append((text, seed, language))
        return b"\1\0"


class OldVoice:  # written before languages: no `language` parameter
    def synthesize(self, text, seed):
        return b"\2\0"


def frames(data: bytes) -> list[dict]:
    stream, found = io.BytesIO(data), []
    while (frame := protocol.receive(stream)) is not None:
        found.append(frame[0])
    return found


def test_worker_request_carries_the_language_to_the_voice():
    sent = io.BytesIO()
    worker = Worker.__new__(Worker)
    worker.process = SimpleNamespace(stdin=sent)
    worker.send(1, "bonjour", 7, "fr")
    worker.send(2, "hello", 8)
    requests = frames(sent.getvalue())
    assert requests == [{"type": "synthesize", "id": 1, "text": "bonjour", "seed": 7, "lang": "fr"},
                        {"type": "synthesize", "id": 2, "text": "hello", "seed": 8}]  # as before: no lang key

    voice, old, out = FakeVoice(), OldVoice(), io.BytesIO()
    faults = SimpleNamespace(before=lambda text: None, after=lambda: None, device_bytes=lambda: 0)
    for request in requests:
        child._answer(out, request, faults, lambda r: voice.synthesize(r["text"], r["seed"], **child.language(r)))
    child._answer(out, requests[1], faults, lambda r: old.synthesize(r["text"], r["seed"], **child.language(r)))
    assert voice.calls == [("bonjour", 7, "fr"), ("hello", 8, None)]
    assert [f["type"] for f in frames(out.getvalue())] == ["audio", "audio", "audio"]


def test_pipelined_worker_passes_the_language_on():
    from epub2audio.worker.pipeline import Prefetcher

    class TwoStage(FakeVoice):
        def speech_tokens(self, text, seed):
            return [seed]

        def synthesize(self, text, seed, language=None):
            self.calls.append((text, self.speech_tokens(text, seed), language))
            return b"\0\0"

    voice = TwoStage()
    prefetch = Prefetcher(voice, 1)
    try:
        prefetch.submit(1, "bonjour", 3)
        prefetch.synthesize(1, "bonjour", 3, language="fr")
    finally:
        prefetch.close()
    assert voice.calls == [("bonjour", [3], "fr")] and prefetch.hits == 1
