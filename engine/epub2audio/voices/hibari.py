"""hibari: the 8M-parameter int8 student of Kokoro's af_heart (PyPI `hibari-tts`, Apache-2.0), with
the `heart` voice and its own English text-to-phoneme front end inside the wheel.

Only `heart` is ours: hibari's other voices download at run time, which nothing here may do. The
front end (hibari.g2p: lexicons, a tagger and an out-of-vocabulary model, no espeak) reads the
segment's text after our normaliser has spelled out its numbers and abbreviations, so where the two
would disagree ours has already decided. The graph predicts vocoder parameters; hibari's dsp turns
them into samples with noise drawn from a generator we seed from the segment's seed, so the same
text and seed give the same bytes in any worker, and resume and regen are byte-identical.

Its graph computes each token's duration (Clip(Round(·)) as Kokoro's does): made a second output
(durations.py), it says when each word is said (`--readalong words`), with the audio unchanged.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from ..files import sha256_file
from .base import VoiceInfo
from .durations import chunk_stream, durations_session, expose_durations

SAMPLE_RATE = 24_000
# hibari-tts 0.2.1's bundled heart model (its assets/voices.json says so; checked on every load).
HEART_SHA256 = "5f70741d4e900f4e85d0037498736cc1b3e1b9a63a13546a5da1e63abf4fccd8"
# The vocoder's hop: each duration frame is this many samples (measured: the audio is exactly the
# frames' sum times it, tests/test_hibari.py).
FRAME_SAMPLES = 600
# Changing anything here changes the audio, so it is part of the model identity.
RECIPE = "hibari-g2p;split=hibari;rng=pcg64(seed),one-per-segment;pcm16"


def heart_path() -> Path:
    import hibari

    return Path(hibari.__file__).parent / "assets" / "hibari.onnx"


class HibariVoice:
    def __init__(self, *, threads: int = 1, speed: float = 1.0, name: str = "hibari"):
        import onnx
        import onnxruntime
        from hibari import Hibari

        if not (0.5 <= speed <= 2.0):
            raise ValueError(f"speed {speed} is outside 0.5–2.0")
        model_path = heart_path()
        digest = sha256_file(model_path)
        if digest != HEART_SHA256:
            raise RuntimeError(f"{model_path}: not hibari-tts 0.2.1's heart model (sha256 {digest[:16]}…); "
                               "reinstall it: pip install --force-reinstall 'hibari-tts==0.2.1'")
        self._graph = onnx.load(str(model_path))
        self._durations = expose_durations(self._graph)
        self._durations_session = None
        options = onnxruntime.SessionOptions()
        # One thread, whatever the job asks: with two, onnxruntime's int8 kernels sum in another
        # order and a sample or two differ (tests/test_hibari.py), so regen's single worker would not
        # match a job's. hibari runs ~100x real time on one core; a second worker uses the other.
        del threads
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._options = options
        self._tts = Hibari(voice="heart", model=str(model_path), threads=1)
        # Our session, with the durations output, in place of hibari's own (same graph otherwise).
        self._tts.sess = onnxruntime.InferenceSession(self._graph.SerializeToString(), sess_options=options,
                                                      providers=["CPUExecutionProvider"])
        self._outputs = [o.name for o in self._tts.sess.get_outputs()]
        self._speed = float(speed)
        from importlib.metadata import version

        self.info = VoiceInfo(
            name=name,
            narrator="Heart (hibari, a Kokoro-82M af_heart student)",
            sample_rate=SAMPLE_RATE,
            backend="onnxruntime",
            precision="int8",
            model_id="hibari:" + hashlib.sha256(f"{digest}:{speed!r}:{RECIPE}".encode()).hexdigest()[:16],
            versions={"hibari-tts": version("hibari-tts"), "onnxruntime": onnxruntime.__version__},
        )

    def phonemes(self, text: str) -> list[str]:
        """What the model is fed for a segment, chunk by chunk (hibari's sentences; no synthesis),
        only the symbols the model has ids for."""
        return ["".join(c for c in chunk if c in self._tts.vocab) for chunk in self._tts.phonemize(text)]

    def synthesize(self, text: str, seed: int, language: str | None = None) -> bytes:
        # hibari reads English only: a passage in another language is read as English would be.
        rng = np.random.Generator(np.random.PCG64(seed))
        pieces = [self.run(chunk, rng)[0] for chunk in self.phonemes(text) if chunk]
        if not pieces:
            return b""
        audio = np.concatenate(pieces)
        return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()

    def run(self, phonemes: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """A chunk's audio, and its duration frames per token (the 0 pads included) or None."""
        from hibari import dsp

        out = self._tts.sess.run(None, self._feeds(phonemes))
        named = dict(zip(self._outputs, out))
        lh, th, ln, lr, phi, f0 = (named[n][0] for n in ("lh", "theta", "ln", "lr", "phi", "f0"))
        audio = np.asarray(dsp.synth(lh, th, ln, lr, phi, f0, rng), dtype=np.float32).reshape(-1)
        frames = named[self._durations].reshape(-1).astype(np.int64) if self._durations else None
        return audio, frames

    def _feeds(self, phonemes: str) -> dict:
        return {"ids": np.asarray([self._tts.ids(phonemes)], np.int64), "speed": np.asarray([self._speed], np.float32)}

    @property
    def times_words(self) -> bool:
        return self._durations is not None

    def frames(self, phonemes: str) -> np.ndarray:
        """A chunk's duration frames per token, from the durations graph (no vocoder)."""
        if self._durations_session is None:
            self._durations_session = durations_session(self._graph, self._durations, self._options)
        if self._durations_session is False:
            return self.run(phonemes, np.random.Generator(np.random.PCG64(0)))[1]
        (frames,) = self._durations_session.run(None, self._feeds(phonemes))
        return frames.reshape(-1).astype(np.int64)

    def word_times(self, text: str, seed: int, language: str | None = None) -> dict:
        """When each word of a segment is said in synthesize's audio (the durations do not depend
        on the seed: the noise is drawn after the graph, in the vocoder)."""
        from .piper_alignment import word_times

        if not self.times_words:
            raise RuntimeError("this hibari model does not report its phoneme durations")
        chunks = [c for c in self.phonemes(text) if c]
        stream, at = chunk_stream(chunks, [self.frames(c) * FRAME_SAMPLES for c in chunks])
        if stream is None:
            return {"samples": None, "words": []}

        def alone(word: str) -> list[str]:
            return [p for chunk in self.phonemes(word) for p in chunk]

        return {"samples": at, "words": word_times(text, stream, alone, self._tts.vocab)}


def load(threads: int = 1, name: str = "hibari", options: dict | None = None) -> HibariVoice:
    options = options or {}
    return HibariVoice(threads=threads, speed=float(options.get("speed", 1.0)), name=name)
