"""A cloned Qwen3-TTS voice through the front door: `voice add NAME --qwen3 BASE_DIR --wav REF.wav
[--text …]` saves the clone prompt (in a child process), `voice list` shows it, a corpus chapter
converts with `--voice qwen3:NAME` in workers, resumed after a kill and re-made byte-identical;
bad references and a CustomVoice folder are refused in one line, exit 2, with nothing saved."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from cli_run import epub2audio
from worker_gate import Gate

from .random_weights import reference_audio
from .test_cli import CHAPTER, GLOSSARY, _texts, env, without_runtimes  # noqa: F401 (env: the fixture)

LANGUAGES = "en, zh, de, it, pt, es, ja, ko, fr, ru"
REF_TEXT = "The morning was cold."


@pytest.fixture
def ref_wav(tmp_path) -> Path:
    wav = tmp_path / "ref.wav"
    sf.write(str(wav), reference_audio(2.0, seed=1), 24000, subtype="PCM_16")
    return wav


def test_voice_add_clones_lists_and_keys_each_prompt(speaking_base_dir, speaking_dir, ref_wav, tmp_path, env):
    run = epub2audio("voice", "add", "anna", "--qwen3", speaking_base_dir, "--wav", ref_wav, "--text", REF_TEXT, env=env)
    assert (run.code, run.stderr) == (0, "")
    assert run.stdout == f"Saved voice qwen3:anna (cloned from {ref_wav}, 2.0 s, with its transcript; {LANGUAGES}).\n"
    run = epub2audio("voice", "add", "bob", "--qwen3", speaking_base_dir, "--wav", ref_wav, env=env)
    assert run.stdout == f"Saved voice qwen3:bob (cloned from {ref_wav}, 2.0 s, x-vector only: no --text; {LANGUAGES}).\n"
    voices = tmp_path / "data" / "voices"
    assert sorted(p.name for p in voices.iterdir()) == ["anna", "bob"]  # no temporary folder left
    assert sorted(p.name for p in (voices / "anna").iterdir()) == ["clone.json", "clone.npz", "qwen3clone.json"]

    rows = [r.split() for r in epub2audio("voice", "list", env=env).stdout.splitlines()]
    qwen3 = {r[0]: r[1:] for r in rows if r[0].startswith("qwen3:")}
    assert list(qwen3) == ["qwen3:anna", "qwen3:bob"]
    assert qwen3["qwen3:anna"][:4] == ["Qwen3-TTS", LANGUAGES.replace(", ", ","), "24000", "Hz"]
    assert " ".join(qwen3["qwen3:anna"][4:]) == (
        f"not measured cloned from a recording (with its transcript) with your Base folder {speaking_base_dir.name}")
    assert " ".join(qwen3["qwen3:bob"][4:]).startswith("not measured cloned from a recording (x-vector only)")

    # refused in one line, exit 2, nothing saved: a CustomVoice folder, a clip too short, a file that is no audio
    run = epub2audio("voice", "add", "carl", "--qwen3", speaking_dir, "--wav", ref_wav, env=env)
    assert (run.code, run.stderr) == (2, f"epub2audio: error: --qwen3 {Path(speaking_dir).resolve()} is a CustomVoice "
                                         "folder (built-in speakers); --wav and --text clone a voice with a Base folder\n")
    short = tmp_path / "short.wav"
    sf.write(str(short), reference_audio(0.1, seed=1), 24000, subtype="PCM_16")
    run = epub2audio("voice", "add", "carl", "--qwen3", speaking_base_dir, "--wav", short, env=env)
    assert (run.code, run.stderr) == (2, "epub2audio: error: the reference audio is 0.10 s long; it must be 0.5 to 30 s\n")
    noise = tmp_path / "noise.wav"
    noise.write_bytes(b"RIFF not audio")
    run = epub2audio("voice", "add", "carl", "--qwen3", speaking_base_dir, "--wav", noise, "--text", REF_TEXT, env=env)
    assert run.code == 2 and run.stderr.count("\n") == 1
    assert run.stderr.startswith(f"epub2audio: error: cannot read reference audio {noise}: ")
    assert sorted(p.name for p in voices.iterdir()) == ["anna", "bob"]

    # each prompt has its own model id (so its own segment keys); the same voice says the same bytes
    from epub2audio.voices.qwen3tts.voice import Qwen3Voice

    anna = Qwen3Voice.load_clone(speaking_base_dir, voices / "anna", name="qwen3:anna", device="cpu")
    bob = Qwen3Voice.load_clone(speaking_base_dir, voices / "bob", name="qwen3:bob", device="cpu")
    ids = [v.info.model_id for v in (anna, bob)]
    assert ids[0] != ids[1] and all("+clone-" in i and i.endswith("+torch:fp32") for i in ids)
    assert ids[0].split("+")[0] == ids[1].split("+")[0]  # the same weights
    said = anna.synthesize("Fluke.", seed=7, language="en")
    assert len(said) > 0 and said == anna.synthesize("Fluke.", seed=7, language="en")
    assert bob.synthesize("Fluke.", seed=7, language="en") != said  # the x-vector-only prompt: another voice


@pytest.mark.slow
def test_a_cloned_voice_converts_a_chapter_resumed_and_regenerated_byte_identical(speaking_base_dir, ref_wav, tmp_path, env):
    run = without_runtimes("voice", "add", "anna", "--qwen3", speaking_base_dir, "--wav", ref_wav, "--text", REF_TEXT,
                           env=env)
    assert run.code == 0, run.stderr
    reference = tmp_path / "reference.m4b"
    run = without_runtimes(GLOSSARY, "-o", reference, "--chapters", CHAPTER, "--voice", "qwen3:anna", "--progress",
                           "json", "--work-dir", tmp_path / "job", "--no-verify", env=env)  # random weights do not speak
    assert run.code == 0, run.stderr
    voice = run.events("voice")[0]
    assert (voice["name"], voice["sample_rate"], voice["backend"], voice["precision"]) == (
        "qwen3:anna", 24000, "torch", "fp32")
    assert voice["model_id"].startswith("qwen3tts-") and "+clone-" in voice["model_id"]
    db = sqlite3.connect(tmp_path / "job" / "job.sqlite3")
    assert set(db.execute("SELECT voice, model_id, sample_rate FROM segments")) == {
        ("qwen3:anna", voice["model_id"], 24000)}
    db.close()
    texts = _texts(tmp_path / "job")
    assert len(texts) >= 3 and run.events("done")[0]["segments_rendered"] == len(texts)

    # killed while its last segment is rendered, then resumed: the same bytes
    out = tmp_path / "resumed.m4b"
    gate = Gate(tmp_path / "gate", texts[-1][:12])
    args = [GLOSSARY, "-o", out, "--chapters", CHAPTER, "--voice", "qwen3:anna", "--work-dir", tmp_path / "job2",
            "--no-verify", "--progress", "json"]
    proc = subprocess.Popen([sys.executable, "-m", "epub2audio.cli", *map(str, args)], stdout=subprocess.PIPE,
                            text=True, env={**env, "EPUB2AUDIO_FAULTS": gate.faults})
    gate.wait_held(alive=lambda: proc.poll() is None)
    proc.kill()
    proc.wait()
    assert not out.exists()
    run = epub2audio(*args, env=env)
    assert run.code == 0, run.stderr
    assert 1 <= run.events("plan")[0]["cached"] < len(texts)
    assert out.read_bytes() == reference.read_bytes()

    run = epub2audio("regen", out, "--segment", f"{CHAPTER}.2", "--work-dir", tmp_path / "job2", env=env)
    assert run.code == 0, run.stderr
    assert "re-made: identical to the stored audio" in run.stdout
    assert out.read_bytes() == reference.read_bytes()
