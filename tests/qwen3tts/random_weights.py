"""A tiny random-weight Qwen3-TTS-12Hz CustomVoice folder in exactly the official layout, and a
Base one (write_tiny_base_model: speaker_encoder.* in model.safetensors, encoder.* beside decoder.*
in speech_tokenizer/model.safetensors, tts_model_type "base", no speakers or dialects).

    config.json generation_config.json model.safetensors (bf16)
    vocab.json merges.txt tokenizer_config.json   (a toy byte-level BPE: a few hundred real merges, the
                                                   rest of the 151643 ordinary ids unreachable fillers, then
                                                   Qwen3's and Qwen3-TTS's added tokens at their real ids)
    speech_tokenizer/{config.json, model.safetensors (fp32, decoder.* only)}

Key names and shapes are our modules' (built on the meta device); bench/upstream_qwen3.py loads the
same files into upstream's own classes with strict=True, which proves they are upstream's. What
stays real size: the text vocabulary (151936, so the real special ids 151643.. are used), the codec
vocabulary (3072, with the real codec special, speaker and language ids), 16 codebooks of 2048, the
M-RoPE interleaving (section [4, 2, 2] on 16-wide heads) and the decoder's rates (1920 samples per
frame). Everything else is a few dozen wide. The config's fields are the official file's names.
"""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import torch
from safetensors.torch import save_file

from epub2audio.voices.qwen3tts.checkpoint import expected_shapes
from epub2audio.voices.qwen3tts.code_predictor import CodePredictor, CodePredictorArgs
from epub2audio.voices.qwen3tts.decoder import Decoder, DecoderArgs
from epub2audio.voices.qwen3tts.talker import Talker, TalkerArgs

from tests.cosyvoice3.fixtures import _bytes_to_unicode, _train_merges

SPEAKERS = {"serena": 3066, "vivian": 3065, "uncle_fu": 3010, "ryan": 3061, "aiden": 2861,
            "ono_anna": 2873, "sohee": 2864, "eric": 2875, "dylan": 2878}  # fmt: skip
DIALECTS = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}
LANGUAGES = {"chinese": 2055, "english": 2050, "german": 2053, "italian": 2070, "portuguese": 2071,
             "spanish": 2054, "japanese": 2058, "korean": 2064, "french": 2061, "russian": 2069,
             "beijing_dialect": 2074, "sichuan_dialect": 2062}  # fmt: skip
# Qwen3's added tokens from 151643 on, then Qwen3-TTS's: contiguous, as in the official
# tokenizer_config.json, because a tokenizer gives added tokens that are not in vocab.json the ids
# after it in the order listed (a gap would shift every later id).
QWEN3_ADDED = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
               "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
               "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
               "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",
               "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
               "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
               "<tts_text_bos_single>", "<|audio_pad|>")  # fmt: skip
ORDINARY_TOKENS = 151643  # Qwen2/Qwen3 BPE: ids 0..151642 are vocab.json's
SPECIAL_TOKENS = dict(enumerate(QWEN3_ADDED, ORDINARY_TOKENS))
ASSISTANT = "assistant"  # one token in Qwen's vocabulary (77091); upstream slices the role as 3 tokens

_CORPUS = (
    "The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore. "
    "Once upon a time there were three little pigs, and they went out into the world to seek "
    "their fortune. It was the best of times, it was the worst of times. Hello world."
)


def tiny_config() -> dict:
    heads, head_dim = 4, 16
    talker = {
        "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": heads,
        "num_key_value_heads": 2, "head_dim": head_dim, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "rope_theta": 1000000, "max_position_embeddings": 32768,
        "rope_scaling": {"interleaved": True, "mrope_section": [4, 2, 2], "rope_type": "default"},
        "attention_bias": False, "vocab_size": 3072, "text_vocab_size": 151936, "text_hidden_size": 16,
        "num_code_groups": 16, "position_id_per_seconds": 13,
        "codec_pad_id": 2148, "codec_bos_id": 2149, "codec_eos_token_id": 2150, "codec_think_id": 2154,
        "codec_nothink_id": 2155, "codec_think_bos_id": 2156, "codec_think_eos_id": 2157,
        "codec_language_id": LANGUAGES, "spk_id": SPEAKERS,
        "spk_is_dialect": {name: DIALECTS.get(name, False) for name in SPEAKERS},
        "code_predictor_config": {
            "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": heads,
            "num_key_value_heads": 2, "head_dim": head_dim, "hidden_act": "silu", "rms_norm_eps": 1e-6,
            "rope_theta": 1000000, "rope_scaling": None, "max_position_embeddings": 65536,
            "vocab_size": 2048, "num_code_groups": 16, "layer_types": ["full_attention"] * 2,
            "attention_bias": False, "use_sliding_window": False,
        },
    }  # fmt: skip
    return {
        "architectures": ["Qwen3TTSForConditionalGeneration"], "model_type": "qwen3_tts",
        "tokenizer_type": "qwen3_tts_tokenizer_12hz", "tts_model_size": "0b6", "tts_model_type": "custom_voice",
        "im_start_token_id": 151644, "im_end_token_id": 151645, "tts_pad_token_id": 151671,
        "tts_bos_token_id": 151672, "tts_eos_token_id": 151673, "assistant_token_id": 77091,
        "speaker_encoder_config": {"enc_dim": 32, "sample_rate": 24000},
        "talker_config": talker,
    }  # fmt: skip


