"""The worker process: loads one voice, then answers synthesis requests until its input closes.

Run as `python -m epub2audio.worker.child '<json config>'`. stdout carries protocol frames only:
anything a library prints is redirected to stderr so it cannot corrupt a frame.

With `"pipeline": n > 1` in the config and a two-stage voice, the LLM stage of queued requests runs
on the main thread while a second thread renders (pipeline.py); answers still come in request order.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import threading
import time

from ..voices.base import LengthCapReached
from . import protocol
from .faults import Faults
from .memory import PeakSampler, accelerator_bytes, accelerator_name, anonymous_bytes, peak_rss_bytes, private_bytes
from .pipeline import Prefetcher, set_torch_threads, two_stage


def _die_with_parent() -> None:
    # If the parent is killed with SIGKILL it cannot clean up; the kernel then kills us too.
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)


def main() -> int:
    config = json.loads(sys.argv[1])
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = os.fdopen(0, "rb")
    # Ctrl-C reaches the whole process group; the parent decides what happens to us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    faults = Faults.from_env()

    from ..voices.registry import load_voice

    started = time.perf_counter()
    try:
        with PeakSampler() as meter:
            voice = load_voice(config["voice"], threads=config.get("threads", 1), options=config.get("options"))
    except Exception as error:  # reported to the parent, which turns it into a clear message
        protocol.send(out, {"type": "error", "message": f"could not load voice: {error}"})
        return 3
    load_seconds = time.perf_counter() - started
    info = voice.info
    memory = private_bytes()
    protocol.send(out, {
        "type": "ready",
        "pid": os.getpid(),
        "info": {
            "name": info.name, "narrator": info.narrator, "sample_rate": info.sample_rate,
            "backend": info.backend, "precision": info.precision, "model_id": info.model_id,
            "versions": info.versions,
        },
        "load": {  # the voice's load, by this process's own meter (memory.py)
            "seconds": load_seconds,
            "private_bytes": memory,
            "anonymous_bytes": anonymous_bytes(),
            "peak_private_bytes": max(meter.peak, memory),
            "peak_rss_bytes": peak_rss_bytes(),
        },
        "memory": memory,
        "device_memory": accelerator_bytes(),  # this process's own: each worker on a GPU counts its own
        "device": faults.device_name or accelerator_name(),  # "" on the CPU
    })

    depth = int(config.get("pipeline", 1))
    if depth > 1 and two_stage(voice):
        return _serve_pipelined(voice, stdin, out, faults, config.get("threads", 1))

    while True:
        frame = protocol.receive(stdin)
        if frame is None:
            return 0
        _answer(out, frame[0], faults, lambda r: voice.synthesize(r["text"], r["seed"], **language(r)))


def language(request: dict) -> dict:
    """The optional language of a request, as keyword arguments for Voice.synthesize: none when
    the segment is in the book's language, so voices written before languages keep working."""
    return {"language": request["lang"]} if request.get("lang") else {}


def _answer(out, request: dict, faults: Faults, synthesize) -> None:
    """Synthesise one request and send its audio, or its error: a failed request leaves the
    worker alive for the next one."""
    if request["type"] != "synthesize":
        protocol.send(out, {"type": "error", "id": request.get("id"), "message": "unknown request"})
        return
    started = time.perf_counter()
    try:
        faults.before(request["text"])
        pcm = synthesize(request)
    except LengthCapReached as error:  # not a failure of this text's pieces: the job re-splits it
        protocol.send(out, {"type": "error", "id": request["id"], "capped": True, "message": str(error)})
        return
    except Exception as error:
        protocol.send(out, {"type": "error", "id": request["id"], "message": f"{type(error).__name__}: {error}"})
        return
    faults.after()
    protocol.send(out, {"type": "audio", "id": request["id"], "seconds": time.perf_counter() - started,
                        "memory": private_bytes(), "device_memory": accelerator_bytes() + faults.device_bytes()}, pcm)


def _serve_pipelined(voice, stdin, out, faults: Faults, threads: int) -> int:
    """Stages on two threads (see pipeline.py): this thread, which loaded the voice, runs the LLM
    stage of each request as it arrives; a render thread runs the voice's synthesize for one
    request at a time, with its speech tokens handed over, and answers strictly in request order."""
    prefetch = Prefetcher(voice, threads, background=False)
    inbox: queue.Queue = queue.Queue()
    status = [0]

    def read() -> None:
        try:
            while (frame := protocol.receive(stdin)) is not None:
                request = frame[0]
                if request.get("type") == "synthesize":
                    prefetch.submit(request["id"], request["text"], request["seed"])
                inbox.put(request)
        except (protocol.ProtocolError, ValueError, OSError) as error:
            print(f"worker: bad request stream: {error}", file=sys.stderr)
            status[0] = 4
        inbox.put(None)

    def render() -> None:
        try:
            set_torch_threads(threads)
            while (request := inbox.get()) is not None:
                _answer(out, request, faults, lambda r: prefetch.synthesize(r["id"], r["text"], r["seed"], **language(r)))
        except BaseException as error:  # e.g. the parent went away mid-answer
            print(f"worker: render thread stopped: {type(error).__name__}: {error}", file=sys.stderr)
            status[0] = status[0] or 5
        finally:
            prefetch.close()  # ends prefetch.run() below

    threading.Thread(target=read, name="requests", daemon=True).start()
    threading.Thread(target=render, name="render-stage", daemon=True).start()
    prefetch.run()
    return status[0]


if __name__ == "__main__":
    sys.exit(main())
