"""`--workers auto` (worker/autoscale.py, render._auto_workers): the count chosen from measured
throughput curves, the measure counting finished segments only, and the per-GPU-and-voice cache.
The GPU is played by the tone voice with EPUB2AUDIO_FAULTS=device_name=... (worker/faults.py)."""

from __future__ import annotations

import json
import os

import pytest

from cli_run import SAMPLE, epub2audio
from epub2audio import render
from epub2audio.store import PlannedSegment
from epub2audio.worker.autoscale import (AutoWorkersArgs, Choice, Throughput, WorkerCountCache, cache_key,
                                         choose_workers)
from epub2audio.worker.supervisor import Supervisor, WorkerPolicy


def measurer(curve: dict[int, float | None]):
    """A fake measure(n) over a fixed curve that records which counts were asked for."""
    asked = []

    def measure(n):
        asked.append(n)
        return curve[n]

    return measure, asked


@pytest.mark.parametrize("curve, workers, asked", [
    ({1: 1.0, 2: 1.9, 3: 2.7, 4: 2.9, 5: 3.0}, 3, [1, 2, 3, 4]),  # 4 adds 7.4 %: stop at 3
    ({1: 1.0, 2: 1.0}, 1, [1, 2]),  # flat: one worker
    ({1: 1.0, 2: 0.8}, 1, [1, 2]),  # decreasing (the GPU was already full)
    ({1: 1.0, 2: 1.5, 3: 1.45, 4: 2.5}, 2, [1, 2, 3]),  # noisy dip at 3: never looks beyond it
    ({1: 1.0, 2: 1.12, 3: 1.2}, 2, [1, 2, 3]),  # +12 % kept, then +7 % not
    ({n: float(n) for n in range(1, 9)}, 8, list(range(1, 9))),  # linear to the maximum: 8, no 9th
    ({1: 1.0, 2: 1.8, 3: None}, 2, [1, 2, 3]),  # 3 workers could not start (GPU full)
    ({1: 0.0}, 1, [1]),  # nothing measurable: one worker, nothing more tried
])
def test_choice_stops_where_a_worker_adds_less_than_10_percent(curve, workers, asked):
    measure, seen = measurer(curve)
    choice = choose_workers(measure)
    assert choice.workers == workers
    assert seen == asked
    assert [n for n, _ in choice.curve] == asked


def test_choice_respects_its_maximum_and_gain():
    measure, seen = measurer({n: float(n) for n in range(1, 9)})
    assert choose_workers(measure, AutoWorkersArgs(max_workers=4)).workers == 4 and seen == [1, 2, 3, 4]
    measure, _ = measurer({1: 1.0, 2: 1.3, 3: 1.6})  # +30 %, then +23 %
    assert choose_workers(measure, AutoWorkersArgs(min_gain=0.25)).workers == 2
    measure, seen = measurer({1: 1.0, 2: 1.9, 4: 3.5, 8: 3.7})  # doubling, as bench/gpu_check.py measures
    assert choose_workers(measure, AutoWorkersArgs(counts=(1, 2, 4, 8))).workers == 4 and seen == [1, 2, 4, 8]


def test_throughput_counts_finished_segments_only():
    meter = Throughput(sample_rate=24000)
    meter.add(b"\0" * 2 * 24000)  # 1 s finished
    meter.add(None, "RuntimeError: injected failure")  # failed after its retries
    meter.add(None, render.SegmentCapped("cap"))  # reached the length cap: re-split later, not audio now
    meter.add(b"\0" * 2 * 12000)  # 0.5 s
    assert (meter.finished, meter.failed, meter.audio_seconds) == (2, 2, 1.5)
    assert meter.rate(3.0) == 0.5
    assert meter.rate(0.0) == 0.0


def test_cache_per_device_voice_and_depth(tmp_path):
    cache = WorkerCountCache(tmp_path / "sub" / "workers-auto.json")
    key = cache_key("NVIDIA H200", "cosyvoice3-abc+torch:fp32@cuda", 1)
    assert cache.get(key) is None
    cache.put(key, Choice(4, [(1, 1.0), (2, 1.9), (3, 2.6), (4, 3.3), (5, 3.4)], "worker 5 added +3.0%"))
    assert cache.get(key) == 4
    assert cache.get(cache_key("NVIDIA H100", "cosyvoice3-abc+torch:fp32@cuda", 1)) is None  # another GPU
    assert cache.get(cache_key("NVIDIA H200", "cosyvoice3-abc+torch:bf16@cuda", 1)) is None  # another precision
    assert cache.get(cache_key("NVIDIA H200", "cosyvoice3-abc+torch:fp32@cuda", 2)) is None  # pipelined workers
    assert json.loads(cache.path.read_text())[key]["curve"][1] == [2, 1.9]
    assert [p.name for p in cache.path.parent.iterdir()] == ["workers-auto.json"]  # no temporary file left
    cache.path.write_text("{not json")
    assert cache.get(key) is None  # unreadable: measure again rather than fail the job


# --- the measure of a real pool -------------------------------------------------------------------


