"""The contract every voice implements (Piper-sized: load, then synthesize).

A voice turns one segment of text into mono 16-bit PCM at its own sample rate. The same text and
seed must give the same bytes: a voice draws randomness only from the seed it is handed, never from
global RNG state, so a segment's audio does not depend on what was synthesised before it.

A segment in another language than the book's comes with `language` (a BCP 47 tag); a voice uses
it if it can and otherwise ignores it. It is passed only when set, so a voice may leave it out of
its signature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class LengthCapReached(Exception):
    """The voice reached its length cap before the end of the text: its audio would be cut.

    A voice raises this instead of returning cut audio; the worker reports it as such and the job
    re-says the text in smaller pieces (render.py). Same text, same seed: same outcome, so it is
    never retried as is."""


@dataclass(frozen=True)
class VoiceInfo:
    name: str  # what the user asked for, e.g. "joe" or "cosyvoice3:anna"
    narrator: str  # what the M4B's composer tag says
    sample_rate: int
    backend: str  # what actually ran, e.g. "onnxruntime", "torch", "mlx"
    precision: str  # what actually ran, e.g. "fp32", "int8"
    model_id: str  # identifies the weights (a content hash), so a changed model re-renders
    versions: dict[str, str] = field(default_factory=dict)


class Voice(Protocol):
    info: VoiceInfo

    def synthesize(self, text: str, seed: int, language: str | None = None) -> bytes:
        """Mono signed 16-bit little-endian PCM at info.sample_rate."""
        ...
