"""`epub2audio model compress` on a Qwen3-TTS folder (voices/qwen3tts/compress.py), on the tiny folder:
each technique loads through checkpoint.py, the lossless ones are bit for bit, the lossy ones are
bounded, and a text the pruned vocabulary cannot read is refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from epub2audio.errors import InputError
from epub2audio.voices.qwen3tts import checkpoint as ck
from epub2audio.voices.qwen3tts import compress as cz
from epub2audio.voices.qwen3tts import vocab as vc
from epub2audio.voices.qwen3tts.generate import build_prompt, frame_cap, generate
from epub2audio.voices.stored import load_safetensors

from .random_weights import _CORPUS, write_tiny_model

# words in four more scripts, so that the toy BPE has whole Cyrillic, Greek, Han, kana and Hangul tokens
MORE = " Привет мир, привет друг. Ωμέγα ωμέγα. 你好世界，你好。 こんにちは、こんにちは。 안녕하세요 안녕하세요."
ENGLISH = "Hello world, the quick brown fox."


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    """The tiny folder with a multi-script tokenizer and an encoder.* part in the speech tokenizer."""
    d = write_tiny_model(tmp_path_factory.mktemp("q3c") / "src", seed=0, corpus=_CORPUS + MORE * 3, n_merges=260)
    path = d / "speech_tokenizer" / "model.safetensors"
    speech = load_file(str(path))
    g = torch.Generator().manual_seed(5)
    speech["encoder.encoder.layers.0.conv.weight"] = torch.randn(8, 1, 7, generator=g)
    speech["encoder.quantizer.semantic_residual_vector_quantizer.layers.0.codebook.embed_sum"] = torch.randn(16, 4, generator=g)
    save_file(speech, str(path))
    return d


@pytest.fixture(scope="module")
def source(src):
    return ck.load_checkpoint(src)


def compressed(src, dst, **opts):
    cz.compress_folder(src, dst, **opts)
    return ck.load_checkpoint(dst)


def prompt_ids(src, c, text=ENGLISH) -> list[int]:
    tok = vc.load_text_tokenizer(src)
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    role = [c.text_ids["im_start_token_id"], *enc("assistant\n")]
    return role + enc(text) + [c.text_ids["im_end_token_id"], *enc("\n"), *role]


def logits_of(c, ids):
    talker = c.build_talker()
    prompt, trailing, _ = build_prompt(talker, ids, c.text_ids, speaker="ryan", language="english")
    with torch.inference_mode():
        return talker(torch.cat([prompt, trailing], dim=1))


def codes_of(c, ids, n=12):
    return generate(c.build_talker(), c.build_code_predictor(), ids, c.text_ids, c.generation,
                    torch.Generator().manual_seed(3), speaker="ryan", language="english", max_frames=n).frames  # fmt: skip


def test_kept_ids_by_script_with_space_variants_and_specials():
    vocab = {"a": 0, "Ġa": 1, "Ġfox": 2, "fox": 3, "Ð¸": 4, "ĠÐ¸": 5, "Ð": 6, ",": 7, "Ġ": 8, "Î±": 9, "ä½łå¥½": 10}
    # Ð alone is half of a Cyrillic letter: kept (not whole UTF-8); α is Greek: no language keeps it
    assert vc.kept_ids(vocab, [151644], ["en"]) == {0, 1, 2, 3, 6, 7, 8, 151644}
    assert vc.kept_ids(vocab, [], ["ru"]) == {0, 1, 2, 3, 4, 5, 6, 7, 8}  # Latin always
    assert vc.kept_ids(vocab, [], ["zh"]) == {0, 1, 2, 3, 6, 7, 8, 10}
    with pytest.raises(ValueError, match=r"^--vocab: 'el' is not one of Qwen3-TTS's languages \(en, de, fr, es, it, pt, ru, zh, ja, ko\) or all$"):
        vc.kept_ids(vocab, [], ["el"])


def test_vocabulary_pruning_is_lossless_for_kept_ids(src, source, tmp_path):
    c = compressed(src, tmp_path / "en", llm="fp32", vocab=("en",))
    full = source.talker_args.text_vocab_size
    kept = int((c.row_of_id >= 0).sum())
    assert c.compressed["kept_text_ids"] == kept and kept < 500 and c.row_of_id.shape == (full,)
    with safe_open(str(tmp_path / "en" / ck.TALKER_FILE), "pt") as f:
        assert f.get_slice(ck.TEXT_KEY).get_shape() == [kept, source.talker_args.text_hidden_size]
    ids = prompt_ids(src, c)
    vc.check_text_ids(c.row_of_id, ids)  # every id of this text is kept
    assert torch.equal(logits_of(c, ids), logits_of(source, ids))
    assert codes_of(c, ids) == codes_of(source, ids)  # the compressed folder converts text to codes, the same ones
    bf16 = compressed(src, tmp_path / "en-bf16", llm="bf16", vocab=("en", "ru"))  # the source's own precision
    assert torch.equal(logits_of(bf16, ids), logits_of(source, ids))


def test_a_text_needing_a_dropped_id_is_refused_naming_its_characters(src, tmp_path):
    c = compressed(src, tmp_path / "en", llm="bf16", vocab=("en",))
    tok = vc.load_text_tokenizer(src)
    ids = prompt_ids(src, c, "Hello Привет, Ωμέγα!")
    with pytest.raises(vc.OutsideVocabulary) as e:
        vc.check_text_ids(c.row_of_id, ids, tok, ["en"])
    assert str(e.value) == (
        "this text needs characters outside the compressed model's vocabulary (en): 'П' (U+041F), 'р' (U+0440), "
        "'и' (U+0438), 'в' (U+0432), 'е' (U+0435), 'т' (U+0442), 'Ω' (U+03A9), 'μ' (U+03BC) and 3 more; use a model "
        "folder compressed with --vocab all or with their language")
    with pytest.raises(vc.OutsideVocabulary, match=r"outside this compressed model's vocabulary"):
        logits_of(c, ids)  # the table itself never reads a dropped row either
    ru = compressed(src, tmp_path / "ru", llm="bf16", vocab=("ru",))
    vc.check_text_ids(ru.row_of_id, prompt_ids(src, ru, "Hello Привет!"), tok, ["ru"])


def test_encoder_is_stripped_or_kept_as_it_was(src, source, tmp_path):
    kept = compressed(src, tmp_path / "keep", llm="bf16")
    enc = load_safetensors(tmp_path / "keep" / ck.ENCODER_FILE)[0]  # less the alignment padding
    speech = load_file(str(src / "speech_tokenizer" / "model.safetensors"))
    assert sorted(enc) == sorted(k for k in speech if k.startswith("encoder.")) and len(enc) == 2
    assert all(torch.equal(enc[k], speech[k]) for k in enc)
    dropped = compressed(src, tmp_path / "drop", llm="bf16", prompt_parts="drop")
    assert not (tmp_path / "drop" / ck.ENCODER_FILE).exists()
    for c in (kept, dropped):
        assert c.decoder_state_dict.keys() == source.decoder_state_dict.keys()
        assert all(torch.equal(c.decoder_state_dict[k], source.decoder_state_dict[k]) for k in c.decoder_state_dict)
    codes = torch.randint(0, 2048, (5, 16), generator=torch.Generator().manual_seed(4))
    assert torch.equal(dropped.build_decoder().decode(codes), source.build_decoder().decode(codes))


def test_fp16_decoder_checks_the_range_and_keeps_fp32_beyond_it(src, source, tmp_path):
    bad = tmp_path / "big"
    import shutil

    shutil.copytree(src, bad)
    path = bad / "speech_tokenizer" / "model.safetensors"
    speech = load_file(str(path))
    big = "decoder.quantizer.rvq_first.vq.layers.0._codebook.cluster_usage"
    speech[big] = speech[big] * 1e5  # counts beyond 65504, as a long-trained codebook's usage can be
    save_file(speech, str(path))
    c = compressed(bad, tmp_path / "fp16", llm="bf16", decoder="fp16")
    report = c.compressed["decoder_fp16"]
    assert report["kept_fp32"] == [big[len("decoder."):]] and report["fp16_max"] == 65504.0
    assert report["max_abs"] == float(speech[big].abs().max()) > 65504
    with safe_open(str(tmp_path / "fp16" / ck.DECODER_FILE), "pt") as f:
        dtypes = {k: f.get_slice(k).get_dtype() for k in f.keys() if not k.startswith("__pad__")}
    assert dtypes.pop(big) == "F32" and set(dtypes.values()) == {"F16"}
    codes = torch.randint(0, 2048, (6, 16), generator=torch.Generator().manual_seed(4))
    ref = ck.load_checkpoint(bad).build_decoder().decode(codes)
    wav = c.build_decoder().decode(codes)
    snr = 10 * torch.log10((ref**2).sum() / ((ref - wav) ** 2).sum())
    # fp16 weights widened to fp32 at build (the arithmetic stays fp32); the tiny random decoder runs
    # saturated (rms 0.98 of full scale) and so amplifies rounding: 26 dB here, bench/ has full size
    assert float(snr) > 20
    assert bool(speech[big].half().isinf().any())  # what a blind cast would have stored


def test_int4_talker_keeps_tables_at_8_bits_and_stays_close(src, source, tmp_path):
    c = compressed(src, tmp_path / "int4", llm="int4", decoder="fp16", vocab=("en",), prompt_parts="drop")
    with safe_open(str(tmp_path / "int4" / ck.TALKER_FILE), "pt") as f:
        dtypes = {k: f.get_slice(k).get_dtype() for k in f.keys() if not k.startswith("__pad__") and not k.endswith(".scale")}
    assert dtypes["talker.model.layers.0.mlp.down_proj.weight"] == "U8"  # 4-bit, two a byte
    assert dtypes["talker.code_predictor.model.layers.1.self_attn.q_proj.weight"] == "U8"
    tables = [k for k in dtypes if cz.is_table(k)]
    assert len(tables) == 1 + 1 + 2 + 15 + 1 + 15 and {dtypes[k] for k in tables} == {"I8"}
    assert {dtypes[k] for k in dtypes if k not in tables and ".layers." not in k} - {"I32"} == {"F32"}  # norms, biases
    # each 4-bit weight is within half a step of its group's scale
    w = source.state_dict["talker.model.layers.1.mlp.up_proj.weight"].float()
    scale = w.reshape(w.shape[0], -1, 32).abs().amax(-1) / 7
    err = (c.state_dict["talker.model.layers.1.mlp.up_proj.weight"] - w).reshape(w.shape[0], -1, 32).abs()
    assert bool((err <= scale[..., None] * 0.5 * 1.002 + 1e-7).all())
    ids = prompt_ids(src, c)
    lp_src, lp = torch.log_softmax(logits_of(source, ids), -1), torch.log_softmax(logits_of(c, ids), -1)
    kl = float((lp_src.exp() * (lp_src - lp)).sum(-1).mean())
    # measured 0.28 nats: at this toy width a group of 32 is a whole row; full size is in bench/
    assert 0 < kl < 0.6, kl
    int8 = compressed(src, tmp_path / "int8", llm="int8", vocab=("en",))
    lp8 = torch.log_softmax(logits_of(int8, ids), -1)
    assert 0 < float((lp_src.exp() * (lp_src - lp8)).sum(-1).mean()) < 0.005  # measured 0.0008
    assert len(codes_of(c, ids, 8)) == 7  # runs end to end: text -> codes


def test_length_bound_is_kept(src, source, tmp_path):
    c = compressed(src, tmp_path / "b", llm="int4", vocab=("en",))
    assert c.generation == source.generation
    assert c.compressed["length_bound"] == {"rule": "min(max_new_tokens, max(min_frames, frames_per_text_token * text tokens))",
                                            "min_frames": 75, "frames_per_text_token": 6, "max_new_tokens": 8192}
    assert frame_cap(20, c.generation.max_new_tokens) == frame_cap(20, source.generation.max_new_tokens) == 120


def test_refusals(src, tmp_path):
    c = tmp_path / "c"
    cz.compress_folder(src, c, llm="bf16")
    with pytest.raises(InputError, match=r"^.* is already a compressed folder; compress the original model folder$"):
        cz.compress_folder(c, tmp_path / "cc")
    with pytest.raises(InputError, match=r"^.* already exists; choose a new --out folder$"):
        cz.compress_folder(src, c)
    with pytest.raises(InputError, match=r"^--vocab: 'all' cannot be combined with languages$"):
        cz.compress_folder(src, tmp_path / "x", vocab=("all", "en"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]  # nothing half-written
    (c / ck.DECODER_FILE).unlink()
    with pytest.raises(InputError, match=r"is not a complete compressed Qwen3-TTS folder; missing: speech_tokenizer/decoder.safetensors$"):
        ck.load_checkpoint(c)


def test_cli_detects_the_family_and_runs_in_a_child(src, tmp_path):
    out = tmp_path / "small"
    code = f"""
