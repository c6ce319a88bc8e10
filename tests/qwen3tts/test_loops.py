"""Loops (issue 23 item 5): verify reports a segment whose audio repeats itself, for the voices
that can loop; on a Qwen3-TTS folder that loops, kept under upstream's bound, it fails the M4B."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cli_run import epub2audio, story_epub
from epub2audio.audiobook.verify.audio import repetition

from .conftest import LOOP_BIAS, LOOP_STEADY
from .random_weights import write_tiny_model


def _speechlike(seconds: float, seed: int) -> np.ndarray:
    """10 ms mean-square frames shaped like speech: syllables of random length and level, with
    pauses between some of them."""
    rng = np.random.default_rng(seed)
    out: list[float] = []
    while len(out) < seconds * 100:
        n = int(rng.integers(8, 30))
        peak = rng.uniform(-30, -12)
        out += list(10 ** ((peak - 20 * np.abs(np.linspace(-1, 1, n))) / 10))
        if rng.random() < 0.3:
            out += [1e-7] * int(rng.integers(5, 25))
    return np.array(out[: int(seconds * 100)])


def test_repetition_finds_a_steady_sound_and_a_pasted_phrase_never_speechlike_audio():
    assert [repetition(_speechlike(8, seed)) for seed in range(20)] == [None] * 20
    steady = np.full(300, 10 ** (-20 / 10)) * np.random.default_rng(0).uniform(0.9, 1.1, 300)  # 3 s, +-0.4 dB
    assert repetition(steady).startswith("holds one steady sound for 1.5 s or more (its level varies by 0.")
    assert repetition(steady[:140]) is None  # shorter than 1.5 s
    phrase = _speechlike(1.3, 7)
    assert repetition(np.tile(phrase, 4)) == "repeats the same 1.30 s of sound over and over (r = 1.00)"
    assert repetition(np.tile(phrase, 2)) is None  # said twice is not a loop
    assert repetition(np.zeros(500)) is None  # silence is the silence check's


@pytest.mark.slow
def test_verify_reports_the_loop_of_a_qwen3_folder_kept_under_upstreams_bound(tmp_path):
    """Under the "upstream" cap a runaway is kept, as upstream keeps it (3 s here: max_new_tokens
    40); verify then fails the M4B, naming the segment."""
    loop = write_tiny_model(tmp_path / "loop", codec_bias=LOOP_BIAS, steady=LOOP_STEADY, max_new_tokens=40)
    config = tmp_path / "config.toml"
    config.write_text('length_cap = "upstream"\n')
    env = {**os.environ, "EPUB2AUDIO_CACHE_DIR": str(tmp_path / "cache"), "EPUB2AUDIO_DATA_DIR": str(tmp_path / "data"),
           "EPUB2AUDIO_CONFIG": str(config), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    assert epub2audio("voice", "add", "loop", "--qwen3", loop, env=env).code == 0
    book = story_epub(tmp_path, [("One", ["Nobody spoke."])])
    out = tmp_path / "story.m4b"
    run = epub2audio(book, "-o", out, "--voice", "qwen3:ryan", "--say-titles", "no", "--no-verify", env=env)
    assert run.code == 0, run.stderr
    run = epub2audio("verify", out, "--no-asr", env=env)
    assert run.code == 1
    problems = [line.strip() for line in run.stdout.splitlines() if "the voice looped" in line]
    assert len(problems) == 1 and "segment 1 'Nobody spoke.' holds one steady sound for 1.5 s or more" in problems[0]
