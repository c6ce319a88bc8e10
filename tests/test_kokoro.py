"""Kokoro-82M (voices/kokoro.py) with the packaged weights: phonemes and ids, chunking at 510,
style rows and blends, the user's own files through `voice add`, and byte-identical audio across
fresh workers, resume and regen."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_run import epub2audio
from epub2audio.errors import InputError
from epub2audio.voices.catalog import official_packs
from epub2audio.voices import kokoro
from epub2audio.worker import protocol

CORPUS = Path(__file__).resolve().parent / "corpus"
SENTENCE = "The old lighthouse keeper climbed the stairs."


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """One data folder for the module: the packaged model is joined (and rewritten) there once."""
    folder = tmp_path_factory.mktemp("kokoro-data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EPUB2AUDIO_DATA_DIR", str(folder))
        patch.setenv("EPUB2AUDIO_CONFIG", str(folder / "no-config.toml"))
        yield folder


@pytest.fixture(scope="module")
def phonemize():
    return kokoro.EnglishPhonemizer(kokoro.vocab())


def fake_npz(path: Path, **packs) -> Path:
    np.savez(path, **{name: np.asarray(p, dtype=np.float32) for name, p in packs.items()})
    return path


# ---- phonemes and chunks ------------------------------------------------------------------------

def test_a_sentence_becomes_exact_phonemes_and_ids(phonemize):
    phonemes = phonemize.known(phonemize(SENTENCE))
    assert phonemes == "ðɪʲ ˈoʊld lˈaɪthaʊs kˈiːpɚ klˈaɪmd ðə stˈɛɹz."
    assert phonemize.ids(phonemes) == [
        81, 102, 164, 16, 156, 57, 135, 54, 46, 16, 54, 156, 43, 102, 62, 50, 43, 135, 61, 16, 53, 156, 51,
        158, 58, 85, 16, 53, 54, 156, 43, 102, 55, 46, 16, 81, 83, 16, 61, 62, 156, 86, 123, 68, 4]


def test_japanese_reads_through_the_packaged_frontend():
    japanese = kokoro.JapanesePhonemizer()
    assert japanese("吾輩は猫である。名前はまだ無い。") == "βaɡahai βa neko de aɾɯ. namae βa mada nai."


@pytest.mark.parametrize("text, language, reads", [
    ("The cat.", None, "en"), ("猫である。", None, "ja"), ("猫である。", "en", "en"), ("The cat.", "ja-JP", "ja"),
    ("道可道", None, "en"),  # kanji alone may be Chinese: only kana or a language tag make it Japanese
])
def test_which_phonemiser_reads_a_segment(text, language, reads):
    assert kokoro.reads_as(text, language) == reads


def test_affricates_are_joined_into_the_symbols_of_upstreams_vocabulary(phonemize):
    """espeak writes tʃ dʒ ts dz as two symbols; Kokoro's vocabulary (upstream's config.json, as
    kokoro-onnx ships it) holds each affricate as one, which is what the model was trained on."""
    table = kokoro.vocab()
    assert all(joined in table for joined in kokoro.AFFRICATES.values())
    english = phonemize.known(phonemize("The church judge sat with the cats and their beds."))
    assert "ʧˈɜːʧ ʤˈʌʤ" in english and "tʃ" not in english and "dʒ" not in english
    assert "kˈæts" in english and "bˈɛdz" in english  # English ts and dz are two sounds
    italian = kokoro.EnglishPhonemizer(table, "it")
    assert italian.known(italian("La pizza è a zero.")) == "la pˈiʦːa e a ʣˈɛro."


@pytest.mark.parametrize("style, voice", [
    ("af_heart", "en-us"), ("bf_emma", "en-gb-x-rp"), ("ff_siwis", "fr"), ("if_sara", "it"), ("em_alex", "es"),
    ("pf_dora", "pt-br"), ("hf_alpha", "hi"), ("zf_xiaobei", "cmn"), ("jm_kumo", "en-us"),
    ("af_sarah:0.3,ff_siwis:0.7", "fr"), ("mine", "en-us"),
])
def test_each_packs_language_gets_its_espeak_voice(style, voice):
    assert kokoro.espeak_voice(style) == voice


def test_espeak_speaks_every_packs_voice():
    """Each voice espeak_voice names is one the bundled espeak-ng accepts (it refuses en-gb)."""
    from piper.phonemize_espeak import EspeakPhonemizer

    espeak = EspeakPhonemizer()
    for voice in sorted(set(kokoro.ESPEAK_VOICES.values())):
        assert espeak.phonemize(voice, "a")
    with pytest.raises(Exception, match="en-gb"):
        espeak.phonemize("en-gb", "a")


def test_symbols_without_an_id_are_left_out_and_ipa_is_composed(phonemize):
    # espeak data decomposes ç (NFD); the table holds the composed symbol. ʘ has no id.
    assert phonemize.known("c\u0327aʘb") == "çab"


def test_pronunciation_markup_reads_its_ipa_or_its_respelling(phonemize):
    assert phonemize("⟦Tom|ipa:tɑm⟧.") == "tɑm"
    assert phonemize("⟦Tom⟧") == phonemize("Tom")


def test_chunks_split_at_the_last_sentence_end_that_fits():
    text = "a" * 300 + ". " + "b" * 150 + "! " + "c" * 200 + "."
    assert [len(c) for c in kokoro.chunks(text)] == [453, 201]
    assert kokoro.chunks(text)[0].endswith("b!") and kokoro.chunks(text)[1] == "c" * 200 + "."


def test_a_closing_quote_stays_with_its_sentence():
    text = "a" * 400 + ".” " + "b" * 200
    assert kokoro.chunks(text) == ["a" * 400 + ".”", "b" * 200]


def test_chunks_fall_back_to_clauses_then_words_then_a_hard_cut():
    clause = "a" * 400 + ", " + "b" * 100 + "; " + "c" * 200
    assert kokoro.chunks(clause) == ["a" * 400 + ", " + "b" * 100 + ";", "c" * 200]
    words = " ".join(["abcdefghi"] * 60)  # 599 characters, a space every 10th
    assert [len(c) for c in kokoro.chunks(words)] == [509, 89]
    assert kokoro.chunks("x" * 1100) == ["x" * 510, "x" * 510, "x" * 80]


def test_no_chunk_of_a_long_real_paragraph_exceeds_510(phonemize):
    paragraph = " ".join([SENTENCE[:-1] + ", and he lit the lamp at the top of the tower."] * 14)
    phonemes = phonemize.known(phonemize(paragraph))
    pieces = kokoro.chunks(phonemes)
    assert len(phonemes) > 1020 and len(pieces) == 3
    assert all(len(p) <= 510 and p.endswith(".") for p in pieces[:-1])
    assert " ".join(pieces) == phonemes


# ---- style packs --------------------------------------------------------------------------------

def test_style_row_is_upstreams_pack_of_len_minus_one():
    pack = np.arange(510 * 256, dtype=np.float32).reshape(510, 256)
    assert np.array_equal(kokoro.style_row(pack, 1), pack[0:1])
    assert np.array_equal(kokoro.style_row(pack, 45), pack[44:45])
    assert np.array_equal(kokoro.style_row(pack, 510), pack[509:510])
    assert np.array_equal(kokoro.style_row(pack, 600), pack[509:510])  # never past the last row


def test_blend_weights_are_normalised_and_the_sum_is_exact():
    assert kokoro.parse_style("af_sarah:0.6,am_adam:0.4") == [("af_sarah", 0.6), ("am_adam", 0.4)]
    assert kokoro.parse_style("af_sarah:60,am_adam:40") == [("af_sarah", 0.6), ("am_adam", 0.4)]
    assert kokoro.parse_style("a, b") == [("a", 0.5), ("b", 0.5)]  # upstream's plain average
    assert kokoro.parse_style("af_heart") == [("af_heart", 1.0)]
    packs = {"a": np.full((510, 256), 2.0, np.float32), "b": np.full((510, 256), -3.0, np.float32)}
    packs["b"][7] = 5.0
    mixed = kokoro.blend(packs, kokoro.parse_style("a:3,b:1"))
    assert mixed.dtype == np.float32 and mixed.shape == (510, 256)
    assert mixed[0, 0] == 0.75 and mixed[7, 0] == 2.75  # 0.75·2 + 0.25·(−3), 0.75·2 + 0.25·5


@pytest.mark.parametrize("spec, message", [
    ("", "--style '': give NAME or NAME:WEIGHT,NAME:WEIGHT (e.g. af_sarah:0.6,am_adam:0.4)"),
    ("a:0.5,", "--style 'a:0.5,': give NAME or NAME:WEIGHT,NAME:WEIGHT (e.g. af_sarah:0.6,am_adam:0.4)"),
    ("a:x", "--style 'a:x': weight 'x' of a is not a number"),
    ("a:0,b:1", "--style 'a:0,b:1': the weight of a must be above 0"),
    ("a:-1", "--style 'a:-1': the weight of a must be above 0"),
    ("a,a", "--style 'a,a': a is named twice"),
    ("a b", "--style 'a b': 'a b' is not a style name"),
])
def test_bad_style_specs_are_refused(spec, message):
    with pytest.raises(InputError) as caught:
        kokoro.parse_style(spec)
    assert str(caught.value) == message


def test_packaged_packs_are_the_five_speakers_or_the_54_official_ones():
    packs = kokoro.read_packs(kokoro.packaged_voices_file())
    assert {p.shape for p in packs.values()} == {(510, 256)}
    from epub2audio.voices.catalog import KOKORO_STYLES, kokoro_styles, official_packs

    assert KOKORO_STYLES == kokoro.PACKAGED_STYLES
    assert set(KOKORO_STYLES) <= set(packs)
    assert kokoro_styles() == tuple(sorted(packs))  # the parent's list is the packs'
    assert len(packs) == (54 if official_packs() else 5)


# ---- the CLI: voice add / list ------------------------------------------------------------------

def _voice_list_without_a_runtime() -> list[str]:
    blocker = ("import sys\n"
               "class Refuse:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in ('onnxruntime', 'onnx', 'piper', 'torch'):\n"
               "            raise ImportError('the parent must not import ' + name)\n"
               "sys.meta_path.insert(0, Refuse())\n"
               "from epub2audio.cli import main\n"
               "sys.exit(main(['voice', 'list']))\n")
    proc = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["NAME", "FAMILY", "LANGUAGES", "RATE", "SPEED", "ABOUT"]
    assert [line.split()[:5] for line in lines[1:3]] == [["hibari", "hibari", "en", "24000", "Hz"],
                                                         ["joe", "Piper", "en", "22050", "Hz"]]
    return lines


JAPANESE_FIVE = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")


def test_voice_list_names_the_kokoro_family_without_a_runtime(data_dir, without_official_packs):
    kokoro_rows = [line.split()[:5] for line in _voice_list_without_a_runtime() if line.startswith("kokoro:")]
    assert kokoro_rows == [[f"kokoro:{s}", "Kokoro", "en,ja", "24000", "Hz"] for s in JAPANESE_FIVE]


def test_voice_list_names_all_54_official_packs_with_their_languages(data_dir):
    assert official_packs(), "the companion wheel is missing: `make .venv/.kokoro-voices` installs it"
    rows = {line.split()[0]: line.split()[2] for line in _voice_list_without_a_runtime() if line.startswith("kokoro:")}
    assert len(rows) == 54
    # Kokoro's first letter is the speaker's language: American and British English, Spanish, French,
    # Hindi, Italian, Japanese (which reads English too), Brazilian Portuguese, Mandarin.
    by_letter = {"a": "en", "b": "en", "e": "es", "f": "fr", "h": "hi", "i": "it", "j": "en,ja", "p": "pt", "z": "zh"}
    assert {name: by_letter[name[len("kokoro:")]] for name in rows} == rows
    assert [rows[n] for n in ("kokoro:af_heart", "kokoro:ff_siwis", "kokoro:zm_yunxi")] == ["en", "fr", "zh"]


def test_voice_add_kokoro_with_the_users_npz(data_dir, tmp_path):
    rng = np.random.default_rng(3)
    voices = fake_npz(tmp_path / "voices-v1.0.bin.npz", af_heart=rng.standard_normal((510, 1, 256)) * 0.1,
                      am_adam=rng.standard_normal((510, 1, 256)) * 0.1)
    model = kokoro.packaged_model_path()
    run = epub2audio("voice", "add", "mine", "--kokoro", model, "--voices", voices,
                     "--style", "af_heart:0.6,am_adam:0.4", "--speed", "1.1")
    assert (run.code, run.stdout.strip()) == (0, "Saved voice kokoro:mine (0.6 af_heart + 0.4 am_adam, speed 1.1).")
    saved = json.loads((data_dir / "voices" / "mine" / "kokoro.json").read_text())
    assert saved == {"model": str(model), "voices": str(voices), "style": "af_heart:0.6,am_adam:0.4", "speed": 1.1}
    listed = [line.split() for line in epub2audio("voice", "list").stdout.splitlines() if "kokoro:mine" in line]
    assert listed == [["kokoro:mine", "Kokoro", "en,ja", "24000", "Hz", "not", "measured", "your", "Kokoro", "files,", "style",
                       "af_heart:0.6,am_adam:0.4"]]

    from epub2audio.voices.catalog import resolve

    choice = resolve("kokoro:mine", config={}, workers=2)
    assert choice.name == "kokoro:mine" and choice.options == {
        "speed": 1.1, "precision": "int8", "model": str(model), "voices": str(voices),
        "style": "af_heart:0.6,am_adam:0.4"}


def test_the_cli_refuses_a_bad_style_in_one_line(data_dir, tmp_path):
    voices = fake_npz(tmp_path / "v.npz", af_heart=np.zeros((510, 1, 256)))
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not read before the style is checked")
    run = epub2audio("voice", "add", "other", "--kokoro", model, "--voices", voices, "--style", "af_sky:0.5,af_heart")
    assert (run.code, run.stderr) == (2, f"epub2audio: error: {voices}: no style af_sky (it has af_heart)\n")
    run = epub2audio("voice", "add", "other", "--kokoro", model, "--voices", voices, "--style", "af_heart:zero")
    assert (run.code, run.stderr) == (2, "epub2audio: error: --style 'af_heart:zero': weight 'zero' of af_heart "
                                         "is not a number\n")
    run = epub2audio("voice", "add", "other", "--kokoro", model, "--style", "af_heart")
    assert (run.code, run.stderr) == (2, "epub2audio: error: voice add: a Kokoro voice also needs --voices\n")
    assert not (data_dir / "voices" / "other").exists()


def test_an_unknown_kokoro_voice_is_one_line_and_exit_2(data_dir, tmp_path):
    run = epub2audio(tmp_path / "none.epub", "--voice", "kokoro:af_nobody")
    assert run.code == 2
    assert run.stderr.startswith("epub2audio: error: ")


# ---- audio --------------------------------------------------------------------------------------

def synthesize_in_a_fresh_worker(voice: str, options: dict, text: str, seeds: list[int], threads: int = 1) -> list[bytes]:
    """`text` said once per seed, in that order, by one fresh worker process."""
    config = {"voice": voice, "threads": threads, "options": options}
    proc = subprocess.Popen([sys.executable, "-m", "epub2audio.worker.child", json.dumps(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ready, _ = protocol.receive(proc.stdout)
    assert ready["type"] == "ready", ready
    said = []
    for number, seed in enumerate(seeds, 1):
        protocol.send(proc.stdin, {"type": "synthesize", "id": number, "text": text, "seed": seed})
        answer, pcm = protocol.receive(proc.stdout)
        assert answer["type"] == "audio", answer
        said.append(pcm)
    proc.stdin.close()
    proc.wait()
    return said


@pytest.mark.slow
def test_the_same_text_gives_the_same_bytes_in_fresh_workers(data_dir):
    options = {"style": "jm_kumo", "speed": 1.0}
    [first] = synthesize_in_a_fresh_worker("kokoro:jm_kumo", options, SENTENCE, [7])
    # A second fresh worker, with another thread count (a job's workers may run with another than
    # regen's single worker) and another seed first (no random op: the seed is moot), then the same
    # seed after a request (nothing carries over): the same bytes each time. One worker for the
    # three, where each had one of its own (a worker is 4 s of CPU).
    assert len(first) > 2 * 24000
    assert synthesize_in_a_fresh_worker("kokoro:jm_kumo", options, SENTENCE, [8, 7], threads=2) == [first, first]
    [faster] = synthesize_in_a_fresh_worker("kokoro:jm_kumo", {**options, "speed": 1.3}, SENTENCE, [7])
    assert len(faster) < len(first) * 0.9  # the speed setting reaches the model


@pytest.mark.slow
def test_a_blend_of_the_users_packs_loads_and_speaks(data_dir, tmp_path):
    packs = kokoro.read_packs(kokoro.packaged_voices_file(), ["jf_alpha", "jm_kumo"])
    voices = fake_npz(tmp_path / "mine.npz", af_a=packs["jf_alpha"].reshape(510, 1, 256),
                      am_b=packs["jm_kumo"].reshape(510, 1, 256))
    voice = kokoro.load("kokoro:mine", options={"model": str(kokoro.packaged_model_path()), "voices": str(voices),
                                                "style": "af_a:0.5,am_b:0.5"})
    pcm = voice.synthesize("Hello there.", 1)
    assert len(pcm) > 24000 and voice.info.name == "kokoro:mine"
    # The model id is part of every segment key: the style and the speed change it, the name alone does not.
    kumo = kokoro.load("kokoro:jm_kumo").info.model_id
    assert voice.info.model_id != kumo
    assert kokoro.load("kokoro:jm_kumo", options={"speed": 1.2}).info.model_id != kumo
    assert kokoro.load("kokoro:other", options={"style": "jm_kumo"}).info.model_id == kumo


@pytest.mark.slow
def test_resume_and_regen_of_a_corpus_chapter_are_byte_identical(data_dir, tmp_path):
    book = CORPUS / "the-waste-land-poetry-notes-epub3.epub"  # chapter 4, "IV. DEATH BY WATER": 390 characters
    out = tmp_path / "water.m4b"
    env = {**os.environ, "EPUB2AUDIO_CACHE_DIR": str(tmp_path / "cache")}
    run = epub2audio(book, "-o", out, "--chapters", "4", "--voice", "kokoro:jm_kumo", "--workers", "2",
                     "--no-verify", "--progress", "json", env=env)
    assert run.code == 0, run.stderr
    first = hashlib.sha256(out.read_bytes()).hexdigest()
    run = epub2audio("regen", out, "--segment", "4.3", env=env)
    assert run.code == 0, run.stderr
    assert run.stdout.startswith("Segment 4.3 (") and f"re-made: identical to the stored audio. Wrote {out}" in run.stdout
    assert hashlib.sha256(out.read_bytes()).hexdigest() == first
    # A second conversion finds every segment done: nothing is rendered again.
    run = epub2audio(book, "-o", out, "--chapters", "4", "--voice", "kokoro:jm_kumo", "--no-verify",
                     "--progress", "json", env=env)
    assert run.code == 0 and run.events("plan")[0]["to_render"] == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() == first


# ---- int8 → fp32 ---------------------------------------------------------------------------------

def quantized_conv_matmul(folder: Path):
    """A Conv (with bias) then a MatMul, and onnxruntime's dynamic int8 quantisation of it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(0)
    weights = {"W": rng.standard_normal((6, 4, 3)), "B": rng.standard_normal(6), "M": rng.standard_normal((10, 5))}
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1]), helper.make_node("MatMul", ["c", "M"], ["y"])],
        "conv-matmul", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 5])],
        [numpy_helper.from_array(w.astype(np.float32), name) for name, w in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "fp32.onnx")
    quantize_dynamic(folder / "fp32.onnx", folder / "int8.onnx", weight_type=QuantType.QUInt8)
    return onnx.load(folder / "fp32.onnx"), onnx.load(folder / "int8.onnx")


