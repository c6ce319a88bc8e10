"""A diagnostic voice with no model: each segment becomes a short tone whose pitch and length
follow from the text and seed. It checks the whole pipeline (workers, store, M4B) in seconds,
e.g. `epub2audio book.epub --voice tone`, and is what the engine's own fast tests use."""

from __future__ import annotations

import hashlib
import math

import numpy as np

from .base import VoiceInfo

SAMPLE_RATE = 16000
# Paced like speech, so `verify` judges its timing as it would a voice's. A module constant, so the
# read-along sweep (tests/brisk_tone) can make the same markup from a tenth of the audio.
CHARACTERS_PER_SECOND = 14


class ToneVoice:
    info = VoiceInfo(
        name="tone", narrator="Test tone", sample_rate=SAMPLE_RATE, backend="python",
        precision="int16", model_id="tone:2",
    )

    def synthesize(self, text: str, seed: int, language: str | None = None) -> bytes:
        digest = hashlib.sha256(f"{seed}:{text}".encode()).digest()
        frequency = 220 + digest[0] * 2
        samples = SAMPLE_RATE * (3 + len(text)) // CHARACTERS_PER_SECOND
        amplitude = 8000 + digest[1] * 40
        step = 2 * math.pi * frequency / SAMPLE_RATE
        # In one array pass (a Python loop took 5 s for a 37-minute chapter); truncated toward
        # zero as int() did, so the samples are those of model tone:2.
        return (amplitude * np.sin(step * np.arange(samples, dtype=np.float64))).astype("<i2").tobytes()


def load() -> ToneVoice:
    return ToneVoice()
