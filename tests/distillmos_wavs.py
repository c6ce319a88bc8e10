"""The WAVs that DistillMOS's own command line scored (bench/upstream_distillmos.py) and the tests
score again: written from code, so neither side needs a committed recording.

Voiced sound: a pulse-like harmonic series on a gliding 110-140 Hz pitch, its harmonics weighted
by three vowel formants that move, in syllables of about 0.25 s; one copy with white noise at
10 dB SNR; one longer than the model's 7.68 s input (its crops are averaged); one at 22.05 kHz
(Piper's rate) and one at 24 kHz (Kokoro's, hibari's), which the command line resamples. Every
value is int16 after rounding, so the bytes (and sha256) are the same wherever numpy is.
"""

from __future__ import annotations

import hashlib
import wave
from pathlib import Path

import numpy as np

# name -> (sample rate, seconds, noise SNR in dB or None)
WAVS = {
    "voiced-16k.wav": (16000, 4.0, None),
    "voiced-noisy-16k.wav": (16000, 4.0, 10.0),
    "voiced-long-16k.wav": (16000, 9.5, None),
    "voiced-22k.wav": (22050, 4.0, None),
    "voiced-24k.wav": (24000, 4.0, None),
}


def voiced(rate: int, seconds: float, snr_db: float | None, seed: int = 7) -> np.ndarray:
    t = np.arange(int(round(rate * seconds))) / rate
    pitch = 125 + 15 * np.sin(2 * np.pi * 0.4 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    syllable = np.sin(np.pi * ((t * 4.0) % 1.0)) ** 2  # four a second, each rising and falling
    formants = np.stack([700 + 200 * np.sin(2 * np.pi * 0.5 * t), 1200 + 500 * np.sin(2 * np.pi * 0.3 * t + 1),
                         np.full_like(t, 2600.0)])
    signal = np.zeros_like(t)
    for k in range(1, 30):
        frequency = k * pitch
        gain = sum(np.exp(-((frequency - f) / 150.0) ** 2) for f in formants) + 0.05 / k
        signal += np.where(frequency < rate / 2, gain, 0.0) * np.sin(k * phase)
    signal *= syllable
    if snr_db is not None:
        noise = np.random.default_rng(seed).standard_normal(len(t))
        signal += noise * np.sqrt(np.mean(signal ** 2) / 10 ** (snr_db / 10))
    return np.round(signal / np.max(np.abs(signal)) * 0.5 * 32767).astype("<i2")


def write_wavs(folder: Path) -> dict[str, str]:
    """Write every WAV into folder; name -> sha256 of the file."""
    folder.mkdir(parents=True, exist_ok=True)
    hashes = {}
    for name, (rate, seconds, snr_db) in WAVS.items():
        path = folder / name
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(rate)
            w.writeframes(voiced(rate, seconds, snr_db).tobytes())
        hashes[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes
