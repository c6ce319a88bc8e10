"""CosyVoice3 on a CPU: the faithful fp32 pipeline and every speed option, side by side, one run.

    .venv/bin/python bench/cosyvoice3.py                 # 10 s of speech (150 prompt + 250 tokens)
    .venv/bin/python bench/cosyvoice3.py --seconds 2     # a quick, shorter version
    .venv/bin/python bench/cosyvoice3.py --skip trim threads

Not a test: prints tables. Weights are FULL-SIZE random tensors built in memory by
tests/cosyvoice3/random_weights.py (never written into the repo; the ONNX exports go to a
temporary directory that is deleted at the end). Speeds are real; output quality is not, so the
deviations are those of random weights of the real shapes (activations kept O(1), speech logits
about as peaked as a trained model's).

Work per variant, identical for all of them:
  LLM   prefill of [sos, 40 text ids, task_id, 150 prompt speech tokens], then seconds x 25 decode
        steps TEACHER-FORCED from a fixed random token list (random weights could stop early, and
        every backend must do the same work). Variants run in lockstep (A, B, C, ... per step), so
        machine noise hits them alike.
  flow  Flow.inference of the same 150 prompt + seconds x 25 generated tokens (10 Euler steps,
        CFG batch 2), each variant once per round, rounds interleaved.
  HiFT  the fp32 vocoder on the faithful mel.

Deviation from the faithful fp32 path (same weights, same inputs):
  LLM   argmax  teacher-forced argmax agreement of the next-token distributions
        sample  same-seed token match: at every step both variants draw with the host sampler
                (RAS, same history) from a generator seeded with the step number. Very
                sensitive: top-k 25 / top-p 0.8 over near-equal candidates flips on tiny changes
        KL      mean KL(fp32 || variant) of the next-token distributions, nats per step
        max|dlogp|  largest log-prob difference over prefill + all steps
  flow  mel max abs difference (and relative to max |mel|)
  wave  the flow option's mel through the same fp32 HiFT: max abs sample difference and
        log-spectral distance (dB; STFT 1024/256, Hann)

RTF = stage seconds / seconds of speech. Speed-up = faithful RTF / option RTF.
Load averages are printed with every log line: the machine may be shared. On a loaded machine
use `--threads 1` (see the Threads table: 2 threads on 2 busy cores are slower than 1).
"""

from __future__ import annotations

import argparse
import os
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

from epub2audio.voices.cosyvoice3 import flow_fast, llm_onnx  # noqa: E402
from epub2audio.voices.cosyvoice3.flow import FlowArgs, load_flow  # noqa: E402
from epub2audio.voices.cosyvoice3.hift import HiFTArgs, load_hift  # noqa: E402
from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM, LLMArgs  # noqa: E402
from epub2audio.voices.cosyvoice3.sampling import sample_token  # noqa: E402
from tests.cosyvoice3.random_weights import (  # noqa: E402
    random_flow_state_dict,
    random_hift_state_dict,
    random_llm_state_dict,
)

TOKENS_PER_SECOND = 25
N_TEXT = 40


def load_avg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {load_avg()}] {msg}", flush=True)


def qwen_config() -> dict:
    a = LLMArgs()
    return {
        "hidden_act": "silu", "hidden_size": a.hidden_size, "intermediate_size": a.intermediate_size,
        "num_attention_heads": a.num_attention_heads, "num_key_value_heads": a.num_key_value_heads,
        "num_hidden_layers": a.num_hidden_layers, "rms_norm_eps": a.rms_norm_eps, "rope_theta": a.rope_theta,
        "vocab_size": a.vocab_size,
    }  # fmt: skip


def lsd_db(a: np.ndarray, b: np.ndarray, n_fft: int = 1024, hop: int = 256) -> float:
    ta, tb = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
    win = torch.hann_window(n_fft)
    sa = torch.stft(ta, n_fft, hop, window=win, return_complex=True).abs().pow(2) + 1e-10
    sb = torch.stft(tb, n_fft, hop, window=win, return_complex=True).abs().pow(2) + 1e-10
    d = 10 * torch.log10(sa / sb)
    return float(d.pow(2).mean(0).sqrt().mean())


# ------------------------------------------------------------------------------------ LLM


