"""ONNX graphs we export from loaded weights (the LLM in llm_onnx, the DiT in flow_fast): where
they are cached, how a cached graph is built once and published atomically, how it is quantised,
saved and opened. One place for what both stages do alike.

A cache entry is a folder `<cache_dir()/onnx>/<model_id>-<what>/` holding the graph, its external
data file and a meta.json. It is built in a temp folder beside it and renamed into place, so a
crash never leaves a half-written graph that looks valid. A quantised entry is made from the fp32
entry (exported first if it is not cached yet).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

META_FILE = "meta.json"
# Dynamic int8 recipes (quantize_dynamic settings; activations are always dynamic uint8).
# MLAS's u8 x s8 kernels on AVX2 CPUs without VNNI add pairs of u8*s8 products in int16 with
# saturation (vpmaddubsw), so full-range s8 weights overflow there: max |dlogp| 3.2 instead of 0.2
# on the tiny test LLM. u8 x u8 widens to int16 before multiplying and never saturates, so its
# integer sums are exact on every CPU; "s8-7bit" (reduce_range) avoids the overflow by giving
# up one bit of weight precision. bench/int8_recipes.py measures them side by side.
INT8_RECIPES = {
    "u8u8": {"weight_type": "QUInt8", "reduce_range": False},
    "u8s8": {"weight_type": "QInt8", "reduce_range": False},
    "u8s8-7bit": {"weight_type": "QInt8", "reduce_range": True},
}
INT8_RECIPE = "u8u8"  # part of every int8 cache entry's meta: another recipe is a rebuild
INT8_OPS = {"MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_cache_root() -> Path:
    from epub2audio.config import cache_dir

    return cache_dir() / "onnx"


def entry_path(model_id: str, what: str, cache_root: str | os.PathLike | None = None) -> Path:
    """<cache_root>/<model_id>-<what>/ (cache_root defaults to cache_dir()/onnx)."""
    if not model_id:
        raise ValueError("an ONNX cache entry needs the checkpoint's model_id")
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    return root / f"{_UNSAFE.sub('_', model_id)}-{what}"


def read_meta(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        return None


def publish(tmp: Path, final: Path, meta: dict[str, Any]) -> None:
    """Write meta.json into the finished temp folder, fsync its files, rename it into place."""
    (tmp / META_FILE).write_text(json.dumps(meta, indent=1))
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    if final.exists():  # an invalid leftover (or a concurrent writer's): replace it
        shutil.rmtree(final, ignore_errors=True)
    try:
        os.rename(tmp, final)
    except OSError:  # someone else published first
        shutil.rmtree(tmp, ignore_errors=True)


def build_once(
    final: Path,
    precision: str,
    *,
    fp32_entry: Path,
    is_valid: Callable[[Path, str], bool],
    export_fp32: Callable[[Path], None],
    quantize: Callable[[Path, Path], None],
    meta: Callable[[], dict[str, Any]],
) -> tuple[Path, bool]:
    """(the entry for `precision`, whether this call built it). A quantised entry is made from
    the cached fp32 entry, or from a scratch fp32 export when that is not cached."""
    if is_valid(final, precision):
        return final, False
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    scratch: Path | None = None
    try:
        if precision == "fp32":
            export_fp32(tmp)
        else:
            source = fp32_entry
            if not is_valid(source, "fp32"):
                scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}.fp32.", suffix=".tmp", dir=final.parent))
                export_fp32(scratch)
                source = scratch
            quantize(source, tmp)
        publish(tmp, final, meta())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return final, True


def save_with_external_data(model: Any, path: Path, data_file: str) -> None:
    """Save `model` as `path` plus one external data file (graphs over 2 GB need it)."""
    import onnx

    (path.parent / data_file).unlink(missing_ok=True)
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data_file, size_threshold=1024)


def keep_only(folder: Path, *names: str) -> None:
    """Remove the intermediate files an export or quantisation left beside its result."""
    for f in folder.iterdir():
        if f.name not in names:
            f.unlink()


def quantize_matmuls_int8(src: Path, dst_dir: Path, model_file: str, data_file: str, *,
                          include: list[str] | None = None, exclude: list[str] | None = None,
                          recipe: str = INT8_RECIPE) -> Path:
    """Dynamic int8 (per-channel weights, dynamic uint8 activations) of the MatMuls with constant
    weights, limited to the `include` nodes or sparing the `exclude` ones; `recipe` is one of
    INT8_RECIPES (the weight type and range)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    r = INT8_RECIPES[recipe]
    dst_dir.mkdir(parents=True, exist_ok=True)
    tmp = dst_dir / "q.onnx"
    quantize_dynamic(
        str(src), str(tmp), op_types_to_quantize=["MatMul"], per_channel=True,
        weight_type=getattr(QuantType, r["weight_type"]), reduce_range=r["reduce_range"],
        nodes_to_quantize=include, nodes_to_exclude=exclude, use_external_data_format=True,
        extra_options={"MatMulConstBOnly": True},
    )  # fmt: skip
    path = dst_dir / model_file
    save_with_external_data(onnx.load(str(tmp)), path, data_file)
    keep_only(dst_dir, model_file, data_file)
    return path


def graph_precision(model_path: str | os.PathLike) -> str:
    """What a graph computes its MatMuls in, read from its operator types (never from a request)."""
    import onnx

    ops = {n.op_type for n in onnx.load(str(model_path), load_external_data=False).graph.node}
    if "MatMulNBits" in ops:
        return "int4"
    if ops & INT8_OPS:
        return "int8"
    return "fp32"


def make_session(model_path: str | os.PathLike, threads: int | None = None):
    """A CPU session with `threads` intra-op threads (default: torch's count, the worker's budget)."""
    import onnxruntime as ort
    import torch

    so = ort.SessionOptions()
    so.intra_op_num_threads = max(1, int(threads if threads is not None else torch.get_num_threads()))
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(str(model_path), sess_options=so, providers=["CPUExecutionProvider"])
