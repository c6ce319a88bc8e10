"""Load an official Qwen3-TTS-12Hz folder (0.6B Base or CustomVoice), checked.

    <model_dir>/
        config.json                 Qwen3TTSForConditionalGeneration: talker_config (+ code_predictor_config)
        generation_config.json      sampling defaults (temperature, top-k/p, repetition penalty, subtalker_*)
        model.safetensors           bf16: talker.* (Talker and Code Predictor), speaker_encoder.* (Base only)
        vocab.json merges.txt tokenizer_config.json    the Qwen2 byte-level BPE text tokenizer
        speech_tokenizer/
            config.json             Qwen3TTSTokenizerV2Model: decoder_config (+ encoder_config)
            model.safetensors       fp32: decoder.* (codes -> 24 kHz), encoder.* (audio -> codes, cloning only)

Every dimension comes from the configs; each stage's args dataclass (TalkerArgs, CodePredictorArgs,
DecoderArgs) reads its block, as mlx-lm does, and refuses what the port does not implement. The
tensors are checked key by key and shape by shape against our modules built on the meta device, so
a wrong folder (another model, a truncated file, a 1.7B config over 0.6B weights) is refused in one
line (InputError) before anything runs. safetensors files are memory-mapped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from epub2audio.errors import InputError

from .shells import build, expected_shapes  # noqa: F401 (part of this module's API)

SAMPLE_RATE = 24000
FRAME_RATE = 12.5
MODEL_TYPE = "qwen3_tts"
TOKENIZER_TYPE = "qwen3_tts_tokenizer_12hz"
SPEECH_TOKENIZER = "speech_tokenizer"
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors")
TEXT_TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json")
SPEECH_TOKENIZER_FILES = ("config.json", "model.safetensors")
MODEL_KINDS = ("base", "custom_voice")

# upstream's defaults (Qwen3TTSConfig), used where config.json leaves a special text id out
TEXT_SPECIAL_IDS = {
    "im_start_token_id": 151644,
    "im_end_token_id": 151645,
    "tts_pad_token_id": 151671,
    "tts_bos_token_id": 151672,
    "tts_eos_token_id": 151673,
}


@dataclass(frozen=True)
class GenerationArgs:
    """generation_config.json (upstream merges it under explicit arguments; these are its keys)."""

    do_sample: bool = True
    temperature: float = 0.9
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.05
    subtalker_dosample: bool = True
    subtalker_temperature: float = 0.9
    subtalker_top_k: int = 50
    subtalker_top_p: float = 1.0
    max_new_tokens: int = 8192

    @classmethod
    def from_config(cls, c: Mapping[str, Any]) -> GenerationArgs:
        out = {}
        for name, default in cls.__dataclass_fields__.items():
            if name not in c:
                continue
            v, kind = c[name], type(getattr(cls(), name))
            if kind is bool and not isinstance(v, bool):
                raise ValueError(f"{name} must be true or false, got {v!r}")
            if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
                raise ValueError(f"{name} must be an integer, got {v!r}")
            if kind is float and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"{name} must be a number, got {v!r}")
            out[name] = kind(v)
        return cls(**out)


@dataclass(frozen=True)
class CheckpointPaths:
    model_dir: Path

    @property
    def config(self) -> Path:
        return self.model_dir / "config.json"

    @property
    def generation_config(self) -> Path:
        return self.model_dir / "generation_config.json"

    @property
    def weights(self) -> Path:
        return self.model_dir / "model.safetensors"

    @property
    def speech_tokenizer(self) -> Path:
        return self.model_dir / SPEECH_TOKENIZER

    def required(self) -> list[Path]:
        files = [self.model_dir / n for n in (*MODEL_FILES, *TEXT_TOKENIZER_FILES)]
        return files + [self.speech_tokenizer / n for n in SPEECH_TOKENIZER_FILES]


def check_layout(model_dir: str | os.PathLike) -> CheckpointPaths:
    d = Path(model_dir).expanduser()
    if not d.exists():
        raise InputError(f"Qwen3-TTS model directory {d} does not exist")
    if not d.is_dir():
        raise InputError(f"Qwen3-TTS model path {d} is not a directory")
    paths = CheckpointPaths(d)
    missing = [p.relative_to(d).as_posix() for p in paths.required() if not p.is_file()]
    if missing:
        raise InputError(f"{d} is not a complete Qwen3-TTS model directory; missing: {', '.join(missing)}")
    return paths


def _read_json(path: Path, name: str) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"cannot parse {name}: {e}".replace("\n", " ")) from None
    if not isinstance(obj, dict):
        raise InputError(f"{name} is not a JSON object")
    return obj


def _read_safetensors(path: Path, name: str) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"cannot read {name} as safetensors: {msg[:200]}") from None


def _few(items: list[str], n: int = 3) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def compare(name: str, sd: Mapping[str, torch.Tensor], expected: Mapping[str, tuple[int, ...]], what: str) -> None:
    missing = [k for k in expected if k not in sd]
    unexpected = [k for k in sd if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing key(s): {_few(missing)}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected key(s): {_few(unexpected)}")
        raise InputError(f"{name} does not match a Qwen3-TTS {what}: {'; '.join(parts)}")
    wrong = [f"{k} {list(sd[k].shape)} (expected {list(s)})" for k, s in expected.items() if tuple(sd[k].shape) != s]
    if wrong:
        raise InputError(f"{name} has tensors of the wrong shape for a Qwen3-TTS {what}: {_few(wrong)}")
    not_float = [k for k in expected if not sd[k].is_floating_point()]
    if not_float:
        raise InputError(f"{name} has non-float tensors: {_few(not_float)}")


@dataclass
class Checkpoint:
    paths: CheckpointPaths
    config: dict[str, Any] = field(repr=False)
    speech_config: dict[str, Any] = field(repr=False)
    talker_args: Any
    code_predictor_args: Any
    decoder_args: Any
    generation: GenerationArgs
    text_ids: dict[str, int]
    model_kind: str  # "base" | "custom_voice"
    state_dict: dict[str, torch.Tensor] = field(repr=False)  # model.safetensors, talker.* only
    decoder_state_dict: dict[str, torch.Tensor] = field(repr=False)  # speech_tokenizer decoder.*, prefix stripped
    sample_rate: int = SAMPLE_RATE

    @property
    def speakers(self) -> dict[str, int]:
        return dict(self.talker_args.spk_id)


def read_args(config: Mapping[str, Any], speech_config: Mapping[str, Any]):
    """(TalkerArgs, CodePredictorArgs, DecoderArgs) from the two config.json files; InputError."""
    from .code_predictor import CodePredictorArgs
    from .decoder import DecoderArgs
    from .talker import TalkerArgs

    talker_cfg = config.get("talker_config")
    if not isinstance(talker_cfg, Mapping) or not isinstance(talker_cfg.get("code_predictor_config"), Mapping):
        raise InputError("config.json has no talker_config with a code_predictor_config")
    try:
        talker = TalkerArgs.from_config(talker_cfg)
    except (ValueError, TypeError) as e:
        raise InputError(f"config.json talker_config: {e}") from None
    try:
        cp = CodePredictorArgs.from_config(talker_cfg["code_predictor_config"], talker.hidden_size)
    except (ValueError, TypeError) as e:
        raise InputError(f"config.json code_predictor_config: {e}") from None
    if cp.num_code_groups != talker.num_code_groups:
        raise InputError(
            f"config.json: the talker has {talker.num_code_groups} code groups, the code predictor {cp.num_code_groups}"
        )
    dec_cfg = speech_config.get("decoder_config")
    if not isinstance(dec_cfg, Mapping):
        raise InputError(f"{SPEECH_TOKENIZER}/config.json has no decoder_config")
    try:
        dec = DecoderArgs.from_config(dec_cfg)
    except (ValueError, TypeError) as e:
        raise InputError(f"{SPEECH_TOKENIZER}/config.json decoder_config: {e}") from None
    if dec.num_quantizers != talker.num_code_groups:
        raise InputError(
            f"the talker writes {talker.num_code_groups} codebooks, the speech tokenizer decodes {dec.num_quantizers}"
        )
    if dec.codebook_size != cp.vocab_size:
        raise InputError(f"codebooks of {cp.vocab_size} codes, but the speech tokenizer's hold {dec.codebook_size}")
    return talker, cp, dec


def load_checkpoint(model_dir: str | os.PathLike) -> Checkpoint:
    """Read and check an official Qwen3-TTS-12Hz folder. Raises InputError (one line)."""
    from .code_predictor import CodePredictor
    from .decoder import Decoder
    from .talker import PREFIX, Talker

    paths = check_layout(model_dir)
    config = _read_json(paths.config, "config.json")
    if config.get("model_type") != MODEL_TYPE:
        raise InputError(f"config.json says model_type {config.get('model_type')!r}, not {MODEL_TYPE!r}: not a Qwen3-TTS model")
    if config.get("tokenizer_type", TOKENIZER_TYPE) != TOKENIZER_TYPE:
        raise InputError(f"config.json says tokenizer_type {config.get('tokenizer_type')!r}; only the 12 Hz tokenizer is ported")
    kind = config.get("tts_model_type")
    if kind not in MODEL_KINDS:
        raise InputError(f"config.json says tts_model_type {kind!r}; expected one of {', '.join(MODEL_KINDS)}")
    speech_config = _read_json(paths.speech_tokenizer / "config.json", f"{SPEECH_TOKENIZER}/config.json")
    if speech_config.get("model_type") != TOKENIZER_TYPE:
        raise InputError(f"{SPEECH_TOKENIZER}/config.json says model_type {speech_config.get('model_type')!r}, not {TOKENIZER_TYPE!r}")
    for key in ("output_sample_rate",):
        if speech_config.get(key, SAMPLE_RATE) != SAMPLE_RATE:
            raise InputError(f"{SPEECH_TOKENIZER}/config.json says {key} {speech_config.get(key)}; the port runs at {SAMPLE_RATE}")
    talker_args, cp_args, dec_args = read_args(config, speech_config)
    try:
        generation = GenerationArgs.from_config(_read_json(paths.generation_config, "generation_config.json"))
    except ValueError as e:
        raise InputError(f"generation_config.json: {e}") from None
    text_ids = {k: config.get(k, v) for k, v in TEXT_SPECIAL_IDS.items()}
    bad = [k for k, v in text_ids.items() if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < talker_args.text_vocab_size]
    if bad:
        raise InputError(f"config.json {bad[0]} {text_ids[bad[0]]!r} is not a text id below {talker_args.text_vocab_size}")

    sd = _read_safetensors(paths.weights, "model.safetensors")
    talker_sd = {k: v for k, v in sd.items() if k.startswith(PREFIX)}
    others = sorted({k.split(".", 1)[0] for k in sd if not k.startswith(PREFIX)})
    allowed = {"speaker_encoder"} if kind == "base" else set()
    if set(others) - allowed:
        raise InputError(f"model.safetensors holds unexpected parts for a {kind} model: {_few(sorted(set(others) - allowed))}")
    expected = {PREFIX + k: s for k, s in expected_shapes(Talker, talker_args).items()}
    expected.update({PREFIX + "code_predictor." + k: s for k, s in expected_shapes(CodePredictor, cp_args).items()})
    compare("model.safetensors", talker_sd, expected, "talker with the dimensions of config.json")

    speech_sd = _read_safetensors(paths.speech_tokenizer / "model.safetensors", f"{SPEECH_TOKENIZER}/model.safetensors")
    dec_sd = {k[len("decoder."):]: v for k, v in speech_sd.items() if k.startswith("decoder.")}
    if not dec_sd:
        raise InputError(f"{SPEECH_TOKENIZER}/model.safetensors holds no decoder.* tensors")
    compare(f"{SPEECH_TOKENIZER}/model.safetensors", dec_sd, expected_shapes(Decoder, dec_args), "speech-tokenizer decoder")

    return Checkpoint(
        paths=paths, config=config, speech_config=speech_config, talker_args=talker_args,
        code_predictor_args=cp_args, decoder_args=dec_args, generation=generation, text_ids=text_ids,
        model_kind=kind, state_dict=talker_sd, decoder_state_dict=dec_sd,
    )  # fmt: skip
