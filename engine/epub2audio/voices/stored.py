"""Stored tensor forms of compressed model folders, shared by the voice families that write them
(cosyvoice3/compress.py, qwen3tts/compress.py): the quantisers with their inverses, a row-wise
int8 table kept int8 at run time, and a 64-byte-aligned safetensors writer and its reader.

    int8 rows     symmetric int8 per row, fp32 scale per row (embedding tables, output heads)
    int4 groups   symmetric 4-bit in groups of INT4_GROUP inputs, two per byte, fp16 scales
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from epub2audio.errors import InputError

INT4_GROUP = 32


def quantize_int8_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per row (tables): q in -127..127, fp32 scale [rows]."""
    scale = (w.float().abs().amax(dim=1) / 127).clamp_min(1e-12)
    return torch.round(w.float() / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def dequantize_int8_rows(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale.float()[:, None]


class Int8RowEmbedding(nn.Module):
    """A table stored as int8 rows + a scale per row, kept int8 (and memory-mapped) at run time:
    only the rows looked up are dequantised, to exactly the numbers of dequantize_int8_rows
    (CosyVoice3's text table: 0.14 GB instead of 0.54 GB of fp32 at full size)."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("weight", q, persistent=False)
        self.register_buffer("scale", scale, persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.reshape(-1)
        return dequantize_int8_rows(self.weight[flat], self.scale[flat]).reshape(*ids.shape, -1)


def quantize_int4_groups(w: torch.Tensor, group: int = INT4_GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric 4-bit in groups of `group` inputs: uint8 [out, in/2] (low nibble first), fp16 scales."""
    out, n = w.shape
    g = w.float().reshape(out, n // group, group)
    scale = (g.abs().amax(dim=-1) / 7).clamp_min(1e-8).half()
    q = torch.round(g / scale.float()[..., None]).clamp(-8, 7).to(torch.int8).reshape(out, n)
    packed = (q[:, 0::2] & 0xF) | ((q[:, 1::2] & 0xF) << 4)
    return packed.to(torch.uint8), scale


def dequantize_int4_groups(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """fp32 [out, in] from quantize_int4_groups' form. Each byte is looked up in a 256-entry table
    of its two signed nibbles (one pass, 3x faster than unpacking with masks and shifts)."""
    byte = torch.arange(256, dtype=torch.int32)
    nibbles = torch.stack([byte & 0xF, byte >> 4], dim=-1)
    nibbles = torch.where(nibbles > 7, nibbles - 16, nibbles).float()  # [256, 2], low nibble first
    out = packed.shape[0]
    q = F.embedding(packed.int(), nibbles).reshape(out, -1)
    n = q.shape[1]
    return q.view(out, scale.shape[1], -1).mul_(scale.float()[..., None]).view(out, n)


_ST_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.float64: "F64",
              torch.int8: "I8", torch.uint8: "U8", torch.int32: "I32", torch.int64: "I64"}
ALIGN = 64  # bytes
PAD = "__pad__."  # filler entries that keep every tensor 64-byte aligned


def save_aligned(tensors: dict, path: Path, meta: dict) -> None:
    """A safetensors file whose every tensor starts 64 bytes into a page-aligned map.

    safetensors' own writer aligns to 8 bytes; matrix kernels take other (differently rounded)
    paths on data that is not 64-byte aligned, so a memory-mapped fp32 LLM would not reproduce
    llm.pt's log-probs bit for bit. The format allows no gaps, so alignment is padding entries."""
    entries, chunks, offset = {}, [], 0
    for i, (name, t) in enumerate(tensors.items()):
        data = t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
        gap = -offset % ALIGN
        if gap:
            entries[f"{PAD}{i}"] = {"dtype": "U8", "shape": [gap], "data_offsets": [offset, offset + gap]}
            chunks.append(bytes(gap))
            offset += gap
        entries[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    entries["__metadata__"] = {k: str(v) for k, v in meta.items()}
    header = json.dumps(entries, separators=(",", ":")).encode()
    header += b" " * (-(8 + len(header)) % ALIGN)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little"))
        f.write(header)
        for chunk in chunks:
            f.write(chunk)


def load_safetensors(path: Path) -> tuple[dict, dict]:
    from safetensors import safe_open
    from safetensors.torch import load_file

    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        tensors = {k: v for k, v in load_file(str(path)).items() if not k.startswith(PAD)}
        return tensors, meta  # memory-mapped: pages are read when touched
    except Exception as e:  # safetensors raises its own error types
        raise InputError(f"cannot read {path.name} as safetensors: {str(e)[:200]}") from None
