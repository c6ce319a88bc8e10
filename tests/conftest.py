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



WITHOUT_OFFICIAL_PACKS = Path(__file__).resolve().parent / "without_official_packs"


@pytest.fixture
def without_official_packs(monkeypatch):
    """This test and the commands it runs see no companion wheel of Kokoro's 54 official packs, as a
    machine with only the kokoro extras installed (its Japanese five)."""
    from epub2audio.voices import catalog

    monkeypatch.setattr(catalog, "official_packs", lambda: {})
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(WITHOUT_OFFICIAL_PACKS), os.environ.get("PYTHONPATH")])))
