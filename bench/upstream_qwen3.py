"""Our Qwen3-TTS port against upstream's own modules (qwen-tts 0.1.1), stage by stage.

Run with the interpreter of a separate environment holding `qwen-tts==0.1.1` (it pins
transformers 4.57.3, so never ours), e.g.:

    PYTHONPATH=engine:. /work/main/.venv/bin/python -c \
        "from tests.qwen3tts.random_weights import write_tiny_model; write_tiny_model('/tmp/qwen3-tiny')"
    PYTHONPATH=engine:. /work/qwen-upstream/bin/python bench/upstream_qwen3.py --dir /tmp/qwen3-tiny \
        [--write-fixture tests/qwen3tts/upstream_tiny.json]

and for the Base model's cloning stages (speaker encoder, speech-tokenizer encoder, Base generate):

    PYTHONPATH=engine:. /work/main/.venv/bin/python -c \
        "from tests.qwen3tts.random_weights import write_tiny_base_model; write_tiny_base_model('/tmp/qwen3-tiny-base')"
    PYTHONPATH=engine:. /work/qwen-upstream/bin/python bench/upstream_qwen3.py --skip-custom \
        --base-dir /tmp/qwen3-tiny-base [--write-base-fixture tests/qwen3tts/upstream_tiny_base.json]

(--dir is needed in practice: writing the folder borrows tests/cosyvoice3/fixtures.py's BPE helpers,
which import onnx, absent from the upstream environment.)

It writes the tests' tiny random folder (tests/qwen3tts/random_weights.py), builds upstream's
Qwen3TTSForConditionalGeneration and Qwen3TTSTokenizerV2Decoder from its config files, loads the
folder's tensors into them with strict=True (proving the key names and shapes), and compares on
the same inputs: Talker logits (prefill and teacher-forced steps), Code Predictor logits, decoder
waveform. Upstream's floor is its own fp32 run against its fp64 run; ours is reported against
upstream fp64 beside it.

Full size (a seeded random 0.6B CustomVoice folder in the official layout, written once with our venv):

    PYTHONPATH=engine:. nice /work/main/.venv/bin/python bench/qwen3_full_folder.py /work/tmp/qwen3-full
    PYTHONPATH=engine:. nice /work/qwen-upstream/bin/python bench/upstream_qwen3.py --dir /work/tmp/qwen3-full \
        --full [--save-reference REF.pt] [--speed --rounds 3]

--full runs the same stage comparison with one implementation of one stage in memory at a time
(upstream's Talker fp32 then fp64 is the peak, ~7 GB, its text embedding dropped after the strict
load); --save-reference keeps upstream's fp64 logits for bench/qwen3_backends.py (MLX) to check;
--speed times ours against upstream per stage (Talker step, Code Predictor frame, decoder per
second of audio), both fp32 on the same threads, in interleaved ABBA rounds, best of rounds.

Upstream's own entry points (Qwen3TTSModel.generate_custom_voice / create_voice_clone_prompt +
generate_voice_clone) with no non_streaming_mode and with each value, against ours:

    tiny (the fixture; one thread):  --modes TINY TINY_BASE [--modes-fixture tests/qwen3tts/upstream_tiny_modes.json]
    full size (a CustomVoice and a Base folder from bench/qwen3_full_folder.py [--base]):
        PYTHONPATH=engine:. nice /work/qwen-upstream/bin/python -u bench/upstream_qwen3.py \
            --modes /work/tmp/qwen3-full /work/tmp/qwen3-full-base --cap 17 --threads 2

(--cap: every case's max_new_tokens, cap - 1 frames; full size takes ~0.6 s a frame a side on 2
threads, ~8 minutes at cap 17, and ~11 GB of memory with the Base model in.)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch


def _stub_torchaudio() -> None:
    """qwen_tts imports its 25 Hz tokenizer, which imports torchaudio; the torchaudio wheel pip
    picks for torch 2.13 (2.11.1) cannot load its library. Nothing compared here uses it, so an
    empty stand-in lets the package import."""
    try:
        import torchaudio.compliance.kaldi  # noqa: F401
    except (ImportError, OSError):
        import types

        for name in ("torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi", "torchaudio.transforms", "torchaudio.functional"):
            import importlib.machinery

            mod = types.ModuleType(name)
            mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
            sys.modules[name] = mod
        sys.modules["torchaudio"].compliance = sys.modules["torchaudio.compliance"]
        sys.modules["torchaudio.compliance"].kaldi = sys.modules["torchaudio.compliance.kaldi"]


def sampling_replay() -> dict:
    """transformers' own logits processors and draw (as generate() builds them for qwen-tts) on
    seeded random logits with the global RNG seeded, against sampling.py with a seeded Generator."""
    from transformers.generation.logits_process import (
        LogitsProcessorList, MinNewTokensLengthLogitsProcessor, RepetitionPenaltyLogitsProcessor,
        SuppressTokensLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)

    from epub2audio.voices.qwen3tts.sampling import talker_draw, warp_and_draw

    eos, vocab = 2150, 3072
    g = torch.Generator().manual_seed(11)
    logits = 3 * torch.randn(60, vocab, generator=g)
    out = {"logits_seed": 11, "draw_seed": 5}
    for top_p in (1.0, 0.8):
        procs = LogitsProcessorList([
            RepetitionPenaltyLogitsProcessor(1.05),
            MinNewTokensLengthLogitsProcessor(0, 2, [eos]),
            SuppressTokensLogitsProcessor([i for i in range(vocab - 1024, vocab) if i != eos]),
            TemperatureLogitsWarper(0.9), TopKLogitsWarper(50)] + ([TopPLogitsWarper(top_p)] if top_p < 1 else []))
        torch.manual_seed(5)
        ids = torch.zeros(1, 0, dtype=torch.long)
        theirs = []
        for row in logits:
            sc = procs(ids, row[None].clone())
            t = int(torch.multinomial(sc.softmax(-1), num_samples=1)[0, 0])
            theirs.append(t)
            ids = torch.cat([ids, torch.tensor([[t]])], 1)
        gen = torch.Generator().manual_seed(5)
        ours = []
        for row in logits:
            ours.append(talker_draw(row, ours, gen, eos_id=eos, repetition_penalty=1.05, do_sample=True,
                                    temperature=0.9, top_k=50, top_p=top_p))
        sub_procs = LogitsProcessorList([TemperatureLogitsWarper(0.9), TopKLogitsWarper(50)])
        torch.manual_seed(6)
        sub_theirs = [int(torch.multinomial(sub_procs(ids, r[None, :2048].clone()).softmax(-1), 1)[0, 0]) for r in logits]
        gen = torch.Generator().manual_seed(6)
        sub_ours = [warp_and_draw(r[:2048].clone(), gen, do_sample=True, temperature=0.9, top_k=50, top_p=1.0) for r in logits]
        print(f"sampling top_p={top_p}: talker draws equal {theirs == ours} ({sum(a == b for a, b in zip(theirs, ours))}/60); "
              f"subtalker draws equal {sub_theirs == sub_ours}")
        out[f"talker_top_p_{top_p}"] = theirs
        out[f"subtalker_top_p_{top_p}"] = sub_theirs
    return out


def _reference_audio(seconds: float, seed: int, rate: int = 24000):
    """tests/qwen3tts/random_weights.reference_audio, repeated here (that module imports onnx via
    the cosyvoice3 test fixtures, absent from the upstream environment)."""
    import math

    g = torch.Generator().manual_seed(seed)
    t = torch.arange(int(seconds * rate), dtype=torch.float64) / rate
    f0 = 120 + 30 * torch.sin(2 * math.pi * 0.7 * t)
    phase = 2 * math.pi * torch.cumsum(f0, 0) / rate
    voice = sum(torch.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.5 * (1 + torch.sin(2 * math.pi * 4 * t)) ** 2 / 4
    x = 0.4 * envelope * voice / 2 + 0.01 * torch.randn(t.shape[0], generator=g, dtype=torch.float64)
    return (torch.round(x * 32767) / 32767).float().numpy()


CLONE_CLIPS = {"short": (2.0, 1), "mid": (3.0, 2), "long": (12.0, 3)}  # seconds, seed
REF_TEXT = "The quick brown fox jumps over the lazy dog."
CLONE_CASES = (  # (name, clip, with reference text, target text, language, frames cap)
    ("xvec", "short", False, "She sells sea shells by the sea shore.", "english", 30),
    ("icl_long_text", "short", True, "Once upon a time there were three little pigs, and they went out.", "auto", 30),
    ("icl_short_text", "mid", True, "Hello world.", "english", 30),
)


def clone_compare(d: Path, fixture_path: str | None) -> None:
    """Upstream's speaker encoder, mel front end, 12 Hz encoder and Base generate on the tiny Base
    folder against ours; fp32 and fp64 for the continuous stages, exact codes for the discrete."""
    import librosa
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration, mel_spectrogram
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.clone import ClonePrompt, load_clone_stages
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.generate import generate_clone
    from epub2audio.voices.qwen3tts.speaker_encoder import log_mel, mel_filters
    from epub2audio.voices.qwen3tts.talker import Talker

    def mx(a, b):
        return float((torch.as_tensor(a).double() - torch.as_tensor(b).double()).abs().max())

    cfg = Qwen3TTSConfig(**json.loads((d / "config.json").read_text()))
    main_sd = {k: v.float() for k, v in load_file(str(d / "model.safetensors")).items()}
    up = Qwen3TTSForConditionalGeneration(cfg).eval()
    res = up.load_state_dict(main_sd, strict=True)
    print(f"upstream Base model: strict load ok ({len(main_sd)} tensors, "
          f"{sum(k.startswith('speaker_encoder.') for k in main_sd)} speaker_encoder.*) {res}")
    scfg = Qwen3TTSTokenizerV2Config(**json.loads((d / "speech_tokenizer" / "config.json").read_text()))
    speech_sd = load_file(str(d / "speech_tokenizer" / "model.safetensors"))
    up_tok = Qwen3TTSTokenizerV2Model(scfg).eval()
    up_tok.load_state_dict(speech_sd, strict=True)
    print(f"upstream speech tokenizer (encoder + decoder): strict load ok ({sum(k.startswith('encoder.') for k in speech_sd)} encoder.*); "
          f"encoder attention {up_tok.encoder.config._attn_implementation}")
    up64 = Qwen3TTSForConditionalGeneration(cfg).eval()
    up64.load_state_dict(main_sd, strict=True)
    up64 = up64.double()
    up_tok64 = Qwen3TTSTokenizerV2Model(scfg).eval()
    up_tok64.load_state_dict(speech_sd, strict=True)
    up_tok64 = up_tok64.double()

    spk, enc = load_clone_stages(d)
    fixture: dict = {"clips": {k: list(v) for k, v in CLONE_CLIPS.items()}, "ref_text": REF_TEXT}
    lib = librosa.filters.mel(sr=24000, n_fft=1024, n_mels=128, fmin=0, fmax=12000)
    ours_fb = mel_filters().numpy()
    print(f"mel filter bank vs librosa.filters.mel: max |diff| {abs(lib - ours_fb).max():.3e}, "
          f"{int((lib != ours_fb).sum())} of {lib.size} entries differ")
    nz = lib.nonzero()
    fixture["mel_filters_nonzero"] = int(len(nz[0]))
    fixture["mel_filters_every_17th_nonzero"] = [[int(i), int(j), float(lib[i, j])] for i, j in zip(*(a[::17] for a in nz))]

    with torch.inference_mode():
        for name, (seconds, seed) in CLONE_CLIPS.items():
            audio = _reference_audio(seconds, seed)
            up_mel = mel_spectrogram(torch.from_numpy(audio).unsqueeze(0), n_fft=1024, num_mels=128, sampling_rate=24000,
                                     hop_size=256, win_size=1024, fmin=0, fmax=12000).transpose(1, 2)
            our_mel = log_mel(torch.from_numpy(audio))
            e32 = up.extract_speaker_embedding(audio, 24000)
            e64 = up64.speaker_encoder(up_mel.double())[0]
            ours = spk.embed(audio)
            print(f"[{name} {seconds:g} s] log-mel {tuple(our_mel.shape)}: ours vs upstream {mx(our_mel, up_mel[0]):.3e}; "
                  f"speaker embedding: upstream fp32 vs fp64 {mx(e32, e64):.3e}, ours vs fp64 {mx(ours, e64):.3e}, "
                  f"ours vs upstream fp32 {mx(ours, e32):.3e} "
                  f"(|e| max {float(e64.abs().max()):.2f})")
            x = torch.from_numpy(audio)[None]
            mask = torch.ones_like(x, dtype=torch.long)
            c32 = up_tok.encode(x, mask, return_dict=True).audio_codes[0]
            c64 = up_tok64.encode(x.double(), mask, return_dict=True).audio_codes[0]
            codes = enc.encode(audio)

            def up_latents(m, xx):
                h = m.encoder.encoder(xx[:, None])
                h = m.encoder.encoder_transformer(h.transpose(1, 2), return_dict=True).last_hidden_state.transpose(1, 2)
                return m.encoder.downsample(h)

            l32, l64 = up_latents(up_tok, x), up_latents(up_tok64, x.double())
            lours = enc.latents(x[:, None])
            print(f"[{name}] encoder latents {tuple(lours.shape)}: upstream fp32 vs fp64 {mx(l32, l64):.3e}, ours vs fp64 "
                  f"{mx(lours, l64):.3e}, ours vs fp32 {mx(lours, l32):.3e}; codes {tuple(codes.shape)}: ours == upstream fp32 {torch.equal(codes, c32)}, "
                  f"upstream fp64 == fp32 {torch.equal(c64, c32)} ({int((c64 != c32).sum())} of {c32.numel()} differ)")
            fixture[name] = {
                "log_mel_every_97th": up_mel[0].reshape(-1)[::97].tolist(),
                "speaker_embedding": e64.tolist(), "speaker_floor": mx(e32, e64),
                "latents_every_7th": l64[0].reshape(-1)[::7].tolist(), "latents_floor": mx(l32, l64),
                "codes": c32.tolist(),
            }  # fmt: skip

        # other rates: upstream resamples with librosa (soxr_hq); ours with soxr when installed, else
        # with the engine's sinc resampler
        from epub2audio.voices.cosyvoice3.frontend import resample
        from epub2audio.voices.qwen3tts.clone import to_24k

        fixture["resampled"] = {}
        for rate in (16000, 44100):
            src = _reference_audio(2.0, 1, rate)
            theirs24 = librosa.resample(y=src, orig_sr=rate, target_sr=24000)
            up_codes = up_tok.encode(torch.from_numpy(theirs24)[None], torch.ones(1, len(theirs24), dtype=torch.long),
                                     return_dict=True).audio_codes[0]  # fmt: skip
            up_emb = up.extract_speaker_embedding(theirs24, 24000)
            for name, ours24 in (("sinc", resample(src, rate, 24000)), ("soxr", to_24k(src, rate))):
                co = enc.encode(ours24)
                same = co.shape == up_codes.shape
                print(f"resampling {rate} -> 24000 Hz, ours by {name}: vs librosa max |diff| "
                      f"{mx(ours24[:len(theirs24)], theirs24[:len(ours24)]):.3e} (lengths {len(ours24)}/{len(theirs24)}); "
                      f"speaker embedding max |diff| {mx(spk.embed(ours24), up_emb):.3e}; codes differing "
                      f"{int((co != up_codes).sum()) if same else 'shape'} of {up_codes.numel()}")
            fixture["resampled"][str(rate)] = {"codes": up_codes.tolist(), "speaker_embedding": up_emb.tolist()}

        tok = AutoTokenizer.from_pretrained(str(d))
        ck = load_checkpoint(d)
        talker = Talker.from_state_dict(ck.talker_args, ck.state_dict)
        cp = CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
        gen_keys = ("do_sample", "top_k", "top_p", "temperature", "repetition_penalty", "subtalker_dosample",
                    "subtalker_top_k", "subtalker_top_p", "subtalker_temperature")
        fixture["generate_seed"] = 3
        fixture["generate"] = {}
        for case, clip, icl, text, lang, cap in CLONE_CASES:
            audio = _reference_audio(*CLONE_CLIPS[clip])
            ids = tok(f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
            ref_ids = tok(f"<|im_start|>assistant\n{REF_TEXT}<|im_end|>\n")["input_ids"] if icl else None
            emb = up.extract_speaker_embedding(audio, 24000)
            ref_code = up_tok.encode(torch.from_numpy(audio)[None], torch.ones(1, audio.shape[0], dtype=torch.long),
                                     return_dict=True).audio_codes[0] if icl else None  # fmt: skip
            vcp = {"ref_code": [ref_code], "ref_spk_embedding": [emb], "x_vector_only_mode": [not icl], "icl_mode": [icl]}
            torch.manual_seed(3)
            theirs, _ = up.generate(input_ids=[torch.tensor([ids])], ref_ids=[torch.tensor([ref_ids])] if icl else None,
                                    voice_clone_prompt=vcp, languages=[lang], non_streaming_mode=False,
                                    max_new_tokens=cap, **{k: getattr(ck.generation, k) for k in gen_keys})
            theirs = theirs[0].tolist()
            prompt = ClonePrompt(speaker_embedding=spk.embed(audio).numpy(),
                                 ref_codes=enc.encode(audio).numpy() if icl else None, ref_text=REF_TEXT if icl else None,
                                 ref_text_ids=torch.tensor(ref_ids).numpy() if icl else None, model_id="bench")  # fmt: skip
            ours = generate_clone(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(3), prompt,
                                  language=lang, max_frames=cap, streaming=True)  # as non_streaming_mode=False
            n_text = len(ids) - 8 + (len(ref_ids) - 5 if icl else 0) + 1
            n_codec = (len(ref_code) + 1) if icl else 0
            print(f"Base generate {case} ({'ICL' if icl else 'x-vector'}, text slots {n_text} vs codec slots {n_codec}, "
                  f"{lang}, cap {cap}): upstream {len(theirs)} frames, ours {len(ours.frames)}; codes equal {theirs == ours.frames}")
            fixture["generate"][case] = {"clip": clip, "icl": icl, "text": text, "language": lang, "cap": cap,
                                         "ids": list(ids), "ref_ids": list(ref_ids) if icl else None, "codes": theirs}  # fmt: skip
    if fixture_path:
        fixture["made_by"] = ("bench/upstream_qwen3.py --base-dir --write-base-fixture, qwen-tts 0.1.1 / transformers "
                              f"4.57.3 / torch {torch.__version__}, librosa {librosa.__version__}, tiny Base folder seed 0")
        Path(fixture_path).write_text(json.dumps(fixture, indent=0), encoding="utf-8")
        print(f"wrote {fixture_path}")


# ---------------------------------------------------------------------------------------------
# Upstream's own entry points (Qwen3TTSModel.generate_custom_voice / generate_voice_clone), called
# as a user calls them: with no non_streaming_mode (its default) and with each explicit value.

MODES = {"default": {}, "non_streaming": {"non_streaming_mode": True}, "streaming": {"non_streaming_mode": False}}
CUSTOM_MODE_CASES = (  # (speaker, language, text, frames cap)
    ("ryan", "english", "The morning was cold.", 40),
    ("eric", "auto", "Once upon a time there were three little pigs.", 40),
)
PREPROCESSOR = {"padding_side": "left", "padding_value": 0.0, "processor_class": "Qwen3TTSProcessor",
                "return_attention_mask": True}  # fmt: skip
SPEECH_PREPROCESSOR = {"chunk_length_s": None, "feature_extractor_type": "EncodecFeatureExtractor", "feature_size": 1,
                       "overlap": None, "padding_side": "right", "padding_value": 0.0, "return_attention_mask": True,
                       "sampling_rate": 24000}  # fmt: skip


def _upstream_wrapper(d: Path):
    """Qwen3TTSModel.from_pretrained on a copy of `d` with the two preprocessor_config.json files
    of the official layout (shared/reference/qwen3tts.md §1; the tests' folders do not write them:
    our loader does not read them), and hooks that record what its generate hands the Talker."""
    import os
    import shutil

    from qwen_tts import Qwen3TTSModel

    copy = Path(tempfile.mkdtemp(prefix="qwen3-up-")) / d.name
    # the files linked, not copied (a full-size folder is 2.5 GB); the two new files are real
    shutil.copytree(d.resolve(), copy, copy_function=os.symlink)
    (copy / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR), encoding="utf-8")
    (copy / "speech_tokenizer" / "preprocessor_config.json").write_text(json.dumps(SPEECH_PREPROCESSOR), encoding="utf-8")
    m = Qwen3TTSModel.from_pretrained(str(copy))
    seen: dict = {}
    talker_generate, model_generate = m.model.talker.generate, m.model.generate

    def on_talker(**kw):
        seen["prefill"] = kw["inputs_embeds"].detach().clone()
        seen["trailing"] = kw["trailing_text_hidden"].detach().clone()
        seen["pad"] = kw["tts_pad_embed"].detach().clone()
        return talker_generate(**kw)

    def on_generate(**kw):
        seen["ids"] = kw["input_ids"][0][0].tolist()
        seen["ref_ids"] = kw["ref_ids"][0][0].tolist() if kw.get("ref_ids") and kw["ref_ids"][0] is not None else None
        seen["non_streaming_mode"] = kw["non_streaming_mode"]
        seen["max_new_tokens"] = kw["max_new_tokens"]
        codes, hidden = model_generate(**kw)
        seen["codes"] = codes[0].tolist()
        return codes, hidden

    m.model.talker.generate, m.model.generate = on_talker, on_generate
    return m, seen


def f32_b64(t) -> dict:
    """A float32 array as {"shape", "f32le_base64"}: exact and a third of the JSON digits' size."""
    import base64

    a = np.ascontiguousarray(torch.as_tensor(t).detach().float().numpy(), dtype="<f4")
    return {"shape": list(a.shape), "f32le_base64": base64.b64encode(a.tobytes()).decode("ascii")}


