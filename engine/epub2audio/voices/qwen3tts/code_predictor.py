"""The Qwen3-TTS Code Predictor: a 5-layer Qwen3 that fills in codebooks 2..16 of one frame.

Per frame it starts from nothing (its own fresh cache, positions 0..16): the prompt is two vectors,
the Talker's last hidden state and the Talker's embedding of the frame's codebook-1 code; head 0
reads the last of them and gives codebook 2. Then code k+1 (k = 1..14) is embedded with this
module's table k-1 and head k gives codebook k+2. So 15 embeddings [2048, talker hidden] and 15
heads [hidden, 2048] (`talker.code_predictor.model.codec_embedding.N`, `...lm_head.N`). The rotary
embedding is plain 1-D RoPE. When the Talker is wider than this module (1.7B), a Linear
`small_to_mtp_projection` maps its vectors in; at 0.6B both are 1024 and there is none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .talker import CODE_PREDICTOR_PREFIX, LayerCache, RMSNorm, _int, cos_sin, decoder_layers, rope_angles


@dataclass(frozen=True)
class CodePredictorArgs:
    hidden_size: int = 1024
    intermediate_size: int = 3072
    num_hidden_layers: int = 5
    num_attention_heads: int = 16
    num_key_value_heads: int = 8
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    vocab_size: int = 2048
    num_code_groups: int = 16
    talker_hidden_size: int = 1024

    @classmethod
    def from_config(cls, cp_config: Mapping[str, Any], talker_hidden_size: int) -> CodePredictorArgs:
        c = dict(cp_config)
        if c.get("hidden_act", "silu") != "silu":
            raise ValueError(f"code predictor hidden_act {c.get('hidden_act')!r}: only 'silu' is implemented")
        if c.get("attention_bias") or c.get("use_sliding_window") or c.get("rope_scaling"):
            raise ValueError("code predictor: attention bias, sliding windows and rope scaling are not implemented")
        types = c.get("layer_types")
        if types is not None and any(t != "full_attention" for t in types):
            raise ValueError(f"code predictor layer_types {types!r}: only full attention is implemented")
        heads, hidden = _int(c, "num_attention_heads"), _int(c, "hidden_size")
        return cls(
            hidden_size=hidden,
            intermediate_size=_int(c, "intermediate_size"),
            num_hidden_layers=_int(c, "num_hidden_layers"),
            num_attention_heads=heads,
            num_key_value_heads=_int(c, "num_key_value_heads"),
            head_dim=_int(c, "head_dim", hidden // heads),
            rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
            rope_theta=float(c.get("rope_theta", 10000)),
            vocab_size=_int(c, "vocab_size"),
            num_code_groups=_int(c, "num_code_groups"),
            talker_hidden_size=talker_hidden_size,
        )


class CodePredictorModel(nn.Module):
    def __init__(self, args: CodePredictorArgs) -> None:
        super().__init__()
        self.args = args
        self.layers = decoder_layers(args, args.num_hidden_layers)
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.codec_embedding = nn.ModuleList(
            nn.Embedding(args.vocab_size, args.talker_hidden_size) for _ in range(args.num_code_groups - 1)
        )

    def forward(self, x: torch.Tensor, cache: list[LayerCache] | None = None) -> torch.Tensor:
        start = cache[0].offset if cache else 0
        positions = torch.arange(start, start + x.shape[1], device=x.device)
        cos, sin = cos_sin(rope_angles(self.args.head_dim, self.args.rope_theta, positions), x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache[i] if cache else None)
        return self.norm(x)


# Sample one code from logits [vocab] (fp32), given how many codes of this frame came before.
PickCode = Callable[[torch.Tensor], int]


class CodePredictor(nn.Module):
    def __init__(self, args: CodePredictorArgs) -> None:
        super().__init__()
        self.args = args
        self.model = CodePredictorModel(args)
        self.lm_head = nn.ModuleList(
            nn.Linear(args.hidden_size, args.vocab_size, bias=False) for _ in range(args.num_code_groups - 1)
        )
        if args.hidden_size != args.talker_hidden_size:
            self.small_to_mtp_projection = nn.Linear(args.talker_hidden_size, args.hidden_size, bias=True)
        else:
            self.small_to_mtp_projection = nn.Identity()

    @staticmethod
    def own_keys(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        n = len(CODE_PREDICTOR_PREFIX)
        return {k[n:]: v for k, v in state_dict.items() if k.startswith(CODE_PREDICTOR_PREFIX)}

    @classmethod
    def from_state_dict(cls, args: CodePredictorArgs, state_dict, dtype=torch.float32) -> CodePredictor:
        from .shells import build

        return build(cls, args, cls.own_keys(state_dict), dtype)

    def embed_code(self, group: int, code: int) -> torch.Tensor:
        """Codebook `group` (1..15, 0-based after codebook 1) -> its input vector [talker hidden]."""
        return self.model.codec_embedding[group - 1].weight[code]

    def forward(self, talker_hidden: torch.Tensor, first_code_embed: torch.Tensor, codes: list[int]) -> torch.Tensor:
        """Teacher-forced logits of one frame: [15, vocab] fp32 for codebooks 2..16 given the frame's
        codebooks 2..15 in `codes` (full recompute, no cache: the tests' reference)."""
        parts = [talker_hidden.view(1, -1), first_code_embed.view(1, -1)]
        parts += [self.embed_code(g, c).view(1, -1) for g, c in enumerate(codes[: self.args.num_code_groups - 2], 1)]
        hidden = self.model(self.small_to_mtp_projection(torch.cat(parts)[None]))[0]
        return torch.stack([self.lm_head[g](hidden[g + 1]) for g in range(self.args.num_code_groups - 1)]).float()

    @torch.inference_mode()
    def predict(self, talker_hidden: torch.Tensor, first_code_embed: torch.Tensor, pick: PickCode) -> list[int]:
        """Codebooks 2..16 of one frame, drawn in order by `pick` from each head's logits."""
        cache = [LayerCache(step=32) for _ in self.model.layers]
        x = torch.stack([talker_hidden.view(-1), first_code_embed.view(-1)])[None]
        codes: list[int] = []
        for g in range(self.args.num_code_groups - 1):
            hidden = self.model(self.small_to_mtp_projection(x), cache)[0, -1]
            code = pick(self.lm_head[g](hidden).float())
            codes.append(code)
            if g + 1 < self.args.num_code_groups - 1:
                x = self.embed_code(g + 1, code).view(1, 1, -1)
        return codes
