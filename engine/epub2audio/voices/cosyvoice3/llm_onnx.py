"""The CosyVoice3 LLM stage on ONNX Runtime (CPU): the Qwen2 decoder + speech head as one ONNX graph
with an explicit KV cache, exported once from the loaded weights and cached per model and precision.

Why: on CPUs without a GPU, ONNX Runtime's MLAS kernels decode faster than torch at fp32
(reading the weights near the bandwidth floor), and its int8 / int4 weight formats cut the bytes
read per token 4x / 6x (bench/llm.py measures it). bench/cosyvoice3.py, full-size random
weights, 10 s of speech (150 prompt + 250 teacher-forced tokens), 1 thread, shared 2-core x86
(load average ~5), variants interleaved step by step:

    variant       tok/s  LLM RTF  speed-up  argmax agree  mean KL (nats)  max |dlogp|
    torch fp32      7.2     3.69     1.00x         1.000               0            0
    torch int8     27.4     0.97     3.81x         0.793           0.039         1.87
    onnx fp32      12.2     2.16     1.71x         1.000          4.8e-9       3.1e-5
    onnx int8      35.6     0.74     5.00x         0.876           0.013         1.01
    onnx int4      41.4     0.70     5.30x         0.462            0.50         5.72

Random Gaussian weights are the worst case for 4-bit blocks (no outliers to exploit, errors
compound over 24 layers); the int4 deviation on trained weights is unmeasured here. A tried
alternative: MatMulNBits with 8-bit blocks of 32 (accuracy_level 4) gave KL 0.004 (3x closer than
dynamic int8) at ~20 % lower speed; accuracy_level 0 (fp32 activations) is ~10x slower on this CPU.

The graph (one for prefill and decode, dynamic axes L = new positions, P = cached positions):

    inputs   inputs_embeds [1, L, H] float32
             past_key_<i>, past_value_<i> [1, n_kv, P, head_dim] float32, i = 0..layers-1 (P may be 0)
    outputs  logp [1, 6761] float32   log_softmax(llm_decoder(final-norm hidden of the LAST position))
             present_key_<i>, present_value_<i> [1, n_kv, P + L, head_dim]

It computes what `llm.CosyVoice3LM` computes (same RMSNorm, NeoX rotary at positions P..P+L-1,
causal attention offset by P, SwiGLU MLP), written with plain ops so the TorchScript exporter
(`dynamo=False`; onnxscript is not needed) can trace it: grouped-query attention is done by
folding the query heads of a group into the row axis instead of repeating K/V. Embedding lookups
stay on the host (in torch, from the checkpoint's memory-mapped tables: the 544 MB text table is
never copied into the cache or into RAM beyond the rows touched).

Precisions (what `OnnxSpeechLM.precision` reports is read back from the operator types of the
graph the session was built from, never from the request):

    fp32  the exported graph as is; log-probs equal torch fp32 within ~1e-5 (tested <= 1e-4)
    int8  onnxruntime.quantization.quantize_dynamic, per-channel uint8 weights (recipe "u8u8",
          onnx_cache.INT8_RECIPES) with dynamic uint8 activations (DynamicQuantizeLinear +
          MatMulInteger), on every MatMul with a constant weight in the decoder layers; the speech
          head (llm_decoder) stays fp32. The table above was measured with int8 weights ("u8s8")
          on a VNNI CPU; on AVX2 without VNNI those saturate, u8u8 never does. There
          (bench/int8_recipes.py, full size, 1 thread, AVX2 EPYC): u8u8 max |dlogp| 0.93,
          KL 0.012, 2.5x fp32 decode; u8s8 1.27 / 0.026 / 3.0x; u8s8 7-bit 1.33 / 0.029 / 3.1x
    int4  MatMulNBits (com.microsoft), 4-bit symmetric, block 32 along K, accuracy_level 4 (int8
          activations inside the kernel), packed with onnxruntime's own C++ block quantiser
          (`quantize_matmul_4bits`, what `matmul_nbits_quantizer` calls; that module itself needs
          the `onnx_ir` package, which we do not depend on); the speech head stays fp32

Cache: `epub2audio.config.cache_dir()/onnx/<model_id>-<precision>/` holding `model.onnx`,
`model.onnx.data` (external weights) and `meta.json` (format, version, model_id, precision,
dimensions). It is written into a temporary sibling directory and renamed into place, so a
crashed or concurrent export never leaves a half-written cache; a directory whose meta.json does
not match is ignored and rebuilt. Quantised variants are made from an fp32 export (the cached
fp32 one if present, else a temporary one that is deleted afterwards).

The session's intra-op thread count is the worker's thread budget (`threads`, default
`torch.get_num_threads()`); inter-op parallelism is off (the graph is a chain).

Sampling is the host sampler's, through the same seam as the torch and MLX backends:
`start_decoding(text_ids, prompt_speech_tokens) -> NextLogp` (CPU fp32 torch [6761]).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .llm import SOS_ID, SPEECH_TOKEN_SIZE, TASK_ID, CosyVoice3LM, LLMArgs, NextLogp, rope_cos_sin
from . import onnx_cache
from .onnx_cache import (build_once, entry_path, graph_precision, keep_only, make_session, quantize_matmuls_int8,
                         read_meta, save_with_external_data)

CACHE_FORMAT = "epub2audio-cosyvoice3-llm-onnx"
CACHE_VERSION = "2"  # bump when the export or the quantisation changes (2: int8 recipe u8u8)
PRECISIONS = ("fp32", "int8", "int4")
INT4_BLOCK_SIZE = 32
INT4_ACCURACY_LEVEL = 4
MODEL_FILE = "model.onnx"
DATA_FILE = "model.onnx.data"
META_FILE = onnx_cache.META_FILE
HEAD_NODE_MARK = "llm_decoder"  # ONNX node names of the speech head contain this (kept fp32)


# ---------------------------------------------------------------------------------------------
# the exported graph


class _ExportLM(nn.Module):
    """CosyVoice3LM's decoder + head with the KV cache as explicit inputs/outputs (see module doc)."""

    def __init__(self, lm: CosyVoice3LM) -> None:
        super().__init__()
        self.args = lm.args
        self.layers = lm.qwen2.layers
        self.norm = lm.qwen2.norm
        self.llm_decoder = lm.llm_decoder  # node names contain "llm_decoder" (kept fp32)
        a = lm.args
        self.n_heads, self.n_kv, self.hd = a.num_attention_heads, a.num_key_value_heads, a.head_dim
        self.group = self.n_heads // self.n_kv

    def forward(self, inputs_embeds: torch.Tensor, *past: torch.Tensor):
        x = inputs_embeds
        L = x.shape[1]
        P = past[0].shape[2]
        positions = torch.arange(L, dtype=torch.int64, device=inputs_embeds.device) + P
        cos, sin = rope_cos_sin(self.args, positions, x.dtype)
        s = torch.arange(L, dtype=torch.int64, device=inputs_embeds.device)[:, None] + P  # query position
        keys = torch.arange(P + L, dtype=torch.int64, device=inputs_embeds.device)[None, :]
        mask = (keys <= s).repeat(self.group, 1)  # rows are (group member, position)
        scale = 1.0 / math.sqrt(self.hd)
        presents = []
        for i, layer in enumerate(self.layers):
            at = layer.self_attn
            h = layer.input_layernorm(x)
            q = at.q_proj(h).view(1, L, self.n_heads, self.hd).transpose(1, 2)
            k = at.k_proj(h).view(1, L, self.n_kv, self.hd).transpose(1, 2)
            v = at.v_proj(h).view(1, L, self.n_kv, self.hd).transpose(1, 2)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            k = torch.cat([past[2 * i], k], dim=2)
            v = torch.cat([past[2 * i + 1], v], dim=2)
            presents += [k, v]
            # query head j uses kv head j // group: fold the group into the row axis
            qg = q.reshape(1, self.n_kv, self.group * L, self.hd)
            scores = torch.matmul(qg, k.transpose(2, 3)) * scale
            scores = scores.masked_fill(~mask, float("-inf"))
            o = torch.matmul(torch.softmax(scores, dim=-1), v)  # [1, n_kv, group*L, hd]
            o = o.reshape(1, self.n_heads, L, self.hd).transpose(1, 2).reshape(1, L, self.n_heads * self.hd)
            x = x + at.o_proj(o)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        last = self.norm(x[:, -1])
        logp = F.log_softmax(self.llm_decoder(last).float(), dim=-1)
        return (logp, *presents)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