def _record(seen: dict) -> dict:
    return {"ids": seen["ids"], "ref_ids": seen["ref_ids"], "non_streaming_mode": seen["non_streaming_mode"],
            "prefill": f32_b64(seen["prefill"][0]), "trailing": f32_b64(seen["trailing"][0]),
            "pad": f32_b64(seen["pad"][0, 0]), "codes": seen["codes"], "raw": seen}  # fmt: skip


def modes_compare(custom_dir: Path, base_dir: Path, fixture_path: str | None, *, cap: int | None = None,
                  threads: int = 1) -> dict:
    """Upstream's default call and each explicit mode on a CustomVoice and a Base folder (the tiny
    ones for the fixture; full-size ones from bench/qwen3_full_folder.py), against ours
    (generate.build_prompt / build_clone_prompt, generate / generate_clone) with our default (no
    `streaming` passed) and each explicit layout: prefill, trailing, pad, seeded codes. For the
    Base folder also our own clone prompt (clone.make_clone_prompt: our speaker encoder and speech
    encoder) against upstream's create_voice_clone_prompt, and our whole path (our prompt, our
    default layout) against upstream's default call. `cap`: every case's max_new_tokens (upstream
    then returns cap - 1 frames); `threads`: torch threads, both sides."""
    import time

    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.clone import ClonePrompt, load_clone_stages, make_clone_prompt
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.generate import build_clone_prompt, build_prompt, generate, generate_clone
    from epub2audio.voices.qwen3tts.talker import Talker

    def mx(a, b):
        return float((torch.as_tensor(a).double() - torch.as_tensor(b).double()).abs().max())

    ours_mode = {"default": {}, "non_streaming": {"streaming": False}, "streaming": {"streaming": True}}
    # one thread for the fixture: a matmul's sums round with the thread count, and over 40 seeded
    # frames a near tie then flips a draw (measured: frame 32 of ryan/english, streaming, 1 thread
    # vs 2). Upstream and ours always run on the same count.
    torch.set_num_threads(threads)
    fixture: dict = {"seed": 3, "threads": threads, "custom": {}, "base": {}}
    worst = 0.0
    all_equal = True
    cap_override = cap
    for kind, d in (("custom", custom_dir), ("base", base_dir)):
        t0 = time.perf_counter()
        m, seen = _upstream_wrapper(d)
        ck = load_checkpoint(d)
        talker = Talker.from_state_dict(ck.talker_args, ck.state_dict)
        cp = CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
        ck.state_dict.clear()  # the stages hold their own fp32 copies
        stages = load_clone_stages(d) if kind == "base" else None
        _free()
        log(f"{kind} {d}: Talker {ck.talker_args.num_hidden_layers} x {ck.talker_args.hidden_size}; upstream "
            f"Qwen3TTSModel and our stages loaded in {time.perf_counter() - t0:.0f} s; torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads; RSS {_rss_gb():.1f} GB")  # fmt: skip
        cases = CUSTOM_MODE_CASES if kind == "custom" else CLONE_CASES
        for case in cases:
            if kind == "custom":
                speaker, lang, text, cap = case
                key = f"{speaker}/{lang}"
            else:
                key, clip, icl, text, lang, cap = case
                audio = _reference_audio(*CLONE_CLIPS[clip])
                items = m.create_voice_clone_prompt(ref_audio=(audio, 24000), ref_text=REF_TEXT if icl else None,
                                                    x_vector_only_mode=not icl)  # fmt: skip
            cap = cap_override or cap
            got = {}
            for mode, kw in MODES.items():
                torch.manual_seed(3)
                t0 = time.perf_counter()
                if kind == "custom":
                    m.generate_custom_voice(text=text, speaker=speaker, language=lang, max_new_tokens=cap, **kw)
                else:
                    m.generate_voice_clone(text=text, language=lang, voice_clone_prompt=items, max_new_tokens=cap, **kw)
                got[mode] = _record(dict(seen))
                log(f"{kind} {key}: upstream {mode} call, {len(got[mode]['codes'])} frames in {time.perf_counter() - t0:.1f} s")
            if kind == "base":
                spk_emb = items[0].ref_spk_embedding.detach().float()
                ref_codes = items[0].ref_code.tolist() if items[0].ref_code is not None else None
                mine = make_clone_prompt(d, (audio, 24000), REF_TEXT if icl else None, stages=stages)
                d_spk = mx(mine.speaker_embedding, spk_emb)
                codes_same = (mine.ref_codes is None and ref_codes is None) or (
                    mine.ref_codes is not None and ref_codes is not None and mine.ref_codes.tolist() == ref_codes)
                ids_same = (mine.ref_text_ids is None) is (not icl) and (
                    not icl or mine.ref_text_ids.tolist() == got["default"]["ref_ids"])
                all_equal &= codes_same and ids_same
                print(f"base {key}: our make_clone_prompt vs upstream create_voice_clone_prompt: x-vector max |diff| "
                      f"{d_spk:.3e} (|x| max {float(spk_emb.abs().max()):.2f}); reference codes equal {codes_same}"
                      f"{f' ({len(ref_codes)} frames)' if ref_codes else ''}; reference text ids equal {ids_same}",
                      flush=True)  # fmt: skip
            default_is = [mo for mo in ("non_streaming", "streaming")
                          if all(got["default"][f] == got[mo][f] for f in ("prefill", "trailing", "pad", "codes"))]
            ids = got["default"]["ids"]
            for mode, kw in ours_mode.items():
                up = got[mode]["raw"]
                up = {**up, "prefill": up["prefill"][0], "trailing": up["trailing"][0], "pad": up["pad"][0, 0]}
                if kind == "custom":
                    prompt, trailing, pad = build_prompt(talker, ids, ck.text_ids, speaker=speaker, language=lang, **kw)
                    res = generate(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(3),
                                   speaker=speaker, language=lang, max_frames=cap, **kw)  # fmt: skip
                else:
                    cprompt = ClonePrompt(speaker_embedding=spk_emb.numpy(),
                                          ref_codes=np.asarray(ref_codes) if icl else None,
                                          ref_text=REF_TEXT if icl else None,
                                          ref_text_ids=np.asarray(up["ref_ids"]) if icl else None, model_id="bench")  # fmt: skip
                    prompt, trailing, pad = build_clone_prompt(
                        talker, cp, ids, ck.text_ids, speaker_embedding=cprompt.speaker_embedding,
                        ref_text_ids=cprompt.ref_text_ids, ref_codes=cprompt.ref_codes, language=lang, **kw)  # fmt: skip
                    res = generate_clone(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(3),
                                         cprompt, language=lang, max_frames=cap, **kw)  # fmt: skip
                shapes = prompt.shape == (1, *up["prefill"].shape) and trailing.shape == (1, *up["trailing"].shape)
                dp = mx(prompt[0], up["prefill"]) if shapes else float("inf")
                dt = mx(trailing[0], up["trailing"]) if shapes else float("inf")
                dpad = mx(pad[0, 0], up["pad"])
                worst = max(worst, dp, dt, dpad)
                all_equal &= res.frames == up["codes"]
                print(f"{kind} {key} upstream {mode} (non_streaming_mode={up['non_streaming_mode']}) vs ours "
                      f"{kw or 'default'}: prefill {len(up['prefill'])} rows, trailing {len(up['trailing'])}; "
                      f"max |diff| prefill {dp:.3e}, trailing {dt:.3e}, pad {dpad:.3e}; "
                      f"codes equal {res.frames == up['codes']} ({len(up['codes'])} frames)")  # fmt: skip
            print(f"{kind} {key}: upstream's default call equals its {default_is} call bit for bit", flush=True)
            if kind == "base":  # our whole path: our clone prompt, our default layout
                whole = generate_clone(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(3),
                                       mine, language=lang, max_frames=cap)  # fmt: skip
                all_equal &= whole.frames == got["default"]["codes"]
                print(f"base {key}: our whole path (make_clone_prompt + generate_clone, no layout passed) vs "
                      f"upstream's default call: codes equal {whole.frames == got['default']['codes']} "
                      f"({len(got['default']['codes'])} frames)", flush=True)
            fixture[kind][key] = {"text": text, "language": lang, "cap": cap, "default_is": default_is,
                                  **({"speaker": speaker} if kind == "custom" else {"clip": clip, "icl": icl}),
                                  **({"speaker_embedding": f32_b64(spk_emb), "ref_codes": ref_codes} if kind == "base" else {}),
                                  "modes": {mo: {k: v for k, v in got[mo].items() if k != "raw"}
                                            for mo in ("non_streaming", "streaming")},
                                  "default_codes": got["default"]["codes"]}  # fmt: skip
        del m, talker, cp, stages
        _free()
    print(f"worst max |diff| over every prefill, trailing and pad: {worst:.3e}; every code sequence equal: {all_equal}")
    if fixture_path:
        fixture["made_by"] = ("bench/upstream_qwen3.py --modes-fixture: Qwen3TTSModel.from_pretrained + "
                              "generate_custom_voice / create_voice_clone_prompt + generate_voice_clone, qwen-tts 0.1.1 / "
                              f"transformers 4.57.3 / torch {torch.__version__}, fp32, torch.manual_seed(3), tiny folders seed 0")
        Path(fixture_path).write_text(json.dumps(fixture, separators=(",", ":")), encoding="utf-8")
        print(f"wrote {fixture_path}")
    return fixture


