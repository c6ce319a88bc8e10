"""A foreign passage on CosyVoice3: the language reaches the voice and the LLM input is as the
reference says (no language tokens exist; the text alone tells the language)."""

from __future__ import annotations

import pytest

from epub2audio.voices.cosyvoice3 import frontend as fe
from epub2audio.voices.cosyvoice3 import profile as pr
from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

from . import fixtures as fx

FRENCH = "Le Prince d'Aquitaine à la tour abolie."


@pytest.fixture(scope="module")
def voice(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("profile")
    wav = fx.write_sine_wav(d / "anna.wav", seconds=1.2, sample_rate=24000)
    profile_dir = pr.save_profile(pr.make_profile(tiny_model_dir, wav, "Hello there."), d / "anna")
    return CosyVoice3Voice.load(tiny_model_dir, profile_dir, max_tokens_per_segment=40, llm_backend="torch")


def test_french_segment_llm_input_is_the_zero_shot_prompt_then_its_text(voice, monkeypatch):
    seen = []
    start = voice.llm.start_decoding

    def spy(text_ids, prompt_speech_tokens):
        seen.append(list(text_ids))
        return start(text_ids, prompt_speech_tokens)

    monkeypatch.setattr(voice.llm, "start_decoding", spy)
    french = voice.synthesize(FRENCH, 11, language="fr")
    plain = voice.synthesize(FRENCH, 11)
    prompt = voice.profile.prompt_text_ids.tolist()
    expected = prompt + voice.tokenizer.encode(FRENCH)
    assert seen == [expected, expected]
    assert french == plain  # so the store keys a CosyVoice3 segment without its language
    # the zero-shot prompt: system text, <|endofprompt|>, the transcript, and nothing after it
    assert prompt == voice.tokenizer.encode(fe.zero_shot_prompt_text("Hello there."))
    assert expected.count(voice.tokenizer.endofprompt_id) == 1
    # a CosyVoice-1 style tag is no token of this vocabulary: it would be read as text pieces
    assert len(voice.tokenizer.encode("<|fr|>")) > 1
