"""The Qwen3-TTS voice: a built-in speaker of a CustomVoice folder, or a voice cloned with a Base
folder (a saved clone.ClonePrompt), fp32: the Talker and Code Predictor on the backend backends.py
picks, the decoder in PyTorch.

    text --assistant wrap, Qwen2 BPE--> ids --Talker + Code Predictor (seeded draws)--> frames of
    16 codes at 12.5 Hz --12 Hz decoder--> 24 kHz float --> int16 PCM

Determinism: the only random draws are the Talker's and the Code Predictor's, from one
``torch.Generator`` seeded with the segment's seed and created per call (as CosyVoice3's voice
does); the decoder draws nothing and no stage keeps state between calls, so a segment's audio
depends only on its text, seed, language, speaker and the weights.

Length: `length_cap="tight"` (the default, and what a job uses) bounds a segment at
T_max = min(T_config, max(75, 6 x text tokens)) frames (generate.frame_cap); a generation that
reaches it without eos is a runaway (a loop, or speech far longer than its text) and raises
LengthCapReached, so that the job says the text in smaller pieces instead of keeping minutes of
noise. `"upstream"` bounds it at generation_config's max_new_tokens and keeps what was drawn, as
upstream does.

Backends (`backend`: "auto", "mlx", "onnx" or "torch"; the job's `--llm-backend` / `llm_backend`):
backends.build_talker_and_code_predictor builds the Talker and the Code Predictor; auto is MLX on
Apple Silicon with mlx and mlx-lm installed, torch elsewhere. VoiceInfo.backend names each framework
that ran, in pipeline order as CosyVoice3's does ("torch", "mlx+torch", "onnx+torch": the decoder is
always torch's), and the model id carries it as `+<backend>:fp32`. Another backend rounds the logits
otherwise, so it may draw another code: a job resumed on another backend renders new segments
instead of mixing the two. torch's id is the one made before backends could be chosen.

Devices: the Talker and the Code Predictor run on the CPU (their logits are sampled there by the
per-segment generator; MLX on Apple Silicon runs them on its default device, the GPU, and hands
the logits back to the CPU); the decoder runs on `device` ("auto": CUDA when there is one). The
device is part of the model id: kernels round differently.

Thread count: on the CPU the decoder runs on one thread (decode_audio), so a segment's bytes do not
depend on the worker's thread budget (a regen runs on one thread, a job on its budget).

Cloned voices (load_clone): the same loop with the prompt's x-vector in the speaker's slot, and in
ICL mode (the reference text was given) the reference text and codes laid into the prompt
(generate.generate_clone); the frames are then decoded behind the reference codes and the
reference's share cut off (clone.decode_clone), as upstream. The model id names the prompt by a
hash of its arrays, so another recording or transcript gives other segment keys.

Text layout (`streaming`): upstream's `non_streaming_mode`, negated. None (the default) takes
upstream's default for the entry point: non-streaming for a built-in speaker (generate_custom_voice),
streaming for a clone (generate_voice_clone); config.toml's `qwen3_streaming = true / false` sets it
for both (generate.py describes the two prompts). A layout other than upstream's default is named in
the model id (`+streaming` / `+non-streaming`): the two give different speech from the same seed.

Conversion to PCM: the decoder clamps to [-1, 1]; samples are scaled by 32767, rounded half to
even and clipped to int16, little-endian (CosyVoice3's rule).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import epub2audio
from epub2audio.errors import InputError
from epub2audio.voices.base import LengthCapReached, VoiceInfo

from ..cosyvoice3.backends import describe_pipeline
from ..cosyvoice3.hift import one_thread
from .backends import build_talker_and_code_predictor
from .checkpoint import FRAME_RATE, SAMPLE_RATE, Checkpoint, load_checkpoint
from .clone import ClonePrompt, decode_clone
from .clone import model_id as configs_id
from .decoder import Decoder
from .generate import UPSTREAM_STREAMING, frame_cap, generate, generate_clone
from .text import TextTokenizer, language_name, load_text_tokenizer

LENGTH_CAPS = ("tight", "upstream")
SILENCE_SECONDS = 0.2  # what an empty segment becomes
DEVICES = ("auto", "cpu", "cuda", "mps")


def pcm16(wave: torch.Tensor) -> bytes:
    x = wave.detach().cpu().double().numpy().reshape(-1)
    return np.clip(np.rint(x * 32767.0), -32768, 32767).astype("<i2").tobytes()


def folder_id(ck: Checkpoint) -> str:
    """The folder's weight hash (Checkpoint.folder_id), the head of every model id."""
    return ck.folder_id()


