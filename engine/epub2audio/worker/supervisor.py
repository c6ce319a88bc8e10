"""Spawn, watch, recycle and replace worker processes.

The parent never imports a model runtime. A worker is disposable: if it dies, hangs past its
timeout or grows past its memory budget (host memory plus what it holds on a GPU: the child
reports both, see memory.py for why GPU workers grow), we kill it and start another; the request it was working
on is retried a bounded number of times. Memory growth is measured against a warm baseline taken
after the worker's first *successful* request (a model's arenas fill on first use, so the idle
footprint would make every worker look leaky; a failed request proves nothing about warm size).

`synthesize` sends one request at a time. `run_pipelined` (WorkerPolicy.pipeline_depth > 1) keeps
several in flight so a two-stage voice can overlap its stages (pipeline.py), with the same retry,
respawn, timeout and recycle guarantees (see its docstring for how a death with several requests in
flight is attributed).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from . import protocol

MB = 1024 * 1024


@dataclass
class WorkerPolicy:
    memory_budget_mb: int = 2048  # growth above the warm baseline that triggers a recycle
    max_memory_mb: int = 0  # absolute cap on the worker's private memory; 0 = none
    max_requests: int = 0  # recycle after this many requests; 0 = never
    request_timeout: float = 600.0  # seconds for one segment before the worker is killed
    start_timeout: float = 600.0  # seconds to load a voice
    retries: int = 2  # attempts after the first one, each on a fresh worker if the last one died
    pipeline_depth: int = 1  # requests in flight per worker; 2 overlaps a two-stage voice's stages (pipeline.py)


@dataclass
class VoiceDetails:
    name: str
    narrator: str
    sample_rate: int
    backend: str
    precision: str
    model_id: str
    versions: dict = field(default_factory=dict)
    # the worker's own meter of its load (child.py): seconds, private_bytes and anonymous_bytes
    # after it, peak_private_bytes (sampled) and peak_rss_bytes during it; not part of identity
    load: dict = field(default_factory=dict, compare=False)
    # the CUDA device the worker computes on ("NVIDIA H200"), "" on the CPU: where `--workers auto`
    # measures (autoscale.py); the model id already records the device kind
    device: str = field(default="", compare=False)


class WorkerDied(Exception):
    """The worker process exited, was killed, or stopped answering."""


class RequestFailed(Exception):
    """The worker is alive but could not synthesise this request."""


class RequestCapped(RequestFailed):
    """The voice reached its length cap on this request (voices.base.LengthCapReached)."""


class SegmentFailed(Exception):
    """A segment kept failing after every retry."""


class SegmentCapped(SegmentFailed):
    """The voice reached its length cap on this segment: its audio would be cut. Not retried (the
    same text and seed reach it again); the job re-says the text in smaller pieces (render.py).
    The pools hand this exception itself to their callers as the segment's error."""


class VoiceLoadFailed(Exception):
    """The worker could not load the voice at all; retrying will not help."""


class Stopped(Exception):
    """The supervisor was told to stop (Ctrl-C, or the job is ending)."""


class _Spawner:
    """Starts worker processes from one thread that lives as long as this process.

    A worker dies with its parent (child.py, PR_SET_PDEATHSIG), and Linux takes "parent" to be the
    *thread* that started it: a worker started from a pool's render thread was killed as soon as
    that thread ended, so every slot but the first reloaded its voice on each render call (each
    book of a library: measured, one death per slot per call). Popen itself returns at once (the
    child loads its voice on its own), so workers still start in parallel."""

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def popen(self, *args, **kwargs) -> subprocess.Popen:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="worker-spawner", daemon=True)
                self._thread.start()
        done: queue.Queue = queue.Queue(maxsize=1)
        self._jobs.put((args, kwargs, done))
        ok, value = done.get()
        if not ok:
            raise value
        return value

    def _run(self) -> None:
        while True:
            args, kwargs, done = self._jobs.get()
            try:
                done.put((True, subprocess.Popen(*args, **kwargs)))
            except BaseException as error:  # handed to the caller, which raises it
                done.put((False, error))


