"""Which backend and precision run the CosyVoice3 LLM stage, and how the voice records it.

Backend rule (`choose_llm_backend`): ``auto`` is MLX on Apple Silicon (Darwin arm64); elsewhere
ONNX Runtime when it is installed and runs the requested precision (fp32, int8, int4), else
torch; ``mlx`` / ``torch`` / ``onnx`` force one, and ``torch`` fp32 is the bit-faithful reference.
ONNX Runtime fp32 decodes 1.7x faster than torch fp32 on this CPU (bench/cosyvoice3.py: 12.2 vs
7.2 tok/s interleaved; 18.4 vs 7.6 on a quiet machine, cpu-performance.md) and stays within
1e-4 of it (3.1e-5 measured at full size). The rule comes from measurement, with random
full-size weights (Qwen2-0.5B shape + speech head), decoding after a 150-token prompt:

    2-core x86 Linux, no GPU (idle machine; bench/llm.py reproduces it)
        torch fp32   7.6 tok/s  LLM RTF 3.4      MLX fp32 (mlx-cpu)  2.35 tok/s  RTF 16.6
        torch bf16  21.9 tok/s  RTF 1.5          MLX bf16 / fp16     2.1 / 0.85 tok/s
        torch int8  31.4 tok/s  RTF 0.84         MLX int8 / int4     2.0 / 2.1 tok/s
    MLX's Linux CPU build decodes 3-25x slower than torch on the same machine, at every
    precision, so off Apple Silicon torch wins outright. MLX exists for Apple's unified-memory
    GPU (Metal), which torch's CPU path cannot use and torch's MPS path is not validated for;
    that is the platform the issue targets for MLX. (MLX fp32 with the system OpenBLAS
    preloaded reaches ~7 tok/s on Linux, on par with torch fp32: a finding, not a configuration
    we ship.) Apple numbers have not been measured here: run `bench/llm.py` on a Mac to confirm.
    A rerun of bench/llm.py on a *shared, loaded* machine (load average 1.3-3.7 on 2 cores,
    2026-11-29) gave torch fp32/bf16/int8 4.5/5.7/6.4 tok/s and MLX fp32/fp16/bf16/int8/int4
    5.1/1.8/3.3/3.7/3.8 tok/s, MLX prefill 18-38 s vs torch 3-7 s: contention blurs the decode
    ranking (torch's OpenMP threads suffer most), not the prefill one nor the quiet figures above.

Precisions: torch ``fp32`` (reference, bit-reproducible), ``bf16`` (every parameter bfloat16) and
``int8`` (`torch.ao.quantization.quantize_dynamic`, per-output-channel int8 weights with int8
dynamic activations, on the 7 projections of every Qwen2 layer; the text embedding, norms,
`speech_embedding` and `llm_decoder` stay fp32). MLX: see `llm_mlx` (fp32, fp16, bf16, int8,
int4). ONNX Runtime (``onnx``, CPU; ``auto``'s choice off Apple Silicon): see
`llm_onnx` (fp32, int8, int4: 1.7x / 4.9x / 5.7x torch fp32's decode rate on a shared 2-core x86
at 1 thread, bench/cosyvoice3.py; fp32 within 1e-4 of torch, the quantised ones measurably not).
What a built LLM reports as `.precision` is read back from its modules/dtypes (ONNX: the
operator types of the session's graph), never from the request.

Recording convention (`describe_pipeline`, used for `VoiceInfo.backend` / `.precision`):

    backend    the distinct backends of the stages in pipeline order (llm, flow, hift), joined
               with "+": "torch" when every stage ran on torch, "mlx+torch" when the LLM ran on
               MLX and flow + vocoder on torch, "onnx+torch" for an ONNX LLM, "torch+onnx" for
               a torch LLM with an ONNX flow (flow_fast).
    precision  one name when every stage ran at it ("fp32"); otherwise each stage as
               stage=precision in pipeline order, e.g. "llm=int8,flow=fp32,hift=fp32".
               HiFT's f0 predictor runs in float64 as part of the fp32 reference recipe, and
               counts as fp32.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import nn

from ..runtimes import PlatformInfo, mlx_available, onnx_available  # noqa: F401 (re-exported)
from .llm import CosyVoice3LM, LLMArgs, NextLogp

BACKEND_CHOICES = ("auto", "mlx", "torch", "onnx")
LLM_PRECISIONS: dict[str, tuple[str, ...]] = {
    "torch": ("fp32", "bf16", "fp16", "int8"),  # fp16 is meant for GPUs; int8 runs on the CPU only
    "mlx": ("fp32", "fp16", "bf16", "int8", "int4"),
    "onnx": ("fp32", "int8", "int4"),  # llm_onnx: ONNX Runtime on the CPU, opt-in (never "auto")
}


def choose_llm_backend(
    requested: str = "auto", platform: PlatformInfo | None = None, *, have_mlx: bool | None = None,
    have_onnx: bool | None = None, precision: str = "fp32",
) -> str:
    """"torch", "mlx" or "onnx" for a request of "auto", "mlx", "torch" or "onnx" (see the module docstring).

    "auto" is the fastest backend measured for the platform that runs the requested precision:
    MLX on Apple Silicon (if mlx and mlx-lm are importable), else ONNX Runtime (if installed and
    the precision is one it runs: fp32, int8, int4), else torch. An explicit "mlx" without its
    packages is a ValueError. `--llm-backend torch` is the bit-faithful reference path.
    """
    if requested not in BACKEND_CHOICES:
        raise ValueError(f"LLM backend must be one of {', '.join(BACKEND_CHOICES)}; got {requested!r}")
    if requested in ("torch", "onnx"):
        return requested
    have = mlx_available() if have_mlx is None else have_mlx
    if requested == "mlx":
        if not have:
            raise ValueError("LLM backend 'mlx' needs the mlx and mlx-lm packages, which are not installed")
        return "mlx"
    platform = platform or PlatformInfo.current()
    if platform.apple_silicon and have:
        return "mlx"
    have_ort = onnx_available() if have_onnx is None else have_onnx
    return "onnx" if have_ort and precision in LLM_PRECISIONS["onnx"] else "torch"


def check_precision(backend: str, precision: str) -> None:
    allowed = LLM_PRECISIONS.get(backend)
    if allowed is None:
        raise ValueError(f"unknown LLM backend {backend!r}")
    if precision not in allowed:
        raise ValueError(f"the {backend} LLM runs at {', '.join(allowed)}; not {precision!r}")


# ---------------------------------------------------------------------------------------------
# torch


def _dynamic_linear_types() -> tuple[type, ...]:
    import torch.ao.nn.quantized.dynamic as nnqd

    return (nnqd.Linear,)


_TORCH_DTYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}


def torch_module_precision(module: nn.Module) -> str:
    """What a torch module runs at: "int8" if it holds dynamically quantised Linear layers,
    else the floating dtype holding most of its parameters (so HiFT's small float64 f0
    predictor does not make the fp32 vocoder "fp64")."""
    if any(isinstance(m, _dynamic_linear_types()) for m in module.modules()):
        return "int8"
    counts: dict[torch.dtype, int] = {}
    for p in module.parameters():
        if p.is_floating_point():
            counts[p.dtype] = counts.get(p.dtype, 0) + p.numel()
    if not counts:
        return "fp32"
    dtype = max(counts, key=counts.get)
    return _TORCH_DTYPES.get(dtype, str(dtype).removeprefix("torch."))


def _quantize_int8_dynamic(model: CosyVoice3LM) -> None:
    """int8 dynamic quantisation of every Linear inside the Qwen2 layers (not the speech head)."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():  # torch.ao.quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")
        warnings.filterwarnings("ignore", message=".*quantized tensor creation.*")
        for i, layer in enumerate(model.qwen2.layers):
            model.qwen2.layers[i] = quantize_dynamic(
                layer, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True
            )


