"""Voice name → a loaded voice. Runs in the worker only (loading imports model runtimes)."""

from __future__ import annotations

from .base import Voice

DEFAULT_VOICE = "joe"


def load_voice(name: str, *, threads: int = 1, options: dict | None = None) -> Voice:
    options = options or {}
    if name in ("joe", "piper", "default"):
        from . import piper

        return piper.load(threads=threads)
    if name.startswith("piper:"):
        from . import piper

        return piper.load(threads=threads, name=name, options=options)
    if name == "hibari":
        from . import hibari

        return hibari.load(threads=threads, options=options)
    if name == "tone":
        from . import tone

        return tone.load()
    if name.startswith("kokoro:"):
        from . import kokoro

        return kokoro.load(name, threads=threads, options=options)
    if name.startswith("cosyvoice3:"):
        import torch

        from .cosyvoice3.voice import CosyVoice3Voice

        torch.set_num_threads(threads)
        return CosyVoice3Voice.load(options["model_dir"], options["profile_dir"], **options.get("extra", {}))
    if name.startswith("qwen3:"):
        from .qwen3tts.voice import Qwen3Voice

        if "clone_dir" in options:
            return Qwen3Voice.load_clone(options["model_dir"], options["clone_dir"], name=name, threads=threads,
                                         **options.get("extra", {}))
        return Qwen3Voice.load(options["model_dir"], options["speaker"], name=name, threads=threads,
                               **options.get("extra", {}))
    raise ValueError(f"unknown voice {name!r}")
