"""Pipelined workers (WorkerPolicy.pipeline_depth > 1): the LLM stage of the next segment runs while
this one renders, invisibly. Real worker processes, the tiny random-weight CosyVoice3 model and the
"tone" voice (one stage), with faults injected through EPUB2AUDIO_FAULTS."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cosyvoice3.fixtures import built_tiny_model_and_anna
from epub2audio.render import WorkerPool
from epub2audio.store import PlannedSegment
from epub2audio.worker import supervisor as sv
from epub2audio.worker.pipeline import Prefetcher, two_stage
from epub2audio.worker.supervisor import Supervisor, Worker, WorkerPolicy
from run_cache import built_once

TEXTS = [
    "Once upon a time there were three little pigs.",
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells by the sea shore.",
    "   ",  # no speech tokens: the voice's silence rule must still apply
    "It was the best of times, it was the worst of times.",
    "Hello world, this is a test of the text to speech system.",
]
SEEDS = [11, 12, 13, 14, 15, 16]


@pytest.fixture
def faults(monkeypatch):
    def set_faults(spec: str):
        monkeypatch.setenv("EPUB2AUDIO_FAULTS", spec)

    return set_faults


@pytest.fixture(scope="module")
def cosy(tmp_path_factory):
    """Worker config for the tiny CosyVoice3 model with a saved profile (built once per test run)."""
    model, profile = built_tiny_model_and_anna(tmp_path_factory)
    return {"voice": "cosyvoice3:anna", "threads": 1,
            "options": {"model_dir": str(model), "profile_dir": str(profile), "extra": {"max_tokens_per_segment": 40}}}


def policy(depth: int, **kw) -> WorkerPolicy:
    return WorkerPolicy(pipeline_depth=depth, request_timeout=kw.pop("request_timeout", 60), start_timeout=120, **kw)


def run_all(supervisor: Supervisor, texts, seeds) -> dict[int, tuple]:
    """run_pipelined over (index, text, seed); results by index."""
    items = iter(list(enumerate(zip(texts, seeds))))
    out: dict[int, tuple] = {}

    def take():
        item = next(items, None)
        return None if item is None else (item[0], item[1][0], item[1][1])

    def give(index, pcm, seconds, details, error):
        assert index not in out
        out[index] = (pcm, error)

    supervisor.run_pipelined(take, give)
    return out


@pytest.fixture(scope="module")
def sequential(cosy, tmp_path_factory):
    """The reference: today's path, one request at a time. Built once per test run (its tests run
    in both xdist workers): each text's PCM in a file."""
    def build(folder: Path) -> Path:
        s = Supervisor(cosy, policy(1))
        try:
            for i, (text, seed) in enumerate(zip(TEXTS, SEEDS)):
                (folder / f"{i}.pcm").write_bytes(s.synthesize(text, seed)[0])
        finally:
            s.close()
        return folder

    folder = built_once(tmp_path_factory, "pipeline-sequential", build)
    return [(folder / f"{i}.pcm").read_bytes() for i in range(len(TEXTS))]


# --- the two-stage voice ---------------------------------------------------------------------------


@pytest.mark.slow
def test_pipelined_equals_sequential_byte_for_byte(cosy, sequential):
    s = Supervisor(cosy, policy(2))
    try:
        out = run_all(s, TEXTS, SEEDS)
        assert [out[i][0] for i in range(len(TEXTS))] == sequential
        assert all(error is None for _, error in out.values())
        assert (s.stats.spawned, s.stats.died, s.stats.recycled) == (1, 0, 0)
        assert s.config["pipeline"] == 2
    finally:
        s.close()
    assert len(sequential[3]) == 2 * int(0.2 * 24000) and not any(sequential[3])


@pytest.mark.slow
def test_worker_pool_pipelined_equals_sequential(cosy, sequential, tmp_path):
    segments = [PlannedSegment(0, i, f"k{i}", t, seed, 0) for i, (t, seed) in enumerate(zip(TEXTS, SEEDS))]
    got = {}
    pool = WorkerPool(cosy["voice"], cosy["options"], 1, 1, policy(2), tmp_path / "worker.log")
    try:
        pool.render(segments, lambda seg, pcm, seconds, details, error: got.__setitem__(seg.index, (pcm, error)))
    finally:
        pool.close()
    assert [got[i] for i in range(len(TEXTS))] == [(pcm, None) for pcm in sequential]


@pytest.mark.slow
def test_answers_come_back_in_request_order(cosy, sequential):
    w = Worker({**cosy, "pipeline": 3}, None, 120)
    try:
        for i, (text, seed) in enumerate(zip(TEXTS, SEEDS)):  # all sent before any answer is read
            w.send(100 + i, text, seed)
        answers = [w._next_answer(60, "test") for _ in TEXTS]
        assert [h["id"] for h, _ in answers] == [100 + i for i in range(len(TEXTS))]
        assert [pcm for _, pcm in answers] == sequential
    finally:
        w.close()


