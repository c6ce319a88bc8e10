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

    PYTHONPATH=engine:. python bench/compress.py --only llm [--work DIR]

The LLM alone, for the disk goal: writes only the full-size llm.pt, stores it as each of
LLM_VARIANTS (compress.py's own code, llm.safetensors), and reports the file's size and the
deviation of its torch LLM (as `model compress` folders run it) from llm.pt's fp32 LLM over the same
prompt and 41 steps as above: max and mean |log-prob difference|, KL(fp32 || variant) per step,
total variation per step, and how often the most likely token differs.

    PYTHONPATH=engine:. python bench/compress.py --only load [--rounds 5] [--work DIR]

Load time alone, for the load goal: the same folders, each loaded by a fresh real worker in
interleaved rounds (fp32, variant, fp32, ...), the worker's own meter of the load; the median per
folder and its ratio to the fp32 folder's median.
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
    "int8 tables8+half": {"llm": "int8", "tables": "int8", "flow": "bf16", "hift": "fp16"},
    "int4+half": {"llm": "int4", "flow": "bf16", "hift": "fp16"},
}
LLM_VARIANTS = {  # name: compress options for --only llm ("dense": torch fp32 on the dequantised weights,
    "int8": {"llm": "int8"},  # what the ONNX / MLX paths compute, without torch int8's activation rounding)
    "int8 tables8": {"llm": "int8", "tables": "int8"},
    "int4": {"llm": "int4"},
    "int8 dense": {"llm": "int8", "dense": True},
    "int8 tables8 dense": {"llm": "int8", "tables": "int8", "dense": True},
}
STEPS = 40
PROMPT_TEXT = "The quick brown fox."


def write_llm_source(model: Path) -> None:
    """The full-size llm.pt and its tokenizer + config.json (the LLM part of the official folder)."""
    import torch

    from bench.fullsize import full_size_qwen_config
    from epub2audio.voices.cosyvoice3 import checkpoint as ck
    from epub2audio.voices.cosyvoice3.llm import LLMArgs
    from tests.cosyvoice3 import fixtures as fx
    from tests.cosyvoice3 import random_weights as rw

    blank = model / ck.BLANK_EN
    blank.mkdir(parents=True)
    n_base = fx.write_tiny_tokenizer(blank)
    cfg = {**full_size_qwen_config(), "bos_token_id": n_base, "eos_token_id": n_base}
    (blank / "config.json").write_text(json.dumps(cfg))
    sd = rw.random_llm_state_dict(LLMArgs.from_config(cfg), seed=0)
    sd["llm_decoder.weight"][6561:] = 0.0  # no early eos (as bench/fullsize.py)
    torch.save(sd, model / "llm.pt")


def bench_prompt():
    """The voice profile's prompt: 30 text ids, 100 speech tokens (numpy), then its mel and embedding."""
    import numpy as np

    rng = np.random.default_rng(0)
    return (rng.integers(0, 400, 30).astype(np.int64), rng.integers(0, 6561, 100).astype(np.int64),
            rng.standard_normal((200, 80)).astype(np.float32), rng.standard_normal(192).astype(np.float32))


def fed_tokens() -> list[int]:
    import numpy as np

    return np.random.default_rng(1).integers(0, 6561, STEPS).tolist()


