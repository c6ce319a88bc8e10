"""The Base model's speaker encoder: 24 kHz audio -> one x-vector the Talker reads as a codec slot.

Front end (upstream's `mel_spectrogram` as `extract_speaker_embedding` calls it): n_fft 1024, hop
256, Hann window 1024, reflect padding of (n_fft - hop) / 2 = 384 samples on each side, STFT with
no centring, magnitude sqrt(re^2 + im^2 + 1e-9), librosa's Slaney mel filter bank (128 mels, 0 to
12 kHz, float32), natural log floored at 1e-5. Frames [T, 128].

Network: ECAPA-TDNN (names under `speaker_encoder.` in model.safetensors), every conv 'same'-padded
with reflection:

    blocks.0               TDNN (conv k5 + ReLU) 128 -> 512
    blocks.1..3            SE-Res2Net: TDNN k1, Res2Net (8 splits; split i>0 gets a k3 TDNN of
                           itself plus the previous split's output), TDNN k1, squeeze-excitation
                           (time mean -> k1 conv -> ReLU -> k1 conv -> sigmoid, scales the channels),
                           plus the block's input
    mfa                    TDNN k1 over blocks 1..3 concatenated (1536)
    asp                    attentive statistics pooling: weights from [x, mean, std] (TDNN ->
                           tanh -> conv -> softmax over time), then the weighted mean and std
    fc                     k1 conv 3072 -> enc_dim (1024 at 0.6B: the Talker's width)

The statistics are computed as upstream writes them (sums of x times a 1/T mask, std clamped at
1e-12 under the root) so that fp32 results track upstream's operation for operation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

PREFIX = "speaker_encoder."
SAMPLE_RATE = 24000
N_FFT = 1024
HOP = 256
WIN = 1024
N_MELS = 128
FMIN = 0.0
FMAX = 12000.0


@dataclass(frozen=True)
class SpeakerEncoderArgs:
    """config.json `speaker_encoder_config`; the defaults are upstream's Qwen3TTSSpeakerEncoderConfig."""

    mel_dim: int = 128
    enc_dim: int = 1024
    enc_channels: tuple[int, ...] = (512, 512, 512, 512, 1536)
    enc_kernel_sizes: tuple[int, ...] = (5, 3, 3, 3, 1)
    enc_dilations: tuple[int, ...] = (1, 2, 3, 4, 1)
    enc_attention_channels: int = 128
    enc_res2net_scale: int = 8
    enc_se_channels: int = 128
    sample_rate: int = 24000

    @classmethod
    def from_config(cls, c: Mapping[str, Any] | None) -> SpeakerEncoderArgs:
        c = dict(c or {})
        d = cls()

        def ints(key: str) -> tuple[int, ...]:
            v = c.get(key, getattr(d, key))
            if not isinstance(v, (list, tuple)) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                raise ValueError(f"{key} must be a list of integers, got {v!r}")
            return tuple(v)

        def one(key: str) -> int:
            v = c.get(key, getattr(d, key))
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{key} must be a positive integer, got {v!r}")
            return v

        out = cls(
            mel_dim=one("mel_dim"), enc_dim=one("enc_dim"), enc_channels=ints("enc_channels"),
            enc_kernel_sizes=ints("enc_kernel_sizes"), enc_dilations=ints("enc_dilations"),
            enc_attention_channels=one("enc_attention_channels"), enc_res2net_scale=one("enc_res2net_scale"),
            enc_se_channels=one("enc_se_channels"), sample_rate=one("sample_rate"),
        )  # fmt: skip
        if not len(out.enc_channels) == len(out.enc_kernel_sizes) == len(out.enc_dilations) >= 3:
            raise ValueError("enc_channels, enc_kernel_sizes and enc_dilations must have the same length (3 or more)")
        if out.mel_dim != N_MELS:
            raise ValueError(f"mel_dim {out.mel_dim}: upstream's front end computes {N_MELS} mels")
        if out.sample_rate != SAMPLE_RATE:
            raise ValueError(f"sample_rate {out.sample_rate}: upstream's front end runs at {SAMPLE_RATE}")
        if any(ch % out.enc_res2net_scale for ch in out.enc_channels[1:-1]):
            raise ValueError("the SE-Res2Net channels must divide by enc_res2net_scale")
        return out


# ---------------------------------------------------------------------------------------------
# front end


