"""CosyVoice3 HiFT vocoder: 80-bin mel (50 frames/s) -> 24 kHz waveform (CausalHiFTGenerator).

Pipeline (finalize=True, batch 1; spec section 4):

    mel --f0 predictor (float64)--> f0 [1, T]
    f0 --NSF source (9 harmonics, fixed noise buffer)--> excitation s [1, 1, 480 T]
    s  --STFT(16, hop 4)--> [1, 18, 120 T + 1]  (fed into every upsampling stage)
    mel --conv_pre--> 3 x (leaky_relu, causal upsample x8/x5/x3, + source branch, mean of 3 resblocks)
        --leaky_relu(0.01), conv_post--> log-magnitude (9) and phase (9) --iSTFT--> wav, clamp +-0.99

480 output samples per mel frame. Parameter names follow upstream, so a freshly built ``HiFT`` has
exactly the keys of ``hift.pt`` (weight-normed convs as ``<m>.parametrizations.weight.original0/1``).
``load_hift`` folds the weight norm once after loading (the folded module then has plain
``<m>.weight`` keys).

Quirks reproduced on purpose (tested in tests/cosyvoice3/test_hift.py): the f0 predictor runs in
float64; the source phase is a per-frame staircase (linear downsample, cumsum, *nearest* upsample);
its "noise" is uniform [0, 1) from a fixed buffer; only the last upsample is followed by a
reflection pad; ``source_downs`` are not weight-normed; the final leaky_relu has slope 0.01; the
magnitude is clipped at 100 *after* exp; the phase channels go through sin() before the iSTFT.
No random numbers are drawn: the process RNG is left untouched.
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm

from . import meta, noise


@dataclass
class HiFTArgs:
    in_channels: int = 80
    base_channels: int = 512
    nb_harmonics: int = 8
    sampling_rate: int = 24000
    nsf_alpha: float = 0.1
    nsf_sigma: float = 0.003
    nsf_voiced_threshold: float = 10.0
    upsample_rates: tuple[int, ...] = (8, 5, 3)
    upsample_kernel_sizes: tuple[int, ...] = (16, 11, 7)
    istft_n_fft: int = 16
    istft_hop_len: int = 4
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    source_resblock_kernel_sizes: tuple[int, ...] = (7, 7, 11)
    source_resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    lrelu_slope: float = 0.1
    audio_limit: float = 0.99
    conv_pre_look_right: int = 4
    f0_cond_channels: int = 512

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.upsample_rates) * self.istft_hop_len

    @classmethod
    def from_state_dict(cls, sd: dict) -> "HiFTArgs":
        """Infer the dims from tensor shapes. Not recoverable from shapes (kept at their defaults):
        the first upsample rate, the iSTFT hop, dilations, and the NSF/activation constants."""
        sd = normalize_hift_state_dict(sd)

        def weight(name: str) -> torch.Size:
            return sd.get(f"{name}.parametrizations.weight.original1", sd.get(f"{name}.weight")).shape

        def count(prefix: str) -> int:
            return len({int(m.group(1)) for k in sd if (m := re.match(re.escape(prefix) + r"\.(\d+)\.", k))})

        defaults = cls()
        base, in_ch, k_pre = weight("conv_pre")
        n_up = count("ups")
        # source_downs[i] has kernel 2*u and stride u with u = prod(upsample_rates[i+1:]); the last is 1x1.
        cum = [weight(f"source_downs.{i}")[2] // 2 for i in range(n_up - 1)] + [1]
        rates = [defaults.upsample_rates[0]] + [cum[i] // cum[i + 1] for i in range(n_up - 1)]
        n_res = count("resblocks") // n_up
        n_src = count("source_resblocks")
        return cls(
            in_channels=in_ch,
            base_channels=base,
            nb_harmonics=sd["m_source.l_linear.weight"].shape[1] - 1,
            upsample_rates=tuple(rates),
            upsample_kernel_sizes=tuple(weight(f"ups.{i}")[2] for i in range(n_up)),
            istft_n_fft=weight("conv_post")[0] - 2,
            resblock_kernel_sizes=tuple(weight(f"resblocks.{j}.convs1.0")[2] for j in range(n_res)),
            resblock_dilation_sizes=tuple(
                defaults.resblock_dilation_sizes[0][: count(f"resblocks.{j}.convs1")] for j in range(n_res)
            ),
            source_resblock_kernel_sizes=tuple(weight(f"source_resblocks.{i}.convs1.0")[2] for i in range(n_src)),
            source_resblock_dilation_sizes=tuple(
                defaults.source_resblock_dilation_sizes[0][: count(f"source_resblocks.{i}.convs1")]
                for i in range(n_src)
            ),
            conv_pre_look_right=k_pre - 1,
            f0_cond_channels=sd["f0_predictor.classifier.weight"].shape[1],
        )


@contextmanager
def one_thread():
    """Run the enclosed torch ops on one intra-op thread. HiFT's few ops whose result depends on the
    thread count (measured, torch 2.13 CPU: the source STFT, and the 1x1 source_downs conv on 18
    channels, whose reduction is split across threads) run inside it, so the waveform's bytes do not
    depend on the thread budget while the big convolutions use all of it."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# ----------------------------------------------------------------------------- causal convolutions