def prompt_id(prompt: ClonePrompt) -> str:
    """16 hex of SHA-256 over the prompt's arrays (name, dtype, shape, bytes): what the Talker and
    the decoder read of it. Not clone.npz's hash, which holds the zip entries' write times."""
    h = hashlib.sha256(b"epub2audio qwen3tts clone prompt v1\0")
    for name in ("speaker_embedding", "ref_codes", "ref_text_ids"):
        array = getattr(prompt, name)
        if array is None:
            h.update(f"{name}\0none\0".encode())
            continue
        array = np.ascontiguousarray(array)
        h.update(f"{name}\0{array.dtype.str}\0{list(array.shape)}\0".encode())
        h.update(array.tobytes())
    return h.hexdigest()[:16]


def decoder_device(device: str) -> str:
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device here")
    if device == "mps" and not torch.backends.mps.is_available():
        raise InputError("--device mps: no Apple GPU here")
    return device


def text_layout(kind: str, streaming: bool | None) -> tuple[bool, str]:
    """(streaming, model-id tag) for a folder of `kind` ("custom_voice" / "base"): None is
    upstream's default for that kind, tagged "" so that the default id names upstream's call."""
    default = UPSTREAM_STREAMING[kind]
    if streaming is None or bool(streaming) == default:
        return default, ""
    return bool(streaming), "+streaming" if streaming else "+non-streaming"


@dataclass(frozen=True)
class _Stages:
    """What a built-in speaker and a cloned voice load alike: the tokenizer, the three stages (the
    Talker and Code Predictor on `backend`, the decoder on `device`), the versions, the backends
    that ran (VoiceInfo.backend) and the model-id tail for them, where the decoder ran and the cap."""
    tokenizer: TextTokenizer
    talker: Any  # talker.Talker, talker_mlx.Talker or talker_onnx.OnnxTalker
    code_predictor: Any  # code_predictor.CodePredictor or code_predictor_mlx.CodePredictor
    decoder: Decoder
    versions: dict
    backend: str
    id_tail: str

    @classmethod
    def build(cls, ck, device: str, length_cap: str, layout_tag: str = "", backend: str = "auto",
              threads: int | None = None) -> _Stages:  # fmt: skip
        place = decoder_device(device)
        # a compressed folder's Talker keeps its stored text table on every backend (backends.py)
        talker, code_predictor = build_talker_and_code_predictor(ck, backend, threads=threads)
        ran, _ = describe_pipeline([("talker", getattr(talker, "backend", "torch"), "fp32"),
                                    ("code_predictor", getattr(code_predictor, "backend", "torch"), "fp32"),
                                    ("decoder", "torch", "fp32")])  # fmt: skip
        versions = {"torch": torch.__version__, "epub2audio": epub2audio.__version__}
        if place == "cuda":
            versions["cuda"] = str(torch.version.cuda)
        if "mlx" in ran:
            from importlib.metadata import version

            versions.update({"mlx": version("mlx"), "mlx-lm": version("mlx-lm")})
        if "onnx" in ran:
            import onnxruntime

            versions["onnxruntime"] = onnxruntime.__version__
        return cls(tokenizer=load_text_tokenizer(ck.paths.model_dir, ck.text_ids),
                   talker=talker, code_predictor=code_predictor,
                   decoder=ck.build_decoder().to(place),
                   versions=versions, backend=ran,
                   id_tail=f"+{ran}:fp32" + ("" if place == "cpu" else "@decoder=" + place)
                           + ("" if length_cap == "tight" else "+cap-" + length_cap) + layout_tag)  # fmt: skip


