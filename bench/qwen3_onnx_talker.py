"""Is an ONNX Runtime Talker step faster than our torch Talker step on this CPU? (issue 31, item 3)

    PYTHONPATH=engine:. nice /work/main/.venv/bin/python bench/qwen3_onnx_talker.py --dir /work/tmp/qwen3-full \
        [--threads 2] [--rounds 5] [--prefill 40] [--steps 8]

The Talker's decoder stack and codec head are exported by qwen3tts/talker_onnx.py (its graph: the
KV cache as explicit inputs and outputs, plain ops, the TorchScript exporter) into a folder of its
own, and opened as the backend opens it (talker_onnx.load_onnx_talker: CPU execution provider,
ORT_ENABLE_ALL, intra-op threads = torch's, inter-op 1). Then, on the same inputs: its logits
against our torch Talker's (a prefill of `--prefill` random vectors + `--steps` teacher-forced
steps), max |diff|; and the time of one decode step after the prefill (mean over the steps) through
each Talker's start_decoding (the seam generate.py calls, host conversions included), interleaved
ABBA per round, a warm-up untimed, best of rounds, every round logged. Also the torch Code
Predictor frame, for scale (what share of a frame the Talker step is).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT)]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {' '.join(f'{x:.2f}' for x in os.getloadavg())}] {msg}", flush=True)


def rss_gb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1e6
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="a full-size folder (bench/qwen3_full_folder.py)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prefill", type=int, default=40)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--cp-frames", type=int, default=2)
    ap.add_argument("--work", help="where the graph is written (default: a temp folder, removed)")
    ap.add_argument("--reference", help="upstream's fp64 Talker logits (bench/upstream_qwen3.py --full "
                    "--save-reference): hold both Talkers to them")
    a = ap.parse_args()

    import onnxruntime as ort
    import torch

    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.sampling import warp_and_draw
    from epub2audio.voices.qwen3tts.talker import Talker
    from epub2audio.voices.qwen3tts.talker_onnx import load_onnx_talker

    torch.set_num_threads(a.threads)
    ck = load_checkpoint(a.dir)
    ta, ga = ck.talker_args, ck.generation
    talker = Talker.from_state_dict(ta, ck.state_dict)
    talker.model.text_embedding = None  # not read by a decode step; 1.2 GB
    cp = CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="qwen3-onnx-", dir="/work/tmp"))
    t0 = time.perf_counter()
    onnx_talker = load_onnx_talker(lambda: Talker.from_state_dict(ta, ck.state_dict), "bench", work, threads=a.threads)
    onnx_talker.model.text_embedding = None
    ck.state_dict.clear()
    gc.collect()
    path = onnx_talker.model_path
    size = sum(f.stat().st_size for f in path.parent.iterdir())
    ops = sorted({n.op_type for n in __import__("onnx").load(str(path), load_external_data=False).graph.node})
    log(f"{a.dir}: Talker {ta.num_hidden_layers} x {ta.hidden_size}; {path.name} ({size / 1e9:.2f} GB) exported "
        f"(or reused) and its session opened in {time.perf_counter() - t0:.0f} s ({onnx_talker.session.get_providers()[0]}, "
        f"{onnx_talker.threads} intra-op threads); {platform.machine()}, torch {torch.__version__}, onnxruntime "
        f"{ort.__version__}; graph ops {ops}; RSS {rss_gb():.1f} GB")  # fmt: skip

    g = torch.Generator().manual_seed(9)
    x = torch.randn(1, a.prefill + a.steps, ta.hidden_size, generator=g)
    hid, first = torch.randn(ta.hidden_size, generator=g), torch.randn(ta.hidden_size, generator=g)
    logits: dict[str, list] = {}

    def torch_steps() -> float:
        step = talker.start_decoding(x[:, : a.prefill])
        out = [step(None)[0]]
        t0 = time.perf_counter()
        for i in range(a.prefill, a.prefill + a.steps):
            out.append(step(x[0, i])[0])
        dt = (time.perf_counter() - t0) / a.steps
        logits.setdefault("torch", out)
        return dt

    def ort_steps() -> float:
        step = onnx_talker.start_decoding(x[:, : a.prefill])
        out = [step(None)[0]]
        t0 = time.perf_counter()
        for i in range(a.prefill, a.prefill + a.steps):
            out.append(step(x[0, i])[0])
        dt = (time.perf_counter() - t0) / a.steps
        logits.setdefault("onnx", out)
        return dt

    sub = dict(do_sample=ga.subtalker_dosample, temperature=ga.subtalker_temperature, top_k=ga.subtalker_top_k,
               top_p=ga.subtalker_top_p)  # fmt: skip

    def cp_frame() -> float:
        gen = torch.Generator().manual_seed(1)
        t0 = time.perf_counter()
        for _ in range(a.cp_frames):
            cp.predict(hid, first, lambda lg: warp_and_draw(lg.clone(), gen, **sub))
        return (time.perf_counter() - t0) / a.cp_frames

    runs = {"torch": torch_steps, "onnx": ort_steps}
    times: dict[str, list[float]] = {n: [] for n in runs}
    with torch.inference_mode():
        if a.reference:
            ref = torch.load(a.reference)
            xr, p = ref["x"], ref["prefill"]
            for name, t in (("torch", talker), ("onnx", onnx_talker)):
                step = t.start_decoding(xr[:, :p])
                sess = torch.stack([step(None)[0]] + [step(xr[0, i])[0] for i in range(p, xr.shape[1])])
                log(f"{name} vs upstream fp64: Talker logits, KV session (prefill {p} + {xr.shape[1] - p} steps) "
                    f"max |diff| {float((sess.double() - ref['talker64'][p - 1:]).abs().max()):.3e} "
                    f"(upstream's own fp32 floor {ref['talker_floor']:.3e})")  # fmt: skip
        for fn in runs.values():
            fn()  # warm-up, untimed (also records the logits compared below)
        diff = max(float((p - q).abs().max()) for p, q in zip(logits["torch"], logits["onnx"]))
        scale = max(float(p.abs().max()) for p in logits["torch"])
        agree = sum(int(p.argmax()) == int(q.argmax()) for p, q in zip(logits["torch"], logits["onnx"]))
        log(f"logits, onnx vs torch on the same inputs (prefill {a.prefill} + {a.steps} steps): max |diff| {diff:.3e} "
            f"(max |logit| {scale:.2f}); argmax agree {agree}/{len(logits['torch'])}")  # fmt: skip
        for r in range(a.rounds):
            for name in list(runs) if r % 2 == 0 else list(runs)[::-1]:
                times[name].append(runs[name]())
            log(f"  Talker step (s/step) round {r + 1}: " + ", ".join(f"{n} {t[-1]:.4f}" for n, t in times.items()))
        cp_times = [cp_frame() for _ in range(2)]
        log(f"  torch Code Predictor frame (s/frame, {a.cp_frames} frames): {', '.join(f'{t:.4f}' for t in cp_times)}")
    best = {n: min(t) for n, t in times.items()}
    print(f"\n## Qwen3-TTS Talker decode step: ONNX Runtime {ort.__version__} vs torch {torch.__version__}, fp32, "
          f"{platform.machine()}, {a.threads} threads each")
    print(f"One step after a {a.prefill}-position prefill (mean of {a.steps} steps); best of {a.rounds} interleaved "
          f"rounds (ABBA); ratio = torch s / this s (> 1: faster than torch)\n")
    print("| backend | s/step best | all rounds | torch / this |\n|---|---|---|---|")
    for n, ts in times.items():
        print(f"| {n} | {best[n]:.4f} | {', '.join(f'{t:.4f}' for t in ts)} | {best['torch'] / best[n]:.2f}x |")
    frame = min(cp_times)
    print(f"\nlogits max |diff| onnx vs torch {diff:.3e}; torch Code Predictor frame {frame:.4f} s, so a frame "
          f"(Talker step + Code Predictor frame) is {best['torch'] + frame:.3f} s on torch and "
          f"{best['onnx'] + frame:.3f} s with the ONNX Talker ({(best['torch'] + frame) / (best['onnx'] + frame):.2f}x)")
    if not a.work:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
