"""The CosyVoice3 LLM stage on MLX: mlx-lm's Qwen2 plus our two speech tables and a KV-cache decode.

Only the non-Qwen2 pieces are ours (spec 1.4, "MLX mapping"):

    llm.model.model.X        -> mlx_lm.models.qwen2.Qwen2Model .X   (the backbone, unchanged)
    llm.model.lm_head.weight -> dropped (tied to embed_tokens, never used for speech)
    speech_embedding.weight  -> our nn.Embedding [6761, H] (input rows, also sos / task_id)
    llm_decoder.weight       -> our nn.Linear(H, 6761, bias=False) (output projection)

`Qwen2Model.__call__(None, cache, input_embeddings=...)` takes precomputed input vectors and
returns post-final-RMSNorm hidden states, which is what upstream feeds to `llm_decoder`. The KV
cache is mlx-lm's (`make_prompt_cache`), so prefill and one-token steps continue positions exactly
as upstream's HF cache does.

The seam is the torch stage's: `start_decoding(text_ids, prompt_speech_tokens) -> NextLogp`, a
function called with None (prefill) and then with each sampled token, returning the next-token
log-probabilities as a CPU fp32 torch [6761] vector. So `generate.py`'s loop and `sampling.py`'s
sampler run unchanged on top of either backend.

Randomness: there is ONE sampler for every backend, the host sampler in `sampling.py`, drawing
from a `torch.Generator` that `CosyVoice3Voice.speech_tokens` creates per segment and seeds with
the segment's seed. That generator *is* the segment's PRNG key: it is derived from nothing but
the seed, is never shared between segments, and the MLX graph draws no random numbers at all.
Consequences: (1) identical log-probs give identical tokens on every backend, so a backend
change can only move a token where the logits themselves differ; (2) MLX output is reproducible
for a seed because MLX's forward pass is deterministic; (3) no MLX-native sampler exists to keep
bit-compatible with upstream's torch draws. Shipping 6761 floats to the host per token costs
~27 kB and one sync, which the feedback of the sampled token needs anyway.

Weights are converted ONCE per (model_id, precision) from llm.pt to a safetensors file under
`epub2audio.config.cache_dir()/mlx/<model_id>/` and loaded from there with `mx.load`. The
conversion streams tensor by tensor (and row block by row block), writing each block at its
final offset, so it never holds a second copy of the weights; the file appears atomically
(temp file + fsync + rename). After conversion the caller drops its torch state dict *before*
the MLX model is built (`backends.build_llm` does this), so the process never holds both.

Precisions (what `MLXSpeechLM.precision` reports is read back from the built modules):

    fp32  reference; every array float32
    fp16  every array float16 (norms, biases and both speech tables too, as mlx-lm converts)
    bf16  every array bfloat16
    int8  MLX affine quantisation, group 64, 8 bits, of every 2-D weight of the Qwen2 backbone
    int4  (the 7 projections of each layer and the text embedding `embed_tokens`); scales,
          biases, norms, attention biases, `speech_embedding` and `llm_decoder` stay float32,
          and activations run in float32. The speech head is left unquantised on purpose: it
          is 1 % of the bytes and it is exactly what the sampler reads. The text embedding
          never goes below 8 bits (EMBEDDING_MIN_BITS: at int4 it is 8-bit): quantised
          embeddings caused pacing anomalies in swift-qwen3-tts, and one row per token read
          costs nothing in decode speed.

Log-probabilities are always computed as `log_softmax(float32(llm_decoder(h)))`, as in torch.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import torch
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.models.qwen2 import ModelArgs, Qwen2Model

from .llm import SOS_ID, TASK_ID, LLMArgs, NextLogp, check_prompt_ids

CACHE_FORMAT = "epub2audio-cosyvoice3-llm-mlx"
CACHE_VERSION = "2"  # bump when the conversion changes; the file name carries it (2: 8-bit embed_tokens at int4)
GROUP_SIZE = 64
EMBEDDING_MIN_BITS = 8  # tables and the speech head stay at 8 bits or more in every precision


@dataclass(frozen=True)
class MLXPrecision:
    name: str
    dtype: Any  # float dtype of every unquantised array (and of the quantisation scales/biases)
    bits: int | None = None  # None: no quantisation

    @property
    def quantized(self) -> bool:
        return self.bits is not None


PRECISIONS: dict[str, MLXPrecision] = {
    "fp32": MLXPrecision("fp32", mx.float32),
    "fp16": MLXPrecision("fp16", mx.float16),
    "bf16": MLXPrecision("bf16", mx.bfloat16),
    "int8": MLXPrecision("int8", mx.float32, 8),
    "int4": MLXPrecision("int4", mx.float32, 4),
}

_DTYPE_NAMES = {mx.float32: "fp32", mx.float16: "fp16", mx.bfloat16: "bf16"}
_ST_DTYPES = {mx.float32: "F32", mx.float16: "F16", mx.bfloat16: "BF16", mx.uint32: "U32"}
_ITEMSIZE = {mx.float32: 4, mx.float16: 2, mx.bfloat16: 2, mx.uint32: 4}
_PREFIX = "llm.model.model."
_LM_HEAD_KEY = "llm.model.lm_head.weight"
_ROW_BLOCK_BYTES = 32 << 20  # conversion works on row blocks of at most ~32 MB of fp32 input


def get_precision(name: str) -> MLXPrecision:
    try:
        return PRECISIONS[name]
    except KeyError:
        raise ValueError(f"MLX LLM precision must be one of {', '.join(PRECISIONS)}; got {name!r}") from None


def qwen2_model_args(args: LLMArgs) -> ModelArgs:
    """mlx-lm's Qwen2 arguments for our LLMArgs (mlx-lm derives head_dim = hidden / heads)."""
    if args.head_dim * args.num_attention_heads != args.hidden_size:
        raise ValueError(
            f"mlx-lm's Qwen2 needs head_dim * heads == hidden_size; got {args.head_dim} * "
            f"{args.num_attention_heads} != {args.hidden_size}"
        )
    return ModelArgs(
        model_type="qwen2",
        hidden_size=args.hidden_size,
        num_hidden_layers=args.num_hidden_layers,
        intermediate_size=args.intermediate_size,
        num_attention_heads=args.num_attention_heads,
        rms_norm_eps=args.rms_norm_eps,
        vocab_size=args.vocab_size,
        num_key_value_heads=args.num_key_value_heads,
        rope_theta=args.rope_theta,
        rope_traditional=False,  # HF/NeoX half rotation
        tie_word_embeddings=True,  # no lm_head is built; we never need one
    )