def tiny_speech_config() -> dict:
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"], "model_type": "qwen3_tts_tokenizer_12hz",
        "encoder_valid_num_quantizers": 16, "input_sample_rate": 24000, "output_sample_rate": 24000,
        "decode_upsample_rate": 1920, "encode_downsample_rate": 1920,
        "decoder_config": {
            "attention_bias": False, "latent_dim": 32, "codebook_dim": 16, "codebook_size": 2048,
            "decoder_dim": 32, "hidden_act": "silu", "hidden_size": 16, "intermediate_size": 32,
            "layer_scale_initial_scale": 0.01, "max_position_embeddings": 8000, "head_dim": 8,
            "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 4, "num_quantizers": 16,
            "num_semantic_quantizers": 1, "rms_norm_eps": 1e-5, "rope_theta": 10000, "semantic_codebook_size": 4096,
            "sliding_window": 72, "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2],
            "vector_quantization_hidden_dimension": 512,
        },
    }  # fmt: skip


GENERATION_CONFIG = {
    "do_sample": True, "repetition_penalty": 1.05, "temperature": 0.9, "top_p": 1.0, "top_k": 50,
    "subtalker_dosample": True, "subtalker_temperature": 0.9, "subtalker_top_p": 1.0, "subtalker_top_k": 50,
    "max_new_tokens": 8192,
}  # fmt: skip


def all_args(config: dict | None = None, speech_config: dict | None = None):
    from epub2audio.voices.qwen3tts.checkpoint import read_args

    return read_args(config or tiny_config(), speech_config or tiny_speech_config())


def _fill(shapes: dict, gen: torch.Generator, logit_scale: float = 3.0) -> dict[str, torch.Tensor]:
    randn = partial(torch.randn, generator=gen)
    rand = partial(torch.rand, generator=gen)
    out = {}
    for key, shape in shapes.items():
        if key.endswith("norm.weight") or key.endswith("layernorm.weight"):
            t = 1.0 + 0.1 * randn(shape)
        elif key.endswith(".bias"):
            t = 0.05 * randn(shape)
        elif key.endswith("embedding.weight") or ".codec_embedding." in key:
            t = randn(shape)
        elif key.endswith("codec_head.weight") or ".lm_head." in key:
            t = randn(shape) * (logit_scale / math.sqrt(shape[1]))
        elif key.endswith("cluster_usage"):
            t = 0.5 + rand(shape)
        elif key.endswith("embedding_sum"):
            t = randn(shape)
        elif key.endswith(".alpha") or key.endswith(".beta"):
            t = 0.2 * randn(shape)
        elif key.endswith("layer_scale.scale") or key.endswith("gamma"):
            t = 0.1 + 0.1 * rand(shape)
        else:  # linear / conv weights, ~unit gain
            t = randn(shape) / math.sqrt(max(1, math.prod(shape[1:])))
        out[key] = t.contiguous()
    return out


def random_state_dicts(seed: int = 0, config: dict | None = None, speech_config: dict | None = None):
    """(model.safetensors dict, speech_tokenizer/model.safetensors dict), fp32, official keys."""
    talker, cp, dec = all_args(config, speech_config)
    gen = torch.Generator().manual_seed(seed)
    main = {"talker." + k: v for k, v in _fill(expected_shapes(Talker, talker), gen).items()}
    main.update({"talker.code_predictor." + k: v for k, v in _fill(expected_shapes(CodePredictor, cp), gen).items()})
    speech = {"decoder." + k: v for k, v in _fill(expected_shapes(Decoder, dec), gen).items()}
    return main, speech


