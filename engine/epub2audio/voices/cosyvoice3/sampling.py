"""Speech-token sampling, reproducing upstream CosyVoice at HEAD (ace7c47) draw for draw.

One decode step, given the log-probabilities `logp` over the 6761 speech ids:

1. During the first `min_len` steps, id 6561 gets -inf. Upstream masks `speech_token_size`,
   which in CosyVoice3 is the *sos* row, not eos (6562). So eos and the other stop ids stay
   drawable, and the model can still stop early. This is a HEAD quirk (upstream commit 0e62489,
   2026-02-11). We keep it on purpose, because the token streams must match upstream's.
2. Nucleus draw (`nucleus_sample`). Take the softmax and sort it in descending order with a stable
   sort, so equal probabilities keep id order. Keep sorted entries while the running sum *before*
   an entry is below top_p and fewer than top_k are kept. The entry that crosses top_p is
   therefore included. Draw one of the kept entries with `multinomial` over their raw
   (un-renormalised) probabilities.
3. Repetition-aware fallback (RAS, VALL-E 2). If the drawn id occurs at least win_size*tau_r
   times (= 1) in the last win_size (= 10) emitted tokens, set its score to -inf and draw again
   from the softmax over the full vocabulary (`random_sample`).

Every draw uses the `torch.Generator` passed in, never the global RNG. With replacement and one
sample, torch's CPU `multinomial` consumes the generator according to the *length* of the
distribution it draws from. So we feed it exactly the tensors upstream builds: the kept prefix
of the sorted probabilities (bit-identical values), and the full softmax. The only vectorised
change is the cut-off: upstream walks a Python loop that adds the sorted probabilities one at a
time in fp32 and compares against top_p rounded to fp32. We do the same arithmetic with one
float32 `cumsum` over at most top_k entries. `tests/cosyvoice3/test_sampling.py` checks the
token and the generator state against a literal transcription.

Everything here runs on the host: logp is a CPU fp32 vector, whatever backend produced it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .llm import SOS_ID

TOP_P = 0.8
TOP_K = 25
WIN_SIZE = 10
TAU_R = 0.1


def nucleus_size(sorted_probs: np.ndarray, top_p: float, top_k: int) -> int:
    """How many of the descending-sorted probabilities upstream's loop keeps.

    Entry i is kept when fewer than top_k are kept so far and the fp32 running sum of the
    entries before it is below top_p. The comparison is in fp32, because torch compares a
    float32 tensor against a Python float in float32. The first entry is always kept.
    """
    head = np.asarray(sorted_probs[:top_k], dtype=np.float32)
    if head.size <= 1:
        return head.size
    before = np.cumsum(head[:-1], dtype=np.float32)  # sums before entries 1..m-1, added in order
    stops = np.flatnonzero(~(before < np.float32(top_p)))
    return int(stops[0]) + 1 if stops.size else head.size


def nucleus_sample(
    scores: torch.Tensor, generator: torch.Generator, top_p: float = TOP_P, top_k: int = TOP_K
) -> int:
    if not top_p > 0 or top_k < 1:
        raise ValueError(f"need top_p > 0 and top_k >= 1, got top_p={top_p}, top_k={top_k}")
    sorted_probs, order = scores.softmax(dim=0).sort(descending=True, stable=True)
    head = sorted_probs[:top_k]
    kept = head[: nucleus_size(head.numpy(), top_p, top_k)]
    pick = kept.multinomial(1, replacement=True, generator=generator)
    return int(order[pick])


def random_sample(scores: torch.Tensor, generator: torch.Generator) -> int:
    """One draw from the softmax over the whole vocabulary (-inf scores have probability 0)."""
    return int(scores.softmax(dim=0).multinomial(1, replacement=True, generator=generator))


def ras_sample(
    scores: torch.Tensor,
    decoded: Sequence[int],
    generator: torch.Generator,
    top_p: float = TOP_P,
    top_k: int = TOP_K,
    win_size: int = WIN_SIZE,
    tau_r: float = TAU_R,
) -> int:
    """Nucleus draw with the repetition fallback. `scores` is modified when the fallback runs.

    If the banned id was the only finite score, the softmax is all NaN. Then `multinomial`
    raises RuntimeError, as it does upstream. Real logits never get there: at most id 6561 is
    -inf.
    """
    token = nucleus_sample(scores, generator, top_p, top_k)
    if list(decoded[-win_size:]).count(token) >= win_size * tau_r:
        scores[token] = -float("inf")
        token = random_sample(scores, generator)
    return token


def sample_token(
    logp: torch.Tensor | np.ndarray,
    decoded: Sequence[int],
    generator: torch.Generator,
    *,
    ignore_eos: bool,
    top_p: float = TOP_P,
    top_k: int = TOP_K,
    win_size: int = WIN_SIZE,
    tau_r: float = TAU_R,
) -> int:
    """The next speech id, given log-probabilities [6761] and the tokens emitted so far.

    `ignore_eos` is upstream's name. It masks only id 6561 (see the module docstring). The
    caller's `logp` is not modified.
    """
    scores = torch.as_tensor(logp, device="cpu").detach().to("cpu", torch.float32, copy=True)
    if scores.dim() != 1 or scores.shape[0] <= SOS_ID:
        raise ValueError(f"logp must be a 1-D vector over the speech vocabulary, got shape {list(scores.shape)}")
    if ignore_eos:
        scores[SOS_ID] = -float("inf")
    return ras_sample(scores, decoded, generator, top_p, top_k, win_size, tau_r)
