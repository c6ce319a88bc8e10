"""The Qwen3-TTS Code Predictor on MLX: mlx-lm's Qwen3 blocks (plain RoPE), our 15 tables and heads.

    model.layers.N.*           mlx_lm.models.qwen3.TransformerBlock, with mlx-lm's default RoPE
    model.norm                 mlx.nn.RMSNorm
    model.codec_embedding.G    ours: codebook G+2's input table [2048, talker hidden]
    lm_head.G                  ours: codebook G+2's head [hidden -> 2048]
    small_to_mtp_projection    talker hidden -> hidden (a Linear only when the two differ)

Names are the official ones under `talker.code_predictor.` (code_predictor.py's), loaded strictly.
One frame runs on a fresh mlx-lm KV cache: the prefill is [talker hidden, codebook-1 embedding],
then one step per drawn code; positions restart at 0 every frame, as upstream's do. The seam is
code_predictor.py's: `predict(talker_hidden, first_code_embed, pick)` hands each head's logits to
`pick` as a CPU fp32 torch vector (the host sampler with the segment's torch.Generator draws; the
MLX graph draws nothing), and `embed_code` returns a torch row for the host-side frame sum.
"""

from __future__ import annotations

from collections.abc import Mapping

import mlx.core as mx
import mlx.nn as nn
import torch
from mlx_lm.models import qwen3
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import KVCache

from .code_predictor import CodePredictor as TorchCodePredictor
from .code_predictor import CodePredictorArgs, PickCode
from .talker_mlx import qwen3_block_args, to_mlx, to_torch

FRAME_CACHE_STEP = 16  # a frame is at most 16 positions; mlx-lm's default 256 would zero 16x more


class CodePredictorModel(nn.Module):
    def __init__(self, args: CodePredictorArgs) -> None:
        super().__init__()
        block_args = qwen3_block_args(args, max_positions=65536)
        self.layers = [qwen3.TransformerBlock(block_args) for _ in range(args.num_hidden_layers)]
        self.norm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.codec_embedding = [nn.Embedding(args.vocab_size, args.talker_hidden_size) for _ in range(args.num_code_groups - 1)]

    def __call__(self, x: mx.array, cache: list[KVCache] | None = None) -> mx.array:
        mask = create_attention_mask(x, cache[0] if cache else None)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, cache[i] if cache else None)
        return self.norm(x)


class CodePredictor(nn.Module):
    backend = "mlx"

    def __init__(self, args: CodePredictorArgs) -> None:
        super().__init__()
        self.args = args
        self.model = CodePredictorModel(args)
        self.lm_head = [nn.Linear(args.hidden_size, args.vocab_size, bias=False) for _ in range(args.num_code_groups - 1)]
        if args.hidden_size != args.talker_hidden_size:
            self.small_to_mtp_projection = nn.Linear(args.talker_hidden_size, args.hidden_size, bias=True)
        else:
            self.small_to_mtp_projection = nn.Identity()

    @classmethod
    def from_state_dict(cls, args: CodePredictorArgs, state_dict: Mapping[str, torch.Tensor]) -> CodePredictor:
        model = cls(args)
        weights = [(k, to_mlx(v)) for k, v in TorchCodePredictor.own_keys(state_dict).items()]
        model.load_weights(weights, strict=True)
        model.eval()
        mx.eval(model.parameters())
        return model

    def embed_code(self, group: int, code: int) -> torch.Tensor:
        """Codebook `group` (1..15, 0-based after codebook 1) -> its input vector [talker hidden] (torch)."""
        return to_torch(self.model.codec_embedding[group - 1].weight[int(code)])

    def _inputs(self, talker_hidden, first_code_embed) -> mx.array:
        parts = [v if isinstance(v, mx.array) else to_mlx(v) for v in (talker_hidden, first_code_embed)]
        return mx.stack([p.reshape(-1) for p in parts])[None]

    def __call__(self, talker_hidden, first_code_embed, codes: list[int]) -> torch.Tensor:
        """Teacher-forced logits of one frame: [15, vocab] fp32 torch for codebooks 2..16 given the
        frame's codebooks 2..15 in `codes` (full recompute, no cache: the tests' reference)."""
        n = self.args.num_code_groups
        parts = [self._inputs(talker_hidden, first_code_embed)[0]]
        parts += [self.model.codec_embedding[g - 1].weight[int(c)][None] for g, c in enumerate(codes[: n - 2], 1)]
        hidden = self.model(self.small_to_mtp_projection(mx.concatenate(parts)[None]))[0]
        return to_torch(mx.stack([self.lm_head[g](hidden[g + 1]) for g in range(n - 1)]))

    def predict(self, talker_hidden, first_code_embed, pick: PickCode) -> list[int]:
        """Codebooks 2..16 of one frame, drawn in order by `pick` from each head's logits."""
        cache = [KVCache() for _ in self.model.layers]
        for c in cache:
            c.step = FRAME_CACHE_STEP
        x = self._inputs(talker_hidden, first_code_embed)
        codes: list[int] = []
        for g in range(self.args.num_code_groups - 1):
            hidden = self.model(self.small_to_mtp_projection(x), cache)[0, -1]
            code = pick(to_torch(self.lm_head[g](hidden)))
            codes.append(code)
            if g + 1 < self.args.num_code_groups - 1:
                x = self.model.codec_embedding[g].weight[code].reshape(1, 1, -1)
        return codes
