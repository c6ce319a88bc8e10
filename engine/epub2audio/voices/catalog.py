"""Which voices exist, as the parent sees them: names, saved CosyVoice3 profiles, and what a worker
needs to load one. Nothing here imports a model runtime; making a profile runs in a child process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..config import data_dir
from ..errors import InputError, JobFailed

BUILTIN = {"joe": "Joe, the embedded Piper voice (en_US, 22.05 kHz)", "tone": "a test tone (checks the pipeline)"}
ALIASES = {"piper": "joe", "default": "joe"}

# What each voice speaks, by primary language subtag. Joe is an en-US Piper voice; a CosyVoice3
# profile speaks what Fun-CosyVoice3 was trained on (upstream README: nine languages, plus Chinese
# dialects), whatever language its reference recording was in. The tone speaks nothing and
# so is never warned about.
SPEAKS = {"joe": ("en",)}
COSYVOICE3_LANGUAGES = ("zh", "en", "ja", "ko", "de", "es", "fr", "it", "ru")
# Voices whose audio depends on the language they are told (store.segment_key then includes
# it). None yet: Piper ignores it and CosyVoice3 reads the language from the text itself.
LANGUAGE_AUDIO_VOICES: frozenset[str] = frozenset()


@dataclass
class VoiceChoice:
    name: str  # what the worker loads and the store records
    options: dict = field(default_factory=dict)
    threads: int = 1  # intra-op threads per worker


def profiles_dir() -> Path:
    return data_dir() / "voices"


def saved_profiles() -> list[str]:
    root = profiles_dir()
    return sorted(p.name for p in root.iterdir() if (p / "profile.json").exists()) if root.is_dir() else []


def resolve(name: str, *, config: dict, model_dir: Path | None = None, workers: int = 1,
            extra: dict | None = None) -> VoiceChoice:
    """`joe`, `tone`, `cosyvoice3:NAME` or a saved profile's bare NAME → what a worker loads."""
    name = ALIASES.get(name, name)
    if name in BUILTIN:
        return VoiceChoice(name)
    profile = name.split(":", 1)[1] if name.startswith("cosyvoice3:") else name
    profile_dir = profiles_dir() / profile
    if not (profile_dir / "profile.json").exists():
        known = ", ".join(list(BUILTIN) + [f"cosyvoice3:{p}" for p in saved_profiles()])
        raise InputError(f"unknown voice {name!r} (available: {known})")
    model = model_dir or config.get("cosyvoice3_model_dir") or _recorded_model_dir(profile_dir)
    if not model:
        raise InputError(f"voice {profile!r}: say where Fun-CosyVoice3-0.5B is (--model-dir or cosyvoice3_model_dir)")
    # Never more busy threads than cores: oversubscribed OpenMP teams are slower than one thread.
    threads = max(1, _available_cores() // max(1, workers))
    return VoiceChoice(f"cosyvoice3:{profile}", {"model_dir": str(model), "profile_dir": str(profile_dir),
                                                 "extra": extra or {}}, threads)


def languages_of(voice: str) -> tuple[str, ...] | None:
    """The primary language subtags a voice speaks; None: it has no language (the tone)."""
    voice = ALIASES.get(voice, voice)
    if voice.startswith("cosyvoice3:"):
        return COSYVOICE3_LANGUAGES
    return SPEAKS.get(voice)


def language_changes_audio(voice: str) -> bool:
    return ALIASES.get(voice, voice) in LANGUAGE_AUDIO_VOICES


def language_warning(book_language: str, voice: str) -> str | None:
    """One line when the book's language is not one `voice` speaks, naming the voices that do;
    None when it is (or the book names no language, or the voice has none)."""
    from ..book.language import name, primary

    code = primary(book_language)
    spoken = languages_of(voice)
    if not code or spoken is None or code in spoken:
        return None
    others = [v for v in SPEAKS if code in SPEAKS[v] and v != voice]
    if code in COSYVOICE3_LANGUAGES:
        profiles = [f"cosyvoice3:{p}" for p in saved_profiles()]
        others += profiles or ["a CosyVoice3 voice (make one with `epub2audio voice add NAME --wav FILE`)"]
    speakers = ", ".join(others) if others else "none of the voices here"
    spoken_names = ", ".join(name(c) for c in spoken)
    return (f"the book is in {name(book_language)} but voice {voice} speaks {spoken_names}; "
            f"voices that speak {name(book_language).split(' (')[0]}: {speakers}")


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _recorded_model_dir(profile_dir: Path) -> str | None:
    try:
        return json.loads((profile_dir / "model.json").read_text())["model_dir"]
    except (OSError, ValueError, KeyError):
        return None


def add_profile(name: str, wav: Path, text: str | None, model_dir: Path, max_seconds: float | None = None) -> dict:
    """Compute and store a CosyVoice3 voice profile (prompt tokens, mel, speaker embedding)."""
    if not name or "/" in name or name.startswith(".") or name in BUILTIN or name in ALIASES:
        raise InputError(f"{name!r} cannot be a voice name")
    if not Path(wav).is_file():
        raise InputError(f"{wav}: no such file")
    request = {"name": name, "wav": str(Path(wav).resolve()), "text": text, "model_dir": str(model_dir),
               "profile_dir": str(profiles_dir() / name), "max_seconds": max_seconds}
    return _run_child("epub2audio.voices.cosyvoice3.make_profile", request, "making the voice profile")


def compress_model(model_dir: Path, out: Path, *, llm: str, flow: str, hift: str, vocab: list[str],
                   prompt_parts: str, tables: str | None = None) -> dict:
    """Write a compact copy of a CosyVoice3 model folder (voices/cosyvoice3/compress.py)."""
    if not Path(model_dir).is_dir():
        raise InputError(f"{model_dir}: no such model folder")
    request = {"model_dir": str(Path(model_dir).resolve()), "out": str(Path(out).absolute()), "llm": llm, "tables": tables, "flow": flow,
               "hift": hift, "vocab": vocab, "prompt_parts": prompt_parts}
    return _run_child("epub2audio.voices.cosyvoice3.compress", request, "compressing the model")


def _run_child(module: str, request: dict, what: str) -> dict:
    """Run `python -m module REQUEST_JSON` (torch lives there, never here); its last JSON line is
    the answer: {"ok": true, ...} or {"ok": false, "message": ..., "exit_code": 2|1}."""
    proc = subprocess.run([sys.executable, "-m", module, json.dumps(request)], capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise JobFailed(f"{what} failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    result = json.loads(lines[-1])
    if not result["ok"]:
        raise (InputError if result["exit_code"] == 2 else JobFailed)(result["message"])
    return result
