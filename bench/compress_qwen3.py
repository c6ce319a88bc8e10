"""Qwen3-TTS compression at full size on random weights: `epub2audio model compress` side by side with
the uncompressed folder (disk by part, peak RSS of a fresh process, load time, seconds per stage,
deviation), against swift-qwen3-tts's table (-67.6 % disk, -58.6 % peak memory).

    nice python bench/compress_qwen3.py write --out /work/tmp/qwen3c/src [--tiktoken qwen.tiktoken]
    nice python bench/compress_qwen3.py compress --src /work/tmp/qwen3c/src --root /work/tmp/qwen3c
    nice python bench/compress_qwen3.py measure --root /work/tmp/qwen3c --frames 24 > bench/results/compress-qwen3-full-2core-busy.txt

`write` makes a Qwen3-TTS-12Hz-0.6B CustomVoice folder with the official shapes (tests' writer with
the real dimensions of /work/shared/reference/qwen3tts.md; bf16 main file, fp32 speech tokenizer with
an encoder.* part shaped as transformers' MimiModel minus its decoder), one tensor at a time.
`--tiktoken` gives it Qwen's real 151,643-token byte-level BPE (a qwen.tiktoken rank file; converted
to vocab.json + merges.txt as transformers' TikTokenConverter does), so vocabulary pruning keeps
what it would keep on the real vocabulary; without it the tests' toy tokenizer is used and pruning
figures mean nothing. Nothing here downloads anything.

`measure` runs each folder in a fresh process (peak RSS = ru_maxrss), then compares: teacher-forced
log-probs along the source's own seeded codes (Talker codebook 1 and the Code Predictor's 15),
the compressed folder's own seeded codes (agreement, first divergent frame; random weights make
codes diverge fast, so the log-prob deviation is the figure that means something), and the
waveform of the source's codes through each decoder (SNR).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT)]

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs back home to sleep."
VARIANTS = {  # name -> compress_folder options
    "lossless": dict(llm="bf16", decoder="fp32", vocab=("en",), prompt_parts="drop"),
    "preset": dict(llm="int4", decoder="fp16", vocab=("en",), prompt_parts="drop"),
}
SWIFT = {"disk": -67.6, "peak": -58.6}


def full_config() -> dict:
    from tests.qwen3tts.random_weights import tiny_config

    c = tiny_config()
    t = c["talker_config"]
    t.update(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
             head_dim=128, text_hidden_size=2048,
             rope_scaling={"interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"})
    t["code_predictor_config"].update(hidden_size=1024, intermediate_size=3072, num_hidden_layers=5, num_attention_heads=16,
                                      num_key_value_heads=8, head_dim=128, layer_types=["full_attention"] * 5)
    c["speaker_encoder_config"] = {"enc_dim": 1024, "sample_rate": 24000}
    return c


ENCODER_CONFIG = {
    "_frame_rate": 12.5, "audio_channels": 1, "codebook_dim": 256, "codebook_size": 2048, "compress": 2,
    "dilation_growth_rate": 2, "head_dim": 64, "hidden_act": "gelu", "hidden_size": 512, "intermediate_size": 2048,
    "kernel_size": 7, "last_kernel_size": 3, "residual_kernel_size": 3, "num_filters": 64, "num_hidden_layers": 8,
    "num_attention_heads": 8, "num_key_value_heads": 8, "num_quantizers": 32, "num_semantic_quantizers": 1,
    "num_residual_layers": 1, "sliding_window": 250, "upsampling_ratios": [8, 6, 5, 4], "use_causal_conv": True,
    "rope_theta": 10000, "norm_eps": 1e-5, "layer_scale_initial_scale": 0.01,
    "vector_quantization_hidden_dimension": 256, "sampling_rate": 24000,
}  # fmt: skip


def full_speech_config() -> dict:
    from tests.qwen3tts.random_weights import tiny_speech_config

    c = tiny_speech_config()
    c["decoder_config"].update(latent_dim=1024, codebook_dim=512, decoder_dim=1536, hidden_size=512, intermediate_size=1024,
                               head_dim=64, num_attention_heads=16, num_key_value_heads=16, num_hidden_layers=8)
    c["encoder_config"] = dict(ENCODER_CONFIG)
    return c


def encoder_shapes() -> dict:
    """encoder.* = HF MimiModel minus its decoder side (upstream's Qwen3TTSTokenizerV2Encoder)."""
    import torch
    from transformers import MimiConfig, MimiModel

    cfg = {k: v for k, v in ENCODER_CONFIG.items() if k != "_frame_rate"}
    with torch.device("meta"):
        model = MimiModel(MimiConfig(**cfg))
    drop = ("decoder.", "decoder_transformer.", "upsample.")
    return {"encoder." + k: tuple(v.shape) for k, v in model.state_dict().items() if not k.startswith(drop)}


def write_tiktoken_tokenizer(d: Path, ranks_file: Path) -> None:
    """vocab.json + merges.txt from a tiktoken rank file, and Qwen's added tokens from 151643."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    from tests.qwen3tts.random_weights import SPECIAL_TOKENS, write_tokenizer

    b2u = bytes_to_unicode()
    ranks = {}
    for line in ranks_file.read_text().splitlines():
        tok, rank = line.split()
        ranks[base64.b64decode(tok)] = int(rank)
    text = {b: "".join(b2u[x] for x in b) for b in ranks}
    vocab = {text[b]: r for b, r in ranks.items()}
    merges = []
    for b, r in ranks.items():  # every split of a token into two tokens, ordered as the merged token's rank
        local = [(b[:i], b[i:], r) for i in range(1, len(b)) if b[:i] in ranks and b[i:] in ranks]
        merges += sorted(local, key=lambda m: (ranks[m[0]], ranks[m[1]]))
    merges.sort(key=lambda m: m[2])
    write_tokenizer(d)  # tokenizer_config.json with the added tokens (its toy vocab/merges replaced below)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    added = {}
    for i in range(len(ranks), 151676):
        tok = SPECIAL_TOKENS.get(i, f"<|reserved_{i}|>")
        added[str(i)] = {"content": tok, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                         "special": True}
    cfg["added_tokens_decoder"] = added
    (d / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    (d / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (d / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{text[a]} {text[b]}\n" for a, b, _ in merges), encoding="utf-8")


def cmd_write(args) -> None:
    import torch
    from safetensors.torch import save_file

    from epub2audio.voices.qwen3tts.checkpoint import expected_shapes, read_args
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.decoder import Decoder
    from epub2audio.voices.qwen3tts.talker import Talker
    from tests.qwen3tts.random_weights import GENERATION_CONFIG, _fill, write_tokenizer

    out = Path(args.out)
    (out / "speech_tokenizer").mkdir(parents=True, exist_ok=False)
    config, speech = full_config(), full_speech_config()
    talker, cp, dec = read_args(config, speech)
    gen = torch.Generator().manual_seed(0)
    main = {}
    for key, shape in [*(("talker." + k, s) for k, s in expected_shapes(Talker, talker).items()),
                       *(("talker.code_predictor." + k, s) for k, s in expected_shapes(CodePredictor, cp).items())]:
        main[key] = _fill({key: shape}, gen)[key].to(torch.bfloat16)
    save_file(main, str(out / "model.safetensors"))
    del main
    sp = {"decoder." + k: _fill({k: s}, gen)[k] for k, s in expected_shapes(Decoder, dec).items()}
    for key, shape in encoder_shapes().items():
        sp[key] = _fill({key: shape}, gen)[key]
    save_file(sp, str(out / "speech_tokenizer" / "model.safetensors"))
    n_speech = sum(v.numel() for v in sp.values())
    del sp
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (out / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2), encoding="utf-8")
    (out / "speech_tokenizer" / "config.json").write_text(json.dumps(speech, indent=2), encoding="utf-8")
    if args.tiktoken:
        write_tiktoken_tokenizer(out, Path(args.tiktoken))
    else:
        write_tokenizer(out)
    print(f"wrote {out}: speech tokenizer {n_speech:,} elements (official 170,557,441)")


def cmd_compress(args) -> None:
    from epub2audio.voices.qwen3tts.compress import compress_folder

    for name, opts in VARIANTS.items():
        dst = Path(args.root) / name
        if dst.exists():
            continue
        t0 = time.perf_counter()
        m = compress_folder(args.src, dst, **opts)
        print(f"{name}: {time.perf_counter() - t0:.0f} s, kept text ids {m['kept_text_ids']}, fp16 report {m['decoder_fp16']}")


# ---------------------------------------------------------------------------------------------
# One folder in a fresh process


def prompt_ids(tokenizer, text_ids: dict) -> list[int]:
    role = [text_ids["im_start_token_id"], *tokenizer("assistant\n", add_special_tokens=False)["input_ids"]]
    suffix = [text_ids["im_end_token_id"], *tokenizer("\n", add_special_tokens=False)["input_ids"], *role]
    return role + tokenizer(TEXT, add_special_tokens=False)["input_ids"] + suffix


def teacher_forced(talker, cp, ids, text_ids, frames):
    """log-probs [T, 16, 3072 | 2048] of each frame's distributions along `frames` (generate's inputs)."""
    import torch

    from epub2audio.voices.qwen3tts.generate import build_prompt

    prompt, trailing, pad = build_prompt(talker, ids, text_ids, speaker="ryan", language="english")
    step = talker.start_decoding(prompt)
    logits, hidden = step(None)
    talker_lp, cp_lp = [], []
    with torch.inference_mode():
        for k, frame in enumerate(frames):
            talker_lp.append(torch.log_softmax(logits, -1))
            first = talker.model.codec_embedding.weight[frame[0]]
            cp_lp.append(torch.log_softmax(cp(hidden, first, frame[1:]), -1))
            x = first + sum(cp.embed_code(g, c) for g, c in enumerate(frame[1:], 1))
            x = x + (trailing[0, k] if k < trailing.shape[1] else pad[0, 0])
            logits, hidden = step(x)
    return torch.stack(talker_lp), torch.stack(cp_lp)


def cmd_run_one(args) -> None:
    import torch

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.generate import generate
    from epub2audio.voices.qwen3tts.vocab import check_text_ids, load_text_tokenizer

    t0 = time.perf_counter()
    ck = load_checkpoint(args.dir)
    talker, cp, dec = ck.build_talker(), ck.build_code_predictor(), ck.build_decoder()
    load_s = time.perf_counter() - t0
    rss_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tok = load_text_tokenizer(args.dir)
    ids = prompt_ids(tok, ck.text_ids)
    check_text_ids(ck.row_of_id, ids, tok)
    t0 = time.perf_counter()
    res = generate(talker, cp, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(3), speaker="ryan",
                   language="english", max_frames=args.frames + 1)
    gen_s = time.perf_counter() - t0
    ref = json.loads(Path(args.ref).read_text()) if args.ref else res.frames
    t0 = time.perf_counter()
    tl, cl = teacher_forced(talker, cp, ids, ck.text_ids, ref)
    tf_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    wav = dec.decode(torch.tensor(ref))
    dec_s = time.perf_counter() - t0
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    torch.save({"talker_lp": tl, "cp_lp": cl, "wav": wav}, args.save)
    audio_s = len(ref) / 12.5
    print(json.dumps({"load_s": load_s, "rss_load": rss_load, "rss_peak": rss_peak, "frames": res.frames, "n_ids": len(ids),
                      "gen_rtf": gen_s / (len(res.frames) / 12.5), "tf_rtf": tf_s / audio_s, "dec_rtf": dec_s / audio_s}))


def disk_parts(d: Path) -> dict:
    parts = {"text embedding": 0, "talker+code predictor (rest)": 0, "decoder": 0, "encoder": 0, "small files": 0}
    from safetensors import safe_open

    def add_file(path: Path, classify):
        with safe_open(str(path), framework="pt") as f:
            for k in f.keys():
                sl = f.get_slice(k)
                n = math.prod(sl.get_shape()) * {"BF16": 2, "F16": 2, "F32": 4, "I8": 1, "U8": 1, "I32": 4}[sl.get_dtype()]
                parts[classify(k)] += n

    for p in d.rglob("*.safetensors"):
        if p.parent.name == "speech_tokenizer":
            add_file(p, lambda k: "encoder" if k.startswith("encoder.") else "decoder")
        else:
            add_file(p, lambda k: "text embedding" if ".text_embedding." in k else "talker+code predictor (rest)")
    total = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
    parts["small files"] = total - sum(parts.values())
    parts["total"] = total
    return parts


def snr(ref, x) -> float:
    noise = float(((ref - x) ** 2).sum())
    return float("inf") if noise == 0 else 10 * math.log10(float((ref**2).sum()) / noise)


def cmd_measure(args) -> None:
    import torch

    root = Path(args.root)
    names = ["src", *VARIANTS]
    runs = {}
    for name in names:
        cmd = [sys.executable, __file__, "run-one", "--dir", str(root / name), "--frames", str(args.frames),
               "--save", str(root / f"{name}.pt")]
        if name != "src":
            cmd += ["--ref", str(root / "src-codes.json")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"{name}: {proc.stderr.strip().splitlines()[-1]}")
        runs[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        if name == "src":
            (root / "src-codes.json").write_text(json.dumps(runs[name]["frames"]))
    src_disk = disk_parts(root / "src")
    print(f"# Qwen3-TTS-12Hz-0.6B CustomVoice, full size, random weights; {args.frames} frames, text {TEXT!r}")
    print(f"# {os.cpu_count()} cores shared with other jobs (busy), torch threads {os.environ.get('BENCH_THREADS', '2')}")
    for name, opts in VARIANTS.items():
        print(f"# {name}: " + " ".join(f"--{k.replace('_', '-')} {' '.join(v) if isinstance(v, tuple) else v}" for k, v in opts.items()))
    print()
    print("disk by part (MB)")
    disks = {n: disk_parts(root / n) for n in names}
    print(f"{'part':32}" + "".join(f"{n:>12}" for n in names))
    for part in src_disk:
        print(f"{part:32}" + "".join(f"{disks[n][part] / 1e6:12.1f}" for n in names))
    print(f"{'change of total':32}{'':12}" + "".join(f"{100 * (disks[n]['total'] / src_disk['total'] - 1):+11.1f}%" for n in VARIANTS))
    print()
    print("fresh process (one each)")
    rows = [("peak RSS after load (GB)", lambda r: f"{r['rss_load'] / 1e9:.2f}"),
            ("peak RSS after run (GB)", lambda r: f"{r['rss_peak'] / 1e9:.2f}"),
            ("load + build (s)", lambda r: f"{r['load_s']:.1f}"),
            ("generate RTF (talker+CP, own codes)", lambda r: f"{r['gen_rtf']:.2f}"),
            ("teacher-forced RTF (talker+CP)", lambda r: f"{r['tf_rtf']:.2f}"),
            ("decoder RTF", lambda r: f"{r['dec_rtf']:.2f}")]
    print(f"{'':36}" + "".join(f"{n:>12}" for n in names))
    for label, fmt in rows:
        print(f"{label:36}" + "".join(f"{fmt(runs[n]):>12}" for n in names))
    print(f"{'change of peak RSS after run':36}{'':12}" + "".join(
        f"{100 * (runs[n]['rss_peak'] / runs['src']['rss_peak'] - 1):+11.1f}%" for n in VARIANTS))
    print()
    print(f"swift-qwen3-tts's table: disk {SWIFT['disk']:+.1f} %, peak {SWIFT['peak']:+.1f} % (MLX, int4 kernels)")
    print()
    print("deviation from the source (teacher-forced along the source's seeded codes; source's decoder on the same codes)")
    ref = torch.load(root / "src.pt")
    src_frames = runs["src"]["frames"]
    for name in VARIANTS:
        got = torch.load(root / f"{name}.pt")
        dt = (got["talker_lp"] - ref["talker_lp"]).abs()
        dc = (got["cp_lp"] - ref["cp_lp"]).abs()
        p_t, p_c = ref["talker_lp"].exp(), ref["cp_lp"].exp()
        kl_t = float((p_t * (ref["talker_lp"] - got["talker_lp"])).sum(-1).mean())
        kl_c = float((p_c * (ref["cp_lp"] - got["cp_lp"])).sum(-1).mean())
        codes = torch.tensor(src_frames)
        chosen_t = (got["talker_lp"].gather(-1, codes[:, :1]) - ref["talker_lp"].gather(-1, codes[:, :1])).abs()
        chosen_c = (got["cp_lp"].gather(-1, codes[:, 1:, None]) - ref["cp_lp"].gather(-1, codes[:, 1:, None])).abs()
        own = runs[name]["frames"]
        n = min(len(own), len(src_frames))
        first_div = next((k for k in range(n) if own[k] != src_frames[k]), None)
        first_div_cb1 = next((k for k in range(n) if own[k][0] != src_frames[k][0]), None)
        agree = sum(a == b for fa, fb in zip(own, src_frames) for a, b in zip(fa, fb)) / max(1, 16 * n)
        print(f"{name}:")
        print(f"  talker log-probs: max |d| {float(dt.max()):.3g}, mean |d| {float(dt.mean()):.3g}, KL {kl_t:.3g} nats; "
              f"chosen code: max |d| {float(chosen_t.max()):.3g}")
        print(f"  code predictor log-probs: max |d| {float(dc.max()):.3g}, mean |d| {float(dc.mean()):.3g}, KL {kl_c:.3g} nats; "
              f"chosen codes: max |d| {float(chosen_c.max()):.3g}")
        print(f"  own seeded codes vs source's: first divergent frame {first_div} (codebook 1: {first_div_cb1}) of {n}, "
              f"codes equal {100 * agree:.1f} %")
        print(f"  waveform of the source's codes: SNR {snr(ref['wav'], got['wav']):.1f} dB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--out", required=True)
    w.add_argument("--tiktoken")
    c = sub.add_parser("compress")
    c.add_argument("--src", required=True)
    c.add_argument("--root", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--root", required=True)
    m.add_argument("--frames", type=int, default=24)
    r = sub.add_parser("run-one")
    r.add_argument("--dir", required=True)
    r.add_argument("--frames", type=int, required=True)
    r.add_argument("--save", required=True)
    r.add_argument("--ref")
    args = p.parse_args()
    {"write": cmd_write, "compress": cmd_compress, "measure": cmd_measure, "run-one": cmd_run_one}[args.cmd](args)


if __name__ == "__main__":
    main()
