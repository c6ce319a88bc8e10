"""Our port against upstream's numbers for the tests' tiny folder.

upstream_tiny.json was written by `bench/upstream_qwen3.py --dir TINY --write-fixture ...` run with
the qwen-tts 0.1.1 environment: upstream's own Talker, Code Predictor and 12 Hz decoder, loaded
strictly from the tiny folder (random_weights.write_tiny_model, seed 0), run in fp64 on inputs drawn
from torch.Generator seed 7 in the order below, plus upstream generate() codes (seed 3, CustomVoice ryan/english and eric/auto, cap 40) and seeded draws by transformers 4.57.3's own logits processors (see sampling_replay there); it holds every 64th logit column, every 128th
audio sample, and upstream's own fp32-vs-fp64 max |diff| per stage (the floor). No upstream code.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
from epub2audio.voices.qwen3tts.decoder import Decoder
from epub2audio.voices.qwen3tts.talker import Talker

FIXTURE = json.loads((Path(__file__).parent / "upstream_tiny.json").read_text(encoding="utf-8"))


def _inputs(hidden: int):
    g = torch.Generator().manual_seed(FIXTURE["inputs_seed"])
    x = torch.randn(1, 14, hidden, generator=g)
    hid, first = torch.randn(1, 1, hidden, generator=g), torch.randn(1, 1, hidden, generator=g)
    codes = torch.randint(0, 2048, (14,), generator=g).tolist()
    frames = torch.randint(0, 2048, (1, 16, 20), generator=g)
    return x, hid, first, codes, frames


def _maxdiff(ours: torch.Tensor, theirs) -> float:
    return float((ours.double() - torch.tensor(theirs, dtype=torch.float64)).abs().max())


def test_every_stage_matches_upstream_within_its_fp32_floor(tiny_checkpoint):
    ck = tiny_checkpoint
    x, hid, first, codes, frames = _inputs(ck.talker_args.hidden_size)
    talker = Talker.from_state_dict(ck.talker_args, ck.state_dict)
    cp = CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
    dec = Decoder.from_state_dict(ck.decoder_args, ck.decoder_state_dict)
    with torch.inference_mode():
        full = talker(x)[0]
        step = talker.start_decoding(x[:, :10])
        session = torch.stack([step(None)[0]] + [step(x[0, i])[0] for i in range(10, 14)])
        cp_logits = cp(hid[0, 0], first[0, 0], codes)
    wav = dec.decode(frames[0].T)
    assert wav.shape == (20 * 1920,)
    # the floor plus 1e-6 of fp32 ordering slack; a wrong layout misses by orders of magnitude
    assert _maxdiff(full[:, ::64], FIXTURE["talker_logits"]) <= 2 * FIXTURE["talker_floor"] + 1e-6
    assert _maxdiff(session[:, ::64], FIXTURE["talker_logits"][9:]) <= 2 * FIXTURE["talker_floor"] + 1e-6
    assert _maxdiff(cp_logits[:, ::64], FIXTURE["cp_logits"]) <= 2 * FIXTURE["cp_floor"] + 1e-6
    assert _maxdiff(wav[::128], FIXTURE["wav"]) <= 2 * FIXTURE["wav_floor"] + 1e-6


def test_seeded_draws_replay_transformers_processors_exactly():
    """The fixture's ids were drawn by transformers' own processors (repetition penalty, min new
    tokens, suppress, temperature, top-k, top-p) and multinomial under torch.manual_seed."""
    from epub2audio.voices.qwen3tts.sampling import talker_draw, warp_and_draw

    s = FIXTURE["sampling"]
    logits = 3 * torch.randn(60, 3072, generator=torch.Generator().manual_seed(s["logits_seed"]))
    for top_p in (1.0, 0.8):
        gen = torch.Generator().manual_seed(s["draw_seed"])
        ours: list[int] = []
        for row in logits:
            ours.append(talker_draw(row, ours, gen, eos_id=2150, repetition_penalty=1.05, do_sample=True,
                                    temperature=0.9, top_k=50, top_p=top_p))
        assert ours == s[f"talker_top_p_{top_p}"]
        gen = torch.Generator().manual_seed(6)
        sub = [warp_and_draw(r[:2048].clone(), gen, do_sample=True, temperature=0.9, top_k=50, top_p=1.0) for r in logits]
        assert sub == s[f"subtalker_top_p_{top_p}"]
    assert 2150 not in s["talker_top_p_1.0"][:2]  # eos is masked for the first two codes


def test_seeded_generation_replays_upstream_generate_codes_exactly(tiny_checkpoint):
    """Upstream's Qwen3TTSForConditionalGeneration.generate (CustomVoice prompt, non_streaming_mode=False,
    max_new_tokens 40, torch.manual_seed(3)) against ours with Generator seed 3, streaming layout:
    every frame's 16 codes equal. (Upstream's default layout: test_upstream_modes.py.)"""
    from epub2audio.voices.qwen3tts.generate import generate

    ck = tiny_checkpoint
    talker = Talker.from_state_dict(ck.talker_args, ck.state_dict)
    cp = CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
    for key, theirs in FIXTURE["generate"].items():
        speaker, language, cap = key.split("/")
        res = generate(talker, cp, FIXTURE["generate_ids"], ck.text_ids, ck.generation,
                       torch.Generator().manual_seed(FIXTURE["generate_seed"]), speaker=speaker, language=language,
                       max_frames=int(cap), streaming=True)  # fmt: skip
        assert len(theirs) == int(cap) - 1 and res.capped
        assert res.frames == theirs, key


def test_length_bound():
    from epub2audio.voices.qwen3tts.generate import frame_cap

    assert [frame_cap(n, 8192) for n in (1, 12, 13, 100)] == [75, 75, 78, 600]
    assert frame_cap(100, 500) == 500


def test_generation_defaults_are_upstreams():
    """A key generation_config.json lacks takes upstream's hard default (qwen-tts 0.1.1
    Qwen3TTSModel._merge_generate_kwargs); a key it has wins (the shipped file's 8192)."""
    from epub2audio.voices.qwen3tts.checkpoint import GenerationArgs

    hard = dict(do_sample=True, top_k=50, top_p=1.0, temperature=0.9, repetition_penalty=1.05, subtalker_dosample=True,
                subtalker_top_k=50, subtalker_top_p=1.0, subtalker_temperature=0.9, max_new_tokens=2048)
    assert GenerationArgs.from_config({}) == GenerationArgs(**hard)
    assert GenerationArgs.from_config({"max_new_tokens": 8192}).max_new_tokens == 8192
