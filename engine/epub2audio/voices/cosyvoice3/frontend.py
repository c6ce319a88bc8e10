"""CosyVoice3 frontend: text ids and the features of a reference recording.

Two halves:

* Text. The Qwen2 BPE tokenizer of ``CosyVoice-BlankEN`` (built offline from vocab.json +
  merges.txt) with CosyVoice3's extra special tokens appended in upstream's order, so that on the
  real vocabulary ``<|endofprompt|>`` is 151646 and the last pronunciation token is 151923.
  Encoding adds no BOS/EOS; special-token strings inside the text are matched as single tokens.
  The zero-shot LLM prompt is ``"You are a helpful assistant.<|endofprompt|>" + transcript``.

* Audio (only needed once per reference voice, see profile.py). From one WAV:

  - 16 kHz: Whisper-style 128-bin log-mel -> ``speech_tokenizer_v3.onnx`` -> speech tokens (25 Hz);
  - 16 kHz: Kaldi fbank (80 bins) minus its per-bin mean -> ``campplus.onnx`` -> 192-d x-vector;
  - 24 kHz: 80-bin log-mel (hop 480, 50 Hz) -> the flow's prompt mel;
  - then tokens and mel are cut to an exact 1:2 ratio.

Resampling reproduces torchaudio's default ``transforms.Resample`` (windowed sinc with a Hann-type
window, 6 zero crossings, roll-off 0.99) from its documented algorithm, so no torchaudio is needed.
The kernel is built in float64 and rounded to float32, and applied as a strided float32 conv1d,
which is the same arithmetic torchaudio does.

Numerics that are not bit-identical to upstream (documented, all far below audible/decision level):

* Mel filter banks come from ``transformers.audio_utils.mel_filter_bank`` (float64, rounded once
  to float32; bit-identical to faster-whisper's port of librosa). librosa itself (used by upstream,
  and to make whisper's ``mel_filters.npz``) fills a float32 array before applying the Slaney norm,
  so single weights can differ by 1 ulp (relative ~6e-8).
* Kaldi fbank comes from kaldi-native-fbank instead of torchaudio.compliance.kaldi; both are
  float32 implementations of the same Kaldi recipe (our test measures <= 7e-5 in log energy
  against a float64 reference of torchaudio's algorithm).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from epub2audio.errors import InputError

# ---------------------------------------------------------------------------------------------
# Text

SYSTEM_PROMPT = "You are a helpful assistant."
END_OF_PROMPT = "<|endofprompt|>"

# CosyVoice3's additional special tokens, in the order upstream registers them (the order fixes the
# ids). The first two already exist in the Qwen2 vocabulary (151644, 151645) and keep their ids.
COSYVOICE3_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|im_start|>", "<|im_end|>", "<|endofprompt|>",
    "[breath]", "<strong>", "</strong>", "[noise]", "[laughter]", "[cough]", "[clucking]",
    "[accent]", "[quick_breath]", "<laughter>", "</laughter>", "[hissing]", "[sigh]",
    "[vocalized-noise]", "[lipsmack]", "[mn]", "<|endofsystem|>",
    # CMU phones
    "[AA]", "[AA0]", "[AA1]", "[AA2]", "[AE]", "[AE0]", "[AE1]", "[AE2]", "[AH]", "[AH0]", "[AH1]",
    "[AH2]", "[AO]", "[AO0]", "[AO1]", "[AO2]", "[AW]", "[AW0]", "[AW1]", "[AW2]", "[AY]", "[AY0]",
    "[AY1]", "[AY2]", "[B]", "[CH]", "[D]", "[DH]", "[EH]", "[EH0]", "[EH1]", "[EH2]", "[ER]",
    "[ER0]", "[ER1]", "[ER2]", "[EY]", "[EY0]", "[EY1]", "[EY2]", "[F]", "[G]", "[HH]", "[IH]",
    "[IH0]", "[IH1]", "[IH2]", "[IY]", "[IY0]", "[IY1]", "[IY2]", "[JH]", "[K]", "[L]", "[M]", "[N]",
    "[NG]", "[OW]", "[OW0]", "[OW1]", "[OW2]", "[OY]", "[OY0]", "[OY1]", "[OY2]", "[P]", "[R]",
    "[S]", "[SH]", "[T]", "[TH]", "[UH]", "[UH0]", "[UH1]", "[UH2]", "[UW]", "[UW0]", "[UW1]",
    "[UW2]", "[V]", "[W]", "[Y]", "[Z]", "[ZH]",
    # pinyin initials and toned finals
    "[a]", "[ai]", "[an]", "[ang]", "[ao]", "[b]", "[c]", "[ch]", "[d]", "[e]", "[ei]", "[en]",
    "[eng]", "[f]", "[g]", "[h]", "[i]", "[ian]", "[in]", "[ing]", "[iu]", "[ià]", "[iàn]",
    "[iàng]", "[iào]", "[iá]", "[ián]", "[iáng]", "[iáo]", "[iè]", "[ié]", "[iòng]", "[ióng]",
    "[iù]", "[iú]", "[iā]", "[iān]", "[iāng]", "[iāo]", "[iē]", "[iě]", "[iōng]", "[iū]", "[iǎ]",
    "[iǎn]", "[iǎng]", "[iǎo]", "[iǒng]", "[iǔ]", "[j]", "[k]", "[l]", "[m]", "[n]", "[o]",
    "[ong]", "[ou]", "[p]", "[q]", "[r]", "[s]", "[sh]", "[t]", "[u]", "[uang]", "[ue]", "[un]",
    "[uo]", "[uà]", "[uài]", "[uàn]", "[uàng]", "[uá]", "[uái]", "[uán]", "[uáng]", "[uè]",
    "[ué]", "[uì]", "[uí]", "[uò]", "[uó]", "[uā]", "[uāi]", "[uān]", "[uāng]", "[uē]", "[uě]",
    "[uī]", "[uō]", "[uǎ]", "[uǎi]", "[uǎn]", "[uǎng]", "[uǐ]", "[uǒ]", "[vè]", "[w]", "[x]",
    "[y]", "[z]", "[zh]", "[à]", "[ài]", "[àn]", "[àng]", "[ào]", "[á]", "[ái]", "[án]",
    "[áng]", "[áo]", "[è]", "[èi]", "[èn]", "[èng]", "[èr]", "[é]", "[éi]", "[én]", "[éng]",
    "[ér]", "[ì]", "[ìn]", "[ìng]", "[í]", "[ín]", "[íng]", "[ò]", "[òng]", "[òu]", "[ó]",
    "[óng]", "[óu]", "[ù]", "[ùn]", "[ú]", "[ún]", "[ā]", "[āi]", "[ān]", "[āng]", "[āo]",
    "[ē]", "[ēi]", "[ēn]", "[ēng]", "[ě]", "[ěi]", "[ěn]", "[ěng]", "[ěr]", "[ī]", "[īn]",
    "[īng]", "[ō]", "[ōng]", "[ōu]", "[ū]", "[ūn]", "[ǎ]", "[ǎi]", "[ǎn]", "[ǎng]", "[ǎo]",
    "[ǐ]", "[ǐn]", "[ǐng]", "[ǒ]", "[ǒng]", "[ǒu]", "[ǔ]", "[ǔn]", "[ǘ]", "[ǚ]", "[ǜ]",
)  # fmt: skip

TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json")


def zero_shot_prompt_text(transcript: str) -> str:
    """The LLM prompt text of zero-shot cloning: system prefix, end-of-prompt marker, transcript."""
    return SYSTEM_PROMPT + END_OF_PROMPT + transcript


class TextTokenizer:
    """CosyVoice3's text tokenizer: Qwen2 BPE plus the CosyVoice3 special tokens."""

    def __init__(self, hf_tokenizer) -> None:
        self._tok = hf_tokenizer
        self.endofprompt_id = self.token_id(END_OF_PROMPT)

    def __len__(self) -> int:
        return len(self._tok)

    def token_id(self, token: str) -> int:
        ids = self._tok.convert_tokens_to_ids([token])
        tid = ids[0] if ids else None
        if tid is None or tid == self._tok.unk_token_id and token != self._tok.unk_token:
            raise KeyError(token)
        return int(tid)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, no BOS/EOS added (upstream: ``tokenizer([text]).input_ids[0]``)."""
        return [int(i) for i in self._tok([text], add_special_tokens=True)["input_ids"][0]]

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)


@lru_cache(maxsize=4)
def _load_tokenizer_cached(blank_en_dir: str, _stamp: tuple) -> TextTokenizer:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(blank_en_dir, local_files_only=True)
    except Exception as e:  # transformers raises many types here (OSError, ValueError, ...)
        raise InputError(f"cannot load the Qwen2 tokenizer from {blank_en_dir}: {e}".splitlines()[0]) from None
    # Upstream's registration: eos/pad are the existing <|endoftext|>; the rest are appended in
    # order, the ones already present keep their ids.
    tok.add_special_tokens(
        {
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "additional_special_tokens": list(COSYVOICE3_SPECIAL_TOKENS),
        }
    )
    return TextTokenizer(tok)


def load_text_tokenizer(blank_en_dir: str | os.PathLike) -> TextTokenizer:
    """The tokenizer from a ``CosyVoice-BlankEN`` directory, offline. Never touches model weights."""
    d = Path(blank_en_dir)
    missing = [n for n in TOKENIZER_FILES if not (d / n).is_file()]
    if missing:
        raise InputError(f"{d} lacks tokenizer file(s): {', '.join(missing)}")
    stamp = tuple((n, (d / n).stat().st_size, (d / n).stat().st_mtime_ns) for n in TOKENIZER_FILES)
    return _load_tokenizer_cached(str(d.resolve()), stamp)


# ---------------------------------------------------------------------------------------------
# Audio loading and resampling

MIN_SAMPLE_RATE = 16000
MAX_PROMPT_SECONDS = 30.0
MIN_PROMPT_SECONDS = 0.5


def load_audio(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """Mono float32 samples in [-1, 1] and the file's sample rate (channels averaged)."""
    import soundfile as sf

    p = Path(path)
    if not p.is_file():
        raise InputError(f"reference audio {p} does not exist")
    try:
        data, sr = sf.read(str(p), dtype="float32", always_2d=True)  # [frames, channels]
    except Exception as e:  # soundfile.LibsndfileError and friends
        raise InputError(f"cannot read reference audio {p}: {e}".splitlines()[0]) from None
    if data.shape[0] == 0:
        raise InputError(f"reference audio {p} is empty")
    # mean over channels in float32 with torch, as upstream does on the [channels, frames] tensor
    mono = torch.from_numpy(np.ascontiguousarray(data.T)).mean(dim=0).numpy()
    return mono, int(sr)


