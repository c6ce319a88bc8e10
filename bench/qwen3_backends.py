"""Qwen3-TTS Talker step and Code Predictor frame: MLX (mlx-lm on this machine's MLX build) vs torch.

    PYTHONPATH=engine:. nice /work/main/.venv/bin/python bench/qwen3_backends.py --dir /work/tmp/qwen3-full

Both fp32, on the same folder (full size: bench/qwen3_full_folder.py), the same inputs and the same
host sampler; variants interleaved ABBA per round, a warm-up call untimed, best of rounds reported
with every round logged. Also reports how far the two backends' logits are apart on the same
inputs. This is the measurement behind qwen3tts/backends.py's rule (off Apple Silicon: torch).

--generate CAP instead runs seeded generation on both backends and compares the codes:

    PYTHONPATH=engine:. nice /work/main/.venv/bin/python bench/qwen3_backends.py --dir /work/tmp/qwen3-full \
        --base-dir /work/tmp/qwen3-full-base --generate 40

CustomVoice (generate.generate, each layout) on --dir, and on --base-dir the clone cases
(make_clone_prompt on the tests' reference clips, x-vector and ICL, upstream's default streaming
layout). A Talker and Code Predictor wrapper records every logits vector each backend hands the
host sampler, so while the codes agree the two runs read the same inputs and the logits are
compared step for step (Talker: every step; Code Predictor: every head of every frame).
A clone prompt is built by the torch stages and its frames run on each backend (run_frames): when
this was measured build_clone_prompt read torch modules; it now reads the stages' seam only.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {' '.join(f'{x:.2f}' for x in os.getloadavg())}] {msg}", flush=True)


def matmul_floor(torch, mx) -> None:
    """The two frameworks' own fp32 error on one Talker-shaped product (fp64 reference): it sets
    how close each backend can come to upstream's fp64 logits."""
    import numpy as np

    x = np.random.RandomState(0).randn(48, 1024).astype(np.float32)
    w = (np.random.RandomState(1).randn(1024, 3072) / 32).astype(np.float32)
    ref = x.astype(np.float64) @ w.astype(np.float64)
    t = float(np.abs((torch.from_numpy(x) @ torch.from_numpy(w)).double().numpy() - ref).max())
    m = float(np.abs(np.array(mx.array(x) @ mx.array(w)).astype(np.float64) - ref).max())
    log(f"fp32 matmul [48 x 1024] @ [1024 x 3072] vs fp64: torch {t:.3e}, mlx {m:.3e} (mlx / torch {m / t:.1f}x)")


CUSTOM_CASES = (("ryan", "english", "The morning was cold."),
                ("eric", "auto", "Once upon a time there were three little pigs."))  # bench/upstream_qwen3.py's
REF_TEXT = "The quick brown fox jumps over the lazy dog."
CLONE_CASES = (("xvec", (2.0, 1), False, "She sells sea shells by the sea shore.", "english"),
               ("icl_long_text", (2.0, 1), True, "Once upon a time there were three little pigs, and they went out.", "auto"),
               ("icl_short_text", (3.0, 2), True, "Hello world.", "english"))  # fmt: skip


class Recorded:
    """A Talker or Code Predictor that logs every logits vector it hands the sampler; all else
    passes through to the stage it wraps."""

    def __init__(self, inner, log: list) -> None:
        self.inner, self.log = inner, log

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def start_decoding(self, prompt):
        step = self.inner.start_decoding(prompt)

        def recorded(x):
            logits, hidden = step(x)
            self.log.append(logits.clone())
            return logits, hidden

        return recorded

    def predict(self, hidden, first, pick):
        def recorded(logits):
            self.log.append(logits.clone())
            return pick(logits)

        return self.inner.predict(hidden, first, recorded)


