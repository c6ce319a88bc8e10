"""CosyVoice3Voice end to end on the tiny random-weight model: determinism and the Voice contract."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import epub2audio
from epub2audio.errors import InputError
from epub2audio.voices.cosyvoice3 import profile as pr
from epub2audio.voices.cosyvoice3.voice import SAMPLE_RATE, CosyVoice3Voice

from . import fixtures as fx

TEXT_A = "Once upon a time there were three little pigs."
TEXT_B = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def profile_dir(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("profile")
    wav = fx.write_sine_wav(d / "anna.wav", seconds=1.2, sample_rate=24000)
    return pr.save_profile(pr.make_profile(tiny_model_dir, wav, "Hello there."), d / "anna")


@pytest.fixture(scope="module")
def voice(tiny_model_dir, profile_dir):
    return CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=60, llm_backend="torch")


def test_info(voice, tiny_model_dir):
    from epub2audio.voices.cosyvoice3.checkpoint import compute_model_id, check_layout

    i = voice.info
    assert i.name == "cosyvoice3:anna" and i.narrator == "CosyVoice3 (anna)"
    assert (i.sample_rate, i.backend, i.precision) == (24000, "torch", "fp32")
    assert i.model_id.startswith(compute_model_id(check_layout(tiny_model_dir)) + "+profile-")
    assert i.versions == {"torch": torch.__version__, "epub2audio": epub2audio.__version__}


def test_same_seed_same_bytes_and_seeds_differ(voice):
    a = voice.synthesize(TEXT_A, seed=7)
    assert isinstance(a, bytes) and len(a) > 0 and len(a) % (2 * 960) == 0  # whole tokens: 2 frames x 480
    assert voice.synthesize(TEXT_A, seed=7) == a
    assert voice.synthesize(TEXT_A, seed=8) != a
    pcm = np.frombuffer(a, dtype="<i2")
    assert np.abs(pcm).max() <= round(0.99 * 32767)


def test_segment_independent_of_history(tiny_model_dir, profile_dir, voice):
    b_after_a = (voice.synthesize(TEXT_A, seed=1), voice.synthesize(TEXT_B, seed=2))[1]
    fresh = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=60, llm_backend="torch")
    assert fresh.synthesize(TEXT_B, seed=2) == b_after_a


def test_global_rng_is_neither_read_nor_advanced(voice):
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a = voice.synthesize(TEXT_B, seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(999)
    assert voice.synthesize(TEXT_B, seed=3) == a


def test_flow_and_vocoder_consume_no_randomness(voice):
    tokens = voice.speech_tokens(TEXT_A, seed=5)
    assert tokens and all(0 <= t < 6561 for t in tokens)
    state = torch.get_rng_state()
    w1 = voice.render(tokens)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(42)
    w2 = voice.render(tokens)
    assert w1.shape == (1, 960 * len(tokens)) and torch.equal(w1, w2)


def test_empty_text_gives_short_silence(voice):
    pcm = voice.synthesize("   ", seed=0)
    assert len(pcm) == 2 * int(0.2 * SAMPLE_RATE) and not any(pcm)


def test_no_tokens_gives_silence_not_a_crash(voice, monkeypatch):
    monkeypatch.setattr(voice, "speech_tokens", lambda text, seed: [])
    pcm = voice.synthesize(TEXT_A, seed=0)
    assert len(pcm) == 2 * int(0.2 * SAMPLE_RATE) and not any(pcm)


def test_profile_from_another_model_is_refused(tiny_model_dir, profile_dir, tmp_path):
    other = fx.write_tiny_checkpoint(tmp_path / "other", seed=1)
    with pytest.raises(InputError, match="re-create the profile"):
        CosyVoice3Voice.load(other, profile_dir)


def test_pcm_conversion_rounds_and_clips():
    from epub2audio.voices.cosyvoice3.voice import pcm16

    x = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1.5 / 32767])
    assert np.frombuffer(pcm16(x), "<i2").tolist() == [0, 16384, -16384, 32767, -32767, 32767, -32768, 2]


def test_audio_does_not_depend_on_the_thread_count(voice):
    """Same tokens at 1 and 2 torch threads give the same waveform bit for bit (HiFT pins its
    thread-dependent ops to one thread, hift.one_thread)."""
    import torch

    tokens = voice.speech_tokens("Hello there, thread count.", 5)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = voice.render(tokens)
        torch.set_num_threads(2)
        two = voice.render(tokens)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)
    assert torch.get_num_threads() == before


def test_the_static_decode_step_is_part_of_the_voice_and_reads_the_same_tokens(tiny_model_dir, profile_dir, voice):
    """--llm-step static (the CUDA-graph step, llm_static.py) on the CPU: another model id, since its
    attention sums over a padded cache, and on these seeds the same speech tokens as the dynamic step."""
    static = CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=60, llm_backend="torch",
                                  llm_step="static")
    assert voice.llm.step == "dynamic"  # "auto" off CUDA
    assert static.info.model_id == voice.info.model_id + "+step-static"
    for seed in (7, 8, 1986):
        assert static.speech_tokens(TEXT_A, seed) == voice.speech_tokens(TEXT_A, seed)
    with pytest.raises(ValueError, match="decode step"):
        CosyVoice3Voice.load(tiny_model_dir, profile_dir, llm_backend="torch", llm_step="graph")
