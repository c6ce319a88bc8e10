"""Compact Qwen3-TTS folders: `epub2audio model compress --model-dir SRC --out DST` on a Qwen3-TTS-12Hz
folder (the family is read from config.json). swift-qwen3-tts's techniques, each an option:

    --vocab LANG...      vocabulary pruning by token-map indirection: only the text-embedding rows
                         the languages' scripts need (vocab.py says which), plus a token map
                         (text id -> row); lossless for kept ids; a text needing a dropped id is
                         refused in one line naming its characters. `all` (default) keeps them all.
    --prompt-parts drop  strips the speech tokenizer's encoder (encoder.*, audio -> codes) and a Base
                         model's speaker encoder: only voice cloning reads them. keep (default)
                         stores them apart, as they were.
    --decoder fp16       the 12 Hz decoder at fp16, tensor by tensor after checking max |w|: a tensor
                         beyond fp16's range (65504) stays fp32 and the manifest names it. fp32
                         (default) stores the source's fp32 decoder unchanged.
    --llm int4           the Talker and Code Predictor's decoder-layer projections at 4 bits
                         (stored.quantize_int4_groups: symmetric, groups of 32 inputs, fp16 scales);
                         the embeddings (text, codec, the 15 code tables), the heads (codec head and
                         the 15 code heads) and the text projection at int8 with a scale per row,
                         never under 8 bits; norms and biases fp32.
                         int8: the projections too at int8 per row; the tables stay bf16 (lossless).
                         bf16 (the source's own precision, lossless) / fp32 (widened, lossless).
    length bound         T_max = min(max_new_tokens, max(75, 6 * text tokens)) frames
                         (generate.frame_cap): generation_config.json is copied unchanged and the
                         manifest records the bound, so a compressed folder stops where its source does.

The preset that is swift-qwen3-tts's table is `--llm int4 --decoder fp16 --prompt-parts drop --vocab
LANG...` (with the length bound, which every folder keeps). MLP-neuron and layer pruning are not
built: neither is lossless, and random weights cannot show what they cost.

    DST/
        compressed.json                     manifest: source, options, kept text ids, fp16 report, bound
        config.json generation_config.json  copied
        vocab.json merges.txt tokenizer_config.json (and the small processor files) copied
        talker.safetensors                  talker.* in stored form (checkpoint.py names the keys)
        speaker_encoder.safetensors         Base only, with --prompt-parts keep
        speech_tokenizer/config.json        copied (and its preprocessor_config.json)
        speech_tokenizer/decoder.safetensors
        speech_tokenizer/encoder.safetensors    with --prompt-parts keep

Runs in the worker side (torch). The folder is written into a temporary sibling and renamed into
place: DST is whole or absent.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

import epub2audio
from epub2audio.errors import InputError

from ..stored import INT4_GROUP, load_safetensors, quantize_int4_groups, quantize_int8_rows, save_aligned
from . import checkpoint as ck
from . import vocab as vc
from .generate import FRAMES_PER_TEXT_TOKEN, MIN_FRAMES

LLM_CHOICES = ("fp32", "bf16", "int8", "int4")
DECODER_CHOICES = ("fp32", "fp16")
TABLES = {"fp32": "fp32", "bf16": "bf16", "int8": "bf16", "int4": "int8"}  # per --llm
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FP16_MAX = float(torch.finfo(torch.float16).max)
SMALL_FILES = ("preprocessor_config.json",)  # copied when present (upstream's processor reads them)


def is_layer_projection(key: str) -> bool:
    """A decoder layer's q/k/v/o or gate/up/down weight (Talker or Code Predictor)."""
    return ".layers." in key and key.endswith("_proj.weight")


def is_table(key: str) -> bool:
    """Embeddings, heads and the text projection: never under 8 bits."""
    return (key.endswith("embedding.weight") or ".codec_embedding." in key or key.endswith("codec_head.weight")
            or ".lm_head." in key or (".text_projection." in key and key.endswith(".weight")))  # fmt: skip


