"""A tiny random-weight CosyVoice3 model directory in exactly the official layout.

    cosyvoice3.yaml  llm.pt  flow.pt  hift.pt  campplus.onnx  speech_tokenizer_v3.onnx
    CosyVoice-BlankEN/{config.json, vocab.json, merges.txt, tokenizer_config.json,
                       generation_config.json, model.safetensors (garbage: must never be read)}
    config.json ({})  configuration.json

Weights are random (tests/cosyvoice3/random_weights.py) with the official key names and small
dimensions; the YAML is the upstream recipe with those dimensions filled in; the tokenizer is a
real byte-level BPE (Qwen2 pre-tokenizer) with a small vocabulary; the two ONNX models have the
real input/output names and shapes and compute a cheap deterministic function of their input.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from . import random_weights as rw

BLANK_EN = "CosyVoice-BlankEN"
TINY_TEXT_VOCAB = 1024  # >= the tiny tokenizer's length (base BPE + 3 Qwen2 specials + 277 CosyVoice3 specials)
N_MERGES = 200
GARBAGE_SAFETENSORS = b"NOT A SAFETENSORS FILE: the BlankEN weights must never be read\n" * 64

_CORPUS = (
    "The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore. "
    "Once upon a time there were three little pigs, and they went out into the world to seek "
    "their fortune. You are a helpful assistant. It was the best of times, it was the worst of "
    "times. Hello world, this is a test of the text to speech system; please read it aloud."
)


# ---------------------------------------------------------------------------------------------
# Tokenizer


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2 / Qwen2 byte-level alphabet: every byte maps to a printable character."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = keep[:]
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, map(chr, chars)))


def _train_merges(corpus: str, n_merges: int) -> list[tuple[str, str]]:
    """A deterministic toy BPE training run over whitespace-prefixed words."""
    b2u = _bytes_to_unicode()
    words: dict[tuple[str, ...], int] = {}
    for i, w in enumerate(corpus.split(" ")):
        piece = (" " if i else "") + w
        sym = tuple(b2u[b] for b in piece.encode("utf-8"))
        words[sym] = words.get(sym, 0) + 1
    merges: list[tuple[str, str]] = []
    for _ in range(n_merges):
        pairs: dict[tuple[str, str], int] = {}
        for sym, c in words.items():
            for a, b in zip(sym, sym[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        new_words: dict[tuple[str, ...], int] = {}
        for sym, c in words.items():
            out, i = [], 0
            while i < len(sym):
                if i + 1 < len(sym) and (sym[i], sym[i + 1]) == best:
                    out.append(sym[i] + sym[i + 1])
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + c
        words = new_words
    return merges


def write_tiny_tokenizer(blank_en: Path) -> int:
    """vocab.json / merges.txt / tokenizer_config.json shaped like Qwen2's; returns the base vocab size."""
    b2u = _bytes_to_unicode()
    vocab: dict[str, int] = {}
    for b in range(256):
        vocab.setdefault(b2u[b], len(vocab))
    merges = _train_merges(_CORPUS, N_MERGES)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    n = len(vocab)
    (blank_en / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (blank_en / "merges.txt").write_text(
        "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges), encoding="utf-8"
    )
    added = {
        str(n + i): {
            "content": tok, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True,
        }
        for i, tok in enumerate(("<|endoftext|>", "<|im_start|>", "<|im_end|>"))
    }  # fmt: skip
    config = {
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": "{% for message in messages %}{{ message['content'] }}{% endfor %}",
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    (blank_en / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return n


# ---------------------------------------------------------------------------------------------
# ONNX models with the real I/O contract


def _save_onnx(graph: onnx.GraphProto, path: Path) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="epub2audio-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def write_speech_tokenizer_onnx(path: Path) -> None:
    """feats [1, 128, T] float32 + feats_length [1] int32 -> indices [1, ceil(T/4)] int32 in 0..6560.

    Token = |floor(1000 * max over a 4-frame window of the mean over mel bins)| mod 6561, plus
    0 * feats_length so that every input is consumed.
    """
    nodes = [
        helper.make_node("ReduceMean", ["feats"], ["m"], axes=[1], keepdims=1),  # [1, 1, T]
        helper.make_node("MaxPool", ["m"], ["p"], kernel_shape=[4], strides=[4], ceil_mode=1),  # [1, 1, ceil(T/4)]
        helper.make_node("Mul", ["p", "scale"], ["s"]),
        helper.make_node("Floor", ["s"], ["f"]),
        helper.make_node("Abs", ["f"], ["a"]),
        helper.make_node("Cast", ["a"], ["ai"], to=TensorProto.INT64),
        helper.make_node("Cast", ["feats_length"], ["len64"], to=TensorProto.INT64),
        helper.make_node("Mul", ["len64", "zero"], ["len0"]),
        helper.make_node("Add", ["ai", "len0"], ["ai2"]),
        helper.make_node("Mod", ["ai2", "codes"], ["tok"]),
        helper.make_node("Squeeze", ["tok", "axis1"], ["tok2"]),  # [1, ceil(T/4)]
        helper.make_node("Cast", ["tok2"], ["indices"], to=TensorProto.INT32),
    ]
    inits = [
        numpy_helper.from_array(np.array(1000.0, dtype=np.float32), "scale"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array(6561, dtype=np.int64), "codes"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
    ]
    graph = helper.make_graph(
        nodes,
        "speech_tokenizer_v3_stub",
        [
            helper.make_tensor_value_info("feats", TensorProto.FLOAT, [1, 128, "T"]),
            helper.make_tensor_value_info("feats_length", TensorProto.INT32, [1]),
        ],
        [helper.make_tensor_value_info("indices", TensorProto.INT32, [1, "T_tok"])],
        inits,
    )
    _save_onnx(graph, path)


def write_campplus_onnx(path: Path, seed: int = 0) -> None:
    """input [1, T, 80] float32 -> output [1, 192]: tanh(mean over time @ W + mean-abs @ V)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((80, 192)) / np.sqrt(80)).astype(np.float32)
    v = (rng.standard_normal((80, 192)) / np.sqrt(80)).astype(np.float32)
    nodes = [
        helper.make_node("ReduceMean", ["input"], ["mean"], axes=[1], keepdims=0),  # [1, 80]
        helper.make_node("Abs", ["input"], ["absx"]),
        helper.make_node("ReduceMean", ["absx"], ["mabs"], axes=[1], keepdims=0),
        helper.make_node("MatMul", ["mean", "W"], ["a"]),
        helper.make_node("MatMul", ["mabs", "V"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["c"]),
        helper.make_node("Tanh", ["c"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "campplus_stub",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["B", "T", 80])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["B", 192])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(v, "V")],
    )
    _save_onnx(graph, path)


# ---------------------------------------------------------------------------------------------
# Recipe


def recipe_yaml(flow_args, hift_args, llm_hidden: int) -> str:
    """The upstream cosyvoice3.yaml model section (HyperPyYAML tags and all) with tiny dimensions."""
    ups = list(hift_args.upsample_rates)
    upk = list(hift_args.upsample_kernel_sizes)
    return f"""# set random seed, so that you may reproduce your result.
__set_seed1: !apply:random.seed [1986]
__set_seed2: !apply:numpy.random.seed [1986]
__set_seed3: !apply:torch.manual_seed [1986]
__set_seed4: !apply:torch.cuda.manual_seed_all [1986]

# fixed params
sample_rate: 24000
llm_input_size: {llm_hidden}
llm_output_size: {llm_hidden}
spk_embed_dim: {flow_args.spk_embed_dim}
qwen_pretrain_path: ''
token_frame_rate: 25
token_mel_ratio: 2

# stream related params
chunk_size: 25
num_decoding_left_chunks: -1

llm: !new:cosyvoice.llm.llm.CosyVoice3LM
    llm_input_size: !ref <llm_input_size>
    llm_output_size: !ref <llm_output_size>
    speech_token_size: 6561
    length_normalized_loss: True
    lsm_weight: 0
    mix_ratio: [5, 15]
    llm: !new:cosyvoice.llm.llm.Qwen2Encoder
        pretrain_path: !ref <qwen_pretrain_path>
    sampling: !name:cosyvoice.utils.common.ras_sampling
        top_p: 0.8
        top_k: 25
        win_size: 10
        tau_r: 0.1

flow: !new:cosyvoice.flow.flow.CausalMaskedDiffWithDiT
    input_size: {flow_args.mel_dim}
    output_size: {flow_args.mel_dim}
    spk_embed_dim: !ref <spk_embed_dim>
    output_type: 'mel'
    vocab_size: {flow_args.vocab_size}
    input_frame_rate: !ref <token_frame_rate>
    only_mask_loss: True
    token_mel_ratio: !ref <token_mel_ratio>
    pre_lookahead_len: {flow_args.pre_lookahead_len}
    pre_lookahead_layer: !new:cosyvoice.transformer.upsample_encoder.PreLookaheadLayer
        in_channels: {flow_args.mel_dim}
        channels: {flow_args.pre_lookahead_channels}
        pre_lookahead_len: {flow_args.pre_lookahead_len}
    decoder: !new:cosyvoice.flow.flow_matching.CausalConditionalCFM
        in_channels: 240
        n_spks: 1
        spk_emb_dim: 80
        cfm_params: !new:omegaconf.DictConfig
            content:
                sigma_min: 1e-06
                solver: 'euler'
                t_scheduler: 'cosine'
                training_cfg_rate: 0.2
                inference_cfg_rate: 0.7
                reg_loss_type: 'l1'
        estimator: !new:cosyvoice.flow.DiT.dit.DiT
            dim: {flow_args.dim}
            depth: {flow_args.depth}
            heads: {flow_args.heads}
            dim_head: {flow_args.dim_head}
            ff_mult: {flow_args.ff_mult}
            mel_dim: 80
            mu_dim: 80
            spk_dim: 80
            out_channels: 80
            static_chunk_size: !ref <chunk_size> * <token_mel_ratio>
            num_decoding_left_chunks: !ref <num_decoding_left_chunks>

hift: !new:cosyvoice.hifigan.generator.CausalHiFTGenerator
    in_channels: {hift_args.in_channels}
    base_channels: {hift_args.base_channels}
    nb_harmonics: {hift_args.nb_harmonics}
    sampling_rate: !ref <sample_rate>
    nsf_alpha: 0.1
    nsf_sigma: 0.003
    nsf_voiced_threshold: 10
    upsample_rates: {ups}
    upsample_kernel_sizes: {upk}
    istft_params:
        n_fft: 16
        hop_len: 4
    resblock_kernel_sizes: [3, 7, 11]
    resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5], [1, 3, 5]]
    source_resblock_kernel_sizes: [7, 7, 11]
    source_resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5], [1, 3, 5]]
    lrelu_slope: 0.1
    audio_limit: 0.99
    conv_pre_look_right: 4
    f0_predictor: !new:cosyvoice.hifigan.f0_predictor.CausalConvRNNF0Predictor
        num_class: 1
        in_channels: {hift_args.in_channels}
        cond_channels: {hift_args.f0_cond_channels}

