"""The supervisor against real worker processes, with faults injected through EPUB2AUDIO_FAULTS."""

import os
import signal
import sys

import pytest

from epub2audio.worker.supervisor import SegmentFailed, Supervisor, WorkerPolicy

TONE = {"voice": "tone"}


@pytest.fixture
def faults(monkeypatch):
    def set_faults(spec: str):
        monkeypatch.setenv("EPUB2AUDIO_FAULTS", spec)

    return set_faults


def make(policy=None):
    return Supervisor(TONE, policy or WorkerPolicy(request_timeout=20, start_timeout=30))


def test_worker_reports_what_it_loaded():
    s = make()
    try:
        d = s.details
        assert (d.name, d.sample_rate, d.backend, d.precision, d.model_id) == ("tone", 16000, "python", "int16", "tone:2")
        assert_load_meter(d.load)
    finally:
        s.close()


def test_the_tone_is_the_sine_model_tone_2_names():
    """tone:2 is a sine of 220 + 2·d0 Hz at 8000 + 40·d1, each sample truncated toward zero, for
    (3 + len(text)) / 14 s (d = sha256 of "seed:text"): the array pass gives those samples."""
    import hashlib
    import math
    import struct

    from epub2audio.voices.tone import SAMPLE_RATE, load

    for text, seed in [("Call me Ishmael.", 5), ("Il était une fois.", 0), ("x" * 300, 123456)]:
        d = hashlib.sha256(f"{seed}:{text}".encode()).digest()
        n, step = SAMPLE_RATE * (3 + len(text)) // 14, 2 * math.pi * (220 + d[0] * 2) / SAMPLE_RATE
        expected = struct.pack(f"<{n}h", *(int((8000 + d[1] * 40) * math.sin(step * i)) for i in range(n)))
        assert load().synthesize(text, seed) == expected


def assert_load_meter(load: dict) -> None:
    """The worker's own meter of its voice load (child.py): present, typed, sane; never timed."""
    assert set(load) == {"seconds", "private_bytes", "anonymous_bytes", "peak_private_bytes", "peak_rss_bytes"}
    assert isinstance(load["seconds"], float) and load["seconds"] >= 0
    assert all(isinstance(v, int) and v >= 0 for k, v in load.items() if k != "seconds")
    assert load["peak_private_bytes"] >= load["private_bytes"]  # the peak takes the final sample too
    if sys.platform.startswith("linux"):  # a Python process holds private, anonymous pages
        assert load["private_bytes"] > 0 and load["anonymous_bytes"] > 0 and load["peak_rss_bytes"] > 0


def test_same_request_same_bytes_across_workers():
    a, b = make(), make()
    try:
        assert a.synthesize("Call me Ishmael.", 42)[0] == b.synthesize("Call me Ishmael.", 42)[0]
        assert a.synthesize("Call me Ishmael.", 42)[0] != a.synthesize("Call me Ishmael.", 43)[0]
    finally:
        a.close()
        b.close()


def test_crashed_worker_is_respawned_and_the_segment_retried(faults, tmp_path):
    marker = tmp_path / "crash-once"
    marker.touch()
    faults(f"crash_on=boom,marker={marker}")
    s = make()
    try:
        expected = make_reference("boom goes the segment", 5)
        pcm, _, _ = s.synthesize("boom goes the segment", 5)
        assert pcm == expected
        assert (s.stats.spawned, s.stats.died) == (2, 1)
    finally:
        s.close()


def make_reference(text, seed):
    ref = make()
    try:
        saved = os.environ.pop("EPUB2AUDIO_FAULTS", None)
        try:
            return ref.synthesize(text, seed)[0]
        finally:
            if saved is not None:
                os.environ["EPUB2AUDIO_FAULTS"] = saved
    finally:
        ref.close()


def test_segment_fails_with_its_reason_after_bounded_retries(faults):
    faults("crash_on=always")
    s = Supervisor(TONE, WorkerPolicy(retries=2, request_timeout=20))
    try:
        with pytest.raises(SegmentFailed, match=r"worker exited with exit code 9 while synthesising \(3 attempts\)"):
            s.synthesize("this always crashes", 1)
        assert s.stats.spawned == 3  # the first attempt and two retries, each on a fresh worker
    finally:
        s.close()


def test_hung_worker_is_killed_after_the_timeout(faults, tmp_path):
    marker = tmp_path / "hang-once"
    marker.touch()
    faults(f"hang_on=slow,marker={marker}")
    s = Supervisor(TONE, WorkerPolicy(request_timeout=2, retries=1))
    try:
        pcm, _, _ = s.synthesize("slow segment", 3)  # the hang is an hour: only the timeout ends it
        assert pcm
        assert s.stats.died == 1
    finally:
        s.close()


def test_killed_worker_is_replaced(tmp_path):
    s = make()
    try:
        first = s.synthesize("one", 1)[0]
        os.kill(s.worker.process.pid, signal.SIGKILL)
        assert s.synthesize("one", 1)[0] == first
        assert s.stats.died == 1
    finally:
        s.close()


