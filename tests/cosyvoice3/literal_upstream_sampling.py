"""Upstream CosyVoice's sampling at HEAD (ace7c47), written out as plainly as possible.

This is the yardstick for `epub2audio.voices.cosyvoice3.sampling`. It was transcribed from what
upstream's `cosyvoice/utils/common.py` and `TransformerLM.sampling_ids` compute, and it stays
deliberately naive: a Python loop over the sorted probabilities, Python lists, 0-d tensor
arithmetic. The one difference from upstream is that an explicit generator replaces the global
RNG. Do not optimise it.
"""

from __future__ import annotations

import torch

SPEECH_TOKEN_SIZE = 6561


def nucleus(scores: torch.Tensor, g: torch.Generator, top_p: float = 0.8, top_k: int = 25) -> int:
    probs, ids = [], []
    running = 0.0  # becomes a 0-d float32 tensor after the first addition
    values, order = scores.softmax(dim=0).sort(descending=True, stable=True)
    for i in range(len(order)):
        if running < top_p and len(probs) < top_k:
            running += values[i]
            probs.append(values[i])
            ids.append(order[i])
        else:
            break
    choice = torch.tensor(probs).multinomial(1, replacement=True, generator=g)
    return torch.tensor(ids, dtype=torch.long)[choice].item()


def full_softmax_draw(scores: torch.Tensor, g: torch.Generator) -> int:
    return scores.softmax(dim=0).multinomial(1, replacement=True, generator=g).item()


def ras(
    scores: torch.Tensor,
    decoded: list[int],
    g: torch.Generator,
    top_p: float = 0.8,
    top_k: int = 25,
    win_size: int = 10,
    tau_r: float = 0.1,
) -> int:
    token = nucleus(scores, g, top_p=top_p, top_k=top_k)
    repeats = (torch.tensor(decoded[-win_size:]) == token).sum().item()
    if repeats >= win_size * tau_r:
        scores[token] = -float("inf")
        token = full_softmax_draw(scores, g)
    return token


def sampling_ids(scores: torch.Tensor, decoded: list[int], g: torch.Generator, ignore_eos: bool, **kw) -> int:
    """`scores` is modified in place, as upstream does."""
    if ignore_eos:
        scores[SPEECH_TOKEN_SIZE] = -float("inf")
    return ras(scores, decoded, g, **kw)