# gan related module
mel_spec_transform1: !name:matcha.utils.audio.mel_spectrogram
    n_fft: 1920
    num_mels: 80
    sampling_rate: !ref <sample_rate>
    hop_size: 480
    win_size: 1920
    fmin: 0
    fmax: null
    center: False
hifigan: !new:cosyvoice.hifigan.hifigan.HiFiGan
    generator: !ref <hift>
    discriminator: !new:cosyvoice.hifigan.discriminator.MultipleDiscriminator
        mpd: !new:matcha.hifigan.models.MultiPeriodDiscriminator
        mrd: !new:cosyvoice.hifigan.discriminator.MultiResSpecDiscriminator
    mel_spec_transform: [
        !ref <mel_spec_transform1>
    ]

get_tokenizer: !name:cosyvoice.tokenizer.tokenizer.get_qwen_tokenizer
    token_path: !ref <qwen_pretrain_path>
    skip_special_tokens: True
    version: cosyvoice3
allowed_special: 'all'
feat_extractor: !name:matcha.utils.audio.mel_spectrogram
    n_fft: 1920
    num_mels: 80
    sampling_rate: !ref <sample_rate>
    hop_size: 480
    win_size: 1920
    fmin: 0
    fmax: null
    center: False
"""


# ---------------------------------------------------------------------------------------------
# The directory


def tiny_flow_args():
    from epub2audio.voices.cosyvoice3.flow import FlowArgs

    return FlowArgs(pre_lookahead_channels=32, dim=64, depth=2, heads=4, dim_head=16, ff_mult=2)


def tiny_hift_args():
    from epub2audio.voices.cosyvoice3.hift import HiFTArgs

    return HiFTArgs(base_channels=32, f0_cond_channels=32)


def tiny_qwen_config() -> dict:
    cfg = rw.tiny_qwen2_config()
    cfg["vocab_size"] = TINY_TEXT_VOCAB
    cfg["bos_token_id"] = cfg["eos_token_id"] = None  # set from the tokenizer below
    return cfg


def write_tiny_checkpoint(
    directory: str | Path, seed: int = 0, hift_weight_norm_form: str = "parametrizations"
) -> Path:
    """Write a random-weight CosyVoice3 model directory in the official layout; returns it."""
    from epub2audio.voices.cosyvoice3.llm import LLMArgs

    d = Path(directory)
    blank = d / BLANK_EN
    blank.mkdir(parents=True, exist_ok=True)

    n_base = write_tiny_tokenizer(blank)
    qcfg = tiny_qwen_config()
    qcfg["bos_token_id"] = qcfg["eos_token_id"] = n_base  # <|endoftext|>, as in Qwen2
    (blank / "config.json").write_text(json.dumps(qcfg, indent=2), encoding="utf-8")
    (blank / "generation_config.json").write_text(json.dumps({"bos_token_id": n_base, "eos_token_id": n_base}))
    (blank / "model.safetensors").write_bytes(GARBAGE_SAFETENSORS)

    llm_args = LLMArgs.from_config(qcfg)
    flow_args = tiny_flow_args()
    hift_args = tiny_hift_args()
    torch.save(rw.random_llm_state_dict(llm_args, seed), d / "llm.pt")
    torch.save(rw.random_flow_state_dict(flow_args, seed + 1), d / "flow.pt")
    torch.save(rw.random_hift_state_dict(hift_args, seed + 2, weight_norm_form=hift_weight_norm_form), d / "hift.pt")

    (d / "cosyvoice3.yaml").write_text(recipe_yaml(flow_args, hift_args, llm_args.hidden_size), encoding="utf-8")
    write_campplus_onnx(d / "campplus.onnx", seed)
    write_speech_tokenizer_onnx(d / "speech_tokenizer_v3.onnx")
    (d / "config.json").write_text("{}")
    (d / "configuration.json").write_text(json.dumps({"framework": "Pytorch", "task": "text-to-speech"}))
    return d


def write_sine_wav(path: Path, *, seconds: float = 2.0, sample_rate: int = 22050, channels: int = 1, freq: float = 220.0) -> Path:
    """A test reference recording: a vibrato sine with a little deterministic noise, PCM16."""
    import soundfile as sf

    n = int(round(seconds * sample_rate))
    t = np.arange(n) / sample_rate
    f = freq * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
    x = 0.3 * np.sin(2 * np.pi * np.cumsum(f) / sample_rate) + 0.01 * np.random.default_rng(1).standard_normal(n)
    data = np.stack([x * (0.5 + 0.5 * c) for c in range(channels)], axis=1) if channels > 1 else x
    sf.write(str(path), data, sample_rate, subtype="PCM_16")
    return path


# The upstream checkpoint's key listing (names, shapes, dtypes), kept beside these tests.
REFERENCE_KEYS = Path(__file__).resolve().parent / "reference_state_dict_keys.txt"


def reference_keys_text() -> str:
    """The listing's text. Missing is a failure, not a skip: the layout tests would vanish."""
    import pytest

    if not REFERENCE_KEYS.exists():
        pytest.fail(f"{REFERENCE_KEYS} not found")
    return REFERENCE_KEYS.read_text()


