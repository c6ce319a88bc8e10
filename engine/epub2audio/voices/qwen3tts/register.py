"""`epub2audio voice add NAME --qwen3 MODEL_DIR` checks the folder in this child process, so the
command itself never imports torch: python -m epub2audio.voices.qwen3tts.register '{"model_dir": …}'.

The whole folder is checked as a worker would load it (layout, configs, every tensor's key and
shape, the tokenizer's special ids); the answer is one JSON line with what the catalogue records:
{"ok": true, "kind": "custom_voice"|"base", "speakers": [...], "languages": [...]}.
"""

from __future__ import annotations

import sys

from ...worker import oneshot


def _check_folder(request: dict) -> dict:
    from .checkpoint import load_checkpoint
    from .text import load_text_tokenizer, spoken_codes

    ck = load_checkpoint(request["model_dir"])
    load_text_tokenizer(ck.paths.model_dir, ck.text_ids)
    return {"kind": ck.model_kind, "speakers": sorted(ck.speakers),
            "languages": spoken_codes(ck.talker_args.codec_language_id)}


if __name__ == "__main__":
    sys.exit(oneshot.run(_check_folder))