def compress_talker_state_dict(sd: dict, llm: str, row_of_id: torch.Tensor | None = None) -> dict:
    """talker.* in stored form (module docstring), official key names, scales under `.scale`."""
    tables = TABLES[llm]
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if key == ck.TEXT_KEY and row_of_id is not None:
            value = value[(row_of_id >= 0).nonzero().reshape(-1)]
            out[ck.ROW_MAP_KEY] = row_of_id.contiguous()
        if value.dim() != 2:  # norms, biases
            out[key] = value.float().contiguous()
        elif is_layer_projection(key) and llm == "int4" and value.shape[1] % INT4_GROUP == 0:
            out[key], out[key + ck.SCALE] = quantize_int4_groups(value)
        elif is_layer_projection(key) and llm in ("int8", "int4"):  # int8, or int4 on a width groups do not divide
            out[key], out[key + ck.SCALE] = quantize_int8_rows(value)
        elif is_table(key) and tables == "int8":
            out[key], out[key + ck.SCALE] = quantize_int8_rows(value)
        else:
            out[key] = value.to(DTYPES[tables if is_table(key) else llm]).contiguous()  # fp32 / bf16
    return out


def compress_decoder_state_dict(sd: dict, precision: str) -> tuple[dict, dict]:
    """decoder.* at `precision`, and the fp16 report: max |w| overall and the tensors kept fp32
    because they hold values beyond fp16's range (never silently infinite)."""
    out, kept_fp32, top = {}, [], 0.0
    for key, value in sd.items():
        peak = float(value.float().abs().max()) if value.numel() else 0.0
        top = max(top, peak)
        if precision == "fp16" and value.is_floating_point() and peak <= FP16_MAX:
            out["decoder." + key] = value.half().contiguous()
        else:
            if precision == "fp16":
                kept_fp32.append(key)
            out["decoder." + key] = value.float().contiguous()
    return out, {"max_abs": top, "fp16_max": FP16_MAX, "kept_fp32": kept_fp32}


def _prompt_parts(src: Path, kind: str) -> tuple[dict, dict]:
    """(encoder.* of the speech tokenizer, Base's speaker_encoder.*), as stored in the source."""
    speech = load_safetensors(src / ck.SPEECH_TOKENIZER / "model.safetensors")[0]
    encoder = {k: v for k, v in speech.items() if k.startswith("encoder.")}
    speaker = {}
    if kind == "base":
        speaker = {k: v for k, v in load_safetensors(src / "model.safetensors")[0].items() if k.startswith("speaker_encoder.")}
    return encoder, speaker


