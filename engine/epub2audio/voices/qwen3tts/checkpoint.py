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

A folder holding compressed.json is one `epub2audio model compress` wrote (compress.py has its
layout); it loads into the same Checkpoint: 4- and 8-bit tensors are dequantised to fp32 here, an
fp16 decoder is widened to fp32 when built, and a pruned or int8 text table stays compact as a
ready module (`talker_modules`) that the Talker is built with.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from epub2audio.errors import InputError
from epub2audio.files import sampled_digest_update

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

# A compressed folder (compress.py writes it): the manifest, and the stored tensors under their
# official names, in safetensors files of their own (never model.safetensors, which upstream reads)
MANIFEST = "compressed.json"
COMPRESSED_FORMAT = "epub2audio-qwen3tts-compressed"
COMPRESSED_VERSION = 1
TALKER_FILE = "talker.safetensors"  # talker.* (Talker and Code Predictor) in stored form
DECODER_FILE = f"{SPEECH_TOKENIZER}/decoder.safetensors"  # decoder.* at fp32 or fp16
ENCODER_FILE = f"{SPEECH_TOKENIZER}/encoder.safetensors"  # encoder.* as in the source (kept parts only)
SPEAKER_ENCODER_FILE = "speaker_encoder.safetensors"  # Base's speaker_encoder.* (kept parts only)
TEXT_TABLE = "model.text_embedding"  # under talker.
TEXT_KEY = "talker." + TEXT_TABLE + ".weight"
ROW_MAP_KEY = "talker." + TEXT_TABLE + ".row_of_id"  # int32 [text vocab]: kept row of each id, -1 = dropped
SCALE = ".scale"  # suffix of a quantised tensor's scales (int8 rows: [rows] fp32; int4 groups: [out, in/32] fp16)

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
    """generation_config.json (upstream merges it under explicit arguments; these are its keys).
    A key the file lacks takes upstream's hard default (`Qwen3TTSModel._merge_generate_kwargs`):
    the shipped file says 8192 frames, but without the key upstream stops at 2048."""

    do_sample: bool = True
    temperature: float = 0.9
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.05
    subtalker_dosample: bool = True
    subtalker_temperature: float = 0.9
    subtalker_top_k: int = 50
    subtalker_top_p: float = 1.0
    max_new_tokens: int = 2048

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
    # a compressed folder (compress.py): its manifest, and the Talker's compact/int8 text table as a
    # ready module (name under `talker.`) whose tensors state_dict then lacks
    compressed: dict[str, Any] | None = None
    talker_modules: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def speakers(self) -> dict[str, int]:
        return dict(self.talker_args.spk_id)

    @property
    def row_of_id(self) -> torch.Tensor | None:
        """A pruned folder's token map (text id -> row, -1 = dropped; vocab.py), else None."""
        table = self.talker_modules.get(TEXT_TABLE)
        return getattr(table, "row_of_id", None)

    def files(self) -> list[Path]:
        """Every file synthesis reads from the folder: the official layout's, or a compressed
        folder's manifest and stored stages (what folder_id hashes)."""
        if self.compressed is None:
            return self.paths.required()
        d = self.paths.model_dir
        names = [MANIFEST, *MODEL_FILES[:2], *TEXT_TOKENIZER_FILES, TALKER_FILE, f"{SPEECH_TOKENIZER}/config.json",
                 DECODER_FILE]
        return [d / n for n in names] + [d / n for n in (ENCODER_FILE, SPEAKER_ENCODER_FILE) if (d / n).is_file()]

    def folder_id(self) -> str:
        """``qwen3tts-<16 hex>``: SHA-256 over every file synthesis reads, by name, size and 16
        evenly spaced 1 MiB blocks (small files whole), as CosyVoice3's model id: cheap on 2.5 GB,
        independent of paths and mtimes, changed by any retrained file in practice."""
        # v2: a built-in speaker's default prompt became upstream's non-streaming one (issue 31); ids
        # made before name streaming-layout audio, so a resumed job must not reuse their segments
        h = hashlib.sha256(b"epub2audio qwen3tts model_id v2\0")
        for p in self.files():
            sampled_digest_update(h, p, p.relative_to(self.paths.model_dir).as_posix())
        return "qwen3tts-" + h.hexdigest()[:16]

    def build_talker(self):
        from .talker import Talker

        return Talker.from_state_dict(self.talker_args, self.state_dict, modules=self.talker_modules)

    def build_code_predictor(self):
        from .code_predictor import CodePredictor

        return CodePredictor.from_state_dict(self.code_predictor_args, self.state_dict)

    def build_decoder(self):
        from .decoder import Decoder

        return Decoder.from_state_dict(self.decoder_args, self.decoder_state_dict)


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


def read_configs(paths: CheckpointPaths):
    """config.json, speech_tokenizer/config.json and generation_config.json, checked (InputError):
    (config, speech_config, model kind, TalkerArgs, CodePredictorArgs, DecoderArgs, GenerationArgs, text ids)."""
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
    return config, speech_config, kind, talker_args, cp_args, dec_args, generation, text_ids