@pytest.mark.slow
def test_worker_killed_with_two_in_flight_retries_both(cosy, sequential, faults, tmp_path, monkeypatch):
    marker = tmp_path / "crash-once"
    marker.touch()
    faults(f"crash_on=sea shells,marker={marker}")  # TEXTS[2]: dies at its turn, TEXTS[3] in flight
    sent = []
    real_send = Worker.send

    def spy(self, request_id, text, seed):
        sent.append((self.pid, text))
        return real_send(self, request_id, text, seed)

    monkeypatch.setattr(Worker, "send", spy)
    s = Supervisor(cosy, policy(2))
    try:
        out = run_all(s, TEXTS, SEEDS)
        assert (s.stats.spawned, s.stats.died) == (2, 1)
    finally:
        s.close()
    assert [out[i] for i in range(len(TEXTS))] == [(pcm, None) for pcm in sequential]
    first, second = sent[0][0], next(pid for pid, _ in sent if pid != sent[0][0])
    on_first = [t for pid, t in sent if pid == first]
    on_second = [t for pid, t in sent if pid == second]
    assert TEXTS[2] in on_first and TEXTS[3] in on_first  # both were in flight when it died
    assert on_second[:2] == [TEXTS[2], TEXTS[3]]  # both re-sent, in order, on the fresh worker


@pytest.mark.slow
def test_prefetch_answers_the_voices_own_speech_tokens_call(cosy, sequential):
    """In process: every LLM stage comes from the prefetch thread, none is recomputed."""
    import torch

    from epub2audio.voices.registry import load_voice

    threads = torch.get_num_threads()
    voice = load_voice(cosy["voice"], threads=1, options=cosy["options"])  # sets this thread's count to 1
    assert two_stage(voice)
    prefetch = Prefetcher(voice, threads=1)
    try:
        for i, (text, seed) in enumerate(zip(TEXTS, SEEDS)):
            prefetch.submit(i, text, seed)
        assert [prefetch.synthesize(i, t, seed) for i, (t, seed) in enumerate(zip(TEXTS, SEEDS))] == sequential
        assert (prefetch.hits, prefetch.misses) == (len(TEXTS), 0)
        assert voice.synthesize(TEXTS[0], SEEDS[0]) == sequential[0]  # no prefetch: computed on demand
        assert prefetch.misses == 1
    finally:
        prefetch.close()
        torch.set_num_threads(threads)


class _StagedVoice:
    """A fake two-stage voice that proves the stages overlap: rendering segment 0 waits until the
    LLM stage of segment 1 has started (in another thread)."""

    def __init__(self):
        self.llm_started = {}
        self.threads = {}
        self.second_llm = threading.Event()

    def speech_tokens(self, text, seed):
        self.threads[("llm", seed)] = threading.current_thread().name
        self.llm_started[seed] = time.monotonic()
        if seed == 1:
            self.second_llm.set()
        return [seed] * 3

    def render(self, tokens):
        self.threads[("render", tokens[0])] = threading.current_thread().name
        if tokens[0] == 0:
            assert self.second_llm.wait(300), "the next segment's LLM stage did not run during this render"
        return bytes(tokens)

    def synthesize(self, text, seed):
        tokens = self.speech_tokens(text.strip(), seed)
        return self.render(tokens)


def test_llm_stage_of_the_next_segment_runs_during_this_render():
    voice = _StagedVoice()
    prefetch = Prefetcher(voice, threads=1)
    try:
        prefetch.submit("a", "zero", 0)
        prefetch.submit("b", "one", 1)
        assert prefetch.synthesize("a", "zero", 0) == bytes([0, 0, 0])
        assert prefetch.synthesize("b", "one", 1) == bytes([1, 1, 1])
    finally:
        prefetch.close()
    assert voice.threads[("llm", 0)] == voice.threads[("llm", 1)] == "llm-stage"
    assert voice.threads[("render", 0)] == voice.threads[("render", 1)] == threading.current_thread().name


def test_worker_mode_keeps_the_llm_on_the_thread_that_loaded_the_voice():
    """As in the worker: the caller's thread runs the LLM stage (an MLX model is bound to the thread
    that created it), a render thread runs synthesize; the stages still overlap."""
    voice = _StagedVoice()
    prefetch = Prefetcher(voice, threads=1, background=False)
    results = []

    def render():
        try:
            prefetch.submit("a", "zero", 0)
            prefetch.submit("b", "one", 1)
            results.append(prefetch.synthesize("a", "zero", 0))
            results.append(prefetch.synthesize("b", "one", 1))
        finally:
            prefetch.close()

    thread = threading.Thread(target=render, name="render-stage")
    thread.start()
    prefetch.run()
    thread.join()
    assert results == [bytes([0, 0, 0]), bytes([1, 1, 1])]
    assert voice.threads[("llm", 0)] == voice.threads[("llm", 1)] == threading.current_thread().name
    assert voice.threads[("render", 0)] == voice.threads[("render", 1)] == "render-stage"


