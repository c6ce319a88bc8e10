"""CosyVoice3 LLM stage: every backend x precision side by side on FULL-SIZE random weights.

    .venv/bin/python bench/llm.py                       # all variants, 150-token prompt, 60 steps
    .venv/bin/python bench/llm.py --steps 100 --only torch:int8 mlx:int4

Not a test: prints a table. Weights are random with the real shapes (Qwen2-0.5B backbone + the
6761-entry speech tables, 506 M parameters), generated in memory by tests/cosyvoice3's
random_weights.py and written once as llm.pt to a temporary directory (never into the repo),
which each variant memory-maps exactly as `load_checkpoint` does. Speeds are real; output
quality is not. Each variant runs in its own process, so its peak RSS is its own.

Per variant: build (for MLX: the one-time conversion into a temporary MLX cache, then a second
load from that cache), prefill of the prompt, then `--steps` decode steps, each one
`next_logp(token)` + the host sampler (tokens are teacher-forced from a fixed random list, so
every variant does the same work and random weights cannot stop early).

    tok/s       decode steps per second (the first 2 steps excluded as warm-up)
    RTF dec     LLM real-time factor of decoding: (1 / tok/s) / (1/25 s of speech per token)
    RTF 10s     a 10 s utterance incl. its prefill: (prefill + 250 / tok/s) / 10
    floor       bandwidth limit: weight bytes read per decode token / measured read bandwidth
                (numpy, same run, 2 threads), as RTF; the best any implementation can do here
    RSS         peak resident set of the variant's process; "at release" = RSS right after the
                MLX conversion, when the torch tensors are dropped, before the MLX build
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ["torch:fp32", "torch:bf16", "torch:int8", "mlx:fp32", "mlx:fp16", "mlx:bf16", "mlx:int8", "mlx:int4"]
TOKENS_PER_SECOND = 25


def rss() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[k] = int(v.split()[0]) / 1024  # MB
    if not out:  # not Linux
        out["VmHWM"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1024)
    return out


# --- memory bandwidth ---------------------------------------------------------------------------


def bandwidth(mb: int = 512, repeats: int = 5) -> dict[str, float]:
    """GB/s: read-only (sum) on 1 and 2 threads, and copy (read + write) on 1 thread."""
    a = np.ones(mb * (1 << 20) // 8, dtype=np.float64)
    b = np.empty_like(a)

    def best(fn) -> float:
        t = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
        return min(t)

    halves = np.array_split(a, 2)

    def two_threads():
        th = [threading.Thread(target=np.add.reduce, args=(h,)) for h in halves]
        [x.start() for x in th]
        [x.join() for x in th]

    gb = a.nbytes / 1e9
    return {
        "read_1t": gb / best(lambda: np.add.reduce(a)),
        "read_2t": gb / best(two_threads),
        "copy_1t": 2 * gb / best(lambda: np.copyto(b, a)),
    }


# --- one variant (child process) -------------------------------------------------------------------


class _Checkpoint(SimpleNamespace):
    """Records the RSS at the moment build_llm drops the torch tensors."""

    def __setattr__(self, name, value):
        if name == "llm_state_dict" and "llm_state_dict" in self.__dict__ and not value:
            super().__setattr__(name, value)
            import gc

            gc.collect()
            self.__dict__["rss_at_release"] = rss()
            return
        super().__setattr__(name, value)


def weight_bytes_per_token(lm) -> int:
    """Bytes of weights a decode step streams: every layer, the final norm and the speech head
    (not the text embedding, nor the speech table, of which one row is read)."""
    if lm.backend == "mlx":
        from mlx.utils import tree_flatten

        m = lm.model
        backbone = sum(v.nbytes for k, v in tree_flatten(m.model.parameters()) if not k.startswith("embed_tokens."))
        return backbone + sum(v.nbytes for _, v in tree_flatten(m.llm_decoder.parameters()))
    import torch

    model = lm.model
    total = 0
    for mod in [*model.qwen2.layers, model.qwen2.norm, model.llm_decoder]:
        for sub in mod.modules():
            w = getattr(sub, "weight", None)
            if callable(w):  # dynamic quantised Linear: packed int8 weight + per-channel scale/zero point
                q = w()
                total += q.numel() * q.element_size() + q.shape[0] * 16
                b = sub.bias()
                total += 0 if b is None else b.numel() * b.element_size()
        for p in mod.parameters():
            total += p.numel() * p.element_size()
        for buf in mod.buffers():
            if buf.dtype != torch.qint8:
                total += buf.numel() * buf.element_size()
    return total


def run_variant(backend: str, precision: str, weights: Path, config: dict, cache_root: Path, prompt_len: int, steps: int) -> dict:
    import torch

    sys.path.insert(0, str(ROOT / "engine"))
    from epub2audio.voices.cosyvoice3.backends import build_llm
    from epub2audio.voices.cosyvoice3.sampling import sample_token

    res: dict = {"variant": f"{backend}:{precision}", "torch_threads": torch.get_num_threads(), "rss_start": rss()}

    def load_ckpt():
        sd = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
        return _Checkpoint(qwen_config=config, llm_state_dict=sd, model_id="cosyvoice3-benchrandom0000")

    t0 = time.perf_counter()
    ck = load_ckpt()
    lm = build_llm(ck, backend, precision, cache_root=cache_root)
    res["build_s"] = time.perf_counter() - t0
    res["rss_at_release"] = ck.__dict__.get("rss_at_release")
    res["rss_after_build"] = rss()
    if backend == "mlx":  # the conversion ran above (fresh cache): time a load from the cache too
        del lm, ck
        import gc

        gc.collect()
        import mlx.core as mx

        mx.clear_cache()  # hand the first model's buffers back to the OS
        res["rss_before_cached_load"] = rss()
        t0 = time.perf_counter()
        ck = load_ckpt()
        lm = build_llm(ck, backend, precision, cache_root=cache_root)
        res["cached_load_s"] = time.perf_counter() - t0
        res["rss_after_cached_load"] = rss()
    del ck
    res["recorded"] = {"backend": lm.backend, "precision": lm.precision}
    res["weight_bytes_per_token"] = weight_bytes_per_token(lm)

    rng = np.random.default_rng(0)
    n_speech = prompt_len // 2
    n_text = prompt_len - 2 - n_speech
    text = rng.integers(0, 151643, n_text).tolist()
    speech = rng.integers(0, 6561, n_speech).tolist()
    forced = rng.integers(0, 6561, steps).tolist()
    gen = torch.Generator().manual_seed(0)

    with torch.inference_mode():
        f = lm.start_decoding(text, speech)
        t0 = time.perf_counter()
        logp = f(None)
        res["prefill_s"] = time.perf_counter() - t0
        out: list[int] = []
        times = []
        for tok in forced:
            sample_token(logp, out, gen, ignore_eos=False)  # the sampler's cost, as in real decoding
            out.append(tok)
            t0 = time.perf_counter()
            logp = f(tok)
            times.append(time.perf_counter() - t0)
    assert torch.isfinite(logp).all()
    timed = times[2:] if len(times) > 4 else times
    res["step_s"] = float(np.mean(timed))
    res["tok_s"] = 1.0 / res["step_s"]
    res["rss_peak"] = rss()
    return res


# --- parent ----------------------------------------------------------------------------------------


def write_random_weights(path: Path, config: dict) -> float:
    import torch

    sys.path.insert(0, str(ROOT / "engine"))
    sys.path.insert(0, str(ROOT))
    from epub2audio.voices.cosyvoice3.llm import LLMArgs
    from tests.cosyvoice3.random_weights import random_llm_state_dict

    t0 = time.perf_counter()
    sd = random_llm_state_dict(LLMArgs.from_config(config), seed=0)
    torch.save(sd, path)
    return time.perf_counter() - t0


def fmt_table(rows: list[dict], bw: dict, prompt_len: int) -> str:
    bw_floor = bw["read_2t"] * 1e9
    cols = [
        "variant (as recorded)", "tok/s", "RTF dec", f"prefill s ({prompt_len})", "RTF 10s", "weights MB/token",
        "floor RTF", "% of floor", "build s", "cached load s", "RSS at release MB", "RSS after build MB", "peak RSS MB",
    ]  # fmt: skip
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['variant']} | error: {r['error'][:100]} |")
            continue
        rec, wb, step = r["recorded"], r["weight_bytes_per_token"], r["step_s"]
        floor_step = wb / bw_floor
        rel = r.get("rss_at_release")
        cells = [
            f"{rec['backend']}:{rec['precision']}",
            f"{r['tok_s']:.2f}",
            f"{TOKENS_PER_SECOND * step:.2f}",
            f"{r['prefill_s']:.2f}",
            f"{(r['prefill_s'] + 10 * TOKENS_PER_SECOND * step) / 10:.2f}",
            f"{wb / 1e6:.0f}",
            f"{TOKENS_PER_SECOND * floor_step:.2f}",
            f"{100 * floor_step / step:.0f} %",
            f"{r['build_s']:.1f}",
            f"{r['cached_load_s']:.1f}" if "cached_load_s" in r else "-",
            f"{rel['VmRSS']:.0f}" if rel else "-",
            f"{r['rss_after_build']['VmRSS']:.0f}",
            f"{r['rss_peak']['VmHWM']:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt", type=int, default=150, help="prompt positions (sos + text + task + speech)")
    ap.add_argument("--steps", type=int, default=60, help="decode steps per variant")
    ap.add_argument("--only", nargs="*", default=None, help=f"variants, of {' '.join(VARIANTS)}")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per variant")
    ap.add_argument("--tiny", action="store_true", help="tiny dims: checks that the bench runs, in seconds")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    ap.add_argument("--child", nargs=3, metavar=("VARIANT", "WEIGHTS", "CACHE"), help=argparse.SUPPRESS)
    a = ap.parse_args()

    from fullsize import full_size_qwen_config  # bench/ is on sys.path when run as a script

    config = full_size_qwen_config()
    if a.tiny:
        config.update(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=2, vocab_size=160000)
    if a.child:
        variant, weights, cache = a.child
        backend, precision = variant.split(":")
        print(json.dumps(run_variant(backend, precision, Path(weights), config, Path(cache), a.prompt, a.steps)))
        return

    variants = a.only or VARIANTS
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    print(f"# load average before: {os.getloadavg()}")
    bw = bandwidth()
    print(f"# numpy bandwidth GB/s: read 1 thread {bw['read_1t']:.1f}, read 2 threads {bw['read_2t']:.1f}, copy {bw['copy_1t']:.1f}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="epub2audio-bench-llm-") as tmp:
        weights = Path(tmp) / "llm.pt"
        print(f"# random full-size llm.pt written in {write_random_weights(weights, config):.1f} s ({weights.stat().st_size / 1e9:.2f} GB)")
        for v in variants:
            cache = Path(tmp) / "mlx-cache"
            cmd = [sys.executable, __file__, *(["--tiny"] if a.tiny else []), "--prompt", str(a.prompt), "--steps", str(a.steps), "--child", v, str(weights), str(cache)]
            t0 = time.perf_counter()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
                if p.returncode:
                    rows.append({"variant": v, "error": (p.stderr.strip().splitlines() or ["?"])[-1]})
                else:
                    rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
            except subprocess.TimeoutExpired:
                rows.append({"variant": v, "error": f"timeout after {a.timeout:.0f} s"})
            print(f"# {v}: {time.perf_counter() - t0:.0f} s wall, load average {os.getloadavg()}", flush=True)
    print(f"# load average after: {os.getloadavg()}")
    print(fmt_table(rows, bw, a.prompt))
    if a.json:
        a.json.write_text(json.dumps({"bandwidth": bw, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
