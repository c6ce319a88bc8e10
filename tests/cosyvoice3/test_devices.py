"""Stage placement (devices.py), device-safety of the whole pipeline, and half-precision flow/HiFT.

No GPU is needed: with torch's default device set to `meta`, any tensor the pipeline creates
without naming its device lands on meta and the run fails, which is exactly the code that would
put a tensor on the CPU beside a CUDA or MPS model.
"""

from __future__ import annotations

import argparse

import pytest
import torch

from epub2audio.voices.cosyvoice3 import profile as pr
from epub2audio.voices.cosyvoice3.backends import PlatformInfo
from epub2audio.voices.cosyvoice3.devices import Accelerators, Placement, describe_devices, place_stages
from epub2audio.voices.cosyvoice3.flow import load_flow, set_flow_dtype
from epub2audio.voices.cosyvoice3.hift import load_hift, set_hift_dtype
from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

from . import fixtures as fx
from .random_weights import random_flow_state_dict, random_hift_state_dict, tiny_flow_args, tiny_hift_args

TEXT = "Once upon a time there were three little pigs."
LINUX = PlatformInfo("Linux", "x86_64")
MAC = PlatformInfo("Darwin", "arm64")
CUDA, MPS, NONE = Accelerators(cuda=True), Accelerators(mps=True), Accelerators()


@pytest.fixture(scope="module")
def profile_dir(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("profile")
    wav = fx.write_sine_wav(d / "anna.wav", seconds=1.2, sample_rate=24000)
    return pr.save_profile(pr.make_profile(tiny_model_dir, wav, "Hello there."), d / "anna")


# ------------------------------------------------------------------------------- placement


def place(device="auto", overrides=None, platform=LINUX, accel=NONE, **kw):
    kw.setdefault("llm_backend", "auto")
    return place_stages(device, overrides, platform=platform, accelerators=accel, **kw)


def test_auto_with_cuda_puts_every_stage_on_cuda_with_a_torch_llm():
    assert place(accel=CUDA) == Placement("torch", "cuda", "cuda", "cuda")
    assert place(accel=CUDA, llm_precision="bf16") == Placement("torch", "cuda", "cuda", "cuda")


def test_auto_on_apple_silicon_is_mlx_then_mps_flow_then_cpu_vocoder(monkeypatch):
    monkeypatch.setattr("epub2audio.voices.cosyvoice3.backends.mlx_available", lambda: True)
    assert place(platform=MAC, accel=MPS) == Placement("mlx", "cpu", "mps", "cpu")


def test_auto_without_accelerators_is_todays_cpu_path(monkeypatch):
    monkeypatch.setattr("epub2audio.voices.cosyvoice3.backends.onnx_available", lambda: True)
    assert place() == Placement("onnx", "cpu", "cpu", "cpu")
    assert place(llm_backend="torch") == Placement("torch", "cpu", "cpu", "cpu")


def test_cpu_only_variants_stay_on_the_cpu_under_auto_and_are_refused_on_an_accelerator():
    assert place(accel=CUDA, llm_backend="onnx", flow_precision="onnx-int8") == Placement("onnx", "cpu", "cpu", "cuda")
    assert place(accel=CUDA, llm_precision="int8", llm_backend="torch").llm == "cpu"
    with pytest.raises(ValueError, match="flow precision int8 runs on the CPU only"):
        place("cuda", accel=CUDA, flow_precision="int8")
    with pytest.raises(ValueError, match="onnx LLM backend does not run on cuda"):
        place("cuda", accel=CUDA, llm_backend="onnx")
    with pytest.raises(ValueError, match="not 'int8'"):
        place("cuda", accel=CUDA, llm_precision="int8")


def test_explicit_devices_and_per_stage_overrides():
    assert place("cpu", accel=CUDA, llm_backend="torch") == Placement("torch", "cpu", "cpu", "cpu")
    assert place("auto", {"hift": "cpu"}, accel=CUDA) == Placement("torch", "cuda", "cuda", "cpu")
    assert place("cpu", {"flow": "cuda"}, accel=CUDA, llm_backend="torch") == Placement("torch", "cpu", "cuda", "cpu")
    with pytest.raises(ValueError, match="no CUDA device"):
        place("cuda")
    with pytest.raises(ValueError, match="float64"):
        place("mps", platform=MAC, accel=MPS, llm_backend="torch")
    with pytest.raises(ValueError, match="must be one of auto, cpu, cuda, mps"):
        place("gpu")


def test_explicit_cpu_keeps_auto_off_mlx(monkeypatch):
    monkeypatch.setattr("epub2audio.voices.cosyvoice3.backends.mlx_available", lambda: True)
    monkeypatch.setattr("epub2audio.voices.cosyvoice3.backends.onnx_available", lambda: False)
    assert place("cpu", platform=MAC, accel=MPS) == Placement("torch", "cpu", "cpu", "cpu")


def test_devices_in_the_model_id_suffix():
    assert describe_devices({"llm": "cpu", "flow": "cpu", "hift": "cpu"}) == ""
    assert describe_devices({"llm": "cuda", "flow": "cuda", "hift": "cuda"}) == "@cuda"
    assert describe_devices({"llm": "metal", "flow": "mps", "hift": "cpu"}) == "@llm=metal,flow=mps,hift=cpu"


def test_cli_device_options_reach_the_voice():
    from epub2audio.cli import convert_parser
    from epub2audio.options import cosyvoice3_options

    def options(argv, config):
        return cosyvoice3_options(convert_parser().parse_args(["book.epub", *argv]), config)

    config = {"device": "cuda", "device_hift": "cpu", "hift_precision": "bf16"}
    got = options([], config)
    assert (got["device"], got["device_hift"], got["hift_precision"]) == ("cuda", "cpu", "bf16")
    assert "device_llm" not in got
    forced = options(["--device", "cpu"], config)  # the command line wins over every config key
    assert forced["device"] == "cpu" and not any(k.startswith("device_") for k in forced)
    assert options([], {})["device"] == "auto"
    with pytest.raises(SystemExit):
        convert_parser().parse_args(["book.epub", "--device", "gpu"])
    assert isinstance(convert_parser().parse_args(["b.epub", "--flow-precision", "bf16"]), argparse.Namespace)


def test_torch_llm_reads_back_its_device_and_half_precision():
    from epub2audio.voices.cosyvoice3.backends import build_torch_llm
    from epub2audio.voices.cosyvoice3.llm import LLMArgs

    from .random_weights import random_llm_state_dict, tiny_qwen2_config

    config = tiny_qwen2_config()
    sd = random_llm_state_dict(LLMArgs.from_config(config), seed=0)
    lm = build_torch_llm(config, dict(sd), "fp16")
    assert (lm.precision, lm.device) == ("fp16", "cpu")
    logp = lm.start_decoding([1, 2, 3], [5, 6])(None)
    assert logp.dtype == torch.float32 and logp.device.type == "cpu"  # the host sampler's input
    with pytest.raises(ValueError, match="int8 LLM .* runs on the CPU only"):
        build_torch_llm(config, dict(sd), "int8", "cuda")


# ------------------------------------------------------------------ no tensor without a device


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_whole_pipeline_names_every_device(tiny_model_dir, profile_dir, backend):
    """Load and synthesise with torch's default device set to meta: everything the pipeline
    makes must name its device (or derive it from its inputs), and the audio is unchanged."""
    reference = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend=backend)
    expected = reference.synthesize(TEXT, seed=4)
    torch.set_default_device("meta")
    try:
        voice = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend=backend,
                                     device="cpu")
        got = voice.synthesize(TEXT, seed=4)
        assert torch.empty(1).device.type == "meta"  # the trap was set all along
    finally:
        torch.set_default_device(None)
    assert torch.empty(1).device.type == "cpu"
    assert got == expected and voice.info.model_id == reference.info.model_id