def reference_shapes(section: str) -> dict[str, tuple[int, ...]]:
    """{key: shape} of one `## <section>` of the listing."""
    shapes, current = {}, None
    for line in reference_keys_text().splitlines():
        if line.startswith("## "):
            current = line[3:].split()[0]
        elif line and not line.startswith("#") and current == section:
            key, shape, _dtype = line.split("\t")
            shapes[key] = tuple(int(n) for n in shape.strip("[]").split(",") if n.strip())
    return shapes


def built_tiny_model_and_anna(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny model (seed 0, the one tests/cosyvoice3 use) and the saved profile "anna" (a 1.2 s
    sine, "Hello there.") that test_worker and test_pipeline run, each built once per test run
    (run_cache.built_once): each module made both in every xdist worker that ran one of its tests."""
    from epub2audio.voices.cosyvoice3 import profile as pr
    from run_cache import built_once

    model = built_once(tmp_path_factory, "cosyvoice3-tiny", lambda d: write_tiny_checkpoint(d, seed=0))

    def make_anna(folder: Path) -> Path:
        wav = write_sine_wav(folder / "anna.wav", seconds=1.2, sample_rate=24000)
        return pr.save_profile(pr.make_profile(model, wav, "Hello there."), folder / "anna")

    return model, built_once(tmp_path_factory, "cosyvoice3-tiny-anna", make_anna, in_place=True)
