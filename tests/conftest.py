"""Shared pytest fixtures."""

from pathlib import Path

import pytest

# The shared corpus of real EPUBs lives next to the repository (see its MANIFEST.md).
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus folder. Missing is a failure, not a skip: the book tests would silently vanish."""
    if not CORPUS.is_dir():
        pytest.fail(f"EPUB test corpus not found at {CORPUS} (expected ../shared/corpus next to the repo)")
    return CORPUS