def rates_compare(base_dir: Path, fixture_path: str | None) -> None:
    """create_voice_clone_prompt (upstream's whole path: its resampling, encoder and speaker
    encoder) on the tests' reference clip made at other rates, against clone.make_clone_prompt."""
    from epub2audio.voices.qwen3tts.clone import load_clone_stages, make_clone_prompt

    torch.set_num_threads(1)
    m, _ = _upstream_wrapper(base_dir)
    stages = load_clone_stages(base_dir)
    out = {}
    for rate in (16000, 22050, 44100, 48000):
        audio = _reference_audio(2.0, 1, rate)
        item = m.create_voice_clone_prompt(ref_audio=(audio, rate), ref_text=REF_TEXT)[0]
        ours = make_clone_prompt(base_dir, (audio, rate), REF_TEXT, stages=stages)
        codes = item.ref_code.tolist()
        emb = item.ref_spk_embedding.detach().float()
        print(f"{rate} Hz: codes equal {ours.ref_codes.tolist() == codes} ({len(codes)} frames); x-vector max |diff| "
              f"{float((torch.from_numpy(ours.speaker_embedding).double() - emb.double()).abs().max()):.3e}")
        out[str(rate)] = {"codes": codes, "speaker_embedding": f32_b64(emb)}
    if fixture_path:
        Path(fixture_path).write_text(json.dumps({"made_by": "bench/upstream_qwen3.py --rates: Qwen3TTSModel."
                                                  "create_voice_clone_prompt, qwen-tts 0.1.1, tiny Base folder seed 0, "
                                                  "reference_audio(2.0, 1, rate)", "rates": out}), encoding="utf-8")