def test_pool_measure_counts_only_the_segments_that_finished(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_FAULTS", "fail_on=never said")
    meters = []

    class Recorded(Throughput):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            meters.append(self)

    monkeypatch.setattr(render, "Throughput", Recorded)
    segments = [PlannedSegment(0, 0, "k0", "A sentence that is said.", 5, 0),
                PlannedSegment(0, 1, "k1", "This one is never said.", 6, 0)]
    policy = WorkerPolicy(request_timeout=20, start_timeout=30, retries=0)
    pool = render.WorkerPool("tone", {}, 1, 1, policy, tmp_path / "worker.log")
    solo = Supervisor({"voice": "tone"}, policy)
    try:
        said = solo.synthesize(segments[0].text, segments[0].seed)[0]
        rate = pool.measure(2, segments, sample_rate=16000, per_worker=2)  # 4 segments: 2 said, 2 failed
        assert len(pool.supervisors) == 2
    finally:
        pool.close()
        solo.close()
    (meter,) = meters
    assert (meter.finished, meter.failed) == (2, 2)
    assert meter.audio_seconds == 2 * len(said) / 2 / 16000
    assert rate > 0


class FakePool:
    def __init__(self, curve):
        self.curve, self.measured, self.sizes = curve, [], []

    def measure(self, n, segments, sample_rate, per_worker):
        self.measured.append((n, len(segments), sample_rate, per_worker))
        return self.curve[n]

    def resize(self, n):
        self.sizes.append(n)


class Events:
    def __init__(self):
        self.seen = []

    def emit(self, event, **fields):
        self.seen.append({"event": event, **fields})


def gpu_details(device="NVIDIA H200"):
    return render.VoiceDetails("cosyvoice3:anna", "CosyVoice3 (anna)", 24000, "torch", "fp32",
                               "cosyvoice3-x+torch:fp32+step-static@cuda", device=device)


def test_auto_measures_on_the_books_first_segments_once_then_reads_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    planned = [PlannedSegment(0, i, f"k{i}", f"Sentence {i}.", i, 0) for i in range(40)]
    pool, events = FakePool({1: 1.0, 2: 1.9, 3: 2.6, 4: 2.7}), Events()
    render._auto_workers(pool, gpu_details(), planned, WorkerPolicy(), events)
    assert pool.measured == [(n, 16, 24000, 2) for n in (1, 2, 3, 4)]  # the first 8 x 2 segments
    assert pool.sizes == [3]
    assert events.seen == [{"event": "workers", "device": "NVIDIA H200", "workers": 3, "measured": True,
                            "curve": [[1, 1.0], [2, 1.9], [3, 2.6], [4, 2.7]],
                            "reason": "worker 4 added +3.8% (< 10%)"}]
    # the next book, same GPU and voice: no measuring
    again, events = FakePool({}), Events()
    render._auto_workers(again, gpu_details(), planned, WorkerPolicy(), events)
    assert (again.measured, again.sizes) == ([], [3])
    assert events.seen == [{"event": "workers", "device": "NVIDIA H200", "workers": 3, "measured": False}]
    # another GPU measures for itself
    other = FakePool({1: 1.0, 2: 1.05})
    render._auto_workers(other, gpu_details("NVIDIA L4"), planned, WorkerPolicy(), Events())
    assert (len(other.measured), other.sizes) == (2, [1])


def test_auto_leaves_cpu_workers_and_pools_that_cannot_resize_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    planned = [PlannedSegment(0, 0, "k0", "One.", 1, 0)]
    pool, events = FakePool({1: 1.0}), Events()
    render._auto_workers(pool, gpu_details(device=""), planned, WorkerPolicy(), events)  # a CPU worker
    assert (pool.measured, pool.sizes, events.seen) == ([], [], [])

    class RayLike:  # no measure / resize
        pass

    render._auto_workers(RayLike(), gpu_details(), planned, WorkerPolicy(), events)
    assert events.seen == [] and not (tmp_path / "cache").exists()


# --- the job ----------------------------------------------------------------------------------------


def auto_env(tmp_path, device_name: str | None) -> dict:
    env = {**os.environ, "EPUB2AUDIO_CACHE_DIR": str(tmp_path / "cache"),
           "EPUB2AUDIO_CONFIG": str(tmp_path / "no-config.toml")}
    if device_name:
        env["EPUB2AUDIO_FAULTS"] = f"device_name={device_name}"
    return env


@pytest.mark.slow
def test_auto_on_a_gpu_measures_once_then_uses_the_cache_and_the_bytes_never_change(tmp_path):
    one = tmp_path / "one.m4b"
    run = epub2audio(SAMPLE, "-o", one, "--voice", "tone", "--no-verify", "--workers", "1",
                     "--progress", "json", env=auto_env(tmp_path, "Fake GPU"))
    assert run.code == 0, run.stderr
    assert run.events("workers") == []  # a number of workers: nothing measured

    auto = tmp_path / "auto.m4b"
    run = epub2audio(SAMPLE, "-o", auto, "--voice", "tone", "--no-verify", "--workers", "auto",
                     "--progress", "json", env=auto_env(tmp_path, "Fake GPU"))
    assert run.code == 0, run.stderr
    (event,) = run.events("workers")
    assert event["measured"] is True and event["device"] == "Fake GPU"
    assert 1 <= event["workers"] <= 8 and [n for n, _ in event["curve"]][:2] == [1, 2]
    assert auto.read_bytes() == one.read_bytes()
    cached = json.loads((tmp_path / "cache" / "workers-auto.json").read_text())
    (key,) = cached
    assert key.startswith("Fake GPU|tone:2|") and cached[key]["workers"] == event["workers"]



@pytest.mark.slow
def test_auto_on_the_cpu_is_one_worker_and_measures_nothing(tmp_path):
    out = tmp_path / "cpu.m4b"
    run = epub2audio(SAMPLE, "-o", out, "--voice", "tone", "--no-verify", "--workers", "auto",
                     "--progress", "json", env=auto_env(tmp_path, None))
    assert run.code == 0, run.stderr
    assert run.events("workers") == []
    assert not (tmp_path / "cache" / "workers-auto.json").exists()
