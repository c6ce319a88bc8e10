"""CosyVoice3 HiFT vocoder (engine/epub2audio/voices/cosyvoice3/hift.py) and the fixed noise
buffers (noise.py): layout, weight-norm loading, one test per quirk, determinism.
Tiny dims: base_channels 32 (f0 predictor 32); rates, kernels, iSTFT and the noise stay real."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parametrize

from epub2audio.voices.cosyvoice3 import noise
from epub2audio.voices.cosyvoice3.hift import HiFT, HiFTArgs, load_hift, normalize_hift_state_dict

from .fixtures import reference_shapes
from .random_weights import random_hift_state_dict, tiny_hift_args

# spec 6.2, from upstream's seed-0 construction
SPEC_RAND_INI = [0, 0.17098892, 0.16533190, 0.14378005, 0.76294738, 0.65893006, 0.02751905, 0.43482542, 0.05383557]
SPEC_SINE_WAVES_0 = [0.92282599, 0.47744751, 0.82705182, 0.28345716, 0.79348159, 0.17343479, 0.85237503, 0.92285460, 0.73101997]
SPEC_UV_HEAD = [0.25160581, 0.87399584, 0.52791911, 0.69869286, 0.92643774]
MAX_SECONDS = 2.0  # tiny noise cap for the unit tests


@pytest.fixture(scope="module")
def tiny_sd():
    return random_hift_state_dict(tiny_hift_args(), seed=2)


@pytest.fixture(scope="module")
def tiny_hift(tiny_sd):
    return load_hift(tiny_sd, max_seconds=MAX_SECONDS)


def random_mel(T: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(1, 80, T, generator=torch.Generator().manual_seed(seed)) - 4.0


# ----------------------------------------------------------------------------- layout and loading


def test_full_size_keys_and_shapes_match_reference():
    with torch.device("meta"):
        hift = HiFT(HiFTArgs())
    got = {k: tuple(v.shape) for k, v in hift.state_dict().items()}
    assert got == reference_shapes("hift.pt")
    assert len(got) == 328
    assert sum(math.prod(s) for s in got.values()) == 20_779_887


def test_from_state_dict_infers_dims(tiny_sd):
    with torch.device("meta"):
        full_sd = HiFT(HiFTArgs()).state_dict()
    assert HiFTArgs.from_state_dict(full_sd) == HiFTArgs()
    assert HiFTArgs.from_state_dict(tiny_sd) == tiny_hift_args()
    legacy = random_hift_state_dict(tiny_hift_args(), seed=2, weight_norm_form="legacy", prefix="generator.")
    assert HiFTArgs.from_state_dict(legacy) == tiny_hift_args()


def test_normalize_accepts_prefix_and_both_weight_norm_forms(tiny_sd):
    for form in ("parametrizations", "legacy"):
        for prefix in ("", "generator."):
            sd = random_hift_state_dict(tiny_hift_args(), seed=2, weight_norm_form=form, prefix=prefix)
            assert (form == "legacy") == any(k.endswith(".weight_g") for k in sd)
            norm = normalize_hift_state_dict(sd)
            assert norm.keys() == tiny_sd.keys()
            assert all(torch.equal(norm[k], tiny_sd[k]) for k in norm)


def test_weight_norm_forms_and_prefix_give_identical_outputs(tiny_hift):
    mel = random_mel(6)
    ref = tiny_hift.inference(mel)
    for form, prefix in (("legacy", ""), ("parametrizations", "generator."), ("legacy", "generator.")):
        sd = random_hift_state_dict(tiny_hift_args(), seed=2, weight_norm_form=form, prefix=prefix)
        assert torch.equal(load_hift(sd, max_seconds=MAX_SECONDS).inference(mel), ref)


def test_load_folds_weight_norm_once(tiny_sd, tiny_hift):
    assert not any(parametrize.is_parametrized(m) for m in tiny_hift.modules())
    g = tiny_sd["conv_pre.parametrizations.weight.original0"]
    v = tiny_sd["conv_pre.parametrizations.weight.original1"]
    expected = g * v / v.norm(dim=(1, 2), keepdim=True)  # norm over all dims but 0, no epsilon
    assert torch.allclose(tiny_hift.conv_pre.weight, expected, rtol=1e-6, atol=0)
    # the f0 predictor is folded in float64, from the float32 checkpoint values
    g, v = (tiny_sd[f"f0_predictor.condnet.2.parametrizations.weight.original{i}"].double() for i in (0, 1))
    assert tiny_hift.f0_predictor.condnet[2].weight.dtype == torch.float64
    assert torch.allclose(tiny_hift.f0_predictor.condnet[2].weight, g * v / v.norm(dim=(1, 2), keepdim=True), rtol=1e-12)


def test_folded_model_matches_unfolded_parametrized_model(tiny_sd, tiny_hift):
    unfolded = HiFT(tiny_hift_args(), max_seconds=MAX_SECONDS)
    unfolded.load_state_dict(tiny_sd, strict=True)
    unfolded.eval()
    assert parametrize.is_parametrized(unfolded.conv_pre)
    mel = random_mel(5, seed=1)
    assert torch.equal(unfolded.inference(mel), tiny_hift.inference(mel))


def test_load_is_strict(tiny_sd):
    bad = dict(tiny_sd)
    del bad["conv_post.bias"]
    with pytest.raises(RuntimeError, match="Missing key"):
        load_hift(bad)


def test_source_downs_are_not_weight_normed():
    hift = HiFT(tiny_hift_args())
    for down in hift.source_downs:
        assert not parametrize.is_parametrized(down)
    keys = hift.state_dict().keys()
    assert "source_downs.0.weight" in keys and "conv_pre.parametrizations.weight.original0" in keys
    assert [d.kernel_size[0] for d in hift.source_downs] == [30, 6, 1]
    assert [d.stride[0] for d in hift.source_downs] == [15, 3, 1]


# ----------------------------------------------------------------------------- quirks


def test_f0_predictor_runs_in_float64(tiny_hift):
    seen = {}
    handle = tiny_hift.f0_predictor.classifier.register_forward_pre_hook(
        lambda m, args: seen.__setitem__("dtype", args[0].dtype)
    )
    try:
        tiny_hift.inference(random_mel(4))
    finally:
        handle.remove()
    assert seen["dtype"] == torch.float64


def test_f0_predictor_and_conv_pre_lookahead(tiny_hift):
    mel = random_mel(20, seed=3)
    t = 8

    def f0_moved(offset):
        m2 = mel.clone()
        m2[0, :, t + offset] += 1.0
        with torch.no_grad():
            return not torch.equal(tiny_hift.f0_predictor(m2.double())[0, t], tiny_hift.f0_predictor(mel.double())[0, t])

    assert f0_moved(3) and not f0_moved(4)  # condnet.0: right pad 3
    assert f0_moved(-8) and not f0_moved(-9)  # 4 x left pad 2

    def pre_moved(offset):
        m2 = mel.clone()
        m2[0, :, t + offset] += 1.0
        with torch.no_grad():
            return not torch.equal(tiny_hift.conv_pre(m2)[0, :, t], tiny_hift.conv_pre(mel)[0, :, t])

    assert pre_moved(4) and not pre_moved(5) and not pre_moved(-1)  # conv_pre: right pad 4


def test_480_samples_per_mel_frame(tiny_hift):
    for T in (1, 3, 10):
        wav = tiny_hift.inference(random_mel(T, seed=T))
        assert wav.shape == (1, 480 * T) and wav.dtype == torch.float32


def test_output_is_clamped_to_099(tiny_sd):
    hift = load_hift(tiny_sd, max_seconds=MAX_SECONDS)
    with torch.no_grad():
        hift.conv_post.bias[:9] += 8.0  # huge magnitudes
    wav = hift.inference(random_mel(4))
    limit = torch.tensor(0.99, dtype=torch.float32)
    assert wav.abs().max() == limit
    assert (wav.abs() == limit).sum() > 10


def _constant_spectrum_hift(tiny_sd, log_mag: float, phase_pre: torch.Tensor) -> HiFT:
    """conv_post outputs the constant log-magnitude and phase (pre-sin) given, everywhere."""
    args = tiny_hift_args()
    args.audio_limit = 1e9  # no clamp, to see the magnitude
    hift = HiFT(args, max_seconds=MAX_SECONDS)
    hift.load_state_dict(tiny_sd)
    hift.f0_predictor.double()
    with torch.no_grad():
        parametrize.remove_parametrizations(hift.conv_post, "weight", leave_parametrized=True)
        hift.conv_post.weight.zero_()
        hift.conv_post.bias.copy_(torch.cat([torch.full((9,), log_mag), phase_pre]))
    return hift.eval()


def test_magnitude_is_clipped_at_100_after_exp(tiny_sd):
    phase = torch.linspace(-1.0, 1.0, 9)
    mel = random_mel(3)
    wav = {lm: _constant_spectrum_hift(tiny_sd, lm, phase).inference(mel) for lm in (4.0, 5.0, 10.0)}
    assert torch.equal(wav[5.0], wav[10.0])  # exp(5) = 148 and exp(10) both clip to 100
    assert not torch.allclose(wav[4.0], wav[5.0])  # exp(4) = 54.6 is below the clip
    assert wav[5.0].abs().max() > 1.0


def test_phase_channels_go_through_sin(tiny_sd):
    p = torch.linspace(-1.2, 1.2, 9)
    mel = random_mel(3)
    a = _constant_spectrum_hift(tiny_sd, 1.0, p).inference(mel)
    b = _constant_spectrum_hift(tiny_sd, 1.0, math.pi - p).inference(mel)  # same sin(), different angle
    c = _constant_spectrum_hift(tiny_sd, 1.0, p + 0.5).inference(mel)
    assert torch.allclose(a, b, atol=1e-5)
    assert not torch.allclose(a, c, atol=1e-3)


def test_final_leaky_relu_slope_001_and_mean_of_three_resblocks(tiny_hift):
    outs, seen = {}, {}
    hooks = [
        tiny_hift.resblocks[j].register_forward_hook(lambda m, a, out, j=j: outs.__setitem__(j, out.clone()))
        for j in (6, 7, 8)
    ]
    hooks.append(tiny_hift.conv_post.register_forward_pre_hook(lambda m, args: seen.__setitem__("in", args[0].clone())))
    try:
        tiny_hift.inference(random_mel(4, seed=5))
    finally:
        for h in hooks:
            h.remove()
    xs = outs[6].clone()
    xs += outs[7]
    xs += outs[8]
    pre = xs / 3
    assert (pre < 0).any()
    assert torch.equal(seen["in"], F.leaky_relu(pre, 0.01))
    assert not torch.allclose(seen["in"], F.leaky_relu(pre, 0.1))


def test_reflection_pad_only_after_the_last_upsample(tiny_hift):
    cap = {}

    def keep(name):
        return lambda m, a, out: cap.__setitem__(name, out.clone())

    hooks = [tiny_hift.ups[i].register_forward_hook(keep(f"up{i}")) for i in range(3)]
    hooks += [tiny_hift.source_resblocks[i].register_forward_hook(keep(f"src{i}")) for i in range(3)]
    hooks += [
        tiny_hift.resblocks[3 * i].register_forward_pre_hook(lambda m, a, i=i: cap.__setitem__(f"in{i}", a[0].clone()))
        for i in range(3)
    ]
    T = 3
    try:
        tiny_hift.inference(random_mel(T, seed=6))
    finally:
        for h in hooks:
            h.remove()
    assert [cap[f"up{i}"].shape[2] for i in range(3)] == [8 * T, 40 * T, 120 * T]
    assert torch.equal(cap["in0"], cap["up0"] + cap["src0"])
    assert torch.equal(cap["in1"], cap["up1"] + cap["src1"])
    assert torch.equal(cap["in2"], F.pad(cap["up2"], (1, 0), mode="reflect") + cap["src2"])
    assert cap["in2"].shape[2] == 120 * T + 1


def test_source_stft_uses_periodic_hann16(tiny_hift):
    # scipy.signal.get_window("hann", 16, fftbins=True), written out: general_cosine over M + 1 points
    fac = np.linspace(-np.pi, np.pi, 17)[:-1]
    scipy_hann = np.zeros(16)
    scipy_hann += 0.5 * np.cos(0 * fac)
    scipy_hann += 0.5 * np.cos(fac)
    assert torch.equal(tiny_hift.stft_window, torch.from_numpy(scipy_hann.astype(np.float32)))
    seen = {}
    handle = tiny_hift.source_downs[2].register_forward_pre_hook(lambda m, a: seen.__setitem__("stft", a[0].clone()))
    try:
        tiny_hift.inference(random_mel(2))
    finally:
        handle.remove()
    assert seen["stft"].shape == (1, 18, 120 * 2 + 1)


def _source_inputs(f0_value: float, T: int = 4):
    return torch.full((1, T), f0_value)


def test_source_phase_is_a_per_frame_staircase(tiny_hift):
    src, T, f0 = tiny_hift.m_source, 4, 130.0
    seen = {}
    handle = src.l_linear.register_forward_pre_hook(lambda m, a: seen.__setitem__("x", a[0].clone()))
    try:
        with torch.inference_mode():
            s = src(_source_inputs(f0, T), noise.rand_ini(), torch.zeros(1, 480 * T, 9))
    finally:
        handle.remove()
    assert s.shape == (1, 1, 480 * T)
    x = seen["x"][0]  # [480 T, 9]: 0.1 * sin(phase) (voiced, zero noise)
    frames = x.reshape(T, 480, 9)
    assert torch.all(frames == frames[:, :1, :])  # constant within each frame: a staircase
    # the phase at frame k is 2 pi * 480 * (k + 1) * ((h f0 / 24000) mod 1)
    h = torch.arange(1, 10, dtype=torch.float64)
    k = torch.arange(1, T + 1, dtype=torch.float64)[:, None]
    expected = 0.1 * torch.sin(2 * math.pi * 480 * k * ((h * f0 / 24000) % 1))
    assert torch.allclose(frames[:, 0, :].double(), expected, atol=1e-3)


def test_source_noise_is_the_uniform_buffer_and_threshold_is_10hz(tiny_hift):
    T = 3
    buf = noise.sine_waves(MAX_SECONDS)
    assert buf.min() >= 0 and buf.max() < 1  # uniform [0, 1), not zero-mean

    def excitation(f0_value):
        seen = {}
        handle = tiny_hift.m_source.l_linear.register_forward_pre_hook(lambda m, a: seen.__setitem__("x", a[0].clone()))
        try:
            with torch.inference_mode():
                tiny_hift.m_source(_source_inputs(f0_value, T), noise.rand_ini(), buf)
        finally:
            handle.remove()
        return seen["x"]

    unvoiced = excitation(10.0)  # f0 > 10 is voiced; exactly 10 is not
    assert torch.equal(unvoiced, torch.ones(1, 480 * T, 1) * 0.1 / 3 * buf[:, : 480 * T])
    voiced = excitation(10.01)
    assert not torch.allclose(voiced, unvoiced)
    # voiced: 0.1 sin(phase) (constant per frame) + 0.003 x the same buffer
    sines = (voiced - 0.003 * buf[:, : 480 * T]).reshape(T, 480, 9)
    assert torch.allclose(sines, sines[:, :1, :].expand(T, 480, 9), atol=1e-6)
    assert sines.abs().max() <= 0.1 + 1e-6


def test_hift_uses_the_shared_noise_buffer(tiny_sd):
    hift = load_hift(tiny_sd, max_seconds=MAX_SECONDS)
    with torch.no_grad():  # f0 = |0| everywhere: all unvoiced, the source is pure buffer noise
        hift.f0_predictor.classifier.weight.zero_()
        hift.f0_predictor.classifier.bias.zero_()
    seen = {}
    hift.m_source.l_linear.register_forward_pre_hook(lambda m, a: seen.__setitem__("x", a[0].clone()))
    T = 2
    hift.inference(random_mel(T))
    assert torch.equal(seen["x"], (torch.zeros(1, 480 * T, 1) + 1) * 0.1 / 3 * noise.sine_waves(MAX_SECONDS)[:, : 480 * T])


def test_too_long_input_raises(tiny_hift):
    tiny_hift.inference(random_mel(int(MAX_SECONDS * 50)))  # exactly the cap is fine
    with pytest.raises(ValueError, match="fixed source noise"):
        tiny_hift.inference(random_mel(int(MAX_SECONDS * 50) + 1))


def test_deterministic_and_leaves_global_rng_alone(tiny_hift):
    mel = random_mel(7, seed=9)
    state = torch.get_rng_state()
    a = tiny_hift.inference(mel)
    b = tiny_hift.inference(mel)
    assert torch.equal(torch.get_rng_state(), state)
    assert a.numpy().tobytes() == b.numpy().tobytes()


# ----------------------------------------------------------------------------- noise buffers


def test_hift_noise_buffers_match_upstream_reference_values():
    assert torch.allclose(noise.rand_ini(), torch.tensor([SPEC_RAND_INI]), atol=1e-7)
    assert torch.allclose(noise.sine_waves(MAX_SECONDS)[0, 0], torch.tensor(SPEC_SINE_WAVES_0), atol=1e-7)
    assert torch.allclose(noise.uv(1)[0, :5, 0], torch.tensor(SPEC_UV_HEAD), atol=1e-7)
    assert noise.sine_waves(1).shape == (1, 24000, 9) and noise.uv(1).shape == (1, 24000, 1)


def test_noise_buffers_follow_the_global_rng_recipe_without_touching_it(monkeypatch):
    monkeypatch.setattr(noise, "_sine_waves", None)  # force rebuilds
    monkeypatch.setattr(noise, "_rand_ini", None)
    state = torch.get_rng_state()
    short = noise.sine_waves(0.5)
    ini = noise.rand_ini()
    assert torch.equal(torch.get_rng_state(), state)
    with torch.random.fork_rng():  # spec 6.2, on the global generator
        torch.manual_seed(0)
        torch.randn([1, 80, 15000])
        torch.nn.Embedding(6561, 80)
        torch.nn.Linear(192, 80)
        torch.nn.Conv1d(80, 512, 4)
        for _ in range(4):
            torch.nn.Conv1d(512, 512, 3)
        torch.nn.Linear(512, 1)
        ref_ini = torch.rand(1, 9)
        ref_ini[:, 0] = 0
        ref_sine = torch.rand(1, 12000, 9)
    assert torch.equal(ini, ref_ini)
    assert torch.equal(short, ref_sine)
    longer = noise.sine_waves(1.0)  # a longer cap keeps the same leading values
    assert torch.equal(longer[:, :12000], short)
    with pytest.raises(ValueError):
        noise.sine_waves(301)


def test_waveform_bytes_do_not_depend_on_the_thread_count(tiny_hift):
    """HiFT runs on the worker's thread budget; the ops whose reductions split across threads run
    on one (hift.one_thread), so 1 and 2 threads give identical bytes at any length."""
    n = torch.get_num_threads()
    try:
        for T in (7, 37, 100):
            mel = random_mel(T, seed=T)
            out = {}
            for threads in (1, 2):
                torch.set_num_threads(threads)
                out[threads] = tiny_hift.inference(mel)
            assert out[1].numpy().tobytes() == out[2].numpy().tobytes(), f"T={T}"
            assert torch.get_num_threads() == 2  # the pinned ops gave the budget back
    finally:
        torch.set_num_threads(n)