def io_names(n_layers: int) -> tuple[list[str], list[str]]:
    past = [f"past_{kv}_{i}" for i in range(n_layers) for kv in ("key", "value")]
    present = [f"present_{kv}_{i}" for i in range(n_layers) for kv in ("key", "value")]
    return ["inputs_embeds", *past], ["logp", *present]


def export_fp32(lm: CosyVoice3LM, out_dir: str | os.PathLike) -> Path:
    """Export `lm` (fp32 torch) to out_dir/model.onnx + model.onnx.data; returns the model path."""
    import onnx

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    a = lm.args
    wrapper = _ExportLM(lm).eval()
    ins, outs = io_names(a.num_hidden_layers)
    dummy_past = [torch.zeros(1, a.num_key_value_heads, 2, a.head_dim, device="cpu") for _ in range(2 * a.num_hidden_layers)]
    dummy = (torch.zeros(1, 3, a.hidden_size, device="cpu"), *dummy_past)
    axes: dict[str, dict[int, str]] = {"inputs_embeds": {1: "L"}}
    axes.update({n: {2: "P"} for n in ins[1:]})
    axes.update({n: {2: "PL"} for n in outs[1:]})
    raw = out_dir / "raw.onnx"
    with torch.inference_mode(False), torch.no_grad():
        torch.onnx.export(
            wrapper, dummy, str(raw), input_names=ins, output_names=outs, dynamic_axes=axes,
            opset_version=17, do_constant_folding=True, dynamo=False,
        )  # fmt: skip
    model = onnx.load(str(raw))  # pulls in any external data the exporter wrote beside it
    path = out_dir / MODEL_FILE
    save_with_external_data(model, path, DATA_FILE)
    keep_only(out_dir, MODEL_FILE, DATA_FILE)
    return path


