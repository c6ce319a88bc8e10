"""Shorten a reference recording for a CosyVoice3 voice profile, cutting at a pause.

Why: the prompt's speech tokens and mel frames are part of EVERY segment's flow input (the DiT runs
on prompt + target frames, with attention quadratic in that length) and of every LLM prefill, so
a shorter reference makes every segment of a book cheaper (bench/cosyvoice3.py --trim measures the
flow seconds saved per second of prompt removed). `voice add --max-seconds S` uses this.

Rule: a recording no longer than `max_seconds` is returned unchanged. Otherwise the cut goes in
the middle of the quietest 50 ms window (lowest sum of squares) that ends at or before the limit,
searched over the second half of the allowed span (so a quiet lead-in cannot shrink the reference
to nothing); among equally quiet windows the latest wins (it keeps the most speech). Windows are
tried every 5 ms. The result is a prefix of the input, same dtype and type (numpy or torch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

WINDOW_SECONDS = 0.05
HOP_SECONDS = 0.005


def find_cut(wav: Any, sample_rate: int, max_seconds: float, min_fraction: float = 0.5) -> int:
    """Sample index where `trim_reference` cuts (len(wav) if no cut is needed)."""
    x = np.asarray(wav.detach().cpu().numpy() if hasattr(wav, "detach") else wav, dtype=np.float64)
    if x.ndim == 2:  # [channels, samples] -> mix down for the energy only
        x = x.mean(axis=0)
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D (or [channels, samples]) waveform, got shape {x.shape}")
    if sample_rate <= 0 or max_seconds <= 0:
        raise ValueError("sample_rate and max_seconds must be positive")
    n = x.shape[0]
    limit = int(max_seconds * sample_rate)
    if n <= limit:
        return n
    win = max(1, int(round(WINDOW_SECONDS * sample_rate)))
    hop = max(1, int(round(HOP_SECONDS * sample_rate)))
    if limit < win:
        return limit
    csum = np.concatenate([[0.0], np.cumsum(x[:limit] ** 2)])
    first = min(int(limit * min_fraction), limit - win)
    starts = np.arange(first, limit - win + 1, hop)
    energy = csum[starts + win] - csum[starts]
    best = np.flatnonzero(energy <= energy.min() * (1 + 1e-9) + 1e-20)[-1]  # latest of the quietest
    return int(starts[best] + win // 2)


def trim_reference(wav: Any, sample_rate: int, max_seconds: float) -> Any:
    """`wav` cut to at most `max_seconds`, at the quietest 50 ms before the limit (see module doc).

    wav: 1-D samples or [channels, samples]; numpy array or torch tensor (returned as the same).
    """
    cut = find_cut(wav, sample_rate, max_seconds)
    return wav[..., :cut]