def bench_llm(args, work: Path, n_tokens: int, threads: int) -> tuple[list[dict], dict]:
    cfg = qwen_config()
    log("building full-size random LLM weights (506 M parameters)")
    sd = random_llm_state_dict(LLMArgs.from_config(cfg), seed=0)
    ref_lm = CosyVoice3LM.from_checkpoint(cfg, sd)
    g = torch.Generator().manual_seed(1)
    text = torch.randint(0, 151643, (N_TEXT,), generator=g).tolist()
    prompt = torch.randint(0, 6561, (args.prompt_tokens,), generator=g).tolist()
    forced = torch.randint(0, 6561, (n_tokens,), generator=g).tolist()

    variants: dict[str, object] = {"torch fp32 (faithful)": ref_lm}
    if "torch-int8" not in args.skip:
        from epub2audio.voices.cosyvoice3.backends import build_torch_llm

        variants["torch int8"] = build_torch_llm(cfg, dict(sd), "int8")
    for prec in ("fp32", "int8", "int4"):
        if f"onnx-{prec}" in args.skip:
            continue
        t0 = time.perf_counter()
        path, _ = llm_onnx.ensure_exported(ref_lm, "bench", prec, work / "onnx")
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        sess = llm_onnx.make_session(path / llm_onnx.MODEL_FILE, threads)
        lm = llm_onnx.OnnxSpeechLM(sess, ref_lm.args, ref_lm.qwen2.embed_tokens.weight.detach(), ref_lm.speech_embedding.weight.detach(), path / llm_onnx.MODEL_FILE)
        log(f"onnx {prec}: export/quantise {build:.0f} s, session {time.perf_counter() - t0:.1f} s, graph runs {lm.precision}")
        variants[f"onnx {prec}"] = lm

    names = list(variants)
    for n in names:  # warm-up: first-call costs (page-in, allocator, kernel selection) not timed
        w = variants[n].start_decoding(text[:4], prompt[:8])
        w(None)
        w(forced[0])
    sessions = {n: variants[n].start_decoding(text, prompt) for n in names}
    prefill: dict[str, float] = {}
    dec: dict[str, float] = {n: 0.0 for n in names}
    logps: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    log(f"LLM: prefill {N_TEXT + args.prompt_tokens + 2} positions, then {n_tokens} teacher-forced steps, lockstep over {len(names)} variants")
    for n in names:
        t0 = time.perf_counter()
        logps[n].append(sessions[n](None))
        prefill[n] = time.perf_counter() - t0
    warm = min(2, n_tokens)
    for i, tok in enumerate(forced):
        for n in names:
            t0 = time.perf_counter()
            lp = sessions[n](tok)
            if i >= warm:
                dec[n] += time.perf_counter() - t0
            logps[n].append(lp)
    ref = logps[names[0]]
    rows = []
    for n in names:
        tok_s = (n_tokens - warm) / dec[n] if dec[n] else float("nan")
        seconds = prefill[n] + n_tokens / tok_s
        lps = logps[n]
        argmax = np.mean([int(a.argmax()) == int(b.argmax()) for a, b in zip(lps, ref)])
        hist: list[int] = []
        same = []
        for step, (a, b) in enumerate(zip(lps, ref)):
            ta = sample_token(a, hist, torch.Generator().manual_seed(step), ignore_eos=True)
            tb = sample_token(b, hist, torch.Generator().manual_seed(step), ignore_eos=True)
            same.append(ta == tb)
            if step < len(forced):
                hist.append(forced[step])
        rows.append({
            "name": n, "prefill": prefill[n], "tok_s": tok_s, "seconds": seconds,
            "precision": getattr(variants[n], "precision", "?"),
            "argmax": argmax, "sample": float(np.mean(same)),
            "dlogp": max(float((a - b).abs().max()) for a, b in zip(lps, ref)),
            "kl": float(np.mean([float((b.exp() * (b - a)).sum()) for a, b in zip(lps, ref)])),
        })  # fmt: skip
    extra = {"lm": ref_lm, "sd": sd, "onnx": {k: v for k, v in variants.items() if k.startswith("onnx")}, "forced": forced, "text": text, "prompt": prompt}
    return rows, extra


# ------------------------------------------------------------------------------------ flow


def flow_inputs(n_prompt: int, n_gen: int, seed: int = 2) -> dict:
    g = torch.Generator().manual_seed(seed)
    return dict(
        token=torch.randint(0, 6561, (1, n_gen), generator=g),
        prompt_token=torch.randint(0, 6561, (1, n_prompt), generator=g),
        prompt_feat=torch.randn(1, 2 * n_prompt, 80, generator=g),
        embedding=torch.randn(1, 192, generator=g),
    )


