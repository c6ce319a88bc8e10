"""Which backend runs the Qwen3-TTS Talker and Code Predictor (the 12 Hz decoder is always torch).

Rule (`choose_backend`), as cosyvoice3/backends.py's for its LLM: ``auto`` is MLX on Apple Silicon
(Darwin arm64) when mlx and mlx-lm are importable, torch everywhere else; ``mlx`` / ``torch`` force
one. Both run fp32 and hand the same things across the seam (CPU fp32 logits to the host sampler,
integer codes to the torch decoder), so a backend change moves a code only where the logits
themselves differ, by about upstream's own fp32-vs-fp64 floor (tests/qwen3tts/test_mlx.py).

Off Apple Silicon the choice is measured: bench/qwen3_backends.py at full 0.6B size on this 2-core
x86 (mlx[cpu] vs torch, fp32, interleaved rounds; bench/results/qwen3-backends-2core-busy.txt)
puts MLX's Linux CPU build behind torch on the Talker step and the Code Predictor frame, as it is
for CosyVoice3's LLM. MLX is there for Apple's unified-memory GPU (Metal); its speed there has not
been measured here. ONNX Runtime for the Talker step is not built (the issue's stretch goal), so
``onnx`` is refused in one line rather than silently mapped to torch.
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
