"""CosyVoice3 on a GPU: per-stage speed and deviation from the CPU, in one short run.

    PYTHONPATH=engine python3 bench/gpu_check.py --out gpu.json             # on a CUDA machine
    PYTHONPATH=engine python3 bench/gpu_check.py --small --device cpu --out x.json   # dry run anywhere

Full-size random weights (Qwen2-0.5B LLM + speech head, 22-block DiT, HiFT), drawn on the device
itself. Work: ~10 s of speech (250 speech tokens) after a ~6 s prompt (150 tokens). RTF = stage
seconds / 10 s. It reports, for the device against the CPU (fp32 both):
  * LLM: prefill + 250-token decode RTF; the CPU's from its prefill and 30 decode steps;
    teacher-forced log-prob differences (device fp32 vs CPU fp32; device bf16 / fp16 vs fp32);
    how many sampled tokens agree with the same seed.
  * flow: RTF at fp32 / bf16 / fp16 (and fp32 with TF32 allowed, for the record); mel max and
    relative differences; the CPU does one flow call.
  * HiFT: RTF on the device and on the CPU at 1 thread (as the voice runs it) and at all cores;
    waveform max difference and SNR; which is faster (devices.py's auto placement).
  * the whole CosyVoice3Voice on the device (LLM + flow + HiFT through voice.py), one stream, per
    stage (LLM, flow, HiFT RTF), with the LLM's dynamic eager step and with its static step (replayed
    as a CUDA graph on CUDA, eager elsewhere), and whether the two give the same bytes.
  * llm_step: the torch LLM's dynamic decode step against the static one (llm_static.py), eager and
    replayed as a CUDA graph: tokens/s and RTF of each; whether the graph gives exactly the eager
    static step's log-probs and tokens; how far static is from dynamic (max |logp| difference,
    sampled tokens equal).
  * throughput: a 30-segment chapter read by N = 1, 2, 4, 8 worker processes on the one device,
    each decoding one segment alone (static step + graph where on CUDA): audio seconds per wall
    second, the gain of each N over the last, the N that `--workers auto` would pick (the engine's
    own rule, worker/autoscale.py, over these counts: the last that still added at least 10 %), and
    how many segments are byte-identical to the solo run.
  * upstream (with --upstream-src DIR): upstream CosyVoice's own LLM, flow and HiFT modules, built
    by bench/upstream.py's builders on the same random weights, on the same device: RTF of each
    beside ours (the LLM teacher-forced, lockstep, as bench/upstream.py; ours with the dynamic step
    and with the static/graph step) and the largest difference of their outputs from ours.
bench/gpu_check_prepare.sh puts upstream's source and pure-Python dependencies into .gpu_check/
and says how one device call runs all of it (under 10 minutes on an H200, estimated).
In the --small CPU dry run upstream's HiFT differed from ours by 1.6e-3 (SNR 37 dB) while LLM and
flow were equal; not investigated. A likely cause: the HiFT's fixed source noise comes from the
global RNG as upstream's modules are built, and tiny modules draw fewer numbers before it than the
full-size ones noise.py replays. At full size bench/upstream.py measured 2.7e-7 on the CPU.
The last section, "fields", lists any expected figure that is missing (none on a complete run).
Imports only torch, numpy and the engine (no frontend audio libraries). Each section is written to
--out as soon as it is done, so a run cut short still leaves its figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from epub2audio.voices.cosyvoice3.backends import TorchSpeechLM, build_torch_llm  # noqa: E402
from epub2audio.voices.cosyvoice3.devices import exact_fp32_on_cuda  # noqa: E402
from epub2audio.voices.cosyvoice3.flow import FlowArgs, load_flow, set_flow_dtype  # noqa: E402
from epub2audio.voices.cosyvoice3.generate import decode_speech_tokens  # noqa: E402
from epub2audio.voices.cosyvoice3.hift import HiFTArgs, load_hift, set_hift_dtype  # noqa: E402
from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM, LLMArgs  # noqa: E402
from tests.cosyvoice3.random_weights import (random_flow_state_dict, random_hift_state_dict,  # noqa: E402
                                             random_llm_state_dict, tiny_flow_args, tiny_hift_args,
                                             tiny_qwen2_config)

SECONDS = 10.0
HALVES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Report:
    def __init__(self, path: Path) -> None:
        self.path, self.data, self.started = path, {}, time.perf_counter()

    def put(self, section: str, values: dict) -> None:
        self.data[section] = values
        self.data["elapsed_s"] = round(time.perf_counter() - self.started, 1)
        self.path.write_text(json.dumps(self.data, indent=2))
        print(f"[{self.data['elapsed_s']:6.1f} s] {section}: {json.dumps(values)}", flush=True)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(device: str, fn):
    sync(device)
    t = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm())


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double().cpu() - b.double().cpu()).abs().max())


def snr_db(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double().cpu(), ref.double().cpu()
    noise = (x - ref).pow(2).sum()
    return float("inf") if noise == 0 else float(10 * torch.log10(ref.pow(2).sum() / noise))


def r4(x: float) -> float:
    return float(f"{x:.4g}")


# ----------------------------------------------------------------------------------------- LLM


def llm_config(small: bool) -> dict:
    if small:
        return tiny_qwen2_config()
    from bench.fullsize import full_size_qwen_config

    return full_size_qwen_config()


def llm_state(config: dict, device: str) -> dict:
    sd = random_llm_state_dict(LLMArgs.from_config(config), seed=0, device=device)
    sd["llm_decoder.weight"][6561:] = 0.0  # eos improbable: every run decodes to its cap (as bench/fullsize.py)
    return sd


def decode(lm, text_ids, prompt_tokens, n_tokens, seed=0):
    """(tokens, prefill seconds, decode seconds) for n_tokens sampled on the host."""
    device = getattr(lm, "device", "cpu")
    next_logp = lm.start_decoding(text_ids, prompt_tokens)
    first, t_prefill = timed(device, lambda: next_logp(None))
    steps = iter([first])

    def session(token):
        return next(steps) if token is None else next_logp(token)

    gen = torch.Generator(device="cpu").manual_seed(seed)
    t = time.perf_counter()
    tokens = decode_speech_tokens(session, len(text_ids), gen, max_tokens=n_tokens, min_token_text_ratio=0,
                                  max_token_text_ratio=1e9)
    return tokens, t_prefill, time.perf_counter() - t


def teacher_forced_logp(model: CosyVoice3LM, text_ids, prompt_tokens, tokens) -> torch.Tensor:
    """Log-probs [n + 1, 6761] (fp32, CPU) at every position that predicts a generated token."""
    with torch.inference_mode():
        prompt = model.embed_prompt(text_ids, prompt_tokens)
        speech = model.speech_embedding(torch.tensor(tokens, dtype=torch.long, device=prompt.device))[None]
        logp = model(torch.cat([prompt, speech], dim=1))[0]
    return logp[prompt.shape[1] - 1 :].float().cpu()


def check_llm(report: Report, device: str, small: bool, n_prompt: int, n_gen: int, cpu_steps: int) -> list[int]:
    config = llm_config(small)
    sd_dev, t_build = timed(device, lambda: llm_state(config, device))
    sd_cpu = {k: v.cpu() for k, v in sd_dev.items()}
    text_ids = list(range(10, 40))  # 30 text tokens
    prompt = [int(x) for x in torch.randint(0, 6561, (n_prompt,), generator=torch.Generator().manual_seed(1))]

    dev_lm = TorchSpeechLM(CosyVoice3LM.from_checkpoint(config, dict(sd_dev)))
    decode(dev_lm, text_ids, prompt, 8)  # warm-up (kernels, allocator)
    tokens, pre, dec = decode(dev_lm, text_ids, prompt, n_gen)
    out = {"weights_built_s": r4(t_build), "prompt_tokens": n_prompt, "generated_tokens": len(tokens),
           f"{device}_fp32": {"prefill_s": r4(pre), "decode_tok_s": r4(len(tokens) / dec), "rtf": r4((pre + dec) / SECONDS)}}
    ref_dev = teacher_forced_logp(dev_lm.model, text_ids, prompt, tokens)

    cpu_lm = TorchSpeechLM(CosyVoice3LM.from_checkpoint(config, dict(sd_cpu)))
    cpu_tokens, cpu_pre, cpu_dec = decode(cpu_lm, text_ids, prompt, cpu_steps)
    per_token = cpu_dec / max(1, len(cpu_tokens))
    ref_cpu = teacher_forced_logp(cpu_lm.model, text_ids, prompt, tokens)
    agree = next((i for i, (a, b) in enumerate(zip(tokens, cpu_tokens)) if a != b), min(len(tokens), len(cpu_tokens)))
    out["cpu_fp32"] = {"threads": torch.get_num_threads(), "prefill_s": r4(cpu_pre), "decode_tok_s": r4(1 / per_token),
                       "rtf_extrapolated": r4((cpu_pre + per_token * n_gen) / SECONDS), "steps_timed": len(cpu_tokens)}
    out[f"logp_{device}_fp32_vs_cpu_fp32"] = {
        "max_abs": r4(max_abs(ref_dev, ref_cpu)), "argmax_agree": r4(float((ref_dev.argmax(-1) == ref_cpu.argmax(-1)).float().mean())),
        "sampled_tokens_equal_prefix": f"{agree}/{min(len(tokens), len(cpu_tokens))}"}
    del cpu_lm
    for name in HALVES:
        lm = build_torch_llm(config, dict(sd_cpu), name, device)
        decode(lm, text_ids, prompt, 8)
        half_tokens, pre, dec = decode(lm, text_ids, prompt, n_gen)
        logp = teacher_forced_logp(lm.model, text_ids, prompt, tokens)
        kl = (ref_dev.exp() * (ref_dev - logp)).sum(-1).mean()
        out[f"{device}_{name}"] = {"prefill_s": r4(pre), "decode_tok_s": r4(len(half_tokens) / dec), "rtf": r4((pre + dec) / SECONDS),
                                   "logp_max_abs_vs_fp32": r4(max_abs(logp, ref_dev)), "kl_nats_per_step": r4(float(kl)),
                                   "argmax_agree": r4(float((logp.argmax(-1) == ref_dev.argmax(-1)).float().mean()))}
        del lm
    report.put("llm", out)
    return tokens


# ---------------------------------------------------------------------------------------- flow


def flow_inputs(tokens: list[int], n_prompt: int):
    g = torch.Generator(device="cpu").manual_seed(2)
    return (torch.tensor([tokens], dtype=torch.long), torch.randint(0, 6561, (1, n_prompt), generator=g),
            torch.randn(1, 2 * n_prompt, 80, generator=g), torch.randn(1, 192, generator=g))


def check_flow(report: Report, device: str, small: bool, tokens: list[int], n_prompt: int) -> torch.Tensor:
    args = tiny_flow_args() if small else FlowArgs()
    sd_dev, t_build = timed(device, lambda: random_flow_state_dict(args, seed=1, device=device))
    sd_cpu = {k: v.cpu() for k, v in sd_dev.items()}
    inputs = flow_inputs(tokens, n_prompt)
    warm = flow_inputs(tokens[:20], 10)
    out = {"weights_built_s": r4(t_build), "mel_frames": 2 * (len(tokens) + n_prompt)}

    flow = load_flow(dict(sd_dev))
    flow.inference(*warm)
    mel_dev, t = timed(device, lambda: flow.inference(*inputs))
    out[f"{device}_fp32"] = {"rtf": r4(t / SECONDS)}
    if device == "cuda":  # what cuDNN / cuBLAS would do by default
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
        flow.inference(*warm)
        mel_tf32, t = timed(device, lambda: flow.inference(*inputs))
        exact_fp32_on_cuda()
        out["cuda_tf32"] = {"rtf": r4(t / SECONDS), "mel_max_abs_vs_fp32": r4(max_abs(mel_tf32, mel_dev)),
                            "mel_rel_l2_vs_fp32": r4(rel(mel_tf32, mel_dev))}
    del flow

    cpu_flow = load_flow(dict(sd_cpu))
    mel_cpu, t = timed("cpu", lambda: cpu_flow.inference(*inputs))
    out["cpu_fp32"] = {"threads": torch.get_num_threads(), "rtf": r4(t / SECONDS)}
    out[f"mel_{device}_fp32_vs_cpu_fp32"] = {"max_abs": r4(max_abs(mel_dev, mel_cpu)), "rel_l2": r4(rel(mel_dev, mel_cpu)),
                                             "mel_std": r4(float(mel_cpu.std()))}
    del cpu_flow
    for name, dtype in HALVES.items():
        flow = set_flow_dtype(load_flow(dict(sd_cpu)), dtype).to(device)
        flow.inference(*warm)
        mel, t = timed(device, lambda: flow.inference(*inputs))
        out[f"{device}_{name}"] = {"rtf": r4(t / SECONDS), "mel_max_abs_vs_fp32": r4(max_abs(mel, mel_dev)),
                                   "mel_rel_l2_vs_fp32": r4(rel(mel, mel_dev))}
        del flow
    report.put("flow", out)
    return mel_cpu


# ---------------------------------------------------------------------------------------- HiFT


def check_hift(report: Report, device: str, small: bool, mel: torch.Tensor) -> None:
    args = tiny_hift_args() if small else HiFTArgs()
    sd = {k: v.cpu() for k, v in random_hift_state_dict(args, seed=2, device=device).items()}
    seconds = mel.shape[2] / 50 + 1
    warm = mel[:, :, :50]
    out = {"audio_s": mel.shape[2] / 50}

    hift = load_hift(dict(sd), max_seconds=seconds).to(device)
    hift.inference(warm)
    wave_dev, t_dev = timed(device, lambda: hift.inference(mel))
    out[f"{device}_fp32"] = {"rtf": r4(t_dev / SECONDS)}

    cpu_hift = load_hift(dict(sd), max_seconds=seconds)
    cores = torch.get_num_threads()
    wave_cpu, t_all = timed("cpu", lambda: cpu_hift.inference(mel))
    torch.set_num_threads(1)  # how voice.py runs HiFT on the CPU (its waveform depends on the thread count)
    try:
        wave_cpu1, t_one = timed("cpu", lambda: cpu_hift.inference(mel))
    finally:
        torch.set_num_threads(cores)
    out["cpu_fp32"] = {"rtf_1_thread": r4(t_one / SECONDS), f"rtf_{cores}_threads": r4(t_all / SECONDS)}
    out[f"wave_{device}_fp32_vs_cpu_fp32"] = {"max_abs": r4(max_abs(wave_dev, wave_cpu1)), "snr_db": r4(snr_db(wave_dev, wave_cpu1)),
                                              "cpu_1_vs_all_threads_max_abs": r4(max_abs(wave_cpu, wave_cpu1))}
    f0_dev = hift.f0_predictor(mel.to(device, torch.float64))
    f0_cpu = cpu_hift.f0_predictor(mel.to(torch.float64))
    out[f"f0_{device}_vs_cpu_max_abs_hz"] = r4(max_abs(f0_dev, f0_cpu))
    for name, dtype in HALVES.items():
        half = set_hift_dtype(load_hift(dict(sd), max_seconds=seconds), dtype).to(device)
        half.inference(warm)
        wave, t = timed(device, lambda: half.inference(mel))
        out[f"{device}_{name}"] = {"rtf": r4(t / SECONDS), "wave_max_abs_vs_fp32": r4(max_abs(wave, wave_dev)),
                                   "snr_db_vs_fp32": r4(snr_db(wave, wave_dev))}
    out["faster_for_auto"] = device if t_dev < t_one else "cpu"
    report.put("hift", out)


# ------------------------------------------------------------------------------- whole voice


def check_voice(report: Report, device: str, small: bool, n_prompt: int, n_gen: int) -> None:
    """The CosyVoice3Voice (voice.py's speech_tokens / render / synthesize) with every stage on `device`:
    one stream, the whole voice and each stage, with the LLM's dynamic step and its static one."""
    text = "Once upon a time there were three little pigs, and they went out into the world."
    out, pcms = {}, {}
    for step in ("dynamic", "static"):
        voice = build_voice(device, small, n_prompt, n_gen, step=step)
        llm, flow, hift = voice.llm, voice.flow, voice.hift
        voice.synthesize(text[:20], seed=0)  # warm-up (and the graph's capture)
        pcm, t = timed(device, lambda: voice.synthesize(text, seed=1))
        again = voice.synthesize(text, seed=1)
        audio = len(pcm) / 2 / 24000
        tokens, t_llm = timed(device, lambda: voice.speech_tokens(text, 1))
        mel, t_flow = timed(device, lambda: flow_of(voice, tokens))
        _, t_hift = timed(device, lambda: hift.inference(mel))
        name = "dynamic_eager" if step == "dynamic" else ("static_graph" if device == "cuda" else "static_eager")
        out[name] = {"audio_s": r4(audio), "rtf": r4(t / audio), "llm_rtf": r4(t_llm / audio),
                     "flow_rtf": r4(t_flow / audio), "hift_rtf": r4(t_hift / audio), "same_bytes_twice": pcm == again}
        pcms[step] = pcm
        if step == "dynamic":  # the section's figures as before: the dynamic step
            out.update({"devices": {"llm": llm.device, "flow": flow.input_embedding.weight.device.type,
                                    "hift": hift.conv_pre.weight.device.type},
                        "audio_s": r4(audio), "rtf": r4(t / audio), "same_bytes_twice": pcm == again})
        del voice, llm, flow, hift
    out["static_vs_dynamic_same_bytes"] = pcms["static"] == pcms["dynamic"]
    report.put("voice", out)


def flow_of(voice, tokens: list[int]) -> torch.Tensor:
    """voice.render's flow call alone (HiFT is timed apart)."""
    import numpy as np

    p = voice.profile
    with torch.inference_mode():
        return voice.flow.inference(torch.tensor([tokens], dtype=torch.long), torch.from_numpy(p.speech_tokens[None]).long(),
                                    torch.from_numpy(np.ascontiguousarray(p.mel[None], dtype=np.float32)),
                                    torch.from_numpy(np.ascontiguousarray(p.embedding[None], dtype=np.float32)))


# ------------------------------------------------------------------------------- llm decode step


def check_llm_step(report: Report, device: str, small: bool, n_prompt: int, n_gen: int) -> None:
    from epub2audio.voices.cosyvoice3.llm_static import StaticDecoder

    config = llm_config(small)
    model = CosyVoice3LM.from_checkpoint(config, llm_state(config, device))
    text_ids = list(range(10, 40))
    prompt = [int(x) for x in torch.randint(0, 6561, (n_prompt,), generator=torch.Generator().manual_seed(1))]

    class Session:  # a decoding session factory with the device the timing syncs on
        def __init__(self, start):
            self.start_decoding, self.device = start, device

    steps = {"dynamic": Session(model.start_decoding),
             "static_eager": Session(StaticDecoder(model, use_graph=False).start_decoding)}
    if device == "cuda":
        steps["static_graph"] = Session(StaticDecoder(model, use_graph=True).start_decoding)
    out, tokens, logps = {}, {}, {}
    for name, lm in steps.items():
        decode(lm, text_ids, prompt, 8)  # warm-up: kernels, allocator, the graph's first capture
        tokens[name], pre, dec = decode(lm, text_ids, prompt, n_gen)
        out[name] = {"prefill_s": r4(pre), "decode_tok_s": r4(len(tokens[name]) / dec), "rtf": r4((pre + dec) / SECONDS)}
        session = lm.start_decoding(text_ids, prompt)  # teacher-forced on the dynamic path's tokens
        with torch.inference_mode():
            logps[name] = torch.stack([session(None)] + [session(t) for t in tokens["dynamic"]])
    out["static_eager_vs_dynamic"] = {"logp_max_abs": r4(max_abs(logps["static_eager"], logps["dynamic"])),
                                      "tokens_equal": tokens["static_eager"] == tokens["dynamic"]}
    if "static_graph" in steps:
        out["graph_vs_static_eager"] = {"logp_bit_equal": bool(torch.equal(logps["static_graph"], logps["static_eager"])),
                                        "tokens_equal": tokens["static_graph"] == tokens["static_eager"],
                                        "decode_speedup": r4(out["static_graph"]["decode_tok_s"] / out["static_eager"]["decode_tok_s"])}
    report.put("llm_step", out)


# ---------------------------------------------------------------------------- workers on one GPU

CHAPTER = [f"Sentence {i} of the chapter, which the narrator reads at an even pace." for i in range(30)]


def _throughput_worker(rank, device, small, n_prompt, seg_tokens, todo, done, ready, go):
    """One worker process: its own voice on the shared device, one segment at a time from the queue."""
    import hashlib

    torch.set_num_threads(1)
    if device == "cuda":
        exact_fp32_on_cuda()
    voice = build_voice(device, small, n_prompt, seg_tokens, step="auto")
    voice.synthesize(CHAPTER[0][:12], seed=0)  # warm-up (and the graph's capture) before the clock starts
    ready.put(rank)
    go.wait()
    while True:
        index = todo.get()
        if index is None:
            break
        pcm = voice.synthesize(CHAPTER[index], seed=1000 + index)
        done.put((index, hashlib.sha256(pcm).hexdigest(), len(pcm) / 2 / 24000))


def read_chapter(device: str, small: bool, n_prompt: int, seg_tokens: int, workers: int) -> tuple[float, float, dict]:
    """(audio seconds, wall seconds, {segment: sha256}) for CHAPTER read by `workers` processes."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # CUDA cannot be used in a forked child
    todo, done, ready, go = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_throughput_worker, args=(r, device, small, n_prompt, seg_tokens, todo, done, ready, go))
             for r in range(workers)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=1800)
    for i in range(len(CHAPTER)):
        todo.put(i)
    for _ in procs:
        todo.put(None)
    t = time.perf_counter()
    go.set()
    results = [done.get(timeout=3600) for _ in CHAPTER]
    wall = time.perf_counter() - t
    for p in procs:
        p.join()
    return sum(r[2] for r in results), wall, {r[0]: r[1] for r in results}


def check_throughput(report: Report, device: str, small: bool, n_prompt: int, counts: list[int]) -> None:
    seg_tokens = 20 if small else 100  # 4 s of speech a segment at full size; random weights run to the cap
    out: dict = {"segments": len(CHAPTER)}
    from epub2audio.worker.autoscale import AutoWorkersArgs, choose_workers

    solo, previous, rates = None, None, {}  # previous: the rate of the last count measured
    for n in counts:
        audio, wall, hashes = read_chapter(device, small, n_prompt, seg_tokens, n)
        solo = solo or hashes
        rates[n] = rate = audio / wall
        gain = None if previous is None else rate / previous - 1
        same = sum(hashes[i] == solo[i] for i in hashes)
        out[f"workers_{n}"] = {"audio_s": r4(audio), "wall_s": r4(wall), "audio_s_per_wall_s": r4(rate),
                               "gain_over_previous": None if gain is None else r4(gain),
                               "segments_identical_to_solo": same, "all_identical_to_solo": same == len(CHAPTER)}
        previous = rate
        report.put("throughput", out)
    # what `--workers auto` picks from this curve: the engine's rule over these counts
    choice = choose_workers(rates.__getitem__, AutoWorkersArgs(counts=tuple(counts)))
    out["auto_workers"], out["auto_reason"] = choice.workers, choice.reason
    report.put("throughput", out)


# ------------------------------------------------------------------- upstream's modules, same GPU


def check_upstream(report: Report, device: str, small: bool, src: Path | None, n_prompt: int, n_gen: int) -> None:
    """Upstream CosyVoice's own LLM, flow and HiFT (imported from `src`, built by bench/upstream.py)
    on the same random weights as ours, on `device`: RTF beside ours and the outputs' distance."""
    if src is None:
        report.put("upstream", {"skipped": "no --upstream-src DIR (bench/gpu_check_prepare.sh makes one)"})
        return
    import logging

    import transformers  # noqa: F401  (it probes the installed packages: before the stand-ins exist)
    from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: F401

    from bench import upstream as up

    src = src.resolve()
    up.install_stand_ins(src, src / "third_party" / "Matcha-TTS")
    import cosyvoice.utils.file_utils  # noqa: F401  (sets the root logger to DEBUG at import)
    from cosyvoice.utils.common import ras_sampling

    logging.getLogger().setLevel(logging.WARNING)
    commit = (src / "COMMIT").read_text().strip() if (src / "COMMIT").exists() else "unknown"
    out: dict = {"src": str(src), "commit": commit}
    # upstream asserts <|endofprompt|> (151646) in the text: the tiny LLM keeps the real text vocabulary
    config = {**llm_config(small), "vocab_size": 151936} if small else llm_config(small)
    sd = llm_state(config, device)
    n_forced = max(n_gen, 2 * (up.N_TEXT - up.N_PROMPT_TEXT) + 2)  # past upstream's min_len, where eos may come
    g = torch.Generator().manual_seed(1)
    text = torch.randint(0, 151643, (up.N_TEXT,), generator=g).tolist()
    text[up.N_PROMPT_TEXT - 1] = up.END_OF_PROMPT
    prompt = torch.randint(0, 6561, (n_prompt,), generator=g).tolist()
    forced = torch.randint(0, 6561, (n_forced,), generator=g).tolist()
    speech_s = n_forced / up.TOKENS_PER_SECOND

    ours = CosyVoice3LM.from_checkpoint(config, dict(sd))
    sampler = up.ForcedSampler(ras_sampling)
    upstream_lm = up.upstream_llm(config, dict(sd), sampler).to(device)
    from epub2audio.voices.cosyvoice3.llm_static import StaticDecoder

    makers = {"upstream": lambda f: up.UpstreamLLMRun(upstream_lm, sampler, text, prompt, f, device=device),
              "ours_dynamic": lambda f: up.OurLLMRun(ours, text, prompt, f)}
    static = StaticDecoder(ours, use_graph=device == "cuda")
    makers["ours_static_graph" if device == "cuda" else "ours_static_eager"] = (
        lambda f: up.OurLLMRun(SimpleSession(static.start_decoding), text, prompt, f))
    llm_out, logps = {"speech_tokens": n_forced}, {}
    for name, make in makers.items():
        run = make(forced[:3])
        for _ in range(4):  # warm-up: kernels, allocator, the graph's capture
            run.step()
        run, total, steps = make(forced), 0.0, []
        for _ in range(n_forced + 1):  # the prefill, then one step per forced token (the last draws eos)
            logp, t = timed(device, run.step)
            total += t
            steps.append(logp.float().cpu())
        logps[name] = steps
        llm_out[name] = {"rtf": r4(total / speech_s), "tok_s": r4(n_forced / total)}
    keep = torch.cat([torch.arange(up.SOS_ID), torch.arange(up.SOS_ID + 1, 6761)])  # as bench/upstream.py
    for name in makers:
        if name != "upstream":
            pairs = list(zip(logps["upstream"], logps[name]))
            llm_out[f"logp_upstream_vs_{name}"] = {
                "max_abs": r4(max(float((a[keep] - b[keep]).abs().max()) for a, b in pairs)),
                "argmax_agree": r4(sum(int(a[keep].argmax()) == int(b[keep].argmax()) for a, b in pairs) / len(pairs))}
    out["llm"] = llm_out
    report.put("upstream", out)
    del ours, upstream_lm, static, makers

    fa, ha = (tiny_flow_args(), tiny_hift_args()) if small else (FlowArgs(), HiFTArgs())
    fsd = {k: v.cpu() for k, v in random_flow_state_dict(fa, seed=1, device=device).items()}
    hsd = {k: v.cpu() for k, v in random_hift_state_dict(ha, seed=2, device=device).items()}
    up_flow, up_hift = up.upstream_flow_and_hift(dict(fsd), dict(hsd), fa, ha)
    up_flow, up_hift = up_flow.to(device), up_hift.to(device)
    our_flow = load_flow({k: v.to(device) for k, v in fsd.items()})
    our_hift = load_hift(dict(hsd), max_seconds=speech_s + 1).to(device)
    token, prompt_token, prompt_feat, embedding = flow_inputs(forced, n_prompt)

    def upstream_flow(tok, ptok, feat, emb):
        tok, ptok = tok.to(device, torch.int32), ptok.to(device, torch.int32)  # the frontend's dtype
        i32 = partial_tensor(device)
        mel, _ = up_flow.inference(token=tok, token_len=i32(tok.shape[1]), prompt_token=ptok,
                                   prompt_token_len=i32(ptok.shape[1]), prompt_feat=feat.to(device),
                                   prompt_feat_len=i32(feat.shape[1]), embedding=emb.to(device),
                                   streaming=False, finalize=True)
        return mel

    def our_flow_run(tok, ptok, feat, emb):
        with torch.inference_mode():
            return our_flow.inference(tok, ptok, feat, emb)

    warm = flow_inputs(forced[:20], 10)
    flow_out, mels = {}, {}
    for name, run in (("upstream", upstream_flow), ("ours", our_flow_run)):
        with torch.inference_mode():
            run(*warm)
            mels[name], t = timed(device, lambda: run(token, prompt_token, prompt_feat, embedding))
        flow_out[name] = {"rtf": r4(t / speech_s)}
    flow_out["mel_max_abs_upstream_vs_ours"] = r4(max_abs(mels["upstream"], mels["ours"]))
    flow_out["mel_equal"] = bool(torch.equal(mels["upstream"].cpu(), mels["ours"].cpu()))
    out["flow"] = flow_out
    report.put("upstream", out)

    mel = mels["ours"].to(device)
    hift_out, waves = {}, {}
    for name, run in (("upstream", lambda m: up_hift.inference(speech_feat=m, finalize=True)[0]),
                      ("ours", lambda m: our_hift.inference(m))):
        with torch.inference_mode():
            run(mel[:, :, :50])
            waves[name], t = timed(device, lambda: run(mel))
        hift_out[name] = {"rtf": r4(t / speech_s)}
    n = min(waves["upstream"].shape[-1], waves["ours"].shape[-1])
    hift_out["wave_max_abs_upstream_vs_ours"] = r4(max_abs(waves["upstream"][..., :n], waves["ours"][..., :n]))
    hift_out["wave_snr_db_ours_vs_upstream"] = r4(snr_db(waves["ours"][..., :n], waves["upstream"][..., :n]))
    out["hift"] = hift_out
    report.put("upstream", out)


class SimpleSession:
    """What bench/upstream.py's OurLLMRun needs of an LLM: start_decoding."""

    def __init__(self, start_decoding):
        self.start_decoding = start_decoding


def partial_tensor(device: str):
    return lambda n: torch.tensor([n], dtype=torch.int32, device=device)


# the figures a complete run has, per section (the "fields" section lists what is missing)
EXPECTED = {
    "llm": ["generated_tokens", "{d}_fp32", "cpu_fp32", "logp_{d}_fp32_vs_cpu_fp32", "{d}_bf16", "{d}_fp16"],
    "flow": ["{d}_fp32", "cpu_fp32", "mel_{d}_fp32_vs_cpu_fp32", "{d}_bf16", "{d}_fp16"],
    "hift": ["{d}_fp32", "cpu_fp32", "wave_{d}_fp32_vs_cpu_fp32", "{d}_bf16", "{d}_fp16", "faster_for_auto"],
    "voice": ["rtf", "dynamic_eager", "static_{g}", "static_vs_dynamic_same_bytes"],
    "llm_step": ["dynamic", "static_eager", "static_eager_vs_dynamic"],
    "throughput": ["segments", "workers_{n}", "auto_workers"],
    "upstream": ["llm", "flow", "hift"],
}


def missing_fields(data: dict, device: str, counts: list[int], only: set[str]) -> list[str]:
    g = "graph" if device == "cuda" else "eager"
    wanted = {k: list(v) for k, v in EXPECTED.items()}
    if device == "cuda":
        wanted["llm_step"] += ["static_graph", "graph_vs_static_eager"]
        wanted["flow"].append("cuda_tf32")
    missing = []
    for section, keys in wanted.items():
        if section not in only:
            continue
        got = data.get(section)
        if not isinstance(got, dict) or "error" in got:
            missing.append(section)
            continue
        for key in keys:
            for name in ([key.format(n=n) for n in counts] if "{n}" in key else [key.format(d=device, g=g)]):
                if name not in got:
                    missing.append(f"{section}.{name}")
    return missing


def build_voice(device: str, small: bool, n_prompt: int, n_gen: int, step: str = "dynamic"):
    """A CosyVoice3Voice on random weights with every stage on `device` (text ids are bytes)."""
    import numpy as np

    from epub2audio.voices.base import VoiceInfo
    from epub2audio.voices.cosyvoice3.llm_static import choose_step
    from epub2audio.voices.cosyvoice3.profile import Profile
    from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

    class ByteTokenizer:  # text ids are all the LLM needs; the real BPE is not the point here
        def encode(self, text: str) -> list[int]:
            return list(text.encode("utf-8"))

    config = llm_config(small)
    llm = TorchSpeechLM(CosyVoice3LM.from_checkpoint(config, llm_state(config, device)), choose_step(step, device))
    flow = load_flow(random_flow_state_dict(tiny_flow_args() if small else FlowArgs(), seed=1, device=device))
    hift_sd = random_hift_state_dict(tiny_hift_args() if small else HiFTArgs(), seed=2, device=device)
    hift = load_hift(hift_sd, max_seconds=n_gen / 25 + 1).to(device)  # as voice.load: stft window too
    rng = np.random.default_rng(0)
    profile = Profile(
        name="gpu", transcript="random", prompt_text_ids=rng.integers(0, 500, 30).astype(np.int64),
        speech_tokens=rng.integers(0, 6561, n_prompt).astype(np.int64),
        mel=rng.standard_normal((2 * n_prompt, 80)).astype(np.float32),
        embedding=rng.standard_normal(192).astype(np.float32), wav_sha256="", model_id="random", created="",
    )  # fmt: skip
    return CosyVoice3Voice(info=VoiceInfo("cosyvoice3:gpu", "gpu", 24000, "torch", "fp32", "random"),
                           tokenizer=ByteTokenizer(), llm=llm, flow=flow, hift=hift,
                           profile=profile, max_tokens_per_segment=n_gen)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cuda", help="the accelerator to check (cpu: a dry run)")
    p.add_argument("--small", action="store_true", help="tiny dims and short sequences (a dry run of the script)")
    p.add_argument("--only", default="llm,flow,hift,voice,llm_step,throughput,upstream")
    p.add_argument("--workers", default="1,2,4,8", help="the worker counts of the throughput section")
    p.add_argument("--upstream-src", type=Path, help="upstream CosyVoice's tree (cosyvoice/ and third_party/Matcha-TTS/"
                                                     "matcha/; bench/gpu_check_prepare.sh makes .gpu_check/upstream)")
    a = p.parse_args()
    torch.manual_seed(0)
    report = Report(a.out)
    env = {"torch": torch.__version__, "python": platform.python_version(), "cpu_threads": torch.get_num_threads(),
           "cpu_count": os.cpu_count(), "small": a.small}
    if a.device == "cuda":
        exact_fp32_on_cuda()
        env.update({"cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(), "tf32": False})
    report.put("env", env)
    n_prompt, n_gen, cpu_steps = (20, 30, 10) if a.small else (150, 250, 30)
    only = set(a.only.split(","))
    counts = [int(n) for n in a.workers.split(",")]
    state = {"tokens": list(range(100, 100 + n_gen)),
             "mel": torch.randn(1, 80, 2 * n_gen, generator=torch.Generator().manual_seed(0))}
    sections = {
        "llm": lambda: state.update(tokens=check_llm(report, a.device, a.small, n_prompt, n_gen, cpu_steps)),
        "flow": lambda: state.update(mel=check_flow(report, a.device, a.small, state["tokens"], n_prompt)),
        "hift": lambda: check_hift(report, a.device, a.small, state["mel"]),
        "voice": lambda: check_voice(report, a.device, a.small, n_prompt, n_gen),
        "llm_step": lambda: check_llm_step(report, a.device, a.small, n_prompt, n_gen),
        "throughput": lambda: check_throughput(report, a.device, a.small, n_prompt, counts),
        "upstream": lambda: check_upstream(report, a.device, a.small, a.upstream_src, n_prompt, n_gen),
    }
    failed = 0
    for name, run in sections.items():
        if name in only:
            try:  # one broken section must not cost the others' figures
                run()
            except Exception as error:
                import traceback

                traceback.print_exc()
                report.put(name, {"error": f"{type(error).__name__}: {error}"})
                failed += 1
            if a.device == "cuda":
                torch.cuda.empty_cache()
    missing = missing_fields(report.data, a.device, counts, only)
    report.put("fields", {"missing": missing})
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
