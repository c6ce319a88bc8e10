"""ONNX dynamic int8 recipes side by side on FULL-SIZE random weights: deviation from fp32 and speed.

    .venv/bin/python bench/int8_recipes.py                  # LLM and DiT, every recipe
    .venv/bin/python bench/int8_recipes.py --skip dit --steps 20

Not a test: prints tables. The recipes are onnx_cache.INT8_RECIPES (weight type x reduce_range;
activations are dynamic uint8 in all of them). Why it matters: MLAS's u8 x s8 kernels on AVX2
CPUs without VNNI saturate int16 pair sums, so one recipe can be accurate on one x86 machine and
wrong on another. The CPU flags that decide it are printed with the results.

  LLM  fp32 ONNX graph (equals torch fp32 within 1e-4) vs each int8 graph: prefill of
       2 + 40 text + --prompt speech positions, then --steps teacher-forced decode steps, variants
       in lockstep; max |dlogp| and mean KL(fp32 || int8) over all steps, decode tok/s.
  DiT  one estimator call (batch 2, --frames frames) per variant per round, rounds interleaved;
       max |v - v_fp32| / max |v_fp32| and seconds (best of rounds).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT))

from epub2audio.voices.cosyvoice3 import flow_fast, llm_onnx, onnx_cache  # noqa: E402
from epub2audio.voices.cosyvoice3.flow import FlowArgs, load_flow  # noqa: E402
from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM, LLMArgs  # noqa: E402
from tests.cosyvoice3.random_weights import random_flow_state_dict, random_llm_state_dict  # noqa: E402

from cosyvoice3 import log, qwen_config  # noqa: E402  (bench/cosyvoice3.py)


def cpu_flags() -> str:
    try:
        flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")).split()
    except (OSError, StopIteration):
        return "?"
    return " ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags) or "none of avx2/avx512/vnni"


def bench_llm(args, work: Path) -> None:
    cfg = qwen_config()
    log("full-size random LLM, fp32 ONNX export")
    lm = CosyVoice3LM.from_checkpoint(cfg, random_llm_state_dict(LLMArgs.from_config(cfg), seed=0))
    fp32 = llm_onnx.export_fp32(lm, work / "llm-fp32")
    paths = {"fp32": fp32}
    for name in onnx_cache.INT8_RECIPES:
        t0 = time.perf_counter()
        paths[name] = llm_onnx.quantize_int8(fp32, work / f"llm-{name}", recipe=name)
        log(f"int8 {name}: quantised in {time.perf_counter() - t0:.0f} s")
    emb, sp = lm.qwen2.embed_tokens.weight.detach(), lm.speech_embedding.weight.detach()
    variants = {n: llm_onnx.OnnxSpeechLM(llm_onnx.make_session(p, args.threads), lm.args, emb, sp, p) for n, p in paths.items()}
    g = torch.Generator().manual_seed(1)
    text = torch.randint(0, 151643, (40,), generator=g).tolist()
    prompt = torch.randint(0, 6561, (args.prompt,), generator=g).tolist()
    forced = torch.randint(0, 6561, (args.steps,), generator=g).tolist()
    runs = {n: v.start_decoding(text, prompt) for n, v in variants.items()}
    logps = {n: [f(None)] for n, f in runs.items()}
    dec = dict.fromkeys(runs, 0.0)
    for i, tok in enumerate(forced):
        for n, f in runs.items():
            t0 = time.perf_counter()
            logps[n].append(f(tok))
            if i >= 2:
                dec[n] += time.perf_counter() - t0
    ref = logps["fp32"]
    print(f"\n## LLM, full size ({len(text) + len(prompt) + 2} prompt positions + {args.steps} steps, {args.threads} thread(s); CPU: {cpu_flags()})")
    print("| graph | runs | max abs dlogp | mean KL nats | argmax agree | decode tok/s | vs fp32 |")
    print("|---|---|---|---|---|---|---|")
    for n, lps in logps.items():
        dlogp = max(float((a - b).abs().max()) for a, b in zip(lps, ref))
        kl = float(np.mean([float((b.exp() * (b - a)).sum()) for a, b in zip(lps, ref)]))
        agree = float(np.mean([int(a.argmax()) == int(b.argmax()) for a, b in zip(lps, ref)]))
        tok_s = (args.steps - 2) / dec[n]
        print(f"| {n} | {variants[n].precision} | {dlogp:.3g} | {kl:.2g} | {agree:.3f} | {tok_s:.1f} | {dec['fp32'] / dec[n]:.2f}x |")


def bench_dit(args, work: Path) -> None:
    log("full-size random flow, fp32 ONNX DiT export")
    flow = load_flow(random_flow_state_dict(FlowArgs(), seed=0))
    fp32 = flow_fast.export_dit(flow.decoder.estimator, work / "dit-fp32")
    paths = {"fp32": fp32}
    for name in onnx_cache.INT8_RECIPES:
        t0 = time.perf_counter()
        paths[name] = flow_fast.quantize_dit_int8(fp32, work / f"dit-{name}", recipe=name)
        log(f"int8 {name}: quantised in {time.perf_counter() - t0:.0f} s")
    del flow
    dits = {n: flow_fast.OnnxDiT(onnx_cache.make_session(p, args.threads), p, onnx_cache.graph_precision(p)) for n, p in paths.items()}
    g = torch.Generator().manual_seed(3)
    T = args.frames
    x, mu, cond = (torch.randn(2, 80, T, generator=g) for _ in range(3))
    t, spk = torch.full((2,), 0.4), torch.randn(2, 80, generator=g)
    for d in dits.values():  # warm-up
        d(x[..., :16], mu[..., :16], t, spk, cond[..., :16])
    secs = {n: [] for n in dits}
    out = {}
    for r in range(args.rounds):
        for n, d in dits.items():
            t0 = time.perf_counter()
            out[n] = d(x, mu, t, spk, cond)
            secs[n].append(time.perf_counter() - t0)
        log(f"  DiT round {r + 1}: " + ", ".join(f"{n} {s[-1]:.1f} s" for n, s in secs.items()))
    ref = out["fp32"]
    print(f"\n## DiT, full size (one call, batch 2, {T} frames, {args.threads} thread(s); CPU: {cpu_flags()})")
    print("| graph | runs | max abs dv / max abs v | s (best) | vs fp32 |")
    print("|---|---|---|---|---|")
    for n, v in out.items():
        rel = float((v - ref).abs().max() / ref.abs().max())
        print(f"| {n} | {dits[n].precision} | {rel:.3g} | {min(secs[n]):.2f} | {min(secs['fp32']) / min(secs[n]):.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=150, help="prompt speech tokens (LLM)")
    ap.add_argument("--steps", type=int, default=30, help="teacher-forced decode steps (LLM)")
    ap.add_argument("--frames", type=int, default=400, help="mel frames of the DiT call")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip", nargs="*", default=[], help="llm and/or dit")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="int8-recipes-"))
    try:
        if "llm" not in args.skip:
            bench_llm(args, work)
        if "dit" not in args.skip:
            bench_dit(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
