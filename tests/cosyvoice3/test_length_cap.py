"""The length cap on the tiny random-weight model: a segment is reported capped exactly when the
decode loop stopped at its cap (len(tokens) == max_len), i.e. when its speech would have gone on;
"upstream" keeps upstream's bound and cut audio (issue 14 item 5)."""

from __future__ import annotations

import pytest
import torch

from epub2audio.voices.base import LengthCapReached
from epub2audio.voices.cosyvoice3 import profile as pr
from epub2audio.voices.cosyvoice3.generate import LENGTH_CAPS, filter_silent_tokens, generate_speech_tokens
from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

from . import fixtures as fx

TEXTS = ["Hi.", "Yes, I do.", "Once upon a time there were three little pigs."]


@pytest.fixture(scope="module")
def profile_dir(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("profile")
    wav = fx.write_sine_wav(d / "anna.wav", seconds=1.2, sample_rate=24000)
    return pr.save_profile(pr.make_profile(tiny_model_dir, wav, "Hello there."), d / "anna")


def uncapped(voice: CosyVoice3Voice, text: str, seed: int, limit: int) -> list[int]:
    """The same decode (same sampler, same draws) with the cap moved out of the way, up to `limit`."""
    p = voice.profile
    with torch.inference_mode():
        return generate_speech_tokens(voice.llm, voice.tokenizer.encode(text), p.prompt_text_ids.tolist(),
                                      p.speech_tokens.tolist(), torch.Generator().manual_seed(seed),
                                      max_token_text_ratio=1e6, max_tokens=limit)


@pytest.mark.slow
def test_capped_exactly_when_the_loop_stops_at_max_len(tiny_model_dir, profile_dir):
    outcomes = set()
    for budget in (None, 12):  # the ratio cap (with its 2 s floor), then a token budget below it
        voice = CosyVoice3Voice.load(tiny_model_dir, profile_dir, llm_backend="torch", length_cap="tight",
                                     max_tokens_per_segment=budget)
        for text in TEXTS:
            n_text = len(voice.tokenizer.encode(text))
            for seed in range(4):
                tokens, max_len = voice.decode(text, seed)
                assert max_len == min(max(12 * n_text, 50), budget or 10**9)
                free = uncapped(voice, text, seed, max_len + 1)
                assert tokens == free[:max_len]  # the cap only ends the loop: same draws up to it
                capped = len(tokens) == max_len
                assert capped == (len(free) > max_len)  # capped <=> the speech would have gone on
                outcomes.add(capped)
                if capped:
                    with pytest.raises(LengthCapReached, match=f"length cap of {max_len} speech tokens"):
                        voice.speech_tokens(text, seed)
                else:
                    assert voice.speech_tokens(text, seed) == filter_silent_tokens(tokens)
    assert outcomes == {True, False}  # both cases were seen


def test_upstream_cap_is_upstreams_bound_and_cuts(tiny_model_dir, profile_dir):
    voice = CosyVoice3Voice.load(tiny_model_dir, profile_dir, llm_backend="torch", max_tokens_per_segment=None)
    assert voice.length_cap == LENGTH_CAPS["upstream"]  # the port's default: upstream exactly
    text = TEXTS[0]
    n_text = len(voice.tokenizer.encode(text))
    p = voice.profile
    for seed in range(3):
        tokens, max_len = voice.decode(text, seed)
        assert max_len == int(20 * n_text)
        with torch.inference_mode():  # generate.py's upstream defaults, which the reference tests hold
            assert tokens == generate_speech_tokens(voice.llm, voice.tokenizer.encode(text), p.prompt_text_ids.tolist(),
                                                    p.speech_tokens.tolist(), torch.Generator().manual_seed(seed))
        assert voice.speech_tokens(text, seed) == filter_silent_tokens(tokens)  # cut at the cap, never raised
    with pytest.raises(ValueError, match="length cap must be one of upstream, tight"):
        CosyVoice3Voice.load(tiny_model_dir, profile_dir, length_cap="loose")


def test_the_length_cap_is_part_of_the_model_id(tiny_model_dir, profile_dir):
    """Audio stored under one cap is never reused under the other: "upstream" cuts where "tight"
    re-splits, and "tight" lets a short text run to its 2 s floor past upstream's bound."""
    ids = {cap: CosyVoice3Voice.load(tiny_model_dir, profile_dir, llm_backend="torch", length_cap=cap).info.model_id
           for cap in LENGTH_CAPS}
    assert ids["tight"] == ids["upstream"] + "+cap-tight"
