"""The Base model's cloning stages against upstream's numbers on the tiny Base folder.

upstream_tiny_base.json was written by `bench/upstream_qwen3.py --base-dir TINY_BASE --write-base-fixture ...`
in the qwen-tts 0.1.1 environment: librosa's mel filter bank (every 17th non-zero entry), and per
reference clip (random_weights.reference_audio at the listed seconds/seed) upstream's log-mel (every
97th value), its speaker embedding in fp64 with its own fp32-vs-fp64 floor, its encoder latents in
fp64 (every 7th) with their floor, and its fp32 [T][16] codes; the codes and x-vector of the 2 s clip
made at 16 and 44.1 kHz and resampled by librosa (soxr HQ); then upstream Base generate() codes
(torch.manual_seed(3), streaming text, x-vector and two ICL layouts) with the token ids it was given.
No upstream code runs here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from epub2audio.errors import InputError
from epub2audio.voices.qwen3tts.clone import ClonePrompt, decode_clone, load_clone_stages, make_clone_prompt
from epub2audio.voices.qwen3tts.speaker_encoder import log_mel, mel_filters

from .random_weights import reference_audio

FIXTURE = json.loads((Path(__file__).parent / "upstream_tiny_base.json").read_text(encoding="utf-8"))
CLIPS = ("short", "mid", "long")


def _clip(name: str) -> np.ndarray:
    seconds, seed = FIXTURE["clips"][name]
    return reference_audio(seconds, seed)


def _maxdiff(ours, theirs) -> float:
    return float((torch.as_tensor(ours).double() - torch.tensor(theirs, dtype=torch.float64)).abs().max())


def test_mel_filter_bank_is_librosas_exactly():
    fb = mel_filters().numpy()
    assert fb.dtype == np.float32 and fb.shape == (128, 513)
    assert int((fb != 0).sum()) == FIXTURE["mel_filters_nonzero"]
    for i, j, v in FIXTURE["mel_filters_every_17th_nonzero"]:
        assert fb[i, j] == np.float32(v), (i, j)


@pytest.mark.parametrize("clip", CLIPS)
def test_speaker_embedding_and_codes_match_upstream(tiny_base_stages, clip):
    spk, enc = tiny_base_stages
    audio, ref = _clip(clip), FIXTURE[clip]
    mel = log_mel(torch.from_numpy(audio))
    assert mel.shape[1] == 128 and mel.shape[0] == (audio.shape[0] + 768 - 1024) // 256 + 1
    assert _maxdiff(mel.reshape(-1)[::97], ref["log_mel_every_97th"]) <= 1e-4  # log magnitudes around -11..2
    assert _maxdiff(spk.embed(audio), ref["speaker_embedding"]) <= 2 * ref["speaker_floor"] + 1e-6
    with torch.inference_mode():
        latents = enc.latents(torch.from_numpy(audio).view(1, 1, -1))
    assert _maxdiff(latents[0].reshape(-1)[::7], ref["latents_every_7th"]) <= 2 * ref["latents_floor"] + 1e-6
    codes = enc.encode(audio)
    assert codes.dtype == torch.int64 and codes.shape == (-(-audio.shape[0] // 1920), 16)
    assert codes.tolist() == ref["codes"]  # integers: exactly upstream's


def test_long_clip_attends_past_the_configs_sliding_window(tiny_base_stages):
    """12 s is 300 encoder-transformer steps, over MimiConfig's sliding_window 250: upstream's mask is
    plain causal, so the last frames' codes depend on the first frames' audio."""
    _, enc = tiny_base_stages
    audio = _clip("long")
    changed = audio.copy()
    changed[:4800] = 0  # the first 0.2 s only
    a, b = enc.encode(audio), enc.encode(changed)
    assert a.tolist() == FIXTURE["long"]["codes"]
    assert not torch.equal(a[-10:], b[-10:])


def test_make_clone_prompt_from_a_wav_file_icl_and_x_vector(tiny_base_dir, tiny_base_stages, tmp_path):
    wav = tmp_path / "ref.wav"
    sf.write(str(wav), _clip("short"), 24000, subtype="FLOAT")
    icl = make_clone_prompt(tiny_base_dir, wav, FIXTURE["ref_text"], stages=tiny_base_stages)
    assert icl.mode == "icl" and icl.ref_text == FIXTURE["ref_text"]
    assert icl.ref_codes.tolist() == FIXTURE["short"]["codes"]
    assert icl.ref_text_ids.tolist() == FIXTURE["generate"]["icl_long_text"]["ref_ids"]  # upstream's tokenizer's ids
    assert _maxdiff(icl.speaker_embedding, FIXTURE["short"]["speaker_embedding"]) <= 2 * FIXTURE["short"]["speaker_floor"] + 1e-6
    assert icl.source_sample_rate == 24000 and icl.duration == 2.0 and len(icl.wav_sha256) == 64
    xvec = make_clone_prompt(tiny_base_dir, wav, stages=tiny_base_stages)
    assert xvec.mode == "x_vector" and xvec.ref_codes is None and xvec.ref_text_ids is None
    assert np.array_equal(xvec.speaker_embedding, icl.speaker_embedding)
    assert icl.model_id == xvec.model_id and len(icl.model_id) == 16


@pytest.mark.parametrize("rate", [16000, 44100])
def test_other_rates_resample_as_upstream_with_soxr(tiny_base_dir, tiny_base_stages, rate):
    """Upstream resamples with librosa.resample (soxr HQ, length fixed at ceil(n * 24000 / rate));
    with soxr installed the prompt is upstream's exactly. (Skipped where soxr is not installed.)"""
    pytest.importorskip("soxr")
    ref = FIXTURE["resampled"][str(rate)]
    p = make_clone_prompt(tiny_base_dir, (reference_audio(2.0, 1, rate=rate), rate), "hello", stages=tiny_base_stages)
    assert p.source_sample_rate == rate and p.ref_codes.tolist() == ref["codes"]
    assert _maxdiff(p.speaker_embedding, ref["speaker_embedding"]) <= 1e-5


