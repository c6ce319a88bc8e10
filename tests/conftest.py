"""Shared pytest fixtures."""

import os
from pathlib import Path

import pytest

# Real EPUBs the tests read; tests/corpus/NOTICE.md says where each comes from and its licence.
CORPUS = Path(__file__).resolve().parent / "corpus"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus folder. Missing is a failure, not a skip: the book tests would silently vanish."""
    if not CORPUS.is_dir():
        pytest.fail(f"EPUB test corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(autouse=True)
def _no_calibre_cache_outside(tmp_path_factory, monkeypatch):
    """calibre's Piper voices are looked for in its cache: never the real one in a test."""
    monkeypatch.setenv("CALIBRE_CACHE_DIRECTORY", str(tmp_path_factory.mktemp("no-calibre-cache")))

