"""Upstream's own entry points, as a user calls them, against our prompt layouts and generation.

upstream_tiny_modes.json was written by `bench/upstream_qwen3.py --modes TINY TINY_BASE
--modes-fixture ...` in the qwen-tts 0.1.1 environment: `Qwen3TTSModel.from_pretrained` on the
tests' tiny CustomVoice and Base folders (seed 0), then `generate_custom_voice` and
`create_voice_clone_prompt` + `generate_voice_clone` under torch.manual_seed(3), once with no
`non_streaming_mode` (upstream's default) and once with each explicit value. Hooks recorded what
upstream's generate handed its Talker (prefill inputs_embeds, trailing text hidden states, the
tts_pad embedding, as float32 bytes) and the codes it returned, on one torch thread. No upstream
code runs here.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from epub2audio.voices.qwen3tts.clone import ClonePrompt
from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
from epub2audio.voices.qwen3tts.generate import (UPSTREAM_STREAMING, build_clone_prompt, build_prompt, generate,
                                                 generate_clone)
from epub2audio.voices.qwen3tts.talker import Talker
from epub2audio.voices.qwen3tts.text import load_text_tokenizer

FIXTURE = json.loads((Path(__file__).parent / "upstream_tiny_modes.json").read_text(encoding="utf-8"))
OURS = {"non_streaming": {"streaming": False}, "streaming": {"streaming": True}}


@pytest.fixture(autouse=True)
def _threads():
    """The fixture's thread count (1): a matmul's sums round with it, and over 40 seeded frames a
    near tie then flips a draw (frame 32 of ryan/english, streaming, at 1 thread against 2)."""
    before = torch.get_num_threads()
    torch.set_num_threads(FIXTURE["threads"])
    yield
    torch.set_num_threads(before)


def _f32(entry) -> torch.Tensor:
    raw = np.frombuffer(base64.b64decode(entry["f32le_base64"]), dtype="<f4").reshape(entry["shape"])
    return torch.from_numpy(raw.copy())


def _stages(ck):
    return Talker.from_state_dict(ck.talker_args, ck.state_dict), CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)


def _same(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.shape == theirs.shape
    # measured 0.0 (the same ops in the same order); the slack is for another BLAS's rounding
    assert float((ours.detach().double() - theirs.double()).abs().max()) <= 1e-6


def test_upstreams_defaults_are_what_we_default_to():
    """CustomVoice's default call is its non-streaming one, a clone's its streaming one, bit for bit."""
    assert all(c["default_is"] == ["non_streaming"] for c in FIXTURE["custom"].values())
    assert all(c["default_is"] == ["streaming"] for c in FIXTURE["base"].values())
    assert UPSTREAM_STREAMING == {"custom_voice": False, "base": True}


@pytest.fixture(scope="module")
def custom(tiny_dir, tiny_checkpoint):
    return load_text_tokenizer(tiny_dir, tiny_checkpoint.text_ids), *_stages(tiny_checkpoint)


@pytest.mark.parametrize("key", sorted(FIXTURE["custom"]))
def test_custom_voice_prompt_and_codes_equal_upstreams_in_both_layouts_and_by_default(tiny_checkpoint, custom, key):
    ck, (tok, talker, cp) = tiny_checkpoint, custom
    case = FIXTURE["custom"][key]
    ids = tok.encode(case["text"])
    for mode, kw in OURS.items():
        up = case["modes"][mode]
        assert up["non_streaming_mode"] is (mode == "non_streaming") and up["ids"] == ids
        prompt, trailing, pad = build_prompt(talker, ids, ck.text_ids, speaker=case["speaker"], language=case["language"], **kw)
        _same(prompt[0], _f32(up["prefill"]))
        _same(trailing[0], _f32(up["trailing"]))
        _same(pad[0, 0], _f32(up["pad"]))
        res = generate(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(FIXTURE["seed"]),
                       speaker=case["speaker"], language=case["language"], max_frames=case["cap"], **kw)  # fmt: skip
        assert res.frames == up["codes"] and len(res.frames) == case["cap"] - 1, mode
    # the two layouts are different readings: a test that mixed them up would fail here
    n, s = case["modes"]["non_streaming"], case["modes"]["streaming"]
    # (the text's n = len(ids) - 8 tokens: streaming puts 1 in the prompt and n - 1 + eos behind it;
    # non-streaming puts n + eos + [pad + bos] in it)
    assert n["prefill"]["shape"][0] == s["prefill"]["shape"][0] + len(ids) - 7 and s["trailing"]["shape"][0] == len(ids) - 8
    assert n["codes"][0] != s["codes"][0]
    ours = generate(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(FIXTURE["seed"]),
                    speaker=case["speaker"], language=case["language"], max_frames=case["cap"])  # fmt: skip
    assert ours.frames == case["default_codes"] == n["codes"]


@pytest.fixture(scope="module")
def base(tiny_base_dir):
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint

    ck = load_checkpoint(tiny_base_dir)
    return ck, load_text_tokenizer(tiny_base_dir, ck.text_ids), *_stages(ck)


@pytest.mark.parametrize("key", sorted(FIXTURE["base"]))
def test_clone_prompt_and_codes_equal_upstreams_in_both_layouts_and_by_default(base, key):
    """Upstream's own voice-clone prompt (its x-vector and reference codes, recorded) laid out by
    build_clone_prompt: x-vector only, ICL with text longer than the reference's codes, and shorter."""
    ck, tok, talker, cp = base
    case = FIXTURE["base"][key]
    ids = tok.encode(case["text"])
    icl = case["icl"]
    ref_ids = case["modes"]["streaming"]["ref_ids"]
    assert (ref_ids is not None) is icl
    prompt = ClonePrompt(speaker_embedding=_f32(case["speaker_embedding"]).numpy(),
                         ref_codes=np.asarray(case["ref_codes"]) if icl else None, ref_text="reference" if icl else None,
                         ref_text_ids=np.asarray(ref_ids) if icl else None, model_id="test")  # fmt: skip
    for mode, kw in OURS.items():
        up = case["modes"][mode]
        assert up["ids"] == ids and up["ref_ids"] == ref_ids
        built = build_clone_prompt(talker, cp, ids, ck.text_ids, speaker_embedding=prompt.speaker_embedding,
                                   ref_text_ids=prompt.ref_text_ids, ref_codes=prompt.ref_codes,
                                   language=case["language"], **kw)  # fmt: skip
        for ours, name in zip((built[0][0], built[1][0], built[2][0, 0]), ("prefill", "trailing", "pad")):
            _same(ours, _f32(up[name]))
        res = generate_clone(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(FIXTURE["seed"]),
                             prompt, language=case["language"], max_frames=case["cap"], **kw)  # fmt: skip
        assert res.frames == up["codes"], mode
    assert case["modes"]["non_streaming"]["codes"] != case["modes"]["streaming"]["codes"]
    assert case["modes"]["non_streaming"]["trailing"]["shape"][0] == 1  # everything is in the prompt
    ours = generate_clone(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(FIXTURE["seed"]),
                          prompt, language=case["language"], max_frames=case["cap"])  # fmt: skip
    assert ours.frames == case["default_codes"] == case["modes"]["streaming"]["codes"]
