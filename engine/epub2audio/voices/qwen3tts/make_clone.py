"""`epub2audio voice add NAME --qwen3 BASE_DIR --wav REF.wav [--text "…"]` runs this in a child
process, so the command itself never imports torch:
python -m epub2audio.voices.qwen3tts.make_clone '{"name": …, "model_dir": …, "wav": …, "text": …, "profile_dir": …}'.

The voice's saved folder holds the ClonePrompt (clone.npz, clone.json) and QWEN3_CLONE_FILE, which
names the Base folder and what the voice speaks. The folder is written whole under a temporary
name beside its place and renamed into it, so a crash leaves the old voice or the new one, never
a mix (an old voice of the same name is moved aside first, then removed).

Answers one JSON line: {"ok": true, "mode": "icl"|"x_vector", "seconds": …, "languages": [...]}.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ...worker import oneshot
from ..catalog import QWEN3_CLONE_FILE


def _clone_request(request: dict) -> dict:
    from .checkpoint import load_checkpoint
    from .clone import make_clone_prompt
    from .text import spoken_codes

    model_dir = Path(request["model_dir"]).resolve()
    prompt = make_clone_prompt(model_dir, request["wav"], request.get("text"))
    ck = load_checkpoint(model_dir)  # the whole folder, as a worker will load it
    languages = spoken_codes(ck.talker_args.codec_language_id)
    saved = {"model_dir": str(model_dir), "languages": languages, "mode": prompt.mode, "ref_text": prompt.ref_text,
             "wav": str(request["wav"]), "added_ns": time.time_ns()}
    target = Path(request["profile_dir"])
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(work, 0o777 & ~mask)  # as any folder the user makes, not mkdtemp's 0700
    try:
        prompt.save(work)
        (work / QWEN3_CLONE_FILE).write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
        _put_in_place(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"mode": prompt.mode, "seconds": prompt.duration, "languages": languages}


def _put_in_place(work: Path, target: Path) -> None:
    """Rename the finished folder into place; an old one is moved aside, then removed."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.{os.getpid()}.old")
        os.replace(target, old)
    os.replace(work, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(oneshot.run(_clone_request))