def bench_flow(args, work: Path, n_tokens: int, threads: int) -> tuple[list[dict], dict]:
    log("building full-size random flow (332 M) and HiFT (21 M) weights")
    fsd = random_flow_state_dict(FlowArgs(), seed=0)
    hift = load_hift(random_hift_state_dict(HiFTArgs(), seed=0))
    flows = {"torch fp32 (faithful)": load_flow(fsd)}
    for opt in ("int8", "onnx-fp32", "onnx-int8"):
        if f"flow-{opt}" in args.skip:
            continue
        t0 = time.perf_counter()
        flows[f"flow {opt}"] = flow_fast.apply_flow_precision(load_flow(dict(fsd)), opt, "bench", work / "onnx", threads)
        log(f"flow {opt}: built in {time.perf_counter() - t0:.0f} s, runs {flow_fast.flow_precision(flows[f'flow {opt}'])}")
    inp = flow_inputs(args.prompt_tokens, n_tokens)
    for f in flows.values():  # warm-up on a short input: first-call costs are not timed
        with torch.inference_mode():
            f.inference(**flow_inputs(4, 8))
    times: dict[str, list[float]] = {n: [] for n in flows}
    mels: dict[str, torch.Tensor] = {}
    for r in range(args.flow_rounds):
        for n, f in flows.items():
            t0 = time.perf_counter()
            with torch.inference_mode():
                mels[n] = f.inference(**inp)
            times[n].append(time.perf_counter() - t0)
            log(f"  round {r + 1} {n}: {times[n][-1]:.1f} s")
    ref_name = next(iter(flows))
    t0 = time.perf_counter()
    with torch.inference_mode():
        ref_wave = hift.inference(mels[ref_name])[0].numpy()
    hift_s = time.perf_counter() - t0
    rows = []
    ref_mel = mels[ref_name]
    for n in flows:
        with torch.inference_mode():
            wave = ref_wave if n == ref_name else hift.inference(mels[n])[0].numpy()
        rows.append({
            "name": n, "seconds": min(times[n]), "all": times[n],
            "mel": float((mels[n] - ref_mel).abs().max()), "mel_rel": float((mels[n] - ref_mel).abs().max() / ref_mel.abs().max()),
            "wave": float(np.abs(wave - ref_wave).max()), "lsd": lsd_db(wave, ref_wave),
        })  # fmt: skip
    return rows, {"flows": flows, "hift": hift, "hift_s": hift_s, "inp": inp}


def bench_trim(args, flows: dict, n_tokens: int) -> list[dict]:
    """Flow seconds for the same target with the full prompt and with half of it."""
    out = []
    short = args.prompt_tokens // 2
    # the ONNX flows (same frame scaling, a fraction of the time); the faithful one if they were skipped
    names = [n for n in flows if "onnx" in n] or [next(iter(flows))]
    for n in names:
        t = {args.prompt_tokens: float("inf"), short: float("inf")}
        for _ in range(max(1, args.flow_rounds)):
            for p in (args.prompt_tokens, short):  # interleaved, best of the rounds
                t0 = time.perf_counter()
                with torch.inference_mode():
                    flows[n].inference(**flow_inputs(p, n_tokens))
                t[p] = min(t[p], time.perf_counter() - t0)
        removed_s = (args.prompt_tokens - short) / TOKENS_PER_SECOND
        out.append({"name": n, "full": t[args.prompt_tokens], "short": t[short], "per_s": (t[args.prompt_tokens] - t[short]) / removed_s, "removed_s": removed_s})
    return out


def bench_threads_flow(flows: dict, n_frames: int, rounds: int = 1) -> list[dict]:
    """1 vs 2 intra-op threads, interleaved: one DiT call at the segment's length, per flow kind."""
    rows = []
    T = n_frames
    g = torch.Generator().manual_seed(3)
    x, mu, cond = (torch.randn(2, 80, T, generator=g) for _ in range(3))
    t_in, spk = torch.full((2,), 0.4), torch.randn(2, 80, generator=g)
    base = torch.get_num_threads()
    for name, flow in flows.items():
        if name == "flow int8":
            continue  # torch like the faithful flow: same threading
        est = flow.decoder.estimator
        if isinstance(est, flow_fast.OnnxDiT):
            ests = {th: flow_fast.OnnxDiT(llm_onnx.make_session(est.model_path, th), est.model_path, est.precision) for th in (1, 2)}
        else:
            ests = {1: est, 2: est}
        res = {1: [], 2: []}
        outs = {}
        for _ in range(rounds):
            for th in (1, 2):
                torch.set_num_threads(th)
                t0 = time.perf_counter()
                with torch.inference_mode():
                    outs[th] = ests[th](x, mu, t_in, spk, cond)
                res[th].append(time.perf_counter() - t0)
        torch.set_num_threads(base)
        rows.append({"name": f"{name}: 1 DiT call ({T} frames)", "t1": min(res[1]), "t2": min(res[2]), "bitequal": torch.equal(outs[1], outs[2])})
    return rows