def sinc_resample_kernel(
    orig_freq: int, new_freq: int, lowpass_filter_width: int = 6, rolloff: float = 0.99
) -> tuple[torch.Tensor, int]:
    """The polyphase kernel of torchaudio's ``sinc_interp_hann`` resampler.

    Output sample j (of a block of ``new`` outputs, after dividing both rates by their gcd) is a
    weighted sum of the inputs around time ``j / new`` (in input-block units): the weights are an
    ideal low-pass (cutoff ``rolloff * min(orig, new)``) sinc, tapered by ``cos(pi t / 2w)^2`` over
    ``w`` zero crossings. Returns the kernel ``[new, 1, 2 * width + orig]`` (float32, built in
    float64) and the one-sided width in input samples.
    """
    g = math.gcd(int(orig_freq), int(new_freq))
    orig, new = int(orig_freq) // g, int(new_freq) // g
    base = min(orig, new) * rolloff
    width = math.ceil(lowpass_filter_width * orig / base)
    taps = torch.arange(-width, width + orig, dtype=torch.float64)[None, None] / orig
    # the per-phase offsets are formed in float32 first (integer tensor / int), as torchaudio does
    phase = torch.arange(0, -new, -1)[:, None, None] / new
    t = (phase + taps) * base
    t = t.clamp(-lowpass_filter_width, lowpass_filter_width)
    window = torch.cos(t * math.pi / lowpass_filter_width / 2) ** 2
    t = t * math.pi
    sinc = torch.where(t == 0, torch.tensor(1.0, dtype=t.dtype), torch.sin(t) / t)
    kernel = sinc * window * (base / orig)
    return kernel.to(torch.float32), width


