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

We also take an optional hard cap, `max_tokens`, so a runaway segment stays bounded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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


def length_bounds(
    n_text_tokens: int, min_token_text_ratio: float = 2, max_token_text_ratio: float = 20
) -> tuple[int, int]:
    """(min_len, max_len), both truncated to int as upstream does."""
    return int(n_text_tokens * min_token_text_ratio), int(n_text_tokens * max_token_text_ratio)


def decode_speech_tokens(
    next_logp: NextLogp,
    n_text_tokens: int,
    generator: torch.Generator,
    *,
    min_token_text_ratio: float = 2,
    max_token_text_ratio: float = 20,
    max_tokens: int | None = None,
) -> list[int]:
    """Run a decoding session to its end and return the emitted speech tokens (all < 6561)."""
    min_len, max_len = length_bounds(n_text_tokens, min_token_text_ratio, max_token_text_ratio)
    if max_tokens is not None:
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        max_len = min(max_len, max_tokens)
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
