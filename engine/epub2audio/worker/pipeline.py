"""Stage pipelining inside a worker: the LLM stage of the next segment runs while this one renders.

A two-stage voice (CosyVoice3: `speech_tokens(text, seed)` = LLM, then flow + vocoder in
`render(tokens)`; detected with hasattr, so Piper stays one stage) can overlap its stages across
segments. The supervisor keeps up to `WorkerPolicy.pipeline_depth` requests in flight; the child
hands every request to a `Prefetcher` the moment it arrives. The child's main thread (the one that
loaded the voice) runs the voice's own `speech_tokens` for the queued requests, in arrival order.
A render thread calls the voice's own `synthesize` for one request at a time, in request order,
and answers in that order; when `synthesize` asks for its speech tokens, the prefetched result
(or its exception) is handed over. So all the glue between the stages (stripping, the silence
rule, PCM conversion) stays in the voice, and the output is the one sequential rendering gives:

- every segment draws only from its own generator, seeded from its own seed, so the order in
  which stages run cannot leak into the bytes;
- each stage runs at the worker's thread count T, as it does sequentially. (When this was
  written, the render stage's bytes depended on T: HiFT's STFTs split their reductions across
  threads. hift.py now runs those few ops on one thread, and a segment's bytes are the same at any
  T (tests/cosyvoice3/test_voice.py), so T is a pure speed setting here too.) A pipelined worker
  occupies up to 2T cores.
  (`torch.set_num_threads` with the OpenMP backend sets the calling thread's team size, so
  each stage thread keeps its own T; both stage threads set it explicitly.)
- the LLM runs only on the thread that loaded it, never concurrently with itself: an MLX model is
  bound to its thread (see `Prefetcher`), torch's flow and vocoder are not. One KV cache is live.

Measured (bench/pipeline.py, FULL-SIZE random weights, fp32 torch; 3 segments of 3 s speech
(75 tokens each, 9 s in all) after a 3 s voice prompt; 2 x86 cores shared with other jobs, so the
variants ran interleaved, two rounds; seconds for the 3 segments, ratio to seq T=1 in the round):

                      round 1 (load 2-3)   round 2 (load 1.1-1.7)   PCM
    seq  T=1          111 s   1.00         105 s   1.00             = reference
    pipe T=1 (depth 2)105 s   0.94          89 s   0.85             = seq T=1, byte for byte
    seq  T=2          180 s   1.62          65 s   0.62             differed (HiFT, since fixed)
    2 segments x T=1   73 s   0.65          69 s   0.65             = seq T=1

    stages at T=1, per 3 segments: LLM 23-29 s, render (flow + HiFT) 82 s

Pipelining works as designed (pipe T=1 = render time + one LLM fill: 82 + ~8 s) but on a CPU it
can save at most LLM / (LLM + render), ~20 % here for fp32 (less with a faster LLM precision),
while it occupies a second core that sits idle ~70 % of the time. The same second core does more
as a second thread of one sequential worker when the cores are free (0.62), or as a second
segment in parallel (0.65, what two workers do, at twice the memory). A 2-thread OpenMP team is
the worst choice when the cores are contended (1.62: it waits at every barrier for a descheduled
thread). So on a GPU-less machine pipelining is not the way to spend cores. It pays where the
stages run on different hardware, e.g. the MLX LLM on an Apple GPU while torch renders on the
CPU: then the overlap costs no CPU and approaches min(LLM, render) / (LLM + render) (unmeasured
here: no Apple machine).

Default: `pipeline_depth = 1` (sequential, today's behaviour). Raise it to 2 for a voice whose
LLM stage runs off the CPU.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


def two_stage(voice: Any) -> bool:
    """Does the voice split into an LLM stage (`speech_tokens`) and a render stage (`render`)?"""
    return callable(getattr(voice, "speech_tokens", None)) and callable(getattr(voice, "render", None))


def set_torch_threads(threads: int) -> None:
    """This thread's torch intra-op team size, if torch is loaded (OpenMP: per calling thread)."""
    torch = sys.modules.get("torch")
    if torch is not None and threads > 0:
        torch.set_num_threads(threads)


class Prefetcher:
    """Runs a voice's LLM stage ahead of its `synthesize` calls, on one thread of its own.

    `submit(request_id, text, seed)` queues the LLM stage of a request (call it as requests
    arrive, in order). `synthesize(request_id, text, seed)` then runs the voice's own synthesize
    with the prefetched speech tokens for that request; the voice's `speech_tokens` is wrapped
    (on the instance) so that its call from inside `synthesize` is answered from the prefetch.
    A call the prefetch cannot answer (other arguments) is run on the LLM thread too, so the
    LLM is only ever used from one thread; `misses` counts those.

    The LLM thread is a new background thread, or (`background=False`) the caller's, which then
    calls `run()` and gets it back after `close()`. The worker does the latter: its main thread
    loaded the voice, and an MLX model is bound to the thread that created its arrays and
    streams (mlx >= 0.31.2 has thread-local streams: "There is no Stream(gpu, 0) in current
    thread", ml-explore/mlx#3727, #3529), while torch (the render stage) has no such tie.
    """

    def __init__(self, voice: Any, threads: int, text_for_stage: Callable[[str], str] = str.strip,
                 background: bool = True):
        self.voice = voice
        self._stage = voice.speech_tokens  # the bound method, before wrapping
        self._text_for_stage = text_for_stage  # what synthesize passes on to speech_tokens
        self._jobs: queue.Queue = queue.Queue()
        self._futures: dict[Any, tuple[tuple[str, int], Future]] = {}
        self._lock = threading.Lock()
        self._current = threading.local()
        self.hits = 0
        self.misses = 0
        self._threads = threads
        voice.speech_tokens = self._speech_tokens  # instance attribute shadows the method
        if background:
            threading.Thread(target=self.run, name="llm-stage", daemon=True).start()

    def run(self) -> None:
        """The LLM stage loop, until `close()`."""
        set_torch_threads(self._threads)
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._stage(*args))
            except BaseException as error:  # handed to the request's synthesize, which reports it
                future.set_exception(error)

    def _queue(self, text: str, seed: int) -> Future:
        future: Future = Future()
        self._jobs.put((future, (text, seed)))
        return future

    def submit(self, request_id: Any, text: str, seed: int) -> None:
        args = (self._text_for_stage(text), int(seed))
        with self._lock:
            self._futures[request_id] = (args, self._queue(*args))

    def synthesize(self, request_id: Any, text: str, seed: int, **language) -> bytes:
        """language: the request's optional `language=` for the voice (see worker/child.py)."""
        with self._lock:
            entry = self._futures.pop(request_id, None)
        self._current.entry = entry
        try:
            return self.voice.synthesize(text, seed, **language)
        finally:
            self._current.entry = None

    def _speech_tokens(self, text: str, seed: int):
        entry = getattr(self._current, "entry", None)
        if entry is not None and entry[0] == (text, int(seed)):
            self._current.entry = None  # a second call with the same arguments is not ours
            self.hits += 1
            return entry[1].result()
        self.misses += 1
        return self._queue(text, seed).result()

    def close(self) -> None:
        self._jobs.put(None)