# ---------------------------------------------------------------------------------------------
# The model


class CosyVoice3MLX(nn.Module):
    """Parameter names: `model.*` (mlx-lm Qwen2Model), `speech_embedding.weight`, `llm_decoder.weight`."""

    def __init__(self, args: LLMArgs) -> None:
        super().__init__()
        self.model = Qwen2Model(qwen2_model_args(args))
        self.speech_embedding = nn.Embedding(args.speech_vocab_size, args.hidden_size)
        self.llm_decoder = nn.Linear(args.hidden_size, args.speech_vocab_size, bias=False)

    def hidden(self, input_embeddings: mx.array, cache: list[Any] | None) -> mx.array:
        return self.model(None, cache=cache, input_embeddings=input_embeddings)

    def logp(self, hidden_last: mx.array) -> mx.array:
        """[..., H] -> fp32 log-probabilities over the speech vocabulary."""
        logits = self.llm_decoder(hidden_last).astype(mx.float32)
        return logits - mx.logsumexp(logits, axis=-1, keepdims=True)

    def __call__(self, input_embeddings: mx.array, cache: list[Any] | None = None) -> mx.array:
        """Full-sequence reference: [1, L, H] -> [1, L, 6761] fp32 log-probabilities."""
        return self.logp(self.hidden(input_embeddings, cache))


def _quantize_backbone(model: CosyVoice3MLX, bits: int, group_size: int = GROUP_SIZE) -> None:
    """Swap the backbone's Linear/Embedding layers for quantised ones (the speech tables stay;
    the text embedding gets at least EMBEDDING_MIN_BITS)."""

    def params(_path: str, m: nn.Module) -> bool | dict:
        if isinstance(m, nn.Embedding):
            return {"group_size": group_size, "bits": max(bits, EMBEDDING_MIN_BITS)}
        return isinstance(m, nn.Linear)

    nn.quantize(model.model, group_size=group_size, bits=bits, class_predicate=params)


