"""The Qwen3-TTS Talker's decoder stack and codec head on ONNX Runtime (CPU), fp32.

Why: a Talker decode step reads the whole stack's weights (1.77 GB fp32 at 0.6B), and ONNX Runtime's
MLAS kernels read them faster than torch does on this kind of CPU. Measured (bench/qwen3_onnx_talker.py,
full 0.6B shapes, random weights, 2-core x86-64 EPYC, best of 5 interleaved rounds;
bench/results/qwen3-onnx-talker-full-2core-shared.txt): one step after a 40-position prefill on 2
threads 0.060 s against torch's 0.118 s (1.97x), on 1 thread 1.40x; logits 1.49e-5 off upstream's
fp64 run (torch's 1.50e-5, upstream's own fp32 floor 1.36e-5), within 2.8e-5 of torch's. The Code
Predictor stays torch's and is most of a frame, so a whole frame gains 1.08-1.15x.

The graph (one for prefill and decode; L = new positions, P = cached positions, both dynamic):

    inputs   inputs_embeds [1, L, H] float32
             past_key_<i>, past_value_<i> [1, n_kv, P, head_dim] float32 (P may be 0)
    outputs  logits [1, vocab] float32   codec head on the LAST position's final-norm hidden state
             hidden [1, H]               that hidden state (the Code Predictor's first input)
             present_key_<i>, present_value_<i> [1, n_kv, P + L, head_dim]

It computes what talker.py computes, with plain ops the TorchScript exporter (`dynamo=False`, as
cosyvoice3/llm_onnx.py) traces: per-head q/k RMSNorm before the rotation, grouped-query attention
with each group's query heads folded into the row axis (no K/V repeat), a causal mask offset by P,
SwiGLU. Rotary angles: talker.py's M-RoPE with its three position rows equal, which is what a
KV-cache session feeds (one position per step), and equal rows make M-RoPE ordinary RoPE at the
same angles, so the graph takes rope_angles of positions P..P+L-1.

What stays on the host, in torch, unchanged: the text and codec embeddings, the text projection
(the prompt is assembled by generate.py from them as for the torch Talker). So `OnnxTalker` is the torch
Talker with its decoder layers moved into the graph: generate.py, build_clone_prompt and the host
sampler run unchanged, and all randomness stays the segment's torch.Generator.

Cache: `<cache_dir()/onnx>/<model_id>-qwen3-talker-fp32/` (talker.onnx, talker.onnx.data, meta.json),
built once through cosyvoice3/onnx_cache.build_once (temporary sibling, renamed into place). The
session's intra-op threads are the worker's budget (torch's count), inter-op parallelism off.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..cosyvoice3 import onnx_cache
from .talker import Talker, TalkerStep, apply_rope, cos_sin, rope_angles

CACHE_FORMAT = "epub2audio-qwen3tts-talker-onnx"
CACHE_VERSION = "1"  # bump when the export changes
CACHE_WHAT = "qwen3-talker-fp32"
MODEL_FILE = "talker.onnx"
DATA_FILE = "talker.onnx.data"


class _ExportTalker(nn.Module):
    """talker.py's decoder stack + codec head with the KV cache as explicit inputs/outputs."""

    def __init__(self, talker: Talker) -> None:
        super().__init__()
        self.args = talker.args
        self.layers, self.norm, self.codec_head = talker.model.layers, talker.model.norm, talker.codec_head
        self.group = talker.args.num_attention_heads // talker.args.num_key_value_heads

    def forward(self, x: torch.Tensor, *past: torch.Tensor):
        a = self.args
        L, P = x.shape[1], past[0].shape[2]
        positions = torch.arange(L, dtype=torch.int64) + P
        cos, sin = cos_sin(rope_angles(a.head_dim, a.rope_theta, positions), x.dtype)
        rows = torch.arange(L, dtype=torch.int64)[:, None] + P  # each query's position
        mask = (torch.arange(P + L, dtype=torch.int64)[None, :] <= rows).repeat(self.group, 1)
        scale = 1.0 / math.sqrt(a.head_dim)
        presents = []
        for i, layer in enumerate(self.layers):
            at = layer.self_attn
            h = layer.input_layernorm(x)
            q = at.q_norm(at.q_proj(h).view(1, L, a.num_attention_heads, a.head_dim)).transpose(1, 2)
            k = at.k_norm(at.k_proj(h).view(1, L, a.num_key_value_heads, a.head_dim)).transpose(1, 2)
            v = at.v_proj(h).view(1, L, a.num_key_value_heads, a.head_dim).transpose(1, 2)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            k = torch.cat([past[2 * i], k], dim=2)
            v = torch.cat([past[2 * i + 1], v], dim=2)
            presents += [k, v]
            # query head j reads kv head j // group: fold the group into the row axis
            qg = q.reshape(1, a.num_key_value_heads, self.group * L, a.head_dim)
            scores = torch.matmul(qg, k.transpose(2, 3)) * scale
            scores = scores.masked_fill(~mask, float("-inf"))
            o = torch.matmul(torch.softmax(scores, dim=-1), v)  # [1, n_kv, group*L, head_dim]
            o = o.reshape(1, a.num_attention_heads, L, a.head_dim).transpose(1, 2).reshape(1, L, -1)
            x = x + at.o_proj(o)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        hidden = self.norm(x[:, -1])
        return (self.codec_head(hidden).float(), hidden, *presents)


