"""A FULL-SIZE random-weight CosyVoice3 voice in memory, for benchmarks (never a test fixture).

Real shapes (Qwen2-0.5B LLM + speech head, 22-block DiT flow, HiFT), random weights from
tests/cosyvoice3/random_weights.py, a tiny BPE tokenizer (text ids are all the LLM needs), and a
random voice profile (`prompt_text` text ids, `prompt_speech` speech tokens + their mel). Speeds
are real; the audio is noise. Takes ~20 s and ~4 GB to build.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT))


def full_size_qwen_config() -> dict:
    return {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
        "hidden_size": 896, "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
        "num_hidden_layers": 24, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "vocab_size": 151936,
        "max_position_embeddings": 32768, "use_sliding_window": False, "tie_word_embeddings": True,
    }  # fmt: skip


def full_size_lm(seed: int = 0):
    """The torch CosyVoice3LM (fp32) with random full-size weights."""
    from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM, LLMArgs
    from tests.cosyvoice3.random_weights import random_llm_state_dict

    config = full_size_qwen_config()
    sd = random_llm_state_dict(LLMArgs.from_config(config), seed=seed)
    # Random weights would draw eos (6562, which the sampler never masks) early and at random;
    # zero the special ids' output rows so every segment runs to its token cap, as planned.
    sd["llm_decoder.weight"][6561:] = 0.0
    return CosyVoice3LM.from_checkpoint(config, sd)


def full_size_voice(max_tokens_per_segment: int = 75, prompt_text: int = 30, prompt_speech: int = 100, seed: int = 0):
    """A CosyVoice3Voice with random full-size weights; each segment is capped at
    `max_tokens_per_segment` speech tokens (25 per second; eos is made improbable, see full_size_lm)."""
    import numpy as np

    from epub2audio.voices.base import VoiceInfo
    from epub2audio.voices.cosyvoice3 import frontend
    from epub2audio.voices.cosyvoice3.backends import TorchSpeechLM
    from epub2audio.voices.cosyvoice3.flow import FlowArgs, load_flow
    from epub2audio.voices.cosyvoice3.hift import HiFTArgs, load_hift
    from epub2audio.voices.cosyvoice3.profile import Profile
    from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice
    from tests.cosyvoice3.fixtures import write_tiny_tokenizer
    from tests.cosyvoice3.random_weights import random_flow_state_dict, random_hift_state_dict

    blank = Path(tempfile.mkdtemp(prefix="e2a-bench-tok-"))
    write_tiny_tokenizer(blank)
    tokenizer = frontend.load_text_tokenizer(blank)
    llm = TorchSpeechLM(full_size_lm(seed))
    flow = load_flow(random_flow_state_dict(FlowArgs(), seed + 1))
    hift = load_hift(random_hift_state_dict(HiFTArgs(), seed + 2), max_seconds=max_tokens_per_segment / 25 + 1)
    rng = np.random.default_rng(seed)
    profile = Profile(
        name="bench", transcript="random", prompt_text_ids=rng.integers(0, 500, prompt_text).astype(np.int64),
        speech_tokens=rng.integers(0, 6561, prompt_speech).astype(np.int64),
        mel=rng.standard_normal((2 * prompt_speech, 80)).astype(np.float32),
        embedding=rng.standard_normal(192).astype(np.float32), wav_sha256="", model_id="random", created="",
    )  # fmt: skip
    info = VoiceInfo("cosyvoice3:bench", "bench", 24000, "torch", "fp32", "random-full-size")
    return CosyVoice3Voice(info=info, tokenizer=tokenizer, llm=llm, flow=flow, hift=hift, profile=profile,
                           max_tokens_per_segment=max_tokens_per_segment)
