"""Our Qwen3-TTS port against upstream's own modules (qwen-tts 0.1.1), stage by stage.

Run with the interpreter of a separate environment holding `qwen-tts==0.1.1` (it pins
transformers 4.57.3, so never ours), e.g.:

    PYTHONPATH=engine:. /work/main/.venv/bin/python -c \
        "from tests.qwen3tts.random_weights import write_tiny_model; write_tiny_model('/tmp/qwen3-tiny')"
    PYTHONPATH=engine:. /work/qwen-upstream/bin/python bench/upstream_qwen3.py --dir /tmp/qwen3-tiny \
        [--write-fixture tests/qwen3tts/upstream_tiny.json]

(--dir is needed in practice: writing the folder borrows tests/cosyvoice3/fixtures.py's BPE helpers,
which import onnx, absent from the upstream environment.)

It writes the tests' tiny random folder (tests/qwen3tts/random_weights.py), builds upstream's
Qwen3TTSForConditionalGeneration and Qwen3TTSTokenizerV2Decoder from its config files, loads the
folder's tensors into them with strict=True (proving the key names and shapes), and compares on
the same inputs: Talker logits (prefill and teacher-forced steps), Code Predictor logits, decoder
waveform. Upstream's floor is its own fp32 run against its fp64 run; ours is reported against
upstream fp64 beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", help="a Qwen3-TTS folder (default: write the tests' tiny one)")
    ap.add_argument("--write-fixture", help="write upstream's fp64 outputs (subsampled) and fp32 floors as JSON here")
    a = ap.parse_args()
    _stub_torchaudio()
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
                           speaker=spk, language=lang, max_frames=n)
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
