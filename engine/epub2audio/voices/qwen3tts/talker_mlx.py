"""The Qwen3-TTS Talker on MLX: mlx-lm's Qwen3 blocks with the Talker's interleaved M-RoPE.

What is mlx-lm's and what is ours:

    model.layers.N.*        mlx_lm.models.qwen3.TransformerBlock (attention with q/k RMSNorm, SwiGLU),
                            unchanged except that every block's `self_attn.rope` is our M-RoPE
    KV cache, masks         mlx_lm.models.cache.KVCache, mlx_lm.models.base.create_attention_mask
    model.norm              mlx.nn.RMSNorm
    model.codec_embedding, model.text_embedding, text_projection, codec_head    ours (plain MLX layers)

A compressed folder's text table (its kept rows and token map, or int8 rows: Checkpoint.talker_modules)
is not widened into an MLX table: it stays the torch module the checkpoint built and ids are looked up
in it on the host (`host_text_table`), then projected on MLX. So a pruned id is refused as torch's
Talker refuses it, an int8 row is the same fp32 row as torch's, and the table keeps its stored size.

The parameter names are the official `model.safetensors` names with `talker.` stripped (the same as
talker.py's), so the torch tensors of `Checkpoint.state_dict` load strictly with no key map.

M-RoPE: frequency j of a head takes its angle from position row 1 (height) when j % 3 == 1 and
j < 3*section[1], from row 2 (width) when j % 3 == 2 and j < 3*section[2], else from row 0 (time),
as talker.py does. mlx-lm's attention calls `rope(x, offset=cache.offset)`; for speech the three
rows are the same position (one per step), which is what an offset gives. A caller that passes
three distinct rows (`TalkerModel.__call__(..., positions=)`) gets them used for this forward;
the inverse frequencies are computed once with torch's own arithmetic so they are talker.py's bits.

The seam is talker.py's, so generate.py's loop and sampling.py's sampler run unchanged on either
backend: `embed_text` / `embed_codec` / `codec_row` return CPU fp32 torch tensors (the prompt is
assembled and each frame's 16 embeddings are summed on the host, in the same order as for torch),
`start_decoding(prompt)` returns a step taking a torch vector and returning the codec logits as a
CPU fp32 torch [vocab] vector plus the last hidden state, which stays an MLX array because only the
MLX Code Predictor reads it. Randomness: none in the MLX graph; every draw is the host sampler's,
from the segment's torch.Generator (cosyvoice3/llm_mlx.py's rule), so identical logits give
identical codes on both backends. fp32 only: the weights (bf16 in the official file) are widened
to float32 on loading, as the torch stages do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import torch
from mlx_lm.models import qwen3
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import KVCache

from .checkpoint import TEXT_TABLE
from .talker import Talker as TorchTalker
from .talker import TalkerArgs, TalkerStep


def qwen3_block_args(args: Any, max_positions: int = 32768) -> qwen3.ModelArgs:
    """mlx-lm's Qwen3 arguments for a TalkerArgs or CodePredictorArgs (same field names).
    rope_scaling None: mlx-lm builds its default RoPE, which the Talker replaces by M-RoPE."""
    return qwen3.ModelArgs(
        model_type="qwen3",
        hidden_size=args.hidden_size,
        num_hidden_layers=args.num_hidden_layers,
        intermediate_size=args.intermediate_size,
        num_attention_heads=args.num_attention_heads,
        rms_norm_eps=args.rms_norm_eps,
        vocab_size=args.vocab_size,
        num_key_value_heads=args.num_key_value_heads,
        max_position_embeddings=max_positions,
        head_dim=args.head_dim,
        tie_word_embeddings=False,
        rope_theta=args.rope_theta,
        rope_scaling=None,
    )


def to_torch(a: mx.array) -> torch.Tensor:
    """An MLX array as a CPU fp32 torch tensor (evaluates it; a copy)."""
    return torch.from_numpy(np.array(a.astype(mx.float32), copy=True))


def to_mlx(t: torch.Tensor) -> mx.array:
    return mx.array(t.detach().to("cpu", torch.float32).numpy())


class InterleavedMRoPE(nn.Module):
    """talker.py's M-RoPE behind mlx-lm's rope call, `rope(x [B, heads, L, D], offset)`.

    One instance is shared by every block of the Talker; the cos/sin of the latest (offset, L) are
    kept, so the 2 x layers calls of one forward compute them once. Underscored attributes are not
    MLX parameters."""

    def __init__(self, args: TalkerArgs) -> None:
        super().__init__()
        from .talker import rope_angles

        half = args.head_dim // 2
        self._inv_freq = to_mlx(rope_angles(args.head_dim, args.rope_theta, torch.ones(1))[0])  # [D/2]
        j = np.arange(half)
        row = np.zeros(half, dtype=np.int32)
        if args.mrope_interleaved:
            for r, n in enumerate(args.mrope_section[1:], 1):
                row[(j % 3 == r) & (j < 3 * n)] = r
        else:  # contiguous sections: t, then h, then w
            row = np.searchsorted(np.cumsum(args.mrope_section), j, side="right").astype(np.int32)
        self._row = mx.array(row)
        self._positions: mx.array | None = None  # [3, L] for the current forward, else offsets
        self._memo: tuple[Any, mx.array, mx.array] | None = None

    def cos_sin(self, offset: int, length: int) -> tuple[mx.array, mx.array]:
        key = (offset, length, id(self._positions))
        if self._memo is not None and self._memo[0] == key:
            return self._memo[1], self._memo[2]
        if self._positions is not None:
            if self._positions.shape != (3, length):
                raise ValueError(f"positions must be [3, {length}], got {list(self._positions.shape)}")
            pos = self._positions.astype(mx.float32)[self._row].T  # [L, D/2]: each frequency's row
        else:
            pos = mx.arange(offset, offset + length, dtype=mx.float32)[:, None]  # three equal rows
        angles = pos * self._inv_freq
        full = mx.concatenate([angles, angles], axis=-1)  # NeoX layout: two halves
        self._memo = (key, mx.cos(full), mx.sin(full))
        return self._memo[1], self._memo[2]

    def __call__(self, x: mx.array, offset: int = 0) -> mx.array:
        cos, sin = self.cos_sin(int(offset), x.shape[-2])
        half = x.shape[-1] // 2
        rotated = mx.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rotated * sin


class TalkerModel(nn.Module):
    """Parameter names `layers.*`, `norm.*`, `codec_embedding.*`, `text_embedding.*` (talker.py's)."""

    def __init__(self, args: TalkerArgs) -> None:
        super().__init__()
        self.args = args
        block_args = qwen3_block_args(args)
        self.layers = [qwen3.TransformerBlock(block_args) for _ in range(args.num_hidden_layers)]
        self.norm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.codec_embedding = nn.Embedding(args.vocab_size, args.hidden_size)
        self.text_embedding = nn.Embedding(args.text_vocab_size, args.text_hidden_size)
        self._rope = InterleavedMRoPE(args)
        for layer in self.layers:
            layer.self_attn.rope = self._rope

    def __call__(self, x: mx.array, cache: list[KVCache] | None = None, positions: mx.array | None = None) -> mx.array:
        """x [1, L, H] -> final-norm hidden [1, L, H]; positions [3, L] default to the cache offset on."""
        mask = create_attention_mask(x, cache[0] if cache else None)
        self._rope._positions = positions
        try:
            for i, layer in enumerate(self.layers):
                x = layer(x, mask, cache[i] if cache else None)
        finally:
            self._rope._positions = None
            self._rope._memo = None
        return self.norm(x)


class TextProjection(nn.Module):
    def __init__(self, args: TalkerArgs) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(args.text_hidden_size, args.text_hidden_size, bias=True)
        self.linear_fc2 = nn.Linear(args.text_hidden_size, args.hidden_size, bias=True)

    def __call__(self, x: mx.array) -> mx.array:
        return self.linear_fc2(nn.silu(self.linear_fc1(x)))


class Talker(nn.Module):
    """talker.py's Talker on MLX, behind the same seam (see the module docstring)."""

    backend = "mlx"

    def __init__(self, args: TalkerArgs) -> None:
        super().__init__()
        self.args = args
        self.model = TalkerModel(args)
        self.text_projection = TextProjection(args)
        self.codec_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)
        self.host_text_table = None  # a compressed folder's torch text table (module docstring)

    @property
    def precision(self) -> str:
        dtype = self.model.layers[0].mlp.gate_proj.weight.dtype
        return {mx.float32: "fp32", mx.float16: "fp16", mx.bfloat16: "bf16"}.get(dtype, str(dtype))

    @classmethod
    def from_state_dict(cls, args: TalkerArgs, state_dict: Mapping[str, torch.Tensor],
                        modules: Mapping[str, Any] | None = None) -> Talker:  # fmt: skip
        """From model.safetensors' tensors (torch, `talker.` keys, any float dtype), strict, fp32.
        `modules`: Checkpoint.talker_modules; its text table is kept as the host's (module docstring)."""
        model = cls(args)  # lazy random init: never evaluated, replaced below
        modules = dict(modules or {})
        table = modules.pop(TEXT_TABLE, None)
        if modules:
            raise ValueError(f"the MLX Talker takes a stored text table only, not {sorted(modules)}")
        if table is not None:
            del model.model["text_embedding"]  # state_dict lacks it: the table stands for it
            model.host_text_table = table
        weights = [(k, to_mlx(v)) for k, v in TorchTalker.own_keys(state_dict).items()]
        model.load_weights(weights, strict=True)
        model.eval()
        mx.eval(model.parameters())
        return model

    def _ids(self, ids: Any, vocab: int, what: str) -> mx.array:
        arr = np.asarray(ids, dtype=np.int64).reshape(1, -1)
        bad = arr[(arr < 0) | (arr >= vocab)]
        if bad.size:
            raise ValueError(f"{what} id {int(bad[0])} is outside the {what} vocabulary (0..{vocab - 1})")
        return mx.array(arr.astype(np.int32))

    def embed_text(self, text_ids: Sequence[int]) -> torch.Tensor:
        """Text ids -> projected text vectors [1, n, H] (torch, fp32)."""
        ids = self._ids(text_ids, self.args.text_vocab_size, "text")
        if self.host_text_table is None:
            return to_torch(self.text_projection(self.model.text_embedding(ids)))
        with torch.inference_mode():
            rows = self.host_text_table(torch.from_numpy(np.array(ids, dtype=np.int64)))
        return to_torch(self.text_projection(to_mlx(rows)))

    def embed_codec(self, codec_ids: Sequence[int]) -> torch.Tensor:
        return to_torch(self.model.codec_embedding(self._ids(codec_ids, self.args.vocab_size, "codec")))

    def codec_row(self, code: int) -> torch.Tensor:
        """The codec embedding of one code [H] (torch, fp32): codebook 1's input to the next step."""
        return to_torch(self.model.codec_embedding.weight[int(code)])

    def __call__(self, inputs_embeds: torch.Tensor | mx.array, positions: mx.array | None = None) -> torch.Tensor:
        """Codec logits at every position, [1, L, H] -> [1, L, vocab] fp32 torch (full recompute: tests)."""
        x = inputs_embeds if isinstance(inputs_embeds, mx.array) else to_mlx(inputs_embeds)
        return to_torch(self.codec_head(self.model(x, positions=positions)))

    def start_decoding(self, prompt_embeds: torch.Tensor) -> TalkerStep:
        prompt = to_mlx(prompt_embeds).reshape(1, -1, self.args.hidden_size)
        cache = [KVCache() for _ in self.model.layers]

        def step(x: torch.Tensor | None) -> tuple[torch.Tensor, mx.array]:
            if x is None:
                if cache[0].offset:
                    raise RuntimeError("this session has already run its prompt")
                h = prompt
            elif not cache[0].offset:
                raise RuntimeError("run the prompt (step(None)) before feeding steps")
            else:
                h = to_mlx(x).reshape(1, 1, self.args.hidden_size)
            hidden = self.model(h, cache)[0, -1]
            logits = self.codec_head(hidden)
            mx.eval(logits, hidden)
            return to_torch(logits), hidden

        return step