import sys
from epub2audio.cli import main
rc = main(["model", "compress", "--model-dir", {str(src)!r}, "--out", {str(out)!r}, "--llm", "int4", "--decoder", "fp16",
           "--languages", "en", "--prompt-parts", "drop"])
rc2 = main(["model", "compress", "--model-dir", {str(src)!r}, "--out", {str(tmp_path / "o2")!r}, "--flow", "fp16"])
print("RC", rc, rc2, "torch" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.stdout.splitlines()[-1] == "RC 0 2 False", proc.stderr
    assert proc.stdout.startswith(f"Wrote {out} (") and "talker.safetensors" in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == (
        f"epub2audio: error: --flow is for CosyVoice3 folders; {src} is a Qwen3-TTS folder (see --decoder)")
    assert json.loads((out / "compressed.json").read_text())["options"] == {
        "llm": "int4", "tables": "int8", "decoder": "fp16", "vocab": ["en"], "prompt_parts": "drop"}


def test_base_speaker_encoder_goes_with_the_prompt_parts(src, tmp_path):
    import shutil

    base = tmp_path / "base"
    shutil.copytree(src, base)
    cfg = json.loads((base / "config.json").read_text())
    cfg["tts_model_type"] = "base"
    (base / "config.json").write_text(json.dumps(cfg))
    main = load_file(str(base / "model.safetensors"))
    main["speaker_encoder.fc.weight"] = torch.randn(4, 6, 1, generator=torch.Generator().manual_seed(8)).to(torch.bfloat16)
    save_file(main, str(base / "model.safetensors"))
    cz.compress_folder(base, tmp_path / "keep", llm="bf16")
    kept = load_safetensors(tmp_path / "keep" / ck.SPEAKER_ENCODER_FILE)[0]
    assert list(kept) == ["speaker_encoder.fc.weight"] and torch.equal(kept["speaker_encoder.fc.weight"], main["speaker_encoder.fc.weight"])
    c = compressed(base, tmp_path / "drop", llm="bf16", prompt_parts="drop")
    assert c.model_kind == "base" and not (tmp_path / "drop" / ck.SPEAKER_ENCODER_FILE).exists()
    assert ck.load_checkpoint(tmp_path / "keep").model_kind == "base"