def bench_threads_llm(llm_extra: dict) -> list[dict]:
    """1 vs 2 intra-op threads, interleaved per step: decode steps of the torch and ONNX LLMs."""
    rows = []
    base = torch.get_num_threads()
    onnx = llm_extra.get("onnx", {})
    for n in [k for k in ("onnx int4", "onnx fp32") if k in onnx]:
        lm = onnx[n]
        sess = {th: llm_onnx.OnnxSpeechLM(llm_onnx.make_session(lm.model_path, th), lm.args, lm.embed_tokens, lm.speech_embedding, lm.model_path) for th in (1, 2)}
        dec = {th: s.start_decoding(llm_extra["text"], llm_extra["prompt"]) for th, s in sess.items()}
        tt = {1: 0.0, 2: 0.0}
        lp = {}
        for th in (1, 2):
            lp[th] = [dec[th](None)]
        for i, tok in enumerate(llm_extra["forced"][:20]):
            for th in (1, 2):
                t0 = time.perf_counter()
                lp[th].append(dec[th](tok))
                if i >= 2:
                    tt[th] += time.perf_counter() - t0
        same = all(torch.equal(a, b) for a, b in zip(lp[1], lp[2]))
        rows.append({"name": f"LLM {n}: 18 decode steps", "t1": tt[1], "t2": tt[2], "bitequal": same})
    lm = llm_extra["lm"]
    dec = {}
    tt = {1: 0.0, 2: 0.0}
    for th in (1, 2):
        torch.set_num_threads(th)
        dec[th] = lm.start_decoding(llm_extra["text"], llm_extra["prompt"])
        dec[th](None)
    for i, tok in enumerate(llm_extra["forced"][:12]):
        for th in (1, 2):
            torch.set_num_threads(th)
            t0 = time.perf_counter()
            dec[th](tok)
            if i >= 2:
                tt[th] += time.perf_counter() - t0
    torch.set_num_threads(base)
    rows.append({"name": "LLM torch fp32: 10 decode steps", "t1": tt[1], "t2": tt[2], "bitequal": None})
    return rows