def log(msg: str) -> None:
    import os
    import time

    print(f"[{time.strftime('%H:%M:%S')} load {' '.join(f'{x:.2f}' for x in os.getloadavg())}] {msg}", flush=True)


def _free() -> None:
    import gc

    gc.collect()


def _rss_gb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1e6
    return float("nan")


def _upstream_talker(ck, cfg, dtype=torch.float32):
    """Upstream's own Qwen3TTSTalkerForConditionalGeneration (the Talker and its Code Predictor),
    built without random init and loaded strictly from the folder's bf16 tensors (cast on copy).
    The text embedding (151936 x 2048) is dropped after the strict load: these comparisons feed
    input vectors, and at fp64 it alone would be 2.5 GB."""
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSTalkerForConditionalGeneration
    from transformers.modeling_utils import no_init_weights

    with no_init_weights():
        m = Qwen3TTSTalkerForConditionalGeneration(cfg.talker_config)
    m.load_state_dict({k[len("talker."):]: v for k, v in ck.state_dict.items()}, strict=True)
    m.model.text_embedding = None
    return m.to(dtype).eval()


def _upstream_decoder(ck, scfg, dtype=torch.float32):
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Decoder
    from transformers.modeling_utils import no_init_weights

    with no_init_weights():
        m = Qwen3TTSTokenizerV2Decoder(scfg.decoder_config)
    m.load_state_dict(ck.decoder_state_dict, strict=True)
    return m.to(dtype).eval()