def compress_folder(src: str | os.PathLike, dst: str | os.PathLike, *, llm: str = "int8", decoder: str = "fp32",
                    vocab: tuple[str, ...] = ("all",), prompt_parts: str = "keep") -> dict:
    """Write the compressed folder `dst` from the official folder `src`. Returns the manifest."""
    for name, value, choices in (("--llm", llm, LLM_CHOICES), ("--decoder", decoder, DECODER_CHOICES),
                                 ("--prompt-parts", prompt_parts, ("keep", "drop"))):  # fmt: skip
        if value not in choices:
            raise InputError(f"{name}: {value!r} is not one of {', '.join(choices)}")
    dst = Path(dst).expanduser()
    if dst.exists():
        raise InputError(f"{dst} already exists; choose a new --out folder")
    if not dst.parent.is_dir():
        raise InputError(f"{dst.parent} is not a folder")
    src = Path(src).expanduser()
    if (src / ck.MANIFEST).is_file():
        raise InputError(f"{src} is already a compressed folder; compress the original model folder")
    ckpt = ck.load_checkpoint(src)
    vocab = tuple(vocab) or ("all",)
    row_of_id = None
    if vocab != ("all",):
        if "all" in vocab:
            raise InputError("--vocab: 'all' cannot be combined with languages")
        tokenizer = vc.load_text_tokenizer(src)
        try:
            kept = vc.kept_ids(tokenizer.get_vocab(), vc.special_ids(src, tokenizer, ckpt.text_ids.values()), vocab)
        except ValueError as e:
            raise InputError(str(e)) from None
        row_of_id = vc.row_map(kept, ckpt.talker_args.text_vocab_size)

    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent))
    try:
        (tmp / ck.SPEECH_TOKENIZER).mkdir()
        for name in (*ck.MODEL_FILES[:2], *ck.TEXT_TOKENIZER_FILES, *SMALL_FILES):
            if (src / name).is_file():
                shutil.copy2(src / name, tmp / name)
        for name in ("config.json", *SMALL_FILES):
            if (src / ck.SPEECH_TOKENIZER / name).is_file():
                shutil.copy2(src / ck.SPEECH_TOKENIZER / name, tmp / ck.SPEECH_TOKENIZER / name)
        save_aligned(compress_talker_state_dict(ckpt.state_dict, llm, row_of_id), tmp / ck.TALKER_FILE,
                     {"llm": llm, "tables": TABLES[llm]})
        ckpt.state_dict = {}
        dec_sd, fp16_report = compress_decoder_state_dict(ckpt.decoder_state_dict, decoder)
        save_aligned(dec_sd, tmp / ck.DECODER_FILE, {"precision": decoder})
        del dec_sd
        ckpt.decoder_state_dict = {}
        if prompt_parts == "keep":
            encoder, speaker = _prompt_parts(src, ckpt.model_kind)
            if encoder:
                save_aligned(encoder, tmp / ck.ENCODER_FILE, {"part": "speech-tokenizer encoder"})
            if speaker:
                save_aligned(speaker, tmp / ck.SPEAKER_ENCODER_FILE, {"part": "speaker encoder"})
        manifest = {
            "format": ck.COMPRESSED_FORMAT, "version": ck.COMPRESSED_VERSION,
            "source": {"model_type": ckpt.config.get("model_type"), "tts_model_type": ckpt.model_kind,
                       "tts_model_size": ckpt.config.get("tts_model_size")},
            "options": {"llm": llm, "tables": TABLES[llm], "decoder": decoder, "vocab": list(vocab), "prompt_parts": prompt_parts},
            "kept_text_ids": None if row_of_id is None else int((row_of_id >= 0).sum()),
            "decoder_fp16": fp16_report if decoder == "fp16" else None,
            "length_bound": {"rule": "min(max_new_tokens, max(min_frames, frames_per_text_token * text tokens))",
                             "min_frames": MIN_FRAMES, "frames_per_text_token": FRAMES_PER_TEXT_TOKEN,
                             "max_new_tokens": ckpt.generation.max_new_tokens},
            "tool": f"epub2audio {epub2audio.__version__}",
            "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        }  # fmt: skip
        (tmp / ck.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        for f in tmp.rglob("*"):
            if f.is_file():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        os.rename(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def folder_sizes(d: Path) -> dict[str, int]:
    return {p.relative_to(d).as_posix(): p.stat().st_size for p in sorted(d.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------
# The child process of `epub2audio model compress`


def _compress_request(request: dict) -> dict:
    manifest = compress_folder(request["model_dir"], request["out"], llm=request["llm"], decoder=request["decoder"],
                               vocab=tuple(request["vocab"]), prompt_parts=request["prompt_parts"])
    sizes = {n: b for n, b in folder_sizes(Path(request["out"])).items() if n not in ck.TEXT_TOKENIZER_FILES}
    return {"manifest": manifest, "sizes": sizes}  # the CLI prints them "without the tokenizer"


if __name__ == "__main__":
    from epub2audio.worker import oneshot

    sys.exit(oneshot.run(_compress_request))