def resample(wave: np.ndarray, orig_freq: int, new_freq: int) -> np.ndarray:
    """Band-limited resampling, numerically the same as ``torchaudio.transforms.Resample``.

    Output length is ``ceil(len * new / orig)``.
    """
    x = torch.as_tensor(np.asarray(wave, dtype=np.float32))
    if orig_freq == new_freq:
        return x.numpy().copy()
    g = math.gcd(int(orig_freq), int(new_freq))
    orig, new = int(orig_freq) // g, int(new_freq) // g
    kernel, width = sinc_resample_kernel(orig_freq, new_freq)
    n = x.shape[-1]
    padded = torch.nn.functional.pad(x.reshape(1, 1, n), (width, width + orig))
    with torch.inference_mode():
        y = torch.nn.functional.conv1d(padded, kernel, stride=orig)  # [1, new, blocks]
    y = y.transpose(1, 2).reshape(-1)
    target = math.ceil(new * n / orig)
    return y[:target].numpy().copy()


# ---------------------------------------------------------------------------------------------
# Features


def slaney_mel_filters(sample_rate: int, n_fft: int, n_mels: int, fmax: float | None = None) -> np.ndarray:
    """librosa-compatible Slaney mel filter bank ``[n_mels, n_fft // 2 + 1]`` (float32)."""
    from transformers.audio_utils import mel_filter_bank

    fb = mel_filter_bank(
        num_frequency_bins=n_fft // 2 + 1,
        num_mel_filters=n_mels,
        min_frequency=0.0,
        max_frequency=float(fmax if fmax is not None else sample_rate / 2),
        sampling_rate=sample_rate,
        norm="slaney",
        mel_scale="slaney",
    )  # [freq, mel], float64
    return np.ascontiguousarray(fb.T.astype(np.float32))


