"""Opt-in batched LLM decoding (batched.py) on tiny random weights: the mask is exact, positions are
per row, every row has its own sampler and generator and finishes on its own; and it is not what
the voice uses."""

from __future__ import annotations

import torch

from epub2audio.voices.cosyvoice3.batched import BatchedSession, BatchRequest, generate_speech_tokens_batched
from epub2audio.voices.cosyvoice3.generate import decode_speech_tokens, generate_speech_tokens
from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM, LLMArgs

from .random_weights import random_llm_state_dict, tiny_qwen2_config

# rows of different lengths: the pads are 0, 5 and 9 columns (with the shared prompt below)
TEXTS = [list(range(20, 32)), list(range(40, 47)), [60, 61, 62]]
PROMPT_TEXT = [3, 4, 5]
PROMPT_SPEECH = [100, 200, 300, 400]
STEPS = 6


def tiny_lm(seed=0) -> CosyVoice3LM:
    config = tiny_qwen2_config()
    return CosyVoice3LM.from_checkpoint(config, random_llm_state_dict(LLMArgs.from_config(config), seed))


def prompts():
    return [([*PROMPT_TEXT, *t], PROMPT_SPEECH) for t in TEXTS]


def forced_tokens(step):
    return [(7 * step + 13 * b) % 6561 for b in range(len(TEXTS))]


def run(session, perturb_cache=None):
    """prefill + STEPS teacher-forced steps; logp [B, V] of each."""
    out = [session.prefill()]
    for step in range(STEPS):
        if perturb_cache is not None:
            perturb_cache(session, step)
        out.append(session.step(forced_tokens(step)))
    return out


def test_mask_blocks_every_pad_column_in_prefill_and_every_step():
    lm = tiny_lm()
    s = BatchedSession(lm, prompts(), keep_masks=True)
    run(s)
    pads = s.pads.tolist()
    width = max(len(p[0]) for p in prompts()) + len(PROMPT_SPEECH) + 2
    assert pads == [width - (len(t) + len(PROMPT_TEXT) + len(PROMPT_SPEECH) + 2) for t in TEXTS] == [0, 5, 9]
    assert len(s.masks) == 1 + STEPS
    prefill = s.masks[0]
    assert prefill.shape == (3, 1, width, width) and prefill.dtype == torch.bool
    for b, pad in enumerate(pads):
        m = prefill[b, 0]
        for q in range(width):
            if q < pad:  # a pad query sees itself only (no fully masked row, so no NaN)
                assert m[q].nonzero().flatten().tolist() == [q]
            else:  # a real query: no pad column; causal over the real ones
                assert not m[q, :pad].any()
                assert m[q, pad : q + 1].all() and not m[q, q + 1 :].any()
    for step, mask in enumerate(s.masks[1:]):
        assert mask.shape == (3, 1, 1, width + step + 1)
        for b, pad in enumerate(pads):
            assert not mask[b, 0, 0, :pad].any() and mask[b, 0, 0, pad:].all()


def test_pad_columns_cannot_change_any_row_bit_for_bit():
    """Pad inputs set to huge random vectors, and the cached keys/values of the pad columns
    overwritten before every step: the rows' log-probabilities do not change at all."""
    lm = tiny_lm()
    clean = run(BatchedSession(lm, prompts()))
    noise = 1e3 * torch.randn(lm.args.hidden_size, generator=torch.Generator().manual_seed(1))

    @torch.inference_mode()
    def scribble(session, step):
        g = torch.Generator().manual_seed(100 + step)
        for c in session.cache:
            for b, pad in enumerate(session.pads.tolist()):
                c.keys[b, :, :pad] = 1e3 * torch.randn(c.keys[b, :, :pad].shape, generator=g)
                c.values[b, :, :pad] = 1e3 * torch.randn(c.values[b, :, :pad].shape, generator=g)

    dirty = run(BatchedSession(lm, prompts(), pad_embedding=noise), perturb_cache=scribble)
    for a, b in zip(clean, dirty):
        assert torch.isfinite(a).all() and torch.equal(a, b)


def test_each_row_matches_its_solo_run_up_to_rounding():
    """Per-row positions and masks give each row what it computes alone, up to float reduction
    order (bit-identity is not promised: that is why batching is off by default)."""
    lm = tiny_lm()
    batched = run(BatchedSession(lm, prompts()))
    worst = 0.0
    for b, (text, speech) in enumerate(prompts()):
        f = lm.start_decoding(text, speech)
        solo = [f(None)] + [f(forced_tokens(step)[b]) for step in range(STEPS)]
        for x, y in zip(solo, batched):
            worst = max(worst, (x - y[b]).abs().max().item())
    assert worst < 1e-4


def requests():
    return [BatchRequest(t, PROMPT_TEXT, PROMPT_SPEECH, seed=10 + b) for b, t in enumerate(TEXTS)]


def test_rows_sample_with_their_own_generator_and_bounds_and_finish_alone():
    """Replaying the logits a row saw through the solo decode loop, with a generator seeded from its
    own seed, gives exactly that row's tokens: sampler state, generator, min/max length and stop
    are per row. The rows' caps differ (max_token_text_ratio 1: 12, 7 and 3 tokens)."""
    lm = tiny_lm()
    seen: dict[int, list[torch.Tensor]] = {}
    out = generate_speech_tokens_batched(lm, requests(), max_token_text_ratio=1,
                                         on_logp=lambda b, logp: seen.setdefault(b, []).append(logp.clone()))
    for b, r in enumerate(requests()):
        replay = iter(seen[b])
        again = decode_speech_tokens(lambda _token: next(replay), len(r.text_ids), torch.Generator().manual_seed(r.seed),
                                     max_token_text_ratio=1)
        assert again == out[b]
        assert next(replay, None) is None  # it sampled no more than the solo loop would
        assert len(out[b]) <= len(r.text_ids)
    assert [len(o) for o in out] != [len(out[0])] * 3  # finished at different steps


def test_batched_tokens_track_solo_tokens():
    """On the tiny model the reduction-order differences are far from any sampling boundary, so
    every row draws its solo tokens; the full-size divergence rate is measured in bench/batched.py."""
    lm = tiny_lm()
    out = generate_speech_tokens_batched(lm, requests(), max_tokens=30)
    for b, r in enumerate(requests()):
        solo = generate_speech_tokens(lm, list(r.text_ids), PROMPT_TEXT, PROMPT_SPEECH,
                                      torch.Generator().manual_seed(r.seed), max_tokens=30)
        assert out[b] == solo


def test_empty_and_single_requests():
    lm = tiny_lm()
    reqs = [BatchRequest([], PROMPT_TEXT, PROMPT_SPEECH, 1), requests()[0]]
    out = generate_speech_tokens_batched(lm, reqs, max_tokens=5)
    assert out[0] == [] and len(out[1]) <= 5
    assert generate_speech_tokens_batched(lm, [reqs[1]], max_tokens=5) == [out[1]]
    assert generate_speech_tokens_batched(lm, []) == []


def test_the_voice_does_not_batch():
    import epub2audio.voices.cosyvoice3.voice as voice

    source = open(voice.__file__).read()
    assert "batched" not in source  # opt-in only: nothing in the voice's path decodes in batches
