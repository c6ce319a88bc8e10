"""Codec sampling as upstream does it (transformers 4.57 `generate` with qwen-tts's arguments).

One Talker draw, given the fp32 logits over the 3072 codec ids and the codebook-1 codes emitted so
far in this segment, applies in transformers' order:

1. repetition penalty (1.05) on every id already emitted: a score s becomes s / p if s > 0, else s * p;
2. while fewer than 2 codes were emitted, eos gets -inf (upstream's `min_new_tokens` 2);
3. the top 1024 ids (specials, speakers, languages) except eos get -inf (`suppress_tokens`);
4. divide by the temperature (0.9), keep the top_k (50) scores (ties with the k-th kept), then top_p
   only when it is below 1 (the smallest set of highest probabilities whose sum exceeds top_p);
5. one `multinomial` draw from the softmax over [1, vocab].

The Code Predictor's draws (subtalker_*) are steps 4-5 alone. Every draw uses the torch.Generator
passed in; upstream uses the global RNG, so seeding both the same replays the same codes.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

MIN_NEW_TOKENS = 2
SUPPRESSED_TOP = 1024


def warp_and_draw(scores: torch.Tensor, generator: torch.Generator, *, do_sample: bool, temperature: float,
                  top_k: int, top_p: float) -> int:  # fmt: skip
    """Steps 4-5 on scores [vocab] (fp32, modified)."""
    if not do_sample:
        return int(scores.argmax())
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    scores = scores / temperature
    if top_k and top_k > 0:
        k = min(top_k, scores.shape[-1])
        kth = torch.topk(scores, k)[0][-1]
        scores = scores.masked_fill(scores < kth, -float("inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        cum = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove = cum <= (1 - top_p)
        remove[-1:] = False
        scores = scores.masked_fill(remove.scatter(0, order, remove), -float("inf"))
    probs = scores.softmax(dim=-1)
    return int(torch.multinomial(probs[None], num_samples=1, generator=generator)[0, 0])


def talker_draw(logits: torch.Tensor, emitted: Sequence[int], generator: torch.Generator, *, eos_id: int,
                repetition_penalty: float, do_sample: bool, temperature: float, top_k: int, top_p: float) -> int:  # fmt: skip
    """Steps 1-5 for codebook 1; the caller's logits are not modified."""
    scores = logits.detach().to("cpu", torch.float32, copy=True).view(-1)
    if emitted and repetition_penalty != 1.0:
        ids = torch.tensor(list(emitted), dtype=torch.long)
        picked = scores.gather(0, ids)
        picked = torch.where(picked < 0, picked * repetition_penalty, picked / repetition_penalty)
        scores = scores.scatter(0, ids, picked)
    vocab = scores.shape[0]
    if len(emitted) < MIN_NEW_TOKENS:
        scores[eos_id] = -float("inf")
    suppressed = [i for i in range(vocab - SUPPRESSED_TOP, vocab) if i != eos_id]
    scores[suppressed] = -float("inf")
    return warp_and_draw(scores, generator, do_sample=do_sample, temperature=temperature, top_k=top_k, top_p=top_p)