@lru_cache(maxsize=8)
def _mel_matrix(sample_rate: int, n_fft: int, n_mels: int) -> torch.Tensor:
    return torch.from_numpy(slaney_mel_filters(sample_rate, n_fft, n_mels).copy())


def whisper_log_mel(wave16k: np.ndarray, n_mels: int = 128) -> np.ndarray:
    """Whisper's log-mel spectrogram ``[n_mels, len // 160]`` (float32) of 16 kHz audio.

    Centered STFT (n_fft 400, hop 160, periodic Hann, reflect padding), last frame dropped, power
    spectrum, Slaney mel, log10 floored at 1e-10, then clipped to 8 below the global maximum and
    mapped by (x + 4) / 4.
    """
    x = torch.as_tensor(np.asarray(wave16k, dtype=np.float32))
    with torch.inference_mode():
        spec = torch.stft(
            x, 400, 160, window=torch.hann_window(400), center=True, pad_mode="reflect", return_complex=True
        )
        power = spec[..., :-1].abs() ** 2
        mel = _mel_matrix(16000, 400, n_mels) @ power
        log_spec = torch.clamp(mel, min=1e-10).log10()
        log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
        log_spec = (log_spec + 4.0) / 4.0
    return log_spec.numpy().copy()


def kaldi_fbank(wave16k: np.ndarray, num_mel_bins: int = 80) -> np.ndarray:
    """Kaldi fbank ``[frames, num_mel_bins]`` of 16 kHz audio at +-1 scale, no dither.

    Matches ``torchaudio.compliance.kaldi.fbank(wave, num_mel_bins=80, dither=0,
    sample_frequency=16000)``: 25 ms Povey windows every 10 ms with snip_edges, DC removal,
    pre-emphasis 0.97, 512-point FFT, power spectrum, Kaldi mel bins from 20 Hz to Nyquist, natural
    log floored at float32 epsilon. kaldi-native-fbank takes the samples at the scale it is given.
    """
    import kaldi_native_fbank as knf

    opts = knf.FbankOptions()
    opts.frame_opts.samp_freq = 16000
    opts.frame_opts.dither = 0.0  # knf's default is 3e-5; upstream passes dither=0
    opts.frame_opts.frame_shift_ms = 10.0
    opts.frame_opts.frame_length_ms = 25.0
    opts.frame_opts.preemph_coeff = 0.97
    opts.frame_opts.remove_dc_offset = True
    opts.frame_opts.window_type = "povey"
    opts.frame_opts.round_to_power_of_two = True
    opts.frame_opts.snip_edges = True
    opts.mel_opts.num_bins = num_mel_bins
    opts.mel_opts.low_freq = 20.0
    opts.mel_opts.high_freq = 0.0  # <= 0 means offset from Nyquist
    opts.mel_opts.is_librosa = False
    opts.use_energy = False
    opts.raw_energy = True
    opts.use_log_fbank = True
    opts.use_power = True
    fb = knf.OnlineFbank(opts)
    fb.accept_waveform(16000, np.asarray(wave16k, dtype=np.float32))
    fb.input_finished()
    n = fb.num_frames_ready
    if n == 0:
        return np.zeros((0, num_mel_bins), dtype=np.float32)
    return np.stack([np.asarray(fb.get_frame(i), dtype=np.float32) for i in range(n)])


