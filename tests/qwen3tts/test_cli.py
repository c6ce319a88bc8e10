"""Qwen3-TTS through the front door: `voice add --qwen3`, `voice list`, `--voice qwen3:SPEAKER`, a
corpus chapter converted end to end in workers, resumed after a kill and re-made, byte-identical;
a folder that loops is re-split and never passed on."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import Run, epub2audio, story_epub
from epub2audio.store import SegmentStore
from test_convert import BLOCKER
from worker_gate import Gate

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "tests" / "corpus" / "whaling-glossary-dictionary-a-z-epub3.epub"
CHAPTER = "6"  # "F": a heading and two short paragraphs
SPEAKERS = "aiden, dylan, eric, ono_anna, ryan, serena, sohee, uncle_fu, vivian"


@pytest.fixture
def env(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("")  # the job's defaults: the tight length cap, which re-splits
    return {**os.environ, "EPUB2AUDIO_CACHE_DIR": str(tmp_path / "cache"), "EPUB2AUDIO_DATA_DIR": str(tmp_path / "data"),
            "EPUB2AUDIO_CONFIG": str(config), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def test_voice_add_lists_the_speakers_and_voice_list_shows_them(speaking_dir, tiny_dir, tmp_path, env):
    run = epub2audio("voice", "add", "tiny", "--qwen3", speaking_dir, env=env)
    assert run.code == 0, run.stderr
    assert run.stdout == (f"Saved Qwen3-TTS folder tiny (en, zh, de, it, pt, es, ja, ko, fr, ru; speakers: {SPEAKERS}). "
                          "Read with --voice qwen3:SPEAKER.\n")
    assert epub2audio("voice", "add", "other", "--qwen3", tiny_dir, env=env).code == 0  # added later: the default
    rows = [r.split() for r in epub2audio("voice", "list", env=env).stdout.splitlines()]
    qwen3 = [r for r in rows if r[0].startswith("qwen3:")]
    names = [r[0] for r in qwen3]
    assert names == [f"qwen3:{s}" for s in SPEAKERS.split(", ")] + [f"qwen3:tiny:{s}" for s in SPEAKERS.split(", ")]
    assert qwen3[0][1:5] == ["Qwen3-TTS", "en,zh,de,it,pt,es,ja,ko,fr,ru", "24000", "Hz"]
    assert " ".join(qwen3[0][5:]) == "not measured built-in speaker aiden of your CustomVoice folder other"
    assert rows[-1][0] == "tone"


def test_unknown_speakers_folders_and_a_base_folder_are_refused_in_one_line(speaking_dir, tmp_path, env):
    book = story_epub(tmp_path, [("One", ["Nobody spoke."])])
    run = epub2audio(book, "--voice", "qwen3:ryan", env=env)
    assert run.code == 2 and run.stderr == (
        "epub2audio: error: voice qwen3:ryan: no Qwen3-TTS folder is registered; add one with `epub2audio voice "
        "add NAME --qwen3 MODEL_DIR` (a Qwen3-TTS-12Hz CustomVoice folder)\n")
    assert epub2audio("voice", "add", "tiny", "--qwen3", speaking_dir, env=env).code == 0
    run = epub2audio(book, "--voice", "qwen3:nobody", env=env)
    assert run.code == 2 and run.stderr == (
        f"epub2audio: error: voice qwen3:nobody: the Qwen3-TTS folder tiny has no speaker 'nobody'; its speakers: {SPEAKERS}\n")
    run = epub2audio(book, "--voice", "qwen3:elsewhere:ryan", env=env)
    assert run.code == 2 and run.stderr == (
        "epub2audio: error: voice qwen3:elsewhere:ryan: no Qwen3-TTS folder named 'elsewhere' (registered: tiny)\n")
    assert not (tmp_path / "story.m4b").exists()

    run = epub2audio("voice", "add", "wrong", "--qwen3", tmp_path, env=env)
    assert run.code == 2 and run.stderr.count("\n") == 1 and "is not a complete Qwen3-TTS model directory" in run.stderr
    base = tmp_path / "base"
    shutil.copytree(speaking_dir, base)
    cfg = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps({**cfg, "tts_model_type": "base", "talker_config": {
        **cfg["talker_config"], "spk_id": {}, "spk_is_dialect": {}}}))
    wav = tmp_path / "ref.wav"
    wav.write_bytes(b"RIFF")
    run = epub2audio("voice", "add", "anna", "--qwen3", base, "--wav", wav, "--text", "Hello.", env=env)
    # a Base config over CustomVoice weights: the cloning child finds no speech encoder (cloning: test_clone_cli.py)
    assert (run.code, run.stderr) == (2, "epub2audio: error: speech_tokenizer/config.json has no encoder_config\n")
    run = epub2audio("voice", "add", "anna", "--qwen3", base, env=env)
    assert run.code == 2 and "is a Base folder: it has no built-in speakers" in run.stderr
    run = epub2audio("voice", "add", "anna", "--qwen3", speaking_dir, "--wav", wav, env=env)
    assert run.code == 2 and "is a CustomVoice folder (built-in speakers)" in run.stderr
    assert not (tmp_path / "data" / "voices" / "anna").exists()


def _texts(job: Path) -> list[str]:
    store = SegmentStore(job)
    try:
        return [store.segment_row(key)["text"] for _c, _i, key, _p in store.plan()]
    finally:
        store.close()


def without_runtimes(*args, env) -> Run:
    """The command with torch, onnxruntime, mlx, piper and transformers imports made fatal in it
    (its workers and children import them)."""
    proc = subprocess.run([sys.executable, "-c", BLOCKER, *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=1800)  # hang limit
    assert proc.stdout.splitlines()[-1] == "LOADED []", proc.stderr
    return Run(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.slow
def test_a_corpus_chapter_end_to_end_resumed_and_regenerated_byte_identical(speaking_dir, tmp_path, env):
    assert without_runtimes("voice", "add", "tiny", "--qwen3", speaking_dir, env=env).code == 0
    reference = tmp_path / "reference.m4b"
    run = without_runtimes(GLOSSARY, "-o", reference, "--chapters", CHAPTER, "--voice", "qwen3:ryan", "--progress",
                           "json", "--work-dir", tmp_path / "job", "--no-verify", env=env)  # random weights do not speak
    assert run.code == 0, run.stderr
    voice = run.events("voice")[0]
    assert (voice["name"], voice["sample_rate"], voice["backend"], voice["precision"]) == (
        "qwen3:tiny:ryan", 24000, "torch", "fp32")
    assert voice["model_id"].startswith("qwen3tts-") and voice["model_id"].endswith("+speaker-ryan+torch:fp32")
    db = sqlite3.connect(tmp_path / "job" / "job.sqlite3")
    assert set(db.execute("SELECT voice, model_id, sample_rate FROM segments")) == {
        ("qwen3:tiny:ryan", voice["model_id"], 24000)}
    db.close()
    texts = _texts(tmp_path / "job")
    assert len(texts) >= 3 and run.events("done")[0]["segments_rendered"] == len(texts)

    # killed while its last segment is rendered, then resumed: the same bytes
    out = tmp_path / "resumed.m4b"
    gate = Gate(tmp_path / "gate", texts[-1][:12])
    args = [GLOSSARY, "-o", out, "--chapters", CHAPTER, "--voice", "qwen3:ryan", "--work-dir", tmp_path / "job2",
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


@pytest.mark.slow
def test_a_looping_folder_is_re_split_and_never_passed_on(loop_dir, tmp_path, env):
    """Every generation of this folder runs to its cap without eos: each segment is said in
    smaller pieces until one word is left, which fails the job clearly. No M4B holds the noise."""
    assert epub2audio("voice", "add", "loop", "--qwen3", loop_dir, env=env).code == 0
    book = story_epub(tmp_path, [("One", ["Nobody spoke."])])
    out = tmp_path / "story.m4b"
    run = epub2audio(book, "-o", out, "--voice", "qwen3:ryan", "--say-titles", "no", "--progress", "json", env=env)
    assert run.code == 1
    assert len(run.events("split")) == 1  # "Nobody spoke." -> "Nobody", "spoke.": both one word, both fail
    assert run.stderr.strip().splitlines()[-1] == (
        "epub2audio: error: 2 segment(s) failed, e.g. chapter 1 segment 1: the voice reached its length cap on the "
        "single word 'Nobody' (the speech reached the length cap of 20 frames (1.6 s) before the end of the text); "
        "it cannot be said without cutting it. Finished segments are kept; rerun to retry.")
    assert not out.exists()