def load_checkpoint(model_dir: str | os.PathLike) -> Checkpoint:
    """Read and check an official Qwen3-TTS-12Hz folder. Raises InputError (one line)."""
    from .code_predictor import CodePredictor
    from .decoder import Decoder
    from .talker import PREFIX, Talker

    d = Path(model_dir).expanduser()
    if (d / MANIFEST).is_file():
        return load_compressed(d)
    paths = check_layout(model_dir)
    config, speech_config, kind, talker_args, cp_args, dec_args, generation, text_ids = read_configs(paths)
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


def read_manifest(model_dir: Path) -> dict[str, Any]:
    manifest = _read_json(model_dir / MANIFEST, MANIFEST)
    if manifest.get("format") != COMPRESSED_FORMAT:
        raise InputError(f"{model_dir / MANIFEST} is not an epub2audio Qwen3-TTS compressed-model manifest")
    if manifest.get("version") != COMPRESSED_VERSION:
        raise InputError(f"{model_dir} was compressed by another epub2audio (format {manifest.get('version')}); compress it again")
    return manifest


def dequantized(stored: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Stored tensors with their `.scale` companions folded back: int4 groups (uint8) and int8 rows
    to fp32; float tensors as stored (the stage builders cast them)."""
    from ..stored import dequantize_int4_groups, dequantize_int8_rows

    out = {}
    for key, value in stored.items():
        if key.endswith(SCALE):
            continue
        scale = stored.get(key + SCALE)
        if scale is None:
            out[key] = value
        elif value.dtype == torch.uint8:
            out[key] = dequantize_int4_groups(value, scale)
        else:
            out[key] = dequantize_int8_rows(value, scale)
    return out


def _text_table(stored: dict[str, torch.Tensor], args) -> Any:
    """The stored text embedding as a module (None: a plain full table, left in `stored`)."""
    from ..cosyvoice3.vocab import CompactEmbedding
    from ..stored import Int8RowEmbedding

    row_of_id, scale = stored.pop(ROW_MAP_KEY, None), stored.pop(TEXT_KEY + SCALE, None)
    if row_of_id is None and scale is None:
        return None
    weight = stored.pop(TEXT_KEY)
    rows = args.text_vocab_size if row_of_id is None else int((row_of_id >= 0).sum())
    if row_of_id is not None and (tuple(row_of_id.shape) != (args.text_vocab_size,) or row_of_id.dtype != torch.int32):
        raise InputError(f"{TALKER_FILE}: the token map does not cover the {args.text_vocab_size} text ids of config.json")
    if tuple(weight.shape) != (rows, args.text_hidden_size):
        raise InputError(f"{TALKER_FILE}: the text table is {list(weight.shape)}, its token map implies {[rows, args.text_hidden_size]}")
    table = weight.float() if scale is None else Int8RowEmbedding(weight, scale)
    return table if row_of_id is None else CompactEmbedding(table, row_of_id)


def load_compressed(model_dir: Path) -> Checkpoint:
    """A folder `epub2audio model compress` wrote, checked as strictly as an official one."""
    from ..stored import load_safetensors
    from .code_predictor import CodePredictor
    from .decoder import Decoder
    from .talker import PREFIX, Talker

    manifest = read_manifest(model_dir)
    paths = CheckpointPaths(model_dir)
    names = [*MODEL_FILES[:2], *TEXT_TOKENIZER_FILES, TALKER_FILE, f"{SPEECH_TOKENIZER}/config.json", DECODER_FILE]
    missing = [n for n in names if not (model_dir / n).is_file()]
    if missing:
        raise InputError(f"{model_dir} is not a complete compressed Qwen3-TTS folder; missing: {', '.join(missing)}")
    config, speech_config, kind, talker_args, cp_args, dec_args, generation, text_ids = read_configs(paths)
    stored, _ = load_safetensors(model_dir / TALKER_FILE)
    table = _text_table(stored, talker_args)
    sd = dequantized(stored)
    expected = {PREFIX + k: s for k, s in expected_shapes(Talker, talker_args).items()}
    expected.update({PREFIX + "code_predictor." + k: s for k, s in expected_shapes(CodePredictor, cp_args).items()})
    modules = {}
    if table is not None:
        expected.pop(TEXT_KEY)
        modules[TEXT_TABLE] = table
    compare(TALKER_FILE, sd, expected, "talker with the dimensions of config.json")
    dec_stored, _ = load_safetensors(model_dir / DECODER_FILE)
    dec_sd = {k[len("decoder."):]: v for k, v in dec_stored.items() if k.startswith("decoder.")}
    if len(dec_sd) != len(dec_stored):
        raise InputError(f"{DECODER_FILE} holds tensors other than decoder.*")
    compare(DECODER_FILE, dec_sd, expected_shapes(Decoder, dec_args), "speech-tokenizer decoder")
    return Checkpoint(
        paths=paths, config=config, speech_config=speech_config, talker_args=talker_args,
        code_predictor_args=cp_args, decoder_args=dec_args, generation=generation, text_ids=text_ids,
        model_kind=kind, state_dict=sd, decoder_state_dict=dec_sd, compressed=manifest, talker_modules=modules,
    )  # fmt: skip
