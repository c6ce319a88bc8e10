"""The 12 Hz speech tokenizer's encoder: 24 kHz audio -> [T][16] codes (T = ceil(samples / 1920)).

Upstream's encoder is transformers' MimiModel minus its decoder side (speech_tokenizer/model.safetensors
under `encoder.`), of which upstream keeps the first 16 of 32 codebooks. Stages:

1. `encoder` (SEANet, 960x down): causal conv k7 1 -> num_filters; for the ratios 4, 5, 6, 8 (the
   config's upsampling_ratios reversed) a residual block (ELU, conv k3 -> C/2, ELU, conv k1 -> C,
   plus the input), ELU and a causal conv k=2r, stride r doubling the channels; ELU, conv k3 ->
   hidden_size (512). Causal convs pad (k_eff - stride) zeros on the left and, on the right, just
   enough to complete the last stride (Mimi's `_get_extra_padding_for_conv1d`).
2. `encoder_transformer`: 8 pre-LayerNorm layers (q/k/v/o without bias, RoPE theta 1e4 on NeoX
   halves, GELU MLP without bias, layer-scaled residuals) at 25 Hz with a plain causal mask: Mimi's
   mask builder is `create_causal_mask`, so the config's sliding_window (250) is never applied.
3. `downsample`: causal conv k4 stride 2 without bias, padded by *replicating* the edge frames.
4. `quantizer` (split RVQ): the semantic and the acoustic group each project the same 512-wide
   latent to 256 (`input_proj`, k1, no bias) and quantize residually: per layer the index of the
   nearest codebook vector (`torch.cdist` + argmin, codebook = embed_sum / max(cluster_usage, 1e-5)),
   then the residual minus that vector. Codebook 1 is the semantic group's only layer, codebooks 2..16
   the acoustic group's first 15 layers (the file holds 31; the rest are never read).

Codes are integers, so our fp32 run must give upstream's fp32 codes exactly; every op here is the
one upstream runs, in its order, so that a near tie resolves the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .decoder import LayerScale
from .talker import apply_rope, cos_sin, rope_angles

PREFIX = "encoder."
SAMPLE_RATE = 24000


@dataclass(frozen=True)
class EncoderArgs:
    """speech_tokenizer/config.json `encoder_config` (a MimiConfig; defaults are MimiConfig's)."""

    sampling_rate: int = 24000
    audio_channels: int = 1
    hidden_size: int = 512
    num_filters: int = 64
    num_residual_layers: int = 1
    upsampling_ratios: tuple[int, ...] = (8, 6, 5, 4)
    kernel_size: int = 7
    last_kernel_size: int = 3
    residual_kernel_size: int = 3
    dilation_growth_rate: int = 2
    compress: int = 2
    codebook_size: int = 2048
    codebook_dim: int = 256
    num_quantizers: int = 32
    num_semantic_quantizers: int = 1
    num_hidden_layers: int = 8
    intermediate_size: int = 2048
    num_attention_heads: int = 8
    num_key_value_heads: int = 8
    head_dim: int = 64
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    frame_rate: float = 12.5
    valid_quantizers: int = 16  # the top level's encoder_valid_num_quantizers

    @property
    def encodec_frame_rate(self) -> int:
        return math.ceil(self.sampling_rate / math.prod(self.upsampling_ratios))

    @property
    def downsample_kernel(self) -> int:
        return 2 * int(self.encodec_frame_rate / self.frame_rate)

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.upsampling_ratios) * 2

    @classmethod
    def from_config(cls, c: Mapping[str, Any], valid_quantizers: int = 16) -> EncoderArgs:
        c = dict(c)
        refused = {
            "use_causal_conv": (True, "only causal convolutions are implemented"),
            "pad_mode": ("constant", "only zero padding is implemented"),
            "use_conv_shortcut": (False, "conv shortcuts are not implemented"),
            "hidden_act": ("gelu", "only hidden_act 'gelu' is implemented"),
            "attention_bias": (False, "attention_bias true is not implemented"),
            "use_streaming": (False, "streaming encode is not implemented"),
            "audio_channels": (1, "only mono audio is implemented"),
        }
        for key, (want, why) in refused.items():
            if c.get(key, want) != want:
                raise ValueError(f"{key} {c.get(key)!r}: {why}")
        if c.get("rope_scaling"):
            raise ValueError("rope_scaling is not implemented")
        d = cls()
        heads = int(c.get("num_attention_heads", d.num_attention_heads))
        hidden = int(c.get("hidden_size", d.hidden_size))
        codebook_dim = int(c.get("codebook_dim") or hidden)
        vq_dim = c.get("vector_quantization_hidden_dimension", 256)
        if vq_dim != codebook_dim or vq_dim == hidden:
            raise ValueError(f"vector_quantization_hidden_dimension {vq_dim!r} must equal codebook_dim {codebook_dim} "
                             f"and differ from hidden_size {hidden} (the projected layout)")  # fmt: skip
        if not isinstance(c.get("residual_kernel_size", 3), int):
            raise ValueError("residual_kernel_size must be one integer")
        frame_rate = c.get("_frame_rate", c.get("frame_rate"))
        out = cls(
            sampling_rate=int(c.get("sampling_rate", d.sampling_rate)),
            hidden_size=hidden,
            num_filters=int(c.get("num_filters", d.num_filters)),
            num_residual_layers=int(c.get("num_residual_layers", d.num_residual_layers)),
            upsampling_ratios=tuple(int(x) for x in (c.get("upsampling_ratios") or d.upsampling_ratios)),
            kernel_size=int(c.get("kernel_size", d.kernel_size)),
            last_kernel_size=int(c.get("last_kernel_size", d.last_kernel_size)),
            residual_kernel_size=int(c.get("residual_kernel_size", d.residual_kernel_size)),
            dilation_growth_rate=int(c.get("dilation_growth_rate", d.dilation_growth_rate)),
            compress=int(c.get("compress", d.compress)),
            codebook_size=int(c.get("codebook_size", d.codebook_size)),
            codebook_dim=codebook_dim,
            num_quantizers=int(c.get("num_quantizers", d.num_quantizers)),
            num_semantic_quantizers=int(c.get("num_semantic_quantizers", d.num_semantic_quantizers)),
            num_hidden_layers=int(c.get("num_hidden_layers", d.num_hidden_layers)),
            intermediate_size=int(c.get("intermediate_size", d.intermediate_size)),
            num_attention_heads=heads,
            num_key_value_heads=int(c.get("num_key_value_heads", d.num_key_value_heads)),
            head_dim=int(c.get("head_dim") or hidden // heads),
            norm_eps=float(c.get("norm_eps", d.norm_eps)),
            rope_theta=float(c.get("rope_theta", d.rope_theta)),
            frame_rate=float(frame_rate) if frame_rate is not None else 0.0,
            valid_quantizers=int(valid_quantizers),
        )
        if frame_rate is None:  # MimiConfig.frame_rate: the sample rate over the whole stride
            out = cls(**{**out.__dict__, "frame_rate": out.sampling_rate / out.samples_per_frame})
        if out.sampling_rate != SAMPLE_RATE:
            raise ValueError(f"sampling_rate {out.sampling_rate}: the port encodes {SAMPLE_RATE} Hz audio")
        if out.frame_rate == out.encodec_frame_rate:
            raise ValueError("a Mimi encoder without its downsampling layer is not implemented")
        if out.num_semantic_quantizers != 1 or not 1 < out.valid_quantizers <= out.num_quantizers:
            raise ValueError(f"{out.valid_quantizers} codebooks from {out.num_quantizers} with "
                             f"{out.num_semantic_quantizers} semantic: only 1 semantic and 2..all is implemented")  # fmt: skip
        if out.num_attention_heads % out.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        return out


# ---------------------------------------------------------------------------------------------
# SEANet encoder


class CausalConv(nn.Module):
    """Mimi's causal MimiConv1d (no padding cache)."""

    def __init__(self, cin: int, cout: int, kernel: int, *, stride: int = 1, dilation: int = 1, bias: bool = True,
                 pad_mode: str = "constant") -> None:  # fmt: skip
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, stride, dilation=dilation, bias=bias)
        self.stride, self.span = stride, (kernel - 1) * dilation + 1
        self.left = self.span - stride
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        frames = math.ceil((n - self.span + self.left) / self.stride + 1) - 1
        right = frames * self.stride + self.span - self.left - n
        return self.conv(F.pad(x, (self.left, right), mode=self.pad_mode))