def _our_talker(ck):
    from epub2audio.voices.qwen3tts.talker import Talker

    t = Talker.from_state_dict(ck.talker_args, ck.state_dict)  # strict
    t.model.text_embedding = None  # not read by these comparisons (see _upstream_talker)
    return t


def full_size(d: Path, prefill: int, steps: int, n_frames: int, save_reference: str | None = None) -> int:
    """Stage by stage at full size, one implementation of one stage in memory at a time.
    `save_reference`: also write upstream's fp64 Talker / Code Predictor logits, their fp32 floors
    and the inputs (torch.save) so that bench/qwen3_backends.py --reference can hold the MLX stages
    to them from our environment (the upstream one has no mlx)."""
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config

    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.decoder import Decoder

    ck = load_checkpoint(d)
    cfg = Qwen3TTSConfig(**json.loads((d / "config.json").read_text()))
    scfg = Qwen3TTSTokenizerV2Config(**json.loads((d / "speech_tokenizer" / "config.json").read_text()))
    ta = ck.talker_args
    log(f"{d}: talker {ta.num_hidden_layers} layers x {ta.hidden_size}, code predictor "
        f"{ck.code_predictor_args.num_hidden_layers} layers, decoder {ck.decoder_args.num_hidden_layers} layers; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; RSS {_rss_gb():.1f} GB")  # fmt: skip
    g = torch.Generator().manual_seed(7)
    n = prefill + steps
    x = torch.randn(1, n, ta.hidden_size, generator=g)
    hid, first = torch.randn(1, 1, ta.hidden_size, generator=g), torch.randn(1, 1, ta.hidden_size, generator=g)
    codes = torch.randint(0, 2048, (14,), generator=g).tolist()
    frames = torch.randint(0, 2048, (1, 16, n_frames), generator=g)

    def mx(a, b):
        return float((a.double() - b.double()).abs().max())

    def up_talker_logits(m, xx):
        return m.codec_head(m.model(inputs_embeds=xx, use_cache=False).last_hidden_state)[0]

    def up_cp_logits(m, dt):
        cp = m.code_predictor
        parts = [hid.to(dt), first.to(dt)] + [cp.model.codec_embedding[i](torch.tensor([[c]])) for i, c in enumerate(codes)]
        h = cp.model(inputs_embeds=cp.small_to_mtp_projection(torch.cat(parts, 1)), use_cache=False).last_hidden_state
        return torch.stack([cp.lm_head[i](h[0, i + 1]) for i in range(15)])

    res = {}
    with torch.inference_mode():
        t = _our_talker(ck)
        res["ours_full"] = t(x)[0]
        step = t.start_decoding(x[:, :prefill])
        res["ours_session"] = torch.stack([step(None)[0]] + [step(x[0, i])[0] for i in range(prefill, n)])
        log(f"ours Talker: strict load ok, logits [{n}, {ta.vocab_size}]; RSS {_rss_gb():.1f} GB")
        del t, step
        _free()
        cp = CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
        res["ours_cp"] = cp(hid[0, 0], first[0, 0], codes)
        del cp
        _free()
        up = _upstream_talker(ck, cfg)
        log(f"upstream Talker + Code Predictor fp32: strict load ok; RSS {_rss_gb():.1f} GB")
        res["up32"], res["cp32"] = up_talker_logits(up, x), up_cp_logits(up, torch.float32)
        up = up.double()
        _free()
        log(f"upstream fp64: RSS {_rss_gb():.1f} GB")
        res["up64"], res["cp64"] = up_talker_logits(up, x.double()), up_cp_logits(up, torch.float64)
        del up
        _free()
        u32, u64 = res["up32"], res["up64"]
        log(f"talker logits [{n} positions x {ta.vocab_size}]: upstream fp32 vs fp64 {mx(u32, u64):.3e}; "
            f"ours vs upstream fp64 {mx(res['ours_full'], u64):.3e}; ours KV-cache session (prefill {prefill} + "
            f"{steps} teacher-forced steps) vs fp64 {mx(res['ours_session'], u64[prefill - 1:]):.3e}; "
            f"logit scale: max |logit| {float(u64.abs().max()):.2f}, argmax agree ours/fp64 "
            f"{int((res['ours_full'].argmax(-1) == u64.argmax(-1)).sum())}/{n}")  # fmt: skip
        log(f"code predictor logits [15 heads x 2048]: upstream fp32 vs fp64 {mx(res['cp32'], res['cp64']):.3e}; "
            f"ours vs fp64 {mx(res['ours_cp'], res['cp64']):.3e}; max |logit| {float(res['cp64'].abs().max()):.2f}")
        if save_reference:
            torch.save({"x": x, "hid": hid, "first": first, "codes": codes, "prefill": prefill,
                        "talker64": u64, "talker_floor": mx(u32, u64), "cp64": res["cp64"],
                        "cp_floor": mx(res["cp32"], res["cp64"])}, save_reference)  # fmt: skip
            log(f"upstream fp64 references written to {save_reference}")
        dec = Decoder.from_state_dict(ck.decoder_args, ck.decoder_state_dict)
        wours = dec.decode(frames[0].T)
        del dec
        _free()
        up_dec = _upstream_decoder(ck, scfg)
        w32 = up_dec.chunked_decode(frames)[0, 0]
        up_dec = up_dec.double()
        w64 = up_dec.chunked_decode(frames)[0, 0]
        del up_dec
        _free()
        log(f"decoder waveform [{n_frames} frames, {wours.numel()} samples]: upstream fp32 vs fp64 {mx(w32, w64):.3e}; "
            f"ours vs fp64 {mx(wours, w64):.3e}; ours vs upstream fp32 {mx(wours, w32):.3e}; peak {float(w64.abs().max()):.3f}")
    return 0


