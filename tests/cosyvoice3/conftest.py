"""Shared fixtures for the CosyVoice3 tests: one tiny official-layout model directory per test run
(shared by the xdist workers: run_cache.built_once)."""

from __future__ import annotations

import os

import pytest

from run_cache import built_once

# Nothing in these tests may reach the network (transformers / faster-whisper would try the Hub).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from .fixtures import write_tiny_checkpoint

    return built_once(tmp_path_factory, "cosyvoice3-tiny", lambda d: write_tiny_checkpoint(d, seed=0))


@pytest.fixture(autouse=True, scope="session")
def private_engine_cache(tmp_path_factory):
    """Converted MLX weights and ONNX exports go to a throwaway cache, never the user's."""
    os.environ["EPUB2AUDIO_CACHE_DIR"] = str(tmp_path_factory.mktemp("engine-cache"))
