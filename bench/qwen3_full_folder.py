"""Write (once) a FULL-SIZE random-weight Qwen3-TTS-12Hz-0.6B CustomVoice folder in the official layout.

    PYTHONPATH=engine:. nice /work/main/.venv/bin/python bench/qwen3_full_folder.py [/work/tmp/qwen3-full]

Shapes from tests/qwen3tts/random_weights.py's full_config() / full_speech_config() (the 0.6B fields
of shared/reference/qwen3tts.md), weights from its seeded filler (seed 0), bf16 model.safetensors and
fp32 speech_tokenizer/model.safetensors (decoder only, as CustomVoice needs), the toy BPE tokenizer.
Several benchmarks share the folder read-only: a writer holds DIR.lock (O_EXCL), writes DIR.tmp-PID
and renames it to DIR, so DIR existing means complete; an existing DIR is reused. ~2.3 GB on disk,
~6 GB of memory while writing.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path


def ensure_full_folder(d: Path, seed: int = 0) -> Path:
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from tests.qwen3tts.random_weights import full_config, full_speech_config, write_model

    lock = d.with_name(d.name + ".lock")
    while not d.exists():
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            print(f"{lock} is held: waiting for the other writer", flush=True)
            time.sleep(10)
            continue
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
            if d.exists():
                break
            tmp = d.with_name(f"{d.name}.tmp-{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            t0 = time.perf_counter()
            write_model(tmp, seed, full_config(), full_speech_config())
            load_checkpoint(tmp)  # proves the folder loads (keys, shapes, configs) before it appears
            os.replace(tmp, d)
            print(f"wrote {d} in {time.perf_counter() - t0:.0f} s", flush=True)
        finally:
            os.close(fd)
            lock.unlink(missing_ok=True)
    return d


if __name__ == "__main__":
    out = ensure_full_folder(Path(sys.argv[1] if len(sys.argv) > 1 else "/work/tmp/qwen3-full"))
    sizes = {p.relative_to(out).as_posix(): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
    print("\n".join(f"{n:40s} {s / 1e6:10.1f} MB" for n, s in sizes.items()))
