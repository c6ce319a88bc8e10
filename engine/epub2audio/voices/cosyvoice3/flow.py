"""CosyVoice3 flow stage: speech tokens -> 80-bin mel (CausalMaskedDiffWithDiT), in plain PyTorch.

Pipeline (non-streaming, batch 1; spec section 3):

    tokens (prompt + generated)  --Embedding(6561, 80)-->  PreLookahead  --repeat x2-->  mu [1, 80, T]
    cond = prompt mel in the first 2*Lp frames, zeros after
    x0 = fixed noise rand_noise[:, :, :T]            (always the leading T frames; see noise.py)
    10 Euler steps on a cosine t schedule, classifier-free guidance 0.7, DiT velocity estimator
    return x1[:, :, 2*Lp:]                           (prompt frames removed)

The module tree and parameter names follow upstream's, so ``Flow.state_dict()`` has exactly the
keys of ``flow.pt`` (330 for the real model, including the RoPE ``inv_freq`` buffer).

Upstream quirks reproduced on purpose (each is tested in tests/cosyvoice3/test_flow.py):
  * RoPE (x-transformers style, interleaved GPT-J pairs) is applied to q and k *before* the head
    split, and rotates only the first ``dim_head`` channels, i.e. head 0. Other heads get none.
  * DiT input concat order is x, cond, mu, spk.
  * AdaLN-Zero chunks: shift, scale, gate (attn), shift, scale, gate (ff); the final norm's are
    scale *then* shift. LayerNorms have no affine and eps 1e-6. FF uses tanh-GELU.
  * The unconditional CFG branch zeroes mu, spks *and* cond; v = 1.7 v_cond - 0.7 v_uncond.
  * t is accumulated by addition (t = t + dt), not read from the schedule.
  * The estimator always runs on a batch of 2 (conditional, unconditional).
No random numbers are drawn: the process RNG is left untouched.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import meta, noise


@dataclass
class FlowArgs:
    vocab_size: int = 6561
    mel_dim: int = 80
    spk_embed_dim: int = 192
    token_mel_ratio: int = 2
    pre_lookahead_len: int = 3
    pre_lookahead_channels: int = 1024
    dim: int = 1024
    depth: int = 22
    heads: int = 16
    dim_head: int = 64
    ff_mult: int = 2
    static_chunk_size: int = 50  # streaming attention chunk; unused by the non-streaming path here
    n_timesteps: int = 10
    cfg_rate: float = 0.7
    conv_pos_kernel: int = 31
    conv_pos_groups: int = 16
    time_freq_dim: int = 256

    @classmethod
    def from_state_dict(cls, sd: dict) -> "FlowArgs":
        """Infer every dimension from tensor shapes (the schedule settings keep their defaults)."""
        est = "decoder.estimator."
        vocab, mel = sd["input_embedding.weight"].shape
        pre_ch, _, pre_k = sd["pre_lookahead_layer.conv1.weight"].shape
        dim, time_freq = sd[est + "time_embed.time_mlp.0.weight"].shape
        inner = sd[est + "transformer_blocks.0.attn.to_q.weight"].shape[0]
        dim_head = 2 * sd[est + "rotary_embed.inv_freq"].shape[0]
        conv_w = sd[est + "input_embed.conv_pos_embed.conv1.0.weight"]
        block_ids = {int(m.group(1)) for k in sd if (m := re.match(re.escape(est) + r"transformer_blocks\.(\d+)\.", k))}
        return cls(
            vocab_size=vocab,
            mel_dim=mel,
            spk_embed_dim=sd["spk_embed_affine_layer.weight"].shape[1],
            pre_lookahead_len=pre_k - 1,
            pre_lookahead_channels=pre_ch,
            dim=dim,
            depth=len(block_ids),
            heads=inner // dim_head,
            dim_head=dim_head,
            ff_mult=sd[est + "transformer_blocks.0.ff.ff.0.0.weight"].shape[0] // dim,
            conv_pos_kernel=conv_w.shape[2],
            conv_pos_groups=dim // conv_w.shape[1],
            time_freq_dim=time_freq,
        )


# ----------------------------------------------------------------------------- token encoder


class PreLookahead(nn.Module):
    """Residual 2-conv block that lets each token see the next ``pre_lookahead_len`` tokens."""

    def __init__(self, channels_in: int, channels: int, lookahead: int):
        super().__init__()
        self.lookahead = lookahead
        self.conv1 = nn.Conv1d(channels_in, channels, kernel_size=lookahead + 1)
        self.conv2 = nn.Conv1d(channels, channels_in, kernel_size=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [B, T, C]
        h = x.transpose(1, 2).contiguous()
        h = F.pad(h, (0, self.lookahead))  # right zero pad: look ahead (finalize=True)
        h = F.leaky_relu(self.conv1(h))  # default slope 0.01
        h = F.pad(h, (self.conv2.kernel_size[0] - 1, 0))  # left zero pad: causal
        h = self.conv2(h).transpose(1, 2).contiguous()
        return h + x


# ----------------------------------------------------------------------------- DiT estimator


class TimestepEmbedding(nn.Module):
    def __init__(self, dim: int, freq_dim: int):
        super().__init__()
        self.freq_dim = freq_dim
        self.time_mlp = nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:  # t: [B]
        # The sinusoid is taken in fp32 whatever the weights are: 1000 t in bf16 is off by ~1 rad.
        half = self.freq_dim // 2
        freqs = torch.exp(torch.arange(half, device=t.device).float() * -(math.log(10000) / (half - 1)))
        arg = 1000 * t.float().unsqueeze(1) * freqs.unsqueeze(0)
        emb = torch.cat((arg.sin(), arg.cos()), dim=-1).to(self.time_mlp[0].weight.dtype)
        return self.time_mlp(emb)


class CausalConvPos(nn.Module):
    """Two left-padded grouped convs with Mish: a causal convolutional position embedding."""

    def __init__(self, dim: int, kernel: int, groups: int):
        super().__init__()
        self.kernel = kernel
        self.conv1 = nn.Sequential(nn.Conv1d(dim, dim, kernel, groups=groups), nn.Mish())
        self.conv2 = nn.Sequential(nn.Conv1d(dim, dim, kernel, groups=groups), nn.Mish())

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [B, T, D]
        h = x.permute(0, 2, 1)
        h = self.conv1(F.pad(h, (self.kernel - 1, 0)))
        h = self.conv2(F.pad(h, (self.kernel - 1, 0)))
        return h.permute(0, 2, 1)


class InputEmbedding(nn.Module):
    def __init__(self, mel_dim: int, dim: int, kernel: int, groups: int):
        super().__init__()
        self.proj = nn.Linear(4 * mel_dim, dim)  # x, cond, mu, spk
        self.conv_pos_embed = CausalConvPos(dim, kernel, groups)

    def forward(self, x, cond, mu, spk):  # [B, T, 80] x3, spk [B, 80]
        spk = spk.unsqueeze(1).expand(-1, x.shape[1], -1)
        h = self.proj(torch.cat([x, cond, mu, spk], dim=-1))
        return self.conv_pos_embed(h) + h


class RotaryEmbedding(nn.Module):
    """x-transformers RotaryEmbedding(dim_head): frequencies duplicated in interleaved pairs."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        # computed on the CPU even inside meta.shell(): a meta division would import torch._dynamo
        exponents = torch.arange(0, dim, 2, device="cpu").float() / dim
        self.register_buffer("inv_freq", 1.0 / (base**exponents))

    def forward(self, seq_len: int) -> torch.Tensor:  # -> [1, T, dim] as [f0, f0, f1, f1, ...]
        pos = torch.arange(seq_len, device=self.inv_freq.device).type_as(self.inv_freq)
        freqs = pos[:, None] * self.inv_freq[None, :]
        return torch.stack((freqs, freqs), dim=-1).flatten(-2).unsqueeze(0)


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """GPT-J rotate_half: each adjacent pair (a, b) becomes (-b, a)."""
    a, b = x.unflatten(-1, (-1, 2)).unbind(-1)
    return torch.stack((-b, a), dim=-1).flatten(-2)


