"""The worker process: loads one voice, then answers synthesis requests until its input closes.

Run as `python -m epub2audio.worker.child '<json config>'`. stdout carries protocol frames only:
anything a library prints is redirected to stderr so it cannot corrupt a frame.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from . import protocol
from .faults import Faults
from .memory import private_bytes


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
        voice = load_voice(config["voice"], threads=config.get("threads", 1), options=config.get("options"))
    except Exception as error:  # reported to the parent, which turns it into a clear message
        protocol.send(out, {"type": "error", "message": f"could not load voice: {error}"})
        return 3
    info = voice.info
    protocol.send(out, {
        "type": "ready",
        "pid": os.getpid(),
        "info": {
            "name": info.name, "narrator": info.narrator, "sample_rate": info.sample_rate,
            "backend": info.backend, "precision": info.precision, "model_id": info.model_id,
            "versions": info.versions,
        },
        "load_seconds": time.perf_counter() - started,
        "memory": private_bytes(),
    })

    while True:
        frame = protocol.receive(stdin)
        if frame is None:
            return 0
        request, _ = frame
        if request["type"] != "synthesize":
            protocol.send(out, {"type": "error", "id": request.get("id"), "message": "unknown request"})
            continue
        started = time.perf_counter()
        try:
            faults.before(request["text"])
            pcm = voice.synthesize(request["text"], request["seed"])
        except Exception as error:
            protocol.send(out, {"type": "error", "id": request["id"], "message": f"{type(error).__name__}: {error}"})
            continue
        faults.after()
        protocol.send(
            out,
            {"type": "audio", "id": request["id"], "seconds": time.perf_counter() - started,
             "memory": private_bytes()},
            pcm,
        )


if __name__ == "__main__":
    sys.exit(main())