def _hz_to_mel(f: np.ndarray | float) -> np.ndarray:
    """librosa's Slaney scale: linear below 1 kHz (200/3 Hz a mel), logarithmic above."""
    f = np.asanyarray(f, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    mels = f / f_sp
    if f.ndim:
        log_t = f >= min_log_hz
        mels[log_t] = min_log_mel + np.log(f[log_t] / min_log_hz) / logstep
    elif f >= min_log_hz:
        mels = min_log_mel + np.log(f / min_log_hz) / logstep
    return mels


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    freqs = f_sp * m
    log_t = m >= min_log_mel
    freqs[log_t] = min_log_hz * np.exp(logstep * (m[log_t] - min_log_mel))
    return freqs


@lru_cache(maxsize=2)
def mel_filters(sr: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS, fmin: float = FMIN,
                fmax: float = FMAX) -> torch.Tensor:  # fmt: skip
    """librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax) (Slaney scale and norm) as float32
    [n_mels, n_fft/2 + 1], computed in float64 and rounded where librosa rounds: each triangle is
    stored as float32, then scaled by its float64 Slaney norm and stored again."""
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(fmin), _hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    weights = np.zeros((n_mels, n_fft // 2 + 1), dtype=np.float32)
    for i in range(n_mels):
        weights[i] = np.maximum(0, np.minimum(-ramps[i] / fdiff[i], ramps[i + 2] / fdiff[i + 1]))
    weights *= (2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels]))[:, None]
    return torch.from_numpy(weights)


def log_mel(audio: torch.Tensor) -> torch.Tensor:
    """24 kHz mono audio [n] (float32) -> log-mel frames [T, 128], T = (n + 768 - 1024) // 256 + 1."""
    y = audio.reshape(1, -1).float()
    pad = (N_FFT - HOP) // 2
    if y.shape[-1] <= pad:
        raise ValueError(f"the reference audio is too short: {y.shape[-1]} samples (more than {pad} needed)")
    y = F.pad(y.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
    spec = torch.stft(y, N_FFT, hop_length=HOP, win_length=WIN, window=torch.hann_window(WIN, device=y.device),
                      center=False, normalized=False, onesided=True, return_complex=True)  # fmt: skip
    mag = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-9)
    mel = torch.matmul(mel_filters().to(y.device), mag)
    return torch.log(torch.clamp(mel, min=1e-5))[0].T


# ---------------------------------------------------------------------------------------------
# network


def _conv(cin: int, cout: int, kernel: int, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(cin, cout, kernel, dilation=dilation, padding="same", padding_mode="reflect")


class TDNN(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, dilation: int = 1) -> None:
        super().__init__()
        self.conv = _conv(cin, cout, kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x))


class Res2Net(nn.Module):
    def __init__(self, channels: int, scale: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.scale = scale
        self.blocks = nn.ModuleList(TDNN(channels // scale, channels // scale, kernel, dilation) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs: list[torch.Tensor] = []
        for i, part in enumerate(torch.chunk(x, self.scale, dim=1)):
            if i == 0:
                y = part
            elif i == 1:
                y = self.blocks[0](part)
            else:
                y = self.blocks[i - 1](part + y)
            outs.append(y)
        return torch.cat(outs, dim=1)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, se_channels: int) -> None:
        super().__init__()
        self.conv1 = _conv(channels, se_channels, 1)
        self.conv2 = _conv(se_channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.conv2(F.relu(self.conv1(x.mean(dim=2, keepdim=True)))))
        return x * s


class SERes2NetBlock(nn.Module):
    def __init__(self, cin: int, cout: int, scale: int, se_channels: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.tdnn1 = TDNN(cin, cout, 1)
        self.res2net_block = Res2Net(cout, scale, kernel, dilation)
        self.tdnn2 = TDNN(cout, cout, 1)
        self.se_block = SqueezeExcitation(cout, se_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x)))) + x


def _weighted_stats(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = (w * x).sum(2)
    std = torch.sqrt((w * (x - mean.unsqueeze(2)).pow(2)).sum(2).clamp(1e-12))
    return mean, std


class AttentiveStatsPool(nn.Module):
    def __init__(self, channels: int, attention_channels: int) -> None:
        super().__init__()
        self.tdnn = TDNN(channels * 3, attention_channels, 1)
        self.conv = _conv(attention_channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[1, C, T] -> [1, 2C, 1]: mean and std under attention weights over time."""
        n = x.shape[-1]
        uniform = torch.ones(x.shape[0], 1, n, dtype=x.dtype, device=x.device)
        uniform = uniform / uniform.sum(dim=2, keepdim=True)
        mean, std = _weighted_stats(x, uniform)
        context = torch.cat([x, mean.unsqueeze(2).repeat(1, 1, n), std.unsqueeze(2).repeat(1, 1, n)], dim=1)
        weights = F.softmax(self.conv(torch.tanh(self.tdnn(context))), dim=2)
        mean, std = _weighted_stats(x, weights)
        return torch.cat((mean, std), dim=1).unsqueeze(2)


class SpeakerEncoder(nn.Module):
    def __init__(self, args: SpeakerEncoderArgs) -> None:
        super().__init__()
        self.args = args
        ch, ks, dil = args.enc_channels, args.enc_kernel_sizes, args.enc_dilations
        self.blocks = nn.ModuleList([TDNN(args.mel_dim, ch[0], ks[0], dil[0])])
        for i in range(1, len(ch) - 1):
            self.blocks.append(SERes2NetBlock(ch[i - 1], ch[i], args.enc_res2net_scale, args.enc_se_channels, ks[i], dil[i]))
        self.mfa = TDNN(sum(ch[1:-1]), ch[-1], ks[-1], dil[-1])
        self.asp = AttentiveStatsPool(ch[-1], args.enc_attention_channels)
        self.fc = _conv(ch[-1] * 2, args.enc_dim, 1)

    @staticmethod
    def own_keys(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k[len(PREFIX):]: v for k, v in state_dict.items() if k.startswith(PREFIX)}

    @classmethod
    def from_state_dict(cls, args: SpeakerEncoderArgs, state_dict, dtype=torch.float32) -> SpeakerEncoder:
        """From model.safetensors' `speaker_encoder.*` tensors with the prefix stripped (own_keys), strict."""
        from .shells import build

        return build(cls, args, state_dict, dtype)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        """mels [1, T, 128] -> x-vector [1, enc_dim]."""
        x = mels.transpose(1, 2)
        outs = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        x = self.mfa(torch.cat(outs[1:], dim=1))
        return self.fc(self.asp(x)).squeeze(-1)

    @torch.inference_mode()
    def embed(self, audio24k) -> torch.Tensor:
        """24 kHz mono audio [n] -> the speaker embedding [enc_dim] (float32, on the CPU)."""
        w = self.fc.weight
        mels = log_mel(torch.as_tensor(np.asarray(audio24k, dtype=np.float32)))
        return self(mels[None].to(w.device, w.dtype))[0].float().cpu()
