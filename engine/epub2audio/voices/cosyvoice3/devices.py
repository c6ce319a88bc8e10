"""Where each CosyVoice3 stage runs: `--device auto|cpu|cuda|mps`, overridable per stage.

    auto, CUDA available    LLM: torch on CUDA, fp32 (bf16 / fp16 opt-in with --llm-precision)
                            flow: CUDA; HiFT: CUDA (bench/gpu_check.py on an H200, 10 s of speech:
                            HiFT 0.067 s on CUDA vs 3.6 s on one CPU thread, as voice.py runs it)
    auto, Apple Silicon     LLM: MLX (Metal, backends.py); flow: MPS in fp32; HiFT: the CPU
                            (its f0 predictor runs in float64, which MPS does not have)
    auto, anything else     every stage on the CPU, exactly as before
    cpu                     every stage on the CPU; "auto" LLM backend then never picks MLX
    cuda / mps              every stage there; refused where a stage's variant cannot run there

A variant that exists only on the CPU (the ONNX LLM and DiT, torch int8) keeps its stage on the
CPU under "auto" and is refused under an explicit accelerator. Per-stage requests (config keys
device_llm, device_flow, device_hift) win over the voice-wide one.

What the stages do to stay the same on every device: the fixed noise is drawn on the CPU and
moved (noise.py); the LLM's log-probabilities come back to the host, where the per-segment
generator samples (sampling.py); the Euler state of the flow is fp32 at every precision. What
still differs is the kernels' rounding, so a device is part of the voice's model id (voice.py)
and one book never mixes devices.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from .backends import LLM_PRECISIONS, PlatformInfo, choose_llm_backend

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
STAGES = ("llm", "flow", "hift")
CPU_ONLY_FLOWS = ("int8", "onnx-fp32", "onnx-int8")  # flow_fast variants built on CPU-only kernels


@dataclass(frozen=True)
class Accelerators:
    cuda: bool = False
    mps: bool = False

    @classmethod
    def current(cls) -> Accelerators:
        import torch

        return cls(cuda=torch.cuda.is_available(), mps=torch.backends.mps.is_available())


@dataclass(frozen=True)
class Placement:
    llm_backend: str  # "torch", "mlx" or "onnx"
    llm: str  # torch device of the torch LLM; "cpu" for MLX / ONNX, which place themselves
    flow: str
    hift: str


def _requested(device: str, overrides: Mapping[str, str | None] | None, stage: str, accel: Accelerators) -> str:
    wanted = (overrides or {}).get(stage) or device
    if wanted not in DEVICE_CHOICES:
        raise ValueError(f"device for the {stage} stage must be one of {', '.join(DEVICE_CHOICES)}; got {wanted!r}")
    if wanted == "cuda" and not accel.cuda:
        raise ValueError("device cuda: torch sees no CUDA device here")
    if wanted == "mps" and not accel.mps:
        raise ValueError("device mps: torch sees no MPS (Apple GPU) device here")
    return wanted


def place_stages(
    device: str = "auto",
    overrides: Mapping[str, str | None] | None = None,
    *,
    llm_backend: str = "auto",
    llm_precision: str = "fp32",
    flow_precision: str = "fp32",
    platform: PlatformInfo | None = None,
    accelerators: Accelerators | None = None,
) -> Placement:
    """The backend of the LLM and the device of every stage (see the module docstring)."""
    accel = Accelerators.current() if accelerators is None else accelerators
    platform = platform or PlatformInfo.current()

    want = _requested(device, overrides, "llm", accel)
    torch_llm_ok = llm_backend in ("auto", "torch") and llm_precision in LLM_PRECISIONS["torch"]
    if want in ("cuda", "mps"):
        if llm_backend not in ("auto", "torch"):
            raise ValueError(f"the {llm_backend} LLM backend does not run on {want}; use --llm-backend torch")
        if llm_precision == "int8" or not torch_llm_ok:
            raise ValueError(f"the torch LLM runs at fp32, bf16 or fp16 on {want}; not {llm_precision!r}")
        llm_backend, llm = "torch", want
    elif want == "auto" and accel.cuda and torch_llm_ok and llm_precision != "int8":
        llm_backend, llm = "torch", "cuda"
    else:  # the CPU backends as before; an explicit "cpu" keeps "auto" off MLX's Metal GPU
        no_mlx = want == "cpu" and llm_backend == "auto"
        llm_backend = choose_llm_backend(llm_backend, platform, precision=llm_precision,
                                         have_mlx=False if no_mlx else None)
        llm = "cpu"

    want = _requested(device, overrides, "flow", accel)
    cpu_only = flow_precision in CPU_ONLY_FLOWS
    if want in ("cuda", "mps") and cpu_only:
        raise ValueError(f"flow precision {flow_precision} runs on the CPU only; not on {want}")
    if want == "auto":
        want = "cpu" if cpu_only else "cuda" if accel.cuda else "mps" if accel.mps and platform.apple_silicon else "cpu"
    flow = want

    want = _requested(device, overrides, "hift", accel)
    if want == "mps":
        raise ValueError("HiFT cannot run on mps: its f0 predictor needs float64, which MPS lacks")
    hift = ("cuda" if accel.cuda else "cpu") if want == "auto" else want
    return Placement(llm_backend, llm, flow, hift)


def describe_devices(devices: Mapping[str, str]) -> str:
    """"" when every stage is on the CPU (the model id of CPU voices stays what it always was),
    else "@cuda" for one device or "@llm=metal,flow=mps,hift=cpu" in pipeline order."""
    if all(d == "cpu" for d in devices.values()):
        return ""
    if len(set(devices.values())) == 1:
        return "@" + next(iter(devices.values()))
    return "@" + ",".join(f"{s}={devices[s]}" for s in STAGES if s in devices)


def exact_fp32_on_cuda() -> None:
    """fp32 on CUDA means fp32: no TF32 in matmuls or cuDNN convolutions (cuDNN's default is TF32).
    Measured on an H200 (bench/gpu_check.py): the flow's mel is then within 1.4e-5 of the CPU's;
    with TF32 it moved 2.8e-3 from fp32 for a 10 % faster flow."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
