"""One tiny official-layout Qwen3-TTS folder per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    from .random_weights import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("qwen3tts-tiny"), seed=0)


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_dir):
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint

    return load_checkpoint(tiny_dir)


@pytest.fixture(scope="session")
def tiny_base_dir(tmp_path_factory):
    from .random_weights import write_tiny_base_model

    return write_tiny_base_model(tmp_path_factory.mktemp("qwen3tts-tiny-base"), seed=0)


@pytest.fixture(scope="session")
def tiny_base_stages(tiny_base_dir):
    from epub2audio.voices.qwen3tts.clone import load_clone_stages

    return load_clone_stages(tiny_base_dir)