def test_errors_in_the_llm_stage_fail_only_their_request():
    class Flaky(_StagedVoice):
        def speech_tokens(self, text, seed):
            if seed == 1:
                raise ValueError("bad segment")
            return [seed] * 2

        def render(self, tokens):
            return bytes(tokens)

    prefetch = Prefetcher(Flaky(), threads=1)
    try:
        for i in range(3):
            prefetch.submit(i, "x", i)
        assert prefetch.synthesize(0, "x", 0) == bytes([0, 0])
        with pytest.raises(ValueError, match="bad segment"):
            prefetch.synthesize(1, "x", 1)
        assert prefetch.synthesize(2, "x", 2) == bytes([2, 2])
    finally:
        prefetch.close()


# --- the supervisor's guarantees with several requests in flight (tone voice: fast) ----------------

TONE = {"voice": "tone"}
N = 6


def tone_reference():
    s = Supervisor(TONE, policy(1, request_timeout=20))
    try:
        return [s.synthesize(f"segment {i}", i)[0] for i in range(N)]
    finally:
        s.close()


@pytest.fixture(scope="module")
def tone_ref():
    return tone_reference()


def tone_run(s):
    return run_all(s, [f"segment {i}" for i in range(N)], list(range(N)))


def test_depth_one_is_todays_path():
    s = Supervisor(TONE, WorkerPolicy())
    assert WorkerPolicy().pipeline_depth == 1 and s.config == TONE  # the child is not told to pipeline


def test_one_stage_voice_with_two_in_flight(tone_ref):
    s = Supervisor(TONE, policy(2, request_timeout=20))
    try:
        out = tone_run(s)
        assert [out[i] for i in range(N)] == [(pcm, None) for pcm in tone_ref]
    finally:
        s.close()


def test_poison_segment_does_not_use_up_its_neighbours_retries(faults, tone_ref):
    faults("crash_on=segment 2")
    s = Supervisor(TONE, policy(2, request_timeout=20, retries=1))
    try:
        out = tone_run(s)
    finally:
        s.close()
    pcm, error = out[2]
    assert pcm is None and error == "worker exited with exit code 9 while synthesising (2 attempts)"
    assert [out[i] for i in range(N) if i != 2] == [(p, None) for i, p in enumerate(tone_ref) if i != 2]


def test_hung_worker_with_two_in_flight(faults, tmp_path, tone_ref):
    marker = tmp_path / "hang-once"
    marker.touch()
    faults(f"hang_on=segment 1,marker={marker}")
    s = Supervisor(TONE, policy(2, request_timeout=2, retries=1))
    try:
        out = tone_run(s)
        assert s.stats.died == 1
    finally:
        s.close()
    assert [out[i] for i in range(N)] == [(pcm, None) for pcm in tone_ref]


def test_request_cap_is_kept_with_two_in_flight(monkeypatch, tone_ref):
    served: dict[int, int] = {}
    real_send = Worker.send

    def spy(self, request_id, text, seed):
        served[self.pid] = served.get(self.pid, 0) + 1
        return real_send(self, request_id, text, seed)

    monkeypatch.setattr(Worker, "send", spy)
    s = Supervisor(TONE, policy(2, request_timeout=20, max_requests=2))
    try:
        out = tone_run(s)
        assert (s.stats.recycled, s.stats.spawned) == (3, 3)
    finally:
        s.close()
    assert sorted(served.values()) == [2, 2, 2]
    assert [out[i] for i in range(N)] == [(pcm, None) for pcm in tone_ref]


def test_recycling_waits_for_the_requests_in_flight(faults, monkeypatch, tone_ref):
    faults("leak_mb=40")
    drops = []
    real_drop = Supervisor._drop_worker

    def spy(self, kill):
        drops.append((kill, self.worker.requests if self.worker else None))
        return real_drop(self, kill)

    monkeypatch.setattr(Supervisor, "_drop_worker", spy)
    s = Supervisor(TONE, policy(2, request_timeout=20, memory_budget_mb=100))
    try:
        out = tone_run(s)
        # Baseline after the first success (one leak in it); growth passes 100 MB at answer 4,
        # when answer 5 is already in flight: the worker serves it, then it is recycled.
        assert (s.stats.recycled, s.stats.spawned) == (1, 2)
        assert s.baseline is not None
    finally:
        s.close()
    assert drops[0] == (False, 5)
    assert [out[i] for i in range(N)] == [(pcm, None) for pcm in tone_ref]


def test_failed_request_is_retried_with_two_in_flight(faults, tmp_path, tone_ref):
    marker = tmp_path / "fail-once"
    marker.touch()
    faults(f"fail_on=segment 3,marker={marker}")
    s = Supervisor(TONE, policy(2, request_timeout=20))
    try:
        out = tone_run(s)
        assert (s.stats.spawned, s.stats.died) == (1, 0)
    finally:
        s.close()
    assert [out[i] for i in range(N)] == [(pcm, None) for pcm in tone_ref]


def test_kill_stops_a_pipelined_supervisor():
    s = Supervisor(TONE, policy(2, request_timeout=20))
    items = iter(range(1000))
    got = []

    def take():
        i = next(items)
        return i, f"segment {i}", i

    def give(i, pcm, *_):
        got.append(i)
        if len(got) == 3:
            threading.Thread(target=s.kill).start()

    with pytest.raises(sv.Stopped):
        s.run_pipelined(take, give)
    assert 3 <= len(got) < 1000