def test_failed_first_request_does_not_latch_the_baseline(faults):
    faults("fail_first=1,leak_mb=40")
    s = make(WorkerPolicy(memory_budget_mb=30, request_timeout=20, retries=1))
    try:
        s._ensure_worker()
        worker = s.worker
        assert s.baseline is None
        s.synthesize("first", 1)  # the worker's first request fails, the retry succeeds on it
        assert s.worker is worker
        # The baseline is the memory after the first success (which already holds one 40 MB leak),
        # not the idle memory before it.
        assert s.baseline is not None and s.baseline >= worker_memory_floor(40)
        assert s.stats.recycled == 0
    finally:
        s.close()


def worker_memory_floor(mb):
    return mb * 1024 * 1024


def test_growth_past_the_budget_recycles_between_requests(faults):
    faults("leak_mb=40")
    s = make(WorkerPolicy(memory_budget_mb=100, request_timeout=20))
    try:
        outputs = [s.synthesize(f"segment {i}", i)[0] for i in range(6)]
        # Baseline after request 1; +40 MB per request; growth passes 100 MB after request 4.
        assert s.stats.recycled == 1
        assert s.stats.spawned == 2
        assert outputs == [make_reference(f"segment {i}", i) for i in range(6)]
    finally:
        s.close()


def test_request_cap_recycles():
    s = make(WorkerPolicy(max_requests=2, request_timeout=20))
    try:
        for i in range(5):
            s.synthesize(f"segment {i}", i)
        assert (s.stats.recycled, s.stats.spawned) == (2, 3)
    finally:
        s.close()


def test_voice_load_failure_is_reported_not_retried():
    from epub2audio.worker.supervisor import VoiceLoadFailed

    s = Supervisor({"voice": "no-such-voice"}, WorkerPolicy())
    with pytest.raises(VoiceLoadFailed, match="unknown voice 'no-such-voice'"):
        s.details


# --- several workers on one device -------------------------------------------------------------------

COSY_TEXTS = ["Once upon a time there were three little pigs.", "The quick brown fox jumps over the lazy dog.",
              "She sells sea shells by the sea shore.", "It was the best of times, it was the worst of times.",
              "Hello world, this is a test.", "Call me Ishmael."]


@pytest.fixture(scope="module")
def cosy(tmp_path_factory):
    """The tests' tiny random CosyVoice3 with a saved profile, its LLM on torch with the static
    decode step: what a CUDA worker runs (there replayed as a CUDA graph), here eagerly."""
    from cosyvoice3.fixtures import built_tiny_model_and_anna

    model, profile = built_tiny_model_and_anna(tmp_path_factory)
    return {"voice": "cosyvoice3:anna", "threads": 1,
            "options": {"model_dir": str(model), "profile_dir": str(profile),
                        "extra": {"max_tokens_per_segment": 40, "llm_backend": "torch", "llm_step": "static"}}}


@pytest.mark.slow
def test_a_segments_bytes_are_the_same_alone_and_among_two_or_three_workers(cosy, tmp_path, monkeypatch):
    from epub2audio.render import WorkerPool
    from epub2audio.store import PlannedSegment

    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    policy = WorkerPolicy(request_timeout=120, start_timeout=300)
    segments = [PlannedSegment(0, i, f"k{i}", text, 100 + i, 0) for i, text in enumerate(COSY_TEXTS)]
    solo = Supervisor(cosy, policy)
    try:
        alone = [solo.synthesize(s.text, s.seed)[0] for s in segments]
        assert "+step-static" in solo.details.model_id
    finally:
        solo.close()
    assert len(set(alone)) == len(alone) and all(len(pcm) > 0 for pcm in alone)  # six different sounds
    for workers, order in ((2, segments), (3, segments[::-1])):  # other neighbours, other order
        got = {}
        pool = WorkerPool(cosy["voice"], cosy["options"], workers, 1, policy, tmp_path / "worker.log")
        try:
            pool.render(order, lambda seg, pcm, seconds, details, error: got.__setitem__(seg.index, (pcm, error)))
            pids = {s.worker.pid for s in pool.supervisors if s.worker is not None}
        finally:
            pool.close()
        assert [got[i] for i in range(len(segments))] == [(pcm, None) for pcm in alone], workers
        assert len(pids) == workers  # every slot ran its own worker process


def test_a_pools_workers_outlive_the_render_threads_that_started_them():
    """Workers die with the thread that started them (PR_SET_PDEATHSIG); the supervisor starts
    them from one long-lived thread, so a pool's second slot keeps its worker from one render call
    (one book of a library) to the next instead of reloading the voice each time."""
    from epub2audio.render import WorkerPool
    from epub2audio.store import PlannedSegment

    segments = [PlannedSegment(0, i, f"k{i}", f"Sentence number {i}.", i, 0) for i in range(6)]
    pool = WorkerPool("tone", {}, 2, 1, WorkerPolicy(request_timeout=20, start_timeout=30), None)
    try:
        pool.details()  # slot 1 from this thread, slot 2 from its render thread
        for _ in range(3):
            got = []
            pool.render(segments, lambda segment, pcm, seconds, details, error: got.append(error))
            assert got == [None] * len(segments)
        assert [(s.stats.spawned, s.stats.died) for s in pool.supervisors] == [(1, 0), (1, 0)]
    finally:
        pool.close()
