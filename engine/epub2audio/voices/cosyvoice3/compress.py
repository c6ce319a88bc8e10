"""Compact CosyVoice3 model folders: `epub2audio model compress --model-dir SRC --out DST`.

    DST/
        compressed.json             what was done: source model id, options (tables included), tool version
        cosyvoice3.yaml             copied
        CosyVoice-BlankEN/          tokenizer + config.json, copied (never the blank weights)
        llm.safetensors             the LLM, lm_head left out (CosyVoice3 speaks through llm_decoder)
        flow.safetensors            the flow, at --flow's precision
        hift.safetensors            the vocoder, at --hift's precision
        campplus.onnx, speech_tokenizer_v3.onnx    only with --prompt-parts keep (voice add needs them)

Weights are safetensors, memory-mapped at load. The LLM at ``--llm``:
    fp32 / bf16   every tensor at that dtype
    int8          the 7 projections of every Qwen2 layer as int8 + per-output-channel scale, made by
                  the same observer as torch's dynamic quantisation, so the loaded int8 LLM is the
                  one `--llm-precision int8` builds from llm.pt, bit for bit, without llm.pt's fp32
                  copy ever being read; norms and biases stay fp32
    int4          the projections as 4-bit (symmetric, groups of 32 inputs, fp16 scales); norms and
                  biases fp32
The three tables (text embedding, speech embedding, llm_decoder) at ``--tables``:
    fp32          with --llm fp32 or int8 (their default); a bf16 LLM keeps them bf16
    int8          symmetric int8 with an fp32 scale per row (never under 8 bits): int4's default and
                  only choice, and int8's way under 0.6 GB (the text table is 0.54 GB at fp32). The
                  torch LLM keeps the text table int8 and dequantises the rows it looks up
                  (Int8RowEmbedding); the two 6,761-row speech tables are dequantised at load.
``--vocab LANG...`` keeps only the text-embedding rows those languages need (vocab.py).

How a compressed folder runs (`build_llm_from_folder`): asked for MLX (or auto on Apple Silicon)
at "fp32" (the default) or the stored precision, MLX runs the stored tensors as they are with its
quantised layers (llm_mlx_folder.py: no conversion cache, no second quantisation); an LLM stored
at bf16 or int8 runs on torch at that precision when asked for torch or auto at "fp32" or that
precision; any other request dequantises to fp32 first and takes the ordinary path (backends.build_llm). The
flow and HiFT run at their stored precision unless another option (int8, onnx-*) is asked for.

The folder is written into a temporary sibling and renamed into place: DST is whole or absent.
Its model id covers the manifest and every file synthesis reads, so a voice's identity changes
with the compression; voice profiles made from the source folder keep working (their prompt
features come from the ONNX models, which compression never changes).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch import nn

import epub2audio
from epub2audio.errors import InputError
from epub2audio.files import sampled_digest_update

from ..stored import (  # noqa: F401 (shared with Qwen3-TTS; tests and bench reach them here)
    ALIGN, INT4_GROUP, PAD, Int8RowEmbedding, dequantize_int4_groups, dequantize_int8_rows, quantize_int4_groups,
    quantize_int8_rows,
)
from ..stored import load_safetensors as _load_safetensors
from ..stored import save_aligned as _save
from . import checkpoint as ck
from . import meta
from .llm import _LM_HEAD_KEY, _PREFIX, CosyVoice3LM, LLMArgs
from .vocab import CompactEmbedding, kept_ids, row_map, word_list

FORMAT = "epub2audio-cosyvoice3-compressed"
FORMAT_VERSION = 1
MANIFEST = ck.MANIFEST
LLM_FILE, FLOW_FILE, HIFT_FILE = "llm.safetensors", "flow.safetensors", "hift.safetensors"
LLM_CHOICES = ("fp32", "bf16", "int8", "int4")
TABLES_CHOICES = ("fp32", "int8")
TABLES_DEFAULT = {"fp32": "fp32", "bf16": "bf16", "int8": "fp32", "int4": "int8"}  # per --llm
FLOW_CHOICES = ("fp32", "fp16", "bf16")
HIFT_CHOICES = ("fp32", "fp16")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

EMBED_KEY = _PREFIX + "embed_tokens.weight"
ROW_MAP_KEY = _PREFIX + "embed_tokens.row_of_id"
TABLE_KEYS = (EMBED_KEY, "speech_embedding.weight", "llm_decoder.weight")
SCALE = ".scale"  # suffix of a quantised tensor's scales


def is_block_linear(key: str) -> bool:
    return key.startswith(_PREFIX + "layers.") and key.endswith("_proj.weight")


# ---------------------------------------------------------------------------------------------
# Quantisers (each paired with its inverse)


def quantize_int8_channels(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 [out, in] and float64 scales [out]: torch's per-channel dynamic-quantisation observer."""
    from torch.ao.quantization.observer import default_per_channel_weight_observer

    observer = default_per_channel_weight_observer()
    observer(w.float())
    scale, zero_point = observer.calculate_qparams()
    with warnings.catch_warnings():  # torch.ao quantised tensors are deprecated in favour of torchao
        warnings.simplefilter("ignore")
        q = torch.quantize_per_channel(w.float(), scale.double(), zero_point.long(), 0, torch.qint8)
    return q.int_repr().contiguous(), q.q_per_channel_scales().contiguous()


