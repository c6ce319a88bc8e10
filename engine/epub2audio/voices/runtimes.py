"""Which platform this is and which optional model runtimes (MLX, ONNX Runtime) are installed,
found without importing them.

Kept apart from the stages' backend modules, which import torch, so that the parent process can
check a forced backend before any work (it must never import torch, onnxruntime or mlx: a worker
does that). A runtime counts as installed when its top-level packages can be found
(importlib.util.find_spec, which does not run them).
"""

from __future__ import annotations

import importlib.util
import platform as _platform
from dataclasses import dataclass


@dataclass(frozen=True)
class PlatformInfo:
    system: str  # platform.system(): "Darwin", "Linux", "Windows"
    machine: str  # platform.machine(): "arm64", "x86_64", "aarch64", "AMD64"

    @classmethod
    def current(cls) -> PlatformInfo:
        return cls(_platform.system(), _platform.machine())

    @property
    def apple_silicon(self) -> bool:
        return self.system == "Darwin" and self.machine.lower() in ("arm64", "aarch64")


def mlx_available() -> bool:
    return importlib.util.find_spec("mlx") is not None and importlib.util.find_spec("mlx_lm") is not None


def onnx_available() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None