def test_dequantize_turns_dynamic_int8_back_into_fp32_kernels(tmp_path):
    import onnxruntime

    fp32, int8 = quantized_conv_matmul(tmp_path)
    assert {"ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"} <= {n.op_type for n in int8.graph.node}
    assert kokoro.dequantize(int8) == 2
    assert {n.op_type for n in int8.graph.node} == {"Reshape", "Conv", "Add", "MatMul"}
    x = np.random.default_rng(1).standard_normal((1, 4, 10)).astype(np.float32)

    def run(model):
        return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]

    exact, rewritten = run(fp32), run(int8)
    # Only the weights' 8-bit rounding is left: no activation is quantised any more.
    assert np.abs(rewritten - exact).max() < 0.02 * np.abs(exact).max()
    assert kokoro.dequantize(int8) == 0  # nothing left to rewrite


def test_a_japanese_book_read_by_joe_names_the_kokoro_voices(data_dir):
    from epub2audio.voices.catalog import language_changes_audio, language_warning

    assert language_warning("ja", "joe") == (
        "the book is in Japanese (ja) but voice joe speaks English (en); voices that speak Japanese: "
        "kokoro:jf_alpha, kokoro:jf_gongitsune, kokoro:jf_nezumi, kokoro:jf_tebukuro, kokoro:jm_kumo, "
        "a CosyVoice3 voice (make one with `epub2audio voice add NAME --wav FILE`)")
    assert language_warning("en-GB", "kokoro:jm_kumo") is None and language_warning("ja", "kokoro:jf_alpha") is None
    assert language_changes_audio("kokoro:jm_kumo") and not language_changes_audio("joe")