def write_source(d: Path) -> None:
    import torch

    from epub2audio.voices.cosyvoice3 import checkpoint as ck
    from epub2audio.voices.cosyvoice3.flow import FlowArgs
    from epub2audio.voices.cosyvoice3.hift import HiFTArgs
    from epub2audio.voices.cosyvoice3.profile import Profile, save_profile
    from tests.cosyvoice3 import fixtures as fx
    from tests.cosyvoice3 import random_weights as rw

    write_llm_source(d / "model")
    torch.save(rw.random_flow_state_dict(FlowArgs(), 1), d / "model" / "flow.pt")
    torch.save(rw.random_hift_state_dict(HiFTArgs(), 2), d / "model" / "hift.pt")
    (d / "model" / "cosyvoice3.yaml").write_text(fx.recipe_yaml(FlowArgs(), HiFTArgs(), 896))
    fx.write_campplus_onnx(d / "model" / "campplus.onnx", 0)
    fx.write_speech_tokenizer_onnx(d / "model" / "speech_tokenizer_v3.onnx")
    text_ids, speech_tokens, mel, embedding = bench_prompt()
    profile = Profile(name="bench", transcript="random", prompt_text_ids=text_ids, speech_tokens=speech_tokens,
                      mel=mel, embedding=embedding, wav_sha256="",
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
    tokens = fed_tokens()
    t = time.perf_counter()
    p = voice.profile
    step = voice.llm.start_decoding(p.prompt_text_ids.tolist() + voice.tokenizer.encode(PROMPT_TEXT),
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


def llm_checkpoint(model: Path):
    """A Checkpoint holding only the LLM (llm.pt memory-mapped, config.json): all --only llm writes."""
    from epub2audio.voices.cosyvoice3 import checkpoint as ck

    paths = ck.CheckpointPaths(Path(model))
    return ck.Checkpoint(paths=paths, llm_state_dict=ck._load_state_dict(paths.llm), flow_state_dict={}, hift_state_dict={},
                         qwen_config=ck.read_qwen_config(paths), recipe={}, model_id="bench")


def write_stored_llm(model: str, out: str, options: str) -> None:
    """llm.pt stored as `model compress` stores it (compress.py's code), the LLM file alone."""
    from epub2audio.voices.cosyvoice3 import compress as cz

    options = json.loads(options)
    sd = llm_checkpoint(Path(model)).llm_state_dict
    tables = cz.tables_for(options["llm"], options.get("tables"))
    cz._save(cz.compress_llm_state_dict(sd, options["llm"], None, tables), Path(out), {"precision": options["llm"], "tables": tables})


def measure_llm(model: str, stored: str, options: str, out: str) -> None:
    """In a fresh process: the 41 steps' log-probs of llm.pt at fp32 (stored "-") or of a stored
    LLM file run as a compressed folder runs it (compress.build_llm_from_folder, torch)."""
    import numpy as np
    import torch

    from epub2audio.voices.cosyvoice3 import compress as cz
    from epub2audio.voices.cosyvoice3.backends import build_torch_llm
    from epub2audio.voices.cosyvoice3.frontend import load_text_tokenizer

    torch.set_num_threads(2)
    options = json.loads(options)
    source = llm_checkpoint(Path(model))
    if stored == "-":
        lm = build_torch_llm(source.qwen_config, dict(source.llm_state_dict), "fp32")
    else:
        source.llm_state_dict = cz._load_safetensors(Path(stored))[0]
        source.compressed = {"options": {**options, "tables": cz.tables_for(options["llm"], options.get("tables"))}}
        if options.get("dense"):
            lm = build_torch_llm(source.qwen_config, cz.dequantized_llm_state_dict(source.llm_state_dict), "fp32")
        else:
            lm = cz.build_llm_from_folder(source, "torch", "fp32")
    text_ids, speech_tokens, _, _ = bench_prompt()
    tokenizer = load_text_tokenizer(source.paths.blank_en)
    step = lm.start_decoding(text_ids.tolist() + tokenizer.encode(PROMPT_TEXT), speech_tokens.tolist())
    logps = [step(None)] + [step(tok) for tok in fed_tokens()]
    np.save(out, torch.stack(logps).float().numpy())
    print(json.dumps({"backend": lm.backend, "precision": lm.precision + (" dequantised" if options.get("dense") else "")}))


def llm_only(work: Path) -> None:
    import numpy as np

    model = work / "model"
    if not (model / "llm.pt").exists():
        t = time.perf_counter()
        write_llm_source(model)
        print(f"wrote the full-size llm.pt in {time.perf_counter() - t:.0f} s", flush=True)
    runs = {"fp32 (llm.pt)": ("-", {})}
    for name, options in LLM_VARIANTS.items():
        stored = work / f"llm {name.removesuffix(' dense')}.safetensors"
        if not stored.exists():
            t = time.perf_counter()
            tmp = stored.with_name(stored.name + ".tmp")  # a fresh process each: llm.pt's pages are let go
            subprocess.run([sys.executable, __file__, "--store-llm", str(model), str(tmp), json.dumps(options)], check=True)
            tmp.rename(stored)
            print(f"stored {name} in {time.perf_counter() - t:.0f} s", flush=True)
        runs[name] = (str(stored), options)
    logp, info = {}, {}
    for name, (stored, options) in runs.items():
        out = work / f"logp {name}.npy"
        proc = subprocess.run([sys.executable, __file__, "--measure-llm", str(model), stored, json.dumps(options), str(out)],
                              capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"{name}: {proc.stderr[-2000:]}")
        info[name] = json.loads(proc.stdout.splitlines()[-1])
        logp[name] = np.load(out).astype(np.float64)
        print(f"measured {name}", flush=True)

    ref = logp["fp32 (llm.pt)"]
    p_ref = np.exp(ref)
    rows = [("", *runs), ("runs as", *(f"{i['backend']} {i['precision']}" for i in info.values()))]
    rows.append(("disk llm GB", f"{(model / 'llm.pt').stat().st_size / 1e9:.3f}",
                 *(f"{Path(stored).stat().st_size / 1e9:.3f}" for stored, _ in list(runs.values())[1:])))
    stats = {}
    for name, lp in logp.items():
        kl = (p_ref * (ref - lp)).sum(-1)  # per step, nats
        stats[name] = {"max |dlogp|": np.abs(lp - ref).max(), "mean |dlogp|": np.abs(lp - ref).mean(),
                       "E_p |dlogp|": (p_ref * np.abs(lp - ref)).sum(-1).mean(),
                       "KL mean nats": kl.mean(), "KL max nats": kl.max(),
                       "TV max": (0.5 * np.abs(np.exp(lp) - p_ref).sum(-1)).max(),
                       "argmax differs": f"{int((lp.argmax(-1) != ref.argmax(-1)).sum())}/{len(ref)}"}
    for key in stats["int8"]:
        rows.append((key, *(v[key] if isinstance(v[key], str) else f"{v[key]:.3e}" for v in stats.values())))
    width = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, width)))


