"""DistillMOS as verify runs it (audiobook/verify/quality.py) scores what its own command line does.

tests/distillmos_reference.json holds the scores of `distillmos DIR` (upstream's CLI, torch 2.8.0 +
torchaudio 2.8.0 in a side venv: bench/upstream_distillmos.py) for the WAVs tests/distillmos_wavs.py
writes. Ours: the same samples as 16 kHz float32 arrays into our child (torch 2.13, one thread, no
torchaudio). Measured: at 16 kHz equal to the last bit (difference 0.0, a crop-averaged 9.5 s file
too); at 22.05 and 24 kHz, where ffmpeg resamples for us and torchaudio's sinc for the CLI,
0.0044 and 0.0129 apart, so RESAMPLED_TOLERANCE is 0.02.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from distillmos_wavs import WAVS, write_wavs
from epub2audio.audiobook.ffmpeg import ffmpeg_exe
from epub2audio.audiobook.verify.quality import (BOOK_MARGIN, MODEL_SAMPLES, VOICE_NORMS, MosScorer,
                                                 distillmos_installed, quality_doubts)
from epub2audio.audiobook.verify.report import ChapterRow, QualityWindow

# One worker process runs them all, so the module's scorer (a child that loads the model) starts
# once a run, not in each xdist worker that ran one of its tests.
pytestmark = pytest.mark.xdist_group("distillmos")
needs_distillmos = pytest.mark.skipif(not distillmos_installed(), reason="distillmos is not installed (make test does)")

REFERENCE = json.loads((Path(__file__).parent / "distillmos_reference.json").read_text())["files"]
EXACT_TOLERANCE = 1e-6  # measured 0.0 here and 2.4e-7 (one float32 step) on the CI machine's CPU
RESAMPLED_TOLERANCE = 0.02  # measured 0.0044 (22.05 kHz) and 0.0129 (24 kHz)


@pytest.fixture(scope="module")
def scorer():
    with MosScorer() as s:
        yield s


@pytest.fixture(scope="module")
def wavs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("distillmos")
    hashes = write_wavs(folder)
    assert hashes == {name: entry["sha256"] for name, entry in REFERENCE.items()}  # the files upstream scored
    return folder


def _samples(path: Path) -> tuple[np.ndarray, int]:
    with wave.open(str(path), "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2") / np.float32(32768), w.getframerate()


def _at_16k(path: Path) -> np.ndarray:
    """What verify feeds the model: ffmpeg's 16 kHz float32 (speech.py's _window_audio)."""
    cmd = [ffmpeg_exe(), "-v", "error", "-i", str(path), "-ac", "1", "-ar", "16000", "-f", "f32le", "-"]
    return np.frombuffer(subprocess.run(cmd, capture_output=True, check=True).stdout, dtype="<f4")


@needs_distillmos
@pytest.mark.parametrize("name", sorted(WAVS))
def test_scores_equal_the_reference_command_line(scorer, wavs, name):
    ours = scorer.score(_at_16k(wavs / name))
    tolerance = EXACT_TOLERANCE if WAVS[name][0] == 16000 else RESAMPLED_TOLERANCE
    assert ours == pytest.approx(REFERENCE[name]["distillmos"], abs=tolerance)


@needs_distillmos
def test_the_comparison_can_fail(scorer, wavs):
    """Audio at the wrong rate, or cut to the model's one input, scores off the reference by more
    than the tolerances; the score is the same however loud the input (the model peak-normalises)."""
    samples, rate = _samples(wavs / "voiced-24k.wav")
    assert rate == 24000
    assert abs(scorer.score(samples) - REFERENCE["voiced-24k.wav"]["distillmos"]) > 10 * RESAMPLED_TOLERANCE
    long = _at_16k(wavs / "voiced-long-16k.wav")
    assert abs(scorer.score(long[:MODEL_SAMPLES]) - REFERENCE["voiced-long-16k.wav"]["distillmos"]) > 1000 * EXACT_TOLERANCE
    quiet = _at_16k(wavs / "voiced-16k.wav") * np.float32(0.01)
    assert scorer.score(quiet) == pytest.approx(REFERENCE["voiced-16k.wav"]["distillmos"], abs=1e-4)


@needs_distillmos
def test_the_same_audio_gives_the_same_score(scorer, wavs):
    """Twice in one scorer: equal to the bit. Against upstream's figure, recorded on another CPU,
    the last float32 step may differ (CI measured 2.4e-7), so that comparison has the tolerance."""
    samples = _at_16k(wavs / "voiced-noisy-16k.wav")
    first = scorer.score(samples)
    assert scorer.score(samples) == first
    assert first == pytest.approx(REFERENCE["voiced-noisy-16k.wav"]["distillmos"], abs=EXACT_TOLERANCE)


CHILD_ONLY = """
import sys
BANNED = ("torch", "onnxruntime", "mlx", "torchaudio")
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BANNED:
            raise ImportError("the parent process must not import " + name)