class MLXSpeechLM:
    """The MLX LLM stage behind the backend seam (`backend`, `precision`, `args`, `start_decoding`)."""

    backend = "mlx"
    recipe = ""  # "stored": a compressed folder's own quantisation (llm_mlx_folder), part of the voice's id

    def __init__(self, model: CosyVoice3MLX, args: LLMArgs, row_of_id: np.ndarray | None = None) -> None:
        self.model = model
        self.args = args
        self.row_of_id = row_of_id  # a compact text table's row of each token id (vocab.py), -1: left out

    @property
    def device(self) -> str:
        """"metal" where MLX computes on the GPU (Apple Silicon), else "cpu" (e.g. mlx-cpu on Linux)."""
        return "metal" if mx.default_device().type == mx.DeviceType.gpu else "cpu"

    @property
    def precision(self) -> str:
        """Read back from the modules that run: quantised layer bits, else the weight dtype."""
        layer = self.model.model.layers[0]
        projections = [
            layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj,
            layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj,
        ]  # fmt: skip
        if all(isinstance(p, nn.QuantizedLinear) for p in projections):
            bits = {p.bits for p in projections}
            return f"int{bits.pop()}" if len(bits) == 1 else "mixed"
        if any(isinstance(p, nn.QuantizedLinear) for p in projections):
            return "mixed"
        dtype = layer.mlp.gate_proj.weight.dtype
        return _DTYPE_NAMES.get(dtype, str(dtype))

    def embed_prompt(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> mx.array:
        """[sos, text embeddings, task_id, prompt speech embeddings] as [1, L, H]."""
        check_prompt_ids(self.args, text_ids, prompt_speech_tokens)
        m = self.model

        def speech(ids: Sequence[int]) -> mx.array:
            return m.speech_embedding(mx.array(list(ids), dtype=mx.int32))

        parts = [speech([SOS_ID])]
        if len(text_ids):
            parts.append(m.model.embed_tokens(mx.array(self._text_rows(text_ids), dtype=mx.int32)))
        parts.append(speech([TASK_ID]))
        if len(prompt_speech_tokens):
            parts.append(speech(prompt_speech_tokens))
        # a quantised table dequantises to its scales' dtype (fp32); everything runs at the norms' dtype
        return mx.concatenate([p.astype(m.model.norm.weight.dtype) for p in parts], axis=0)[None]

    def _text_rows(self, text_ids: Sequence[int]) -> list[int]:
        """The text table's rows for `text_ids`: the ids themselves, or a compact table's rows
        (refusing an id it left out, as vocab.CompactEmbedding does: never a stale row)."""
        if self.row_of_id is None:
            return list(text_ids)
        rows = self.row_of_id[np.asarray(list(text_ids), dtype=np.int64)]
        if (rows < 0).any():
            from .vocab import OutsideVocabulary

            missing = sorted({int(i) for i, r in zip(text_ids, rows) if r < 0})
            raise OutsideVocabulary(f"token id(s) {missing[:5]} are outside this compressed model's vocabulary")
        return rows.tolist()

    def start_decoding(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> NextLogp:
        """A fresh decoding session over its own mlx-lm KV cache (see `llm.NextLogp`)."""
        prompt = self.embed_prompt(text_ids, prompt_speech_tokens)
        cache = make_prompt_cache(self.model.model)
        model = self.model
        state = {"started": False}

        def next_logp(token: int | None) -> torch.Tensor:
            if token is None:
                if state["started"]:
                    raise RuntimeError("this session has already run its prompt")
                x = prompt
            else:
                if not state["started"]:
                    raise RuntimeError("run the prompt (next_logp(None)) before feeding tokens")
                x = model.speech_embedding(mx.array([[int(token)]], dtype=mx.int32))
            state["started"] = True
            logp = model.logp(model.hidden(x, cache)[0, -1])
            return torch.from_numpy(np.array(logp, copy=True))  # evaluates; CPU fp32 [6761]

        return next_logp


# ---------------------------------------------------------------------------------------------
# Conversion: llm.pt (torch) -> safetensors (MLX layout, target precision), streamed


def mlx_key(torch_key: str) -> str | None:
    """llm.pt key -> MLX parameter name (None: not kept)."""
    if torch_key == _LM_HEAD_KEY:
        return None
    if torch_key.startswith(_PREFIX):
        return "model." + torch_key[len(_PREFIX) :]
    if torch_key in ("speech_embedding.weight", "llm_decoder.weight"):
        return torch_key
    raise ValueError(f"unexpected llm.pt key {torch_key!r}")


def _bits(key: str, prec: MLXPrecision) -> int:
    """Bits of a quantised array: the precision's, but embedding tables keep EMBEDDING_MIN_BITS."""
    assert prec.bits is not None
    return max(prec.bits, EMBEDDING_MIN_BITS) if key == "model.embed_tokens.weight" else prec.bits


def _is_quantized_key(key: str, shape: Sequence[int]) -> bool:
    """The arrays `_quantize_backbone` quantises: every 2-D weight of the backbone."""
    return key.startswith("model.") and key.endswith(".weight") and len(shape) == 2


@dataclass
class _Entry:
    name: str
    dtype: Any
    shape: tuple[int, ...]
    offset: int = 0

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * _ITEMSIZE[self.dtype]


def _plan(args: LLMArgs, prec: MLXPrecision, group_size: int) -> tuple[list[tuple[str, str, list[_Entry]]], list[_Entry]]:
    """For each llm.pt key, the MLX arrays it becomes (in file order), with offsets assigned."""
    plan: list[tuple[str, str, list[_Entry]]] = []
    for tkey, shape in args.expected_shapes().items():
        key = mlx_key(tkey)
        if key is None:
            continue
        if prec.quantized and _is_quantized_key(key, shape):
            rows, cols = shape
            if cols % group_size:
                raise ValueError(f"{tkey}: input size {cols} is not a multiple of the group size {group_size}")
            base = key[: -len(".weight")]
            entries = [
                _Entry(key, mx.uint32, (rows, cols * _bits(key, prec) // 32)),
                _Entry(base + ".scales", prec.dtype, (rows, cols // group_size)),
                _Entry(base + ".biases", prec.dtype, (rows, cols // group_size)),
            ]
        else:
            entries = [_Entry(key, prec.dtype, tuple(shape))]
        plan.append((tkey, f"quantize{_bits(key, prec)}" if len(entries) == 3 else "cast", entries))
    flat = [e for _, _, es in plan for e in es]
    offset = 0
    for e in flat:
        e.offset = offset
        offset += e.nbytes
    return plan, flat


def _np_bytes(a: mx.array) -> bytes:
    if a.dtype == mx.bfloat16:  # numpy has no bfloat16: ship the raw 16-bit patterns
        a = a.view(mx.uint16)
    return np.asarray(a).tobytes()


def convert_to_safetensors(
    state_dict: Mapping[str, torch.Tensor],
    args: LLMArgs,
    precision: str,
    path: str | os.PathLike,
    metadata: Mapping[str, str] | None = None,
    group_size: int = GROUP_SIZE,
) -> Path:
    """Write llm.pt's tensors as MLX arrays at `precision` to `path` (atomically). Returns path.

    Streams row blocks of one tensor at a time straight to their final offsets, so the extra
    memory is one block, not a second copy of the model.
    """
    prec = get_precision(precision)
    args.check_state_dict(state_dict)
    plan, flat = _plan(args, prec, group_size)
    meta = {
        "format": CACHE_FORMAT,
        "version": CACHE_VERSION,
        "precision": prec.name,
        "group_size": str(group_size) if prec.quantized else "",
        "bits": str(prec.bits) if prec.quantized else "",
        **dict(metadata or {}),
    }
    header: dict[str, Any] = {"__metadata__": meta}
    for e in flat:
        header[e.name] = {"dtype": _ST_DTYPES[e.dtype], "shape": list(e.shape), "data_offsets": [e.offset, e.offset + e.nbytes]}
    hbytes = json.dumps(header, separators=(",", ":")).encode()
    hbytes += b" " * (-len(hbytes) % 8)
    data_start = 8 + len(hbytes)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(len(hbytes).to_bytes(8, "little") + hbytes)
            f.truncate(data_start + sum(e.nbytes for e in flat))
            for tkey, how, entries in plan:
                t = state_dict[tkey].detach()
                for start, block in _row_blocks(t):
                    x = mx.array(block.to(torch.float32).numpy())
                    if how.startswith("quantize"):
                        outs = list(mx.quantize(x, group_size, int(how.removeprefix("quantize"))))
                    else:
                        outs = [x.astype(prec.dtype)]
                    mx.eval(outs)
                    for e, out in zip(entries, outs):
                        row_bytes = e.nbytes // e.shape[0] if e.shape else e.nbytes
                        f.seek(data_start + e.offset + start * row_bytes)
                        f.write(_np_bytes(out))
                    del x, outs
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _row_blocks(t: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
    if t.dim() < 2:
        yield 0, t
        return
    row = max(1, t[0].numel() * 4)
    n = max(1, _ROW_BLOCK_BYTES // row)
    for start in range(0, t.shape[0], n):
        yield start, t[start : start + n]


# ---------------------------------------------------------------------------------------------
# The cache


def default_cache_root() -> Path:
    from epub2audio.config import cache_dir

    return cache_dir() / "mlx"


_SAFE = re.compile(r"[^A-Za-z0-9._+-]")


def cache_path(model_id: str, precision: str, cache_root: str | os.PathLike | None = None) -> Path:
    """<cache_root>/<model_id>/llm-<precision>-v<CACHE_VERSION>.safetensors"""
    if not model_id:
        raise ValueError("the MLX weight cache needs the checkpoint's model_id")
    get_precision(precision)
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    return root / _SAFE.sub("_", model_id) / f"llm-{precision}-v{CACHE_VERSION}.safetensors"


def _cache_is_valid(path: Path, model_id: str, precision: str) -> bool:
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if not 0 < n < 1 << 26:
                return False
            meta = json.loads(f.read(n)).get("__metadata__", {})
    except (OSError, ValueError):
        return False
    want = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "precision": precision, "model_id": model_id}
    return all(meta.get(k) == v for k, v in want.items())


def ensure_converted(
    state_dict: Mapping[str, torch.Tensor] | Callable[[], Mapping[str, torch.Tensor]],
    args: LLMArgs,
    model_id: str,
    precision: str,
    cache_root: str | os.PathLike | None = None,
) -> tuple[Path, bool]:
    """(path of the converted weights, whether this call converted them).

    `state_dict` may be a callable, so a cache hit never even opens llm.pt.
    """
    path = cache_path(model_id, precision, cache_root)
    if path.is_file() and _cache_is_valid(path, model_id, precision):
        return path, False
    sd = state_dict() if callable(state_dict) else state_dict
    convert_to_safetensors(sd, args, precision, path, metadata={"model_id": model_id})
    return path, True


def load_converted(path: str | os.PathLike, args: LLMArgs) -> MLXSpeechLM:
    """Build the MLX model from a converted file (precision from its metadata) and evaluate it."""
    weights, meta = mx.load(str(path), return_metadata=True)
    if meta.get("format") != CACHE_FORMAT:
        raise ValueError(f"{path} is not an epub2audio MLX LLM cache")
    prec = get_precision(meta["precision"])
    model = CosyVoice3MLX(args)  # lazy random init: never evaluated, replaced below
    if prec.quantized:
        _quantize_backbone(model, prec.bits, int(meta["group_size"]))
    model.load_weights(list(weights.items()), strict=True)
    del weights
    model.eval()
    mx.eval(model.parameters())
    lm = MLXSpeechLM(model, args)
    if lm.precision != prec.name:
        raise ValueError(f"{path} says precision {prec.name} but the built model runs {lm.precision}")
    return lm


def load_mlx_llm(
    config_json: Mapping[str, Any],
    state_dict: Mapping[str, torch.Tensor] | Callable[[], Mapping[str, torch.Tensor]],
    model_id: str,
    precision: str = "fp32",
    cache_root: str | os.PathLike | None = None,
    release: Callable[[], None] | None = None,
) -> MLXSpeechLM:
    """Convert once (if the cache lacks this model_id/precision), call `release` so the caller
    drops its torch tensors, then build the MLX model from the cache."""
    sd = state_dict if not callable(state_dict) else None
    args = LLMArgs.from_config(config_json, sd)
    path, _ = ensure_converted(state_dict, args, model_id, precision, cache_root)
    del sd, state_dict
    if release is not None:
        release()
    return load_converted(path, args)


def from_state_dict_uncached(config_json: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor], precision: str = "fp32") -> MLXSpeechLM:
    """For tests and benchmarks: build directly from torch tensors (holds both copies briefly)."""
    args = LLMArgs.from_config(config_json, state_dict)
    prec = get_precision(precision)
    model = CosyVoice3MLX(args)
    weights = [(k, mx.array(v.detach().float().numpy()).astype(prec.dtype)) for tk, v in state_dict.items() if (k := mlx_key(tk))]
    model.load_weights(weights, strict=True)
    if prec.quantized:
        _quantize_backbone(model, prec.bits)
    model.eval()
    mx.eval(model.parameters())
    return MLXSpeechLM(model, args)
