"""Compressed model folders against the official fp32 folder, side by side, at FULL size.

    PYTHONPATH=engine:. python bench/compress.py [--work DIR]

Writes a full-size random-weight official folder (llm.pt 2.0 GB, flow.pt 1.3 GB, hift.pt 83 MB;
tiny tokenizer), compresses it with each VARIANT (`epub2audio model compress`'s code), then loads
every folder in a real worker (epub2audio.worker.child, torch LLM) and reports the worker's own
meter of that load (seconds, private and anonymous memory after it, sampled peak private memory
during it: worker/memory.py); then, in a fresh process, the peak private memory over load + run
(the same meter, PeakSampler),
LLM time for a prefill + 40 teacher-forced steps, one flow + HiFT call on those 40 tokens (RTF over
the 1.6 s of audio), and the deviation from the fp32 folder: max |log-prob| difference over the
41 steps, mel relative error, waveform SNR. Random weights: the speeds and errors are real, the
audio is noise. Run it alone: it needs ~8 GB and several minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT))

VARIANTS = {  # name: compress options
    "int8": {"llm": "int8", "flow": "fp32", "hift": "fp32"},
    "int8+half": {"llm": "int8", "flow": "bf16", "hift": "fp16"},
    "int4+half": {"llm": "int4", "flow": "bf16", "hift": "fp16"},
}
STEPS = 40


def write_source(d: Path) -> None:
    import numpy as np
    import torch

    from bench.fullsize import full_size_qwen_config
    from epub2audio.voices.cosyvoice3 import checkpoint as ck
    from epub2audio.voices.cosyvoice3.flow import FlowArgs
    from epub2audio.voices.cosyvoice3.hift import HiFTArgs
    from epub2audio.voices.cosyvoice3.llm import LLMArgs
    from epub2audio.voices.cosyvoice3.profile import Profile, save_profile
    from tests.cosyvoice3 import fixtures as fx
    from tests.cosyvoice3 import random_weights as rw

    blank = d / "model" / ck.BLANK_EN
    blank.mkdir(parents=True)
    n_base = fx.write_tiny_tokenizer(blank)
    cfg = {**full_size_qwen_config(), "bos_token_id": n_base, "eos_token_id": n_base}
    (blank / "config.json").write_text(json.dumps(cfg))
    sd = rw.random_llm_state_dict(LLMArgs.from_config(cfg), seed=0)
    sd["llm_decoder.weight"][6561:] = 0.0  # no early eos (as bench/fullsize.py)
    torch.save(sd, d / "model" / "llm.pt")
    del sd
    torch.save(rw.random_flow_state_dict(FlowArgs(), 1), d / "model" / "flow.pt")
    torch.save(rw.random_hift_state_dict(HiFTArgs(), 2), d / "model" / "hift.pt")
    (d / "model" / "cosyvoice3.yaml").write_text(fx.recipe_yaml(FlowArgs(), HiFTArgs(), 896))
    fx.write_campplus_onnx(d / "model" / "campplus.onnx", 0)
    fx.write_speech_tokenizer_onnx(d / "model" / "speech_tokenizer_v3.onnx")
    rng = np.random.default_rng(0)
    profile = Profile(name="bench", transcript="random", prompt_text_ids=rng.integers(0, 400, 30).astype(np.int64),
                      speech_tokens=rng.integers(0, 6561, 100).astype(np.int64),
                      mel=rng.standard_normal((200, 80)).astype(np.float32),
                      embedding=rng.standard_normal(192).astype(np.float32), wav_sha256="",
                      model_id=ck.compute_model_id(ck.check_layout(d / "model")), created="")
    save_profile(profile, d / "profile")


def worker_load(model: str, profile: str) -> dict:
    """Load the folder in a real worker and return its own meter of the load (child.py)."""
    from epub2audio.worker.supervisor import Supervisor, WorkerPolicy

    options = {"model_dir": model, "profile_dir": profile,
               "extra": {"llm_backend": "torch", "max_tokens_per_segment": STEPS}}
    s = Supervisor({"voice": "cosyvoice3:bench", "threads": 2, "options": options}, WorkerPolicy(start_timeout=1800))
    try:
        return {**s.details.load, "precision": s.details.precision}
    finally:
        s.close()


def measure(model: str, profile: str, out: str) -> None:
    """In a fresh process: load as the worker does, then the LLM and one render, under the
    worker's meter (PeakSampler) for the peak over both."""
    import numpy as np
    import torch

    from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice
    from epub2audio.worker.memory import PeakSampler

    torch.set_num_threads(2)
    meter = PeakSampler(0.02).__enter__()
    voice = CosyVoice3Voice.load(model, profile, llm_backend="torch", max_tokens_per_segment=STEPS)
    tokens = np.random.default_rng(1).integers(0, 6561, STEPS).tolist()
    t = time.perf_counter()
    p = voice.profile
    step = voice.llm.start_decoding(p.prompt_text_ids.tolist() + voice.tokenizer.encode("The quick brown fox."),
                                    p.speech_tokens.tolist())
    logps = [step(None)] + [step(tok) for tok in tokens]
    llm_s = time.perf_counter() - t
    t = time.perf_counter()
    with torch.inference_mode():
        mel = voice.flow.inference(torch.tensor([tokens]), torch.from_numpy(p.speech_tokens[None]),
                                   torch.from_numpy(p.mel[None]), torch.from_numpy(p.embedding[None]))
        wav = voice.hift.inference(mel).cpu()
    render_s = time.perf_counter() - t
    meter.__exit__(None, None, None)
    np.savez(out, logp=torch.stack(logps).float().numpy(), mel=mel.float().cpu().numpy(), wav=wav.float().numpy())
    print(json.dumps({"peak_private_run": meter.peak, "llm_s": llm_s, "render_s": render_s}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path)
    ap.add_argument("--measure", nargs=3)
    args = ap.parse_args()
    if args.measure:
        return measure(*args.measure)
    import numpy as np

    work = args.work or Path(tempfile.mkdtemp(prefix="e2a-compress-bench-"))
    if not (work / "model").exists():
        t = time.perf_counter()
        write_source(work)
        print(f"wrote the full-size fp32 folder in {time.perf_counter() - t:.0f} s", flush=True)
    folders = {"fp32 (official)": work / "model"}
    for name, options in VARIANTS.items():
        dst = work / name
        if not dst.exists():
            t = time.perf_counter()
            code = ("import sys; from epub2audio.voices.cosyvoice3.compress import compress_folder; "
                    f"compress_folder({str(work / 'model')!r}, {str(dst)!r}, **{options!r})")
            subprocess.run([sys.executable, "-c", code], check=True)
            print(f"compressed {name} in {time.perf_counter() - t:.0f} s", flush=True)
        folders[name] = dst
    results = {}
    for name, folder in folders.items():
        load = worker_load(str(folder), str(work / "profile"))
        out = work / f"{name.split()[0]}.npz"
        proc = subprocess.run([sys.executable, __file__, "--measure", str(folder), str(work / "profile"), str(out)],
                              capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"{name}: {proc.stderr[-2000:]}")
        results[name] = {**load, **json.loads(proc.stdout.splitlines()[-1]), "arrays": dict(np.load(out))}
        print(f"measured {name}", flush=True)

    ref = results["fp32 (official)"]["arrays"]
    audio_s = 2 * STEPS * 480 / 24000

    def part(folder: Path, stem: str) -> float:
        return sum(p.stat().st_size for p in folder.glob(stem + ".*") if p.suffix in (".pt", ".safetensors")) / 1e9

    rows = [("", *folders)]
    rows.append(("precision", *(r["precision"] for r in results.values())))
    for stem in ("llm", "flow", "hift"):
        rows.append((f"disk {stem} GB", *(f"{part(f, stem):.3f}" for f in folders.values())))
    rows.append(("disk total GB", *(f"{sum(p.stat().st_size for p in f.rglob('*') if p.is_file()) / 1e9:.2f}" for f in folders.values())))
    base = results["fp32 (official)"]
    for key, label, scale in (("seconds", "load s (worker)", 1), ("private_bytes", "private after load GB (worker)", 1e9),
                              ("anonymous_bytes", "  of it anonymous GB (worker)", 1e9),
                              ("peak_private_bytes", "peak private in load GB (worker)", 1e9),
                              ("peak_rss_bytes", "peak RSS in load GB (worker)", 1e9),
                              ("peak_private_run", "peak private load+run GB", 1e9), ("llm_s", f"LLM prefill+{STEPS} s", 1),
                              ("render_s", "flow+HiFT s", 1)):
        rows.append((label, *(f"{r[key] / scale:.2f} ({r[key] / base[key]:.2f}x)" for r in results.values())))
    rows.append(("RTF (LLM+render)", *(f"{(r['llm_s'] + r['render_s']) / audio_s:.2f}" for r in results.values())))
    for r in results.values():
        a = r["arrays"]
        r["dlogp"] = float(np.abs(a["logp"] - ref["logp"]).max())
        r["mel"] = float(np.linalg.norm(a["mel"] - ref["mel"]) / np.linalg.norm(ref["mel"]))
        noise = np.sum((a["wav"] - ref["wav"]) ** 2)
        r["snr"] = float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref["wav"] ** 2) / noise))
    rows.append(("max |dlogp|", *(f"{r['dlogp']:.2e}" for r in results.values())))
    rows.append(("mel rel err", *(f"{r['mel']:.2e}" for r in results.values())))
    rows.append(("wav SNR dB", *(f"{r['snr']:.1f}" for r in results.values())))
    width = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, width)))


if __name__ == "__main__":
    main()
