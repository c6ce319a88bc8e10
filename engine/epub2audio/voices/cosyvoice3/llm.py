"""The CosyVoice3 LLM stage in PyTorch: a Qwen2 decoder that reads text and writes speech tokens.

The network is a plain Qwen2 (the 0.5B shape: 24 layers, hidden 896, 14 query heads sharing 2
key/value heads, SwiGLU MLP, RMSNorm, rotary positions with theta 1e6) with two extra tables on
top, both over the 6761-entry speech vocabulary (6561 FSQ codes + 200 special slots):

    speech_embedding  [6761, H]   speech id -> input vector (also the sos / task_id rows)
    llm_decoder       [H, 6761]   last hidden state -> speech logits (no bias)

The Qwen2 text embedding is only used for the text part of the prompt, and its LM head is never
used at all. Module names mirror upstream's `llm.pt` exactly (`llm.model.model.layers.N...`) so the
checkpoint loads with a strict `load_state_dict`.

Everything here is written for one sequence at a time (batch 1) with a small KV cache of our own;
that is all the decode loop in `generate.py` needs. fp32 is the reference precision. (The opt-in
batched decoder in `batched.py` passes per-row position ids and an attention mask through
`Qwen2Model.forward`; without them nothing changes.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from . import meta

SPEECH_TOKEN_SIZE = 6561  # FSQ codes 0..6560
SPEECH_VOCAB_SIZE = SPEECH_TOKEN_SIZE + 200  # plus 200 special / reserved slots
SOS_ID = SPEECH_TOKEN_SIZE + 0  # row of speech_embedding that starts the sequence
EOS_ID = SPEECH_TOKEN_SIZE + 1
TASK_ID = SPEECH_TOKEN_SIZE + 2  # row of speech_embedding between text and speech

_PREFIX = "llm.model.model."  # where the Qwen2 backbone sits in llm.pt
_LM_HEAD_KEY = "llm.model.lm_head.weight"

_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass(frozen=True)
class LLMArgs:
    hidden_size: int = 896
    num_hidden_layers: int = 24
    num_attention_heads: int = 14
    num_key_value_heads: int = 2
    head_dim: int = 64
    intermediate_size: int = 4864
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    vocab_size: int = 151936  # text vocabulary of the Qwen2 embedding
    speech_vocab_size: int = SPEECH_VOCAB_SIZE

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even for rotary embeddings")
        if self.speech_vocab_size <= TASK_ID:
            raise ValueError(f"speech_vocab_size must exceed {TASK_ID} (sos/eos/task ids live there)")

    @classmethod
    def from_config(
        cls, config_json: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor] | None = None
    ) -> LLMArgs:
        """Dimensions from CosyVoice-BlankEN/config.json, checked against llm.pt's tensors.

        Both the transformers 4.x layout (`rope_theta` at top level) and the 5.x one
        (`rope_parameters`) are accepted. Anything this implementation does not do (another
        activation, sliding windows, rope scaling) is refused rather than silently ignored.
        """
        c = dict(config_json)
        act = c.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"config hidden_act={act!r}: only 'silu' is implemented")
        if c.get("use_sliding_window"):
            raise ValueError("config use_sliding_window=true: sliding-window attention is not implemented")
        rope = c.get("rope_parameters") or {}
        rope_type = rope.get("rope_type", "default")
        if c.get("rope_scaling") or rope_type != "default":
            raise ValueError("config asks for rope scaling: only the default rotary embedding is implemented")
        theta = c.get("rope_theta", rope.get("rope_theta"))
        if theta is None:
            raise ValueError("config has neither rope_theta nor rope_parameters.rope_theta")
        try:
            hidden = int(c["hidden_size"])
            heads = int(c["num_attention_heads"])
            args = cls(
                hidden_size=hidden,
                num_hidden_layers=int(c["num_hidden_layers"]),
                num_attention_heads=heads,
                num_key_value_heads=int(c.get("num_key_value_heads", heads)),
                head_dim=int(c.get("head_dim") or hidden // heads),
                intermediate_size=int(c["intermediate_size"]),
                rms_norm_eps=float(c["rms_norm_eps"]),
                rope_theta=float(theta),
                vocab_size=int(c["vocab_size"]),
                speech_vocab_size=(
                    int(state_dict["speech_embedding.weight"].shape[0])
                    if state_dict is not None and "speech_embedding.weight" in state_dict
                    else SPEECH_VOCAB_SIZE
                ),
            )
        except KeyError as e:
            raise ValueError(f"config.json lacks {e.args[0]!r}") from None
        if args.speech_vocab_size != SPEECH_VOCAB_SIZE:
            raise ValueError(
                f"speech_embedding.weight has {args.speech_vocab_size} rows; CosyVoice3 has {SPEECH_VOCAB_SIZE}"
            )
        if state_dict is not None:
            args.check_state_dict(state_dict)
        return args

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every key of llm.pt with its shape, in checkpoint order."""
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        q = self.num_attention_heads * self.head_dim
        shapes: dict[str, tuple[int, ...]] = {_PREFIX + "embed_tokens.weight": (self.vocab_size, h)}
        for i in range(self.num_hidden_layers):
            p = f"{_PREFIX}layers.{i}."
            shapes.update({
                p + "self_attn.q_proj.weight": (q, h),
                p + "self_attn.q_proj.bias": (q,),
                p + "self_attn.k_proj.weight": (kv, h),
                p + "self_attn.k_proj.bias": (kv,),
                p + "self_attn.v_proj.weight": (kv, h),
                p + "self_attn.v_proj.bias": (kv,),
                p + "self_attn.o_proj.weight": (h, q),
                p + "mlp.gate_proj.weight": (self.intermediate_size, h),
                p + "mlp.up_proj.weight": (self.intermediate_size, h),
                p + "mlp.down_proj.weight": (h, self.intermediate_size),
                p + "input_layernorm.weight": (h,),
                p + "post_attention_layernorm.weight": (h,),
            })
        shapes[_PREFIX + "norm.weight"] = (h,)
        shapes[_LM_HEAD_KEY] = (self.vocab_size, h)
        shapes["llm_decoder.weight"] = (self.speech_vocab_size, h)
        shapes["speech_embedding.weight"] = (self.speech_vocab_size, h)
        return shapes

    def check_state_dict(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """ValueError naming the first key that is missing, unexpected or of the wrong shape."""
        expected = self.expected_shapes()
        for key, shape in expected.items():
            if key not in state_dict:
                raise ValueError(f"llm checkpoint lacks {key!r} (config implies shape {list(shape)})")
            got = tuple(state_dict[key].shape)
            if got != shape:
                raise ValueError(f"llm checkpoint {key!r} has shape {list(got)}, config implies {list(shape)}")
        extra = [k for k in state_dict if k not in expected]
        if extra:
            raise ValueError(f"llm checkpoint has unexpected key {extra[0]!r} ({len(extra)} unexpected in all)")


# ---------------------------------------------------------------------------------------------
# KV cache


class LayerCache:
    """Keys and values of one attention layer for one sequence, stored in a buffer that grows in
    chunks of `step` positions, so a decode step writes one slot instead of copying the cache."""

    def __init__(self, step: int = 256) -> None:
        self.step = step
        self.keys: torch.Tensor | None = None  # [1, n_kv_heads, capacity, head_dim]
        self.values: torch.Tensor | None = None
        self.offset = 0  # positions filled

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = k.shape[2]
        end = self.offset + n
        if self.keys is None or end > self.keys.shape[2]:
            capacity = math.ceil(end / self.step) * self.step
            shape = (k.shape[0], k.shape[1], capacity, k.shape[3])
            new_k, new_v = k.new_empty(shape), v.new_empty(shape)
            if self.keys is not None:
                new_k[:, :, : self.offset] = self.keys[:, :, : self.offset]
                new_v[:, :, : self.offset] = self.values[:, :, : self.offset]
            self.keys, self.values = new_k, new_v
        self.keys[:, :, self.offset : end] = k
        self.values[:, :, self.offset : end] = v
        self.offset = end
        return self.keys[:, :, :end], self.values[:, :, :end]


# ---------------------------------------------------------------------------------------------
# Qwen2


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # normalise in fp32 whatever the weights are, as Qwen2 does
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_cos_sin(args: LLMArgs, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables [..., L, head_dim] for positions [..., L] (NeoX layout: two halves, not pairs)."""
    exponents = torch.arange(0, args.head_dim, 2, dtype=torch.int64, device=positions.device).float() / args.head_dim
    inv_freq = 1.0 / (args.rope_theta**exponents)
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, args: LLMArgs) -> None:
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = args.num_attention_heads, args.num_key_value_heads, args.head_dim
        h = args.hidden_size
        self.q_proj = nn.Linear(h, self.n_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=True)
        self.v_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, h, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: LayerCache | None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`mask` (batched decoding, see batched.py): bool [B, 1, n, past + n], True = may attend;
        it replaces the causal rule. Without it, every row of the batch is causal and unpadded."""
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        past = 0
        if cache is not None:
            past = cache.offset
            k, v = cache.update(k, v)
        if mask is not None:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        elif n == 1:  # one new position sees everything before it
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        elif past == 0:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:  # a block of new positions after a cached prefix: causal, offset by `past`
            rows = torch.arange(n, device=x.device)[:, None] + past
            mask = torch.arange(past + n, device=x.device)[None, :] <= rows
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, self.n_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, args: LLMArgs) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(args.hidden_size, args.intermediate_size, bias=False)
        self.up_proj = nn.Linear(args.hidden_size, args.intermediate_size, bias=False)
        self.down_proj = nn.Linear(args.intermediate_size, args.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, args: LLMArgs) -> None:
        super().__init__()
        self.self_attn = Attention(args)
        self.mlp = MLP(args)
        self.input_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)

    def forward(self, x, cos, sin, cache: LayerCache | None, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen2Model(nn.Module):
    """The decoder stack. Takes input vectors (not ids) and returns final-norm hidden states."""

    def __init__(self, args: LLMArgs) -> None:
        super().__init__()
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(args) for _ in range(args.num_hidden_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)

    def make_cache(self) -> list[LayerCache]:
        return [LayerCache() for _ in self.layers]

    def forward(
        self, inputs_embeds: torch.Tensor, cache: list[LayerCache] | None = None, *,
        positions: torch.Tensor | None = None, mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """inputs_embeds [1, L, H] -> hidden [1, L, H]. With a cache, positions continue after it.

        Batched decoding (batched.py) passes per-row `positions` [B, L] (rotary position ids) and
        an attention `mask` [B, 1, L, cached + L] (bool, True = may attend); the defaults are the
        single-sequence behaviour above, unchanged."""
        if positions is None:
            start = cache[0].offset if cache else 0
            positions = torch.arange(start, start + inputs_embeds.shape[1], device=inputs_embeds.device)
        cos, sin = rope_cos_sin(self.args, positions, inputs_embeds.dtype)
        if cos.dim() == 3:  # per-row positions: broadcast over the heads
            cos, sin = cos[:, None], sin[:, None]
        x = inputs_embeds
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache[i] if cache else None, mask)
        return self.norm(x)


class _TiedLMHeadShell(nn.Module):
    """Stands where upstream's `Qwen2ForCausalLM` stands, so keys read `llm.model.model.*`.

    Its `lm_head.weight` is never used for speech. On save it is emitted as the embedding tensor
    itself (tied, as in llm.pt); on load it is checked for shape and dropped, so no second
    [151936, H] copy is kept and an untied checkpoint cannot overwrite the embedding.
    """

    def __init__(self, args: LLMArgs) -> None:
        super().__init__()
        self.model = Qwen2Model(args)
        self.register_state_dict_post_hook(_emit_lm_head)
        self.register_load_state_dict_pre_hook(_drop_lm_head)


def _emit_lm_head(module: _TiedLMHeadShell, state_dict, prefix: str, local_metadata) -> None:
    state_dict[prefix + "lm_head.weight"] = module.model.embed_tokens.weight.detach()


def _drop_lm_head(
    module: _TiedLMHeadShell, state_dict, prefix: str, local_metadata, strict, missing, unexpected, errors
) -> None:
    key = prefix + "lm_head.weight"
    if key not in state_dict:
        if strict:
            missing.append(key)
        return
    head = state_dict.pop(key)
    want = tuple(module.model.embed_tokens.weight.shape)
    if tuple(head.shape) != want:
        errors.append(f"size mismatch for {key}: checkpoint {list(head.shape)}, model {list(want)}")


class _EncoderShell(nn.Module):
    """Stands where upstream's `Qwen2Encoder` stands (the `llm.` level of the key names)."""

    def __init__(self, args: LLMArgs) -> None:
        super().__init__()
        self.model = _TiedLMHeadShell(args)


# ---------------------------------------------------------------------------------------------
# CosyVoice3 LM

# A backend's decoding session: None runs the prompt (prefill), an int feeds that speech token;
# either way it returns the log-probabilities of the next speech token as a CPU fp32 [6761] tensor.
NextLogp = Callable[[int | None], torch.Tensor]


def check_prompt_ids(args: "LLMArgs", text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> None:
    """Every backend's prompt: text ids inside the text vocabulary, prompt tokens speech codes."""
    bad = next((t for t in text_ids if not 0 <= t < args.vocab_size), None)
    if bad is not None:
        raise ValueError(f"text id {bad} is outside the text vocabulary (0..{args.vocab_size - 1})")
    bad = next((t for t in prompt_speech_tokens if not 0 <= t < SPEECH_TOKEN_SIZE), None)
    if bad is not None:
        raise ValueError(f"prompt speech token {bad} is not a speech code (0..{SPEECH_TOKEN_SIZE - 1})")


class CosyVoice3LM(nn.Module):
    backend = "torch"

    def __init__(self, args: LLMArgs) -> None:
        super().__init__()
        self.args = args
        self.llm = _EncoderShell(args)
        self.llm_decoder = nn.Linear(args.hidden_size, args.speech_vocab_size, bias=False)
        self.speech_embedding = nn.Embedding(args.speech_vocab_size, args.hidden_size)

    @classmethod
    def from_checkpoint(
        cls, config_json: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor]
    ) -> CosyVoice3LM:
        """Build on the meta device and adopt the checkpoint's tensors (no init, no extra copy).

        Pass a state_dict from `torch.load(..., mmap=True, weights_only=True)` to keep the
        resident set to what is actually touched.
        """
        args = LLMArgs.from_config(config_json, state_dict)
        with meta.shell():
            model = cls(args)
        model.load_state_dict(state_dict, strict=True, assign=True)
        return model.eval()

    @property
    def qwen2(self) -> Qwen2Model:
        return self.llm.model.model

    @property
    def precision(self) -> str:
        """What numbers actually run: "fp32" is the bit-reproducible reference path."""
        dtype = self.llm_decoder.weight.dtype
        return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))

    def embed_prompt(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> torch.Tensor:
        """[sos, text embeddings, task_id, prompt speech embeddings] as [1, L, H].

        `text_ids` is the whole text (prompt text followed by the target text).
        """
        check_prompt_ids(self.args, text_ids, prompt_speech_tokens)
        dev = self.speech_embedding.weight.device
        speech = self.speech_embedding.weight
        parts = [
            speech[SOS_ID : SOS_ID + 1],
            self.qwen2.embed_tokens(torch.tensor(list(text_ids), dtype=torch.long, device=dev)),
            speech[TASK_ID : TASK_ID + 1],
            self.speech_embedding(torch.tensor(list(prompt_speech_tokens), dtype=torch.long, device=dev)),
        ]
        return torch.cat(parts, dim=0)[None]

    def speech_logp(self, hidden_last: torch.Tensor) -> torch.Tensor:
        """Final-norm hidden state [H] -> log-probabilities over the speech vocabulary, CPU fp32."""
        return self.llm_decoder(hidden_last).float().log_softmax(dim=-1).cpu()

    def forward(self, inputs_embeds: torch.Tensor, cache: list[LayerCache] | None = None) -> torch.Tensor:
        """Speech-token log-probabilities at every position: [1, L, H] -> [1, L, 6761] (fp32).

        The decode loop does not use this (it only needs the last position); it is the
        full-recompute reference for tests and for exporting.
        """
        return self.llm_decoder(self.qwen2(inputs_embeds, cache)).float().log_softmax(dim=-1)

    def start_decoding(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> NextLogp:
        """A fresh decoding session over its own KV cache (see `NextLogp`)."""
        with torch.inference_mode():
            prompt = self.embed_prompt(text_ids, prompt_speech_tokens)
        cache = self.qwen2.make_cache()
        speech = self.speech_embedding.weight

        @torch.inference_mode()
        def next_logp(token: int | None) -> torch.Tensor:
            if token is None:
                if cache[0].offset:
                    raise RuntimeError("this session has already run its prompt")
                x = prompt
            else:
                if not cache[0].offset:
                    raise RuntimeError("run the prompt (next_logp(None)) before feeding tokens")
                x = speech[token].view(1, 1, -1)
            hidden = self.qwen2(x, cache)
            return self.speech_logp(hidden[0, -1])

        return next_logp
