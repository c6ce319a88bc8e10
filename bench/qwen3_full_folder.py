"""Write (once) a FULL-SIZE random-weight Qwen3-TTS-12Hz-0.6B folder in the official layout:
CustomVoice (the default) or, with --base, Base (for cloning).

    PYTHONPATH=engine:. nice /work/main/.venv/bin/python bench/qwen3_full_folder.py [/work/tmp/qwen3-full]
    PYTHONPATH=engine:. nice /work/main/.venv/bin/python bench/qwen3_full_folder.py --base [/work/tmp/qwen3-full-base]

Shapes from tests/qwen3tts/random_weights.py's full_config() / full_speech_config() (the 0.6B fields
of shared/reference/qwen3tts.md), weights from its seeded filler (seed 0), bf16 model.safetensors and
fp32 speech_tokenizer/model.safetensors, the toy BPE tokenizer. CustomVoice: the decoder only in the
speech tokenizer, as CustomVoice needs (~2.3 GB on disk). Base (full_base_config() /
full_base_speech_config()): speaker_encoder.* in model.safetensors and the 12 Hz encoder beside the
decoder, which cloning needs; its element counts are checked against the official files' (section 5
of the reference) before the folder appears (~2.5 GB on disk).
Several benchmarks share a folder read-only: a writer holds DIR.lock (O_EXCL), writes DIR.tmp-PID
and renames it to DIR, so DIR existing means complete; an existing DIR is reused. ~6 GB of memory
while writing.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import time
from pathlib import Path

# element counts of the official 0.6B files (shared/reference/qwen3tts.md section 5)
OFFICIAL_BASE_MAIN_ELEMENTS = 914_643_008
OFFICIAL_SPEECH_TOKENIZER_ELEMENTS = 170_557_441


def _elements(path: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())


def _write_custom(tmp: Path, seed: int) -> None:
    from tests.qwen3tts.random_weights import full_config, full_speech_config, write_model

    write_model(tmp, seed, full_config(), full_speech_config())


def _write_base(tmp: Path, seed: int) -> None:
    from tests.qwen3tts.random_weights import full_base_config, full_base_speech_config, write_base_model

    write_base_model(tmp, seed, full_base_config(), full_base_speech_config())
    counts = {"model.safetensors": (_elements(tmp / "model.safetensors"), OFFICIAL_BASE_MAIN_ELEMENTS),
              "speech_tokenizer/model.safetensors": (_elements(tmp / "speech_tokenizer" / "model.safetensors"),
                                                     OFFICIAL_SPEECH_TOKENIZER_ELEMENTS)}  # fmt: skip
    for name, (got, official) in counts.items():
        print(f"{name}: {got:,} elements (official {official:,})", flush=True)
        if got != official:
            raise SystemExit(f"{name} holds {got:,} elements, the official file {official:,}: a shape is wrong")


def ensure_full_folder(d: Path, seed: int = 0, base: bool = False) -> Path:
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint

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
            (_write_base if base else _write_custom)(tmp, seed)
            load_checkpoint(tmp)  # proves the folder loads (keys, shapes, configs) before it appears
            if base:
                from epub2audio.voices.qwen3tts.clone import load_clone_stages

                load_clone_stages(tmp)  # and its speaker encoder and speech encoder, strictly
            os.replace(tmp, d)
            print(f"wrote {d} in {time.perf_counter() - t0:.0f} s", flush=True)
        finally:
            os.close(fd)
            lock.unlink(missing_ok=True)
    return d


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--base", action="store_true", help="a Base folder (speaker encoder + speech encoder)")
    a = ap.parse_args()
    out = ensure_full_folder(Path(a.dir or ("/work/tmp/qwen3-full-base" if a.base else "/work/tmp/qwen3-full")), base=a.base)
    sizes = {p.relative_to(out).as_posix(): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
    print("\n".join(f"{n:40s} {s / 1e6:10.1f} MB" for n, s in sizes.items()))