def test_without_soxr_other_rates_use_the_engine_resampler(tiny_base_dir, tiny_base_stages, monkeypatch):
    import sys

    from epub2audio.voices.cosyvoice3.frontend import resample
    from epub2audio.voices.qwen3tts.clone import to_24k

    monkeypatch.setitem(sys.modules, "soxr", None)  # import soxr -> ImportError
    audio16 = reference_audio(2.0, 1, rate=16000)
    assert np.array_equal(to_24k(audio16, 16000), resample(audio16, 16000, 24000))
    p = make_clone_prompt(tiny_base_dir, (audio16, 16000), "hello", stages=tiny_base_stages)
    assert p.source_sample_rate == 16000 and p.duration == 2.0 and p.ref_codes.shape == (25, 16)


def test_channels_are_averaged(tiny_base_dir, tiny_base_stages):
    stereo = np.stack([_clip("short"), _clip("short")], axis=1)  # [frames, channels]
    q = make_clone_prompt(tiny_base_dir, (stereo, 24000), "hello", stages=tiny_base_stages)
    assert q.ref_codes.tolist() == FIXTURE["short"]["codes"]


def test_bad_references_are_refused_in_one_line(tiny_base_dir, tiny_dir, tiny_base_stages, tmp_path):
    cases = [
        ((np.zeros(2400, dtype=np.float32), 24000), None, "0.10 s long"),
        ((np.full(24000, np.nan, dtype=np.float32), 24000), None, "NaN"),
        ((_clip("short"), 24000), "   ", "reference text is empty"),
        (tmp_path / "missing.wav", None, "does not exist"),
    ]
    for wav, text, words in cases:
        with pytest.raises(InputError, match=words) as e:
            make_clone_prompt(tiny_base_dir, wav, text, stages=tiny_base_stages)
        assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="needs the Base model"):
        load_clone_stages(tiny_dir)  # the CustomVoice folder


