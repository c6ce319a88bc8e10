"""Clone prompts for the Qwen3-TTS Base model: what a reference recording gives, computed once.

As upstream's `create_voice_clone_prompt`:

* the x-vector: the speaker encoder (speaker_encoder.py) on the 24 kHz recording;
* with a reference text (ICL mode, upstream's default): also the recording's [T][16] codes from the
  speech tokenizer's encoder (tokenizer_encoder.py) and the ids of
  `<|im_start|>assistant\\n{ref_text}<|im_end|>\\n` from the folder's Qwen2 tokenizer;
* without one: x-vector only (upstream's x_vector_only_mode), no codes.

Audio is read as upstream reads it: mono (channels averaged), float32. Other rates than 24 kHz are
resampled as upstream's librosa does (soxr 'HQ') when the `soxr` package is installed; without it
with the engine's sinc resampler (cosyvoice3/frontend.py), which is NOT upstream's: the x-vector and
codes then differ from upstream's (measured: bench/results/upstream_qwen3_base-2core.txt).

On disk a ClonePrompt is a directory of two files, written as voices/cosyvoice3/profile.py writes a
profile: `clone.npz` (the arrays, no pickling) then `clone.json` (metadata and the npz's SHA-256),
each atomically; the json is the commit point and load() refuses an npz that does not match it.

`decode_clone` turns generated frames into audio as upstream's generate_voice_clone does in ICL
mode: the reference codes are decoded in front of the new ones (the decoder's context) and the
reference's share of the samples is cut off.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
import numpy as np
import torch

from epub2audio.errors import InputError
from epub2audio.files import atomic_write, sha256_file

from .checkpoint import SPEECH_TOKENIZER, TEXT_TOKENIZER_FILES, _read_json, check_layout, compare, expected_shapes
from .speaker_encoder import PREFIX as SPEAKER_PREFIX
from .speaker_encoder import SpeakerEncoder, SpeakerEncoderArgs
from .tokenizer_encoder import PREFIX as ENCODER_PREFIX
from .tokenizer_encoder import Encoder, EncoderArgs

FORMAT = "epub2audio-qwen3tts-clone-prompt"
FORMAT_VERSION = 1
NPZ_NAME = "clone.npz"
JSON_NAME = "clone.json"
SAMPLE_RATE = 24000
MIN_SECONDS = 0.5
MAX_SECONDS = 30.0


@dataclass(frozen=True)
class ClonePrompt:
    speaker_embedding: np.ndarray  # float32 [enc_dim] (the Talker's width)
    ref_codes: np.ndarray | None  # int64 [T, 16], None in x-vector-only mode
    ref_text: str | None
    ref_text_ids: np.ndarray | None  # int64: <|im_start|>assistant\n{ref_text}<|im_end|>\n
    model_id: str  # configs' fingerprint of the folder that made it
    wav_sha256: str = ""
    source_sample_rate: int = 0
    duration: float = 0.0
    created: str = ""

    def __post_init__(self) -> None:
        if self.speaker_embedding.ndim != 1:
            raise ValueError(f"speaker embedding {list(self.speaker_embedding.shape)} is not a vector")
        if (self.ref_codes is None) != (self.ref_text_ids is None) or (self.ref_codes is None) != (self.ref_text is None):
            raise ValueError("ICL needs codes, text and text ids together; x-vector mode none of them")
        if self.ref_codes is not None and (self.ref_codes.ndim != 2 or not self.ref_codes.shape[0]):
            raise ValueError(f"reference codes {list(self.ref_codes.shape)} are not [T, codebooks]")

    @property
    def mode(self) -> str:
        return "x_vector" if self.ref_codes is None else "icl"

    def save(self, directory: str | os.PathLike) -> Path:
        """Write into `directory` (created if needed); returns it."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        arrays = {"speaker_embedding": np.ascontiguousarray(self.speaker_embedding, dtype=np.float32)}
        if self.ref_codes is not None:
            arrays["ref_codes"] = np.ascontiguousarray(self.ref_codes, dtype=np.int64)
            arrays["ref_text_ids"] = np.ascontiguousarray(self.ref_text_ids, dtype=np.int64)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        npz = buf.getvalue()
        meta = {
            "format": FORMAT, "version": FORMAT_VERSION, "mode": self.mode, "ref_text": self.ref_text,
            "model_id": self.model_id, "wav_sha256": self.wav_sha256,
            "source_sample_rate": self.source_sample_rate, "duration": self.duration, "created": self.created,
            "npz_sha256": hashlib.sha256(npz).hexdigest(),
        }  # fmt: skip
        atomic_write(d / NPZ_NAME, npz)
        atomic_write(d / JSON_NAME, (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike) -> ClonePrompt:
        """Read what save() wrote; InputError (one line) if absent, corrupt, partial or foreign."""
        d = Path(directory)
        if not d.is_dir():
            raise InputError(f"clone prompt {d} is not a directory")
        jpath, npath = d / JSON_NAME, d / NPZ_NAME
        for p in (jpath, npath):
            if not p.is_file():
                raise InputError(f"clone prompt {d} lacks {p.name}")
        try:
            meta = json.loads(jpath.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(f"clone prompt {d}: {JSON_NAME} is not valid JSON ({e})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise InputError(f"{jpath} is not an epub2audio Qwen3-TTS clone prompt")
        if meta.get("version") != FORMAT_VERSION:
            raise InputError(f"clone prompt {d} has format version {meta.get('version')}; this build reads {FORMAT_VERSION}")
        npz = npath.read_bytes()
        if hashlib.sha256(npz).hexdigest() != meta.get("npz_sha256"):
            raise InputError(f"clone prompt {d}: {NPZ_NAME} does not match {JSON_NAME} (interrupted save?); re-create it")
        try:
            with np.load(io.BytesIO(npz), allow_pickle=False) as z:
                emb = np.array(z["speaker_embedding"], dtype=np.float32)
                icl = meta.get("mode") == "icl"
                codes = np.array(z["ref_codes"], dtype=np.int64) if icl else None
                text_ids = np.array(z["ref_text_ids"], dtype=np.int64) if icl else None
            return cls(
                speaker_embedding=emb, ref_codes=codes, ref_text=str(meta["ref_text"]) if icl else None,
                ref_text_ids=text_ids, model_id=str(meta["model_id"]), wav_sha256=str(meta.get("wav_sha256", "")),
                source_sample_rate=int(meta.get("source_sample_rate", 0)), duration=float(meta.get("duration", 0.0)),
                created=str(meta.get("created", "")),
            )  # fmt: skip
        except (KeyError, ValueError, TypeError, OSError) as e:
            raise InputError(f"clone prompt {d} is incomplete or inconsistent: {e}") from None


# ---------------------------------------------------------------------------------------------
# the folder's cloning stages


def model_id(model_dir: str | os.PathLike) -> str:
    """A fingerprint of the folder's two config files (the dimensions a prompt must fit)."""
    paths = check_layout(model_dir)
    h = hashlib.sha256()
    for p in (paths.config, paths.speech_tokenizer / "config.json"):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _tensors(path: Path, name: str, prefix: str) -> dict[str, torch.Tensor]:
    """The `prefix*` tensors of one safetensors file (only those are read), prefix stripped."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            return {k[len(prefix):]: f.get_tensor(k) for k in f.keys() if k.startswith(prefix)}
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"cannot read {name} as safetensors: {msg[:200]}") from None


def load_clone_stages(model_dir: str | os.PathLike) -> tuple[SpeakerEncoder, Encoder]:
    """The Base folder's speaker encoder and speech-tokenizer encoder, checked key by key and
    shape by shape (InputError, one line, for a CustomVoice folder or a wrong file)."""
    paths = check_layout(model_dir)
    config = _read_json(paths.config, "config.json")
    if config.get("tts_model_type") != "base":
        raise InputError(f"{paths.model_dir} is a Qwen3-TTS {config.get('tts_model_type')!r} model; "
                         "cloning a voice needs the Base model")  # fmt: skip
    try:
        spk_args = SpeakerEncoderArgs.from_config(config.get("speaker_encoder_config"))
    except (ValueError, TypeError) as e:
        raise InputError(f"config.json speaker_encoder_config: {e}") from None
    hidden = (config.get("talker_config") or {}).get("hidden_size")
    if spk_args.enc_dim != hidden:
        raise InputError(f"config.json: the speaker encoder writes {spk_args.enc_dim} values, the Talker reads {hidden}")
    speech_config = _read_json(paths.speech_tokenizer / "config.json", f"{SPEECH_TOKENIZER}/config.json")
    enc_cfg = speech_config.get("encoder_config")
    if not isinstance(enc_cfg, dict):
        raise InputError(f"{SPEECH_TOKENIZER}/config.json has no encoder_config")
    if speech_config.get("input_sample_rate", SAMPLE_RATE) != SAMPLE_RATE:
        raise InputError(f"{SPEECH_TOKENIZER}/config.json says input_sample_rate {speech_config.get('input_sample_rate')}")
    try:
        enc_args = EncoderArgs.from_config(enc_cfg, speech_config.get("encoder_valid_num_quantizers", 16))
    except (ValueError, TypeError) as e:
        raise InputError(f"{SPEECH_TOKENIZER}/config.json encoder_config: {e}") from None
    if enc_args.valid_quantizers != (config.get("talker_config") or {}).get("num_code_groups"):
        raise InputError(f"the speech tokenizer encodes {enc_args.valid_quantizers} codebooks, the Talker reads "
                         f"{(config.get('talker_config') or {}).get('num_code_groups')}")  # fmt: skip

    spk_sd = _tensors(paths.weights, "model.safetensors", SPEAKER_PREFIX)
    if not spk_sd:
        raise InputError("model.safetensors holds no speaker_encoder.* tensors (a Base model has them)")
    compare("model.safetensors speaker_encoder", spk_sd, expected_shapes(SpeakerEncoder, spk_args), "speaker encoder")
    name = f"{SPEECH_TOKENIZER}/model.safetensors"
    enc_sd = _tensors(paths.speech_tokenizer / "model.safetensors", name, ENCODER_PREFIX)
    if not enc_sd:
        raise InputError(f"{name} holds no encoder.* tensors")
    compare(name, enc_sd, expected_shapes(Encoder, enc_args), "speech-tokenizer encoder")
    return SpeakerEncoder.from_state_dict(spk_args, spk_sd), Encoder.from_state_dict(enc_args, enc_sd)


def tokenize_ref_text(model_dir: str | os.PathLike, ref_text: str) -> list[int]:
    """Ids of `<|im_start|>assistant\\n{ref_text}<|im_end|>\\n` with the folder's tokenizer (as
    upstream's processor tokenizes it: no special tokens added).

    Open point (not reachable with the tests' small vocabulary): upstream loads the processor with
    fix_mistral_regex=True under transformers 4.57.3, which swaps the Qwen2 split regex for Mistral's
    when the vocabulary exceeds 100000 and config.json's transformers_version is absent or in
    [4.57.3, 5.0); the official file's value decides whether real text tokenizes differently."""
    d = check_layout(model_dir).model_dir
    stamp = tuple((n, (d / n).stat().st_size, (d / n).stat().st_mtime_ns) for n in TEXT_TOKENIZER_FILES)
    tok = _tokenizer(str(d.resolve()), stamp)
    return [int(i) for i in tok(f"<|im_start|>assistant\n{ref_text}<|im_end|>\n")["input_ids"]]


@lru_cache(maxsize=2)
def _tokenizer(model_dir: str, _stamp: tuple):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import Qwen2TokenizerFast  # the class tokenizer_config.json names (its fast form)

    try:
        return Qwen2TokenizerFast.from_pretrained(model_dir, local_files_only=True)
    except Exception as e:  # transformers raises many types here
        raise InputError(f"cannot load the Qwen2 tokenizer from {model_dir}: {e}".splitlines()[0]) from None


def _audio(wav) -> tuple[np.ndarray, int, str]:
    """(24 kHz mono float32, source rate, sha256 of the file or '') from a path or (array, rate)."""
    from ..cosyvoice3.frontend import load_audio

    if isinstance(wav, tuple):
        samples, rate = wav
        samples = np.asarray(samples, dtype=np.float32)
        if samples.ndim > 1:
            samples = samples.mean(axis=-1, dtype=np.float32)
        rate, digest = int(rate), ""
    else:
        samples, rate = load_audio(wav)
        digest = sha256_file(wav)
    seconds = samples.shape[0] / rate if rate > 0 else 0.0
    if not np.all(np.isfinite(samples)):
        raise InputError("the reference audio holds NaN or infinite samples")
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise InputError(f"the reference audio is {seconds:.2f} s long; it must be {MIN_SECONDS} to {MAX_SECONDS:.0f} s")
    if rate != SAMPLE_RATE:
        samples = to_24k(samples, rate)
    return samples, rate, digest


def to_24k(samples: np.ndarray, rate: int) -> np.ndarray:
    """Resample to 24 kHz as upstream does (librosa.resample's default: soxr 'HQ', then the length
    fixed at ceil(n * 24000 / rate), zero-padded or cut) when soxr is installed; else with the
    engine's sinc resampler, which is not upstream's (see bench/results/upstream_qwen3_base-2core.txt)."""
    x = np.asarray(samples, dtype=np.float32)
    try:
        import soxr
    except ImportError:
        from ..cosyvoice3.frontend import resample

        return resample(x, rate, SAMPLE_RATE)
    n = int(np.ceil(x.shape[0] * (float(SAMPLE_RATE) / rate)))
    y = soxr.resample(x, rate, SAMPLE_RATE, quality="soxr_hq")
    y = y[:n] if y.shape[0] >= n else np.pad(y, (0, n - y.shape[0]))
    return np.asarray(y, dtype=np.float32)


def make_clone_prompt(model_dir: str | os.PathLike, wav_path, ref_text: str | None = None,
                      *, stages: tuple[SpeakerEncoder, Encoder] | None = None) -> ClonePrompt:  # fmt: skip
    """A clone prompt from a reference recording: a path or (samples, sample rate). With
    `ref_text` (what the recording says) ICL mode, without it x-vector only. `stages` reuses
    load_clone_stages' modules across calls."""
    speaker_encoder, encoder = stages or load_clone_stages(model_dir)
    audio, rate, digest = _audio(wav_path)
    embedding = speaker_encoder.embed(audio).numpy().astype(np.float32)
    codes = ids = None
    if ref_text is not None:
        if not ref_text.strip():  # tokenized as given (upstream keeps surrounding spaces too)
            raise InputError("the reference text is empty; leave it out for an x-vector-only prompt")
        codes = encoder.encode(audio).numpy().astype(np.int64)
        ids = np.asarray(tokenize_ref_text(model_dir, ref_text), dtype=np.int64)
    return ClonePrompt(
        speaker_embedding=embedding, ref_codes=codes, ref_text=ref_text, ref_text_ids=ids,
        model_id=model_id(model_dir), wav_sha256=digest, source_sample_rate=rate,
        duration=round(audio.shape[0] / SAMPLE_RATE, 3),
        created=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
    )  # fmt: skip


def decode_clone(decoder, prompt: ClonePrompt, frames: Sequence[Sequence[int]]) -> torch.Tensor:
    """Generated frames -> 24 kHz audio, as upstream: in ICL mode decoded behind the reference
    codes, then the first int(T_ref / T_total * samples) samples dropped."""
    new = torch.as_tensor(np.asarray(frames, dtype=np.int64).reshape(-1, decoder.args.num_quantizers))
    if prompt.ref_codes is None:
        return decoder.decode(new)
    ref = torch.as_tensor(prompt.ref_codes)
    wav = decoder.decode(torch.cat([ref, new], dim=0))
    cut = int(ref.shape[0] / max(ref.shape[0] + new.shape[0], 1) * wav.shape[0])
    return wav[cut:]