def int8_channels_qtensor(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    zeros = torch.zeros(q.shape[0], dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch._make_per_channel_quantized_tensor(q, scale.double(), zeros, 0)


# ---------------------------------------------------------------------------------------------
# Writing


def compress_llm_state_dict(sd: dict, precision: str, row_of_id: torch.Tensor | None = None, tables: str | None = None) -> dict:
    """llm.pt's tensors in stored form (module docstring); lm_head dropped."""
    tables = tables_for(precision, tables)
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if key == _LM_HEAD_KEY:
            continue
        if key == EMBED_KEY and row_of_id is not None:
            value = value[(row_of_id >= 0).nonzero().reshape(-1)]
            out[ROW_MAP_KEY] = row_of_id.contiguous()
        if key in TABLE_KEYS and tables == "int8":  # per row: a compact table's rows quantise as the full table's
            out[key], out[key + SCALE] = quantize_int8_rows(value)
        elif precision in ("fp32", "bf16"):
            out[key] = value.to(DTYPES[precision]).contiguous()
        elif is_block_linear(key) and precision == "int4" and value.shape[1] % INT4_GROUP == 0:
            out[key], out[key + SCALE] = quantize_int4_groups(value)
        elif is_block_linear(key):  # int8, or int4 on a width that groups do not divide
            out[key], out[key + SCALE] = quantize_int8_channels(value)
        else:
            out[key] = value.float().contiguous()
    return out


def tables_for(llm: str, tables: str | None) -> str:
    """How the three tables are stored with `llm` when `--tables` asks for `tables` (None: the default)."""
    default = TABLES_DEFAULT[llm]
    if tables is None or tables == default:
        return default
    if tables not in TABLES_CHOICES:
        raise InputError(f"--tables: {tables!r} is not one of {', '.join(TABLES_CHOICES)}")
    if llm != "int8":
        raise InputError(f"--tables {tables}: with --llm {llm} the tables are stored at {default}; "
                         "--tables chooses only for --llm int8")
    return tables


def compress_flow_state_dict(sd: dict, precision: str) -> dict:
    """The flow's state at `precision` exactly as flow.set_flow_dtype leaves it (rotary stays fp32)."""
    if precision == "fp32":
        return {k: v.float().contiguous() for k, v in sd.items()}
    from .flow import load_flow, set_flow_dtype

    flow = set_flow_dtype(load_flow(dict(sd)), DTYPES[precision])
    return {k: v.contiguous() for k, v in flow.state_dict().items()}


def compress_hift_state_dict(sd: dict, precision: str) -> dict:
    """hift.pt's weights (canonical keys); at fp16 the parts set_hift_dtype halves are stored
    half (the f0 predictor and the source module stay fp32: they run at fp64 / fp32)."""
    from .hift import normalize_hift_state_dict

    sd = normalize_hift_state_dict(sd)
    keep_fp32 = ("f0_predictor.", "m_source.")
    out = {}
    for k, v in sd.items():
        half = precision == "fp16" and not k.startswith(keep_fp32) and v.is_floating_point()
        out[k] = v.to(torch.float16 if half else torch.float32).contiguous()
    return out


def compress_folder(src: str | os.PathLike, dst: str | os.PathLike, *, llm: str = "int8", tables: str | None = None,
                    flow: str = "fp32", hift: str = "fp32", vocab: tuple[str, ...] = ("all",), prompt_parts: str = "keep",
                    words: dict[str, list[str]] | None = None) -> dict:
    """Write the compressed folder `dst` from the official (or compressed-with-fp32) folder `src`.
    `words` replaces the word lists per language (tests). Returns the manifest."""
    for name, value, choices in (("--llm", llm, LLM_CHOICES), ("--flow", flow, FLOW_CHOICES), ("--hift", hift, HIFT_CHOICES),
                                 ("--prompt-parts", prompt_parts, ("keep", "drop"))):
        if value not in choices:
            raise InputError(f"{name}: {value!r} is not one of {', '.join(choices)}")
    tables = tables_for(llm, tables)
    dst = Path(dst).expanduser()
    if dst.exists():
        raise InputError(f"{dst} already exists; choose a new --out folder")
    if not dst.parent.is_dir():
        raise InputError(f"{dst.parent} is not a folder")
    ckpt = ck.load_checkpoint(src)
    if ckpt.compressed is not None:
        raise InputError(f"{src} is already a compressed folder; compress the original model folder")
    vocab = tuple(vocab) or ("all",)
    row_of_id = None
    if vocab != ("all",):
        if "all" in vocab:
            raise InputError("--vocab: 'all' cannot be combined with languages")
        from .frontend import load_text_tokenizer

        tokenizer = load_text_tokenizer(ckpt.paths.blank_en)
        kept: set[int] = set()
        for lang in vocab:
            try:
                kept |= kept_ids(tokenizer, (words or {}).get(lang) or word_list(lang), tokenizer._tok.vocab_size)
            except ValueError as e:
                raise InputError(str(e)) from None
        row_of_id = row_map(kept, int(ckpt.qwen_config["vocab_size"]))

    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent))
    try:
        shutil.copy2(ckpt.paths.yaml, tmp / ck.CONFIG_FILES[0])
        (tmp / ck.BLANK_EN).mkdir()
        for name in ck.BLANK_EN_FILES:
            shutil.copy2(ckpt.paths.blank_en / name, tmp / ck.BLANK_EN / name)
        if prompt_parts == "keep":
            for name in ck.ONNX_FILES:
                shutil.copy2(ckpt.paths.model_dir / name, tmp / name)
        _save(compress_llm_state_dict(ckpt.llm_state_dict, llm, row_of_id, tables), tmp / LLM_FILE,
              {"precision": llm, "tables": tables})
        ckpt.llm_state_dict = {}
        _save(compress_flow_state_dict(ckpt.flow_state_dict, flow), tmp / FLOW_FILE, {"precision": flow})
        ckpt.flow_state_dict = {}
        _save(compress_hift_state_dict(ckpt.hift_state_dict, hift), tmp / HIFT_FILE, {"precision": hift})
        manifest = {
            "format": FORMAT, "version": FORMAT_VERSION,
            "source_model_id": ckpt.model_id,
            "options": {"llm": llm, "tables": tables, "flow": flow, "hift": hift, "vocab": list(vocab), "prompt_parts": prompt_parts},
            "kept_text_ids": None if row_of_id is None else int((row_of_id >= 0).sum()),
            "tool": f"epub2audio {epub2audio.__version__}",
            "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        }  # fmt: skip
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        for f in tmp.rglob("*"):
            if f.is_file():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        os.rename(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


# ---------------------------------------------------------------------------------------------
# Reading


def read_manifest(model_dir: Path) -> dict:
    try:
        manifest = json.loads((model_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"cannot read {model_dir / MANIFEST}: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"{model_dir / MANIFEST} is not an epub2audio compressed-model manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise InputError(f"{model_dir} was compressed by another epub2audio (format {manifest.get('version')}); compress it again")
    return manifest


def dequantized_llm_state_dict(stored: dict) -> dict:
    """llm.pt's layout at fp32 from a stored LLM (what the ONNX / MLX / other-precision paths take).
    A compact text embedding is expanded with NaN rows: vocab.check_text_ids refuses those ids
    before any backend sees them, and a NaN would be loud, never a silent zero."""
    sd = {}
    for key, value in stored.items():
        if key.endswith(SCALE) or key == ROW_MAP_KEY:
            continue
        scale = stored.get(key + SCALE)
        if scale is None:
            sd[key] = value.float()
        elif value.dtype == torch.uint8:
            sd[key] = dequantize_int4_groups(value, scale)
        elif scale.dim() == 1 and key in TABLE_KEYS:
            sd[key] = dequantize_int8_rows(value, scale)
        else:
            sd[key] = int8_channels_qtensor(value, scale).dequantize()
    if ROW_MAP_KEY in stored:
        rows = stored[ROW_MAP_KEY].long()
        full = torch.full((rows.shape[0], sd[EMBED_KEY].shape[1]), float("nan"))
        full[rows >= 0] = sd[EMBED_KEY]
        sd[EMBED_KEY] = full
    sd[_LM_HEAD_KEY] = sd[EMBED_KEY]  # tied, as in llm.pt; dropped again at load
    return sd


def check_stored_llm(stored: dict, qwen_config: dict) -> LLMArgs:
    """The stored LLM's tensors agree with config.json (shapes of the dequantised form)."""
    try:
        args = LLMArgs.from_config(qwen_config)
    except ValueError as e:
        raise InputError(f"{ck.BLANK_EN}/config.json: {e}") from None
    for key, shape in args.expected_shapes().items():
        if key == _LM_HEAD_KEY:
            continue
        if key not in stored:
            raise InputError(f"{LLM_FILE} lacks {key}")
        got = tuple(stored[key].shape)
        if stored[key].dtype == torch.uint8:
            got = (got[0], got[1] * 2)
        if key == EMBED_KEY and ROW_MAP_KEY in stored:
            kept = int((stored[ROW_MAP_KEY] >= 0).sum())
            if tuple(stored[ROW_MAP_KEY].shape) != (shape[0],) or got != (kept, shape[1]):
                raise InputError(f"{LLM_FILE}: the compact text embedding does not match its row map")
            continue
        if got != shape:
            raise InputError(f"{LLM_FILE}: {key} has shape {list(got)}, config.json implies {list(shape)}")
    return args


def load_compressed(paths: "ck.CheckpointPaths", recipe: dict, qwen_config: dict) -> "ck.Checkpoint":
    manifest = read_manifest(paths.model_dir)
    llm_sd, _ = _load_safetensors(paths.model_dir / LLM_FILE)
    check_stored_llm(llm_sd, qwen_config)
    flow_sd, _ = _load_safetensors(paths.model_dir / FLOW_FILE)
    ck._check_flow(flow_sd, recipe)
    hift_sd = ck._check_hift(_load_safetensors(paths.model_dir / HIFT_FILE)[0], recipe)
    return ck.Checkpoint(paths=paths, llm_state_dict=llm_sd, flow_state_dict=flow_sd, hift_state_dict=hift_sd,
                         qwen_config=qwen_config, recipe=recipe, model_id=compressed_model_id(paths),
                         compressed=manifest)


def compressed_model_id(paths: "ck.CheckpointPaths") -> str:
    """``cosyvoice3-z<15 hex>``: the manifest and every file synthesis reads (sampled as in
    checkpoint.compute_model_id); the optional ONNX prompt parts are not among them."""
    h = hashlib.sha256(b"epub2audio cosyvoice3 compressed model_id v1\0")
    for p in compressed_files(paths.model_dir):
        sampled_digest_update(h, p, p.relative_to(paths.model_dir).as_posix())
    return "cosyvoice3-z" + h.hexdigest()[:15]


def compressed_files(model_dir: Path) -> list[Path]:
    names = [MANIFEST, *ck.CONFIG_FILES, LLM_FILE, FLOW_FILE, HIFT_FILE]
    return [model_dir / n for n in names] + [model_dir / ck.BLANK_EN / n for n in ck.BLANK_EN_FILES]


# ---------------------------------------------------------------------------------------------
# Running a compressed folder


def stored_precision(ckpt, stage: str) -> str:
    return ckpt.compressed["options"][stage] if ckpt.compressed else "fp32"


def _build_stored_torch_llm(qwen_config: dict, stored: dict) -> CosyVoice3LM:
    """The torch LLM straight from stored tensors: floats adopted (memory-mapped), int8
    projections packed as torch's dynamic-quantised Linear, an int8 or compact text table kept so."""
    import torch.ao.nn.quantized.dynamic as nnqd

    args = LLMArgs.from_config(qwen_config)
    with meta.shell():
        model = CosyVoice3LM(args)
    floats = {k: v for k, v in stored.items() if not k.endswith(SCALE) and k + SCALE not in stored and k != ROW_MAP_KEY}
    text_table = None
    if ROW_MAP_KEY in stored or EMBED_KEY + SCALE in stored:
        floats.pop(EMBED_KEY, None)
        text_table = _text_table(stored)
    for key in TABLE_KEYS[1:]:  # int8 speech tables: 24 MB each at fp32; the decode loop indexes
        if key + SCALE in stored:  # speech_embedding.weight, and the head stays an fp32 matmul
            floats[key] = dequantize_int8_rows(stored[key], stored[key + SCALE])
    result = model.load_state_dict(floats, strict=False, assign=True)
    if text_table is not None:
        model.qwen2.embed_tokens = text_table
    quantised = [k for k in stored if k + SCALE in stored and k not in TABLE_KEYS]
    allowed = {_LM_HEAD_KEY, EMBED_KEY, *quantised}
    missing = [k for k in result.missing_keys if k not in allowed]
    if missing or result.unexpected_keys:
        raise InputError(f"{LLM_FILE} does not fit the LLM: {(missing or result.unexpected_keys)[0]}")
    for param in model.parameters():  # biases and norms own their memory (see backends.build_torch_llm)
        if param.dtype == torch.float32 and param.numel() < 1 << 16:
            param.data = param.data.clone()

    def owner(key: str) -> tuple[nn.Module, str]:
        parent_name, _, child = key.removesuffix(".weight").rpartition(".")
        return model.get_submodule(parent_name), child

    def int8_linear(key: str) -> nn.Module:
        linear: nn.Linear = getattr(*owner(key))
        # Built at 1x1, then given its weight: at full size the constructor would first pack a zero
        # matrix of the same shape, a third of the packing time.
        q = nnqd.Linear(1, 1, dtype=torch.qint8)
        q.in_features, q.out_features = linear.in_features, linear.out_features
        q.set_weight_bias(int8_channels_qtensor(stored[key], stored[key + SCALE]), linear.bias)
        _page_out(stored[key])  # packed: its file pages are only a second copy now
        return q

    int8 = [k for k in quantised if stored[k].dtype == torch.int8]
    for key in quantised:
        if stored[key].dtype == torch.uint8:  # int4: dequantised to fp32 (torch has no CPU int4 matmul)
            linear: nn.Linear = getattr(*owner(key))
            linear.weight = nn.Parameter(dequantize_int4_groups(stored[key], stored[key + SCALE]), requires_grad=False)
    # Packing runs on one thread per matrix and releases the GIL, so the worker's threads pack
    # several matrices at once (1.8x faster at 2 threads); the modules are placed here, in order.
    with ThreadPoolExecutor(max(1, torch.get_num_threads())) as pool:
        for key, q in zip(int8, pool.map(int8_linear, int8)):
            setattr(*owner(key), q)
    return model.eval()


def _page_out(tensor: torch.Tensor) -> None:
    """Ask Linux to reclaim the pages under `tensor` (madvise MADV_PAGEOUT, Linux >= 5.4).

    The stored int8 projections are memory-mapped from llm.safetensors; packing them for torch's
    int8 matmul reads every page, and the file mapping stays open for the tables, so those pages
    would stay counted as this process's private memory (0.43 GB at full size) beside the packed
    copy. Clean file pages are simply dropped (read again from the file if ever touched), and
    anonymous ones would go to swap, never lost, so this is safe whatever backs the tensor.
    Anywhere else (or on failure) it does nothing."""
    if not sys.platform.startswith("linux") or tensor.numel() == 0:
        return
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    first, last = -(-start // page) * page, end // page * page  # whole pages inside the tensor only
    if last > first:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), 21)  # 21 = MADV_PAGEOUT


def _text_table(stored: dict) -> nn.Module:
    """The stored text embedding as a module: int8 rows stay int8, a compact table stays compact."""
    weight, scale = stored[EMBED_KEY], stored.get(EMBED_KEY + SCALE)
    table = weight if scale is None else Int8RowEmbedding(weight, scale)
    return table if ROW_MAP_KEY not in stored else CompactEmbedding(table, stored[ROW_MAP_KEY])


def build_llm_from_folder(ckpt, backend: str = "auto", precision: str = "fp32", *, threads=None, device: str = "cpu",
                          step: str = "auto"):
    """The LLM stage of a compressed checkpoint (rule in the module docstring)."""
    from .backends import TorchSpeechLM, build_llm
    from .llm_static import choose_step

    stored_as = stored_precision(ckpt, "llm")
    if precision in ("fp32", stored_as) and device == "cpu" and _runs_on_mlx(backend, precision):
        from .llm_mlx_folder import fits, load_stored_mlx_llm

        if fits(ckpt.llm_state_dict):  # MLX's own quantised layers on the stored tensors
            lm = load_stored_mlx_llm(ckpt.qwen_config, ckpt.llm_state_dict)
            ckpt.llm_state_dict = {}
            return lm
    native = (backend in ("torch", "auto") and precision in ("fp32", stored_as) and stored_as != "int4"
              and (backend == "torch" or stored_as != "fp32") and (stored_as != "int8" or device == "cpu"))
    if native:
        model = _build_stored_torch_llm(ckpt.qwen_config, ckpt.llm_state_dict)
        ckpt.llm_state_dict = {}
        if device != "cpu":
            model.to(device)
        return TorchSpeechLM(model, choose_step(step, device))
    from dataclasses import replace

    full = replace(ckpt, llm_state_dict=dequantized_llm_state_dict(ckpt.llm_state_dict))
    ckpt.llm_state_dict = {}
    return build_llm(full, backend, precision, threads=threads, device=device, step=step)


def _runs_on_mlx(backend: str, precision: str) -> bool:
    from .backends import choose_llm_backend

    return backend in ("mlx", "auto") and choose_llm_backend(backend, precision=precision) == "mlx"


def stage_precision(stored: str, requested: str) -> str:
    """What a flow / HiFT stored at `stored` runs at when `requested`: the stored precision for
    "fp32" (the default) or itself; another option is applied to the fp32 upcast."""
    return stored if requested in ("fp32", stored) else requested


# ---------------------------------------------------------------------------------------------
# The child process of `epub2audio model compress`


def _compress_request(request: dict) -> dict:
    manifest = compress_folder(request["model_dir"], request["out"], llm=request["llm"], tables=request.get("tables"),
                               flow=request["flow"],
                               hift=request["hift"], vocab=tuple(request["vocab"]), prompt_parts=request["prompt_parts"])
    sizes = {p.name: p.stat().st_size for p in Path(request["out"]).iterdir() if p.is_file()}
    return {"manifest": manifest, "sizes": sizes}


if __name__ == "__main__":
    from epub2audio.worker import oneshot

    sys.exit(oneshot.run(_compress_request))