@dataclass
class Qwen3Voice:
    info: VoiceInfo
    checkpoint: Checkpoint
    tokenizer: TextTokenizer
    talker: Any  # on the backend that _Stages.build chose
    code_predictor: Any
    decoder: Decoder
    speaker: str  # "" for a cloned voice
    length_cap: str = "tight"
    clone: ClonePrompt | None = None  # a cloned voice's prompt (Base folder)
    streaming: bool = UPSTREAM_STREAMING["custom_voice"]  # the text layout (module docstring)

    @classmethod
    def load(cls, model_dir: str | os.PathLike, speaker: str, *, name: str | None = None, device: str = "auto",
             threads: int | None = None, length_cap: str = "tight", streaming: bool | None = None,
             backend: str = "auto") -> Qwen3Voice:  # fmt: skip
        """A CustomVoice folder's built-in `speaker` (upstream's names, any case). InputError (one
        line) for a folder that is not one, or a speaker it does not have. threads: torch's
        intra-op threads, and the ONNX Talker's (default: as set by the worker). streaming: None =
        upstream's default (non-streaming) text layout. backend: what runs the Talker and the Code
        Predictor (module docstring)."""
        if length_cap not in LENGTH_CAPS:
            raise ValueError(f"length cap must be one of {', '.join(LENGTH_CAPS)}; got {length_cap!r}")
        if threads:
            torch.set_num_threads(threads)
        ck = load_checkpoint(model_dir)
        if ck.model_kind != "custom_voice":
            raise InputError(f"{Path(model_dir)} is a Qwen3-TTS {ck.model_kind} folder; built-in speakers need a CustomVoice folder")
        speakers = sorted(ck.speakers)
        if speaker.lower() not in ck.speakers:
            raise InputError(f"the Qwen3-TTS folder {Path(model_dir).name} has no speaker {speaker!r}; "
                             f"its speakers: {', '.join(speakers)}")
        streaming, tag = text_layout("custom_voice", streaming)
        stages = _Stages.build(ck, device, length_cap, tag, backend, threads)
        speaker = speaker.lower()
        info = VoiceInfo(
            name=name or f"qwen3:{speaker}",
            narrator=f"Qwen3-TTS ({speaker})",
            sample_rate=SAMPLE_RATE,
            backend=stages.backend,
            precision="fp32",
            # the weights, the speaker, the backends, where the decoder ran and the cap all change the audio
            model_id=f"{folder_id(ck)}+speaker-{speaker}{stages.id_tail}",
            versions=stages.versions,
        )
        return cls(info=info, checkpoint=ck, tokenizer=stages.tokenizer, talker=stages.talker,
                   code_predictor=stages.code_predictor, decoder=stages.decoder, speaker=speaker,
                   length_cap=length_cap, streaming=streaming)  # fmt: skip

    @classmethod
    def load_clone(cls, model_dir: str | os.PathLike, clone_dir: str | os.PathLike, *, name: str,
                   device: str = "auto", threads: int | None = None, length_cap: str = "tight",
                   streaming: bool | None = None, backend: str = "auto") -> Qwen3Voice:  # fmt: skip
        """A voice cloned with the Base folder `model_dir`: the ClonePrompt saved in `clone_dir`
        (make_clone.py). InputError (one line) for a folder that is not a Base one, or a prompt
        made with a folder of other dimensions. streaming: None = upstream's default (streaming).
        backend: as for `load`."""
        if length_cap not in LENGTH_CAPS:
            raise ValueError(f"length cap must be one of {', '.join(LENGTH_CAPS)}; got {length_cap!r}")
        if threads:
            torch.set_num_threads(threads)
        ck = load_checkpoint(model_dir)
        if ck.model_kind != "base":
            raise InputError(f"{Path(model_dir)} is a Qwen3-TTS {ck.model_kind} folder; a cloned voice needs its Base folder")
        prompt = ClonePrompt.load(clone_dir)
        if prompt.model_id != configs_id(model_dir):
            raise InputError(f"voice {name}: its clone prompt was made with another Base folder than {Path(model_dir)}; "
                             "add the voice again")  # fmt: skip
        streaming, tag = text_layout("base", streaming)
        stages = _Stages.build(ck, device, length_cap, tag, backend, threads)
        info = VoiceInfo(
            name=name,
            narrator=f"Qwen3-TTS ({name.split(':', 1)[-1]}, cloned)",
            sample_rate=SAMPLE_RATE,
            backend=stages.backend,
            precision="fp32",
            # the weights, the prompt, the backends, where the decoder ran and the cap all change the audio
            model_id=f"{folder_id(ck)}+clone-{prompt_id(prompt)}{stages.id_tail}",
            versions=stages.versions,
        )
        return cls(info=info, checkpoint=ck, tokenizer=stages.tokenizer, talker=stages.talker,
                   code_predictor=stages.code_predictor, decoder=stages.decoder, speaker="",
                   length_cap=length_cap, clone=prompt, streaming=streaming)  # fmt: skip

    def language(self, tag: str | None) -> str:
        return language_name(tag, self.checkpoint.talker_args.codec_language_id)

    def frame_cap(self, ids: list[int]) -> int:
        t_config = self.checkpoint.generation.max_new_tokens
        return frame_cap(len(ids) - 8, t_config) if self.length_cap == "tight" else t_config

    def codes(self, text: str, seed: int, language: str | None = None) -> list[list[int]]:
        """Frames [T][16] for `text`, all randomness from `seed`. Raises LengthCapReached where
        the tight cap ended the generation before eos."""
        ids = self.tokenizer.encode(text)
        cap = self.frame_cap(ids)
        generator = torch.Generator(device="cpu").manual_seed(int(seed))
        if self.clone is not None:
            result = generate_clone(self.talker, self.code_predictor, ids, self.checkpoint.text_ids,
                                    self.checkpoint.generation, generator, self.clone,
                                    language=self.language(language), max_frames=cap, streaming=self.streaming)  # fmt: skip
        else:
            result = generate(self.talker, self.code_predictor, ids, self.checkpoint.text_ids,
                              self.checkpoint.generation, generator, speaker=self.speaker,
                              language=self.language(language), max_frames=cap, streaming=self.streaming)  # fmt: skip
        if result.capped and self.length_cap == "tight":
            raise LengthCapReached(f"the speech reached the length cap of {cap} frames ({cap / FRAME_RATE:.1f} s) "
                                   "before the end of the text")
        return result.frames

    def synthesize(self, text: str, seed: int, language: str | None = None) -> bytes:
        """Mono int16 little-endian PCM at 24 kHz; an empty text is 0.2 s of silence.

        language: the segment's BCP 47 tag (the book's when the segment has none); "auto" where
        the model has no such language (text.language_name)."""
        text = text.strip()
        if not text:
            return bytes(2 * int(SILENCE_SECONDS * SAMPLE_RATE))
        frames = self.codes(text, seed, language)
        if not frames:
            return bytes(2 * int(SILENCE_SECONDS * SAMPLE_RATE))
        return pcm16(self.decode_audio(frames))

    def decode_audio(self, frames: list[list[int]]) -> torch.Tensor:
        """The decoder's 24 kHz waveform for `frames`, the same whatever the worker's thread budget.

        On the CPU the decoder runs on one thread. Its convolutions' sums round differently with
        the thread count (measured, torch 2.13, tiny decoder: oneDNN up to 1.3e-3 between 1 and 2
        threads; ATen's own im2col + GEMM path equal at 1 and 2 but 1.3e-3 off at 3, 4 and 8 on
        20 frames), enough to change the int16 bytes, so a regen (one thread) would differ from
        the job (its budget). One thread with oneDNN was the fastest exact choice measured at
        full size (bench/qwen3_decoder_threads.py, bench/results/qwen3-decoder-threads-2core-busy.txt:
        2 s of audio in 9.9 s against 35.8 s without oneDNN on a loaded 2-core machine); use the
        cores with more workers. On CUDA it runs as placed. A cloned voice's frames are decoded
        behind its reference codes (ICL), as clone.decode_clone does."""
        with one_thread():
            if self.clone is not None:
                return decode_clone(self.decoder, self.clone, frames)
            return self.decoder.decode(frames)