def write_tokenizer(d: Path, corpus: str = _CORPUS, n_merges: int = 150) -> None:
    b2u = _bytes_to_unicode()
    vocab: dict[str, int] = {}
    for b in range(256):
        vocab.setdefault(b2u[b], len(vocab))
    merges = _train_merges(corpus, n_merges)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    # "assistant" as one token: a chain of merges no earlier merge can pre-empt (all its pieces
    # are built left to right from "a"), placed first so they win
    chain, piece = [], ASSISTANT[0]
    for ch in ASSISTANT[1:]:
        chain.append((piece, ch))
        piece += ch
    merges = chain + [m for m in merges if m not in chain]
    for a, b in chain:
        vocab.setdefault(a + b, len(vocab))
    # the rest of the ordinary ids: tokens no merge builds, so never produced, but the added tokens
    # then get their real ids (151643 on) and the text embedding's real rows. Each is an Ethiopic
    # letter and a number, byte-level encoded: a script no Qwen3-TTS language has, so a compressed
    # vocabulary (vocab.py) drops them as it drops the real vocabulary's other scripts.
    for i in range(len(vocab), ORDINARY_TOKENS):
        vocab["".join(b2u[b] for b in f"\u1200{i}".encode("utf-8"))] = i
    (d / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (d / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges), encoding="utf-8")
    added = {
        str(i): {"content": tok, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                 "special": True}
        for i, tok in SPECIAL_TOKENS.items()
    }  # fmt: skip
    config = {
        "add_prefix_space": False, "added_tokens_decoder": added, "bos_token": None,
        "additional_special_tokens": [t for t in SPECIAL_TOKENS.values() if t != "<|endoftext|>"],
        "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
        "model_max_length": 131072, "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }  # fmt: skip
    (d / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")


STEADY_DIM = 0  # the hidden dimension that codec_bias steers through


def bias_codec(main: dict[str, torch.Tensor], codec_bias: dict[int, float], steady: float = 8.0) -> None:
    """Make the Talker favour (or shun) codec ids at every step, whatever it has read: every text
    vector carries `steady` in one hidden dimension (text_projection's output bias), so the final
    hidden state always has a large positive component there, and the codec head's column for that
    dimension adds strength x it to each id's logit. The Talker's inputs at every step hold a text
    vector (the text, then tts_eos, then tts_pad), so this holds to the end."""
    main["talker.text_projection.linear_fc2.bias"][STEADY_DIM] = steady
    for codec_id, strength in codec_bias.items():
        main["talker.codec_head.weight"][codec_id, STEADY_DIM] = strength


def full_config() -> dict:
    """The 0.6B CustomVoice config.json fields (shared/reference/qwen3tts.md section 2): benchmarks only."""
    cfg = tiny_config()
    qwen3 = {"hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16, "num_key_value_heads": 8,
             "head_dim": 128}  # fmt: skip
    cfg["talker_config"].update(qwen3, num_hidden_layers=28, text_hidden_size=2048,
                                rope_scaling={"interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"})
    cfg["talker_config"]["code_predictor_config"].update(qwen3, num_hidden_layers=5, layer_types=["full_attention"] * 5)
    cfg["speaker_encoder_config"] = {"enc_dim": 1024, "sample_rate": 24000}
    return cfg


def full_speech_config() -> dict:
    """The 12 Hz tokenizer's decoder_config at full size (shared/reference/qwen3tts.md section 4)."""
    cfg = tiny_speech_config()
    cfg["decoder_config"].update(latent_dim=1024, codebook_dim=512, decoder_dim=1536, hidden_size=512,
                                 intermediate_size=1024, head_dim=64, num_attention_heads=16, num_hidden_layers=8,
                                 num_key_value_heads=16)  # fmt: skip
    return cfg


def write_model(d: Path, seed: int = 0, config: dict | None = None, speech_config: dict | None = None,
                corpus: str = _CORPUS, n_merges: int = 150, *, codec_bias: dict[int, float] | None = None,
                steady: float = 8.0, max_new_tokens: int | None = None) -> Path:
    """codec_bias: {codec id: strength} (bias_codec), e.g. a positive eos strength for a folder that
    stops after a few frames, or one code strongly preferred and eos shunned for one that loops.
    max_new_tokens: generation_config's (T_config, the frame bound of the length cap)."""
    d = Path(d)
    config, speech_config = config or tiny_config(), speech_config or tiny_speech_config()
    (d / "speech_tokenizer").mkdir(parents=True, exist_ok=True)
    main, speech = random_state_dicts(seed, config, speech_config)
    if codec_bias:
        bias_codec(main, codec_bias, steady)
    generation = {**GENERATION_CONFIG, **({"max_new_tokens": max_new_tokens} if max_new_tokens else {})}
    (d / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (d / "generation_config.json").write_text(json.dumps(generation, indent=2), encoding="utf-8")
    main = {k: v.to(torch.bfloat16) for k, v in main.items()}
    save_file(main, str(d / "model.safetensors"))
    del main
    (d / "speech_tokenizer" / "config.json").write_text(json.dumps(speech_config, indent=2), encoding="utf-8")
    save_file(speech, str(d / "speech_tokenizer" / "model.safetensors"))
    write_tokenizer(d, corpus, n_merges)
    return d


# ---------------------------------------------------------------------------------------------
# the Base folder (cloning): the same Talker, Code Predictor and decoder tensors as the CustomVoice
# folder of the same seed, then the speaker encoder's and the speech encoder's


def tiny_base_config() -> dict:
    c = tiny_config()
    c["tts_model_type"] = "base"
    t = c["talker_config"]
    t["spk_id"], t["spk_is_dialect"] = {}, {}
    t["codec_language_id"] = {k: v for k, v in LANGUAGES.items() if "dialect" not in k}
    # real 128 mels in, the Talker's width out; every other channel count small
    c["speaker_encoder_config"] = {
        "mel_dim": 128, "enc_dim": t["hidden_size"], "enc_channels": [16, 16, 16, 16, 48],
        "enc_kernel_sizes": [5, 3, 3, 3, 1], "enc_dilations": [1, 2, 3, 4, 1], "enc_attention_channels": 8,
        "enc_res2net_scale": 8, "enc_se_channels": 8, "sample_rate": 24000,
    }  # fmt: skip
    return c


def tiny_base_speech_config() -> dict:
    c = tiny_speech_config()
    # a MimiConfig with the real rates (960x SEANet, 2x downsample, 12.5 Hz), 32 codebooks of 2048,
    # 2 transformer layers; widths small
    c["encoder_config"] = {
        "_frame_rate": 12.5, "attention_bias": False, "attention_dropout": 0.0, "audio_channels": 1,
        "codebook_dim": 8, "codebook_size": 2048, "compress": 2, "dilation_growth_rate": 2, "head_dim": 8,
        "hidden_act": "gelu", "hidden_size": 16, "intermediate_size": 32, "kernel_size": 7,
        "last_kernel_size": 3, "layer_scale_initial_scale": 0.01, "max_position_embeddings": 8000,
        "norm_eps": 1e-5, "num_attention_heads": 2, "num_filters": 4, "num_hidden_layers": 2,
        "num_key_value_heads": 2, "num_quantizers": 32, "num_residual_layers": 1, "num_semantic_quantizers": 1,
        "pad_mode": "constant", "residual_kernel_size": 3, "rope_theta": 10000.0, "sampling_rate": 24000,
        "sliding_window": 250, "trim_right_ratio": 1.0, "upsample_groups": 16, "upsampling_ratios": [8, 6, 5, 4],
        "use_cache": False, "use_causal_conv": True, "use_conv_shortcut": False, "use_streaming": False,
        "vector_quantization_hidden_dimension": 8,
    }  # fmt: skip
    return c


def random_base_state_dicts(seed: int = 0, config: dict | None = None, speech_config: dict | None = None):
    """(model.safetensors dict, speech_tokenizer/model.safetensors dict) of a Base folder, fp32;
    the tiny configs unless given (full_base_config() / full_base_speech_config() for 0.6B)."""
    from epub2audio.voices.qwen3tts.speaker_encoder import SpeakerEncoder, SpeakerEncoderArgs
    from epub2audio.voices.qwen3tts.tokenizer_encoder import Encoder, EncoderArgs

    config, speech_config = config or tiny_base_config(), speech_config or tiny_base_speech_config()
    talker, cp, dec = all_args(config, speech_config)
    gen = torch.Generator().manual_seed(seed)
    main = {"talker." + k: v for k, v in _fill(expected_shapes(Talker, talker), gen).items()}
    main.update({"talker.code_predictor." + k: v for k, v in _fill(expected_shapes(CodePredictor, cp), gen).items()})
    speech = {"decoder." + k: v for k, v in _fill(expected_shapes(Decoder, dec), gen).items()}
    spk_args = SpeakerEncoderArgs.from_config(config["speaker_encoder_config"])
    main.update({"speaker_encoder." + k: v for k, v in _fill(expected_shapes(SpeakerEncoder, spk_args), gen).items()})
    enc_args = EncoderArgs.from_config(speech_config["encoder_config"], speech_config["encoder_valid_num_quantizers"])
    enc = _fill(expected_shapes(Encoder, enc_args), gen)
    for k in enc:
        if k.endswith(".initialized"):
            enc[k] = torch.ones(1)  # Mimi's "k-means done" flag, 1 in a trained file
    speech.update({"encoder." + k: v for k, v in enc.items()})
    return main, speech


def write_base_model(d: Path, seed: int = 0, config: dict | None = None, speech_config: dict | None = None, *,
                     codec_bias: dict[int, float] | None = None) -> Path:
    """A Base folder (the tiny one unless configs are given). codec_bias: as write_model's."""
    d = Path(d)
    config, speech_config = config or tiny_base_config(), speech_config or tiny_base_speech_config()
    (d / "speech_tokenizer").mkdir(parents=True, exist_ok=True)
    main, speech = random_base_state_dicts(seed, config, speech_config)
    if codec_bias:
        bias_codec(main, codec_bias)
    (d / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (d / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2), encoding="utf-8")
    main = {k: v.to(torch.bfloat16) for k, v in main.items()}  # the file's dtype (the fp32 dict freed first)
    save_file(main, str(d / "model.safetensors"))
    del main
    (d / "speech_tokenizer" / "config.json").write_text(json.dumps(speech_config, indent=2), encoding="utf-8")
    save_file(speech, str(d / "speech_tokenizer" / "model.safetensors"))
    write_tokenizer(d)
    return d


def write_tiny_base_model(d: Path, seed: int = 0, *, codec_bias: dict[int, float] | None = None) -> Path:
    """codec_bias: as write_model's (e.g. eos favoured, for a Base folder whose clones stop)."""
    return write_base_model(d, seed, codec_bias=codec_bias)


def full_base_config() -> dict:
    """The 0.6B Base config.json fields (shared/reference/qwen3tts.md section 2): the CustomVoice
    talker without speakers or dialects, and `speaker_encoder_config` {enc_dim 1024, sample_rate}
    with every other speaker-encoder field left to the class defaults, as the official file does.
    Benchmarks only."""
    c = full_config()
    c["tts_model_type"] = "base"
    t = c["talker_config"]
    t["spk_id"], t["spk_is_dialect"] = {}, {}
    t["codec_language_id"] = {k: v for k, v in LANGUAGES.items() if "dialect" not in k}
    c["speaker_encoder_config"] = {"enc_dim": 1024, "sample_rate": 24000}
    return c


def full_base_speech_config() -> dict:
    """full_speech_config() plus the 12 Hz tokenizer's encoder at full size (a MimiConfig;
    shared/reference/qwen3tts.md section 4), for cloning. Benchmarks only."""
    c = full_speech_config()
    c["encoder_config"] = {**tiny_base_speech_config()["encoder_config"], **{
        "codebook_dim": 256, "head_dim": 64, "hidden_size": 512, "intermediate_size": 2048, "num_attention_heads": 8,
        "num_filters": 64, "num_hidden_layers": 8, "num_key_value_heads": 8, "upsample_groups": 512,
        "vector_quantization_hidden_dimension": 256}}  # fmt: skip
    return c


def write_tiny_model(d: Path, seed: int = 0, corpus: str = _CORPUS, n_merges: int = 150, **bias) -> Path:
    """bias: write_model's codec_bias, steady, max_new_tokens."""
    return write_model(d, seed, corpus=corpus, n_merges=n_merges, **bias)


def reference_audio(seconds: float = 2.0, seed: int = 1, rate: int = 24000):
    """A speech-like test clip: a gliding harmonic tone under a syllable-rate envelope plus a little
    noise, on the 16-bit grid (what a PCM WAV holds; float32, peak about 0.2), deterministic."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(int(seconds * rate), dtype=torch.float64) / rate
    f0 = 120 + 30 * torch.sin(2 * math.pi * 0.7 * t)
    phase = 2 * math.pi * torch.cumsum(f0, 0) / rate
    voice = sum(torch.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.5 * (1 + torch.sin(2 * math.pi * 4 * t)) ** 2 / 4
    x = 0.4 * envelope * voice / 2 + 0.01 * torch.randn(t.shape[0], generator=g, dtype=torch.float64)
    return (torch.round(x * 32767) / 32767).float().numpy()
