"""The 12 Hz speech-tokenizer decoder: 16 codebooks at 12.5 Hz -> 24 kHz audio (1920 samples a frame).

Stages, with the names of speech_tokenizer/model.safetensors under `decoder.`:

1. `quantizer`: split RVQ dequantisation. Codebook 1 is looked up in `rvq_first`, codebooks 2..16 in
   `rvq_rest` (15 layers); each codebook's vectors are `embedding_sum / max(cluster_usage, 1e-5)`
   (EMA statistics, stored as such), summed per group, then each group's `output_proj` (1x1 conv,
   codebook_dim/2 -> codebook_dim) and the two groups added. (`input_proj` is the encoder side: it
   is in the file and checked, never used here.)
2. `pre_conv`: causal conv k3, codebook_dim -> latent_dim.
3. `pre_transformer`: in-proj latent -> hidden, 8 Qwen-style layers (no q/k norm, RoPE theta 1e4,
   layer-scaled residuals) attending causally over a sliding window of 72 frames, RMSNorm, out-proj.
4. `upsample`: per ratio (2, 2) a causal transposed conv and a ConvNeXt block (x4 in all).
5. `decoder`: causal conv k7 -> decoder_dim, four blocks (SnakeBeta, causal transposed conv x r,
   three residual units with dilations 1/3/9) for rates 8, 5, 4, 3, SnakeBeta, causal conv k7 -> 1,
   clamped to [-1, 1].

"Causal" convs pad (k_eff - stride) on the left and just enough on the right to complete the last
stride; transposed convs drop (k - stride) samples on the right. Long inputs are decoded as upstream
does (`chunked_decode`): chunks of 300 frames, each seeing up to 25 frames of left context whose
audio is dropped, so our audio equals upstream's for any length.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..cosyvoice3.llm import RMSNorm
from .talker import MLP

CHUNK_FRAMES = 300
LEFT_CONTEXT_FRAMES = 25


@dataclass(frozen=True)
class DecoderArgs:
    codebook_size: int = 2048
    codebook_dim: int = 512
    latent_dim: int = 1024
    hidden_size: int = 512
    intermediate_size: int = 1024
    num_attention_heads: int = 16
    num_key_value_heads: int = 16
    head_dim: int = 64
    num_hidden_layers: int = 8
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    sliding_window: int = 72
    num_quantizers: int = 16
    num_semantic_quantizers: int = 1
    upsample_rates: tuple[int, ...] = (8, 5, 4, 3)
    upsampling_ratios: tuple[int, ...] = (2, 2)
    decoder_dim: int = 1536

    @property
    def total_upsample(self) -> int:
        return math.prod(self.upsample_rates) * math.prod(self.upsampling_ratios)

    @classmethod
    def from_config(cls, c: Mapping[str, Any]) -> DecoderArgs:
        c = dict(c)
        if c.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {c.get('hidden_act')!r}: only 'silu' is implemented")
        if c.get("attention_bias"):
            raise ValueError("attention_bias true is not implemented")
        if "codebook_dim" not in c:
            raise ValueError("codebook_dim is missing (upstream reads it from the config, it has no default)")
        if c.get("num_semantic_quantizers", 1) != 1:
            raise ValueError("only one semantic quantizer is implemented (upstream fixes it at 1)")
        if c.get("rope_scaling"):
            raise ValueError("rope_scaling is not implemented")
        d = cls()
        heads = int(c.get("num_attention_heads", 16))
        hidden = int(c.get("hidden_size", 1024))
        out = cls(
            codebook_size=int(c.get("codebook_size", d.codebook_size)),
            codebook_dim=int(c["codebook_dim"]),
            latent_dim=int(c.get("latent_dim", 1024)),
            hidden_size=hidden,
            intermediate_size=int(c.get("intermediate_size", 3072)),
            num_attention_heads=heads,
            num_key_value_heads=int(c.get("num_key_value_heads", 16)),
            head_dim=int(c.get("head_dim", hidden // heads)),
            num_hidden_layers=int(c.get("num_hidden_layers", 8)),
            rms_norm_eps=float(c.get("rms_norm_eps", 1e-5)),
            rope_theta=float(c.get("rope_theta", 10000)),
            sliding_window=int(c.get("sliding_window", 72)),
            num_quantizers=int(c.get("num_quantizers", 16)),
            upsample_rates=tuple(int(x) for x in c.get("upsample_rates", d.upsample_rates)),
            upsampling_ratios=tuple(int(x) for x in c.get("upsampling_ratios", d.upsampling_ratios)),
            decoder_dim=int(c.get("decoder_dim", 1536)),
        )
        if out.codebook_dim % 2 or out.decoder_dim % 2 ** len(out.upsample_rates):
            raise ValueError("codebook_dim must be even and decoder_dim divisible by 2 per upsampling block")
        if out.num_attention_heads % out.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        return out


# ---------------------------------------------------------------------------------------------
# convolutions


class CausalConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, dilation: int = 1, stride: int = 1, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, stride=stride, dilation=dilation, groups=groups)
        self.stride = stride
        self.span = (kernel - 1) * dilation + 1
        self.left = self.span - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        frames = math.ceil((n - self.span + self.left) / self.stride + 1)
        right = (frames - 1) * self.stride + (self.span - self.left) - n
        return self.conv(F.pad(x, (self.left, right)))


class CausalTransConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose1d(cin, cout, kernel, stride=stride)
        self.trim = kernel - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y[..., : y.shape[-1] - self.trim] if self.trim else y


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = CausalConv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.dwconv(x).transpose(1, 2))
        h = self.gamma * self.pwconv2(F.gelu(self.pwconv1(h)))
        return x + h.transpose(1, 2)


class SnakeBeta(nn.Module):
    """x + sin^2(x * e^alpha) / (e^beta + 1e-9), per channel (alpha, beta stored as logs)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.exp()[None, :, None]
        beta = self.beta.exp()[None, :, None]
        return x + (1.0 / (beta + 1e-9)) * torch.sin(x * alpha).pow(2)


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv(dim, dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(self.act2(self.conv1(self.act1(x))))


class DecoderBlock(nn.Module):
    def __init__(self, cin: int, cout: int, rate: int) -> None:
        super().__init__()
        self.block = nn.ModuleList(
            [SnakeBeta(cin), CausalTransConv(cin, cout, 2 * rate, rate), *(ResidualUnit(cout, d) for d in (1, 3, 9))]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.block:
            x = m(x)
        return x


# ---------------------------------------------------------------------------------------------
# quantizer


class Codebook(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.cluster_usage = nn.Parameter(torch.ones(size))
        self.embedding_sum = nn.Parameter(torch.zeros(size, dim))

    def vectors(self) -> torch.Tensor:
        return self.embedding_sum / self.cluster_usage.clamp(min=1e-5)[:, None]


class _VQ(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self._codebook = Codebook(size, dim)


class _Layers(nn.Module):
    def __init__(self, n: int, size: int, dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_VQ(size, dim) for _ in range(n))


class RVQGroup(nn.Module):
    def __init__(self, n: int, size: int, dim: int, outer: int) -> None:
        super().__init__()
        self.input_proj = nn.Conv1d(outer, dim, 1, bias=False)
        self.output_proj = nn.Conv1d(dim, outer, 1, bias=False)
        self.vq = _Layers(n, size, dim)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, n, T] -> [B, outer, T]."""
        total = 0
        for i, layer in enumerate(self.vq.layers):
            total = total + F.embedding(codes[:, i], layer._codebook.vectors()).transpose(1, 2)
        return self.output_proj(total)


class SplitRVQ(nn.Module):
    def __init__(self, args: DecoderArgs) -> None:
        super().__init__()
        dim = args.codebook_dim // 2
        self.rvq_first = RVQGroup(args.num_semantic_quantizers, args.codebook_size, dim, args.codebook_dim)
        self.rvq_rest = RVQGroup(
            args.num_quantizers - args.num_semantic_quantizers, args.codebook_size, dim, args.codebook_dim
        )
        self.n_first = args.num_semantic_quantizers

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.rvq_first.decode(codes[:, : self.n_first]) + self.rvq_rest.decode(codes[:, self.n_first :])


# ---------------------------------------------------------------------------------------------
# transformer


class LayerScale(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class Attention(nn.Module):
    def __init__(self, args: DecoderArgs) -> None:
        super().__init__()
        self.heads, self.kv, self.hd = args.num_attention_heads, args.num_key_value_heads, args.head_dim
        h = args.hidden_size
        self.q_proj = nn.Linear(h, self.heads * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.heads * self.hd, h, bias=False)

    def forward(self, x, cos, sin, mask) -> torch.Tensor:
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv, self.hd).transpose(1, 2)
        half = self.hd // 2

        def rot(t):
            return t * cos + torch.cat([-t[..., half:], t[..., :half]], dim=-1) * sin

        out = F.scaled_dot_product_attention(rot(q), rot(k), v, attn_mask=mask, enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, self.heads * self.hd))


class TransformerLayer(nn.Module):
    def __init__(self, args: DecoderArgs) -> None:
        super().__init__()
        self.self_attn = Attention(args)
        self.mlp = MLP(args.hidden_size, args.intermediate_size)
        self.input_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.self_attn_layer_scale = LayerScale(args.hidden_size)
        self.mlp_layer_scale = LayerScale(args.hidden_size)

    def forward(self, x, cos, sin, mask) -> torch.Tensor:
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin, mask))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class PreTransformer(nn.Module):
    def __init__(self, args: DecoderArgs) -> None:
        super().__init__()
        self.args = args
        self.layers = nn.ModuleList(TransformerLayer(args) for _ in range(args.num_hidden_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.input_proj = nn.Linear(args.latent_dim, args.hidden_size)
        self.output_proj = nn.Linear(args.hidden_size, args.latent_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, latent] -> [B, T, latent]."""
        x = self.input_proj(x)
        n, hd = x.shape[1], self.args.head_dim
        pos = torch.arange(n, device=x.device)
        inv_freq = 1.0 / (self.args.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.int64, device=x.device).float() / hd))
        angles = pos.float()[:, None] * inv_freq
        full = torch.cat([angles, angles], dim=-1)
        cos, sin = full.cos().to(x.dtype), full.sin().to(x.dtype)
        rel = pos[:, None] - pos[None, :]  # query minus key
        mask = (rel >= 0) & (rel < self.args.sliding_window)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output_proj(self.norm(x))


# ---------------------------------------------------------------------------------------------
# the decoder


class Decoder(nn.Module):
    def __init__(self, args: DecoderArgs) -> None:
        super().__init__()
        self.args = args
        self.pre_transformer = PreTransformer(args)
        self.quantizer = SplitRVQ(args)
        self.pre_conv = CausalConv(args.codebook_dim, args.latent_dim, 3)
        self.upsample = nn.ModuleList(
            nn.ModuleList([CausalTransConv(args.latent_dim, args.latent_dim, r, r), ConvNeXtBlock(args.latent_dim)])
            for r in args.upsampling_ratios
        )
        layers: list[nn.Module] = [CausalConv(args.latent_dim, args.decoder_dim, 7)]
        for i, rate in enumerate(args.upsample_rates):
            layers.append(DecoderBlock(args.decoder_dim // 2**i, args.decoder_dim // 2 ** (i + 1), rate))
        out_dim = args.decoder_dim // 2 ** len(args.upsample_rates)
        layers += [SnakeBeta(out_dim), CausalConv(out_dim, 1, 7)]
        self.decoder = nn.ModuleList(layers)

    @classmethod
    def from_state_dict(cls, args: DecoderArgs, state_dict, dtype=torch.float32) -> Decoder:
        from .shells import build

        return build(cls, args, state_dict, dtype)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, 16, T] (long) -> audio [B, 1, T * 1920], one pass (no chunking)."""
        if codes.dim() != 3 or codes.shape[1] != self.args.num_quantizers:
            raise ValueError(f"expected codes [B, {self.args.num_quantizers}, T], got {list(codes.shape)}")
        h = self.pre_conv(self.quantizer.decode(codes))
        h = self.pre_transformer(h.transpose(1, 2)).transpose(1, 2)
        for trans, block in self.upsample:
            h = block(trans(h))
        for m in self.decoder:
            h = m(h)
        return h.clamp(-1, 1)

    @torch.inference_mode()
    def decode(self, codes) -> torch.Tensor:
        """Frames [T, 16] of codes (0..codebook_size-1) -> 24 kHz mono float32 audio [T * 1920].

        Chunked as upstream decodes (see the module docstring)."""
        dev = self.pre_conv.conv.weight.device
        c = torch.as_tensor(codes, dtype=torch.long, device=dev)
        if c.dim() != 2 or c.shape[1] != self.args.num_quantizers:
            raise ValueError(f"expected frames [T, {self.args.num_quantizers}], got {list(c.shape)}")
        if c.numel() and (int(c.min()) < 0 or int(c.max()) >= self.args.codebook_size):
            raise ValueError(f"codes must lie in 0..{self.args.codebook_size - 1}")
        c = c.T[None]
        n = c.shape[-1]
        pieces = []
        start = 0
        while start < n:
            end = min(start + CHUNK_FRAMES, n)
            context = LEFT_CONTEXT_FRAMES if start - LEFT_CONTEXT_FRAMES > 0 else start
            wav = self(c[..., start - context : end])
            pieces.append(wav[..., context * self.args.total_upsample :])
            start = end
        if not pieces:
            return torch.zeros(0)
        return torch.cat(pieces, dim=-1)[0, 0].float().cpu()
