"""Batched LLM decoding: B segments at once through the torch CosyVoice3LM. OPT-IN, OFF by default.

How: each row's prompt `[sos, text, task_id, prompt speech]` is embedded as in `llm.py`, then the
rows are LEFT-padded to a common length, so every row's last prompt position is the last column
and each decode step appends one column for all rows. An attention mask (bool, True = may attend)
blocks every pad column for every real query, in the prefill and in every decode step; a pad
*query* (a pad position in the prefill) attends to itself only, so nothing is fully masked and no
NaN can reach the cache. Rotary position ids are per row (`column - pad`), so a row sees exactly
the positions 0, 1, 2, ... it sees alone. Each row has its own sampler state, its own
`torch.Generator` (seeded from its own seed) and its own length bounds; rows finish independently
(eos, their max length or `max_tokens`), and finished rows are dropped from the batch and the KV
cache, so the rest decode at the smaller size.

Why it is OFF by default (a segment's audio would depend on its batch neighbours): with B rows the
matrix products have B rows, the masked attention takes another kernel path, and floating-point
reductions are grouped differently, so a row's logits are not bit-identical to its solo run. The
sampler turns a tiny logit difference into a different token whenever a draw lands near a boundary
of the cumulative distribution, and from that token on the two continuations are unrelated. Which
rows share a batch (and how long the longest is) depends on the job's order, the number of
workers, what was already cached, a retry ... so resume, `regen` and "same seed, same bytes" would
no longer hold. Measured (bench/batched.py, FULL-SIZE random weights, fp32, 2 shared x86 cores):

    logits        max |logp batched - logp solo| = 2.5e-5 (B=2) and 2.3e-5 (B=4), median per
                  row and step 1.5e-5 / 1.7e-5 (teacher-forced, 4 rows x 24-40 steps, rows padded
                  by 0..20 columns); on the tiny test model < 1e-4 too
    nucleus cut   in 1 of 246 teacher-forced row-steps the batched logits moved the top-p cut by
                  one entry, which changes the draw (and how the generator is consumed, so every
                  later draw); otherwise the chance that one draw differs is ~1e-5 per token
    tokens        20 segments x 50 tokens, solo vs batches of 4: 0 of 20 streams differed in this
                  run. Together with the above: about 1 cut change in the ~1250 token-steps seen,
                  i.e. of the order of 1e-3 per token; a 10-hour book (~900k tokens) would then
                  have hundreds of segments whose audio depends on their batch neighbours
    speed         decode tok/s at 1 torch thread, machine shared with other jobs (noisy):
                  B=1 3.4, B=2 3.4 (x1.0), B=4 5.5 (x1.6); 20 segments of 50 tokens took 387 s
                  solo and 252 s in fours (x1.5, prefill included)

(The rows' logits are unchanged *bit for bit* when the pad columns' embeddings or cached keys and
values are perturbed: the mask is exact. The divergence is reduction order, not leakage.)
Use it only where throughput matters more than byte-identity with solo rendering, e.g. a GPU
backend, and never mix batched and solo segments in one job's store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from .generate import length_bounds, speech_token_cap
from .llm import SPEECH_TOKEN_SIZE, CosyVoice3LM
from .sampling import sample_token


@dataclass
class BatchRequest:
    text_ids: Sequence[int]  # the target text only (it sets the length bounds)
    prompt_text_ids: Sequence[int]
    prompt_speech_tokens: Sequence[int]
    seed: int


@dataclass
class _Row:
    index: int  # position in the caller's list
    generator: torch.Generator
    min_len: int
    max_len: int
    out: list[int] = field(default_factory=list)


class BatchedSession:
    """Left-padded, masked decoding of several prompts over one batched KV cache.

    `prefill()` returns log-probabilities [B, V] for the rows' next tokens; `step(tokens)` feeds
    one token per live row and returns the next [B_live, V]. `drop(keep)` removes rows. `masks`
    keeps every attention mask used (for tests); `pad_embedding` fills the pad positions' input
    vectors (tests perturb it to show the mask is exact)."""

    def __init__(self, lm: CosyVoice3LM, prompts: Sequence[tuple[Sequence[int], Sequence[int]]],
                 pad_embedding: torch.Tensor | float = 0.0, keep_masks: bool = False):
        self.lm = lm
        with torch.inference_mode():
            embeds = [lm.embed_prompt(text, speech)[0] for text, speech in prompts]
        self.lengths = torch.tensor([e.shape[0] for e in embeds])
        width = int(self.lengths.max())
        self.pads = width - self.lengths  # [B]
        h = embeds[0].shape[1]
        x = torch.empty(len(embeds), width, h, dtype=embeds[0].dtype)
        x[:] = pad_embedding if not isinstance(pad_embedding, torch.Tensor) else pad_embedding.to(x.dtype)
        for b, e in enumerate(embeds):
            x[b, width - e.shape[0]:] = e
        self._prompt = x
        self.cache = lm.qwen2.make_cache()
        self.keep_masks = keep_masks
        self.masks: list[torch.Tensor] = []

    @property
    def width(self) -> int:
        return self.cache[0].offset

    def _mask(self, n_new: int) -> torch.Tensor:
        """bool [B, 1, n_new, width + n_new]: causal over real columns, pad columns blocked."""
        total = self.width + n_new
        cols = torch.arange(total)
        rows = torch.arange(self.width, total)
        real_col = cols[None, :] >= self.pads[:, None]  # [B, total]
        causal = cols[None, :] <= rows[:, None]  # [n_new, total]
        mask = causal[None] & real_col[:, None, :]
        pad_query = rows[None, :] < self.pads[:, None]  # [B, n_new]: pad positions of the prompt
        mask |= pad_query[:, :, None] & (cols[None, None, :] == rows[None, :, None])  # see itself only
        return mask[:, None]

    def _positions(self, n_new: int) -> torch.Tensor:
        cols = torch.arange(self.width, self.width + n_new)
        return (cols[None, :] - self.pads[:, None]).clamp(min=0)  # [B, n_new]

    @torch.inference_mode()
    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        mask, positions = self._mask(x.shape[1]), self._positions(x.shape[1])
        if self.keep_masks:
            self.masks.append(mask.clone())
        hidden = self.lm.qwen2(x, self.cache, positions=positions, mask=mask)
        return self.lm.llm_decoder(hidden[:, -1]).float().log_softmax(dim=-1).cpu()

    def prefill(self) -> torch.Tensor:
        if self.width:
            raise RuntimeError("this session has already run its prompts")
        return self._forward(self._prompt)

    def step(self, tokens: Sequence[int]) -> torch.Tensor:
        if not self.width:
            raise RuntimeError("run prefill() before feeding tokens")
        speech = self.lm.speech_embedding.weight
        return self._forward(speech[torch.tensor(list(tokens))][:, None])

    def drop(self, keep: Sequence[int]) -> None:
        """Keep only the rows at positions `keep` (in the current batch) in the cache and state."""
        idx = torch.tensor(list(keep), dtype=torch.long)
        for c in self.cache:
            c.keys, c.values = c.keys[idx], c.values[idx]
        self.pads, self.lengths = self.pads[idx], self.lengths[idx]


def generate_speech_tokens_batched(
    lm: CosyVoice3LM,
    requests: Sequence[BatchRequest],
    *,
    min_token_text_ratio: float = 2,
    max_token_text_ratio: float = 20,
    max_tokens: int | None = None,
    min_cap: int = 0,
    on_logp: Callable[[int, torch.Tensor], None] | None = None,
) -> list[list[int]]:
    """Speech tokens for each request (in order), decoded together; the same loop, bounds and
    sampler as `generate.decode_speech_tokens`, row by row. All randomness of row b comes from a
    generator seeded with requests[b].seed. `on_logp(b, logp)` sees every vector row b samples from."""
    rows = []
    for i, r in enumerate(requests):
        lo = length_bounds(len(r.text_ids), min_token_text_ratio)[0]
        hi = speech_token_cap(len(r.text_ids), max_token_text_ratio, min_cap, max_tokens)  # a row this long was cut
        rows.append(_Row(i, torch.Generator(device="cpu").manual_seed(int(r.seed)), lo, hi))
    live = [row for row in rows if row.max_len > 0]  # the solo loop does not even run the prompt
    if not live:
        return [[] for _ in rows]
    session = BatchedSession(lm, [([*requests[row.index].prompt_text_ids, *requests[row.index].text_ids],
                                   requests[row.index].prompt_speech_tokens) for row in live])
    logp = session.prefill()
    step = 0
    while live:
        fed, still = [], []
        for b, row in enumerate(live):
            if on_logp is not None:
                on_logp(row.index, logp[b])
            token = sample_token(logp[b], row.out, row.generator, ignore_eos=step < row.min_len)
            done = token >= SPEECH_TOKEN_SIZE  # eos or any other special id: stop, do not emit
            if not done:
                row.out.append(token)
                done = len(row.out) >= row.max_len
            if not done:
                still.append(b)
                fed.append(token)
        step += 1
        if not still:
            break
        if len(still) < len(live):
            session.drop(still)
            live = [live[b] for b in still]
        logp = session.step(fed)
    return [row.out for row in rows]