def prompt_mel(wave24k: np.ndarray) -> np.ndarray:
    """The flow's 80-bin log-mel ``[len // 480, 80]`` (float32) of 24 kHz audio.

    Reflect-pad 720 each side, STFT (n_fft 1920, hop 480, periodic Hann, not centered), magnitude
    ``sqrt(re^2 + im^2 + 1e-9)``, Slaney mel up to 12 kHz, natural log floored at 1e-5.
    """
    x = torch.as_tensor(np.asarray(wave24k, dtype=np.float32))[None, None]
    with torch.inference_mode():
        x = torch.nn.functional.pad(x, (720, 720), mode="reflect")[0]
        spec = torch.stft(
            x, 1920, hop_length=480, win_length=1920, window=torch.hann_window(1920), center=False,
            normalized=False, onesided=True, return_complex=True,
        )
        spec = torch.view_as_real(spec)
        mag = torch.sqrt(spec.pow(2).sum(-1) + 1e-9)
        mel = torch.matmul(_mel_matrix(24000, 1920, 80), mag)
        out = torch.log(torch.clamp(mel, min=1e-5))
    return out[0].T.contiguous().numpy().copy()


def align_prompt(tokens: np.ndarray, mel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cut tokens and mel frames to exactly 1:2 (25 Hz tokens, 50 Hz frames)."""
    n = min(mel.shape[0] // 2, tokens.shape[0])
    return tokens[:n].copy(), mel[: 2 * n].copy()


# ---------------------------------------------------------------------------------------------
# ONNX models


def _session(path: str | os.PathLike):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise InputError(f"cannot load ONNX model {path}: {e}".splitlines()[0]) from None


class SpeechTokenizer:
    """``speech_tokenizer_v3.onnx``: Whisper log-mel [1, 128, T] + its length -> tokens (~T/4)."""

    def __init__(self, path: str | os.PathLike, speech_token_size: int = 6561) -> None:
        self.path = Path(path)
        self.session = _session(path)
        inputs = self.session.get_inputs()
        if len(inputs) < 2:
            raise InputError(f"{self.path.name} has {len(inputs)} input(s); a speech tokenizer takes feats and length")
        self.feats_name, self.length_name = inputs[0].name, inputs[1].name
        self.speech_token_size = speech_token_size

    def __call__(self, log_mel: np.ndarray) -> np.ndarray:
        feats = np.ascontiguousarray(log_mel, dtype=np.float32)[None]  # [1, 128, T]
        length = np.array([feats.shape[2]], dtype=np.int32)
        out = self.session.run(None, {self.feats_name: feats, self.length_name: length})[0]
        tokens = np.asarray(out).reshape(-1).astype(np.int64)
        if tokens.size and (tokens.min() < 0 or tokens.max() >= self.speech_token_size):
            raise InputError(
                f"{self.path.name} produced token ids outside 0..{self.speech_token_size - 1}; wrong model?"
            )
        return tokens


class SpeakerEncoder:
    """``campplus.onnx``: mean-normalised fbank [1, T, 80] -> x-vector (192 floats)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.session = _session(path)
        self.input_name = self.session.get_inputs()[0].name

    def __call__(self, fbank: np.ndarray) -> np.ndarray:
        feats = np.ascontiguousarray(fbank, dtype=np.float32)[None]
        out = self.session.run(None, {self.input_name: feats})[0]
        return np.asarray(out, dtype=np.float32).reshape(-1).copy()


# ---------------------------------------------------------------------------------------------
# Everything a reference recording contributes


@dataclass(frozen=True)
class PromptFeatures:
    speech_tokens: np.ndarray  # int64 [n]
    mel: np.ndarray  # float32 [2n, 80]
    embedding: np.ndarray  # float32 [192]
    wave16k: np.ndarray  # float32, kept for transcription
    source_sample_rate: int
    duration: float  # seconds


def load_reference(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, int]:
    """(16 kHz, 24 kHz, original rate) versions of a reference recording, with its checks."""
    wave, sr = load_audio(path)
    if sr < MIN_SAMPLE_RATE:
        raise InputError(f"reference audio {Path(path).name} is {sr} Hz; it must be at least {MIN_SAMPLE_RATE} Hz")
    seconds = wave.shape[0] / sr
    if seconds > MAX_PROMPT_SECONDS:
        raise InputError(
            f"reference audio {Path(path).name} is {seconds:.1f} s long; it must be at most {MAX_PROMPT_SECONDS:.0f} s"
        )
    if seconds < MIN_PROMPT_SECONDS:
        raise InputError(
            f"reference audio {Path(path).name} is {seconds:.2f} s long; it must be at least {MIN_PROMPT_SECONDS} s"
        )
    return resample(wave, sr, 16000), resample(wave, sr, 24000), sr


def extract_prompt_features(
    wav_path: str | os.PathLike,
    speech_tokenizer: SpeechTokenizer,
    speaker_encoder: SpeakerEncoder,
) -> PromptFeatures:
    """Speech tokens, prompt mel (aligned 1:2) and speaker embedding of one reference recording."""
    w16, w24, sr = load_reference(wav_path)
    tokens = speech_tokenizer(whisper_log_mel(w16))
    fbank = torch.from_numpy(kaldi_fbank(w16))
    fbank = (fbank - fbank.mean(dim=0, keepdim=True)).numpy()  # CMN, in float32 as upstream
    embedding = speaker_encoder(fbank)
    tokens, mel = align_prompt(tokens, prompt_mel(w24))
    if tokens.shape[0] == 0:
        raise InputError(f"reference audio {Path(wav_path).name} gave no speech tokens")
    return PromptFeatures(
        speech_tokens=tokens,
        mel=mel,
        embedding=embedding,
        wave16k=w16,
        source_sample_rate=sr,
        duration=w16.shape[0] / 16000,
    )
