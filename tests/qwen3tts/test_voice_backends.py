"""The Qwen3-TTS voice on each backend (voice.py builds its Talker and Code Predictor through
backends.py): on the tiny folders the MLX and ONNX Runtime stages say the torch voice's bytes, a
built-in speaker and a clone alike, under model ids of their own; the job's --llm-backend /
config.toml llm_backend reaches the voice; a bad value is refused in one line, exit 2, before any
work, by a parent process that imports no model runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_run import epub2audio, story_epub
from epub2audio.voices.qwen3tts.voice import Qwen3Voice

from .random_weights import reference_audio
from .test_cli import SPEAKERS

TEXT = "The morning was cold."
SEED = 0  # 16 frames from speaking_dir's ryan, 12 from the ICL clone below
RAN = {"torch": "torch", "onnx": "onnx+torch", "mlx": "mlx+torch"}  # VoiceInfo.backend: the decoder is torch's
RUNTIMES = ("torch", "onnxruntime", "mlx", "piper", "transformers")  # what the parent must never import


def _need_the_runtimes():
    for module in ("onnxruntime", "onnx", "mlx.core", "mlx_lm"):
        pytest.importorskip(module)


@pytest.fixture
def env(tmp_path, monkeypatch, speaking_dir):
    """A settings file, a cache for the ONNX Talker's export, and speaking_dir registered as the
    Qwen3-TTS folder `tiny`, as `voice add tiny --qwen3 DIR` records it (without its child's check)."""
    folder = tmp_path / "data" / "voices" / "tiny"
    folder.mkdir(parents=True)
    (folder / "qwen3.json").write_text(json.dumps({
        "model_dir": str(speaking_dir), "speakers": SPEAKERS.split(", "),
        "languages": ["en", "zh", "de", "it", "pt", "es", "ja", "ko", "fr", "ru"], "added_ns": 1}))
    (tmp_path / "config.toml").write_text("")
    values = {"EPUB2AUDIO_CACHE_DIR": str(tmp_path / "cache"), "EPUB2AUDIO_DATA_DIR": str(tmp_path / "data"),
              "EPUB2AUDIO_CONFIG": str(tmp_path / "config.toml"), "OMP_NUM_THREADS": "1"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return dict(os.environ)


def test_a_speaker_on_onnx_and_mlx_says_the_torch_voices_bytes_under_its_own_id(speaking_dir, env):
    _need_the_runtimes()
    voices = {b: Qwen3Voice.load(speaking_dir, "ryan", device="cpu", threads=1, backend=b) for b in RAN}
    reference = voices["torch"].info.model_id
    assert reference.endswith("+speaker-ryan+torch:fp32")  # the id every job made before backends had
    want = voices["torch"].synthesize(TEXT, SEED, "en")
    assert len(want) == 2 * 1920 * 16
    for backend, ran in RAN.items():
        info = voices[backend].info
        assert (info.backend, info.model_id) == (ran, reference.replace("+torch:fp32", f"+{ran}:fp32"))
        assert voices[backend].synthesize(TEXT, SEED, "en") == want, backend
    assert voices["mlx"].info.versions["mlx"] and voices["onnx"].info.versions["onnxruntime"]


def test_a_clone_on_onnx_and_mlx_says_the_torch_voices_bytes_under_its_own_id(speaking_base_dir, env, tmp_path):
    """In-context cloning: the reference's codes are laid into the prompt through each backend's
    embeddings (generate.build_clone_prompt reads the stages' seam only)."""
    _need_the_runtimes()
    from epub2audio.voices.qwen3tts.clone import make_clone_prompt

    make_clone_prompt(speaking_base_dir, (reference_audio(2.0, seed=1), 24000), TEXT).save(tmp_path / "anna")
    voices = {b: Qwen3Voice.load_clone(speaking_base_dir, tmp_path / "anna", name="qwen3:anna", device="cpu",
                                       threads=1, backend=b) for b in RAN}  # fmt: skip
    reference = voices["torch"].info.model_id
    assert "+clone-" in reference and reference.endswith("+torch:fp32")
    want = voices["torch"].synthesize(TEXT, SEED, "en")
    assert len(want) == 2 * 1920 * 12  # the 12 new frames: the reference's share is cut off after decoding
    for backend, ran in RAN.items():
        assert voices[backend].info.model_id == reference.replace("+torch:fp32", f"+{ran}:fp32")
        assert voices[backend].synthesize(TEXT, SEED, "en") == want, backend


def test_the_llm_backend_flag_and_setting_reach_the_worker_voice(env, tmp_path):
    _need_the_runtimes()
    from epub2audio.cli import convert_parser
    from epub2audio.options import job_options
    from epub2audio.voices.registry import load_voice

    def built(*flags):
        return job_options(convert_parser().parse_args(["b.epub", "--voice", "qwen3:tiny:ryan", *flags]))

    assert built().voice_options["extra"]["backend"] == "auto"
    (tmp_path / "config.toml").write_text('llm_backend = "mlx"\n')
    assert built().voice_options["extra"]["backend"] == "mlx"
    options = built("--llm-backend", "onnx")  # the flag wins over config.toml
    assert options.voice_options["extra"]["backend"] == "onnx"
    voice = load_voice(options.voice, threads=1, options=options.voice_options)  # what a worker does with them
    assert voice.info.backend == "onnx+torch" and voice.info.model_id.endswith("+speaker-ryan+onnx+torch:fp32")


def test_a_bad_backend_is_refused_in_one_line_exit_2_before_any_work(env, tmp_path, monkeypatch):
    book = story_epub(tmp_path, [("One", ["Nobody spoke."])])
    run = epub2audio(book, "--voice", "qwen3:ryan", "--llm-backend", "cuda", env=env)
    assert run.code == 2 and run.stderr.count("\n") == 1
    assert run.stderr.startswith("epub2audio: error: argument --llm-backend: invalid choice: 'cuda'")
    (tmp_path / "config.toml").write_text('llm_backend = "cuda"\n')
    run = epub2audio(book, "--voice", "qwen3:ryan", "--work-dir", tmp_path / "job", env=env)
    assert (run.code, run.stderr) == (2, "epub2audio: error: config.toml: llm_backend must be one of auto, mlx, "
                                         "onnx, torch, not 'cuda'\n")
    assert not (tmp_path / "job").exists()
    # a forced backend whose packages are missing: found out in the parent, without importing anything
    from epub2audio.errors import InputError
    from epub2audio.voices import catalog

    monkeypatch.setattr("epub2audio.voices.qwen3tts.backends.mlx_available", lambda: False)
    with pytest.raises(InputError, match=r"^voice qwen3:ryan: backend 'mlx' needs the mlx and mlx-lm packages, "
                                         r"which are not installed$"):
        catalog.resolve("qwen3:ryan", config={}, extra={"llm_backend": "mlx"})


def test_the_parent_checks_a_forced_backend_without_importing_a_runtime(env):
    """job_options (what the command runs before any work) in a fresh process, each backend forced."""
    _need_the_runtimes()
    code = (
        "import sys\n"
        "from epub2audio.cli import convert_parser\n"
        "from epub2audio.options import job_options\n"
        "for backend in ('torch', 'onnx', 'mlx', 'auto'):\n"
        "    built = job_options(convert_parser().parse_args(['b.epub', '--voice', 'qwen3:ryan', '--llm-backend', backend]))\n"
        "    print(built.voice_options['extra']['backend'])\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({RUNTIMES!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["torch", "onnx", "mlx", "auto", "[]"]
