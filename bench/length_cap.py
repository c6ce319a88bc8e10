"""How many speech tokens per text token does CosyVoice3's decode loop generate, and where should
its length cap sit? (issue 14 item 5)

    .venv/bin/python bench/length_cap.py                 # FULL-SIZE random LLM, 6 seeds x 4 lengths
    .venv/bin/python bench/length_cap.py --tiny --seeds 100

Not a test: prints the distribution of speech tokens / text tokens per segment, how often each cap
would be reached, and the cap the engine uses (generate.LENGTH_CAPS["tight"]) with why.

Per run: random target text ids (Lt of them, from the ordinary BPE range), a random 5-id prompt
text and 50 prompt speech tokens, then the real loop (generate.decode_speech_tokens: RAS sampler,
id 6561 masked for the first 2*Lt steps, stop on any other id >= 6561) bounded by upstream's cap of
20 tokens per text token, the generator seeded with the seed. fp32 torch, 1 thread.

What this can and cannot say. Random weights do not speak: the text does not steer the speech,
so a run stops when the sampler happens to draw one of the 200 stop ids (upstream's minimum-length
rule masks only id 6561, so the other 199 end a run even before 2*Lt), and its length is a
geometric draw that does not grow with the text. The ratio it
measures is therefore set by the sampler and the minimum-length rule, not by speech; it checks the
loop and shows how often random (non-speaking) weights would reach each cap, but it is no evidence
about a trained model's pacing. The cap itself comes from speech rates: ~25 speech tokens per
second and ~3-4 English text tokens per second of speech, so ~6-8 speech tokens per text token
is typical (see the reasoning at generate.LENGTH_CAPS). A trained model's own distribution needs
the real weights, which the engine never downloads: run this with them loaded into `lm` to get it.

Measured (FULL-SIZE random weights, fp32 torch, 1 thread, 2 shared x86 cores; 262 s, 1007 tokens;
ratio = speech tokens / text tokens, 6 seeds per Lt):

    Lt   mean  sd   min  max   shorter than 2*Lt  reach tight cap   reach upstream cap
    3    11.9  6.7  3.0  20.0   0 %               33 % (50 tok)     17 % (60 tok)
    6     8.6  8.9  1.8  20.0  33 %               33 % (72 tok)     33 % (120 tok)
    12    3.6  3.1  0.3   8.5  33 %                0 % (144 tok)     0 % (240 tok)
    24    1.6  1.7  0.3   4.8  67 %                0 % (288 tok)     0 % (480 tok)
    all 24 runs: median 3.4, p90 19.2, max 20.0 (the upstream bound)

The tiny test-size model (--tiny --seeds 20, 7 s) gives the same picture: median 2.4, p90 19.7.
So random weights say nothing about the right ratio; they do show that the loop reaches its cap
often on short texts (runaways are common when nothing steers the speech), which is exactly the
case the re-split handles, and that a cap expressed per text token needs a floor for short texts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT))

from epub2audio.voices.cosyvoice3.generate import LENGTH_CAPS, decode_speech_tokens, speech_token_cap  # noqa: E402
from epub2audio.voices.cosyvoice3.llm import SPEECH_TOKEN_SIZE, CosyVoice3LM, LLMArgs  # noqa: E402
from tests.cosyvoice3.random_weights import random_llm_state_dict  # noqa: E402

UPSTREAM = LENGTH_CAPS["upstream"]
TIGHT = LENGTH_CAPS["tight"]
BPE_IDS = 151643  # ordinary Qwen2 BPE ids are below this


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def build_lm(tiny: bool) -> CosyVoice3LM:
    if tiny:
        from tests.cosyvoice3.fixtures import tiny_qwen_config

        cfg = tiny_qwen_config()
    else:
        a = LLMArgs()
        cfg = {"hidden_act": "silu", "hidden_size": a.hidden_size, "intermediate_size": a.intermediate_size,
               "num_attention_heads": a.num_attention_heads, "num_key_value_heads": a.num_key_value_heads,
               "num_hidden_layers": a.num_hidden_layers, "rms_norm_eps": a.rms_norm_eps, "rope_theta": a.rope_theta,
               "vocab_size": a.vocab_size}  # fmt: skip
    return CosyVoice3LM.from_checkpoint(cfg, random_llm_state_dict(LLMArgs.from_config(cfg), seed=0))


def run(lm: CosyVoice3LM, n_text: int, seed: int) -> int:
    g = torch.Generator().manual_seed(10_000 * n_text + seed)
    vocab = min(BPE_IDS, lm.args.vocab_size)
    text = torch.randint(0, vocab, (5 + n_text,), generator=g).tolist()  # 5 prompt ids, then the target
    speech = torch.randint(0, SPEECH_TOKEN_SIZE, (50,), generator=g).tolist()
    with torch.inference_mode():
        tokens = decode_speech_tokens(lm.start_decoding(text, speech), n_text, torch.Generator().manual_seed(seed),
                                      max_token_text_ratio=UPSTREAM.max_token_text_ratio)
    return len(tokens)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="the tiny test-size LLM instead of the full-size one")
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--lengths", type=int, nargs="*", default=[3, 6, 12, 24], help="target text tokens per segment")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    started = time.perf_counter()
    size = "tiny test-size" if a.tiny else "FULL-SIZE (24 layers, 0.5B)"
    log(f"building a {size} random-weight LLM")
    lm = build_lm(a.tiny)
    rows, generated = [], 0
    for n in a.lengths:
        lengths = []
        for seed in range(a.seeds):
            lengths.append(run(lm, n, seed))
            generated += lengths[-1]
        log(f"Lt {n}: lengths {lengths}")
        rows.append((n, np.array(lengths)))
    seconds = time.perf_counter() - started

    print(f"\n## Speech tokens per text token, {size} random weights, {a.seeds} seeds per length, "
          f"bounded by upstream's {UPSTREAM.max_token_text_ratio:g}/text token")
    print("| Lt | mean | sd | min | max | runs shorter than 2*Lt | reach tight cap | reach upstream cap |")
    print("|---|---|---|---|---|---|---|---|")
    every = []
    for n, lengths in rows:
        ratio = lengths / n
        every += ratio.tolist()
        tight = speech_token_cap(n, TIGHT.max_token_text_ratio, TIGHT.min_cap)
        upstream = speech_token_cap(n, UPSTREAM.max_token_text_ratio, UPSTREAM.min_cap)
        print(f"| {n} | {ratio.mean():.1f} | {ratio.std(ddof=1) if len(ratio) > 1 else 0:.1f} | {ratio.min():.1f} | "
              f"{ratio.max():.1f} | {(lengths < 2 * n).mean():.0%} | {(lengths >= tight).mean():.0%} ({tight} tok) | "
              f"{(lengths >= upstream).mean():.0%} ({upstream} tok) |")
    every = np.array(every)
    q = np.percentile(every, [50, 90, 99])
    print(f"\nall runs: {len(every)}; ratio median {q[0]:.1f}, p90 {q[1]:.1f}, p99 {q[2]:.1f}, max {every.max():.1f}; "
          f"{generated} tokens in {seconds:.0f} s")
    print(f"\nchosen cap (generate.LENGTH_CAPS['tight']): max({TIGHT.max_token_text_ratio:g} x Lt, {TIGHT.min_cap}) "
          f"speech tokens; upstream: {UPSTREAM.max_token_text_ratio:g} x Lt.")
    print("Why: real speech is ~25 speech tokens/s and English text ~3-4 text tokens/s of speech, i.e. ~6-8 speech\n"
          "tokens per text token; 12 leaves 1.5-2x margin, the 2 s floor covers the edge silence of one-word texts,\n"
          "and a segment that reaches the cap is re-split and rendered again (render.py), never cut, so a tight cap\n"
          "costs a re-split at worst and stops a runaway decode 40 % sooner than upstream's.")
    print("What this run says: random weights do not speak, so these ratios come from the chance of drawing one of the\n"
          "200 stop ids at each step, not from pacing: short texts show high ratios because that geometric length does\n"
          "not scale with Lt. It shows how often non-speaking weights would hit each cap; a\n"
          "trained model's distribution needs its weights.")


if __name__ == "__main__":
    main()
