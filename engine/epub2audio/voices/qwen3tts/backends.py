"""Which backend runs the Qwen3-TTS Talker and Code Predictor (the 12 Hz decoder is always torch).

Rule (`choose_backend`), as cosyvoice3/backends.py's for its LLM: ``auto`` is MLX on Apple Silicon
(Darwin arm64) when mlx and mlx-lm are importable, torch everywhere else; ``mlx`` / ``onnx`` /
``torch`` force one. All run fp32 and hand the same things across the seam (CPU fp32 logits to the host sampler,
integer codes to the torch decoder), so a backend change moves a code only where the logits
themselves differ: within 2x upstream's fp32-vs-fp64 floor at tiny size (tests/qwen3tts/test_mlx.py),
2.9x at full size (below).

Off Apple Silicon, measured (bench/qwen3_backends.py, full 0.6B size, fp32, 2-core x86 shared with
~8 other jobs at load 16-18; bench/results/qwen3-backends-full-2core-busy.txt, best of 3 interleaved
rounds): Talker step torch 1.24 s vs mlx[cpu] 0.79 s, Code Predictor frame 5.40 s vs 3.15 s, i.e.
MLX 1.6-1.7x faster *on that loaded machine*, where torch's OpenMP threads suffer most (CosyVoice3's
LLM measured the other way round on a quiet machine: torch 3x MLX's Linux CPU build). auto still
picks torch there, because torch is the faithful path: its logits are as close to upstream's fp64
run as upstream's own fp32 run is (1.36e-5 both: the floor), while mlx[cpu]'s own fp32
matmul is 3.4x less accurate than torch's (5.6e-6 vs 1.6e-6 on one Talker-shaped product) and its
logits land at 2.9x that floor (4.0e-5; Code Predictor 8.5e-6 vs 3.2e-6). Seeded codes still agree
(tiny: upstream's generate() codes replayed on MLX; full size: 7 seeded runs of 39 frames,
bench/results/qwen3-mlx-codes-full-2core-shared.txt). ``mlx`` can be forced anywhere. A
quiet-machine measurement and Apple Silicon's (Metal) are not done here.

``onnx`` (forced only) runs the Talker's decoder stack and codec head on ONNX Runtime
(talker_onnx.py) and keeps torch's Code Predictor. Measured (bench/qwen3_onnx_talker.py, full 0.6B
shapes, 2-core x86-64 EPYC, best of 5 interleaved rounds;
bench/results/qwen3-onnx-talker-full-2core-shared.txt): a Talker step on 2 threads 0.060 s against
torch's 0.118 s (1.97x; 2.16x with the machine otherwise idle), on 1 thread 1.40-1.45x; its logits
as close to upstream's fp64 run as torch's (1.49e-5 against 1.50e-5). But the torch Code Predictor
frame (0.31-0.49 s) is most of a frame, so a whole frame gains only 1.08-1.15x: too little for auto.

The voice (voice.py) builds its stages here. The user's door is CosyVoice3's: `--llm-backend` /
config.toml's `llm_backend`, which the parent checks with `check_backend` before any work. This
module imports no runtime at module level (runtimes.py finds them without importing), so the parent
may call `check_backend`; `auto` is resolved by the worker, on the machine that runs the stages.
"""

from __future__ import annotations

from typing import Any

from ..runtimes import PlatformInfo, mlx_available, onnx_available

BACKEND_CHOICES = ("auto", "mlx", "onnx", "torch")


def choose_backend(requested: str = "auto", platform: PlatformInfo | None = None, *, have_mlx: bool | None = None) -> str:
    """"mlx", "onnx" or "torch" for a request of "auto", "mlx", "onnx" or "torch" (ValueError otherwise)."""
    if requested not in BACKEND_CHOICES:
        raise ValueError(f"Qwen3-TTS backend must be one of {', '.join(BACKEND_CHOICES)}; got {requested!r}")
    if requested == "torch":
        return "torch"
    if requested == "onnx":
        if not onnx_available():
            raise ValueError("backend 'onnx' needs the onnxruntime and onnx packages, which are not installed")
        return "onnx"
    have = mlx_available() if have_mlx is None else have_mlx
    if requested == "mlx":
        if not have:
            raise ValueError("backend 'mlx' needs the mlx and mlx-lm packages, which are not installed")
        return "mlx"
    platform = platform or PlatformInfo.current()
    return "mlx" if platform.apple_silicon and have else "torch"


def check_backend(requested: str) -> str:
    """`requested` itself, or ValueError (one line) for a value that is no choice or a forced backend
    whose packages are not installed here. For the parent: it resolves nothing (`auto` is the
    worker's to resolve) and looks for nothing unless a backend is forced."""
    if requested != "auto":
        choose_backend(requested)
    return requested


def build_talker_and_code_predictor(checkpoint: Any, backend: str = "auto", *, platform: PlatformInfo | None = None,
                                    model_id: str | None = None, cache_root: Any = None, threads: int | None = None):  # fmt: skip
    """(Talker, CodePredictor) of a `checkpoint.Checkpoint` on the chosen backend, fp32. Both take
    their own fp32 copies, so the caller may drop `checkpoint.state_dict` afterwards. A compressed
    folder's text table (checkpoint.talker_modules) is kept as stored on every backend: torch's
    Talker holds it, the ONNX Talker's host and the MLX Talker look ids up in it. onnx: the graph is
    cached under `cache_root` (default cache_dir()/onnx) by `model_id` (default the folder's
    checkpoint.folder_id) and its session runs `threads` intra-op threads (default torch's)."""
    chosen = choose_backend(backend, platform)
    if chosen == "onnx":
        from .code_predictor import CodePredictor
        from .talker_onnx import load_onnx_talker

        talker = load_onnx_talker(checkpoint.build_talker, model_id or checkpoint.folder_id(), cache_root, threads=threads)
        return talker, CodePredictor.from_state_dict(checkpoint.code_predictor_args, checkpoint.state_dict)
    if chosen == "mlx":
        from .code_predictor_mlx import CodePredictor
        from .talker_mlx import Talker

        return (
            Talker.from_state_dict(checkpoint.talker_args, checkpoint.state_dict, modules=checkpoint.talker_modules),
            CodePredictor.from_state_dict(checkpoint.code_predictor_args, checkpoint.state_dict),
        )
    return checkpoint.build_talker(), checkpoint.build_code_predictor()