_spawner = _Spawner()


class Worker:
    """One child process and the thread that reads its answers."""

    def __init__(self, config: dict, log_path: Path | None, start_timeout: float):
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.process = _spawner.popen(  # from a long-lived thread: see _Spawner
            [sys.executable, "-m", "epub2audio.worker.child", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
        )
        self._answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read_answers, daemon=True).start()
        header, _ = self._next_answer(start_timeout, "starting")
        if header["type"] == "error":
            self.kill()
            raise VoiceLoadFailed(header["message"])
        self.pid = header["pid"]
        self.details = VoiceDetails(**header["info"], load=header.get("load", {}), device=header.get("device", ""))
        self.memory = header.get("memory", 0)
        self.device_memory = header.get("device_memory", 0)  # CUDA reserved / MPS driver-allocated bytes
        self.requests = 0

    def _read_answers(self) -> None:
        try:
            while (frame := protocol.receive(self.process.stdout)) is not None:
                self._answers.put(frame)
        except (protocol.ProtocolError, ValueError, OSError):
            pass
        self._answers.put(None)

    def _next_answer(self, timeout: float, doing: str) -> tuple[dict, bytes]:
        try:
            frame = self._answers.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise WorkerDied(f"worker timed out after {timeout:.0f} s while {doing}") from None
        if frame is None:
            code = self.process.wait()
            raise WorkerDied(f"worker exited with {_describe_exit(code)} while {doing}")
        return frame

    def synthesize(self, request_id: int, text: str, seed: int, timeout: float,
                   lang: str | None = None) -> tuple[bytes, dict]:
        self.send(request_id, text, seed, **_lang(lang))
        return self.answer(request_id, timeout)

    def send(self, request_id: int, text: str, seed: int, lang: str | None = None) -> None:
        request = {"type": "synthesize", "id": request_id, "text": text, "seed": seed}
        if lang:  # the language of a passage not in the book's; voices may ignore it
            request["lang"] = lang
        try:
            protocol.send(self.process.stdin, request)
        except (BrokenPipeError, OSError):
            code = self.process.wait()
            raise WorkerDied(f"worker exited with {_describe_exit(code)}") from None

    def answer(self, request_id: int, timeout: float) -> tuple[bytes, dict]:
        """The answer to `request_id`, which must be the oldest request sent and not answered."""
        header, payload = self._next_answer(timeout, "synthesising")
        if header.get("id") != request_id:
            self.kill()
            raise WorkerDied(f"worker answered request {header.get('id')} when {request_id} was due")
        self.requests += 1
        if header["type"] == "error":
            raise (RequestCapped if header.get("capped") else RequestFailed)(header["message"])
        self.memory = header.get("memory", 0)
        self.device_memory = header.get("device_memory", 0)
        return payload, header

    def close(self, grace: float = 10.0) -> None:
        """Ask the worker to finish (end of its input), kill it if it does not."""
        try:
            self.process.stdin.close()
            self.process.wait(timeout=grace)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        self._close_log()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not subprocess.DEVNULL:
            self._log.close()
            self._log = subprocess.DEVNULL


def _lang(lang: str | None) -> dict:
    """A segment's language as keyword arguments, none when it is the book's."""
    return {"lang": lang} if lang else {}


@dataclass
class _Job:
    """One item on its way through `Supervisor.run_pipelined`."""

    item: object
    text: str
    seed: int
    lang: str | None = None
    request_id: int = 0
    reasons: list[str] = field(default_factory=list)  # one per charged attempt
    alone: bool = False  # was in flight when a worker died beside another: run it by itself


def _describe_exit(code: int) -> str:
    if code < 0:
        import signal

        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


@dataclass
class SupervisorStats:
    spawned: int = 0
    recycled: int = 0  # replaced on purpose (memory budget, request cap)
    died: int = 0  # crashed, killed or timed out
    memory_samples: list[tuple[float, int]] = field(default_factory=list)  # (time, private + accelerator bytes)


