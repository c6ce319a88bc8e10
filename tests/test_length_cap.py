"""A segment the voice cannot say within its length cap is said in pieces, never cut (issue 14 item 5).

The voice is the `tone` test voice; the worker's `cap_over=N` fault makes it report its length cap
(LengthCapReached, as CosyVoice3 does) for any text longer than N characters, through the real
worker protocol."""

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import m4b_probe as probe
from cli_run import epub2audio, story_epub
from epub2audio.book.segment import PAUSE_CLAUSE_MS, split_in_two
from epub2audio.store import SegmentStore
from worker_gate import Gate

CAP = 20  # characters the fake voice can say in one go
LONG = "By noon the mist had gone, and the boats came out onto the river."
CHAPTERS = [
    ("One", ["The morning was cold. Mist lay on the river.", "Nobody spoke."]),
    ("Two", [LONG, "A bell rang."]),
]
RATE = 16000  # the tone voice's


def tone_samples(text: str) -> int:
    """What the tone voice says for `text` (voices/tone.py), in samples."""
    return RATE * (3 + len(text)) // 14


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))


def capped_env(extra: str = "") -> dict:
    return {**os.environ, "EPUB2AUDIO_FAULTS": f"cap_over={CAP}" + (f",{extra}" if extra else "")}


# --- where a segment is split ------------------------------------------------------------------

def test_split_in_two_prefers_clause_punctuation_near_the_middle():
    assert split_in_two(LONG) == ("By noon the mist had gone,", "and the boats came out onto the river.",
                                  PAUSE_CLAUSE_MS)
    assert split_in_two("Wait; the boats are late, and the river is high.") == (
        "Wait; the boats are late,", "and the river is high.", PAUSE_CLAUSE_MS)  # "Wait;" is too short a piece
    assert split_in_two("Then: the boats, the nets and the men came home.") == (
        "Then: the boats,", "the nets and the men came home.", PAUSE_CLAUSE_MS)


def test_split_in_two_falls_back_to_the_middle_word_boundary_and_stops_at_one_word():
    assert split_in_two("The morning was cold.") == ("The morning", "was cold.", 0)
    assert split_in_two("  one two  ") == ("one", "two", 0)
    assert split_in_two("Supercalifragilisticexpialidocious!") is None
    assert split_in_two("  word  ") is None
    # pronunciation markup is one word: never cut inside it
    assert split_in_two("say ⟦tomato|t@meItoU⟧ now") == ("say ⟦tomato|t@meItoU⟧", "now", 0)


def test_an_old_job_folder_gets_the_pieces_table_on_open(tmp_path):
    db = sqlite3.connect(tmp_path / "job.sqlite3")
    db.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                     "INSERT INTO meta VALUES ('voice', 'tone');")
    db.close()
    store = SegmentStore(tmp_path)
    assert store.get_meta("voice") == "tone"
    assert [r[1] for r in store.db.execute("PRAGMA table_info(pieces)")] == [
        "parent", "idx", "segment_key", "text", "seed", "pause_ms"]
    store.close()


# --- the worker reports the cap; the supervisor does not retry it ---------------------------------

@pytest.mark.slow
def test_a_capped_request_is_reported_as_such_at_once(monkeypatch):
    from epub2audio.worker.supervisor import SegmentCapped, Supervisor, WorkerPolicy

    monkeypatch.setenv("EPUB2AUDIO_FAULTS", f"cap_over={CAP}")
    config = {"voice": "tone", "threads": 1, "options": {}}
    supervisor = Supervisor(config, WorkerPolicy(retries=2))
    try:
        with pytest.raises(SegmentCapped, match="injected length cap"):
            supervisor.synthesize("This sentence is longer than twenty characters.", 1)
        assert supervisor.worker.requests == 1  # asked once: the same text would reach it again
        pcm, _seconds, _details = supervisor.synthesize("Short enough.", 1)
        assert len(pcm) == 2 * tone_samples("Short enough.")
        assert (supervisor.stats.spawned, supervisor.stats.died) == (1, 0)
    finally:
        supervisor.close()

    pipelined = Supervisor(config, WorkerPolicy(retries=2, pipeline_depth=2))
    items = iter([(0, "Short.", 1), (1, "This one is far too long to say.", 2), (2, "Also short.", 3)])
    got = {}
    try:
        pipelined.run_pipelined(lambda: next(items, None), lambda i, pcm, s, d, error: got.update({i: (pcm, error)}))
    finally:
        pipelined.close()
    assert isinstance(got[1][1], SegmentCapped) and got[1][0] is None
    assert got[0][1] is None and got[2][1] is None and pipelined.worker is None


# --- the job ------------------------------------------------------------------------------------

def leaves(store: SegmentStore, segment) -> list:
    """(text, pause after it inside the segment's WAV) of every piece actually rendered."""
    pieces = store.pieces(segment)
    if not pieces:
        return [(segment.text, 0)]
    out = []
    for i, piece in enumerate(pieces):
        below = leaves(store, piece)
        if i < len(pieces) - 1:
            below[-1] = (below[-1][0], piece.pause_ms)
        out += below
    return out


