"""The CosyVoice3 LLM (torch) and its decode loop, on tiny random weights."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from epub2audio.voices.cosyvoice3.generate import (
    SILENT_TOKENS,
    decode_speech_tokens,
    filter_silent_tokens,
    generate_speech_tokens,
)
from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM, LLMArgs

from .random_weights import random_llm_state_dict, tiny_qwen2_config

V = 6761
SOS, EOS, TASK = 6561, 6562, 6563

# llm.pt's keys and shapes for one layer (the real file has layers 0..23), taken from the spec's
# key listing (reference_state_dict_keys.txt, "## llm.pt", which shows a 2-layer stand-in).
LLM_PT_2LAYER = """
llm.model.model.embed_tokens.weight [151936, 896]
llm.model.model.layers.0.self_attn.q_proj.weight [896, 896]
llm.model.model.layers.0.self_attn.q_proj.bias [896]
llm.model.model.layers.0.self_attn.k_proj.weight [128, 896]
llm.model.model.layers.0.self_attn.k_proj.bias [128]
llm.model.model.layers.0.self_attn.v_proj.weight [128, 896]
llm.model.model.layers.0.self_attn.v_proj.bias [128]
llm.model.model.layers.0.self_attn.o_proj.weight [896, 896]
llm.model.model.layers.0.mlp.gate_proj.weight [4864, 896]
llm.model.model.layers.0.mlp.up_proj.weight [4864, 896]
llm.model.model.layers.0.mlp.down_proj.weight [896, 4864]
llm.model.model.layers.0.input_layernorm.weight [896]
llm.model.model.layers.0.post_attention_layernorm.weight [896]
llm.model.model.norm.weight [896]
llm.model.lm_head.weight [151936, 896]
llm_decoder.weight [6761, 896]
speech_embedding.weight [6761, 896]
"""

# CosyVoice-BlankEN/config.json (the values that matter; spec 1.3)
BLANKEN_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "max_position_embeddings": 32768,
    "model_type": "qwen2",
    "num_attention_heads": 14,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}


def _expand_layers(listing: str, n_layers: int) -> list[tuple[str, list[int]]]:
    out = []
    for line in listing.strip().splitlines():
        key, shape = line.split(None, 1)
        shape = [int(s) for s in shape.strip("[] ").split(",")]
        if ".layers.0." in key:
            out += [(key.replace(".layers.0.", f".layers.{i}."), shape) for i in range(n_layers)]
        else:
            out.append((key, shape))
    # group per layer as a state_dict does (layer 0's keys, then layer 1's ...)
    def order(item):
        key = item[0]
        if ".layers." in key:
            i = int(key.split(".layers.")[1].split(".")[0])
            return (1, i)
        return (0 if "embed_tokens" in key else 2, 0)

    return sorted(out, key=order)


@pytest.fixture(scope="module")
def tiny():
    cfg = tiny_qwen2_config()
    sd = random_llm_state_dict(LLMArgs.from_config(cfg), seed=0)
    return cfg, sd, CosyVoice3LM.from_checkpoint(cfg, sd)


# --- structure and loading ------------------------------------------------------------------


def test_full_size_keys_and_shapes_equal_llm_pt():
    args = LLMArgs.from_config(BLANKEN_CONFIG)
    assert args == LLMArgs()  # the defaults are the real model
    with torch.device("meta"):
        model = CosyVoice3LM(args)
    got = [(k, list(v.shape)) for k, v in model.state_dict().items()]
    assert got == _expand_layers(LLM_PT_2LAYER, 24)
    assert len(got) == 293
    assert all(v.dtype == torch.float32 for v in model.state_dict().values())


def test_embedded_listing_matches_spec_file():
    from .fixtures import reference_keys_text

    text = reference_keys_text().split("## llm.pt")[1].split("##")[0]
    rows = [line.split("\t") for line in text.strip().splitlines()]
    assert [(k, [int(n) for n in s.strip("[]").split(",")]) for k, s, _ in rows] == _expand_layers(LLM_PT_2LAYER, 2)
    assert all(dtype == "torch.float32" for _, _, dtype in rows)


def test_from_config_reads_both_config_layouts():
    v5 = {k: v for k, v in BLANKEN_CONFIG.items() if k != "rope_theta"}
    v5["rope_parameters"] = {"rope_type": "default", "rope_theta": 1000000.0}
    assert LLMArgs.from_config(v5) == LLMArgs()


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c, sd: sd.__setitem__("llm_decoder.weight", torch.zeros(V, 16)), "llm_decoder.weight"),
        (lambda c, sd: sd.__setitem__("llm.model.model.layers.1.self_attn.k_proj.bias", torch.zeros(3)),
         "llm.model.model.layers.1.self_attn.k_proj.bias"),
        (lambda c, sd: sd.pop("llm.model.model.norm.weight"), "llm.model.model.norm.weight"),
        (lambda c, sd: sd.__setitem__("llm.model.model.layers.2.mlp.up_proj.weight", torch.zeros(1)),
         "llm.model.model.layers.2.mlp.up_proj.weight"),
        (lambda c, sd: c.__setitem__("num_hidden_layers", 3), "llm.model.model.layers.2."),
        (lambda c, sd: c.__setitem__("num_key_value_heads", 4), "k_proj.weight"),
        (lambda c, sd: c.__setitem__("vocab_size", 1000), "embed_tokens.weight"),
        (lambda c, sd: c.__setitem__("intermediate_size", 65), "gate_proj.weight"),
        (lambda c, sd: sd.__setitem__("speech_embedding.weight", torch.zeros(6600, 32)), "speech_embedding.weight"),
        (lambda c, sd: c.__setitem__("hidden_act", "gelu"), "hidden_act"),
        (lambda c, sd: c.__setitem__("use_sliding_window", True), "sliding"),
        (lambda c, sd: c.__setitem__("rope_scaling", {"type": "linear", "factor": 2.0}), "rope"),
        (lambda c, sd: c.pop("rope_theta"), "rope_theta"),
        (lambda c, sd: c.pop("rms_norm_eps"), "rms_norm_eps"),
    ],
)
def test_from_config_mismatch_names_the_key(change, message):
    cfg = tiny_qwen2_config()
    sd = random_llm_state_dict(LLMArgs.from_config(cfg), seed=1)
    change(cfg, sd)
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        LLMArgs.from_config(cfg, sd)


def test_lm_head_is_not_a_second_copy(tiny):
    cfg, sd, model = tiny
    emb = model.qwen2.embed_tokens.weight
    assert emb.data_ptr() == sd["llm.model.model.embed_tokens.weight"].data_ptr()  # adopted, not copied
    assert model.state_dict()["llm.model.lm_head.weight"].data_ptr() == emb.data_ptr()
    n_params = sum(p.numel() for p in model.parameters())
    args = model.args
    assert n_params == sum(math.prod(s) for k, s in args.expected_shapes().items() if "lm_head" not in k)
    # an untied checkpoint's head is dropped, never written into the embedding
    sd2 = dict(sd)
    sd2["llm.model.lm_head.weight"] = torch.full_like(emb, 7.0)
    m2 = CosyVoice3LM.from_checkpoint(cfg, sd2)
    assert torch.equal(m2.qwen2.embed_tokens.weight, sd["llm.model.model.embed_tokens.weight"])
    # a plain strict load into an initialised model works too
    m3 = CosyVoice3LM(args)
    m3.load_state_dict(sd, strict=True)
    assert all(torch.equal(v, sd[k]) for k, v in m3.state_dict().items())
    bad = dict(sd)
    bad["llm.model.lm_head.weight"] = torch.zeros(3, 3)
    with pytest.raises(RuntimeError, match="lm_head"):
        m3.load_state_dict(bad, strict=True)


def test_precision_reports_what_runs(tiny):
    _, _, model = tiny
    assert model.precision == "fp32"
    assert CosyVoice3LM(dataclasses.replace(model.args, num_hidden_layers=1)).to(torch.bfloat16).precision == "bf16"


# --- numerics ---------------------------------------------------------------------------------


def _hf_qwen2(cfg: dict, sd: dict):
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen2Config(**cfg)
    config._attn_implementation = "eager"
    hf = transformers.Qwen2Model(config).float().eval()
    prefix = "llm.model.model."
    backbone = {k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}
    missing, unexpected = hf.load_state_dict(backbone, strict=False)
    assert not missing and not unexpected
    return hf, transformers


@pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")
def test_qwen2_matches_transformers(tiny):
    cfg, sd, model = tiny
    hf, transformers = _hf_qwen2(cfg, sd)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 37, model.args.hidden_size, generator=g)
    steps = torch.randn(6, 1, 1, model.args.hidden_size, generator=g)
    with torch.inference_mode():
        cache = transformers.DynamicCache(config=hf.config)
        ref = hf(inputs_embeds=x, past_key_values=cache, use_cache=True)
        ours_cache = model.qwen2.make_cache()
        ours = model.qwen2(x, ours_cache)
        torch.testing.assert_close(ours, ref.last_hidden_state, rtol=0, atol=1e-5)
        for s in steps:
            ref = hf(inputs_embeds=s, past_key_values=cache, use_cache=True)
            ours = model.qwen2(s, ours_cache)
            torch.testing.assert_close(ours, ref.last_hidden_state, rtol=0, atol=1e-5)
        # a block of several new positions after a cached prefix (the masked path)
        block = torch.randn(1, 4, model.args.hidden_size, generator=g)
        ref = hf(inputs_embeds=block, past_key_values=cache, use_cache=True)
        ours = model.qwen2(block, ours_cache)
        torch.testing.assert_close(ours, ref.last_hidden_state, rtol=0, atol=1e-5)
    assert ours_cache[0].offset == 37 + 6 + 4


def test_cached_decode_equals_full_recompute(tiny):
    _, _, model = tiny
    text, prompt_speech = [5, 77, 300, 151, 9], [10, 2000, 6560, 0]
    next_logp = model.start_decoding(text, prompt_speech)
    emb = model.embed_prompt(text, prompt_speech)
    fed = [None, 3, 4000, 4000, 17, 6000, 1, 2, 3, 6500, 42, 7, 7, 7]
    with torch.inference_mode():
        for i, tok in enumerate(fed):
            step = next_logp(tok)
            if tok is not None:
                emb = torch.cat([emb, model.speech_embedding.weight[tok].view(1, 1, -1)], dim=1)
            full = model(emb)[0, -1]
            assert step.dtype == torch.float32 and step.shape == (V,) and step.device.type == "cpu"
            torch.testing.assert_close(step, full, rtol=0, atol=1e-5, msg=f"step {i}")
        assert abs(step.exp().sum().item() - 1) < 1e-4


def test_cache_grows_past_its_step(tiny):
    _, _, model = tiny
    cache = model.qwen2.make_cache()
    for c in cache:
        c.step = 8
    x = torch.randn(1, 30, model.args.hidden_size, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        whole = model.qwen2(x)
        parts = [model.qwen2(x[:, :5], cache)] + [model.qwen2(x[:, i : i + 1], cache) for i in range(5, 30)]
    torch.testing.assert_close(torch.cat(parts, 1), whole, rtol=0, atol=1e-5)
    assert cache[0].keys.shape[2] == 32


def test_prompt_layout(tiny):
    _, _, model = tiny
    with torch.inference_mode():
        emb = model.embed_prompt([3, 4], [9])
    w, e = model.speech_embedding.weight, model.qwen2.embed_tokens.weight
    assert torch.equal(emb[0], torch.stack([w[SOS], e[3], e[4], w[TASK], w[9]]))
    assert model.embed_prompt([3], []).shape == (1, 3, model.args.hidden_size)
    with pytest.raises(ValueError, match="text id 512"):
        model.embed_prompt([512], [])
    with pytest.raises(ValueError, match="6561"):
        model.embed_prompt([1], [6561])


def test_session_order_is_enforced(tiny):
    _, _, model = tiny
    f = model.start_decoding([1, 2], [])
    with pytest.raises(RuntimeError):
        f(5)
    f(None)
    with pytest.raises(RuntimeError):
        f(None)


# --- generation on the tiny model ------------------------------------------------------------

TEXT, PROMPT_TEXT, PROMPT_SPEECH = [11, 12, 13, 14, 15, 16], [1, 2, 3, 4], [100, 200, 300, 400, 500]


def _gen(model, seed, **kw):
    return generate_speech_tokens(model, TEXT, PROMPT_TEXT, PROMPT_SPEECH, torch.Generator().manual_seed(seed), **kw)


def test_generation_is_seeded_and_leaves_global_rng_alone(tiny):
    _, _, model = tiny
    before = torch.random.get_rng_state()
    a, b, c = _gen(model, 1), _gen(model, 1), _gen(model, 2)
    assert torch.equal(before, torch.random.get_rng_state())
    assert a == b
    assert a != c
    for toks in (a, c):
        assert all(0 <= t < SOS for t in toks)
        assert len(toks) <= 20 * len(TEXT)


def test_fp32_logits_are_bit_reproducible(tiny):
    _, _, model = tiny
    runs = []
    for _ in range(2):
        f = model.start_decoding(PROMPT_TEXT + TEXT, PROMPT_SPEECH)
        runs.append(torch.stack([f(None), f(5), f(6000), f(5)]))
    assert model.precision == "fp32"
    assert torch.equal(runs[0], runs[1])


def test_max_tokens_bounds_the_real_model(tiny):
    _, _, model = tiny
    assert len(_gen(model, 1, max_tokens=3)) <= 3
    full = _gen(model, 1, max_tokens=None)
    assert _gen(model, 1, max_tokens=len(full)) == full  # the cap changes nothing below it


# --- the loop, with scripted distributions -----------------------------------------------------


class Script:
    """A fake session: step i returns a logp where only the listed ids are finite."""

    def __init__(self, steps):
        self.steps, self.fed = steps, []

    def __call__(self, token):
        self.fed.append(token)
        spec = self.steps[min(len(self.fed) - 1, len(self.steps) - 1)]
        if callable(spec):
            spec = spec(len(self.fed) - 1)
        x = torch.full((V,), -math.inf)
        for tok, score in spec.items():
            x[tok] = score
        return x.log_softmax(0)


def _only(tok):
    return {tok: 0.0}


@pytest.mark.parametrize("stop", range(SOS, V))
def test_any_special_id_stops_and_is_not_emitted(stop):
    script = Script([_only(100), _only(101), _only(stop)])
    out = decode_speech_tokens(script, 1, torch.Generator().manual_seed(0))  # min_len 2, max_len 20
    assert out == [100, 101]
    assert script.fed == [None, 100, 101]  # prefill, then each emitted token is fed once


def test_min_len_masks_only_6561():
    # 6561 dominates, 4242+step is the only alternative: masked for exactly min_len steps
    script = Script([lambda i: {SOS: 0.0, 4000 + i: -30.0}])
    out = decode_speech_tokens(script, 3, torch.Generator().manual_seed(0))  # min_len 6
    assert out == [4000 + i for i in range(6)]
    # eos (6562) is not masked, even in step 0
    script = Script([{EOS: 0.0, 50: -30.0}])
    assert decode_speech_tokens(script, 3, torch.Generator().manual_seed(0)) == []
    # neither are the other special ids
    script = Script([{6700: 0.0, 50: -30.0}])
    assert decode_speech_tokens(script, 3, torch.Generator().manual_seed(0)) == []
    # the ratio is a parameter
    script = Script([lambda i: {SOS: 0.0, 4000 + i: -30.0}])
    assert len(decode_speech_tokens(script, 3, torch.Generator().manual_seed(0), min_token_text_ratio=1.5)) == 4


def test_max_len_and_max_tokens_cap():
    never_stops = lambda i: {1000 + i % 11: 0.0}  # noqa: E731 - 11 ids cycle: no repeat inside a 10-window
    for n_text, kw, want in [
        (3, {}, 60),
        (3, {"max_tokens": 7}, 7),
        (3, {"max_tokens": 500}, 60),
        (3, {"max_tokens": 0}, 0),
        (0, {}, 0),
        (3, {"max_token_text_ratio": 2.5}, 7),
    ]:
        script = Script([never_stops])
        out = decode_speech_tokens(script, n_text, torch.Generator().manual_seed(0), **kw)
        assert out == [1000 + i % 11 for i in range(want)]
        assert len(script.fed) == want  # no forward pass beyond the last emitted token
    with pytest.raises(ValueError):
        decode_speech_tokens(Script([never_stops]), 3, torch.Generator(), max_tokens=-1)


def test_generate_counts_target_text_only():
    seen = {}

    class Fake:
        def start_decoding(self, text_ids, prompt_speech_tokens):
            seen["text"], seen["speech"] = list(text_ids), list(prompt_speech_tokens)
            return Script([lambda i: {1000 + i % 11: 0.0}])

    out = generate_speech_tokens(Fake(), [7, 8], [1, 2, 3, 4, 5], [9, 9], torch.Generator().manual_seed(0))
    assert seen == {"text": [1, 2, 3, 4, 5, 7, 8], "speech": [9, 9]}
    assert len(out) == 40  # int(2 * 20), the 5 prompt-text ids do not count


# --- silent-token post-filter -----------------------------------------------------------------


@pytest.mark.parametrize(
    "tokens, want",
    [
        ([], []),
        ([1] * 5, [1] * 5),
        ([1] * 6, [1] * 5),
        ([1] * 20, [1] * 5),
        ([1, 2, 28, 29, 55, 248, 494], [1, 2, 28, 29, 55]),  # different silent ids share one run
        ([7, 1, 1, 1, 1, 1, 1, 1, 8, 2, 2, 2, 2, 2, 2, 9], [7] + [1] * 5 + [8] + [2] * 5 + [9]),
        ([2322] * 3 + [5] + [2323] * 6, [2322] * 3 + [5] + [2323] * 5),
        ([3, 4, 30, 2240, 2243], [3, 4, 30, 2240, 2243]),  # neighbours of silent ids are not silent
    ],
)
def test_filter_silent_tokens(tokens, want):
    assert filter_silent_tokens(tokens) == want


def test_silent_token_set():
    assert SILENT_TOKENS == {1, 2, 28, 29, 55, 248, 494, 2241, 2242, 2322, 2323}
