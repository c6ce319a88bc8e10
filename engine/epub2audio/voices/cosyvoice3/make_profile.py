"""`epub2audio voice add` runs this in a child process, so the command itself never imports torch
or onnxruntime: python -m epub2audio.voices.cosyvoice3.make_profile '{"name":…, "wav":…, …}'.

Prints one JSON line: {"ok": true, "transcript": …, "seconds": …} or {"ok": false, "message": …}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ...worker import oneshot


def _profile_request(request: dict) -> dict:
    from .profile import make_profile, save_profile

    profile = make_profile(request["model_dir"], request["wav"], request.get("text"), name=request["name"],
                           max_seconds=request.get("max_seconds"))
    target = Path(request["profile_dir"])
    save_profile(profile, target)
    (target / "model.json").write_text(json.dumps({"model_dir": str(Path(request["model_dir"]).resolve())}) + "\n")
    return {"transcript": profile.transcript, "seconds": profile.duration, "tokens": int(profile.speech_tokens.shape[0])}


if __name__ == "__main__":
    sys.exit(oneshot.run(_profile_request))