class CausalConv1d(nn.Conv1d):
    """Stride-1 conv zero-padded on one side so the output keeps the input length.

    side="left": causal; side="right": looks ahead (used with finalize=True, i.e. zeros at the end).
    """

    def __init__(self, c_in: int, c_out: int, kernel: int, dilation: int = 1, side: str = "left"):
        super().__init__(c_in, c_out, kernel, dilation=dilation)
        # upstream's formula: (k-1)*d for odd k, k-1 for even k
        self.pad = int((kernel * dilation - dilation) / 2) * 2 + (kernel + 1) % 2
        self.side = side

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(x, (self.pad, 0) if self.side == "left" else (0, self.pad))
        return super().forward(x)


class CausalUpsample(nn.Conv1d):
    """Nearest-neighbour upsampling by ``rate`` then a left-padded conv."""

    def __init__(self, c_in: int, c_out: int, kernel: int, rate: int):
        super().__init__(c_in, c_out, kernel)
        self.rate = rate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=float(self.rate), mode="nearest")
        x = F.pad(x, (self.kernel_size[0] - 1, 0))
        return super().forward(x)


class CausalDownsample(nn.Conv1d):
    """Left pad (stride - 1), then a strided conv."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int):
        super().__init__(c_in, c_out, kernel, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (self.stride[0] - 1, 0)))


class Snake(nn.Module):
    """x + sin(alpha x)^2 / alpha, one alpha per channel (linear scale)."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.unsqueeze(0).unsqueeze(-1)
        return x + (1.0 / (alpha + 1e-9)) * torch.pow(torch.sin(x * alpha), 2)


class ResBlock(nn.Module):
    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.convs1 = nn.ModuleList(
            [weight_norm(CausalConv1d(channels, channels, kernel, dilation=d)) for d in dilations]
        )
        self.convs2 = nn.ModuleList([weight_norm(CausalConv1d(channels, channels, kernel)) for _ in dilations])
        self.activations1 = nn.ModuleList([Snake(channels) for _ in dilations])
        self.activations2 = nn.ModuleList([Snake(channels) for _ in dilations])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for act1, conv1, act2, conv2 in zip(self.activations1, self.convs1, self.activations2, self.convs2):
            x = conv2(act2(conv1(act1(x)))) + x
        return x


# ----------------------------------------------------------------------------- f0 and source


class F0Predictor(nn.Module):
    """5 weight-normed causal convs with ELU, a linear head, abs(). HiFT runs it in float64."""

    def __init__(self, in_channels: int, channels: int):
        super().__init__()
        layers: list[nn.Module] = [weight_norm(CausalConv1d(in_channels, channels, 4, side="right")), nn.ELU()]
        for _ in range(4):
            layers += [weight_norm(CausalConv1d(channels, channels, 3)), nn.ELU()]
        self.condnet = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, 1)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:  # [B, 80, T] -> [B, T]
        h = self.condnet(mel).transpose(1, 2)
        return torch.abs(self.classifier(h).squeeze(-1))


class SourceModule(nn.Module):
    """Harmonic-plus-noise excitation (upstream SourceModuleHnNSF with SineGen2, causal, eval)."""

    def __init__(self, a: HiFTArgs):
        super().__init__()
        self.a = a
        self.l_linear = nn.Linear(a.nb_harmonics + 1, 1)

    def forward(self, f0: torch.Tensor, rand_ini: torch.Tensor, noise_buf: torch.Tensor) -> torch.Tensor:
        """f0 [B, T] float32 -> excitation [B, 1, 480 T]."""
        a, up = self.a, self.a.samples_per_frame
        f0_up = F.interpolate(f0[:, None], scale_factor=float(up), mode="nearest").transpose(1, 2)  # [B, L, 1]
        harmonics = torch.arange(1, a.nb_harmonics + 2, dtype=torch.float32, device=f0.device)
        freqs = f0_up * harmonics  # [B, L, 9]

        # Phase: per-sample increments in cycles, averaged down to one value per frame (linear
        # interpolation), integrated, then held constant over each frame (nearest): a staircase.
        rad = (freqs / a.sampling_rate) % 1
        rad[:, 0, :] = rad[:, 0, :] + rand_ini  # never read by the downsampling below; kept for fidelity
        rad = F.interpolate(rad.transpose(1, 2), scale_factor=1 / up, mode="linear").transpose(1, 2)
        phase = torch.cumsum(rad, dim=1) * 2 * math.pi
        phase = F.interpolate(phase.transpose(1, 2) * up, scale_factor=float(up), mode="nearest").transpose(1, 2)
        sines = torch.sin(phase) * a.nsf_alpha

        uv = (f0_up > a.nsf_voiced_threshold).float()
        noise_amp = uv * a.nsf_sigma + (1 - uv) * a.nsf_alpha / 3
        excitation = sines * uv + noise_amp * noise_buf[:, : sines.shape[1]]
        return torch.tanh(self.l_linear(excitation)).transpose(1, 2)