def io_names(n_layers: int) -> tuple[list[str], list[str]]:
    past = [f"past_{kv}_{i}" for i in range(n_layers) for kv in ("key", "value")]
    present = [f"present_{kv}_{i}" for i in range(n_layers) for kv in ("key", "value")]
    return ["inputs_embeds", *past], ["logits", "hidden", *present]


def export_fp32(talker: Talker, out_dir: str | os.PathLike) -> Path:
    """Export `talker`'s stack + head (fp32 torch) to out_dir/talker.onnx + talker.onnx.data."""
    import onnx

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    a = talker.args
    ins, outs = io_names(a.num_hidden_layers)
    dummy_past = [torch.zeros(1, a.num_key_value_heads, 2, a.head_dim) for _ in range(2 * a.num_hidden_layers)]
    axes: dict[str, dict[int, str]] = {"inputs_embeds": {1: "L"}}
    axes.update({n: {2: "P"} for n in ins[1:]})
    axes.update({n: {2: "PL"} for n in outs[2:]})
    raw = out_dir / "raw.onnx"
    with torch.inference_mode(False), torch.no_grad():
        torch.onnx.export(
            _ExportTalker(talker).eval(), (torch.zeros(1, 3, a.hidden_size), *dummy_past), str(raw),
            input_names=ins, output_names=outs, dynamic_axes=axes, opset_version=17, do_constant_folding=True,
            dynamo=False,
        )  # fmt: skip
    path = out_dir / MODEL_FILE
    onnx_cache.save_with_external_data(onnx.load(str(raw)), path, DATA_FILE)
    onnx_cache.keep_only(out_dir, MODEL_FILE, DATA_FILE)
    return path


def cache_path(model_id: str, cache_root: str | os.PathLike | None = None) -> Path:
    return onnx_cache.entry_path(model_id, CACHE_WHAT, cache_root)


def _meta(model_id: str, talker: Talker) -> dict[str, Any]:
    a = talker.args
    return {"format": CACHE_FORMAT, "version": CACHE_VERSION, "model_id": model_id, "precision": "fp32",
            "hidden_size": a.hidden_size, "num_hidden_layers": a.num_hidden_layers,
            "num_key_value_heads": a.num_key_value_heads, "head_dim": a.head_dim, "vocab_size": a.vocab_size}  # fmt: skip


