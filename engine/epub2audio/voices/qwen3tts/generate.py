"""The Qwen3-TTS generation loop and its two prompt layouts (upstream's, qwen-tts 0.1.1).

The text is tokenized as `<|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>assistant\\n`; upstream
takes the first 3 ids as the role and ids[3:-5] as the text. Every prompt starts with

    role (3 projected text vectors)
    tts_pad x (n-2), tts_bos   each added to codec [think|nothink, think_bos, (language), think_eos, (speaker), pad]

and goes on in one of upstream's two text layouts (its `non_streaming_mode`):

* non-streaming (`streaming=False`): the whole text is in the prompt, each text vector (then
  tts_eos) added to codec pad, then tts_pad + codec bos; every step after it feeds tts_pad.
  Upstream's default for `generate_custom_voice` (and `generate_voice_design`).
* streaming (`streaming=True`): only the first text token (+ codec bos) is in the prompt; the
  later text vectors (then tts_eos, then tts_pad for ever) are fed one per step, "simulating
  streaming text input" in upstream's words. Upstream's default for `generate_voice_clone`.

Each step feeds the sum of the previous frame's 16 code embeddings plus the step's text vector. A
frame is: one Talker draw (codebook 1), then the Code Predictor's 15 draws, all from the same
generator in that order, as upstream's draws interleave. Upstream stops at eos (not emitted) or
after max_new_tokens draws; a capped run keeps the frames whose 15 codes were drawn. The length
bound here is T_max = min(T_config, max(75, 6 * text tokens)).
The stages may be torch's (talker.py, code_predictor.py) or MLX's (talker_mlx.py, code_predictor_mlx.py):
both hand this loop CPU fp32 torch logits and embeddings, so the draws and the sums are the same code.

The Base model (build_clone_prompt / generate_clone) puts a reference voice in the same loop: its
x-vector takes the speaker's codec slot and, in ICL mode, the reference text and codes are laid into
the prompt before the new text (see build_clone_prompt), in either layout.
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
# upstream's non_streaming_mode default per entry point (qwen_tts/inference/qwen3_tts_model.py):
# generate_custom_voice True, generate_voice_clone False; here as `streaming`, its negation
UPSTREAM_STREAMING = {"custom_voice": False, "base": True}


def frame_cap(n_text_tokens: int, t_config: int) -> int:
    return min(t_config, max(MIN_FRAMES, FRAMES_PER_TEXT_TOKEN * n_text_tokens))


@dataclass(frozen=True)
class Result:
    frames: list[list[int]]  # [T][16]
    capped: bool  # the bound was reached without eos


def build_prompt(talker: Talker, ids: Sequence[int], text_ids: dict, *, speaker: str | None, language: str,
                 streaming: bool = UPSTREAM_STREAMING["custom_voice"]):  # fmt: skip
    """(prompt embeddings [1, L, H], trailing text vectors [1, n, H], tts_pad [1, 1, H]) in the
    non-streaming layout (upstream's default here) or, with `streaming`, the streaming one."""
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
    tail, trailing = _text_part(talker, ids, codec_emb[:, -1:], eos, pad, streaming)
    return torch.cat([role, mid, tail], dim=1), trailing, pad


def _text_part(talker: Talker, ids: Sequence[int], codec_bos, eos, pad, streaming: bool):
    """The text after the head when there are no reference codes: (prompt tail, trailing)."""
    a = talker.args
    if streaming:
        first = talker.embed_text(ids[3:4]) + codec_bos
        return first, torch.cat([talker.embed_text(ids[4:-5]), eos], dim=1)
    # projected in one call as upstream does (a matmul's rounding may depend on the row count)
    text = torch.cat([talker.embed_text(ids[3:-5]), eos], dim=1)
    whole = text + talker.embed_codec([a.codec_pad_id] * text.shape[1])
    return torch.cat([whole, pad + codec_bos], dim=1), pad


@torch.inference_mode()
def generate(talker: Talker, cp: CodePredictor, ids: Sequence[int], text_ids: dict, gen_args, generator: torch.Generator,
             *, speaker: str | None, language: str = "auto", max_frames: int | None = None,
             streaming: bool = UPSTREAM_STREAMING["custom_voice"]) -> Result:  # fmt: skip
    prompt, trailing, pad = build_prompt(talker, ids, text_ids, speaker=speaker, language=language, streaming=streaming)
    cap = max_frames if max_frames is not None else frame_cap(len(ids) - 8, gen_args.max_new_tokens)
    return run_frames(talker, cp, prompt, trailing, pad, gen_args, generator, cap)


@torch.inference_mode()
def run_frames(talker: Talker, cp: CodePredictor, prompt: torch.Tensor, trailing: torch.Tensor, pad: torch.Tensor,
               gen_args, generator: torch.Generator, cap: int) -> Result:  # fmt: skip
    """The frame loop over a built prompt (either layout): at most `cap` Talker draws."""
    a = talker.args
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
        first = talker.codec_row(code0)
        rest = cp.predict(hidden, first, sub_pick)
        frames.append([code0, *rest])
        x = first + sum(cp.embed_code(g, c) for g, c in enumerate(rest, 1))
        x = x + (trailing[0, k] if k < trailing.shape[1] else pad[0, 0])
        logits, hidden = step(x)
    return Result(frames, capped=True)


# ---------------------------------------------------------------------------------------------
# The Base model's clone prompt (upstream's generate with a voice_clone_prompt)


def build_clone_prompt(talker: Talker, cp: CodePredictor, ids: Sequence[int], text_ids: dict, *,
                       speaker_embedding, ref_text_ids: Sequence[int] | None = None, ref_codes=None,
                       language: str = "auto", streaming: bool = UPSTREAM_STREAMING["base"]):  # fmt: skip
    """(prompt [1, L, H], trailing text vectors [1, n, H], tts_pad [1, 1, H]) for a reference voice,
    in the streaming layout (upstream's default for a clone) or, streaming=False, the non-streaming one.

    The head is CustomVoice's with the x-vector in the speaker slot:

        role (3)
        tts_pad x (n-2), tts_bos   each added to codec [think|nothink, think_bos, (language), think_eos,
                                   x-vector, pad]

    x-vector only (no ref_codes): then the text as CustomVoice's (either layout). ICL (ref_codes
    [T][16] and ref_text_ids, the ids of `<|im_start|>assistant\n{ref text}<|im_end|>\n`): the
    codec bos is not placed after the head; the text vectors of ref text [3:-2] + target text [3:-5]
    + tts_eos meet [codec bos, the T reference frames' summed 16 code embeddings]:
    streaming, laid over them position by position, text longer than those T+1 slots streaming on
    after the prompt, shorter text padded with tts_pad; non-streaming, the text (each + codec pad)
    first, then the codec rows (each + tts_pad), tts_pad streaming on.
    """
    a = talker.args
    lang = language.lower()
    if lang == "auto":
        language_id = None
    elif lang in a.codec_language_id and "dialect" not in lang:
        language_id = a.codec_language_id[lang]
    else:
        langs = sorted(k for k in a.codec_language_id if "dialect" not in k)
        raise ValueError(f"language {language!r} is not one of auto, {', '.join(langs)}")
    if len(ids) < 9:
        raise ValueError("the assistant-formatted text must hold a role (3 ids), text and the 5-id suffix")
    # Only the stages' seam is read (embed_text, embed_codec, embed_code: torch tensors on every
    # backend), so the MLX and ONNX stages build the same prompt as torch's, row for row.
    head = [a.codec_nothink_id, a.codec_think_bos_id, a.codec_think_eos_id] if language_id is None else [
        a.codec_think_id, a.codec_think_bos_id, language_id, a.codec_think_eos_id]  # fmt: skip
    head_emb = talker.embed_codec(head)
    spk = torch.as_tensor(speaker_embedding).to(head_emb.device, head_emb.dtype).view(1, 1, -1)
    if spk.shape[-1] != a.hidden_size:
        raise ValueError(f"the speaker embedding has {spk.shape[-1]} values; this Talker reads {a.hidden_size}")
    bos, eos, pad = talker.embed_text([text_ids["tts_bos_token_id"], text_ids["tts_eos_token_id"],
                                       text_ids["tts_pad_token_id"]]).split(1, dim=1)  # fmt: skip
    codec_emb = torch.cat([head_emb, spk, talker.embed_codec([a.codec_pad_id, a.codec_bos_id])], dim=1)
    role = talker.embed_text(ids[:3])
    mid = torch.cat([pad.expand(-1, codec_emb.shape[1] - 2, -1), bos], dim=1) + codec_emb[:, :-1]
    if ref_codes is None:
        tail, trailing = _text_part(talker, ids, codec_emb[:, -1:], eos, pad, streaming)
        return torch.cat([role, mid, tail], dim=1), trailing, pad
    if ref_text_ids is None or len(ref_text_ids) < 6:
        raise ValueError("ICL needs the reference text's ids (role, text, <|im_end|>\\n)")
    codes = torch.as_tensor(ref_codes, dtype=torch.long)
    if codes.dim() != 2 or codes.shape[1] != a.num_code_groups or not codes.shape[0]:
        raise ValueError(f"reference codes must be [T, {a.num_code_groups}] with T > 0, got {list(codes.shape)}")
    text = torch.cat([talker.embed_text(list(ref_text_ids[3:-2]) + list(ids[3:-5])), eos], dim=1)
    per_group = [talker.embed_codec(codes[:, 0].tolist()).transpose(0, 1)]  # [T, 1, H] each
    per_group += [torch.stack([cp.embed_code(g, c) for c in codes[:, g].tolist()]).unsqueeze(1)
                  for g in range(1, a.num_code_groups)]  # fmt: skip
    frames = torch.cat(per_group, dim=1).sum(1).unsqueeze(0)  # [1, T, H], summed as upstream sums
    codec = torch.cat([talker.embed_codec([a.codec_bos_id]), frames], dim=1)
    n_text, n_codec = text.shape[1], codec.shape[1]
    if not streaming:
        icl = torch.cat([text + talker.embed_codec([a.codec_pad_id] * n_text), codec + pad], dim=1)
        return torch.cat([role, mid, icl], dim=1), pad, pad
    if n_text > n_codec:
        icl, trailing = text[:, :n_codec] + codec, text[:, n_codec:]
    else:
        icl, trailing = torch.cat([text] + [pad] * (n_codec - n_text), dim=1) + codec, pad
    return torch.cat([role, mid, icl], dim=1), trailing, pad


@torch.inference_mode()
def generate_clone(talker: Talker, cp: CodePredictor, ids: Sequence[int], text_ids: dict, gen_args,
                   generator: torch.Generator, prompt, *, language: str = "auto",
                   max_frames: int | None = None, streaming: bool = UPSTREAM_STREAMING["base"]) -> Result:  # fmt: skip
    """Base-model generation in a reference voice. `prompt` is a clone.ClonePrompt (or anything
    with its speaker_embedding, ref_codes and ref_text_ids); the frames are the new speech only."""
    built = build_clone_prompt(talker, cp, ids, text_ids, speaker_embedding=prompt.speaker_embedding,
                               ref_text_ids=prompt.ref_text_ids, ref_codes=prompt.ref_codes, language=language,
                               streaming=streaming)  # fmt: skip
    cap = max_frames if max_frames is not None else frame_cap(len(ids) - 8, gen_args.max_new_tokens)
    return run_frames(talker, cp, *built, gen_args, generator, cap)
