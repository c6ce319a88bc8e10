"""A compressed folder's LLM on MLX, built straight from its stored tensors with MLX's quantised layers.

`epub2audio model compress` stores the LLM once (compress.py); MLX runs that storage as it is,
with no conversion cache and no second quantisation:

    stored                                          MLX layer (affine: w = scale * q + bias)
    fp32 / bf16 tensor                              the same array at that dtype
    int8 projection: int8 [out, in] + one scale     nn.QuantizedLinear, 8 bits: q + 128, the row's
      per output row (torch's symmetric observer)     scale repeated over the groups, bias -128 * scale
    int4 projection: two nibbles a byte + fp16      nn.QuantizedLinear, 4 bits, group 32: nibbles
      scale per 32 inputs (symmetric)                 flipped to q + 8 (xor 0x88), bias -8 * scale
    int8 table (int4 folders): int8 rows + scale    nn.QuantizedEmbedding / QuantizedLinear, 8 bits
    compact text embedding + row_of_id (vocab.py)   the compact rows; ids become rows on the host

MLX packs the elements of a row low bits first into uint32 words, as compress.py packs nibbles
into bytes, so the stored bytes are the weights' bytes. Each layer dequantises to what
`compress.dequantized_llm_state_dict` gives: exactly for 4 bits (fp16 scales times small
integers are exact in fp32), within an fp32 rounding of `-128 * scale` for 8 bits. Scales and
biases are fp32 and activations run in fp32 (bf16 for a bf16 folder); embeddings and the speech
head are never under 8 bits, because compress.py never stores them under 8 bits.

Why this is not MLX's own int8 (llm_mlx, from llm.pt) bit for bit: that path quantises the fp32
weights itself, asymmetrically (min/max) per group of 64 inputs, and also quantises the text
embedding; the folder holds torch's symmetric per-output-channel int8 and keeps the text table
fp32. Two different int8 grids: both within one quantisation step of the fp32 weights, never equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import torch

from .compress import EMBED_KEY, ROW_MAP_KEY, SCALE, TABLE_KEYS
from .llm import _LM_HEAD_KEY, LLMArgs
from .llm_mlx import CosyVoice3MLX, MLXSpeechLM, mlx_key

INT4_GROUP = 32  # compress.INT4_GROUP; MLX's smallest group
GROUPS = (128, 64, 32)  # group sizes MLX runs; an int8 row's one scale is repeated over its groups


def _array(t: torch.Tensor) -> mx.array:
    """A torch CPU tensor (possibly memory-mapped) as an MLX array, bf16 included."""
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: carry the 16-bit patterns
        return mx.array(t.contiguous().view(torch.int16).numpy()).view(mx.bfloat16)
    return mx.array(t.contiguous().numpy())


def _row_group(cols: int) -> int | None:
    return next((g for g in GROUPS if cols % g == 0), None)


def _int8_rows(q: torch.Tensor, scale: torch.Tensor) -> tuple[dict[str, mx.array], int, int]:
    """Symmetric int8 with one scale per row -> MLX 8-bit affine arrays, group size, bits."""
    rows, cols = q.shape
    group = _row_group(cols)
    unsigned = (q.numpy().astype(np.int16) + 128).astype(np.uint8)
    scales = np.repeat(scale.float().numpy()[:, None], cols // group, axis=1)
    arrays = {"weight": mx.array(unsigned.view(np.uint32)), "scales": mx.array(scales), "biases": mx.array(-128 * scales)}
    return arrays, group, 8


def _int4_groups(packed: torch.Tensor, scale: torch.Tensor) -> tuple[dict[str, mx.array], int, int]:
    """Symmetric 4-bit nibbles (low first) with fp16 scales per 32 inputs -> MLX 4-bit affine arrays."""
    unsigned = packed.numpy() ^ np.uint8(0x88)  # two's-complement nibble q -> q + 8, both nibbles
    scales = scale.float().numpy()
    arrays = {"weight": mx.array(unsigned.view(np.uint32)), "scales": mx.array(scales), "biases": mx.array(-8 * scales)}
    return arrays, INT4_GROUP, 4


def _quantised(stored: Mapping[str, torch.Tensor], key: str) -> tuple[dict[str, mx.array], int, int]:
    q, scale = stored[key], stored[key + SCALE]
    return _int4_groups(q, scale) if q.dtype == torch.uint8 else _int8_rows(q, scale)


def fits(stored: Mapping[str, torch.Tensor]) -> bool:
    """Whether MLX's groups divide every quantised row (else the folder goes the dequantising way)."""
    for key, value in stored.items():
        if key + SCALE in stored:
            cols = value.shape[1] * (2 if value.dtype == torch.uint8 else 1)
            if _row_group(cols) is None:
                return False
    return True


def load_stored_mlx_llm(qwen_config: Mapping[str, Any], stored: Mapping[str, torch.Tensor]) -> MLXSpeechLM:
    """The MLX LLM of a compressed folder's stored tensors (compress.py's layout, lm_head absent).
    The arrays are copied once out of the memory-mapped tensors, one tensor at a time."""
    args = LLMArgs.from_config(qwen_config)
    model = CosyVoice3MLX(args)  # lazy random init: never evaluated, every array replaced below
    rows = stored.get(ROW_MAP_KEY)
    if rows is not None:  # the compact text table: as many rows as the folder kept
        model.model.embed_tokens = nn.Embedding(int(stored[EMBED_KEY].shape[0]), args.hidden_size)

    layers: dict[str, tuple[int, int]] = {}  # MLX module path -> (group size, bits)
    weights: list[tuple[str, mx.array]] = []
    for key, value in stored.items():
        if key.endswith(SCALE) or key in (ROW_MAP_KEY, _LM_HEAD_KEY):
            continue
        name = mlx_key(key)
        if key + SCALE not in stored:
            weights.append((name, _array(value)))
            continue
        arrays, group, bits = _quantised(stored, key)
        path = name.removesuffix(".weight")
        layers[path] = (group, bits)
        weights += [(f"{path}.{part}", array) for part, array in arrays.items()]

    def quantise(path: str, module: nn.Module) -> bool | dict:
        if path in layers and isinstance(module, (nn.Linear, nn.Embedding)):
            group, bits = layers[path]
            return {"group_size": group, "bits": bits}
        return False

    if layers:
        nn.quantize(model, class_predicate=quantise)
    model.load_weights(weights, strict=True)
    del weights
    model.eval()
    mx.eval(model.parameters())
    lm = MLXSpeechLM(model, args, row_of_id=None if rows is None else rows.numpy().astype(np.int64))
    lm.recipe = "stored"  # the folder's own quantisation, not llm_mlx's: another sound, another id
    return lm


def table_bits(lm: MLXSpeechLM) -> dict[str, int]:
    """Bits of the three tables as they run (32 or 16 for float arrays): never under 8."""
    m = lm.model
    out = {}
    for key, module in zip(TABLE_KEYS, (m.model.embed_tokens, m.speech_embedding, m.llm_decoder)):
        out[key] = module.bits if hasattr(module, "bits") else module.weight.dtype.size * 8
    return out