# ----------------------------------------------------------------------------- generator


class HiFT(nn.Module):
    def __init__(self, args: HiFTArgs, max_seconds: float = noise.HIFT_NOISE_SECONDS):
        """``max_seconds`` caps the length of one inference call (and the size of the shared
        noise buffer: 36 kB per second, 259 MB at the default 300 s, which matches upstream)."""
        super().__init__()
        a = self.args = args
        if a.nb_harmonics + 1 != noise.HIFT_HARMONICS:
            raise ValueError(f"nb_harmonics must be {noise.HIFT_HARMONICS - 1} (the fixed noise buffer's width)")
        if a.sampling_rate != noise.HIFT_SAMPLE_RATE or a.samples_per_frame * 50 != a.sampling_rate:
            raise ValueError("the fixed noise buffers assume 24 kHz output at 480 samples per mel frame")
        self.max_seconds = max_seconds
        n_fft, n_up = a.istft_n_fft, len(a.upsample_rates)

        self.m_source = SourceModule(a)
        self.conv_pre = weight_norm(
            CausalConv1d(a.in_channels, a.base_channels, a.conv_pre_look_right + 1, side="right")
        )
        self.ups = nn.ModuleList(
            [
                weight_norm(CausalUpsample(a.base_channels // 2**i, a.base_channels // 2 ** (i + 1), k, u))
                for i, (u, k) in enumerate(zip(a.upsample_rates, a.upsample_kernel_sizes))
            ]
        )
        # The source STFT (hop 4) is brought to each stage's rate: strides prod(rates[i+1:]).
        self.source_downs = nn.ModuleList()
        self.source_resblocks = nn.ModuleList()
        for i, (k, d) in enumerate(zip(a.source_resblock_kernel_sizes, a.source_resblock_dilation_sizes)):
            ch, stride = a.base_channels // 2 ** (i + 1), math.prod(a.upsample_rates[i + 1 :])
            down = CausalConv1d(n_fft + 2, ch, 1) if stride == 1 else CausalDownsample(n_fft + 2, ch, 2 * stride, stride)
            self.source_downs.append(down)  # not weight-normed
            self.source_resblocks.append(ResBlock(ch, k, d))
        self.resblocks = nn.ModuleList(
            [
                ResBlock(a.base_channels // 2 ** (i + 1), k, d)
                for i in range(n_up)
                for k, d in zip(a.resblock_kernel_sizes, a.resblock_dilation_sizes)
            ]
        )
        self.conv_post = weight_norm(CausalConv1d(a.base_channels // 2**n_up, n_fft + 2, 7))
        self.f0_predictor = F0Predictor(a.in_channels, a.f0_cond_channels)
        # periodic Hann, computed in float64 then rounded (identical to scipy's get_window as float32)
        # (explicitly on the CPU, whatever device the module is built on)
        window = torch.hann_window(n_fft, periodic=True, dtype=torch.float64, device="cpu").float()
        self.register_buffer("stft_window", window, persistent=False)
        self._rand_ini: torch.Tensor | None = None
        self._noise: torch.Tensor | None = None

    # -- pieces

    def _fixed_noise(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._noise is None:
            self._rand_ini = noise.rand_ini()
            self._noise = noise.sine_waves(self.max_seconds)
        return self._rand_ini, self._noise

    def _stft(self, s: torch.Tensor) -> torch.Tensor:  # [B, L] -> [B, n_fft + 2, L / hop + 1]
        n_fft, hop = self.args.istft_n_fft, self.args.istft_hop_len
        with one_thread():
            spec = torch.view_as_real(torch.stft(s, n_fft, hop, n_fft, window=self.stft_window, return_complex=True))
        return torch.cat([spec[..., 0], spec[..., 1]], dim=1)

    def _istft(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        n_fft, hop = self.args.istft_n_fft, self.args.istft_hop_len
        magnitude = torch.clip(magnitude, max=1e2)
        spec = torch.complex(magnitude * torch.cos(phase), magnitude * torch.sin(phase))
        with one_thread():
            return torch.istft(spec, n_fft, hop, n_fft, window=self.stft_window)

    def decode(self, mel: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """mel [B, 80, T], excitation s [B, 1, 480 T] -> wav [B, 480 T] (finalize=True)."""
        a = self.args
        dtype = self.conv_pre.weight.dtype  # the generator's precision (set_hift_dtype); STFTs stay fp32
        s_stft = self._stft(s.squeeze(1)).to(dtype)
        x = self.conv_pre(mel.to(dtype))
        n_up, n_res = len(self.ups), len(a.resblock_kernel_sizes)
        for i in range(n_up):
            x = self.ups[i](F.leaky_relu(x, a.lrelu_slope))
            if i == n_up - 1:
                x = F.pad(x, (1, 0), mode="reflect")  # 120T -> 120T + 1 STFT frames
            with one_thread():  # 18 input channels: tiny, and thread-dependent when split
                down = self.source_downs[i](s_stft)
            x = x + self.source_resblocks[i](down)
            xs = self.resblocks[i * n_res](x)
            for j in range(1, n_res):
                xs += self.resblocks[i * n_res + j](x)
            x = xs / n_res
        x = self.conv_post(F.leaky_relu(x)).float()  # default slope 0.01, not lrelu_slope
        half = a.istft_n_fft // 2 + 1
        magnitude = torch.exp(x[:, :half, :])  # clipped at 100 inside _istft, after the exp
        phase = torch.sin(x[:, half:, :])
        return torch.clamp(self._istft(magnitude, phase), -a.audio_limit, a.audio_limit)

    # -- public

    @torch.inference_mode()
    def inference(self, mel: torch.Tensor) -> torch.Tensor:
        """mel [1, 80, T] float32 -> waveform [1, 480 T] in [-0.99, 0.99] (finalize=True)."""
        n_samples = mel.shape[2] * self.args.samples_per_frame
        limit = int(round(self.max_seconds * self.args.sampling_rate))
        if n_samples > limit:
            raise ValueError(
                f"HiFT input is {mel.shape[2]} mel frames ({n_samples / self.args.sampling_rate:.1f} s) but the "
                f"fixed source noise covers only {self.max_seconds} s; split the audio into shorter segments"
            )
        rand_ini, noise_buf = self._fixed_noise()
        device = self.conv_pre.weight.device
        mel = mel.to(device, torch.float32)
        self.f0_predictor.to(torch.float64)  # upstream: f0 precision matters for the causal source
        f0 = self.f0_predictor(mel.to(torch.float64)).to(torch.float32)
        # The noise tables live on the CPU (noise.py); only this call's stretch is moved.
        s = self.m_source(f0, rand_ini.to(device), noise_buf[:, :n_samples].to(device))
        return self.decode(mel, s)


# ----------------------------------------------------------------------------- loading


def normalize_hift_state_dict(sd: dict) -> dict:
    """Map any on-disk hift.pt layout to ours: drop "generator." (anywhere in a key, as upstream
    does) and rename legacy ``weight_g`` / ``weight_v`` to ``parametrizations.weight.original0/1``."""
    out = {}
    for key, value in sd.items():
        key = key.replace("generator.", "")
        if key.endswith(".weight_g"):
            key = key[: -len("weight_g")] + "parametrizations.weight.original0"
        elif key.endswith(".weight_v"):
            key = key[: -len("weight_v")] + "parametrizations.weight.original1"
        out[key] = value
    return out


def fold_weight_norm(model: nn.Module) -> None:
    """Replace every weight-norm parametrization by its value g * v / ||v|| (computed once, by torch's
    own ``_weight_norm``: norm over all dims but 0, no epsilon), in each module's current dtype."""
    for module in model.modules():
        if parametrize.is_parametrized(module, "weight"):
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)


def set_hift_dtype(model: HiFT, dtype: torch.dtype) -> HiFT:
    """In place: the generator's convolutions at `dtype` (fp32, bf16, fp16). The f0 predictor
    stays float64 and the source module fp32 (its phase is an integral over the whole segment),
    and both STFTs run in fp32; so does the iSTFT's input (decode casts back)."""
    for part in (model.conv_pre, model.ups, model.source_downs, model.source_resblocks, model.resblocks, model.conv_post):
        part.to(dtype)
    return model


def load_hift(sd: dict, max_seconds: float = noise.HIFT_NOISE_SECONDS) -> HiFT:
    """Normalize, strict-load (fp32), move the f0 predictor to float64, fold weight norm, eval.

    Built as a shell (meta.py) and given the checkpoint's tensors (no random init, no global RNG)."""
    sd = normalize_hift_state_dict(sd)
    with meta.shell("cpu"):
        model = HiFT(HiFTArgs.from_state_dict(sd), max_seconds=max_seconds)
    model.load_state_dict(sd, strict=True, assign=True)
    model.float()
    model.f0_predictor.double()  # fold in float64, as upstream's per-call float64 parametrization does
    fold_weight_norm(model)
    return model.eval().requires_grad_(False)