class ResnetBlock(nn.Module):
    def __init__(self, args: EncoderArgs, dim: int, dilation: int) -> None:
        super().__init__()
        hidden = dim // args.compress
        self.block = nn.ModuleList([
            nn.ELU(), CausalConv(dim, hidden, args.residual_kernel_size, dilation=dilation),
            nn.ELU(), CausalConv(hidden, dim, 1)])  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for m in self.block:
            h = m(h)
        return x + h


class SEANetEncoder(nn.Module):
    def __init__(self, args: EncoderArgs) -> None:
        super().__init__()
        layers: list[nn.Module] = [CausalConv(args.audio_channels, args.num_filters, args.kernel_size)]
        scale = 1
        for ratio in reversed(args.upsampling_ratios):
            ch = scale * args.num_filters
            layers += [ResnetBlock(args, ch, args.dilation_growth_rate**j) for j in range(args.num_residual_layers)]
            layers += [nn.ELU(), CausalConv(ch, ch * 2, ratio * 2, stride=ratio)]
            scale *= 2
        layers += [nn.ELU(), CausalConv(scale * args.num_filters, args.hidden_size, args.last_kernel_size)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.layers:
            x = m(x)
        return x


# ---------------------------------------------------------------------------------------------
# encoder transformer


class Attention(nn.Module):
    def __init__(self, args: EncoderArgs) -> None:
        super().__init__()
        self.heads, self.kv, self.hd = args.num_attention_heads, args.num_key_value_heads, args.head_dim
        h = args.hidden_size
        self.q_proj = nn.Linear(h, self.heads * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.heads * self.hd, h, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv, self.hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=n > 1, enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, self.heads * self.hd))


