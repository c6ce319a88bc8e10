"""The Qwen3-TTS generation loop (CustomVoice prompt, streaming-text layout as upstream's default).

The text is tokenized as `<|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>assistant\\n`; upstream
takes the first 3 ids as the role and ids[3:-5] as the text. The Talker's prompt is

    role (3 projected text vectors)
    tts_pad x (n-2), tts_bos   each added to codec [think|nothink, think_bos, (language), think_eos, (speaker), pad]
    first text token           added to codec bos

and each later step feeds the sum of the previous frame's 16 code embeddings plus the next text
vector (then tts_eos, then tts_pad for ever). A frame is: one Talker draw (codebook 1), then the Code
Predictor's 15 draws, all from the same generator in that order, as upstream's draws interleave.
Upstream stops at eos (not emitted) or after max_new_tokens draws; a capped run keeps the frames
whose 15 codes were drawn. The length bound here is T_max = min(T_config, max(75, 6 * text tokens)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .code_predictor import CodePredictor
from .sampling import talker_draw, warp_and_draw
from .talker import Talker

MIN_FRAMES = 75  # 6 s at 12.5 Hz
FRAMES_PER_TEXT_TOKEN = 6


def frame_cap(n_text_tokens: int, t_config: int) -> int:
    return min(t_config, max(MIN_FRAMES, FRAMES_PER_TEXT_TOKEN * n_text_tokens))


@dataclass(frozen=True)
class Result:
    frames: list[list[int]]  # [T][16]
    capped: bool  # the bound was reached without eos


def build_prompt(talker: Talker, ids: Sequence[int], text_ids: dict, *, speaker: str | None, language: str):
    """(prompt embeddings [1, L, H], trailing text vectors [1, n, H], tts_pad [1, 1, H])."""
    a = talker.args
    lang = language.lower()
    if lang == "auto":
        language_id = None
    elif lang in a.codec_language_id:
        language_id = a.codec_language_id[lang]
    else:
        raise ValueError(f"language {language!r} is not one of auto, {', '.join(sorted(a.codec_language_id))}")
    spk = None
    if speaker:
        if speaker.lower() not in a.spk_id:
            raise ValueError(f"speaker {speaker!r} is not one of {', '.join(sorted(a.spk_id))}")
        spk = a.spk_id[speaker.lower()]
        dialect = a.spk_is_dialect.get(speaker.lower(), False)
        if lang in ("chinese", "auto") and dialect:
            language_id = a.codec_language_id[dialect]
    if len(ids) < 9:
        raise ValueError("the assistant-formatted text must hold a role (3 ids), text and the 5-id suffix")
    bos, eos, pad = talker.embed_text([text_ids["tts_bos_token_id"], text_ids["tts_eos_token_id"],
                                       text_ids["tts_pad_token_id"]]).split(1, dim=1)  # fmt: skip
    head = [a.codec_nothink_id, a.codec_think_bos_id, a.codec_think_eos_id] if language_id is None else [
        a.codec_think_id, a.codec_think_bos_id, language_id, a.codec_think_eos_id]  # fmt: skip
    codec = head + ([spk] if spk is not None else []) + [a.codec_pad_id, a.codec_bos_id]
    codec_emb = talker.embed_codec(codec)
    role = talker.embed_text(ids[:3])
    mid = torch.cat([pad.expand(-1, len(codec) - 2, -1), bos], dim=1) + codec_emb[:, :-1]
    first = talker.embed_text(ids[3:4]) + codec_emb[:, -1:]
    trailing = torch.cat([talker.embed_text(ids[4:-5]), eos], dim=1)
    return torch.cat([role, mid, first], dim=1), trailing, pad


@torch.inference_mode()
def generate(talker: Talker, cp: CodePredictor, ids: Sequence[int], text_ids: dict, gen_args, generator: torch.Generator,
             *, speaker: str | None, language: str = "auto", max_frames: int | None = None) -> Result:  # fmt: skip
    a = talker.args
    prompt, trailing, pad = build_prompt(talker, ids, text_ids, speaker=speaker, language=language)
    cap = max_frames if max_frames is not None else frame_cap(len(ids) - 8, gen_args.max_new_tokens)
    step = talker.start_decoding(prompt)
    logits, hidden = step(None)
    emitted: list[int] = []
    frames: list[list[int]] = []

    def sub_pick(lg: torch.Tensor) -> int:
        return warp_and_draw(lg.clone(), generator, do_sample=gen_args.subtalker_dosample,
                             temperature=gen_args.subtalker_temperature, top_k=gen_args.subtalker_top_k,
                             top_p=gen_args.subtalker_top_p)  # fmt: skip

    for k in range(cap):
        code0 = talker_draw(logits, emitted, generator, eos_id=a.codec_eos_token_id,
                            repetition_penalty=gen_args.repetition_penalty, do_sample=gen_args.do_sample,
                            temperature=gen_args.temperature, top_k=gen_args.top_k, top_p=gen_args.top_p)  # fmt: skip
        if code0 == a.codec_eos_token_id:
            return Result(frames, capped=False)
        emitted.append(code0)
        if k == cap - 1:
            break  # upstream stops after its last draw: this code never gets its 15 companions
        first = talker.model.codec_embedding.weight[code0]
        rest = cp.predict(hidden, first, sub_pick)
        frames.append([code0, *rest])
        x = first + sum(cp.embed_code(g, c) for g, c in enumerate(rest, 1))
        x = x + (trailing[0, k] if k < trailing.shape[1] else pad[0, 0])
        logits, hidden = step(x)
    return Result(frames, capped=True)