# ---- word timing (--readalong words) --------------------------------------------------------------

@pytest.mark.slow
def test_the_duration_output_changes_no_byte_of_the_audio(data_dir, monkeypatch):
    """The graph with the duration predictor's frames as a second output gives the audio of the
    graph as shipped, byte for byte; the frames × 600 are the audio's length, chunk by chunk, and
    the durations graph (no decoder) reports the same frames."""
    text = "The old lighthouse keeper climbed the stairs. He lit the lamp, and watched the ships."
    voice = kokoro.load("kokoro:jf_alpha")
    with monkeypatch.context() as m:
        m.setattr(kokoro, "expose_durations", lambda model: None)  # the graph as it was before
        plain = kokoro.load("kokoro:jf_alpha")
    assert [o.name for o in plain._session.get_outputs()] == ["audio"]
    assert [o.name for o in voice._session.get_outputs()] == ["audio", "/encoder/Cast_output_0"]
    assert not plain.times_words and voice.times_words
    audio = voice.synthesize(text, 7)
    assert audio == plain.synthesize(text, 7)
    (chunk,) = voice.phonemes(text)
    pcm, frames = voice.run_aligned(chunk)
    assert len(frames) == len(chunk) + 2 and frames.min() >= 1
    assert int(frames.sum()) * kokoro.FRAME_SAMPLES == len(pcm) == len(audio) // 2
    assert np.array_equal(voice.frames(chunk), frames)
    assert voice.word_times(text, 7)["samples"] == len(audio) // 2


