"""CPU speed options of CosyVoice3: the ONNX Runtime LLM, the faster flows, reference trimming.

Tiny random weights (seconds). What is asserted:
  * every fp32 backend equals the torch fp32 reference within 1e-4 (LLM log-probs at prefill and
    at every decode step; flow mel);
  * quantised options stay within the deviation bounds below (measured on these tiny weights, with
    margin; the full-size deviations are what bench/cosyvoice3.py prints);
  * what a model reports as its backend/precision is read from what runs (session providers,
    graph operator types, module classes), not from the request;
  * the ONNX cache is built once, atomically, and reused;
  * trim_reference cuts at the quietest point before the limit.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from epub2audio.voices.cosyvoice3 import flow_fast, llm_onnx, onnx_cache
from epub2audio.voices.cosyvoice3.flow import load_flow
from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM, LLMArgs
from epub2audio.voices.cosyvoice3.trim import find_cut, trim_reference

from .random_weights import random_flow_state_dict, random_llm_state_dict, tiny_flow_args, tiny_qwen2_config

FP32_TOL = 1e-4
# max |log p - log p_fp32| over prefill + 8 decode steps, tiny model (hidden 32), measured:
# onnx fp32 5.7e-6, int8 0.22, int4 1.69 (a 32-wide hidden state is ONE int4 block: worst case).
# Bounds ~2.5x the measurement. The int8 bound catches kernel saturation: int8 (s8) weights on an
# AVX2 CPU without VNNI gave 3.2 (u8 x s8 pair sums overflow int16); the u8u8 recipe gives 0.22
# there and 7-bit s8 weights 0.34.
LLM_BOUND = {"int8": 0.6, "int4": 4.0}
# max |mel - mel_fp32| / max |mel_fp32|, tiny flow, measured: onnx fp32 2.6e-7, torch int8 2.9e-3,
# onnx int8 (u8u8) 1.5e-3 on AVX2 (s8 weights: 2.1e-3 with VNNI, 1.01e-2 saturating on AVX2 without
# VNNI; 7-bit s8 2.3e-3). Bounds ~3.5-7x.
FLOW_REL_BOUND = {"int8": 0.01, "onnx-int8": 0.01}

TEXT = list(range(5, 25))
PROMPT = list(range(100, 130))
FEED = [7, 900, 3, 6000, 44, 6560, 0, 1234]


@pytest.fixture(scope="module")
def tiny_lm():
    cfg = tiny_qwen2_config()
    sd = random_llm_state_dict(LLMArgs.from_config(cfg), 0)
    return cfg, sd, CosyVoice3LM.from_checkpoint(cfg, sd)


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-llm")


def _run(lm, feed=FEED):
    f = lm.start_decoding(TEXT, PROMPT)
    return [f(None)] + [f(t) for t in feed]


def _max_dev(a, b):
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


# ------------------------------------------------------------------------------------- ONNX LLM


def test_onnx_fp32_llm_equals_torch_at_prefill_and_every_step(tiny_lm, onnx_dir):
    _, _, lm = tiny_lm
    ref = _run(lm)
    onnx = llm_onnx.from_lm_uncached(lm, "fp32", onnx_dir, threads=1)
    out = _run(onnx)
    assert len(out) == len(ref)
    for step, (a, b) in enumerate(zip(out, ref)):
        assert a.dtype == torch.float32 and a.shape == (6761,)
        assert float((a - b).abs().max()) <= FP32_TOL, f"step {step}"
    # the decode loop and sampler are shared: same log-probs -> same tokens
    from epub2audio.voices.cosyvoice3.generate import generate_speech_tokens

    toks = [generate_speech_tokens(m, TEXT[:5], TEXT[5:], PROMPT, torch.Generator().manual_seed(3), max_tokens=30) for m in (lm, onnx)]
    assert toks[0] == toks[1]


def test_onnx_prefill_in_pieces_matches_one_block(tiny_lm, onnx_dir):
    """The graph handles L > 1 after a cached prefix (causal mask offset by P)."""
    _, _, lm = tiny_lm
    onnx = llm_onnx.from_lm_uncached(lm, "fp32", onnx_dir, threads=1)
    x = onnx.embed_prompt(TEXT, PROMPT)
    a = lm.args
    empty = np.zeros((1, a.num_key_value_heads, 0, a.head_dim), np.float32)
    ins, outs = llm_onnx.io_names(a.num_hidden_layers)
    whole = onnx.session.run(outs, {ins[0]: x, **dict(zip(ins[1:], [empty] * len(ins[1:])))})
    first = onnx.session.run(outs, {ins[0]: x[:, :20], **dict(zip(ins[1:], [empty] * len(ins[1:])))})
    second = onnx.session.run(outs, {ins[0]: x[:, 20:], **dict(zip(ins[1:], first[1:]))})
    assert np.abs(whole[0] - second[0]).max() <= FP32_TOL
    assert second[1].shape == whole[1].shape


@pytest.mark.parametrize("precision", ["int8", "int4"])
def test_onnx_quantised_llm_within_bound_and_records_what_runs(tiny_lm, onnx_dir, precision):
    import onnx as onnx_pkg

    _, _, lm = tiny_lm
    ref = _run(lm)
    q = llm_onnx.from_lm_uncached(lm, precision, onnx_dir, threads=1)
    dev = _max_dev(_run(q), ref)
    assert 0 < dev <= LLM_BOUND[precision]
    assert q.backend == "onnx" and q.precision == precision
    assert q.providers == ["CPUExecutionProvider"]
    ops = [n.op_type for n in onnx_pkg.load(str(q.model_path), load_external_data=False).graph.node]
    want = "MatMulNBits" if precision == "int4" else "MatMulInteger"
    assert want in ops
    if precision == "int8":  # the u8u8 recipe: uint8 weights, whose integer sums never saturate
        g = onnx_pkg.load(str(q.model_path), load_external_data=False).graph
        inits = {t.name: t.data_type for t in g.initializer}
        weights = [inits[n.input[1]] for n in g.node if n.op_type == "MatMulInteger"]
        assert weights and set(weights) == {onnx_pkg.TensorProto.UINT8}
    # the speech head stays fp32: it is the only MatMul with a constant weight left
    head = [n for n in onnx_pkg.load(str(q.model_path), load_external_data=False).graph.node if llm_onnx.HEAD_NODE_MARK in n.name]
    assert head and all(n.op_type in ("MatMul", "LogSoftmax") for n in head)


def test_onnx_session_uses_the_thread_budget(tiny_lm, onnx_dir):
    _, _, lm = tiny_lm
    for n in (1, 2):
        assert llm_onnx.from_lm_uncached(lm, "fp32", onnx_dir, threads=n).threads == n
    torch_threads = torch.get_num_threads()
    assert llm_onnx.from_lm_uncached(lm, "fp32", onnx_dir).threads == torch_threads


def test_onnx_precision_is_read_from_the_graph_not_the_request(tiny_lm, tmp_path):
    cfg, sd, lm = tiny_lm
    path, built = llm_onnx.ensure_exported(lm, "m1", "int4", tmp_path)
    assert built and llm_onnx.graph_precision(path / llm_onnx.MODEL_FILE) == "int4"
    # a cache dir whose graph is not what its meta says is refused at load time
    fp32, _ = llm_onnx.ensure_exported(lm, "m1", "fp32", tmp_path)
    meta = json.loads((fp32 / llm_onnx.META_FILE).read_text())
    meta["precision"], meta["recipe"] = "int8", onnx_cache.INT8_RECIPE
    bad = llm_onnx.cache_path("m1", "int8", tmp_path)
    bad.mkdir()
    for f in (llm_onnx.MODEL_FILE, llm_onnx.DATA_FILE):
        (bad / f).write_bytes((fp32 / f).read_bytes())
    (bad / llm_onnx.META_FILE).write_text(json.dumps(meta))
    with pytest.raises(RuntimeError, match="runs at fp32"):
        llm_onnx.load_onnx_llm(cfg, sd, "m1", "int8", tmp_path, threads=1)


def test_onnx_cache_is_created_once_and_reused(tiny_lm, tmp_path, monkeypatch):
    cfg, sd, lm = tiny_lm
    released = []
    a = llm_onnx.load_onnx_llm(cfg, dict(sd), "model-x", "int8", tmp_path, threads=1, release=lambda: released.append(1))
    assert released == [1]
    final = llm_onnx.cache_path("model-x", "int8", tmp_path)
    assert final.name == "model-x-int8" and final.parent == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-x-int8"]  # no temp dirs, no fp32 left
    assert sorted(p.name for p in final.iterdir()) == sorted([llm_onnx.DATA_FILE, llm_onnx.META_FILE, llm_onnx.MODEL_FILE])
    stamp = (final / llm_onnx.MODEL_FILE).stat().st_mtime_ns

    def boom(*a, **k):
        raise AssertionError("re-exported although the cache is valid")

    monkeypatch.setattr(llm_onnx, "export_fp32", boom)
    monkeypatch.setattr(llm_onnx, "quantize_int8", boom)
    monkeypatch.setattr(CosyVoice3LM, "from_checkpoint", boom)
    b = llm_onnx.load_onnx_llm(cfg, dict(sd), "model-x", "int8", tmp_path, threads=1)
    assert (final / llm_onnx.MODEL_FILE).stat().st_mtime_ns == stamp
    assert _max_dev(_run(a), _run(b)) == 0.0
    # an entry quantised with another int8 recipe is rebuilt
    monkeypatch.undo()
    meta = json.loads((final / llm_onnx.META_FILE).read_text())
    assert meta["recipe"] == onnx_cache.INT8_RECIPE == "u8u8"
    (final / llm_onnx.META_FILE).write_text(json.dumps({**meta, "recipe": "u8s8"}))
    assert not llm_onnx.cache_is_valid(final, "model-x", "int8")
    _, built = llm_onnx.ensure_exported(lm, "model-x", "int8", tmp_path)
    assert built and llm_onnx.cache_is_valid(final, "model-x", "int8")
    # a stale meta (other version) is rebuilt
    (final / llm_onnx.META_FILE).write_text(json.dumps({"format": llm_onnx.CACHE_FORMAT, "version": "0"}))
    _, built = llm_onnx.ensure_exported(lm, "model-x", "int8", tmp_path)
    assert built and llm_onnx.cache_is_valid(final, "model-x", "int8")


def test_onnx_default_cache_root_is_under_the_engine_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path))
    assert llm_onnx.cache_path("abc", "int4") == tmp_path / "onnx" / "abc-int4"
    with pytest.raises(ValueError):
        llm_onnx.cache_path("abc", "bf16")


# ------------------------------------------------------------------------------------- flow


def flow_inputs(n_prompt=6, n_gen=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    return dict(
        token=torch.randint(0, 6561, (1, n_gen), generator=g),
        prompt_token=torch.randint(0, 6561, (1, n_prompt), generator=g),
        prompt_feat=torch.randn(1, 2 * n_prompt, 80, generator=g),
        embedding=torch.randn(1, 192, generator=g),
    )


def _tiny_flow():
    return load_flow(random_flow_state_dict(tiny_flow_args(), 0))


@pytest.fixture(scope="module")
def flow_ref():
    return _tiny_flow().inference(**flow_inputs())


def test_faithful_flow_is_bit_identical_at_1_and_2_threads(flow_ref):
    flow = _tiny_flow()
    n = torch.get_num_threads()
    try:
        outs = []
        for t in (1, 2):
            torch.set_num_threads(t)
            outs.append(flow.inference(**flow_inputs()))
    finally:
        torch.set_num_threads(n)
    assert all(o.numpy().tobytes() == flow_ref.numpy().tobytes() for o in outs)
    assert flow_fast.flow_precision(flow) == ("torch", "fp32")


def test_onnx_fp32_flow_equals_torch(flow_ref, tmp_path):
    flow = flow_fast.apply_flow_precision(_tiny_flow(), "onnx-fp32", "tiny", tmp_path, threads=1)
    assert isinstance(flow.decoder.estimator, flow_fast.OnnxDiT)
    assert flow.decoder.estimator.session.get_providers() == ["CPUExecutionProvider"]
    assert flow_fast.flow_precision(flow) == ("onnx", "fp32")
    mel = flow.inference(**flow_inputs())
    assert mel.shape == flow_ref.shape
    assert float((mel - flow_ref).abs().max()) <= FP32_TOL


@pytest.mark.parametrize("precision", ["int8", "onnx-int8"])
def test_quantised_flows_within_bound_and_record_what_runs(flow_ref, tmp_path, precision):
    flow = flow_fast.apply_flow_precision(_tiny_flow(), precision, "tiny", tmp_path, threads=1)
    backend = "onnx" if precision.startswith("onnx") else "torch"
    assert flow_fast.flow_precision(flow) == (backend, "int8")
    if backend == "torch":
        import torch.ao.nn.quantized.dynamic as nnqd

        blocks = flow.decoder.estimator.transformer_blocks
        for b in blocks:  # AdaLN, q, k, v, out, ff in, ff out: all dynamic int8, no float Linear left
            assert sum(isinstance(m, nnqd.Linear) for m in b.modules()) == 7
            assert not any(type(m) is torch.nn.Linear for m in b.modules())
        assert isinstance(flow.decoder.estimator.proj_out, torch.nn.Linear)  # output layer stays fp32
    mel = flow.inference(**flow_inputs())
    rel = float((mel - flow_ref).abs().max()) / float(flow_ref.abs().max())
    assert 0 < rel <= FLOW_REL_BOUND[precision]


def test_onnx_dit_cache_is_created_once_and_reused(tmp_path, monkeypatch):
    flow = _tiny_flow()
    path, built = flow_fast.ensure_dit_exported(flow, "m", "int8", tmp_path)
    assert built and path == tmp_path / "m-flow-int8"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m-flow-int8"]  # the fp32 scratch export is gone
    monkeypatch.setattr(flow_fast, "export_dit", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-exported")))
    monkeypatch.setattr(flow_fast, "quantize_dit_int8", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-quantised")))
    again = flow_fast.apply_flow_precision(_tiny_flow(), "onnx-int8", "m", tmp_path, threads=1)
    assert again.decoder.estimator.model_path == path / "dit.onnx"
    assert again.decoder.estimator.session.get_session_options().intra_op_num_threads == 1


def test_flow_precision_menu():
    with pytest.raises(ValueError, match="flow precision"):
        flow_fast.apply_flow_precision(_tiny_flow(), "int4")
    with pytest.raises(ValueError, match="model_id"):
        flow_fast.apply_flow_precision(_tiny_flow(), "onnx-fp32")
    assert flow_fast.flow_precision(flow_fast.apply_flow_precision(_tiny_flow(), "fp32")) == ("torch", "fp32")


# ------------------------------------------------------------------------------------- trim


def _speechy(sr, seconds, quiet_at, quiet_len=0.08, level=1e-4, seed=0):
    rng = np.random.default_rng(seed)
    n = int(sr * seconds)
    t = np.arange(n) / sr
    wav = (0.3 * np.sin(2 * math.pi * 180 * t) * (0.6 + 0.4 * np.sin(2 * math.pi * 3 * t)) + 0.02 * rng.standard_normal(n)).astype(np.float32)
    for q in quiet_at:
        a = int(q * sr)
        wav[a : a + int(quiet_len * sr)] = level * rng.standard_normal(int(quiet_len * sr))
    return wav


def test_trim_cuts_in_the_quietest_window_before_the_limit():
    sr = 16000
    wav = _speechy(sr, 12.0, quiet_at=[2.0, 6.5, 9.3], level=1e-4)
    wav[int(6.5 * sr) : int(6.58 * sr)] *= 0.01  # 6.5 s is the quietest pause before 8 s
    out = trim_reference(wav, sr, 8.0)
    cut = len(out)
    assert 6.5 * sr <= cut <= 6.58 * sr
    assert np.array_equal(out, wav[:cut]) and out.dtype == wav.dtype
    # the pause at 9.3 s is past the limit and is never chosen; nothing past 8 s is kept
    assert cut <= 8.0 * sr


def test_trim_keeps_short_recordings_and_handles_torch_and_channels():
    sr = 24000
    wav = _speechy(sr, 5.0, quiet_at=[2.0])
    assert trim_reference(wav, sr, 5.0) is wav or np.array_equal(trim_reference(wav, sr, 5.0), wav)
    two = np.stack([wav, wav])
    t = torch.from_numpy(two)
    out = trim_reference(t, sr, 3.0)
    assert isinstance(out, torch.Tensor) and out.shape[0] == 2
    assert 2.0 * sr <= out.shape[1] <= 2.08 * sr
    with pytest.raises(ValueError):
        trim_reference(wav, sr, 0)


def test_trim_ignores_a_quiet_lead_in():
    sr = 16000
    wav = _speechy(sr, 10.0, quiet_at=[0.0, 4.5], quiet_len=0.3)
    wav[: int(0.3 * sr)] = 0.0  # digital silence at the start: quieter than any pause
    cut = find_cut(wav, sr, 6.0)
    assert 4.5 * sr <= cut <= 4.8 * sr


# ------------------------------------------------------------------------------------- the voice


@pytest.fixture(scope="module")
def profile_dir(tiny_model_dir, tmp_path_factory):
    from epub2audio.voices.cosyvoice3 import profile as pr

    from . import fixtures as fx

    d = tmp_path_factory.mktemp("profile")
    wav = fx.write_sine_wav(d / "anna.wav", seconds=1.2, sample_rate=24000)
    return pr.save_profile(pr.make_profile(tiny_model_dir, wav, "Hello there."), d / "anna")


VOICE_TEXT = "Once upon a time there were three little pigs."


def test_voice_onnx_options_record_what_runs(tiny_model_dir, profile_dir, tmp_path, monkeypatch):
    from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path))
    ref = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="torch")
    assert (ref.info.backend, ref.info.precision) == ("torch", "fp32")  # the faithful default is untouched
    v = CosyVoice3Voice.load(
        tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="onnx", llm_precision="int4",
        flow_precision="onnx-fp32", threads=1,
    )  # fmt: skip
    assert (v.info.backend, v.info.precision) == ("onnx+torch", "llm=int4,flow=fp32,hift=fp32")
    assert isinstance(v.llm, llm_onnx.OnnxSpeechLM) and v.llm.providers == ["CPUExecutionProvider"] and v.llm.threads == 1
    assert isinstance(v.flow.decoder.estimator, flow_fast.OnnxDiT)
    assert "onnxruntime" in v.info.versions and v.info.model_id != ref.info.model_id
    names = sorted(p.name for p in (tmp_path / "onnx").iterdir())
    assert len(names) == 2 and names[0].endswith("-flow-fp32") and names[1].endswith("-int4")
    pcm = v.synthesize(VOICE_TEXT, seed=3)
    assert pcm == v.synthesize(VOICE_TEXT, seed=3) and len(pcm) > 0
    # onnx fp32 LLM + onnx fp32 flow: same tokens as torch for a seed, waveform within fp32 noise
    w = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="onnx", flow_precision="onnx-fp32", threads=1)
    assert (w.info.backend, w.info.precision) == ("onnx+torch", "fp32")
    tokens = ref.speech_tokens(VOICE_TEXT, seed=11)
    assert w.speech_tokens(VOICE_TEXT, seed=11) == tokens
    assert float((w.render(tokens) - ref.render(tokens)).abs().max()) <= 1e-3


def test_voice_int8_flow_records_int8(tiny_model_dir, profile_dir):
    from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

    v = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="torch", flow_precision="int8")
    assert (v.info.backend, v.info.precision) == ("torch", "llm=fp32,flow=int8,hift=fp32")


# ------------------------------------------------------------------------------------- threads


def test_thread_rule_never_oversubscribes():
    from epub2audio.voices.cosyvoice3.threads import intra_op_threads

    assert intra_op_threads(1, cores=2) == 2
    assert intra_op_threads(2, cores=2) == 1
    assert intra_op_threads(3, cores=2) == 1  # never 0
    assert intra_op_threads(1, cores=2, concurrent_stages=2) == 1  # pipelined worker: LLM || render
    assert intra_op_threads(2, cores=8, concurrent_stages=2) == 2
    for workers in range(1, 9):
        for cores in range(1, 17):
            t = intra_op_threads(workers, cores=cores)
            assert t >= 1 and (workers * t <= cores or t == 1)
    with pytest.raises(ValueError):
        intra_op_threads(0)
