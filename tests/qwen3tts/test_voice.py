"""The Qwen3-TTS voice on tiny random folders: the text ids it feeds, the language it asks for, its
seeds, its PCM, and its length cap on a folder that loops."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
import torch

from epub2audio.errors import InputError
from epub2audio.voices.base import LengthCapReached
from epub2audio.voices.qwen3tts.generate import generate
from epub2audio.voices.qwen3tts.text import language_name, load_text_tokenizer, spoken_codes
from epub2audio.voices.qwen3tts.voice import Qwen3Voice, pcm16

from .conftest import LOOP_CODE, LOOP_FRAMES
from .random_weights import ASSISTANT, LANGUAGES, SPECIAL_TOKENS

TEXT = "The morning was cold."


@pytest.fixture(scope="module")
def voice(speaking_dir):
    return Qwen3Voice.load(speaking_dir, "Ryan", device="cpu", threads=1)


def test_the_tiny_tokenizer_has_the_real_special_ids(tiny_checkpoint):
    tok = load_text_tokenizer(tiny_checkpoint.paths.model_dir, tiny_checkpoint.text_ids)
    assert {i: tok.token_id(t) for i, t in SPECIAL_TOKENS.items()} == {i: i for i in SPECIAL_TOKENS}
    assistant = tok.token_id(ASSISTANT)
    ids = tok.encode("Hello world.")
    # upstream's slices: role = ids[:3], text = ids[3:-5], suffix = ids[-5:]
    assert ids[:3] == [151644, assistant, 10] and ids[-5:] == [151645, 10, 151644, assistant, 10]
    assert all(i < 1000 for i in ids[3:-5])  # the toy BPE's ordinary pieces
    assert tok.encode("a <tts_pad> b")[4:-5].count(151671) == 1  # a special token in the text is one id


def test_a_tokenizer_that_numbers_the_special_tokens_otherwise_is_refused(tiny_dir, tmp_path):
    bad = tmp_path / "m"
    shutil.copytree(tiny_dir, bad)
    vocab = json.loads((bad / "vocab.json").read_text(encoding="utf-8"))
    (bad / "vocab.json").write_text(json.dumps({k: v for k, v in vocab.items() if v < 1000}), encoding="utf-8")
    with pytest.raises(InputError, match=r"the tokenizer's special tokens do not have config.json's ids "
                                         r"\(<\|im_start\|> is \d+, "):
        Qwen3Voice.load(bad, "ryan", device="cpu")


def test_languages_follow_upstreams_rule():
    assert language_name("en-GB", LANGUAGES) == "english"
    assert language_name("pt_BR", LANGUAGES) == "portuguese"
    assert language_name("ZH-Hant", LANGUAGES) == "chinese"
    assert [language_name(t, LANGUAGES) for t in (None, "", "nl", "ar", "x-unknown")] == ["auto"] * 5
    # a language the folder lacks is auto too, and a dialect is never asked for (the speaker picks it)
    assert language_name("fr", {"english": 2050}) == "auto"
    assert spoken_codes(LANGUAGES) == ["en", "zh", "de", "it", "pt", "es", "ja", "ko", "fr", "ru"]


def test_codes_are_generate_with_the_segment_seed_speaker_and_language(voice):
    ck = voice.checkpoint
    ids = voice.tokenizer.encode(TEXT)
    for seed, tag, name in ((0, "en-US", "english"), (3, "nl", "auto"), (3, None, "auto")):
        expected = generate(voice.talker, voice.code_predictor, ids, ck.text_ids, ck.generation,
                            torch.Generator().manual_seed(seed), speaker="ryan", language=name)
        assert not expected.capped
        assert voice.codes(TEXT, seed, tag) == expected.frames
    # the language id is in the prompt (seed 0: 16 frames against 28; seed 3 happens to draw the same 3 frames)
    assert voice.codes(TEXT, 0, "en") != voice.codes(TEXT, 0, "nl")


def test_synthesize_is_the_decoded_codes_as_int16_and_depends_only_on_the_seed(voice):
    frames = voice.codes(TEXT, 1, "en")
    pcm = voice.synthesize(TEXT, 1, "en")
    assert len(pcm) == 2 * 1920 * len(frames)
    assert pcm == pcm16(voice.decode_audio(frames))
    threads = torch.get_num_threads()
    try:  # a regen runs on one thread, a job on its budget: the same bytes
        for n in (2, 3, 4):
            torch.set_num_threads(n)
            assert voice.synthesize(TEXT, 1, "en") == pcm
    finally:
        torch.set_num_threads(threads)
    voice.synthesize("Something else entirely.", 2, "en")  # nothing carries over between calls
    assert voice.synthesize("  " + TEXT + " ", 1, "en") == pcm
    assert voice.synthesize(TEXT, 2, "en") != pcm
    assert voice.synthesize("   ", 1) == bytes(2 * 4800)  # 0.2 s of silence


def test_model_id_and_refusals(voice, speaking_dir, tiny_dir, tmp_path):
    mid = voice.info.model_id
    assert mid.startswith("qwen3tts-") and mid.endswith("+speaker-ryan+torch:fp32")
    assert voice.info.name == "qwen3:ryan" and voice.info.sample_rate == 24000
    other = Qwen3Voice.load(tiny_dir, "ryan", device="cpu", length_cap="upstream")
    assert other.info.model_id.split("+")[0] != mid.split("+")[0]  # other weights, other id
    assert other.info.model_id.endswith("+cap-upstream")
    with pytest.raises(InputError) as e:
        Qwen3Voice.load(speaking_dir, "nobody", device="cpu")
    assert str(e.value) == (f"the Qwen3-TTS folder {speaking_dir.name} has no speaker 'nobody'; its speakers: "
                            "aiden, dylan, eric, ono_anna, ryan, serena, sohee, uncle_fu, vivian")
    base = tmp_path / "base"
    shutil.copytree(tiny_dir, base)
    cfg = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps({**cfg, "tts_model_type": "base"}))
    with pytest.raises(InputError, match="is a Qwen3-TTS base folder; built-in speakers need a CustomVoice folder$"):
        Qwen3Voice.load(base, "ryan", device="cpu")


def test_a_looping_folder_reaches_the_cap_and_is_never_passed_on(loop_dir):
    """The folder's Talker always prefers one code and never says eos: a runaway. Under the tight
    cap (a job's) it raises instead of returning the frames; under upstream's bound it returns
    exactly what upstream keeps, all of it the preferred code."""
    tight = Qwen3Voice.load(loop_dir, "ryan", device="cpu", threads=1)
    assert tight.frame_cap(tight.tokenizer.encode("Hi.")) == LOOP_FRAMES  # min(T_config, max(75, 6 n))
    with pytest.raises(LengthCapReached, match=f"^the speech reached the length cap of {LOOP_FRAMES} frames "
                                               r"\(1.6 s\) before the end of the text$"):
        tight.synthesize("Hi.", 0, "en")
    upstream = Qwen3Voice.load(loop_dir, "ryan", device="cpu", threads=1, length_cap="upstream")
    frames = upstream.codes("Hi.", 0, "en")
    assert len(frames) == LOOP_FRAMES - 1 and {f[0] for f in frames} == {LOOP_CODE}


def test_streaming_option_is_upstreams_other_layout_and_named_in_the_model_id(voice, speaking_dir):
    """qwen3_streaming = true: the streaming prompt (upstream's non_streaming_mode=False), another
    reading from the same seed, named in the id; false is the default (upstream's) and its id."""
    ck = voice.checkpoint
    streamed = Qwen3Voice.load(speaking_dir, "ryan", device="cpu", threads=1, streaming=True)
    assert streamed.info.model_id == voice.info.model_id + "+streaming"
    assert Qwen3Voice.load(speaking_dir, "ryan", device="cpu", threads=1, streaming=False).info.model_id == voice.info.model_id
    ids = voice.tokenizer.encode(TEXT)
    expected = generate(voice.talker, voice.code_predictor, ids, ck.text_ids, ck.generation,
                        torch.Generator().manual_seed(0), speaker="ryan", language="english", streaming=True)
    assert streamed.codes(TEXT, 0, "en") == expected.frames != voice.codes(TEXT, 0, "en")
    # a clone's default is the streaming layout (generate_voice_clone's), so there the tag is the other one
    from epub2audio.voices.qwen3tts.voice import text_layout

    assert text_layout("base", None) == text_layout("base", True) == (True, "")
    assert text_layout("base", False) == (False, "+non-streaming")
    assert text_layout("custom_voice", None) == (False, "")


def test_qwen3_streaming_reaches_qwen3_voices_only_and_must_be_a_bool(tmp_path, monkeypatch):
    """config.toml's qwen3_streaming is routed to a Qwen3-TTS voice's options as `streaming`
    (absent: not passed, so the voice takes upstream's default); a CosyVoice3 voice never sees it."""
    from epub2audio.errors import InputError
    from epub2audio.voices import catalog

    monkeypatch.setattr(catalog, "_qwen3_folder_of", lambda name: (type("F", (), {"model_dir": tmp_path, "name": "tiny"})(), "ryan"))
    monkeypatch.setattr(catalog, "qwen3_clone", lambda name: None)
    extra = {"device": "cpu", "length_cap": "tight", "llm_backend": "auto"}
    plain = catalog.resolve("qwen3:tiny:ryan", config={}, extra=extra)
    assert plain.options["extra"] == {"device": "cpu", "length_cap": "tight", "backend": "auto"}
    streamed = catalog.resolve("qwen3:tiny:ryan", config={"qwen3_streaming": True}, extra=extra)
    assert streamed.options["extra"] == {"device": "cpu", "length_cap": "tight", "backend": "auto", "streaming": True}
    with pytest.raises(InputError, match=r"^config.toml: qwen3_streaming must be true or false, not 'yes'$"):
        catalog.resolve("qwen3:tiny:ryan", config={"qwen3_streaming": "yes"}, extra=extra)


def test_a_compressed_folder_reads_through_the_voice(voice, speaking_dir, tmp_path):
    """`epub2audio model compress` output loaded by the voice, as a worker loads it: the lossless
    forms (weights as stored, pruned vocabulary) give the uncompressed folder's bytes; int8 stays
    within the bound its logits were measured at, and each folder has its own model id."""
    from epub2audio.voices.qwen3tts.compress import compress_folder

    compress_folder(speaking_dir, tmp_path / "lossless", llm="bf16", vocab=("en",))
    lossless = Qwen3Voice.load(tmp_path / "lossless", "Ryan", device="cpu", threads=1)
    assert lossless.synthesize(TEXT, 1, "en") == voice.synthesize(TEXT, 1, "en")
    if importlib.util.find_spec("mlx") and importlib.util.find_spec("mlx_lm"):  # the pruned table read on the host
        on_mlx = Qwen3Voice.load(tmp_path / "lossless", "Ryan", device="cpu", threads=1, backend="mlx")
        assert on_mlx.synthesize(TEXT, 1, "en") == voice.synthesize(TEXT, 1, "en")
    assert lossless.info.model_id != voice.info.model_id  # other files, other id (the audio may not differ)
    compress_folder(speaking_dir, tmp_path / "int8", llm="int8", vocab=("en",))
    int8 = Qwen3Voice.load(tmp_path / "int8", "Ryan", device="cpu", threads=1)
    assert int8.info.model_id not in (voice.info.model_id, lossless.info.model_id)
    ids = voice.tokenizer.encode(TEXT)
    from epub2audio.voices.qwen3tts.generate import build_prompt

    def log_probs(v):
        prompt, trailing, _ = build_prompt(v.talker, ids, v.checkpoint.text_ids, speaker="ryan", language="english")
        with torch.inference_mode():
            return torch.log_softmax(v.talker(torch.cat([prompt, trailing], dim=1)), -1)

    reference, quantised = log_probs(voice), log_probs(int8)
    kl = float((reference.exp() * (reference - quantised)).sum(-1).mean())
    assert 0 < kl < 0.005, kl  # test_compress.py measured 0.0008 on its folder
    assert len(int8.synthesize(TEXT, 1, "en")) > 0