@pytest.mark.slow
def test_a_capped_segment_is_said_in_pieces_and_the_m4b_holds_all_of_them(tmp_path):
    from epub2audio.store import PlannedSegment

    book = story_epub(tmp_path, CHAPTERS)
    out = tmp_path / "story.m4b"
    run = epub2audio(book, "-o", out, "--progress", "json", "--voice", "tone", "--work-dir", tmp_path / "job",
                     env=capped_env())
    assert run.code == 0, run.stderr
    # split: "The morning was cold.", "Mist lay on the river.", the long sentence, and both its halves
    splits = [(e["chapter"], e["index"]) for e in run.events("split")]
    assert sorted(splits) == [(0, 1), (0, 2), (1, 1), (1, 1), (1, 1)]
    assert run.events("done")[0]["segments_rendered"] == 7  # the plan's: pieces are not extra segments

    store = SegmentStore(tmp_path / "job")
    plan = store.plan()
    rows = {key: store.segment_row(key) for _c, _i, key, _p in plan}
    long_key = next(k for k, r in rows.items() if r["text"] == LONG)
    long = PlannedSegment(1, 1, long_key, LONG, rows[long_key]["seed"], 0)
    assert leaves(store, long) == [
        ("By noon the", 0), ("mist had gone,", PAUSE_CLAUSE_MS), ("and the boats came", 0),
        ("out onto the river.", 0)]
    # every segment, split or not, is one finished WAV holding all its pieces and the pauses between them
    expected_chapters = {}
    for chapter, index, key, pause_ms in plan:
        segment = PlannedSegment(chapter, index, key, rows[key]["text"], rows[key]["seed"], pause_ms)
        wav = sum(tone_samples(text) + pause * RATE // 1000 for text, pause in leaves(store, segment))
        assert rows[key]["status"] == "done" and rows[key]["samples"] == wav
        assert all(len(text) <= CAP for text, _ in leaves(store, segment))
        expected_chapters[chapter] = expected_chapters.get(chapter, 0) + wav + pause_ms * RATE // 1000
    store.close()
    if probe.have_ffprobe():
        marks = probe.chapters(probe.ffprobe(out))
        assert [m.end - m.start for m in marks] == [expected_chapters[0], expected_chapters[1]]


@pytest.mark.slow
def test_a_split_job_resumes_after_a_kill_with_the_same_bytes(tmp_path):
    book = story_epub(tmp_path, CHAPTERS)
    reference = tmp_path / "reference.m4b"
    assert epub2audio(book, "-o", reference, "--voice", "tone", env=capped_env()).code == 0

    out = tmp_path / "story.m4b"
    gate = Gate(tmp_path / "gate", "and the boats came")  # a piece of a piece: every split is recorded by then
    proc = subprocess.Popen([sys.executable, "-m", "epub2audio.cli", str(book), "-o", str(out), "--voice", "tone",
                             "--progress", "json"], stdout=subprocess.PIPE, text=True,
                            env=capped_env(gate.faults))
    held = gate.wait_held(alive=lambda: proc.poll() is None)
    assert held.read_text() == "and the boats came"
    proc.kill()
    proc.wait()
    assert not out.exists()

    run = epub2audio(book, "-o", out, "--voice", "tone", "--progress", "json", env=capped_env())
    assert run.code == 0, run.stderr
    assert run.events("split") == []  # the recorded pieces are rendered, not the capped segments again
    assert run.events("plan")[0]["cached"] == 6  # all but the long sentence
    # its last two pieces (the held one and the next), and the one before if the kill came between
    # the worker's answer and the store's record of it
    assert [e["chapter"] for e in run.events("segment")] in ([1, 1], [1, 1, 1])
    assert sha(out) == sha(reference)

    regen = epub2audio("regen", out, "--segment", "2.2", env=capped_env())  # a segment said in pieces
    assert regen.code == 0, regen.stderr
    assert regen.stdout.startswith(f"Segment 2.2 ({LONG!r}) re-made: identical to the stored audio.")
    assert sha(out) == sha(reference)


@pytest.mark.slow
def test_a_single_word_that_reaches_the_cap_fails_clearly_and_is_never_cut(tmp_path):
    book = story_epub(tmp_path, [("One", ["Nobody spoke.", "Supercalifragilisticexpialidocious!"])])
    out = tmp_path / "story.m4b"
    run = epub2audio(book, "-o", out, "--voice", "tone", env=capped_env())
    assert run.code == 1
    assert run.stderr.strip().splitlines()[-1] == (
        "epub2audio: error: 1 segment(s) failed, e.g. chapter 1 segment 3: the voice reached its length cap on "
        "the single word 'Supercalifragilisticexpialidocious!' (injected length cap: the text has more than 20 "
        "characters); it cannot be said without cutting it. Finished segments are kept; rerun to retry.")
    assert not out.exists()