# ------------------------------------------------------------------ half precision on the CPU


def _flow_inputs(n_prompt=12, n_gen=20):
    g = torch.Generator(device="cpu").manual_seed(3)
    return (torch.randint(0, 6561, (1, n_gen), generator=g), torch.randint(0, 6561, (1, n_prompt), generator=g),
            torch.randn(1, 2 * n_prompt, 80, generator=g), torch.randn(1, 192, generator=g))


# Measured on the tiny random model (test size, CPU): mel relative L2 error bf16 4.2e-3, fp16 5.1e-4;
# waveform SNR bf16 40 dB, fp16 58 dB. Bounds are those with margin (x3 on the error, -8 dB).
@pytest.mark.slow
@pytest.mark.parametrize(("dtype", "max_rel_error", "min_snr_db"), [
    (torch.bfloat16, 1.5e-2, 32.0),
    (torch.float16, 2e-3, 50.0),
])  # fmt: skip
def test_half_precision_flow_and_hift_stay_close_to_fp32(dtype, max_rel_error, min_snr_db):
    flow_sd = random_flow_state_dict(tiny_flow_args(), 1)
    inputs = _flow_inputs()
    mel = load_flow(flow_sd).inference(*inputs)
    half_flow = set_flow_dtype(load_flow(flow_sd), dtype)
    assert half_flow.decoder.estimator.transformer_blocks[0].attn.to_q.weight.dtype == dtype
    assert half_flow.decoder.estimator.rotary_embed.inv_freq.dtype == torch.float32
    half_mel = half_flow.inference(*inputs)
    assert half_mel.dtype == torch.float32 and half_mel.shape == mel.shape
    rel = ((half_mel - mel).norm() / mel.norm()).item()
    assert 0 < rel < max_rel_error  # > 0: it really ran at the lower precision

    hift_sd = random_hift_state_dict(tiny_hift_args(), 2)
    wave = load_hift(hift_sd, max_seconds=5).inference(mel)
    half_hift = set_hift_dtype(load_hift(hift_sd, max_seconds=5), dtype)
    assert half_hift.conv_pre.weight.dtype == dtype
    assert half_hift.f0_predictor.classifier.weight.dtype == torch.float64
    assert half_hift.stft_window.dtype == torch.float32
    half_wave = half_hift.inference(mel)
    assert half_wave.dtype == torch.float32 and half_wave.shape == wave.shape
    snr = 10 * torch.log10(wave.pow(2).sum() / (half_wave - wave).pow(2).sum()).item()
    assert min_snr_db < snr < float("inf")


@pytest.mark.slow
def test_voice_records_half_precision_stages(tiny_model_dir, profile_dir):
    voice = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=20, llm_backend="torch",
                                 flow_precision="bf16", hift_precision="fp16")
    assert voice.info.precision == "llm=fp32,flow=bf16,hift=fp16"
    assert voice.info.model_id.endswith("+torch:llm=fp32,flow=bf16,hift=fp16")
    with pytest.raises(ValueError, match="HiFT precision"):
        CosyVoice3Voice.load(tiny_model_dir, profile_dir, hift_precision="int8")
