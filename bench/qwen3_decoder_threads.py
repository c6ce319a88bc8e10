"""The Qwen3-TTS 12 Hz decoder at full size (random weights), with and without oneDNN: speed side by
side and whether the samples depend on the thread count (why voice.py decodes on one thread).

    PYTHONPATH=engine:. python bench/qwen3_decoder_threads.py [--frames 25] [--rounds 2]

Builds the decoder from the official speech_tokenizer decoder_config (shared/reference/qwen3tts.md
section 4: latent 1024, decoder_dim 1536, 8 layers, codebook_dim 512), fills it as the tests' tiny
folder is filled, and decodes the same random frames at 1 and 2 threads with oneDNN on and off,
alternating, `rounds` times. Prints seconds per variant, their ratio to oneDNN on 1 thread, and the
largest sample difference between the thread counts for each.
"""

from __future__ import annotations

import argparse
import time

import torch

from epub2audio.voices.qwen3tts.decoder import Decoder, DecoderArgs
from tests.qwen3tts.random_weights import _fill, tiny_speech_config

FULL = {"latent_dim": 1024, "codebook_dim": 512, "decoder_dim": 1536, "hidden_size": 512, "intermediate_size": 1024,
        "head_dim": 64, "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 8}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--frames", type=int, default=25, help="frames to decode (12.5 a second)")
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    args = DecoderArgs.from_config({**tiny_speech_config()["decoder_config"], **FULL})
    from epub2audio.voices.qwen3tts.shells import expected_shapes

    sd = _fill(expected_shapes(Decoder, args), torch.Generator().manual_seed(0))
    dec = Decoder.from_state_dict(args, sd)
    print(f"decoder: {sum(v.numel() for v in sd.values()) / 1e6:.1f} M parameters; {a.frames} frames "
          f"({a.frames / 12.5:.1f} s of audio); torch {torch.__version__}")
    frames = torch.randint(0, 2048, (a.frames, 16), generator=torch.Generator().manual_seed(1))
    seconds: dict[tuple[bool, int], list[float]] = {}
    waves: dict[tuple[bool, int], torch.Tensor] = {}
    for _ in range(a.rounds):
        for onednn in (True, False):
            for threads in (1, 2):
                torch.set_num_threads(threads)
                with torch.backends.mkldnn.flags(enabled=onednn):
                    t = time.perf_counter()
                    waves[(onednn, threads)] = dec.decode(frames)
                    seconds.setdefault((onednn, threads), []).append(time.perf_counter() - t)
    base = min(seconds[(True, 1)])
    for (onednn, threads), s in seconds.items():
        print(f"oneDNN {'on ' if onednn else 'off'} {threads} thread(s): best {min(s):7.2f} s  "
              f"ratio {min(s) / base:5.2f}  (all: {', '.join(f'{x:.2f}' for x in s)})")
    for onednn in (True, False):
        diff = float((waves[(onednn, 1)] - waves[(onednn, 2)]).abs().max())
        print(f"oneDNN {'on ' if onednn else 'off'}: max |1 thread - 2 threads| = {diff:.3e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
