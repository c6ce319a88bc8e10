"""Batched LLM decoding (voices/cosyvoice3/batched.py) vs solo, on FULL-SIZE random weights.

    .venv/bin/python bench/batched.py [--segments 20] [--tokens 50] [--threads 1]

Not a test: prints numbers. Prompts: 30 prompt-text ids + 10..30 target-text ids + 75 prompt
speech tokens (3 s), so rows are padded differently. Reported:

    logit diff    max |logp batched - logp solo| over rows and teacher-forced steps (B=2, B=4)
    divergence    `--segments` segments decoded solo and in batches of 4 (own seeds): how many
                  token streams differ, and where the first difference falls
    tok/s         decode speed (prefill excluded), solo vs B=2 vs B=4, interleaved, best of 2
    flip          per teacher-forced step, the chance that the same generator state draws another
                  token from the batched logits than from the solo ones: 1 if the nucleus (top-25,
                  top-p 0.8) is cut at another size or order, else sum_i |CDF_solo(i) - CDF_batched(i)|
                  over the kept, renormalised entries (one draw by inverse CDF); averaged
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from fullsize import full_size_lm  # noqa: E402


def flip_chance(solo, batched) -> float:
    """Chance that one nucleus draw differs between two logp vectors (see the module docstring)."""
    import numpy as np

    from epub2audio.voices.cosyvoice3.sampling import TOP_K, TOP_P, nucleus_size

    kept = []
    for logp in (solo, batched):
        probs, order = logp.softmax(0).sort(descending=True, stable=True)
        n = nucleus_size(probs[:TOP_K].numpy(), TOP_P, TOP_K)
        kept.append((order[:n].tolist(), probs[:n].double()))
    (oa, pa), (ob, pb) = kept
    if oa != ob:
        return 1.0
    return float(np.abs((pa / pa.sum()).cumsum(0) - (pb / pb.sum()).cumsum(0)).sum())


def main() -> None:
    import numpy as np
    import torch

    from epub2audio.voices.cosyvoice3.batched import BatchedSession, BatchRequest, generate_speech_tokens_batched
    from epub2audio.voices.cosyvoice3.generate import generate_speech_tokens

    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--flip-only", action="store_true", help="only the logit diff and flip chance")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    lm = full_size_lm()
    print(f"# full-size random LLM built in {time.perf_counter() - t0:.0f} s; torch threads {a.threads}", flush=True)
    rng = np.random.default_rng(0)
    prompt_text = rng.integers(0, 150000, 30).tolist()
    prompt_speech = rng.integers(0, 6561, 75).tolist()
    texts = [rng.integers(0, 150000, int(n)).tolist() for n in rng.integers(10, 31, a.segments)]
    reqs = [BatchRequest(t, prompt_text, prompt_speech, seed=500 + i) for i, t in enumerate(texts)]

    # 1. logits, teacher-forced
    forced = rng.integers(0, 6561, (a.steps, 4)).tolist()
    for B in (2, 4):
        group = reqs[:B]
        s = BatchedSession(lm, [([*prompt_text, *r.text_ids], prompt_speech) for r in group])
        batched = [s.prefill()] + [s.step(forced[i][:B]) for i in range(a.steps)]
        worst, per_step, flips = 0.0, [], []
        for b, r in enumerate(group):
            f = lm.start_decoding([*prompt_text, *r.text_ids], prompt_speech)
            solo = [f(None)] + [f(forced[i][b]) for i in range(a.steps)]
            diffs = [(x - y[b]).abs().max().item() for x, y in zip(solo, batched)]
            flips += [flip_chance(x, y[b]) for x, y in zip(solo, batched)]
            per_step.append(diffs)
            worst = max(worst, max(diffs))
        med = float(np.median(np.array(per_step)))
        print(f"B={B}: logp max abs diff vs solo {worst:.2e} (median per row-step {med:.2e}); "
              f"flip chance per token: mean {np.mean(flips):.1e}, max {max(flips):.1e} over {len(flips)} "
              f"row-steps (nucleus cut changed in {sum(x == 1.0 for x in flips)})", flush=True)
    if a.flip_only:
        return

    # 2. token divergence over the segments
    solo_out = []
    t = time.perf_counter()
    for r in reqs:
        solo_out.append(generate_speech_tokens(lm, r.text_ids, prompt_text, prompt_speech,
                                               torch.Generator().manual_seed(r.seed), max_tokens=a.tokens))
    t_solo = time.perf_counter() - t
    batched_out = []
    t = time.perf_counter()
    for i in range(0, len(reqs), 4):
        batched_out += generate_speech_tokens_batched(lm, reqs[i : i + 4], max_tokens=a.tokens)
    t_batched = time.perf_counter() - t
    firsts = []
    for x, y in zip(solo_out, batched_out):
        if x != y:
            firsts.append(next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y))))
    n_tok = sum(map(len, solo_out))
    print(f"divergence: {len(firsts)}/{len(reqs)} segments' token streams differ (B=4); first differing token at "
          f"{sorted(firsts)} of {a.tokens}; {n_tok} solo tokens in {t_solo:.0f} s, batched {t_batched:.0f} s", flush=True)

    # 3. decode speed, interleaved
    best: dict[int, float] = {}
    for _round in range(2):
        for B in (1, 2, 4):
            group = reqs[:B]
            s = BatchedSession(lm, [([*prompt_text, *r.text_ids], prompt_speech) for r in group])
            s.prefill()
            t = time.perf_counter()
            for i in range(a.steps):
                s.step(forced[i][:B])
            rate = B * a.steps / (time.perf_counter() - t)
            if B == 1:  # the solo path proper, not a batch of one
                f = lm.start_decoding([*prompt_text, *group[0].text_ids], prompt_speech)
                f(None)
                t = time.perf_counter()
                for i in range(a.steps):
                    f(forced[i][0])
                rate = a.steps / (time.perf_counter() - t)
            best[B] = max(best.get(B, 0.0), rate)
            print(f"  round {_round + 1} B={B}: {rate:.2f} tok/s", flush=True)
    print("decode tok/s: " + ", ".join(f"B={B} {r:.2f} (x{r / best[1]:.2f})" for B, r in best.items()), flush=True)


if __name__ == "__main__":
    main()
