"""LLM backend choice, torch precisions, and what CosyVoice3Voice records as backend/precision."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.ao.nn.quantized.dynamic as nnqd
from torch import nn

from epub2audio.voices.cosyvoice3 import profile as pr
from epub2audio.voices.cosyvoice3.backends import (
    PlatformInfo,
    TorchSpeechLM,
    build_llm,
    build_torch_llm,
    check_precision,
    choose_llm_backend,
    describe_pipeline,
    torch_module_precision,
)
from epub2audio.voices.cosyvoice3.generate import generate_speech_tokens
from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM, LLMArgs

from . import fixtures as fx
from .random_weights import random_llm_state_dict, tiny_qwen2_config

TEXT, PROMPT_TEXT, PROMPT_SPEECH = [11, 12, 13, 14, 15, 16], [1, 2, 3, 4], [100, 200, 300, 400, 500]
FORCED = [None, 3, 4000, 4000, 17, 6000, 1, 2, 3]


@pytest.fixture(scope="module")
def tiny():
    cfg = tiny_qwen2_config()
    return cfg, random_llm_state_dict(LLMArgs.from_config(cfg), seed=0)


# --- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "system, machine, have_mlx, have_onnx, precision, expected",
    [
        ("Darwin", "arm64", True, True, "fp32", "mlx"),  # Apple Silicon
        ("Darwin", "arm64", False, False, "fp32", "torch"),  # ... without mlx or onnxruntime
        ("Darwin", "arm64", False, True, "fp32", "onnx"),  # ... without mlx
        ("Darwin", "x86_64", True, True, "fp32", "onnx"),  # Intel Mac (or Rosetta)
        ("Linux", "x86_64", True, True, "fp32", "onnx"),  # mlx-cpu installed: ONNX Runtime is 1.7x torch here
        ("Linux", "x86_64", True, True, "int4", "onnx"),
        ("Linux", "x86_64", True, True, "bf16", "torch"),  # ONNX Runtime has no bf16 LLM
        ("Linux", "x86_64", True, False, "fp32", "torch"),  # no onnxruntime installed
        ("Linux", "aarch64", True, True, "int8", "onnx"),
        ("Windows", "AMD64", False, False, "fp32", "torch"),
    ],
)
def test_auto_rule_on_faked_platforms(system, machine, have_mlx, have_onnx, precision, expected):
    chosen = choose_llm_backend("auto", PlatformInfo(system, machine), have_mlx=have_mlx, have_onnx=have_onnx,
                                precision=precision)
    assert chosen == expected


def test_explicit_requests():
    mac, linux = PlatformInfo("Darwin", "arm64"), PlatformInfo("Linux", "x86_64")
    assert choose_llm_backend("torch", mac, have_mlx=True) == "torch"
    assert choose_llm_backend("mlx", linux, have_mlx=True) == "mlx"
    with pytest.raises(ValueError, match="mlx-lm"):
        choose_llm_backend("mlx", mac, have_mlx=False)
    with pytest.raises(ValueError, match="auto, mlx, torch"):
        choose_llm_backend("cuda", linux)


def test_precision_menu():
    for ok in ("fp32", "bf16", "fp16", "int8"):
        check_precision("torch", ok)
    for ok in ("fp32", "fp16", "bf16", "int8", "int4"):
        check_precision("mlx", ok)
    for backend, bad in (("torch", "fp8"), ("torch", "int4"), ("mlx", "int3"), ("mlx", "q4")):
        with pytest.raises(ValueError, match="runs at"):
            check_precision(backend, bad)


def test_describe_pipeline_convention():
    assert describe_pipeline([("llm", "torch", "fp32"), ("flow", "torch", "fp32"), ("hift", "torch", "fp32")]) == (
        "torch", "fp32")  # fmt: skip
    assert describe_pipeline([("llm", "mlx", "fp32"), ("flow", "torch", "fp32"), ("hift", "torch", "fp32")]) == (
        "mlx+torch", "fp32")  # fmt: skip
    assert describe_pipeline([("llm", "torch", "int8"), ("flow", "torch", "fp32"), ("hift", "torch", "fp32")]) == (
        "torch", "llm=int8,flow=fp32,hift=fp32")  # fmt: skip
    assert describe_pipeline([("llm", "mlx", "int4"), ("flow", "torch", "int8"), ("hift", "torch", "fp32")]) == (
        "mlx+torch", "llm=int4,flow=int8,hift=fp32")  # fmt: skip


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*quantize_per_tensor:UserWarning")
def test_module_precision_reads_dtypes_and_quantised_layers():
    from epub2audio.voices.cosyvoice3.hift import HiFT

    with torch.device("meta"):
        hift = HiFT(fx.tiny_hift_args())
    hift.f0_predictor.to(torch.float64)  # as load_hift does: still the fp32 recipe
    assert torch_module_precision(hift) == "fp32"
    m = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))
    assert torch_module_precision(m) == "fp32"
    assert torch_module_precision(m.to(torch.bfloat16)) == "bf16"
    q = torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(8, 8)).float(), {nn.Linear}, dtype=torch.qint8)
    assert torch_module_precision(q) == "int8"


# --- torch precisions: recorded == what runs ----------------------------------------------------


def _block_linears(lm: TorchSpeechLM) -> list[nn.Module]:
    out = []
    for layer in lm.model.qwen2.layers:
        a, m = layer.self_attn, layer.mlp
        out += [a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj]
    return out


def _compare_to_fp32(lm, tiny, tol):
    cfg, sd = tiny
    ref = CosyVoice3LM.from_checkpoint(cfg, sd)
    text = [*PROMPT_TEXT, *TEXT]
    a, b = ref.start_decoding(text, PROMPT_SPEECH), lm.start_decoding(text, PROMPT_SPEECH)
    for tok in FORCED:
        want, got = a(tok), b(tok)
        assert got.dtype == torch.float32 and got.shape == (6761,) and torch.isfinite(got).all()
        tv = 0.5 * (want.exp() - got.exp()).abs().sum().item()  # total-variation distance
        assert tv < tol


def test_torch_fp32_adopts_the_checkpoint_tensors(tiny):
    cfg, sd = tiny
    lm = build_torch_llm(cfg, sd, "fp32")
    assert (lm.backend, lm.precision) == ("torch", "fp32")
    assert all(type(m) is nn.Linear and m.weight.dtype == torch.float32 for m in _block_linears(lm))
    assert lm.model.llm_decoder.weight.data_ptr() == sd["llm_decoder.weight"].data_ptr()


def test_torch_bf16_records_and_runs_bf16(tiny):
    cfg, sd = tiny
    lm = build_torch_llm(cfg, dict(sd), "bf16")
    assert (lm.backend, lm.precision) == ("torch", "bf16")
    assert {p.dtype for p in lm.model.parameters()} == {torch.bfloat16}
    assert sd["llm_decoder.weight"].dtype == torch.float32  # the caller's tensors are not changed
    _compare_to_fp32(lm, tiny, 0.1)


def test_torch_int8_records_and_runs_dynamic_int8(tiny):
    cfg, sd = tiny
    lm = build_torch_llm(cfg, dict(sd), "int8")
    assert (lm.backend, lm.precision) == ("torch", "int8")
    linears = _block_linears(lm)
    assert len(linears) == 7 * lm.args.num_hidden_layers
    for m in linears:
        assert isinstance(m, nnqd.Linear) and m.weight().dtype == torch.qint8
        assert m.weight().qscheme() == torch.per_channel_affine
    # the speech head, the embeddings and the norms stay fp32
    assert type(lm.model.llm_decoder) is nn.Linear and lm.model.llm_decoder.weight.dtype == torch.float32
    assert lm.model.speech_embedding.weight.dtype == torch.float32
    # nothing kept points into the checkpoint's tensors (with llm.pt memory-mapped, one such
    # tensor would keep the whole mapping, and every page the quantiser read, resident)
    theirs = {t.untyped_storage().data_ptr() for t in sd.values()}
    ours = [p for p in lm.model.parameters()] + [m.bias() for m in linears if m.bias() is not None]
    assert not any(t.untyped_storage().data_ptr() in theirs for t in ours)
    _compare_to_fp32(lm, tiny, 0.1)
    g = lambda: torch.Generator().manual_seed(4)  # noqa: E731
    t1 = generate_speech_tokens(lm, TEXT, PROMPT_TEXT, PROMPT_SPEECH, g(), max_tokens=40)
    assert t1 == generate_speech_tokens(lm, TEXT, PROMPT_TEXT, PROMPT_SPEECH, g(), max_tokens=40)


def test_partly_quantised_model_is_not_called_int8(tiny):
    cfg, sd = tiny
    lm = build_torch_llm(cfg, dict(sd), "int8")
    layer = lm.model.qwen2.layers[0]
    layer.mlp.up_proj = nn.Linear(layer.mlp.up_proj.in_features, layer.mlp.up_proj.out_features, bias=False)
    assert lm.precision == "mixed"


# --- build_llm on a checkpoint: release, recorded backend ----------------------------------------


def _ckpt(tiny):
    cfg, sd = tiny
    return SimpleNamespace(qwen_config=cfg, llm_state_dict=dict(sd), model_id="cosyvoice3-0123456789abcdef")


def test_build_llm_torch_releases_the_checkpoint_tensors(tiny):
    ck = _ckpt(tiny)
    lm = build_llm(ck, "torch", "int8")
    assert ck.llm_state_dict == {}
    assert isinstance(lm, TorchSpeechLM) and isinstance(lm.model, CosyVoice3LM) and lm.precision == "int8"
    with pytest.raises(ValueError, match="runs at"):
        build_llm(_ckpt(tiny), "torch", "int4")


def test_build_llm_mlx_releases_before_building(tiny, tmp_path, monkeypatch):
    pytest.importorskip("mlx_lm")
    from epub2audio.voices.cosyvoice3 import llm_mlx

    ck = _ckpt(tiny)
    seen = []
    real = llm_mlx.load_converted

    def check(path, args):
        seen.append(ck.llm_state_dict)  # what the checkpoint holds when the MLX model is built
        return real(path, args)

    monkeypatch.setattr(llm_mlx, "load_converted", check)
    lm = build_llm(ck, "mlx", "bf16", cache_root=tmp_path)
    assert seen == [{}] and ck.llm_state_dict == {}
    assert isinstance(lm, llm_mlx.MLXSpeechLM) and (lm.backend, lm.precision) == ("mlx", "bf16")
    assert lm.model.model.layers[0].mlp.up_proj.weight.dtype == llm_mlx.mx.bfloat16


# --- the voice ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def profile_dir(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("profile")
    wav = fx.write_sine_wav(d / "anna.wav", seconds=1.2, sample_rate=24000)
    return pr.save_profile(pr.make_profile(tiny_model_dir, wav, "Hello there."), d / "anna")


TEXT_A = "Once upon a time there were three little pigs."


def test_voice_records_torch_int8(tiny_model_dir, profile_dir):
    from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

    v = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="torch", llm_precision="int8")
    assert (v.info.backend, v.info.precision) == ("torch", "llm=int8,flow=fp32,hift=fp32")
    assert all(isinstance(m, nnqd.Linear) for m in _block_linears(v.llm))
    assert {p.dtype for p in v.flow.parameters()} == {torch.float32}
    assert v.synthesize(TEXT_A, seed=3) == v.synthesize(TEXT_A, seed=3)


def test_voice_default_on_this_platform(tiny_model_dir, profile_dir, monkeypatch, tmp_path):
    from epub2audio.voices.cosyvoice3 import backends
    from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path))  # the ONNX export is cached there
    monkeypatch.setattr(backends.PlatformInfo, "current", classmethod(lambda cls: PlatformInfo("Linux", "x86_64")))
    v = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40)
    assert (v.info.backend, v.info.precision) == ("onnx+torch", "fp32")
    assert v.llm.backend == "onnx" and list(tmp_path.glob("onnx/*"))
    faithful = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="torch")
    assert (faithful.info.backend, faithful.info.precision) == ("torch", "fp32")
    assert isinstance(faithful.llm, TorchSpeechLM) and faithful.llm.model.llm_decoder.weight.dtype == torch.float32


def test_voice_on_mlx_records_mlx_and_matches_torch(tiny_model_dir, profile_dir, tmp_path, monkeypatch):
    llm_mlx = pytest.importorskip("epub2audio.voices.cosyvoice3.llm_mlx")
    from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path))
    v = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="mlx")
    assert (v.info.backend, v.info.precision) == ("mlx+torch", "fp32")
    assert isinstance(v.llm, llm_mlx.MLXSpeechLM) and v.llm.model.llm_decoder.weight.dtype == llm_mlx.mx.float32
    assert {"mlx", "mlx-lm", "torch"} <= set(v.info.versions)
    assert list((tmp_path / "mlx").glob("*/llm-fp32-v*.safetensors"))
    ref = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="torch")
    tokens = v.speech_tokens(TEXT_A, seed=11)
    assert tokens == v.speech_tokens(TEXT_A, seed=11)
    assert tokens == ref.speech_tokens(TEXT_A, seed=11)  # same logits (1e-5), same sampler, same seed
    assert v.synthesize(TEXT_A, seed=11) == ref.synthesize(TEXT_A, seed=11)

    b = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="mlx", llm_precision="bf16")
    assert (b.info.backend, b.info.precision) == ("mlx+torch", "llm=bf16,flow=fp32,hift=fp32")
    assert b.llm.model.model.layers[0].self_attn.q_proj.weight.dtype == llm_mlx.mx.bfloat16