def _head_nodes(model: Any) -> list[str]:
    return [n.name for n in model.graph.node if HEAD_NODE_MARK in n.name]


def quantize_int8(src: Path, dst_dir: Path, recipe: str = onnx_cache.INT8_RECIPE) -> Path:
    """Dynamic int8 (per-channel weights, dynamic activations) of the decoder layers' MatMuls."""
    import onnx

    exclude = _head_nodes(onnx.load(str(src), load_external_data=False))
    return quantize_matmuls_int8(src, dst_dir, MODEL_FILE, DATA_FILE, exclude=exclude, recipe=recipe)


def quantize_int4(
    src: Path, dst_dir: Path, block_size: int = INT4_BLOCK_SIZE, accuracy_level: int = INT4_ACCURACY_LEVEL, bits: int = 4
) -> Path:
    """MatMulNBits `bits`-bit (symmetric, blockwise along K) for every decoder-layer MatMul with a
    constant 2-D weight; packing by onnxruntime's C++ quantiser."""
    import onnx
    from onnx import helper, numpy_helper
    from onnxruntime.capi import _pybind_state as C

    quantize = {4: C.quantize_matmul_4bits, 8: C.quantize_matmul_8bits}[bits]
    per_byte = 8 // bits

    model = onnx.load(str(src))
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    head = set(_head_nodes(model))
    new_nodes, drop = [], set()
    for node in g.node:
        w = inits.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is None or node.name in head or len(w.dims) != 2:
            new_nodes.append(node)
            continue
        b = numpy_helper.to_array(w).astype(np.float32)
        k, n = b.shape
        k_blocks = (k + block_size - 1) // block_size
        if k_blocks * block_size != k:
            b = np.pad(b, ((0, k_blocks * block_size - k), (0, 0)))
        b = np.ascontiguousarray(b)
        packed = np.zeros((n, k_blocks, block_size // per_byte), dtype=np.uint8)
        scales = np.zeros((n, k_blocks), dtype=np.float32)
        zp = np.zeros((n, (k_blocks + per_byte - 1) // per_byte), dtype=np.uint8)
        quantize(packed, b, scales, zp, block_size, n, k, True)
        qn, sn = w.name + f"_Q{bits}", w.name + "_scales"
        g.initializer.extend([numpy_helper.from_array(packed, qn), numpy_helper.from_array(scales, sn)])
        drop.add(w.name)
        new_nodes.append(helper.make_node(
            "MatMulNBits", [node.input[0], qn, sn], list(node.output), name=node.name + f"_Q{bits}", domain="com.microsoft",
            K=k, N=n, bits=bits, block_size=block_size, accuracy_level=accuracy_level,
        ))  # fmt: skip
    still_used = {i for nd in new_nodes for i in nd.input}
    keep = [t for t in g.initializer if t.name not in drop or t.name in still_used]
    del g.initializer[:]
    g.initializer.extend(keep)
    del g.node[:]
    g.node.extend(new_nodes)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    dst_dir.mkdir(parents=True, exist_ok=True)
    path = dst_dir / MODEL_FILE
    save_with_external_data(model, path, DATA_FILE)
    return path


# ---------------------------------------------------------------------------------------------
# cache


def cache_path(model_id: str, precision: str, cache_root: str | os.PathLike | None = None) -> Path:
    """<cache_root>/<model_id>-<precision>/ (cache_root defaults to cache_dir()/onnx)."""
    check_precision(precision)
    return entry_path(model_id, precision, cache_root)


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"the onnx LLM runs at {', '.join(PRECISIONS)}; not {precision!r}")


def _recipe(precision: str) -> str:
    """How the graph's weights were made: part of the cache key (another recipe is a rebuild)."""
    return {"int8": onnx_cache.INT8_RECIPE, "int4": f"nbits{INT4_BLOCK_SIZE}-acc{INT4_ACCURACY_LEVEL}"}.get(precision, "fp32")


def _meta(model_id: str, precision: str, args: LLMArgs) -> dict[str, Any]:
    return {
        "format": CACHE_FORMAT, "version": CACHE_VERSION, "model_id": model_id, "precision": precision,
        "recipe": _recipe(precision),
        "hidden_size": args.hidden_size, "num_hidden_layers": args.num_hidden_layers,
        "num_key_value_heads": args.num_key_value_heads, "head_dim": args.head_dim,
        "speech_vocab_size": args.speech_vocab_size,
    }  # fmt: skip


def cache_is_valid(path: Path, model_id: str, precision: str) -> bool:
    meta = read_meta(path) or {}
    want = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "model_id": model_id, "precision": precision,
            "recipe": _recipe(precision)}
    return all(meta.get(k) == v for k, v in want.items()) and (path / MODEL_FILE).is_file() and (path / DATA_FILE).is_file()


def ensure_exported(
    lm: CosyVoice3LM | Callable[[], CosyVoice3LM],
    model_id: str,
    precision: str,
    cache_root: str | os.PathLike | None = None,
) -> tuple[Path, bool]:
    """(cache directory of `precision`, whether this call built it). `lm` may be a callable so a
    cache hit never builds the torch model."""
    check_precision(precision)
    get = lm if callable(lm) and not isinstance(lm, nn.Module) else (lambda: lm)
    model = None

    def torch_lm() -> CosyVoice3LM:
        nonlocal model
        if model is None:
            model = get()
        return model

    return build_once(
        cache_path(model_id, precision, cache_root), precision,
        fp32_entry=cache_path(model_id, "fp32", cache_root),
        is_valid=lambda path, p: cache_is_valid(path, model_id, p),
        export_fp32=lambda folder: export_fp32(torch_lm(), folder),
        quantize=lambda source, folder: (quantize_int8 if precision == "int8" else quantize_int4)(source / MODEL_FILE, folder),
        meta=lambda: _meta(model_id, precision, torch_lm().args),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# runtime


class OnnxSpeechLM:
    """The ONNX Runtime LLM behind the backend seam (`start_decoding` -> NextLogp)."""

    backend = "onnx"
    device = "cpu"  # ONNX Runtime's CPU execution provider

    def __init__(
        self, session: Any, args: LLMArgs, embed_tokens: torch.Tensor, speech_embedding: torch.Tensor, model_path: Path
    ) -> None:
        self.session = session
        self.args = args
        self.embed_tokens = embed_tokens  # [vocab, H] fp32 (memory-mapped from llm.pt)
        self.speech_embedding = speech_embedding  # [6761, H] fp32
        self.model_path = Path(model_path)
        self._precision = graph_precision(model_path)
        self._in_names, self._out_names = io_names(args.num_hidden_layers)

    @property
    def precision(self) -> str:
        return self._precision

    @property
    def threads(self) -> int:
        return int(self.session.get_session_options().intra_op_num_threads)

    @property
    def providers(self) -> list[str]:
        return list(self.session.get_providers())

    def embed_prompt(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> np.ndarray:
        a = self.args
        bad = next((t for t in text_ids if not 0 <= t < a.vocab_size), None)
        if bad is not None:
            raise ValueError(f"text id {bad} is outside the text vocabulary (0..{a.vocab_size - 1})")
        bad = next((t for t in prompt_speech_tokens if not 0 <= t < SPEECH_TOKEN_SIZE), None)
        if bad is not None:
            raise ValueError(f"prompt speech token {bad} is not a speech code (0..{SPEECH_TOKEN_SIZE - 1})")
        sp = self.speech_embedding
        with torch.inference_mode():
            x = torch.cat([
                sp[SOS_ID : SOS_ID + 1],
                self.embed_tokens[torch.tensor(list(text_ids), dtype=torch.long, device="cpu")],
                sp[TASK_ID : TASK_ID + 1],
                sp[torch.tensor(list(prompt_speech_tokens), dtype=torch.long, device="cpu")],
            ])  # fmt: skip
        return np.ascontiguousarray(x.float().numpy()[None])

    def start_decoding(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> NextLogp:
        prompt = self.embed_prompt(text_ids, prompt_speech_tokens)
        a = self.args
        empty = np.zeros((1, a.num_key_value_heads, 0, a.head_dim), dtype=np.float32)
        state: dict[str, Any] = {"past": None}
        sp = self.speech_embedding
        run, ins, outs = self.session.run, self._in_names, self._out_names

        def next_logp(token: int | None) -> torch.Tensor:
            past = state["past"]
            if token is None:
                if past is not None:
                    raise RuntimeError("this session has already run its prompt")
                x, past = prompt, [empty] * (2 * a.num_hidden_layers)
            else:
                if past is None:
                    raise RuntimeError("run the prompt (next_logp(None)) before feeding tokens")
                x = np.ascontiguousarray(sp[int(token)].float().numpy().reshape(1, 1, -1))
            feeds = {ins[0]: x}
            feeds.update(zip(ins[1:], past))
            res = run(outs, feeds)
            state["past"] = res[1:]
            return torch.from_numpy(res[0][0])

        return next_logp


def load_onnx_llm(
    config_json: Mapping[str, Any],
    state_dict: Mapping[str, torch.Tensor] | Callable[[], Mapping[str, torch.Tensor]],
    model_id: str,
    precision: str = "fp32",
    cache_root: str | os.PathLike | None = None,
    *,
    threads: int | None = None,
    release: Callable[[], None] | None = None,
) -> OnnxSpeechLM:
    """Export/quantise once into the cache (if needed), then open an ORT session on it.

    Keeps only the two embedding tables of `state_dict` (memory-mapped views, no copy), calls
    `release()` so the caller can drop the rest, then builds the session.
    """
    check_precision(precision)
    sd = state_dict() if callable(state_dict) else state_dict
    args = LLMArgs.from_config(config_json, sd)
    path, _ = ensure_exported(partial(CosyVoice3LM.from_checkpoint, config_json, sd), model_id, precision, cache_root)
    embed = sd["llm.model.model.embed_tokens.weight"]
    speech = sd["speech_embedding.weight"]
    del sd
    if release is not None:
        release()
    session = make_session(path / MODEL_FILE, threads)
    lm = OnnxSpeechLM(session, args, embed, speech, path / MODEL_FILE)
    if lm.precision != precision:
        raise RuntimeError(f"the cached ONNX graph at {path} runs at {lm.precision}, not {precision}")
    return lm


def from_lm_uncached(lm: CosyVoice3LM, precision: str, work_dir: str | os.PathLike, threads: int | None = None) -> OnnxSpeechLM:
    """For tests and benchmarks: export (and quantise) `lm` into work_dir and open a session."""
    path, _ = ensure_exported(lm, "uncached", precision, work_dir)
    session = make_session(path / MODEL_FILE, threads)
    return OnnxSpeechLM(session, lm.args, lm.qwen2.embed_tokens.weight.detach(), lm.speech_embedding.weight.detach(), path / MODEL_FILE)
