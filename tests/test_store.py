import wave

from epub2audio.store import PlannedSegment, SegmentStore, segment_key, segment_seed
from epub2audio.worker.supervisor import VoiceDetails

DETAILS = VoiceDetails("tone", "Test tone", 16000, "python", "int16", "tone:1")


def planned(text, occurrence=0, chapter=0, index=0):
    seed = segment_seed(1986, text, occurrence)
    return PlannedSegment(chapter, index, segment_key("tone", "tone:1", text, seed), text, seed, 250)


def test_seed_depends_on_job_seed_text_and_repeat_not_position():
    assert segment_seed(1, "Hello.", 0) == segment_seed(1, "Hello.", 0)
    assert len({segment_seed(1, "Hello.", 0), segment_seed(2, "Hello.", 0),
                segment_seed(1, "Hello.", 1), segment_seed(1, "Hello!", 0)}) == 4
    assert planned("Hello.", chapter=0, index=0).key == planned("Hello.", chapter=3, index=9).key


def test_done_segment_survives_reopen_and_a_damaged_file_is_not_reused(tmp_path):
    store = SegmentStore(tmp_path)
    seg = planned("Hello.")
    store.record_done(seg, "tone", DETAILS, b"\x01\x00" * 100, 0.5)
    store.close()

    store = SegmentStore(tmp_path)
    assert store.finished(seg.key)
    with wave.open(str(store.audio_path(seg.key))) as w:
        assert (w.getframerate(), w.getnframes(), w.readframes(100)) == (16000, 100, b"\x01\x00" * 100)
    row = store.segment_row(seg.key)
    assert (row["status"], row["backend"], row["precision"], row["model_id"], row["samples"]) == (
        "done", "python", "int16", "tone:1", 100)

    with open(store.audio_path(seg.key), "r+b") as f:
        f.seek(-2, 2)
        f.write(b"\xff\xff")
    assert not store.finished(seg.key)


def test_no_temp_files_left_and_failed_segments_recorded(tmp_path):
    store = SegmentStore(tmp_path)
    ok, bad = planned("Fine."), planned("Broken.")
    store.record_done(ok, "tone", DETAILS, b"\x00\x00" * 10, 0.1)
    store.record_failed(bad, "tone", "tone:1", "worker exited with signal SIGKILL")
    assert sorted(p.name for p in store.audio_dir.iterdir()) == [f"{ok.key}.wav"]
    assert store.segment_row(bad.key)["error"] == "worker exited with signal SIGKILL"
    assert not store.finished(bad.key)


def test_plan_is_replaced_whole(tmp_path):
    store = SegmentStore(tmp_path)
    a, b = planned("A.", index=0), planned("B.", index=1)
    store.replace_plan([(0, "One", "a.xhtml")], [a, b])
    store.replace_plan([(0, "One", "a.xhtml")], [b])
    assert store.plan() == [(0, 1, b.key, 250)]
    assert store.chapters() == [(0, "One")]