def kokoro_word_starts(voice, text: str, seed: int) -> list[list[tuple[int, int, int]]]:
    """Per chunk, (start of the word's first phoneme, duration of the phoneme before it, duration
    of its first phoneme) of each word the phonemes say (a space starts a word), from the frames
    the full graph reported while making the audio."""
    out, at = [], 0
    for chunk in voice.phonemes(text):
        _, frames = voice.run_aligned(chunk)
        samples = frames * kokoro.FRAME_SAMPLES
        position = at + int(samples[0])
        words, previous, new_word = [], int(samples[0]), True
        for phoneme, length in zip(chunk, samples[1:-1]):
            if phoneme == " ":
                new_word = True
            elif new_word and phoneme not in "ˈˌ":
                words.append((position, previous, int(length)))
                new_word = False
            previous = int(length)
            position += int(length)
        out.append(words)
        at += int(samples.sum())
    return out


@pytest.mark.slow
def test_kokoro_word_times_are_within_one_phoneme_of_its_durations(data_dir, tmp_path):
    """--readalong words with a Kokoro voice, measured as joe's is (test_readalong_words): each
    word's clipBegin within one phoneme of the start its durations give."""
    from cli_run import SAMPLE
    from test_readalong_words import _check_words_against_durations

    voice = kokoro.load("kokoro:jf_alpha")
    found = _check_words_against_durations(tmp_path, SAMPLE, "kokoro:jf_alpha", voice, kokoro_word_starts)
    print(f"kokoro:jf_alpha: {found['checked']} word starts checked of {found['words']} words; deviation "
          f"{found['mean_in_phonemes']:.3f} phonemes on average, {found['worst_in_phonemes']:.3f} at worst")
