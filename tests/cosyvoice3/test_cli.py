"""CosyVoice3 through the front door: `voice add`, then a conversion in disposable workers."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from . import fixtures as fx

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "aesop-three-fables.epub"


def run(*args, env):
    proc = subprocess.run([sys.executable, "-m", "epub2audio.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def env(tmp_path):
    # Upstream's length cap: random weights stop by chance, and a one-word segment that ran to the
    # tight cap would fail the job on numerics alone (test_length_cap.py tests the re-split).
    config = tmp_path / "config.toml"
    config.write_text('length_cap = "upstream"\n')
    return {**os.environ, "EPUB2AUDIO_CACHE_DIR": str(tmp_path / "cache"), "EPUB2AUDIO_DATA_DIR": str(tmp_path / "data"),
            "EPUB2AUDIO_CONFIG": str(config), "HF_HUB_OFFLINE": "1"}


@pytest.mark.slow
def test_voice_add_then_convert_in_workers_convert_again_and_regen(tiny_model_dir, tmp_path, env):
    """One voice and one conversion for three checks: the conversion, a second one into another job
    and regen of a segment of that job are each byte-identical (they were two tests that added the
    same voice and converted the same chapter: 23 s of CPU each)."""
    wav = fx.write_sine_wav(tmp_path / "anna.wav", seconds=1.2, sample_rate=24000)
    code, out, err = run("voice", "add", "anna", "--wav", wav, "--text", "Hello there.", "--model-dir", tiny_model_dir, env=env)
    assert code == 0, err
    assert out.startswith("Saved voice cosyvoice3:anna (1.2 s, ")
    code, out, _ = run("voice", "list", env=env)
    rows = out.splitlines()
    assert [r.split()[0] for r in rows[-2:]] == ["cosyvoice3:anna", "tone"]  # saved voices, then the test tone

    m4b = tmp_path / "fox.m4b"
    # Random weights do not speak, so the speech check is off (it rightly fails such audio).
    code, out, err = run(SAMPLE, "-o", m4b, "--chapters", "2", "--voice", "cosyvoice3:anna", "--progress", "json",
                         "--work-dir", tmp_path / "job", "--no-verify", env=env)
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    voice = next(e for e in events if e["event"] == "voice")
    # auto = the fastest backend measured for this platform: ONNX Runtime for the LLM on a Linux CPU.
    assert (voice["name"], voice["sample_rate"], voice["backend"]) == ("cosyvoice3:anna", 24000, "onnx+torch")
    assert voice["model_id"].startswith("cosyvoice3-")

    # Every segment records what ran, and it is what the worker reported.
    db = sqlite3.connect(tmp_path / "job" / "job.sqlite3")
    rows = set(db.execute("SELECT voice, backend, precision, model_id, sample_rate FROM segments"))
    assert rows == {("cosyvoice3:anna", voice["backend"], voice["precision"], voice["model_id"], 24000)}

    # A second conversion (same seed) into another job is byte-identical.
    again = tmp_path / "again.m4b"
    code, _, err = run(SAMPLE, "-o", again, "--chapters", "2", "--voice", "anna", "--no-verify", env=env)
    assert code == 0, err
    assert again.read_bytes() == m4b.read_bytes()

    # Regen of one segment of that job (its default work dir, as a user's) re-makes the stored audio.
    code, out, err = run("regen", again, "--segment", "2.2", env=env)
    assert code == 0, err
    assert "re-made: identical to the stored audio" in out
    assert again.read_bytes() == m4b.read_bytes()


def test_unknown_profile_and_missing_model_dir(tmp_path, env):
    code, _, err = run(SAMPLE, "--voice", "cosyvoice3:nobody", env=env)
    assert code == 2 and "unknown voice 'cosyvoice3:nobody'" in err
    code, _, err = run("voice", "add", "x", "--wav", tmp_path / "none.wav", env=env)
    assert code == 2 and "--model-dir" in err


def test_voice_add_rejects_a_wrong_model_dir(tmp_path, env):
    wav = fx.write_sine_wav(tmp_path / "anna.wav", seconds=1.2, sample_rate=24000)
    code, _, err = run("voice", "add", "anna", "--wav", wav, "--text", "Hi.", "--model-dir", tmp_path, env=env)
    assert code == 2 and err.count("\n") == 1 and "epub2audio: error: " in err


def test_voice_add_can_shorten_the_reference(tiny_model_dir, tmp_path, monkeypatch):
    from epub2audio.errors import InputError
    from epub2audio.voices.cosyvoice3 import profile as pr

    wav = fx.write_sine_wav(tmp_path / "long.wav", seconds=8.0, sample_rate=24000)
    monkeypatch.setattr(pr, "transcribe", lambda wave16k: "what the kept part says")
    kept = pr.make_profile(tiny_model_dir, wav, None, max_seconds=4.0)
    assert 2.0 <= kept.duration <= 4.0 and kept.transcript == "what the kept part says"
    whole = pr.make_profile(tiny_model_dir, wav, "all of it", max_seconds=10.0)
    assert whole.duration == 8.0  # shorter than the limit: nothing cut, --text kept
    with pytest.raises(InputError, match="would be cut, so --text would no longer match"):
        pr.make_profile(tiny_model_dir, wav, "all of it", max_seconds=4.0)