def test_save_load_round_trip_and_refusals(tiny_base_dir, tiny_base_stages, tmp_path):
    p = make_clone_prompt(tiny_base_dir, (_clip("short"), 24000), FIXTURE["ref_text"], stages=tiny_base_stages)
    q = ClonePrompt.load(p.save(tmp_path / "voice"))
    assert q.mode == "icl" and q.ref_text == p.ref_text
    for name in ("speaker_embedding", "ref_codes", "ref_text_ids"):
        a, b = getattr(p, name), getattr(q, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert (q.model_id, q.wav_sha256, q.duration, q.created) == (p.model_id, p.wav_sha256, p.duration, p.created)
    x = ClonePrompt.load(make_clone_prompt(tiny_base_dir, (_clip("short"), 24000), stages=tiny_base_stages).save(tmp_path / "x"))
    assert x.mode == "x_vector" and x.ref_codes is None and x.ref_text is None
    npz = tmp_path / "voice" / "clone.npz"
    npz.write_bytes(npz.read_bytes()[:-10])
    with pytest.raises(InputError, match="does not match clone.json"):
        ClonePrompt.load(tmp_path / "voice")
    (tmp_path / "x" / "clone.json").write_text('{"format": "something else"}')
    with pytest.raises(InputError, match="not an epub2audio Qwen3-TTS clone prompt"):
        ClonePrompt.load(tmp_path / "x")
    with pytest.raises(InputError, match="lacks clone.json"):
        ClonePrompt.load(tmp_path)


def test_seeded_base_generation_replays_upstream_codes_exactly(tiny_base_dir, tiny_base_stages):
    """Upstream's generate with a voice_clone_prompt (x-vector only; ICL with text longer and shorter
    than the reference's codec slots), torch.manual_seed(3), against ours end to end from the clip."""
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.code_predictor import CodePredictor
    from epub2audio.voices.qwen3tts.generate import generate_clone
    from epub2audio.voices.qwen3tts.talker import Talker

    ck = load_checkpoint(tiny_base_dir)
    talker = Talker.from_state_dict(ck.talker_args, ck.state_dict)
    cp = CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)
    for case, g in FIXTURE["generate"].items():
        prompt = make_clone_prompt(tiny_base_dir, (_clip(g["clip"]), 24000), FIXTURE["ref_text"] if g["icl"] else None,
                                   stages=tiny_base_stages)  # fmt: skip
        if g["icl"]:
            assert prompt.ref_text_ids.tolist() == g["ref_ids"]
        res = generate_clone(talker, cp, g["ids"], ck.text_ids, ck.generation,
                             torch.Generator().manual_seed(FIXTURE["generate_seed"]), prompt, language=g["language"],
                             max_frames=g["cap"])  # fmt: skip
        assert res.capped and len(res.frames) == g["cap"] - 1
        assert res.frames == g["codes"], case


def test_decode_clone_puts_the_reference_in_front_and_cuts_its_share(tiny_base_dir, tiny_base_stages):
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.decoder import Decoder

    ck = load_checkpoint(tiny_base_dir)
    dec = Decoder.from_state_dict(ck.decoder_args, ck.decoder_state_dict)
    frames = FIXTURE["generate"]["icl_long_text"]["codes"][:6]
    icl = make_clone_prompt(tiny_base_dir, (_clip("short"), 24000), FIXTURE["ref_text"], stages=tiny_base_stages)
    wav = decode_clone(dec, icl, frames)
    whole = dec.decode(torch.cat([torch.as_tensor(icl.ref_codes), torch.tensor(frames)]))
    cut = int(25 / 31 * 31 * 1920)  # upstream: int(ref_len / total_len * samples)
    assert wav.shape == (31 * 1920 - cut,) and torch.equal(wav, whole[cut:])
    assert not torch.equal(wav, dec.decode(torch.tensor(frames)))  # the reference's context changes the audio
    xvec = ClonePrompt(speaker_embedding=icl.speaker_embedding, ref_codes=None, ref_text=None, ref_text_ids=None, model_id="x")
    assert torch.equal(decode_clone(dec, xvec, frames), dec.decode(torch.tensor(frames)))


RATES = json.loads((Path(__file__).parent / "upstream_tiny_rates.json").read_text(encoding="utf-8"))["rates"]


@pytest.mark.parametrize("rate", [16000, 22050, 44100, 48000])
def test_upstreams_whole_clone_prompt_path_at_common_rates(tiny_base_dir, tiny_base_stages, rate):
    """upstream_tiny_rates.json: Qwen3TTSModel.create_voice_clone_prompt on the clip made at `rate`
    (bench/upstream_qwen3.py --rates; its own resampling, 12 Hz encoder and speaker encoder).
    With soxr our prompt is upstream's: codes equal, x-vector measured bit-equal."""
    import base64

    pytest.importorskip("soxr")
    ref = RATES[str(rate)]
    p = make_clone_prompt(tiny_base_dir, (reference_audio(2.0, 1, rate=rate), rate), "hello", stages=tiny_base_stages)
    assert p.ref_codes.tolist() == ref["codes"] and len(ref["codes"]) in (25, 26)
    emb = np.frombuffer(base64.b64decode(ref["speaker_embedding"]["f32le_base64"]), dtype="<f4")
    assert float(np.abs(p.speaker_embedding.astype(np.float64) - emb).max()) <= 1e-5
