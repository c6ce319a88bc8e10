"""Faster CosyVoice3 flow (DiT) options for CPUs. None of them is the default: each changes the mel.

The faithful flow (`flow.py`, torch fp32) spends ~99 % of its time in the 22 DiT blocks: per
estimator call (batch 2 for guidance, T mel frames) the Linear layers cost 2 x T x 185 M MACs and
attention 2 x 22 x 2 x T^2 x 1024 MACs; everything that is constant across the 10 Euler steps or
across the two guidance rows is a rounding error beside that (see "exact" below). So the
measurable speed-ups change the arithmetic, and are opt-in (`flow_precision=`):

    "fp32"       the faithful torch flow, unchanged (reference, bit-reproducible)
    "int8"       torch dynamic int8 (`quantize_dynamic`, per-output-channel weights, dynamic int8
                 activations) of every Linear inside the DiT transformer blocks. The token encoder,
                 input projection, conv position embedding, time MLP, final AdaLN and proj_out
                 stay fp32 (they are < 1 % of the work and feed / form the output directly).
    "onnx-fp32"  the DiT estimator exported to ONNX Runtime (same math, MLAS kernels, fused
                 LayerNorm/GELU/attention); the Euler loop, guidance and token encoder stay torch.
    "onnx-int8"  that graph with onnxruntime.quantization dynamic int8 (per-channel) MatMuls
                 inside the transformer blocks, recipe onnx_cache.INT8_RECIPE ("u8u8": exact
                 integer sums on every x86 CPU; the table below was "u8s8" on a VNNI CPU). AVX2
                 EPYC, full size, one 400-frame DiT call (bench/int8_recipes.py): u8u8 rel. dev.
                 0.011 at 1.33x fp32; u8s8 0.014 at 1.22x; u8s8 7-bit 0.021 at 1.30x.
    "bf16"/"fp16"  every flow weight at that dtype (flow.set_flow_dtype; the rotary frequencies and
                 the Euler state stay fp32). Meant for GPUs (devices.py); slow on most CPUs.

Measured (bench/cosyvoice3.py: full-size random weights, 150 prompt + 250 tokens = 800 frames,
10 steps, 1 thread, shared 2-core AVX-512/VNNI x86 at load ~5; the mel through the same fp32
HiFT for the waveform columns):

    flow        flow RTF  speed-up  mel max abs (rel)  wave max abs  LSD dB
    fp32          10.73     1.00x   0                  0             0
    int8           4.18     2.57x   0.078 (1.2 %)      0.49          7.4
    onnx-fp32      6.16     1.74x   2.9e-6 (5e-7)      3.1e-4        0.01
    onnx-int8      2.47     4.35x   0.050 (0.8 %)      0.49          8.8

(The random-weight HiFT turns small mel changes into large sample differences: its f0 drives
an integrated sine phase. "onnx-fp32" is not bit-identical, ~1e-6 relative on the mel, so it is
opt-in too, but it is the safe first choice; the tests bound it at 1e-4.) The deviation bounds
asserted in tests/cosyvoice3/test_speed_options.py are for the tiny test model.

Exact changes: the one shipped in flow.py is in-place residual and modulation ops plus an in-place
RoPE on head 0 (upstream's arithmetic element for element, tested against its out-of-place order):
1.03-1.07x per full-size DiT call (800 frames, 2 threads, two A/B runs of 3 and 6 interleaved
rounds against the out-of-place code, bit-identical output). Considered and not shipped:
  * the time embedding MLP and the 23 AdaLN linears depend only on t: 2 x 23 x 1024 x (6|2) x 1024
    MACs per step, 0.08 % of a 10 s segment's flow; already computed once per step, not per frame.
  * the unconditional row's zero cond/mu/spk and the cond/mu/spk share of the input projection
    are constant over the steps: 4 x 80 x 1024 x T MACs per call, 0.07 %; splitting the
    projection also changes the summation order, so it would not even be bit-identical.
  * torch's intra-op thread count does not change results for these kernels (checked by the
    tests: the mel is bit-identical at 1 and 2 threads), so threads are a free setting.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .flow import DiT, Flow, set_flow_dtype
from .onnx_cache import (INT8_RECIPE, build_once, entry_path, graph_precision, keep_only, make_session, quantize_matmuls_int8,
                         read_meta, save_with_external_data)

DIT_FILE = "dit.onnx"
DIT_DATA_FILE = "dit.onnx.data"

FLOW_PRECISIONS = ("fp32", "int8", "onnx-fp32", "onnx-int8", "bf16", "fp16")


def _dyn_linear_types() -> tuple[type, ...]:
    import torch.ao.nn.quantized.dynamic as nnqd

    return (nnqd.Linear,)


def quantize_flow_int8(flow: Flow) -> Flow:
    """In place: dynamic int8 of every nn.Linear inside the DiT transformer blocks."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    est = flow.decoder.estimator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, block in enumerate(est.transformer_blocks):
            est.transformer_blocks[i] = quantize_dynamic(
                block, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True
            )
    return flow


