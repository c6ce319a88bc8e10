"""Which backend runs the Qwen3-TTS Talker and Code Predictor (the 12 Hz decoder is always torch).

Rule (`choose_backend`), as cosyvoice3/backends.py's for its LLM: ``auto`` is MLX on Apple Silicon
(Darwin arm64) when mlx and mlx-lm are importable, torch everywhere else; ``mlx`` / ``torch`` force
one. Both run fp32 and hand the same things across the seam (CPU fp32 logits to the host sampler,
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
(tiny: upstream's generate() codes replayed on MLX; full size: the same 4 Code Predictor frames). ``mlx`` can be forced anywhere. A
quiet-machine measurement and Apple Silicon's (Metal) are not done here. ONNX Runtime for the
Talker step is not built (the issue's stretch goal), so ``onnx`` is refused in one line rather than
silently mapped to torch.
"""

from __future__ import annotations

from typing import Any

from ..cosyvoice3.backends import PlatformInfo, mlx_available

BACKEND_CHOICES = ("auto", "mlx", "torch")


def choose_backend(requested: str = "auto", platform: PlatformInfo | None = None, *, have_mlx: bool | None = None) -> str:
    """"mlx" or "torch" for a request of "auto", "mlx" or "torch" (ValueError otherwise)."""
    if requested == "onnx":
        raise ValueError("the Qwen3-TTS Talker has no ONNX Runtime backend yet; use auto, mlx or torch")
    if requested not in BACKEND_CHOICES:
        raise ValueError(f"Qwen3-TTS backend must be one of {', '.join(BACKEND_CHOICES)}; got {requested!r}")
    if requested == "torch":
        return "torch"
    have = mlx_available() if have_mlx is None else have_mlx
    if requested == "mlx":
        if not have:
            raise ValueError("backend 'mlx' needs the mlx and mlx-lm packages, which are not installed")
        return "mlx"
    platform = platform or PlatformInfo.current()
    return "mlx" if platform.apple_silicon and have else "torch"


def build_talker_and_code_predictor(checkpoint: Any, backend: str = "auto", *, platform: PlatformInfo | None = None):
    """(Talker, CodePredictor) of a `checkpoint.Checkpoint` on the chosen backend, fp32. Both take
    their own fp32 copies, so the caller may drop `checkpoint.state_dict` afterwards."""
    chosen = choose_backend(backend, platform)
    if chosen == "mlx":
        from .code_predictor_mlx import CodePredictor
        from .talker_mlx import Talker
    else:
        from .code_predictor import CodePredictor
        from .talker import Talker
    return (
        Talker.from_state_dict(checkpoint.talker_args, checkpoint.state_dict),
        CodePredictor.from_state_dict(checkpoint.code_predictor_args, checkpoint.state_dict),
    )