class Supervisor:
    """Keeps one worker slot alive and answers synthesis requests through it."""

    def __init__(self, config: dict, policy: WorkerPolicy, log_path: Path | None = None):
        if policy.pipeline_depth > 1:  # the child overlaps stages only when told more will come
            config = {**config, "pipeline": policy.pipeline_depth}
        self.config = config
        self.policy = policy
        self.log_path = log_path
        self.worker: Worker | None = None
        self.baseline: int | None = None  # warm private memory of the current worker
        self.stats = SupervisorStats()
        self._lock = threading.Lock()
        self._next_id = 0
        self.stopping = False

    @property
    def details(self) -> VoiceDetails:
        """What the worker loaded (starting one if needed, with the same retries as a request)."""
        reasons = []
        for _attempt in range(self.policy.retries + 1):
            try:
                return self._ensure_worker().details
            except WorkerDied as error:
                if self.stopping:
                    raise Stopped() from None
                reasons.append(str(error))
                self.stats.died += 1
                self._drop_worker(kill=True)
        raise VoiceLoadFailed("; ".join(reasons))

    def _ensure_worker(self) -> Worker:
        with self._lock:
            if self.stopping:
                raise Stopped()
            if self.worker is None:
                self.worker = Worker(self.config, self.log_path, self.policy.start_timeout)
                self.baseline = None
                self.stats.spawned += 1
            return self.worker

    def synthesize(self, text: str, seed: int, lang: str | None = None) -> tuple[bytes, float, VoiceDetails]:
        """PCM for one segment, retrying on fresh workers; raises SegmentFailed at the end."""
        reasons = []
        for _attempt in range(self.policy.retries + 1):
            self._next_id += 1
            try:
                worker = self._ensure_worker()  # a worker can die while loading, too
                pcm, header = worker.synthesize(self._next_id, text, seed, self.policy.request_timeout, **_lang(lang))
            except WorkerDied as error:
                if self.stopping:
                    raise Stopped() from None
                reasons.append(str(error))
                self.stats.died += 1
                self._drop_worker(kill=True)
                continue
            except RequestCapped as error:
                raise SegmentCapped(str(error)) from None
            except RequestFailed as error:
                reasons.append(str(error))
                continue
            self._after_success(worker)
            return pcm, header["seconds"], worker.details
        raise SegmentFailed(f"{'; '.join(dict.fromkeys(reasons))} ({len(reasons)} attempts)")

    def _after_success(self, worker: Worker) -> None:
        if self._needs_recycling(worker):
            self.stats.recycled += 1
            self._drop_worker(kill=False)

    def _needs_recycling(self, worker: Worker) -> bool:
        """Record the worker's memory after a success (the first one latches the baseline) and
        say whether it has outgrown its budget or served its quota. Memory is host + accelerator."""
        memory = worker.memory + worker.device_memory
        self.stats.memory_samples.append((time.time(), memory))
        if self.baseline is None:
            self.baseline = memory
        policy = self.policy
        grown = memory - self.baseline > policy.memory_budget_mb * MB
        too_big = policy.max_memory_mb and memory > policy.max_memory_mb * MB
        worn_out = policy.max_requests and worker.requests >= policy.max_requests
        return bool(grown or too_big or worn_out)

    def run_pipelined(self, take, give) -> None:
        """Synthesise items with up to `policy.pipeline_depth` requests in flight on the worker.

        `take()` returns the next `(item, text, seed)` or `(item, text, seed, lang)`, or None when there is no more work; it is
        called only when a request slot is free. `give(item, pcm, seconds, details, error)` gets
        each result (pcm None and error set for a segment that failed after its retries: a str,
        or a SegmentCapped at once for one that reached the voice's length cap), in completion
        order, in this thread. The guarantees of `synthesize` hold:

        - a request that fails in a live worker is retried (on that worker) up to `retries` times;
        - if the worker dies or times out with one request in flight, that request is charged an
          attempt and retried on a fresh worker; with several in flight nobody can tell which
          one killed it, so none is charged and all are re-sent *one at a time* (depth 1) until
          each has succeeded or failed on its own: a poisonous segment cannot use up its
          neighbour's retries;
        - the memory baseline latches after the worker's first success; a recycle (memory budget,
          request quota) stops sending, waits until nothing is in flight, then replaces the
          worker; the quota also caps what is sent to a worker, so it never serves more.
        """
        depth = max(1, self.policy.pipeline_depth)
        pending: deque[_Job] = deque()  # to send: retries first, in order
        flight: deque[_Job] = deque()  # sent to the current worker, oldest first
        draining = False  # a recycle is due once `flight` is empty
        exhausted = False
        worker: Worker | None = None
        try:
            while True:
                if self.stopping:
                    raise Stopped()
                if draining and not flight:
                    self.stats.recycled += 1
                    self._drop_worker(kill=False)
                    draining, worker = False, None
                # fill the free slots
                while not draining:
                    window = 1 if any(j.alone for j in (*pending, *flight)) else depth
                    if worker is not None and self.policy.max_requests:
                        left = self.policy.max_requests - worker.requests  # failures count too
                        if left <= 0 and not flight:
                            draining = True
                            break
                        window = min(window, left)
                    if len(flight) >= window:
                        break
                    if pending:
                        job = pending.popleft()
                    elif exhausted or (taken := take()) is None:
                        exhausted = True
                        break
                    else:
                        job = _Job(*taken)
                    self._next_id += 1
                    job.request_id = self._next_id
                    flight.append(job)
                    try:
                        worker = self._ensure_worker()  # a worker can die while loading, too
                        worker.send(job.request_id, job.text, job.seed, **_lang(job.lang))
                    except WorkerDied as error:
                        worker = self._after_death(error, flight, pending, give)
                if not flight:
                    if draining or pending:
                        continue
                    return
                job = flight[0]
                try:
                    pcm, header = worker.answer(job.request_id, self.policy.request_timeout)
                except WorkerDied as error:
                    worker = self._after_death(error, flight, pending, give)
                    draining = False
                    continue
                except RequestCapped as error:
                    flight.popleft()
                    give(job.item, None, 0.0, None, SegmentCapped(str(error)))
                    continue
                except RequestFailed as error:
                    flight.popleft()
                    self._charge(job, str(error), pending, give)
                    continue
                flight.popleft()
                give(job.item, pcm, header["seconds"], worker.details, None)
                if self._needs_recycling(worker):
                    draining = True
        except Stopped:
            raise
        except Exception as error:  # a supervisor bug must not lose the segments it holds
            for job in (*flight, *pending):
                give(job.item, None, 0.0, None, f"{type(error).__name__}: {error}")
            raise

    def _after_death(self, error: WorkerDied, flight: deque, pending: deque, give) -> None:
        """The worker is gone with `flight` sent to it: charge or isolate them, queue them again."""
        if self.stopping:
            raise Stopped() from None
        self.stats.died += 1
        self._drop_worker(kill=True)
        victims = list(flight)
        flight.clear()
        if len(victims) == 1:
            self._charge(victims[0], str(error), pending, give)
        else:
            for job in reversed(victims):
                job.alone = True
                pending.appendleft(job)
        return None

    def _charge(self, job: "_Job", reason: str, pending: deque, give) -> None:
        job.reasons.append(reason)
        if len(job.reasons) > self.policy.retries:
            reasons = job.reasons
            give(job.item, None, 0.0, None, f"{'; '.join(dict.fromkeys(reasons))} ({len(reasons)} attempts)")
        else:
            pending.appendleft(job)

    def _drop_worker(self, kill: bool) -> None:
        with self._lock:
            worker, self.worker, self.baseline = self.worker, None, None
        if worker is not None:
            worker.kill() if kill else worker.close()

    def kill(self) -> None:
        """Stop for good: kill the worker now and refuse further requests."""
        self.stopping = True
        self._drop_worker(kill=True)

    def close(self) -> None:
        self._drop_worker(kill=False)
