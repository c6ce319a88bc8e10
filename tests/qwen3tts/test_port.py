"""The Qwen3-TTS port on a tiny random folder: loading, refusing, and each stage's self-consistency."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from epub2audio.errors import InputError
from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
from epub2audio.voices.qwen3tts.decoder import Decoder
from epub2audio.voices.qwen3tts.talker import Talker


def test_loads_the_official_layout(tiny_checkpoint):
    ck = tiny_checkpoint
    assert ck.model_kind == "custom_voice"
    assert ck.talker_args.mrope_section == (4, 2, 2) and ck.talker_args.mrope_interleaved
    assert ck.speakers["ryan"] == 3061 and ck.talker_args.codec_language_id["english"] == 2050
    assert ck.generation.top_k == 50 and ck.generation.repetition_penalty == 1.05
    assert ck.text_ids["tts_bos_token_id"] == 151672
    assert ck.decoder_args.total_upsample == 1920
    assert all(k.startswith("talker.") for k in ck.state_dict)


def test_refuses_a_missing_file_in_one_line(tiny_dir, tmp_path):
    bad = tmp_path / "m"
    shutil.copytree(tiny_dir, bad)
    (bad / "speech_tokenizer" / "model.safetensors").unlink()
    with pytest.raises(InputError) as e:
        load_checkpoint(bad)
    assert str(e.value) == f"{bad} is not a complete Qwen3-TTS model directory; missing: speech_tokenizer/model.safetensors"


def test_refuses_a_config_that_disagrees_with_the_weights(tiny_dir, tmp_path):
    bad = tmp_path / "m"
    shutil.copytree(tiny_dir, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["talker_config"]["num_hidden_layers"] = 3
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError) as e:
        load_checkpoint(bad)
    assert str(e.value).startswith("model.safetensors does not match a Qwen3-TTS talker with the dimensions of config.json: 11 missing key(s): talker.model.layers.2.")
    assert "\n" not in str(e.value)


def test_refuses_another_model_type(tiny_dir, tmp_path):
    bad = tmp_path / "m"
    shutil.copytree(tiny_dir, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["model_type"] = "qwen2"
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match=r"^config.json says model_type 'qwen2', not 'qwen3_tts': not a Qwen3-TTS model$"):
        load_checkpoint(bad)


def test_talker_session_equals_full_recompute(tiny_checkpoint):
    ck = tiny_checkpoint
    talker = Talker.from_state_dict(ck.talker_args, ck.state_dict)
    g = torch.Generator().manual_seed(1)
    prompt = torch.randn(1, 9, ck.talker_args.hidden_size, generator=g)
    steps = torch.randn(4, ck.talker_args.hidden_size, generator=g)
    step = talker.start_decoding(prompt)
    got = [step(None)[0]] + [step(s)[0] for s in steps]
    with torch.inference_mode():
        full = talker(torch.cat([prompt, steps[None]], dim=1))[0, 8:]
    assert torch.allclose(torch.stack(got), full, atol=1e-5, rtol=0)
    with pytest.raises(RuntimeError, match="already run its prompt"):
        step(None)


def test_code_predictor_draws_follow_its_teacher_forced_logits(tiny_checkpoint):
    ck = tiny_checkpoint
    cp = CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
    g = torch.Generator().manual_seed(2)
    hidden, first = torch.randn(32, generator=g), torch.randn(32, generator=g)
    seen: list[torch.Tensor] = []

    def pick(logits: torch.Tensor) -> int:
        seen.append(logits)
        return int(logits.argmax())

    codes = cp.predict(hidden, first, pick)
    assert len(codes) == 15 and all(0 <= c < 2048 for c in codes)
    with torch.inference_mode():
        forced = cp(hidden, first, codes)
    assert forced.shape == (15, 2048)
    assert torch.allclose(torch.stack(seen), forced, atol=1e-5, rtol=0)


def test_decoder_gives_1920_samples_a_frame_and_chunks_seamlessly(tiny_checkpoint):
    ck = tiny_checkpoint
    dec = Decoder.from_state_dict(ck.decoder_args, ck.decoder_state_dict)
    codes = torch.randint(0, 2048, (7, 16), generator=torch.Generator().manual_seed(3))
    wav = dec.decode(codes)
    assert wav.shape == (7 * 1920,) and wav.dtype == torch.float32
    assert float(wav.abs().max()) <= 1.0 and float(wav.abs().max()) > 0
    assert torch.equal(dec.decode(codes), wav)  # deterministic