def cache_is_valid(path: Path, model_id: str) -> bool:
    meta = onnx_cache.read_meta(path) or {}
    want = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "model_id": model_id, "precision": "fp32"}
    return all(meta.get(k) == v for k, v in want.items()) and (path / MODEL_FILE).is_file() and (path / DATA_FILE).is_file()


def ensure_exported(talker: Talker, model_id: str, cache_root: str | os.PathLike | None = None) -> tuple[Path, bool]:
    """(the cache entry, whether this call built it)."""
    final = cache_path(model_id, cache_root)
    return onnx_cache.build_once(
        final, "fp32", fp32_entry=final, is_valid=lambda path, _: cache_is_valid(path, model_id),
        export_fp32=lambda folder: export_fp32(talker, folder), quantize=_no_quantisation,
        meta=lambda: _meta(model_id, talker),
    )  # fmt: skip


def _no_quantisation(source: Path, folder: Path) -> None:
    raise ValueError("the ONNX Talker runs at fp32 only")


class OnnxTalker:
    """The torch Talker's seam (args, embed_text, embed_codec, codec_row, start_decoding) with the
    decoder stack and codec head in an ONNX Runtime session; see the module docstring."""

    backend = "onnx"
    precision = "fp32"

    def __init__(self, host: Talker, session: Any, model_path: Path) -> None:
        self._host = host  # embeddings, text projection, codec head weight (its layers dropped)
        self.session = session
        self.model_path = Path(model_path)
        self._in, self._out = io_names(host.args.num_hidden_layers)

    def __getattr__(self, name: str):
        # args, model (codec/text embeddings), text_projection, codec_head, embed_text, embed_codec,
        # codec_row: the torch Talker's own
        if name == "_host":
            raise AttributeError(name)
        return getattr(self._host, name)

    @property
    def threads(self) -> int:
        return int(self.session.get_session_options().intra_op_num_threads)

    def start_decoding(self, prompt_embeds: torch.Tensor) -> TalkerStep:
        a = self.args
        prompt = np.ascontiguousarray(prompt_embeds.detach().to("cpu", torch.float32).numpy().reshape(1, -1, a.hidden_size))
        empty = np.zeros((1, a.num_key_value_heads, 0, a.head_dim), dtype=np.float32)
        past: list[np.ndarray] | None = None
        run, ins, outs = self.session.run, self._in, self._out

        def step(x: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
            nonlocal past
            if x is None:
                if past is not None:
                    raise RuntimeError("this session has already run its prompt")
                feeds = {ins[0]: prompt, **dict.fromkeys(ins[1:], empty)}
            else:
                if past is None:
                    raise RuntimeError("run the prompt (step(None)) before feeding steps")
                vec = x.detach().to("cpu", torch.float32).numpy().reshape(1, 1, a.hidden_size)
                feeds = {ins[0]: np.ascontiguousarray(vec), **dict(zip(ins[1:], past))}
            res = run(outs, feeds)
            past = res[2:]
            return torch.from_numpy(res[0][0]), torch.from_numpy(res[1][0])

        return step


def _host_only(talker: Talker) -> Talker:
    """The Talker with its decoder layers and final norm released (they live in the graph)."""
    talker.model.layers = nn.ModuleList()
    talker.model.norm = nn.Identity()
    return talker


def load_onnx_talker(talker: Talker | Callable[[], Talker], model_id: str, cache_root: str | os.PathLike | None = None,
                     *, threads: int | None = None) -> OnnxTalker:  # fmt: skip
    """Export `talker` once into the cache (if needed), then open a session on it. `talker` is
    the fp32 torch Talker (or a callable making it); its layers are released once exported."""
    host = talker() if callable(talker) and not isinstance(talker, nn.Module) else talker
    path, _ = ensure_exported(host, model_id, cache_root)
    session = onnx_cache.make_session(path / MODEL_FILE, threads)
    return OnnxTalker(_host_only(host), session, path / MODEL_FILE)