def speed(d: Path, rounds: int, prefill: int, steps: int, cp_frames: int, n_frames: int) -> int:
    """Ours vs upstream (both fp32, same threads), per stage, interleaved ABBA rounds; best of rounds."""
    import time

    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config

    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.decoder import Decoder
    from epub2audio.voices.qwen3tts.sampling import warp_and_draw

    ck = load_checkpoint(d)
    cfg = Qwen3TTSConfig(**json.loads((d / "config.json").read_text()))
    scfg = Qwen3TTSTokenizerV2Config(**json.loads((d / "speech_tokenizer" / "config.json").read_text()))
    ga, H = ck.generation, ck.talker_args.hidden_size
    talker, cp = _our_talker(ck), CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
    up = _upstream_talker(ck, cfg)
    dec, up_dec = Decoder.from_state_dict(ck.decoder_args, ck.decoder_state_dict), _upstream_decoder(ck, scfg)
    ck.state_dict.clear()
    _free()
    log(f"speed, fp32, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{rounds} rounds; RSS {_rss_gb():.1f} GB")
    g = torch.Generator().manual_seed(9)
    x = torch.randn(1, prefill + steps, H, generator=g)
    hid, first = torch.randn(1, 1, H, generator=g), torch.randn(1, 1, H, generator=g)
    frames = torch.randint(0, 2048, (1, 16, n_frames), generator=g)
    sub = dict(do_sample=ga.subtalker_dosample, temperature=ga.subtalker_temperature, top_k=ga.subtalker_top_k,
               top_p=ga.subtalker_top_p)  # fmt: skip

    def ours_talker():
        step = talker.start_decoding(x[:, :prefill])
        step(None)
        t0 = time.perf_counter()
        for i in range(prefill, prefill + steps):
            step(x[0, i])
        return (time.perf_counter() - t0) / steps

    def up_talker():
        out = up.model(inputs_embeds=x[:, :prefill], use_cache=True)
        up.codec_head(out.last_hidden_state[:, -1:])
        pkv = out.past_key_values
        t0 = time.perf_counter()
        for i in range(prefill, prefill + steps):
            out = up.model(inputs_embeds=x[:, i : i + 1], past_key_values=pkv, use_cache=True)
            pkv = out.past_key_values
            up.codec_head(out.last_hidden_state)
        return (time.perf_counter() - t0) / steps

    def ours_cp():
        gen = torch.Generator().manual_seed(1)
        t0 = time.perf_counter()
        for _ in range(cp_frames):
            cp.predict(hid[0, 0], first[0, 0], lambda lg: warp_and_draw(lg.clone(), gen, **sub))
        return (time.perf_counter() - t0) / cp_frames

    def up_cp():
        torch.manual_seed(1)
        t0 = time.perf_counter()
        for _ in range(cp_frames):  # as upstream's Talker forward calls it for every frame
            up.code_predictor.generate(inputs_embeds=torch.cat((hid, first), dim=1), max_new_tokens=15,
                                       do_sample=sub["do_sample"], top_p=sub["top_p"], top_k=sub["top_k"],
                                       temperature=sub["temperature"], output_hidden_states=True,
                                       return_dict_in_generate=True)  # fmt: skip
        return (time.perf_counter() - t0) / cp_frames

    seconds = n_frames / 12.5

    def ours_dec():
        t0 = time.perf_counter()
        dec.decode(frames[0].T)
        return (time.perf_counter() - t0) / seconds

    def up_dec_run():
        t0 = time.perf_counter()
        up_dec.chunked_decode(frames)
        return (time.perf_counter() - t0) / seconds

    stages = {
        "Talker step (s/step)": {"upstream": up_talker, "ours": ours_talker},
        "Code Predictor frame (s/frame)": {"upstream": up_cp, "ours": ours_cp},
        "decoder (s per s of audio)": {"upstream": up_dec_run, "ours": ours_dec},
    }
    best = {}
    with torch.inference_mode():
        for stage, runs in stages.items():
            for fn in runs.values():
                fn()  # warm-up, untimed
            times = {n: [] for n in runs}
            for r in range(rounds):
                order = list(runs) if r % 2 == 0 else list(runs)[::-1]
                for name in order:
                    times[name].append(runs[name]())
                log(f"  {stage} round {r + 1}: " + ", ".join(f"{n} {times[n][-1]:.4f}" for n in runs))
            best[stage] = times
    print(f"\n## Upstream qwen-tts 0.1.1 vs ours, {d.name} (Talker {ck.talker_args.num_hidden_layers} x {H}), fp32, CPU, "
          f"{torch.get_num_threads()} threads")
    print(f"Talker step after a {prefill}-position prefill ({steps} steps), Code Predictor frame = 15 draws "
          f"({cp_frames} frames; upstream: its code_predictor.generate as its Talker calls it), decoder on "
          f"{n_frames} frames ({seconds:.1f} s of audio). Best of {rounds} interleaved rounds (ABBA); "
          f"ratio = upstream / ours (> 1: ours faster)\n")  # fmt: skip
    print("| stage | variant | seconds (all rounds) | upstream / this |\n|---|---|---|---|")
    for stage, times in best.items():
        for name, ts in times.items():
            ratio = "" if name == "upstream" else f"{min(times['upstream']) / min(ts):.2f}x"
            print(f"| {stage} | {name} | {min(ts):.4f} ({', '.join(f'{t:.4f}' for t in ts)}) | {ratio} |")
    per_audio = {n: 12.5 * (min(best["Talker step (s/step)"][n]) + min(best["Code Predictor frame (s/frame)"][n]))
                 + min(best["decoder (s per s of audio)"][n]) for n in ("upstream", "ours")}  # fmt: skip
    print(f"\nRTF (12.5 x (Talker step + CP frame) + decoder per s): upstream {per_audio['upstream']:.2f}, "
          f"ours {per_audio['ours']:.2f}; upstream / ours {per_audio['upstream'] / per_audio['ours']:.2f}x")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", help="a Qwen3-TTS folder (default: write the tests' tiny one)")
    ap.add_argument("--write-fixture", help="write upstream's fp64 outputs (subsampled) and fp32 floors as JSON here")
    ap.add_argument("--base-dir", help="a tiny Base folder (random_weights.write_tiny_base_model): compare the cloning stages")
    ap.add_argument("--write-base-fixture", help="write upstream's cloning-stage outputs as JSON here")
    ap.add_argument("--skip-custom", action="store_true", help="only the Base comparisons")
    ap.add_argument("--full", action="store_true", help="the stage comparison at full size (--dir: a folder "
                    "from bench/qwen3_full_folder.py), one stage and one implementation in memory at a time")
    ap.add_argument("--speed", action="store_true", help="per-stage speed, ours vs upstream, interleaved rounds")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, help="torch threads (default: 2; --modes: 1, as its fixture)")
    ap.add_argument("--prefill", type=int, default=40)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--frames", type=int, default=25, help="decoder frames (12.5 a second)")
    ap.add_argument("--cp-frames", type=int, default=4)
    ap.add_argument("--modes", nargs=2, metavar=("CUSTOM_DIR", "BASE_DIR"), help="upstream's default call and "
                    "each non_streaming_mode through Qwen3TTSModel on these folders, against ours")
    ap.add_argument("--modes-fixture", help="with --modes: write what upstream's entry points fed the Talker as JSON")
    ap.add_argument("--cap", type=int, help="with --modes: every case's max_new_tokens (cap - 1 frames; full size: "
                    "a few, for time)")
    ap.add_argument("--rates", nargs=2, metavar=("BASE_DIR", "FIXTURE"), help="upstream's clone prompt from "
                    "the reference clip at 16, 22.05, 44.1 and 48 kHz, against ours; FIXTURE '-' writes nothing")
    ap.add_argument("--save-reference", help="with --full: write upstream's fp64 logits + inputs here (torch.save)")
    a = ap.parse_args()
    _stub_torchaudio()
    if a.rates:
        rates_compare(Path(a.rates[0]), None if a.rates[1] == "-" else a.rates[1])
        return 0
    if a.modes:
        modes_compare(Path(a.modes[0]), Path(a.modes[1]), a.modes_fixture, cap=a.cap,
                      threads=a.threads or 1)
        return 0
    if a.base_dir:
        clone_compare(Path(a.base_dir), a.write_base_fixture)
        if a.skip_custom:
            return 0
    if a.full or a.speed:
        torch.set_num_threads(a.threads or 2)
        if not a.dir:
            ap.error("--full / --speed need --dir (a full-size folder from bench/qwen3_full_folder.py)")
        if a.full:
            full_size(Path(a.dir), a.prefill, a.steps, a.frames, a.save_reference)
        if a.speed:
            speed(Path(a.dir), a.rounds, a.prefill, a.steps, a.cp_frames, a.frames)
        return 0
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Decoder

    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.decoder import Decoder
    from epub2audio.voices.qwen3tts.talker import Talker

    d = Path(a.dir) if a.dir else None
    if d is None:
        from tests.qwen3tts.random_weights import write_tiny_model

        d = write_tiny_model(Path(tempfile.mkdtemp(prefix="qwen3tts-")) / "tiny", seed=0)
    ck = load_checkpoint(d)
    cfg = Qwen3TTSConfig(**json.loads((d / "config.json").read_text()))
    up = Qwen3TTSForConditionalGeneration(cfg).eval()
    missing, unexpected = up.load_state_dict({k: v.float() for k, v in ck.state_dict.items()}, strict=False)
    print(f"upstream main model: {len(missing)} missing, {len(unexpected)} unexpected keys "
          f"(missing outside speaker_encoder: {[k for k in missing if not k.startswith('speaker_encoder')][:3]})")
    scfg = Qwen3TTSTokenizerV2Config(**json.loads((d / "speech_tokenizer" / "config.json").read_text()))
    up_dec = Qwen3TTSTokenizerV2Decoder(scfg.decoder_config).eval()
    up_dec.load_state_dict(ck.decoder_state_dict, strict=True)
    print("upstream decoder: strict load ok")

    talker = Talker.from_state_dict(ck.talker_args, ck.state_dict)
    cp = CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
    dec = Decoder.from_state_dict(ck.decoder_args, ck.decoder_state_dict)
    up64 = Qwen3TTSForConditionalGeneration(cfg).eval()
    up64.load_state_dict({k: v.float() for k, v in ck.state_dict.items()}, strict=False)
    up64 = up64.double()
    up_dec64 = Qwen3TTSTokenizerV2Decoder(scfg.decoder_config).eval()
    up_dec64.load_state_dict(ck.decoder_state_dict, strict=True)
    up_dec64 = up_dec64.double()
    g = torch.Generator().manual_seed(7)
    H = ck.talker_args.hidden_size
    x = torch.randn(1, 14, H, generator=g)

    def mx(a, b):
        return float((a.double() - b.double()).abs().max())

    with torch.inference_mode():
        def up_talker(m, xx):
            h = m.talker.model(inputs_embeds=xx, use_cache=False).last_hidden_state
            return m.talker.codec_head(h)

        u32, u64 = up_talker(up, x), up_talker(up64, x.double())
        ours = talker(x)
        step = talker.start_decoding(x[:, :10])
        sess = torch.stack([step(None)[0]] + [step(x[0, i])[0] for i in range(10, 14)])
        print(f"talker logits [14 positions]: upstream fp32 vs fp64 {mx(u32, u64):.3e}; ours vs upstream fp64 "
              f"{mx(ours, u64):.3e}; ours KV-cache session (prefill 10 + 4 steps) vs fp64 {mx(sess, u64[0, 9:]):.3e}")

        hid, first = torch.randn(1, 1, H, generator=g), torch.randn(1, 1, H, generator=g)
        codes = torch.randint(0, 2048, (14,), generator=g).tolist()

        def up_cp(m, hh, ff, dt):
            parts = [hh, ff] + [m.talker.code_predictor.model.codec_embedding[i](torch.tensor([[c]])) for i, c in enumerate(codes)]
            h = m.talker.code_predictor.model(inputs_embeds=torch.cat(parts, 1).to(dt), use_cache=False).last_hidden_state
            return torch.stack([m.talker.code_predictor.lm_head[i](h[0, i + 1]) for i in range(15)])

        c32, c64 = up_cp(up, hid, first, torch.float32), up_cp(up64, hid.double(), first.double(), torch.float64)
        cours = cp(hid[0, 0], first[0, 0], codes)
        print(f"code predictor logits [15 heads]: upstream fp32 vs fp64 {mx(c32, c64):.3e}; ours vs fp64 {mx(cours, c64):.3e}")

        frames = torch.randint(0, 2048, (1, 16, 20), generator=g)
        w32, w64 = up_dec.chunked_decode(frames), up_dec64.chunked_decode(frames)
        wours = dec.decode(frames[0].T)
        print(f"decoder waveform [20 frames, {wours.numel()} samples]: upstream fp32 vs fp64 {mx(w32, w64):.3e}; "
              f"ours vs fp64 {mx(wours, w64[0, 0]):.3e}; peak {float(w64.abs().max()):.3f}")
        draws = sampling_replay()
        from epub2audio.voices.qwen3tts.generate import generate

        ids = [151644, 5, 10, 40, 41, 42, 43, 44, 45, 151645, 10, 151644, 5, 10]
        replay = {}
        for spk, lang, n in (("ryan", "english", 40), ("eric", "auto", 40)):
            torch.manual_seed(3)
            codes, _ = up.generate(input_ids=[torch.tensor([ids])], languages=[lang], speakers=[spk],
                                   non_streaming_mode=False, max_new_tokens=n, **{k: getattr(ck.generation, k) for k in (
                                       "do_sample", "top_k", "top_p", "temperature", "repetition_penalty",
                                       "subtalker_dosample", "subtalker_top_k", "subtalker_top_p", "subtalker_temperature")})
            theirs = codes[0].tolist()
            res = generate(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(3),
                           speaker=spk, language=lang, max_frames=n, streaming=True)  # as non_streaming_mode=False
            print(f"generate {spk}/{lang} cap {n}: upstream {len(theirs)} frames, ours {len(res.frames)}; codes equal {theirs == res.frames}")
            replay[f"{spk}/{lang}/{n}"] = theirs
        if a.write_fixture:
            fixture = {
                "made_by": "bench/upstream_qwen3.py --write-fixture, qwen-tts 0.1.1 / transformers 4.57.3 / torch "
                + torch.__version__ + ", upstream modules in fp64 on the tests' tiny folder (seed 0)",
                "inputs_seed": 7, "talker_cols_step": 64, "cp_cols_step": 64, "wav_step": 128,
                "talker_logits": u64[0, :, ::64].tolist(), "talker_floor": mx(u32, u64),
                "cp_logits": c64[:, ::64].tolist(), "cp_floor": mx(c32, c64),
                "wav": w64[0, 0, ::128].tolist(), "wav_floor": mx(w32, w64),
                "sampling": draws, "generate_ids": ids, "generate_seed": 3, "generate": replay,
            }  # fmt: skip
            Path(a.write_fixture).write_text(json.dumps(fixture, indent=0), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
