"""The speech-token decode loop, kept apart from any one model backend.

A backend only has to open a decoding session, `start_decoding(text_ids, prompt_speech_tokens)`,
which returns a `NextLogp` function. Call it with None to run the prompt, or with a token to feed
that token. Either way it returns the next-token log-probabilities as a CPU fp32 [6761] vector.
The torch model in `llm.py` provides this, and an MLX or ONNX backend can provide the same thing
and reuse this loop and the sampler unchanged.

The loop follows upstream's non-streaming `Qwen2LM.inference` at HEAD:
- `Lt` is the number of *target* text tokens. Prompt text does not count.
- Decode at most `int(Lt * max_token_text_ratio)` tokens.
- During the first `int(Lt * min_token_text_ratio)` steps, the sampler masks id 6561.
- The first id >= 6561 that is drawn ends the segment and is not emitted.

We also take an optional hard cap, `max_tokens`, so a runaway segment stays bounded, and an
optional floor under the ratio cap, `min_cap` (0 upstream), so a one-word text has room to be said.

The loop cannot tell a finished text from a cut one except by how it ended: it returned exactly
`speech_token_cap(...)` tokens if and only if it reached the cap without drawing a stop token
(`capped`), i.e. the speech was cut. A job re-splits such a segment instead of keeping it
(render.py); upstream keeps the cut audio.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from .llm import SPEECH_TOKEN_SIZE, NextLogp
from .sampling import sample_token

# FSQ codes that decode to silence or breath. Upstream (CosyVoice3Model.llm_job) passes at most 5
# in a row on to the flow; the LLM itself still saw them all.
SILENT_TOKENS = frozenset([1, 2, 28, 29, 55, 248, 494, 2241, 2242, 2322, 2323])
MAX_SILENT_RUN = 5


class SpeechTokenLM(Protocol):
    def start_decoding(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> NextLogp: ...


@dataclass(frozen=True)
class LengthCap:
    """How long a segment's speech may get, and what reaching that bound means."""

    max_token_text_ratio: float  # speech tokens per target text token
    min_cap: int  # never fewer than this many tokens (short texts carry fixed edge silence)
    resplit: bool  # True: reaching the cap is reported (LengthCapReached); False: the audio is cut


# "upstream" is upstream exactly: 20 speech tokens per text token, no floor, and the audio simply
# stops there. It is CosyVoice3Voice's default, so the port alone (tests, benchmarks, random weights
# that never stop on their own) behaves as upstream and the reference tests compare like with like.
# "tight" is what a job uses (cli.py; config key `length_cap`): the render loop re-splits a capped
# segment, so nothing is cut, and a tighter cap stops a runaway LLM (babbling, a loop) sooner.
# Real speech runs ~25 speech tokens/s, and English text ~3-4 Qwen text tokens per second of speech,
# i.e. ~6-8 speech tokens per text token; a slow narrator or long pauses can push a segment higher.
# 12 is 1.5-2x the typical rate, so a normal segment never reaches it and a capped one costs only a
# re-split. Very short texts ("Yes.": 2 tokens) are dominated by edge silence, hence the 2 s floor.
# bench/length_cap.py measures the decode loop's tokens-per-text-token distribution (on random
# weights, which cannot measure speech: see its output).
LENGTH_CAPS = {
    "upstream": LengthCap(max_token_text_ratio=20, min_cap=0, resplit=False),
    "tight": LengthCap(max_token_text_ratio=12, min_cap=2 * 25, resplit=True),
}


def length_bounds(
    n_text_tokens: int, min_token_text_ratio: float = 2, max_token_text_ratio: float = 20, min_cap: int = 0
) -> tuple[int, int]:
    """(min_len, max_len), both truncated to int as upstream does; max_len is at least `min_cap`."""
    return int(n_text_tokens * min_token_text_ratio), max(int(n_text_tokens * max_token_text_ratio), min_cap)


def speech_token_cap(
    n_text_tokens: int, max_token_text_ratio: float = 20, min_cap: int = 0, max_tokens: int | None = None
) -> int:
    """The most tokens the decode loop emits: a run that returns exactly this many was cut."""
    if max_tokens is not None and max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    max_len = length_bounds(n_text_tokens, 0, max_token_text_ratio, min_cap)[1]
    return max_len if max_tokens is None else min(max_len, max_tokens)


def decode_speech_tokens(
    next_logp: NextLogp,
    n_text_tokens: int,
    generator: torch.Generator,
    *,
    min_token_text_ratio: float = 2,
    max_token_text_ratio: float = 20,
    max_tokens: int | None = None,
    min_cap: int = 0,
) -> list[int]:
    """Run a decoding session to its end and return the emitted speech tokens (all < 6561)."""
    min_len = length_bounds(n_text_tokens, min_token_text_ratio)[0]
    max_len = speech_token_cap(n_text_tokens, max_token_text_ratio, min_cap, max_tokens)
    out: list[int] = []
    token: int | None = None  # None: the first call runs the prompt
    for step in range(max_len):
        logp = next_logp(token)
        token = sample_token(logp, out, generator, ignore_eos=step < min_len)
        if token >= SPEECH_TOKEN_SIZE:  # eos or any other special id: stop, do not emit
            break
        out.append(token)
    return out


def generate_speech_tokens(
    model: SpeechTokenLM,
    text_ids: list[int],
    prompt_text_ids: list[int],
    prompt_speech_tokens: list[int],
    generator: torch.Generator,
    *,
    min_token_text_ratio: float = 2,
    max_token_text_ratio: float = 20,
    max_tokens: int | None = None,
    min_cap: int = 0,
) -> list[int]:
    """Speech tokens for `text_ids`, continuing the voice of the prompt.

    The model sees `[sos, embed(prompt_text_ids + text_ids), task_id, speech(prompt_speech_tokens)]`.
    The length bounds count `text_ids` only. All randomness comes from `generator`.
    """
    next_logp = model.start_decoding([*prompt_text_ids, *text_ids], prompt_speech_tokens)
    return decode_speech_tokens(
        next_logp,
        len(text_ids),
        generator,
        min_token_text_ratio=min_token_text_ratio,
        max_token_text_ratio=max_token_text_ratio,
        max_tokens=max_tokens,
        min_cap=min_cap,
    )


def filter_silent_tokens(tokens: Iterable[int]) -> list[int]:
    """Drop each silent/breath token past the 5th in a row. Any other token resets the count."""
    out: list[int] = []
    run = 0
    for t in tokens:
        if t in SILENT_TOKENS:
            run += 1
            if run > MAX_SILENT_RUN:
                continue
        else:
            run = 0
        out.append(t)
    return out