class MLP(nn.Module):
    def __init__(self, args: EncoderArgs) -> None:
        super().__init__()
        self.fc1 = nn.Linear(args.hidden_size, args.intermediate_size, bias=False)
        self.fc2 = nn.Linear(args.intermediate_size, args.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class TransformerLayer(nn.Module):
    def __init__(self, args: EncoderArgs) -> None:
        super().__init__()
        self.self_attn = Attention(args)
        self.mlp = MLP(args)
        self.input_layernorm = nn.LayerNorm(args.hidden_size, eps=args.norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(args.hidden_size, eps=args.norm_eps)
        self.self_attn_layer_scale = LayerScale(args.hidden_size)
        self.mlp_layer_scale = LayerScale(args.hidden_size)

    def forward(self, x, cos, sin) -> torch.Tensor:
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class EncoderTransformer(nn.Module):
    def __init__(self, args: EncoderArgs) -> None:
        super().__init__()
        self.args = args
        self.layers = nn.ModuleList(TransformerLayer(args) for _ in range(args.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, hidden] -> [B, T, hidden] (no final norm: Mimi has none)."""
        positions = torch.arange(x.shape[1], device=x.device)
        cos, sin = cos_sin(rope_angles(self.args.head_dim, self.args.rope_theta, positions), x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return x


# ---------------------------------------------------------------------------------------------
# split residual vector quantizer


class Codebook(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.initialized = nn.Parameter(torch.ones(1))  # Mimi's k-means flag (stored, unused)
        self.cluster_usage = nn.Parameter(torch.ones(size))
        self.embed_sum = nn.Parameter(torch.zeros(size, dim))

    def vectors(self) -> torch.Tensor:
        return self.embed_sum / self.cluster_usage.clamp(min=1e-5)[:, None]


class _VQ(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.codebook = Codebook(size, dim)


class RVQ(nn.Module):
    def __init__(self, args: EncoderArgs, n: int) -> None:
        super().__init__()
        self.input_proj = nn.Conv1d(args.hidden_size, args.codebook_dim, 1, bias=False)
        self.output_proj = nn.Conv1d(args.codebook_dim, args.hidden_size, 1, bias=False)  # decoder side: unused
        self.layers = nn.ModuleList(_VQ(args.codebook_size, args.codebook_dim) for _ in range(n))

    def encode(self, latent: torch.Tensor, n: int) -> torch.Tensor:
        """latent [B, hidden, T] -> codes [n, B, T] of the first n layers."""
        residual = self.input_proj(latent)
        codes = []
        for layer in self.layers[:n]:
            embed = layer.codebook.vectors()
            flat = residual.permute(0, 2, 1)
            shape = flat.shape
            flat = flat.reshape(-1, shape[-1])
            idx = torch.cdist(flat[None].float(), embed[None].float(), p=2)[0].argmin(dim=-1).view(*shape[:-1])
            residual = residual - F.embedding(idx, embed).permute(0, 2, 1)
            codes.append(idx)
        return torch.stack(codes)


class SplitRVQ(nn.Module):
    def __init__(self, args: EncoderArgs) -> None:
        super().__init__()
        self.n_semantic = args.num_semantic_quantizers
        self.semantic_residual_vector_quantizer = RVQ(args, args.num_semantic_quantizers)
        self.acoustic_residual_vector_quantizer = RVQ(args, args.num_quantizers - args.num_semantic_quantizers)

    def encode(self, latent: torch.Tensor, n: int) -> torch.Tensor:
        semantic = self.semantic_residual_vector_quantizer.encode(latent, self.n_semantic)
        acoustic = self.acoustic_residual_vector_quantizer.encode(latent, n - self.n_semantic)
        return torch.cat([semantic, acoustic], dim=0)


# ---------------------------------------------------------------------------------------------
# the encoder


class Encoder(nn.Module):
    def __init__(self, args: EncoderArgs) -> None:
        super().__init__()
        self.args = args
        self.encoder = SEANetEncoder(args)
        self.encoder_transformer = EncoderTransformer(args)
        self.downsample = CausalConv(args.hidden_size, args.hidden_size, args.downsample_kernel, stride=2, bias=False,
                                     pad_mode="replicate")  # fmt: skip
        self.quantizer = SplitRVQ(args)

    @staticmethod
    def own_keys(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k[len(PREFIX):]: v for k, v in state_dict.items() if k.startswith(PREFIX)}

    @classmethod
    def from_state_dict(cls, args: EncoderArgs, state_dict, dtype=torch.float32) -> Encoder:
        """From speech_tokenizer/model.safetensors' `encoder.*` tensors with the prefix stripped (own_keys)."""
        from .shells import build

        return build(cls, args, state_dict, dtype)

    def latents(self, audio: torch.Tensor) -> torch.Tensor:
        """audio [B, 1, n] -> the quantizer's input [B, hidden, ceil(n / 1920)]."""
        h = self.encoder(audio)
        h = self.encoder_transformer(h.transpose(1, 2)).transpose(1, 2)
        return self.downsample(h)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """audio [B, 1, n] -> codes [B, valid_quantizers, T] (long)."""
        return self.quantizer.encode(self.latents(audio), self.args.valid_quantizers).transpose(0, 1)

    @torch.inference_mode()
    def encode(self, audio24k) -> torch.Tensor:
        """24 kHz mono audio [n] -> codes [ceil(n / 1920), 16] (int64, on the CPU), as upstream's
        Qwen3TTSTokenizer.encode returns them for one clip."""
        w = self.downsample.conv.weight
        x = torch.as_tensor(np.asarray(audio24k, dtype=np.float32)).reshape(1, 1, -1)
        if x.shape[-1] == 0:
            raise ValueError("the reference audio is empty")
        codes = self(x.to(w.device, w.dtype))[0]
        frames = -(-x.shape[-1] // self.args.samples_per_frame)
        return codes[:, :frames].T.contiguous().cpu()