def rotated_head0(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """The first ``freqs.shape[-1]`` channels of x [B, T, heads*dim_head], rotated. Applied before
    the head split, these are head 0's: the other heads get no rotation (upstream quirk)."""
    rot = x[..., : freqs.shape[-1]]
    return rot * freqs.cos() + rotate_pairs(rot) * freqs.sin()  # freqs stay fp32 (see set_flow_dtype)


def apply_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """x with head 0 rotated (a new tensor)."""
    return torch.cat((rotated_head0(x, freqs).to(x.dtype), x[..., freqs.shape[-1] :]), dim=-1)


def apply_rope_(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """apply_rope() into x itself (a projection's fresh output): the same values without copying
    the other heads through a concatenation. The ONNX exporter gets the concatenation."""
    if torch.onnx.is_in_onnx_export():
        return apply_rope(x, freqs)
    x[..., : freqs.shape[-1]] = rotated_head0(x, freqs)  # cast to x's dtype on assignment
    return x


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int):
        super().__init__()
        self.heads = heads
        inner = heads * dim_head
        self.to_q = nn.Linear(dim, inner)
        self.to_k = nn.Linear(dim, inner)
        self.to_v = nn.Linear(dim, inner)
        self.to_out = nn.ModuleList([nn.Linear(inner, dim)])  # upstream's [1] is a Dropout

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q = apply_rope_(self.to_q(x), rope)
        k = apply_rope_(self.to_k(x), rope)
        v = self.to_v(x)
        q, k, v = (z.view(B, T, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        # Non-streaming batch-1 mask is all true: no mask at all gives bit-identical results.
        out = F.scaled_dot_product_attention(q, k, v)
        return self.to_out[0](out.transpose(1, 2).reshape(B, T, -1))


class AdaLayerNormZero(nn.Module):
    def __init__(self, dim: int, n_chunks: int):
        super().__init__()
        self.n_chunks = n_chunks
        self.linear = nn.Linear(dim, dim * n_chunks)

    def forward(self, t_emb: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.linear(F.silu(t_emb)).chunk(self.n_chunks, dim=1)


def layer_norm(x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], eps=1e-6)  # no affine


class FeedForward(nn.Module):
    def __init__(self, dim: int, mult: int):
        super().__init__()
        # indices match upstream's keys ff.0.0 / ff.2 (index 1 was a Dropout)
        self.ff = nn.Sequential(
            nn.Sequential(nn.Linear(dim, dim * mult), nn.GELU(approximate="tanh")),
            nn.Identity(),
            nn.Linear(dim * mult, dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ff(x)


class DiTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int, ff_mult: int):
        super().__init__()
        self.attn_norm = AdaLayerNormZero(dim, 6)
        self.attn = Attention(dim, heads, dim_head)
        self.ff = FeedForward(dim, ff_mult)

    def forward(self, x: torch.Tensor, t_emb: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        return self.update_(x.clone(), t_emb, rope)

    def update_(self, x: torch.Tensor, t_emb: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        """forward(), adding into x itself (DiT.forward owns its residual stream). The in-place ops
        do upstream's arithmetic, element for element; they only save the allocations and
        first-touch page faults of four fresh [B, T, dim] tensors per block."""
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.attn_norm(t_emb)
        h = layer_norm(x).mul_(1 + scale_msa[:, None]).add_(shift_msa[:, None])
        x.add_(self.attn(h, rope).mul_(gate_msa.unsqueeze(1)))
        h = layer_norm(x).mul_(1 + scale_mlp[:, None]).add_(shift_mlp[:, None])
        return x.add_(self.ff(h).mul_(gate_mlp.unsqueeze(1)))


class DiT(nn.Module):
    """Velocity estimator. Inputs channel-first [B, 80, T] (x, mu, cond), t [B], spks [B, 80]."""

    def __init__(self, a: FlowArgs):
        super().__init__()
        self.time_embed = TimestepEmbedding(a.dim, a.time_freq_dim)
        self.input_embed = InputEmbedding(a.mel_dim, a.dim, a.conv_pos_kernel, a.conv_pos_groups)
        self.rotary_embed = RotaryEmbedding(a.dim_head)
        self.transformer_blocks = nn.ModuleList(
            [DiTBlock(a.dim, a.heads, a.dim_head, a.ff_mult) for _ in range(a.depth)]
        )
        self.norm_out = AdaLayerNormZero(a.dim, 2)
        self.proj_out = nn.Linear(a.dim, a.mel_dim)

    def forward(self, x, mu, t, spks, cond) -> torch.Tensor:
        x, mu, cond = x.transpose(1, 2), mu.transpose(1, 2), cond.transpose(1, 2)
        t_emb = self.time_embed(t)
        h = self.input_embed(x, cond, mu, spks)
        rope = self.rotary_embed(h.shape[1])
        for block in self.transformer_blocks:
            h = block.update_(h, t_emb, rope)  # h is input_embed's fresh output: ours to update
        scale, shift = self.norm_out(t_emb)  # final norm: scale first, then shift
        h = layer_norm(h) * (1 + scale)[:, None, :] + shift[:, None, :]
        return self.proj_out(h).transpose(1, 2)


# ----------------------------------------------------------------------------- ODE sampler


def cosine_t_span(n_timesteps: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The Euler time points, computed on the CPU (callers move them) so every device steps alike."""
    t = torch.linspace(0, 1, n_timesteps + 1, dtype=dtype, device="cpu")
    return 1 - torch.cos(t * 0.5 * torch.pi)


class ConditionalFlowMatching(nn.Module):
    """Euler solver with classifier-free guidance, started from the fixed noise prefix."""

    def __init__(self, a: FlowArgs):
        super().__init__()
        self.n_timesteps = a.n_timesteps
        self.cfg_rate = a.cfg_rate
        self.estimator = DiT(a)

    def forward(self, mu: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """mu, cond [1, 80, T]; spks [1, 80] -> mel [1, 80, T] (float32)."""
        C, T = mu.shape[1], mu.shape[2]
        rand_noise = noise.flow_noise()
        if T > rand_noise.shape[2]:
            raise ValueError(
                f"flow input is {T} mel frames (prompt + generated) but the fixed noise covers only "
                f"{rand_noise.shape[2]} frames ({rand_noise.shape[2] // 50} s); split the text into shorter segments"
            )
        if C != rand_noise.shape[1]:
            raise ValueError(f"mel_dim must be {rand_noise.shape[1]} (the fixed noise's channel count), got {C}")
        # The ODE state (x, t, dt) is fp32 on every device and precision; only the estimator runs
        # at the flow's dtype (mu's). The noise is drawn on the CPU and moved (noise.py).
        x = rand_noise[:, :, :T].to(mu.device, torch.float32) * 1.0  # temperature 1, always from frame 0

        t_span = cosine_t_span(self.n_timesteps).to(mu.device)
        t, dt = t_span[0].unsqueeze(0), t_span[1] - t_span[0]
        # Batch-2 buffers: row 0 conditional, row 1 unconditional (mu, spks, cond stay zero).
        dtype, dev = mu.dtype, x.device
        x_in = torch.zeros([2, C, T], device=dev, dtype=dtype)
        mu_in = torch.zeros([2, C, T], device=dev, dtype=dtype)
        t_in = torch.zeros([2], device=dev, dtype=torch.float32)
        spks_in = torch.zeros([2, spks.shape[1]], device=dev, dtype=dtype)
        cond_in = torch.zeros([2, C, T], device=dev, dtype=dtype)
        for step in range(1, len(t_span)):
            x_in[:] = x
            mu_in[0] = mu
            t_in[:] = t
            spks_in[0] = spks
            cond_in[0] = cond
            v = self.estimator(x_in, mu_in, t_in, spks_in, cond_in).float()
            v_cond, v_uncond = torch.split(v, [1, 1], dim=0)
            v = (1.0 + self.cfg_rate) * v_cond - self.cfg_rate * v_uncond
            x = x + dt * v
            t = t + dt  # accumulated by addition, as upstream does
            if step < len(t_span) - 1:
                dt = t_span[step + 1] - t
        return x.float()


# ----------------------------------------------------------------------------- full stage


class Flow(nn.Module):
    def __init__(self, args: FlowArgs):
        super().__init__()
        self.args = args
        self.input_embedding = nn.Embedding(args.vocab_size, args.mel_dim)
        self.spk_embed_affine_layer = nn.Linear(args.spk_embed_dim, args.mel_dim)
        self.pre_lookahead_layer = PreLookahead(args.mel_dim, args.pre_lookahead_channels, args.pre_lookahead_len)
        self.decoder = ConditionalFlowMatching(args)

    @torch.inference_mode()
    def inference(
        self,
        token: torch.Tensor,  # [1, Lg] int64
        prompt_token: torch.Tensor,  # [1, Lp] int64
        prompt_feat: torch.Tensor,  # [1, ratio*Lp, 80] float32
        embedding: torch.Tensor,  # [1, spk_embed_dim] float32 x-vector
    ) -> torch.Tensor:  # [1, 80, ratio*Lg]
        """Non-streaming (finalize=True) synthesis of the generated tokens' mel; prompt frames removed."""
        ratio = self.args.token_mel_ratio
        if token.shape[0] != 1 or prompt_token.shape[0] != 1:
            raise ValueError("batch size must be 1")
        if prompt_feat.shape[1] != ratio * prompt_token.shape[1]:
            raise ValueError(
                f"prompt_feat has {prompt_feat.shape[1]} frames, expected {ratio} x {prompt_token.shape[1]} prompt tokens"
            )
        # Inputs come from the host (CPU, fp32): move them to where the flow runs, at its dtype.
        weight = self.input_embedding.weight
        token, prompt_token = token.to(weight.device), prompt_token.to(weight.device)
        prompt_feat, embedding = prompt_feat.to(weight), embedding.to(weight)
        spk = self.spk_embed_affine_layer(F.normalize(embedding, dim=1))

        tokens = torch.cat([prompt_token, token], dim=1)
        h = self.input_embedding(torch.clamp(tokens, min=0))
        h = self.pre_lookahead_layer(h)
        h = h.repeat_interleave(ratio, dim=1)  # [1, T_mel, 80]
        n_prompt, n_total = prompt_feat.shape[1], h.shape[1]

        cond = torch.zeros([1, n_total, self.args.mel_dim], device=h.device, dtype=h.dtype)
        cond[:, :n_prompt] = prompt_feat
        mel = self.decoder(h.transpose(1, 2).contiguous(), spk, cond.transpose(1, 2))
        return mel[:, :, n_prompt:].float()


def set_flow_dtype(flow: Flow, dtype: torch.dtype) -> Flow:
    """In place: the flow's weights at `dtype` (fp32, bf16, fp16), except the DiT's rotary
    frequencies, which stay fp32 (positions up to 15000 times a bf16 frequency would be off by
    whole turns). The Euler state stays fp32 whatever this is (ConditionalFlowMatching)."""
    flow.to(dtype)
    flow.decoder.estimator.rotary_embed.float()
    return flow


def load_flow(sd: dict, keep_dtype: bool = False) -> Flow:
    """Build a Flow sized from ``sd``, strict-load it, fp32, eval mode.

    The module is built on the meta device and takes ``sd``'s tensors as its parameters (no random
    init of 332M parameters, no copy), so fp32 tensors in ``sd`` are shared with the model.
    """
    with meta.shell():
        model = Flow(FlowArgs.from_state_dict(sd))
    model.load_state_dict(sd, strict=True, assign=True)
    if not keep_dtype:  # keep_dtype: a compressed folder's half-precision flow, adopted as stored
        model.float()
    return model.eval().requires_grad_(False)
