"""Which backend runs the Qwen3-TTS Talker and Code Predictor (qwen3tts/backends.py)."""

from __future__ import annotations

import pytest

from epub2audio.voices.cosyvoice3.backends import PlatformInfo
from epub2audio.voices.qwen3tts.backends import build_talker_and_code_predictor, choose_backend

MAC = PlatformInfo("Darwin", "arm64")
INTEL_MAC = PlatformInfo("Darwin", "x86_64")
LINUX = PlatformInfo("Linux", "x86_64")


def test_auto_is_mlx_on_apple_silicon_only_and_torch_elsewhere():
    assert choose_backend("auto", MAC, have_mlx=True) == "mlx"
    assert choose_backend("auto", MAC, have_mlx=False) == "torch"
    assert choose_backend("auto", INTEL_MAC, have_mlx=True) == "torch"
    assert choose_backend("auto", LINUX, have_mlx=True) == "torch"
    assert choose_backend("torch", MAC, have_mlx=True) == "torch"
    assert choose_backend("mlx", LINUX, have_mlx=True) == "mlx"
    # ONNX Runtime only when asked for (its Talker step is faster, a whole frame barely: backends.py)
    assert choose_backend("onnx", LINUX) == "onnx"


def test_refusals_are_one_clear_line():
    with pytest.raises(ValueError, match="needs the mlx and mlx-lm packages"):
        choose_backend("mlx", MAC, have_mlx=False)
    with pytest.raises(ValueError, match="one of auto, mlx, onnx, torch; got 'cuda'"):
        choose_backend("cuda", LINUX)


def test_build_gives_each_backends_own_stages(tiny_checkpoint):
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.talker import Talker

    talker, cp = build_talker_and_code_predictor(tiny_checkpoint, "auto", platform=LINUX)
    assert type(talker) is Talker and type(cp) is CodePredictor
    pytest.importorskip("mlx.core")
    pytest.importorskip("mlx_lm")
    from epub2audio.voices.qwen3tts import code_predictor_mlx, talker_mlx

    talker, cp = build_talker_and_code_predictor(tiny_checkpoint, "mlx")
    assert type(talker) is talker_mlx.Talker and type(cp) is code_predictor_mlx.CodePredictor