def load_rounds(folders: dict, profile: Path, rounds: int) -> None:
    """Each folder loaded by a fresh worker once per round, folders interleaved; medians and ratios."""
    import statistics

    seconds: dict[str, list[float]] = {name: [] for name in folders}
    for i in range(rounds):
        for name, folder in folders.items():
            seconds[name].append(worker_load(str(folder), str(profile))["seconds"])
        print(f"round {i + 1}: " + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items()), flush=True)
    base = statistics.median(seconds["fp32 (official)"])
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"{name:20s} load median {median:.2f} s ({median / base:.2f}x)  "
              f"min {min(values):.2f}  max {max(values):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path)
    ap.add_argument("--only", choices=("llm", "load"),
                    help="llm: the LLM alone, its disk and deviation per LLM_VARIANTS; load: load time alone")
    ap.add_argument("--rounds", type=int, default=5, help="--only load: interleaved rounds")
    ap.add_argument("--measure", nargs=3)
    ap.add_argument("--measure-llm", nargs=4)
    ap.add_argument("--store-llm", nargs=3)
    args = ap.parse_args()
    if args.store_llm:
        return write_stored_llm(*args.store_llm)
    if args.measure:
        return measure(*args.measure)
    if args.measure_llm:
        return measure_llm(*args.measure_llm)
    import numpy as np

    work = args.work or Path(tempfile.mkdtemp(prefix="e2a-compress-bench-"))
    if args.only == "llm":
        return llm_only(work)
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
    if args.only == "load":
        return load_rounds(folders, work / "profile", args.rounds)
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
