"""Render on a Ray cluster: a pool of actors, each owning one disposable worker on its node.

`RayWorkerPool` has `render.WorkerPool`'s interface (`details`, `render`, `kill`, `close`), so
`render.convert` drives it unchanged: the driver keeps the plan, the SQLite segment store and the
M4B assembly; only text and seeds go out, and PCM comes back. Imported only with `--ray`.

- An actor (`SegmentActor`) holds one `Supervisor`: the same child process and protocol, memory
  budget, recycling and retries as a local worker. It asks Ray for `threads` CPUs and its worker
  runs `threads` intra-op threads, so Ray places at most (cores on that node) / threads actors on
  a node: the local rule, cores / workers, per node.
- Every segment is one actor call with its own seed, so an M4B made on Ray is byte for byte the one
  made locally: the same child turns the same (text, seed) into the same PCM, and the driver
  stores and assembles it exactly as it does for local workers.
- Backpressure: at most DEPTH calls are outstanding per actor, so the driver never holds more
  than actors x DEPTH segments of audio that are not yet in the store.
- Faults: the calls of an actor that died (killed, or its node gone) go back to the front of the
  queue and run on the other actors; a replacement is asked for and used once it has loaded its
  voice. Only the call the actor was running is charged an attempt: a segment whose actor dies
  under it `retries` + 1 times fails, as a segment that keeps killing a local worker does.
  A node that cannot load the voice fails the job with one message naming the node. Waiting for
  an actor is bounded by the policy's start timeout: never a hang.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import InputError, JobFailed
from .store import PlannedSegment
from .worker.supervisor import SegmentCapped, SegmentFailed, Supervisor, VoiceDetails, VoiceLoadFailed, WorkerPolicy

try:
    import ray
    from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError
except ImportError:  # pragma: no cover - the message is the point
    raise InputError("--ray needs Ray on this machine: pip install 'epub2audio[ray]'") from None

DEPTH = 2  # calls queued per actor: one running, one waiting, so an actor never idles on a round trip
FORWARDED_ENV = ("EPUB2AUDIO_FAULTS",)  # the engine's own tests inject worker faults through the actors
WAIT = 0.2  # seconds per ray.wait, so Ctrl-C stays responsive


def connect(address: str | None) -> None:
    """Join the cluster at `address` ("auto": the one `ray start` began on this machine), or start
    a private one on this machine, bound to loopback, with no dashboard. Nothing is downloaded."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray would otherwise report usage online
    if ray.is_initialized():
        return
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(include_dashboard=False, _node_ip_address="127.0.0.1",
                     object_store_memory=256 * 1024 * 1024, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"at {address}" if address else "on this machine"
        raise JobFailed(f"--ray: could not reach a Ray cluster {where}: {error}") from None


def missing_files(voice_options: dict) -> str | None:
    """What this node lacks of the voice's folders (a CosyVoice3 model and profile), if anything."""
    for key, what in (("model_dir", "model folder"), ("profile_dir", "voice profile folder")):
        path = voice_options.get(key)
        if path and not Path(path).is_dir():
            return f"the {what} {path} is not there"
    return None


class SegmentActor:
    """Runs on a node: one supervised worker, one segment at a time."""

    def __init__(self, config: dict, policy: WorkerPolicy, env: dict):
        os.environ.update(env)
        from .config import cache_dir

        context = ray.get_runtime_context()
        self.node = f"{ray.util.get_node_ip_address()} (node {context.get_node_id()[:8]})"
        self.config = config
        log = cache_dir() / "ray" / "worker.log"  # on this node: the driver's job folder is not here
        log.parent.mkdir(parents=True, exist_ok=True)
        self.supervisor = Supervisor(config, policy, log)

    def load(self) -> dict:
        """Start the worker and load the voice; the answer names this node either way."""
        problem = missing_files(self.config.get("options") or {})
        if problem is None:
            try:
                return {"node": self.node, "pid": os.getpid(), "details": asdict(self.supervisor.details)}
            except VoiceLoadFailed as error:
                problem = str(error)
        return {"node": self.node, "error": problem}

    def synthesize(self, text: str, seed: int):
        try:
            pcm, seconds, details = self.supervisor.synthesize(text, seed)
        except SegmentCapped as error:  # the job re-splits it: hand over the exception, not its text
            return None, 0.0, None, error
        except SegmentFailed as error:
            return None, 0.0, None, str(error)
        return pcm, seconds, asdict(details), None

    def close(self) -> None:
        self.supervisor.close()


def _cause(error: Exception) -> str:
    """The line of a Ray error that says what went wrong (its last exception line), briefly."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    said = [line for line in lines if "Error:" in line or "Error(" in line]
    return (said[-1] if said else lines[0] if lines else type(error).__name__)[:300]


@dataclass
class _Slot:
    """One actor as the driver sees it."""

    actor: object
    loading: object = None  # the ref of its load() call until it has answered
    node: str = ""
    pid: int = 0
    calls: list = field(default_factory=list)  # refs outstanding, oldest first


@dataclass
class RayStats:
    spawned: int = 0
    died: int = 0  # actors lost mid-job (killed, or their node gone)
    resent: int = 0  # segments sent again after their actor died
    load_deaths: int = 0  # actors that died before their voice loaded
    by_node: Counter = field(default_factory=Counter)  # segments rendered on each node


class RayWorkerPool:
    """`workers` Ray actors sharing one queue of segments (0: as many as the cluster has CPUs for)."""

    def __init__(self, voice: str, voice_options: dict, workers: int, threads: int,
                 policy: WorkerPolicy, log_path: Path | None = None, *, address: str | None = None):
        connect(address)
        self.threads = max(1, threads)
        self.config = {"voice": voice, "threads": self.threads, "options": voice_options}
        self.policy = policy
        self.env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        self.actor_class = ray.remote(SegmentActor).options(
            num_cpus=self.threads, max_restarts=0, max_task_retries=0, scheduling_strategy="SPREAD")
        # An actor with no CPU to get would only wait: no more than the cluster's CPUs take. (Not
        # the free ones: Ray reports CPUs freed by a pool that just ended with a delay.)
        room = max(1, int(ray.cluster_resources().get("CPU", 1)) // self.threads)
        workers = room if workers <= 0 else min(workers, room)
        self.stats = RayStats()
        self.slots: list[_Slot] = [self._spawn() for _ in range(workers)]
        self.ready: list[_Slot] = []
        self._details: VoiceDetails | None = None
        self._calls: dict[object, PlannedSegment] = {}

    def _spawn(self) -> _Slot:
        actor = self.actor_class.remote(self.config, self.policy, self.env)
        self.stats.spawned += 1
        return _Slot(actor, actor.load.remote())

    # --- actors coming up -----------------------------------------------------------------
    def _loaded(self, slot: _Slot) -> None:
        """`slot.loading` has answered: the actor joins the pool, or its node's problem ends the job."""
        ref, slot.loading = slot.loading, None
        try:
            answer = ray.get(ref)
        except RayActorError as error:  # e.g. its node went away, or epub2audio does not import there
            self.slots.remove(slot)
            self.stats.died += 1
            self.stats.load_deaths += 1
            if self.stats.load_deaths > self.policy.retries:
                raise JobFailed(f"Ray actors keep dying as they start ({_cause(error)}). Every node needs the "
                                f"same environment as this one, epub2audio included.") from None
            self.slots.append(self._spawn())
            return
        if "error" in answer:
            raise JobFailed(f"Ray node {answer['node']} cannot load voice {self.config['voice']!r}: "
                            f"{answer['error']}. Every node needs the same environment and model folders.")
        details = VoiceDetails(**answer["details"])
        if self._details is not None and details.model_id != self._details.model_id:
            raise JobFailed(f"Ray node {answer['node']} loaded model {details.model_id}, "
                            f"the others {self._details.model_id}; refusing to mix them")
        self._details = self._details or details
        slot.node, slot.pid = answer["node"], answer["pid"]
        self.ready.append(slot)

    def _await_actor(self) -> None:
        """Wait until a loading actor answers; past the start timeout that fails the job only if no actor is ready."""
        deadline = time.monotonic() + self.policy.start_timeout
        while True:
            loading = {s.loading: s for s in self.slots if s.loading is not None}
            done, _ = ray.wait(list(loading), num_returns=1, timeout=WAIT) if loading else ([], [])
            for ref in done:
                self._loaded(loading[ref])
            if done:
                return
            if time.monotonic() > deadline:
                if self.ready:
                    return
                raise JobFailed(f"no Ray actor started within {self.policy.start_timeout:.0f} s: the cluster "
                                f"has no free node with {self.threads} CPU(s) for one")
            if not loading:
                time.sleep(WAIT)

    def details(self) -> VoiceDetails:
        """The voice, once every actor has loaded it (so a node that cannot is named before any work
        goes out), or once the start timeout has passed with at least one ready."""
        deadline = time.monotonic() + self.policy.start_timeout
        while self._details is None or (any(s.loading is not None for s in self.slots) and time.monotonic() < deadline):
            self._await_actor()
        return self._details

    # --- rendering --------------------------------------------------------------------------
    def in_flight(self) -> dict[object, list[str]]:
        """Each ready actor's outstanding segment texts, oldest (running) first (for tests)."""
        calls = dict(self._calls)
        return {s.actor: [calls[ref].text for ref in list(s.calls) if ref in calls] for s in list(self.ready)}

    def render(self, todo: list[PlannedSegment], on_result) -> None:
        """Synthesise `todo`; on_result(segment, pcm | None, seconds, details, error) runs in this thread."""
        waiting = deque(todo)
        deaths: Counter = Counter()  # segment key -> actors that died running it
        self._calls = {}
        owner: dict[object, _Slot] = {}
        try:
            while waiting or self._calls:
                for slot in self.ready:
                    while waiting and len(slot.calls) < DEPTH:
                        segment = waiting.popleft()
                        ref = slot.actor.synthesize.remote(segment.text, segment.seed)
                        slot.calls.append(ref)
                        self._calls[ref], owner[ref] = segment, slot
                if not self._calls:
                    self._await_actor()
                    continue
                loading = {s.loading: s for s in self.slots if s.loading is not None}
                done, _ = ray.wait([*self._calls, *loading], num_returns=1, timeout=WAIT)
                for ref in done:
                    if ref in loading:
                        self._loaded(loading[ref])
                        continue
                    slot = owner[ref]
                    try:
                        pcm, seconds, details, error = ray.get(ref)
                    except (RayActorError, ObjectLostError) as death:  # its node may hold the audio
                        self._lost(slot, death, waiting, deaths, on_result, owner)
                        continue
                    slot.calls.remove(ref)
                    segment = self._calls.pop(ref)
                    owner.pop(ref)
                    self.stats.by_node[slot.node] += pcm is not None
                    on_result(segment, pcm, seconds, details and VoiceDetails(**details), error)
        except BaseException:
            self.kill()
            raise

    def _lost(self, slot: _Slot, death: Exception, waiting: deque, deaths: Counter, on_result, owner) -> None:
        """`slot`'s actor died: its calls go back to the queue (the running one charged), a new one is asked for."""
        self.stats.died += 1
        if slot in self.ready:
            self.ready.remove(slot)
        self.slots.remove(slot)
        segments = [self._calls.pop(ref) for ref in slot.calls]
        for ref in slot.calls:
            owner.pop(ref)
        slot.calls.clear()
        running = segments[0]
        deaths[running.key] += 1
        self.stats.resent += len(segments)
        if deaths[running.key] > self.policy.retries:
            segments = segments[1:]
            self.stats.resent -= 1
            on_result(running, None, 0.0, None,
                      f"its Ray actor on {slot.node} died {deaths[running.key]} times "
                      f"({type(death).__name__})")
        waiting.extendleft(reversed(segments))
        ray.kill(slot.actor, no_restart=True)
        self.slots.append(self._spawn())

    # --- ending -----------------------------------------------------------------------------
    def kill(self) -> None:
        for slot in self.slots:
            ray.kill(slot.actor, no_restart=True)
        self.slots, self.ready = [], []

    def close(self) -> None:
        """Let each ready worker finish cleanly, then end the actors."""
        closing = [s.actor.close.remote() for s in self.ready]
        try:
            ray.get(closing, timeout=30)
        except (RayActorError, GetTimeoutError):
            pass
        self.kill()