# ------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of generated speech (25 tokens/s)")
    ap.add_argument("--prompt-tokens", type=int, default=150)
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads (default: all cores)")
    ap.add_argument("--flow-rounds", type=int, default=1, help="interleaved timing rounds of the flow variants")
    ap.add_argument("--skip", nargs="*", default=[], help="any of: llm flow trim threads torch-int8 onnx-fp32 onnx-int8 onnx-int4 flow-int8 flow-onnx-fp32 flow-onnx-int8")
    args = ap.parse_args()
    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    n_tokens = max(4, int(round(args.seconds * TOKENS_PER_SECOND)))
    secs = n_tokens / TOKENS_PER_SECOND
    log(f"CosyVoice3 CPU bench: {secs:g} s of speech ({args.prompt_tokens} prompt + {n_tokens} tokens), {threads} threads, torch {torch.__version__}")
    work = Path(tempfile.mkdtemp(prefix="cosyvoice3-bench-"))
    try:
        llm_rows, llm_extra = ([], {}) if "llm" in args.skip else bench_llm(args, work, n_tokens, threads)
        thread_rows = bench_threads_llm(llm_extra) if llm_extra and "threads" not in args.skip else []
        llm_extra.clear()  # free the LLM variants (several GB) before the flows are built
        if llm_rows:
            print(f"\n## LLM ({secs:g} s = {n_tokens} tokens after a {N_TEXT}+{args.prompt_tokens}-token prompt; teacher-forced)")
            print("| variant | runs | prefill s | tok/s | LLM RTF | speed-up | argmax agree | same-seed tokens | max abs dlogp | mean KL nats |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            base = llm_rows[0]["seconds"]
            for r in llm_rows:
                print(f"| {r['name']} | {r['precision']} | {r['prefill']:.2f} | {r['tok_s']:.1f} | {r['seconds'] / secs:.2f} | {base / r['seconds']:.2f}x | {r['argmax']:.3f} | {r['sample']:.3f} | {r['dlogp']:.3g} | {r['kl']:.2g} |")
        flow_rows, flow_extra = ([], {}) if "flow" in args.skip else bench_flow(args, work, n_tokens, threads)
        if flow_rows:
            print(f"\n## Flow ({args.prompt_tokens} prompt + {n_tokens} tokens = {2 * (args.prompt_tokens + n_tokens)} frames, 10 steps, CFG batch 2) + HiFT fp32")
            print("| variant | flow s | flow RTF | speed-up | mel max abs (rel) | wave max abs | LSD dB |")
            print("|---|---|---|---|---|---|---|")
            base = flow_rows[0]["seconds"]
            for r in flow_rows:
                print(f"| {r['name']} | {r['seconds']:.1f} | {r['seconds'] / secs:.2f} | {base / r['seconds']:.2f}x | {r['mel']:.3g} ({r['mel_rel']:.2%}) | {r['wave']:.3g} | {r['lsd']:.2f} |")
            print(f"| HiFT vocoder fp32 | {flow_extra['hift_s']:.2f} | {flow_extra['hift_s'] / secs:.2f} | | | | |")
        if llm_rows and flow_rows:
            h = flow_extra["hift_s"]
            faithful = llm_rows[0]["seconds"] + flow_rows[0]["seconds"] + h
            best_llm = min(llm_rows, key=lambda r: r["seconds"])
            best_flow = min(flow_rows, key=lambda r: r["seconds"])
            print("\n## Whole pipeline (sum of stages)")
            print("| pipeline | LLM RTF | flow RTF | HiFT RTF | total RTF | speed-up | tokens (same-seed) | wave LSD dB |")
            print("|---|---|---|---|---|---|---|---|")

            def row(label, lr, fr):
                tot = lr["seconds"] + fr["seconds"] + h
                print(f"| {label}: {lr['name']} + {fr['name']} | {lr['seconds'] / secs:.2f} | {fr['seconds'] / secs:.2f} | {h / secs:.2f} | {tot / secs:.2f} | {faithful / tot:.2f}x | {lr['sample']:.3f} | {fr['lsd']:.2f} |")

            row("faithful", llm_rows[0], flow_rows[0])
            exact_llm = [r for r in llm_rows if r["name"] == "onnx fp32"]
            exact_flow = [r for r in flow_rows if r["name"] == "flow onnx-fp32"]
            if exact_llm and exact_flow:
                row("fp32 on ONNX Runtime (within 1e-4)", exact_llm[0], exact_flow[0])
            for lr in llm_rows[1:]:
                if lr["name"] != "onnx fp32":
                    row("quantised LLM only", lr, flow_rows[0])
            row("fastest", best_llm, best_flow)
        if flow_rows and "trim" not in args.skip:
            tr = bench_trim(args, flow_extra["flows"], n_tokens)
            print(f"\n## Shorter reference: flow seconds for the same {secs:g} s target, prompt {args.prompt_tokens} vs {args.prompt_tokens // 2} tokens")
            print("| flow | full prompt s | half prompt s | flow s saved per prompt second removed | = flow RTF saved per prompt second |")
            print("|---|---|---|---|---|")
            for r in tr:
                print(f"| {r['name']} | {r['full']:.1f} | {r['short']:.1f} | {r['per_s']:.2f} | {r['per_s'] / secs:.3f} RTF |")
        if flow_rows and "threads" not in args.skip:
            thread_rows += bench_threads_flow(flow_extra["flows"], 2 * (args.prompt_tokens + n_tokens))
        if thread_rows:
            th = thread_rows
            print("\n## Threads (interleaved): 1 vs 2 intra-op threads")
            print("| work | 1 thread s | 2 threads s | speed-up 2/1 | parallel efficiency | bit-identical |")
            print("|---|---|---|---|---|---|")
            for r in th:
                print(f"| {r['name']} | {r['t1']:.2f} | {r['t2']:.2f} | {r['t1'] / r['t2']:.2f}x | {r['t1'] / r['t2'] / 2:.0%} | {r['bitequal']} |")
        log("done")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
