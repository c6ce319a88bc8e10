"""Hearing a voice before choosing it: `voice try` says a short text through a worker (the parent
never loads a model runtime), writes it as a WAV and keeps the real-time factor it measured on
this machine, which `voice list` then shows. Nothing is ever measured at list time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..config import cache_dir, load_config, worker_policy
from ..errors import InputError, JobFailed
from ..files import atomic_write

SAMPLE_TEXTS = {
    "en": "It was a bright cold day in April, and the clocks were striking thirteen.",
    "fr": "Longtemps, je me suis couché de bonne heure.",
    "de": "Als Gregor Samsa eines Morgens aus unruhigen Träumen erwachte, fand er sich verwandelt.",
    "es": "En un lugar de la Mancha, de cuyo nombre no quiero acordarme, vivía un hidalgo.",
    "it": "Nel mezzo del cammin di nostra vita mi ritrovai per una selva oscura.",
    "ja": "吾輩は猫である。名前はまだ無い。",
}
SAMPLE_SEED = 1986


@dataclass(frozen=True)
class Trial:
    path: Path
    audio_seconds: float
    synth_seconds: float

    @property
    def rtf(self) -> float:
        return self.synth_seconds / self.audio_seconds if self.audio_seconds else 0.0


def speeds_path() -> Path:
    return cache_dir() / "voice-speeds.json"


def measured_speeds() -> dict[str, float]:
    """voice name → the RTF `voice try` measured here (a voice not in it is "not measured")."""
    try:
        data = json.loads(speeds_path().read_text(encoding="utf-8"))
        return {k: float(v["rtf"]) for k, v in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _record_speed(name: str, rtf: float, model_id: str) -> None:
    try:
        data = json.loads(speeds_path().read_text(encoding="utf-8"))
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    data[name] = {"rtf": round(rtf, 4), "model_id": model_id}
    speeds_path().parent.mkdir(parents=True, exist_ok=True)
    atomic_write(speeds_path(), json.dumps(data, indent=1, sort_keys=True).encode())


def sample_text(voice: str) -> str:
    from .catalog import languages_of

    spoken = languages_of(voice) or ("en",)
    return SAMPLE_TEXTS.get(spoken[0], SAMPLE_TEXTS["en"])


def try_voice(name: str, text: str | None, out: Path) -> Trial:
    """Say `text` (default: a sentence in the voice's language) with voice `name` into `out`."""
    from ..store import write_wav_atomically
    from ..worker.supervisor import SegmentFailed, Supervisor, VoiceLoadFailed
    from .catalog import resolve

    out = Path(out)
    if out.suffix.lower() != ".wav":
        raise InputError(f"{out}: the sample must be a .wav file")
    if not out.parent.is_dir():
        raise InputError(f"{out.parent}: the output folder does not exist")
    config = load_config()
    choice = resolve(name, config=config)
    text = (text or "").strip() or sample_text(choice.name)
    supervisor = Supervisor({"voice": choice.name, "threads": choice.threads, "options": choice.options},
                            worker_policy(config), None)
    try:
        details = supervisor.details
        pcm, seconds, _ = supervisor.synthesize(text, SAMPLE_SEED)
    except (VoiceLoadFailed, SegmentFailed) as error:
        raise JobFailed(f"voice {choice.name}: {error}") from None
    finally:
        supervisor.close()
    write_wav_atomically(out, pcm, details.sample_rate)
    trial = Trial(out, len(pcm) / 2 / details.sample_rate, seconds)
    if trial.audio_seconds:
        _record_speed(choice.name, trial.rtf, details.model_id)
    return trial