# --------------------------------------------------------------------------------- ONNX DiT


class OnnxDiT(nn.Module):
    """Stands in for `flow.DiT` (same call signature) and runs an ONNX Runtime session."""

    def __init__(self, session: Any, model_path: Path, precision: str) -> None:
        super().__init__()
        self.session = session
        self.model_path = Path(model_path)
        self.precision = precision

    def forward(self, x, mu, t, spks, cond) -> torch.Tensor:
        feeds = {
            "x": x.float().contiguous().numpy(), "mu": mu.float().contiguous().numpy(),
            "t": t.float().contiguous().numpy(), "spks": spks.float().contiguous().numpy(),
            "cond": cond.float().contiguous().numpy(),
        }  # fmt: skip
        return torch.from_numpy(self.session.run(["v"], feeds)[0])


def export_dit(est: DiT, out_dir: str | os.PathLike, mel_dim: int = 80, spk_dim: int = 80) -> Path:
    import onnx

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    T = 16
    dummy = tuple(torch.zeros(shape, device="cpu") for shape in ((2, mel_dim, T), (2, mel_dim, T), (2,), (2, spk_dim), (2, mel_dim, T)))
    raw = out_dir / "raw.onnx"
    axes = {n: {2: "T"} for n in ("x", "mu", "cond")}
    axes["v"] = {2: "T"}
    from . import flow as flow_mod

    dim = est.proj_out.in_features
    traced_ln = flow_mod.layer_norm  # its x.shape[-1:] would be traced as a dynamic shape
    flow_mod.layer_norm = lambda x: torch.nn.functional.layer_norm(x, (dim,), eps=1e-6)
    try:
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(
                est, dummy, str(raw), input_names=["x", "mu", "t", "spks", "cond"], output_names=["v"],
                dynamic_axes=axes, opset_version=17, do_constant_folding=True, dynamo=False,
            )  # fmt: skip
    finally:
        flow_mod.layer_norm = traced_ln
    path = out_dir / DIT_FILE
    save_with_external_data(onnx.load(str(raw)), path, DIT_DATA_FILE)
    keep_only(out_dir, DIT_FILE, DIT_DATA_FILE)
    return path


def quantize_dit_int8(src: Path, dst_dir: Path, recipe: str = INT8_RECIPE) -> Path:
    """Dynamic int8 of the transformer blocks' MatMuls (the embeddings and output stay fp32)."""
    import onnx

    names = [n.name for n in onnx.load(str(src), load_external_data=False).graph.node]
    blocks = [n for n in names if "transformer_blocks" in n]
    return quantize_matmuls_int8(src, dst_dir, DIT_FILE, DIT_DATA_FILE, include=blocks, recipe=recipe)


DIT_CACHE_FORMAT = "epub2audio-cosyvoice3-flow-onnx"
DIT_CACHE_VERSION = "2"  # 2: int8 recipe u8u8