class TorchSpeechLM:
    """The torch LLM behind the backend seam; `precision` is read back from the modules."""

    backend = "torch"

    def __init__(self, model: CosyVoice3LM, step: str = "dynamic") -> None:
        self.model = model
        # "dynamic": llm.py's own cache and attention; "static": llm_static's fixed-shape step,
        # replayed as a CUDA graph on CUDA. Different arithmetic, so part of the voice's identity.
        self.step = step
        self._static = None
        if step == "static":
            from .llm_static import StaticDecoder

            self._static = StaticDecoder(model)

    @property
    def args(self) -> LLMArgs:
        return self.model.args

    @property
    def device(self) -> str:
        """"cpu", "cuda" or "mps": where the weights are (read back, like the precision)."""
        return self.model.llm_decoder.weight.device.type

    @property
    def precision(self) -> str:
        layers = self.model.qwen2.layers
        qtypes = _dynamic_linear_types()
        linears = [m for m in layers.modules() if isinstance(m, (nn.Linear, *qtypes))]
        quantised = [m for m in linears if isinstance(m, qtypes)]
        if quantised:
            return "int8" if len(quantised) == len(linears) else "mixed"
        return torch_module_precision(self.model)

    def start_decoding(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> NextLogp:
        if self._static is not None:
            return self._static.start_decoding(text_ids, prompt_speech_tokens)
        return self.model.start_decoding(text_ids, prompt_speech_tokens)


def build_torch_llm(config_json: dict, state_dict: dict, precision: str = "fp32", device: str = "cpu",
                    step: str = "dynamic") -> TorchSpeechLM:
    """The torch LLM at `precision` on `device` (cast on the CPU first, then moved: half the copy).
    Its log-probabilities come back to the host as CPU fp32 whatever the device (llm.speech_logp).
    `step`: "dynamic", "static" or "auto" (llm_static.choose_step: static on CUDA)."""
    from .llm_static import choose_step

    step = choose_step(step, device)
    check_precision("torch", precision)
    if precision == "int8" and device != "cpu":
        raise ValueError(f"the torch int8 LLM (dynamic quantisation) runs on the CPU only, not {device}")
    model = CosyVoice3LM.from_checkpoint(config_json, state_dict)  # adopts the fp32 tensors
    if precision in ("bf16", "fp16"):
        model.to(torch.bfloat16 if precision == "bf16" else torch.float16)
    elif precision == "int8":
        # Every tensor that survives quantisation (text embedding, speech tables, norms, and the
        # Linear biases, which the packed int8 layers keep by reference) must own its memory:
        # one tensor still pointing into llm.pt's memory map keeps every page the quantiser read
        # resident (measured full size: RSS 2.07 GB with the map alive, vs the model's ~1.2 GB).
        block_weights = {id(m.weight) for m in model.qwen2.layers.modules() if isinstance(m, nn.Linear)}
        for param in model.parameters():
            if id(param) not in block_weights:
                param.data = param.data.clone()
        _quantize_int8_dynamic(model)
    if device != "cpu":
        model.to(device)
    return TorchSpeechLM(model, step)


# ---------------------------------------------------------------------------------------------
# either


class SpeechLM(Protocol):
    backend: str
    args: LLMArgs

    @property
    def precision(self) -> str: ...

    def start_decoding(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> NextLogp: ...


def build_llm(
    checkpoint: Any,
    backend: str = "auto",
    precision: str = "fp32",
    *,
    platform: PlatformInfo | None = None,
    cache_root: Any = None,
    threads: int | None = None,
    device: str = "cpu",
    step: str = "auto",
) -> SpeechLM:
    """The LLM stage of `checkpoint` (a `checkpoint.Checkpoint`) on a backend at a precision.

    For MLX this converts llm.pt once per (model_id, precision) into the MLX cache, then empties
    `checkpoint.llm_state_dict` (the memory-mapped torch tensors) *before* building the MLX
    model, so the process never holds both copies. For torch the model adopts those tensors
    (fp32) or replaces them (bf16, int8), and the checkpoint's dict is emptied likewise.
    For ONNX the graph is exported (and quantised) once per (model_id, precision) into
    cache_dir()/onnx/<model_id>-<precision>/; only the two embedding tables of llm.pt are kept
    (memory-mapped), and the session runs `threads` intra-op threads (default: torch's count,
    i.e. the worker's budget). `device` places the torch LLM ("cpu", "cuda", "mps"); the MLX and
    ONNX backends place themselves (devices.py decides which backend a device gets). `step`
    chooses the torch LLM's decode step (llm_static.choose_step); the other backends have their own.
    """
    chosen = choose_llm_backend(backend, platform, precision=precision)
    if chosen != "torch" and device != "cpu":
        raise ValueError(f"the {chosen} LLM backend does not run on a torch device ({device}); use the torch backend")
    check_precision(chosen, precision)
    sd = checkpoint.llm_state_dict

    def release() -> None:
        checkpoint.llm_state_dict = {}

    if chosen == "onnx":
        from .llm_onnx import load_onnx_llm

        del sd
        return load_onnx_llm(
            checkpoint.qwen_config,
            lambda: checkpoint.llm_state_dict,
            checkpoint.model_id,
            precision,
            cache_root,
            threads=threads,
            release=release,
        )
    if chosen == "mlx":
        from .llm_mlx import load_mlx_llm

        del sd
        return load_mlx_llm(
            checkpoint.qwen_config,
            lambda: checkpoint.llm_state_dict,
            checkpoint.model_id,
            precision,
            cache_root,
            release=release,
        )
    lm = build_torch_llm(checkpoint.qwen_config, sd, precision, device, step)
    del sd
    release()
    return lm


def describe_pipeline(stages: Sequence[tuple[str, str, str]]) -> tuple[str, str]:
    """(backend, precision) strings for VoiceInfo from (stage, backend, precision) in pipeline order."""
    backends: list[str] = []
    for _, b, _ in stages:
        if b not in backends:
            backends.append(b)
    precisions = {p for _, _, p in stages}
    precision = stages[0][2] if len(precisions) == 1 else ",".join(f"{s}={p}" for s, _, p in stages)
    return "+".join(backends), precision
