"""Random state dicts in the official flow.pt / hift.pt layouts, for tests and benchmarks.

The keys and shapes come from our modules built on the meta device (they equal upstream's; see
test_*_full_size_keys_match_reference), so these work for tiny and full-size dims alike. Values are
drawn from a private generator (the global RNG is not touched) with scales that keep activations in
a sane range: a random-weight flow gives finite mels, and a random-weight HiFT predicts f0 mostly in
the voiced range (so both source branches are exercised) with moderate log-magnitudes.
"""

from __future__ import annotations

import math
from functools import partial

import torch

from epub2audio.voices.cosyvoice3.flow import Flow, FlowArgs
from epub2audio.voices.cosyvoice3.hift import HiFT, HiFTArgs


def tiny_flow_args() -> FlowArgs:
    """Test-size flow. The speech vocabulary (6561), mel bins (80, the fixed noise's width) and
    x-vector size (192) stay real; conv_pos groups stay 16 and RoPE still covers head 0 only."""
    return FlowArgs(dim=64, depth=2, heads=4, dim_head=16, ff_mult=2, pre_lookahead_channels=32)


def tiny_hift_args() -> HiFTArgs:
    """Test-size HiFT: 32 base channels (f0 predictor too); rates, kernels and iSTFT stay real, so
    480 samples per mel frame and the fixed 9-harmonic noise buffer still apply."""
    return HiFTArgs(base_channels=32, f0_cond_channels=32)


def _shapes(module_factory) -> dict[str, torch.Size]:
    with torch.device("meta"):
        module = module_factory()
    return {k: v.shape for k, v in module.state_dict().items()}


def _fan_in(shape: torch.Size) -> int:
    return max(1, math.prod(shape[1:]))


def random_flow_state_dict(args: FlowArgs, seed: int = 0, device: str = "cpu") -> dict[str, torch.Tensor]:
    """float32 state dict with flow.pt's keys for ``args`` (330 keys at full size), drawn on
    ``device`` (another device draws other numbers; bench/gpu_check.py draws on the GPU)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    randn = partial(torch.randn, generator=gen, device=device)
    sd: dict[str, torch.Tensor] = {}
    for key, shape in _shapes(lambda: Flow(args)).items():
        if key.endswith("rotary_embed.inv_freq"):  # deterministic, stored in flow.pt as is
            dim = 2 * shape[0]
            sd[key] = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device).float() / dim))
        elif key == "input_embedding.weight":
            sd[key] = randn(shape)
        elif key.endswith(".bias"):
            sd[key] = 0.02 * randn(shape)
        else:  # Linear / Conv1d weights, ~unit gain
            sd[key] = randn(shape) / math.sqrt(_fan_in(shape))
    return sd


def random_hift_state_dict(
    args: HiFTArgs, seed: int = 0, weight_norm_form: str = "parametrizations", prefix: str = "", device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """float32 state dict with hift.pt's keys for ``args`` (328 keys at full size).

    weight_norm_form: "parametrizations" (``<m>.parametrizations.weight.original0/1``, the form of
    the released file) or "legacy" (``<m>.weight_g`` / ``<m>.weight_v``). ``prefix`` is prepended to
    every key (e.g. "generator.", as in training checkpoints).
    """
    if weight_norm_form not in ("parametrizations", "legacy"):
        raise ValueError(f"weight_norm_form must be 'parametrizations' or 'legacy', got {weight_norm_form!r}")
    gen = torch.Generator(device=device).manual_seed(seed)
    randn = partial(torch.randn, generator=gen, device=device)
    rand = partial(torch.rand, generator=gen, device=device)
    shapes = _shapes(lambda: HiFT(args))
    sd: dict[str, torch.Tensor] = {}
    for key, shape in shapes.items():
        if key.endswith(".original0"):  # g: per-output-channel norm of the folded weight
            value = 0.4 + 0.4 * rand(shape)
        elif key.endswith(".original1"):  # v: direction only
            value = randn(shape)
        elif key.endswith(".alpha"):  # Snake frequencies, positive
            value = 0.5 + rand(shape)
        elif key == "f0_predictor.classifier.weight":  # f0 = |w.h + b| ~ 120 +- 60 Hz
            value = 60.0 * randn(shape) / math.sqrt(shape[1])
        elif key == "f0_predictor.classifier.bias":
            value = torch.full(shape, 120.0, device=device)
        elif key.endswith(".bias"):
            value = 0.02 * randn(shape)
        else:  # plain weights: source_downs, m_source.l_linear
            value = randn(shape) / math.sqrt(_fan_in(shape))
        sd[key] = value
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if weight_norm_form == "legacy":
            key = key.replace(".parametrizations.weight.original0", ".weight_g")
            key = key.replace(".parametrizations.weight.original1", ".weight_v")
        out[prefix + key] = value
    return out


# --- LLM (Qwen2 backbone + speech head) ---------------------------------------------------------


def tiny_qwen2_config() -> dict:
    """A CosyVoice-BlankEN/config.json in the official layout, shrunk to test size.

    The speech vocabulary stays full size (6761, fixed by the checkpoint, not the config), so the
    special ids 6561.. mean what they mean in the real model.
    """
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_act": "silu",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "max_window_layers": 2,
        "sliding_window": 4096,
        "use_sliding_window": False,
        "tie_word_embeddings": True,
        "bos_token_id": 500,
        "eos_token_id": 500,
        "torch_dtype": "float32",
    }


def random_llm_state_dict(args, seed: int, device: str = "cpu") -> dict:
    """Random fp32 tensors under llm.pt's keys and shapes for `args` (an llm.LLMArgs).

    Scales keep activations O(1) at any size and make the speech logits about as peaked as a
    trained model's (std ~3), so the sampler sees realistic distributions. As in llm.pt,
    `llm.model.lm_head.weight` is the embedding tensor itself.
    """
    g = torch.Generator(device=device).manual_seed(seed)
    randn = partial(torch.randn, generator=g, device=device)
    out = {}
    for key, shape in args.expected_shapes().items():
        if key.endswith("lm_head.weight"):
            continue
        if key.endswith("layernorm.weight") or key.endswith("norm.weight"):
            t = 1.0 + 0.1 * randn(shape)
        elif key.endswith(".bias"):
            t = 0.1 * randn(shape)
        elif key == "llm_decoder.weight":
            t = randn(shape) * (3.0 / shape[1] ** 0.5)
        elif key.endswith("embed_tokens.weight") or key == "speech_embedding.weight":
            t = randn(shape)
        else:
            t = randn(shape) * (1.0 / shape[1] ** 0.5)
        out[key] = t
    out["llm.model.lm_head.weight"] = out["llm.model.model.embed_tokens.weight"]
    return {k: out[k] for k in args.expected_shapes()}
