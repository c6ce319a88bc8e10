"""Tiny official-layout Qwen3-TTS folders, each written once per test run (shared by the xdist
workers: run_cache.built_once)."""

from __future__ import annotations

import pytest

from run_cache import built_once


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    from .random_weights import write_tiny_model

    return built_once(tmp_path_factory, "qwen3tts-tiny", lambda d: write_tiny_model(d, seed=0))


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_dir):
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint

    return load_checkpoint(tiny_dir)


@pytest.fixture(scope="session")
def tiny_base_dir(tmp_path_factory):
    from .random_weights import write_tiny_base_model

    return built_once(tmp_path_factory, "qwen3tts-tiny-base", lambda d: write_tiny_base_model(d, seed=0))


@pytest.fixture(scope="session")
def tiny_base_stages(tiny_base_dir):
    from epub2audio.voices.qwen3tts.clone import load_clone_stages

    return load_clone_stages(tiny_base_dir)


EOS = 2150
LOOP_CODE = 1234  # the code the looping folder's Talker prefers
# eos favoured: random weights then stop after 2-20 frames (seeds 0-7 on "The morning was cold.")
SPEAKING_BIAS = {EOS: 4.0}
# one code strongly preferred, eos never: every generation runs to its cap
LOOP_BIAS = {LOOP_CODE: 20.0, EOS: -20.0}
LOOP_STEADY = 40.0  # large enough that no layer flips the steady component's sign
LOOP_FRAMES = 20  # the looping folder's max_new_tokens (T_config), so its cap is 20 frames


@pytest.fixture(scope="session")
def speaking_dir(tmp_path_factory):
    from .random_weights import write_tiny_model

    return built_once(tmp_path_factory, "qwen3tts-speaking",
                      lambda d: write_tiny_model(d, seed=0, codec_bias=SPEAKING_BIAS))


@pytest.fixture(scope="session")
def loop_dir(tmp_path_factory):
    from .random_weights import write_tiny_model

    return built_once(tmp_path_factory, "qwen3tts-loop",
                      lambda d: write_tiny_model(d, seed=0, codec_bias=LOOP_BIAS, steady=LOOP_STEADY,
                                                 max_new_tokens=LOOP_FRAMES))


@pytest.fixture(scope="session")
def speaking_base_dir(tmp_path_factory):
    """A Base folder whose clones stop after a few frames (eos favoured, as speaking_dir)."""
    from .random_weights import write_tiny_base_model

    return built_once(tmp_path_factory, "qwen3tts-speaking-base",
                      lambda d: write_tiny_base_model(d, seed=0, codec_bias=SPEAKING_BIAS))