def generate_compare(a) -> int:
    """Seeded codes of both backends on full-size folders, and their logits while the codes agree."""
    import mlx.core as mx
    import torch

    from epub2audio.voices.qwen3tts import code_predictor_mlx, talker_mlx
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.clone import load_clone_stages, make_clone_prompt
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.generate import build_clone_prompt, build_prompt, generate, run_frames
    from epub2audio.voices.qwen3tts.talker import Talker
    from epub2audio.voices.qwen3tts.text import load_text_tokenizer
    from tests.qwen3tts.random_weights import reference_audio

    torch.set_num_threads(a.threads)
    seed, cap = 3, a.generate
    worst = {"talker": 0.0, "cp": 0.0, "prompt": 0.0}
    total = same = 0
    folders = [("custom", Path(a.dir))] + ([("base", Path(a.base_dir))] if a.base_dir else [])
    for kind, d in folders:
        t0 = time.perf_counter()
        ck = load_checkpoint(d)
        stages = {"torch": (Talker.from_state_dict(ck.talker_args, ck.state_dict),
                            CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)),
                  "mlx": (talker_mlx.Talker.from_state_dict(ck.talker_args, ck.state_dict),
                          code_predictor_mlx.CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict))}  # fmt: skip
        ck.state_dict.clear()
        gc.collect()
        tok = load_text_tokenizer(d, ck.text_ids)
        log(f"{kind} {d}: Talker {ck.talker_args.num_hidden_layers} x {ck.talker_args.hidden_size}, torch and mlx "
            f"stages loaded in {time.perf_counter() - t0:.0f} s; torch {torch.__version__} ({torch.get_num_threads()} "
            f"threads), mlx {mx.__version__} on {mx.default_device()}")  # fmt: skip
        runs = []
        if kind == "custom":
            for speaker, lang, text in CUSTOM_CASES:
                ids = tok.encode(text)
                for streaming in (False, True):
                    def run(t, c, ids=ids, speaker=speaker, lang=lang, streaming=streaming):
                        return generate(t, c, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(seed),
                                        speaker=speaker, language=lang, max_frames=cap, streaming=streaming)  # fmt: skip

                    @torch.inference_mode()
                    def prompt(t, ids=ids, speaker=speaker, lang=lang, streaming=streaming):
                        return build_prompt(t, ids, ck.text_ids, speaker=speaker, language=lang, streaming=streaming)[0]

                    runs.append((f"{speaker}/{lang} {'streaming' if streaming else 'non-streaming'}", run, prompt))
        else:
            clone_stages = load_clone_stages(d)
            for key, clip, icl, text, lang in CLONE_CASES:
                ids = tok.encode(text)
                cprompt = make_clone_prompt(d, (reference_audio(*clip), 24000), REF_TEXT if icl else None,
                                            stages=clone_stages)  # fmt: skip
                t_talker, t_cp = stages["torch"]
                built = build_clone_prompt(t_talker, t_cp, ids, ck.text_ids, speaker_embedding=cprompt.speaker_embedding,
                                           ref_text_ids=cprompt.ref_text_ids, ref_codes=cprompt.ref_codes,
                                           language=lang)  # fmt: skip

                def run(t, c, built=built):
                    return run_frames(t, c, *built, ck.generation, torch.Generator().manual_seed(seed), cap)

                runs.append((f"{key} streaming (prompt built by torch)", run, None))
        for name, run, prompt in runs:
            logs, frames, secs = {}, {}, {}
            for backend, (t, c) in stages.items():
                logs[backend] = {"talker": [], "cp": []}
                t1 = time.perf_counter()
                frames[backend] = run(Recorded(t, logs[backend]["talker"]), Recorded(c, logs[backend]["cp"])).frames
                secs[backend] = time.perf_counter() - t1
            ft, fm = frames["torch"], frames["mlx"]
            agree = next((i for i, (x, y) in enumerate(zip(ft, fm)) if x != y), min(len(ft), len(fm)))
            # logits compared while both runs have read the same inputs: the Talker's first agree+1
            # steps (the prompt and one step per agreeing frame), the Code Predictor's agree frames
            n_t, n_c = agree + 1, agree * 15
            dt = max(float((x - y).abs().max()) for x, y in zip(logs["torch"]["talker"][:n_t], logs["mlx"]["talker"][:n_t]))
            dc = max((float((x - y).abs().max()) for x, y in zip(logs["torch"]["cp"][:n_c], logs["mlx"]["cp"][:n_c])),
                     default=0.0)  # fmt: skip
            scale = max(float(x.abs().max()) for x in logs["torch"]["talker"][:n_t])
            dp = float((prompt(stages["torch"][0]) - prompt(stages["mlx"][0])).abs().max()) if prompt else 0.0
            worst = {"talker": max(worst["talker"], dt), "cp": max(worst["cp"], dc), "prompt": max(worst["prompt"], dp)}
            total += 1
            same += ft == fm
            distinct = len({f[0] for f in ft})
            log(f"{kind} {name}: codes equal {ft == fm} ({len(ft)} frames torch, {len(fm)} mlx; frames agreeing "
                f"{agree}; {distinct} distinct codebook-1 codes); max |diff| torch vs mlx: Talker logits {dt:.3e} over "
                f"{n_t} steps (max |logit| {scale:.2f}), Code Predictor logits {dc:.3e} over {n_c} heads"
                + (f", prompt embeddings {dp:.3e}" if prompt else "") + f"; {secs['torch']:.1f} s torch, "
                f"{secs['mlx']:.1f} s mlx")  # fmt: skip
        del stages
        gc.collect()
    print(f"\nseeded generation, torch vs mlx, cap {cap} (frames: cap - 1): {same} of {total} code sequences equal; "
          f"worst max |diff| Talker logits {worst['talker']:.3e}, Code Predictor logits {worst['cp']:.3e}, "
          f"prompt embeddings {worst['prompt']:.3e}")
    return 0 if same == total else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=40)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--cp-frames", type=int, default=4)
    ap.add_argument("--reference", help="upstream fp64 logits from bench/upstream_qwen3.py --full --save-reference")
    ap.add_argument("--floor-only", action="store_true", help="only each framework's fp32 matmul error against fp64")
    ap.add_argument("--generate", type=int, metavar="CAP", help="seeded generation on both backends, codes "
                    "compared (cap - 1 frames a case); no timing")
    ap.add_argument("--base-dir", help="with --generate: a full-size Base folder (bench/qwen3_full_folder.py --base)")
    a = ap.parse_args()
    if a.generate:
        return generate_compare(a)

    import mlx.core as mx
    import mlx.nn as mnn
    import torch

    from epub2audio.voices.qwen3tts import code_predictor_mlx, talker_mlx
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.sampling import warp_and_draw
    from epub2audio.voices.qwen3tts.talker import Talker

    torch.set_num_threads(a.threads)
    matmul_floor(torch, mx)
    if a.floor_only:
        return 0
    ck = load_checkpoint(a.dir)
    ta, ga = ck.talker_args, ck.generation
    stages = {"torch": (Talker.from_state_dict(ta, ck.state_dict), CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict))}
    stages["torch"][0].model.text_embedding = None  # not read here; 1.2 GB each side
    gc.collect()
    mt = talker_mlx.Talker.from_state_dict(ta, ck.state_dict)
    mt.model.text_embedding = mnn.Embedding(1, 1)
    stages["mlx"] = (mt, code_predictor_mlx.CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict))
    ck.state_dict.clear()
    gc.collect()
    log(f"{a.dir}: Talker {ta.num_hidden_layers} x {ta.hidden_size}; {platform.system()} {platform.machine()}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), mlx {mx.__version__} on {mx.default_device()}")

    if a.reference:
        ref = torch.load(a.reference)
        xr, p = ref["x"], ref["prefill"]
        with torch.inference_mode():
            for name, (t, cp) in stages.items():
                full = t(xr)[0]
                step = t.start_decoding(xr[:, :p])
                sess = torch.stack([step(None)[0]] + [step(xr[0, i])[0] for i in range(p, xr.shape[1])])
                h = ref["hid"][0, 0] if name == "torch" else mx.array(ref["hid"][0, 0].numpy())
                cpl = cp(h, ref["first"][0, 0], ref["codes"])
                log(f"{name} vs upstream fp64 ({Path(a.dir).name}): Talker logits [{xr.shape[1]} positions] "
                    f"{float((full.double() - ref['talker64']).abs().max()):.3e}, KV session (prefill {p} + "
                    f"{xr.shape[1] - p} steps) {float((sess.double() - ref['talker64'][p - 1:]).abs().max()):.3e} "
                    f"(upstream fp32 floor {ref['talker_floor']:.3e}); Code Predictor logits "
                    f"{float((cpl.double() - ref['cp64']).abs().max()):.3e} (floor {ref['cp_floor']:.3e})")  # fmt: skip
    g = torch.Generator().manual_seed(9)
    x = torch.randn(1, a.prefill + a.steps, ta.hidden_size, generator=g)
    hid, first = torch.randn(ta.hidden_size, generator=g), torch.randn(ta.hidden_size, generator=g)
    sub = dict(do_sample=ga.subtalker_dosample, temperature=ga.subtalker_temperature, top_k=ga.subtalker_top_k,
               top_p=ga.subtalker_top_p)  # fmt: skip
    logits = {}

    def talker_run(name):
        step = stages[name][0].start_decoding(x[:, : a.prefill])
        out = [step(None)[0]]
        t0 = time.perf_counter()
        for i in range(a.prefill, a.prefill + a.steps):
            out.append(step(x[0, i])[0])
        dt = (time.perf_counter() - t0) / a.steps
        logits.setdefault(name, torch.stack(out))
        return dt

    def cp_run(name):
        cp = stages[name][1]
        h = hid if name == "torch" else mx.array(hid.numpy())
        gen = torch.Generator().manual_seed(1)
        t0 = time.perf_counter()
        codes = [cp.predict(h, first, lambda lg: warp_and_draw(lg.clone(), gen, **sub)) for _ in range(a.cp_frames)]
        dt = (time.perf_counter() - t0) / a.cp_frames
        logits.setdefault("codes-" + name, codes)
        return dt

    best = {}
    with torch.inference_mode():
        for stage, fn in (("Talker step (s/step)", talker_run), ("Code Predictor frame (s/frame)", cp_run)):
            for n in ("torch", "mlx"):
                fn(n)  # warm-up, untimed
            times = {"torch": [], "mlx": []}
            for r in range(a.rounds):
                for n in (["torch", "mlx"] if r % 2 == 0 else ["mlx", "torch"]):
                    times[n].append(fn(n))
                log(f"  {stage} round {r + 1}: " + ", ".join(f"{n} {t[-1]:.4f}" for n, t in times.items()))
            best[stage] = times
    diff = float((logits["torch"] - logits["mlx"]).abs().max())
    same = logits["codes-torch"] == logits["codes-mlx"]
    print(f"\n## Qwen3-TTS Talker / Code Predictor backends, fp32, {platform.system()} {platform.machine()}, "
          f"torch {torch.get_num_threads()} threads vs mlx {mx.__version__} ({mx.default_device()})")
    print(f"Talker step after a {a.prefill}-position prefill ({a.steps} steps); Code Predictor frame = 15 host "
          f"draws ({a.cp_frames} frames). Best of {a.rounds} interleaved rounds; ratio = torch s / mlx s (> 1: MLX faster)\n")  # fmt: skip
    print("| stage | backend | seconds (all rounds) | torch / this |\n|---|---|---|---|")
    for stage, times in best.items():
        for n, ts in times.items():
            print(f"| {stage} | {n} | {min(ts):.4f} ({', '.join(f'{t:.4f}' for t in ts)}) | {min(times['torch']) / min(ts):.2f}x |")
    print(f"\nTalker logits, torch vs mlx on the same inputs (prefill + {a.steps} steps): max |diff| {diff:.3e}; "
          f"Code Predictor codes from the same seed equal: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
