"""The Qwen3-TTS Talker: a Qwen3 decoder that reads projected text and writes codebook 1 at 12.5 Hz.

The network (0.6B: 28 layers, hidden 1024, 16 query heads over 8 key/value heads of 128, SwiGLU
3072) is Qwen3: RMSNorm on every query and key head before the rotation, no biases. Its rotary
embedding is M-RoPE with `mrope_section` [24, 20, 20] laid out *interleaved*: frequency j of a head
takes its angle from position row 1 (height) when j % 3 == 1 and j < 3*section[1], from row 2
(width) when j % 3 == 2 and j < 3*section[2], and from row 0 (time) otherwise. Speech has one
position per step, so the three rows are always equal and this is ordinary RoPE in practice; the
layout is kept so that a caller passing three rows gets what upstream computes.

Around the stack (names as in model.safetensors, under `talker.`):

    model.text_embedding   [151936, text_hidden]  text id -> text vector (2048 wide at 0.6B)
    text_projection        fc1 (+bias) -> SiLU -> fc2 (+bias): text vector -> hidden
    model.codec_embedding  [3072, hidden]         codec id (codes 0..2047, specials, speakers, languages)
    codec_head             [hidden, 3072]         last hidden -> codebook-1 logits (no bias)

`start_decoding` opens a session over a private KV cache, as cosyvoice3/llm.py does: the first call
runs the prompt embeddings, each later call one input vector (generate.py sums the frame's 16 code
embeddings and the next text vector); every call returns the codec logits and the last hidden state
(the Code Predictor's first input). fp32 is the reference precision; batch 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# The same cache and norm as CosyVoice3's Qwen2 (one copy of each in the engine).
from ..cosyvoice3.llm import LayerCache, RMSNorm  # noqa: F401 (code_predictor imports them from here)

PREFIX = "talker."
CODE_PREDICTOR_PREFIX = "talker.code_predictor."


def _int(c: Mapping[str, Any], key: str, default: int | None = None) -> int:
    v = c.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{key} must be an integer, got {v!r}")
    return v


def _ids(v: Any, what: str) -> dict[str, int]:
    """A name -> codec id table; upstream accepts an int or a one-element list per name."""
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ValueError(f"{what} must be a mapping, got {type(v).__name__}")
    out = {}
    for name, i in v.items():
        if isinstance(i, list) and len(i) == 1:
            i = i[0]
        if isinstance(i, bool) or not isinstance(i, int):
            raise ValueError(f"{what}[{name!r}] must be a codec id, got {i!r}")
        out[str(name).lower()] = i
    return out


@dataclass(frozen=True)
class TalkerArgs:
    hidden_size: int = 1024
    intermediate_size: int = 3072
    num_hidden_layers: int = 28
    num_attention_heads: int = 16
    num_key_value_heads: int = 8
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    mrope_section: tuple[int, ...] = (24, 20, 20)
    mrope_interleaved: bool = True
    vocab_size: int = 3072
    text_vocab_size: int = 151936
    text_hidden_size: int = 2048
    num_code_groups: int = 16
    codec_pad_id: int = 2148
    codec_bos_id: int = 2149
    codec_eos_token_id: int = 2150
    codec_think_id: int = 2154
    codec_nothink_id: int = 2155
    codec_think_bos_id: int = 2156
    codec_think_eos_id: int = 2157
    spk_id: Mapping[str, int] = field(default_factory=dict)
    spk_is_dialect: Mapping[str, str | bool] = field(default_factory=dict)
    codec_language_id: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if sum(self.mrope_section) * 2 != self.head_dim:
            raise ValueError(f"mrope_section {list(self.mrope_section)} must cover head_dim/2 = {self.head_dim // 2}")

    @classmethod
    def from_config(cls, talker_config: Mapping[str, Any]) -> TalkerArgs:
        """From config.json's `talker_config`; what this port does not do is refused (ValueError)."""
        c = dict(talker_config)
        if c.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {c.get('hidden_act')!r}: only 'silu' is implemented")
        if c.get("attention_bias"):
            raise ValueError("attention_bias true is not implemented")
        if c.get("use_sliding_window"):
            raise ValueError("use_sliding_window true is not implemented")
        rope = c.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default" or "mrope_section" not in rope:
            raise ValueError(f"rope_scaling {rope!r}: expected default rope with an mrope_section")
        heads = _int(c, "num_attention_heads")
        hidden = _int(c, "hidden_size")
        return cls(
            hidden_size=hidden,
            intermediate_size=_int(c, "intermediate_size"),
            num_hidden_layers=_int(c, "num_hidden_layers"),
            num_attention_heads=heads,
            num_key_value_heads=_int(c, "num_key_value_heads"),
            head_dim=_int(c, "head_dim", hidden // heads),
            rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
            rope_theta=float(c.get("rope_theta", 10000)),
            mrope_section=tuple(int(x) for x in rope["mrope_section"]),
            mrope_interleaved=bool(rope.get("interleaved", False)),
            vocab_size=_int(c, "vocab_size"),
            text_vocab_size=_int(c, "text_vocab_size"),
            text_hidden_size=_int(c, "text_hidden_size"),
            num_code_groups=_int(c, "num_code_groups"),
            **{k: _int(c, k) for k in (
                "codec_pad_id", "codec_bos_id", "codec_eos_token_id", "codec_think_id", "codec_nothink_id",
                "codec_think_bos_id", "codec_think_eos_id")},
            spk_id=_ids(c.get("spk_id"), "spk_id"),
            spk_is_dialect={str(k).lower(): v for k, v in (c.get("spk_is_dialect") or {}).items()},
            codec_language_id=_ids(c.get("codec_language_id"), "codec_language_id"),
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Qwen3 blocks (the Code Predictor reuses them with plain one-row positions)


def rope_angles(head_dim: int, theta: float, positions: torch.Tensor) -> torch.Tensor:
    """Angles [..., L, head_dim/2] for positions [..., L] (default RoPE frequencies)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float() / head_dim))
    return positions.float()[..., None] * inv_freq


def mrope_angles(args: TalkerArgs, positions: torch.Tensor) -> torch.Tensor:
    """positions [3, L] (time, height, width) -> angles [L, head_dim/2] chosen per frequency."""
    angles = rope_angles(args.head_dim, args.rope_theta, positions)  # [3, L, D/2]
    half = args.head_dim // 2
    j = torch.arange(half, device=positions.device)
    row = torch.zeros(half, dtype=torch.long, device=positions.device)
    if args.mrope_interleaved:
        for r, n in enumerate(args.mrope_section[1:], 1):
            row[(j % 3 == r) & (j < 3 * n)] = r
    else:  # contiguous sections: t, then h, then w
        bounds = torch.tensor(args.mrope_section, device=positions.device).cumsum(0)
        row = torch.bucketize(j, bounds, right=True)
    return angles.gather(0, row.view(1, 1, -1).expand(1, angles.shape[1], -1))[0]


def cos_sin(angles: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    full = torch.cat([angles, angles], dim=-1)  # NeoX layout: two halves
    return full.cos().to(dtype), full.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, eps: float) -> None:
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.q_norm = RMSNorm(head_dim, eps)
        self.k_norm = RMSNorm(head_dim, eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: LayerCache | None) -> torch.Tensor:
        b, n, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, n, self.n_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, n, self.n_kv, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        past = 0
        if cache is not None:
            past = cache.offset
            k, v = cache.update(k, v)
        if n == 1:
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        else:
            rows = torch.arange(n, device=x.device)[:, None] + past
            mask = torch.arange(past + n, device=x.device)[None, :] <= rows
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, self.n_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, hidden: int, intermediate: int, heads: int, kv_heads: int, head_dim: int, eps: float) -> None:
        super().__init__()
        self.self_attn = Attention(hidden, heads, kv_heads, head_dim, eps)
        self.mlp = MLP(hidden, intermediate)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)

    def forward(self, x, cos, sin, cache: LayerCache | None) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


def decoder_layers(args, n: int) -> nn.ModuleList:
    return nn.ModuleList(
        DecoderLayer(args.hidden_size, args.intermediate_size, args.num_attention_heads, args.num_key_value_heads,
                     args.head_dim, args.rms_norm_eps)
        for _ in range(n)
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The Talker


class TalkerModel(nn.Module):
    def __init__(self, args: TalkerArgs) -> None:
        super().__init__()
        self.args = args
        self.layers = decoder_layers(args, args.num_hidden_layers)
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.codec_embedding = nn.Embedding(args.vocab_size, args.hidden_size)
        self.text_embedding = nn.Embedding(args.text_vocab_size, args.text_hidden_size)

    def forward(self, x: torch.Tensor, cache: list[LayerCache] | None = None, positions: torch.Tensor | None = None):
        """x [1, L, H] -> final-norm hidden [1, L, H]; positions [3, L] default to the cache offset on."""
        if positions is None:
            start = cache[0].offset if cache else 0
            positions = torch.arange(start, start + x.shape[1], device=x.device).expand(3, -1)
        cos, sin = cos_sin(mrope_angles(self.args, positions), x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache[i] if cache else None)
        return self.norm(x)


class TextProjection(nn.Module):
    def __init__(self, args: TalkerArgs) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(args.text_hidden_size, args.text_hidden_size, bias=True)
        self.linear_fc2 = nn.Linear(args.text_hidden_size, args.hidden_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(F.silu(self.linear_fc1(x)))


# A decoding session: None runs the prompt, a vector [H] feeds one step; it returns the codec
# logits [vocab] (fp32) and the last final-norm hidden state [H].
TalkerStep = Callable[[torch.Tensor | None], tuple[torch.Tensor, torch.Tensor]]


class Talker(nn.Module):
    def __init__(self, args: TalkerArgs) -> None:
        super().__init__()
        self.args = args
        self.model = TalkerModel(args)
        self.text_projection = TextProjection(args)
        self.codec_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)

    @staticmethod
    def own_keys(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The Talker's tensors of model.safetensors, prefix stripped (the Code Predictor's are not)."""
        return {
            k[len(PREFIX):]: v for k, v in state_dict.items()
            if k.startswith(PREFIX) and not k.startswith(CODE_PREDICTOR_PREFIX)
        }  # fmt: skip

    @classmethod
    def from_state_dict(cls, args: TalkerArgs, state_dict: Mapping[str, torch.Tensor], dtype=torch.float32,
                        modules: Mapping[str, nn.Module] | None = None) -> Talker:
        """`modules`: ready submodules by name under `talker.` (Checkpoint.talker_modules)."""
        from .shells import build

        return build(cls, args, cls.own_keys(state_dict), dtype, modules)

    def embed_text(self, text_ids) -> torch.Tensor:
        """Text ids -> projected text vectors [1, n, H]."""
        ids = torch.as_tensor(text_ids, dtype=torch.long, device=self.codec_head.weight.device).view(1, -1)
        bad = ids[(ids < 0) | (ids >= self.args.text_vocab_size)]
        if bad.numel():
            raise ValueError(f"text id {int(bad[0])} is outside the text vocabulary (0..{self.args.text_vocab_size - 1})")
        return self.text_projection(self.model.text_embedding(ids))

    def embed_codec(self, codec_ids) -> torch.Tensor:
        ids = torch.as_tensor(codec_ids, dtype=torch.long, device=self.codec_head.weight.device).view(1, -1)
        return self.model.codec_embedding(ids)

    def codec_row(self, code: int) -> torch.Tensor:
        """The codec embedding of one code [H]: codebook 1's part of the next step's input."""
        return self.model.codec_embedding.weight[code]

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        """Codec logits at every position, [1, L, H] -> [1, L, vocab] fp32 (full recompute: tests)."""
        return self.codec_head(self.model(inputs_embeds)).float()

    def start_decoding(self, prompt_embeds: torch.Tensor) -> TalkerStep:
        cache = [LayerCache() for _ in self.model.layers]

        @torch.inference_mode()
        def step(x: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
            if x is None:
                if cache[0].offset:
                    raise RuntimeError("this session has already run its prompt")
                x = prompt_embeds
            elif not cache[0].offset:
                raise RuntimeError("run the prompt (step(None)) before feeding steps")
            x = x.view(1, -1, self.args.hidden_size)
            hidden = self.model(x, cache)[0, -1]
            return self.codec_head(hidden).float(), hidden

        return step