def dit_cache_path(model_id: str, precision: str, cache_root: str | os.PathLike | None = None) -> Path:
    """<cache_root>/<model_id>-flow-<precision>/ (cache_root defaults to cache_dir()/onnx)."""
    if precision not in ("fp32", "int8"):
        raise ValueError(f"the ONNX DiT runs at fp32 or int8; not {precision!r}")
    return entry_path(model_id, f"flow-{precision}", cache_root)


def _dit_meta(model_id: str, precision: str) -> dict:
    return {"format": DIT_CACHE_FORMAT, "version": DIT_CACHE_VERSION, "model_id": model_id, "precision": precision,
            "recipe": INT8_RECIPE if precision == "int8" else "fp32"}


def dit_cache_is_valid(path: Path, model_id: str, precision: str) -> bool:
    return read_meta(path) == _dit_meta(model_id, precision) and all(
        (path / f).is_file() for f in (DIT_FILE, DIT_DATA_FILE))


def ensure_dit_exported(flow: Flow, model_id: str, precision: str, cache_root: str | os.PathLike | None = None) -> tuple[Path, bool]:
    """(cache dir of the DiT at `precision`, whether this call built it); built like the LLM's."""
    est = flow.decoder.estimator
    if isinstance(est, OnnxDiT):
        raise ValueError("this flow's DiT is already an ONNX session; export from the torch flow")
    return build_once(
        dit_cache_path(model_id, precision, cache_root), precision,
        fp32_entry=dit_cache_path(model_id, "fp32", cache_root),
        is_valid=lambda path, p: dit_cache_is_valid(path, model_id, p),
        export_fp32=lambda folder: export_dit(est, folder),
        quantize=lambda source, folder: quantize_dit_int8(source / DIT_FILE, folder),
        meta=lambda: _dit_meta(model_id, precision),
    )


def onnx_dit(flow: Flow, precision: str, model_id: str, cache_root: str | os.PathLike | None = None, threads: int | None = None) -> OnnxDiT:
    """The flow's DiT on ONNX Runtime (exported/quantised once into the cache); the session's
    intra-op threads are the worker's budget."""
    final, _ = ensure_dit_exported(flow, model_id, precision, cache_root)
    path = final / DIT_FILE
    dit = OnnxDiT(make_session(path, threads), path, graph_precision(path))
    if dit.precision != precision:
        raise RuntimeError(f"the cached ONNX DiT at {final} runs at {dit.precision}, not {precision}")
    return dit


def apply_flow_precision(
    flow: Flow, precision: str, model_id: str = "", cache_root: str | os.PathLike | None = None, threads: int | None = None
) -> Flow:
    """Turn a faithful fp32 `flow` into the requested option, in place; returns it.

    The ONNX options export the DiT once per (model_id, precision) into
    `cache_root` (default cache_dir()/onnx) and need the checkpoint's model_id."""
    if precision not in FLOW_PRECISIONS:
        raise ValueError(f"flow precision must be one of {', '.join(FLOW_PRECISIONS)}; got {precision!r}")
    if precision == "int8":
        return quantize_flow_int8(flow)
    if precision in ("bf16", "fp16"):
        return set_flow_dtype(flow, torch.bfloat16 if precision == "bf16" else torch.float16)
    if precision.startswith("onnx-"):
        if not model_id:
            raise ValueError("an ONNX flow needs the checkpoint's model_id (its cache key)")
        flow.decoder.estimator = onnx_dit(flow, precision.removeprefix("onnx-"), model_id, cache_root, threads)
    return flow


def flow_precision(flow: Flow) -> tuple[str, str]:
    """(backend, precision) of a flow, read back from what its estimator actually is."""
    est = flow.decoder.estimator
    if isinstance(est, OnnxDiT):
        return "onnx", graph_precision(est.model_path)
    if any(isinstance(m, _dyn_linear_types()) for m in est.modules()):
        return "torch", "int8"
    dtype = next(est.parameters()).dtype
    return "torch", {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype))