sys.meta_path.insert(0, Refuse())
import numpy as np
from epub2audio.audiobook.verify.quality import MosScorer
with MosScorer() as scorer:
    print("MOS", scorer.score(np.zeros(16000, dtype=np.float32)))
print("LOADED", sorted(m for m in sys.modules if m.split(".")[0] in BANNED))
"""


@needs_distillmos
def test_the_model_runs_in_a_child_and_its_load_message_stays_out_of_the_answers():
    proc = subprocess.run([sys.executable, "-c", CHILD_ONLY], capture_output=True, text=True, env={**os.environ},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("MOS ") and 1.0 <= float(lines[0].split()[1]) <= 5.0
    assert lines[1:] == ["LOADED []"]  # and nothing the child printed on load


def _rows(*scores: float) -> list[ChapterRow]:
    rows = [ChapterRow(n, n, f"Chapter {n}", 60.0 * (n - 1), 60.0) for n in range(1, len(scores) + 1)]
    for row, score in zip(rows, scores):
        row.quality_windows = [QualityWindow(row.start_seconds + 5, 7.68, score)]
        row.distillmos = score
    return rows


def test_a_chapter_below_its_voices_norm_or_far_below_the_book_is_a_doubt():
    good, floor = VOICE_NORMS["joe"]
    problems = []
    quality_doubts(_rows(good, floor - 0.01), "joe", problems)
    assert [(p.check, p.chapter, p.severity, p.at_seconds) for p in problems] == [("quality", 2, "doubt", 65.0)]
    assert "listen 0:05.0 into the chapter" in problems[0].message
    problems = []  # a voice with no norm: only the book's own chapters judge, from three others on
    quality_doubts(_rows(4.0, 4.1, 4.0 - BOOK_MARGIN - 0.01), "cosyvoice3:someone", problems)
    assert problems == []
    quality_doubts(_rows(4.0, 4.1, 3.9, 4.0 - BOOK_MARGIN - 0.01), "cosyvoice3:someone", problems)
    assert [p.chapter for p in problems] == [4]
    problems = []
    quality_doubts(_rows(4.0, 4.1, 3.9, 4.0 - BOOK_MARGIN + 0.01), "cosyvoice3:someone", problems)
    assert problems == []
    quality_doubts(_rows(1.6, 1.7, 1.6, 1.0), "tone", problems)  # not speech: scored, never judged
    assert problems == []


def test_verify_says_in_one_line_when_distillmos_is_missing(monkeypatch):
    from epub2audio.audiobook.verify import quality

    monkeypatch.setattr(quality, "distillmos_installed", lambda: False)
    notes = []
    job = type("Job", (), {"chapters": [(0, "One")], "segments": {}, "meta": {"voice": "joe"}})()
    assert quality.check_quality(Path("x.m4b"), job, _rows(4.0), 22050, 2, 30.0, 0, [], notes) == "unavailable"
    assert notes == ["speech quality not scored: distillmos is not installed (make test installs it; see NOTICE.md)"]
