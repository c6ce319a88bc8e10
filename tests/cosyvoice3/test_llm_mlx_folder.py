"""MLX on a compressed folder (llm_mlx_folder.py): the stored tensors run as MLX's quantised layers,
computing exactly the folder's weights, as close to the fp32 reference as torch on the same folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
import mlx.nn as mnn  # noqa: E402

from epub2audio.voices.cosyvoice3 import checkpoint as ck  # noqa: E402
from epub2audio.voices.cosyvoice3 import compress as cz  # noqa: E402
from epub2audio.voices.cosyvoice3 import frontend, llm_mlx  # noqa: E402
from epub2audio.voices.cosyvoice3.backends import build_llm, build_torch_llm  # noqa: E402
from epub2audio.voices.cosyvoice3.llm import LLMArgs  # noqa: E402
from epub2audio.voices.cosyvoice3.llm_mlx_folder import table_bits  # noqa: E402
from epub2audio.voices.cosyvoice3.vocab import OutsideVocabulary  # noqa: E402

from . import fixtures as fx  # noqa: E402
from . import random_weights as rw  # noqa: E402
from .test_compress import INSIDE, OUTSIDE, compressed, logp, profile_dir  # noqa: E402, F401 (a fixture)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return frontend.load_text_tokenizer(tiny_model_dir / ck.BLANK_EN)


@pytest.fixture(scope="module")
def reference(tiny_model_dir, tokenizer):
    source = ck.load_checkpoint(tiny_model_dir)
    return logp(build_torch_llm(source.qwen_config, dict(source.llm_state_dict), "fp32"), tokenizer, OUTSIDE)


def folder_llms(folder: Path):
    """(MLX on the stored tensors, MLX fp32/bf16 on the folder's dequantised weights, torch on the folder)."""
    mlx_lm = cz.build_llm_from_folder(ck.load_checkpoint(folder), "mlx", "fp32")
    stored = ck.load_checkpoint(folder)
    dense = "bf16" if stored.compressed["options"]["llm"] == "bf16" else "fp32"
    dequantised = llm_mlx.from_state_dict_uncached(stored.qwen_config, cz.dequantized_llm_state_dict(stored.llm_state_dict), dense)
    return mlx_lm, dequantised, cz.build_llm_from_folder(ck.load_checkpoint(folder), "torch", "fp32")


@pytest.mark.parametrize("llm, tables", [("fp32", None), ("bf16", None), ("int8", None), ("int8", "int8"), ("int4", None)])
def test_mlx_runs_the_stored_weights_as_close_as_torch_does(tiny_model_dir, tmp_path, tokenizer, reference, llm, tables):
    lm, dequantised, torch_lm = folder_llms(compressed(tiny_model_dir, tmp_path / llm, llm=llm, tables=tables))
    assert (lm.backend, lm.precision, lm.recipe) == ("mlx", llm, "stored")
    got = logp(lm, tokenizer, OUTSIDE)
    # The quantised layers hold the folder's weights: equal to dense MLX on the dequantised
    # weights up to the matmul's summation order (a wrong packing would be off by whole units).
    assert (got - logp(dequantised, tokenizer, OUTSIDE)).abs().max() < 1e-4
    # ... and so stray from the fp32 reference no further than torch on the same folder does
    # (torch's int8 also quantises its activations; MLX's bf16 rounds a little differently).
    mlx_error = (got - reference).abs().max().item()
    torch_error = (logp(torch_lm, tokenizer, OUTSIDE) - reference).abs().max().item()
    assert mlx_error <= (1e-4 if llm == "fp32" else 1.25 * torch_error), (mlx_error, torch_error)
    projections = [m for layer in lm.model.model.layers for m in layer.modules()
                   if isinstance(m, (mnn.Linear, mnn.QuantizedLinear))]
    if llm.startswith("int"):
        assert {(type(m), m.bits) for m in projections} == {(mnn.QuantizedLinear, int(llm[3:]))}
    else:
        assert {type(m) for m in projections} == {mnn.Linear}
    # embeddings and the speech head: never under 8 bits (quantised only in int4 and --tables int8, at 8)
    assert set(table_bits(lm).values()) == ({8} if cz.tables_for(llm, tables) == "int8" else {16 if llm == "bf16" else 32})


@pytest.mark.parametrize("tables", ["fp32", "int8"])
def test_compact_vocabulary_is_lossless_inside_and_refused_outside(tiny_model_dir, tmp_path, tokenizer, tables):
    full = cz.build_llm_from_folder(ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "all", llm="int8", tables=tables)), "mlx")
    small = cz.build_llm_from_folder(
        ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "en", llm="int8", tables=tables, vocab=("en",))), "mlx")
    assert small.model.model.embed_tokens.weight.shape[0] < full.model.model.embed_tokens.weight.shape[0]
    assert torch.equal(logp(small, tokenizer, INSIDE), logp(full, tokenizer, INSIDE))  # identical, not close
    with pytest.raises(OutsideVocabulary):  # a left-out id never reads another row
        small.start_decoding(tokenizer.encode(OUTSIDE), [1])


def test_another_precision_than_stored_takes_the_converting_path(tiny_model_dir, tmp_path):
    folder = compressed(tiny_model_dir, tmp_path / "bf16", llm="bf16")
    lm = cz.build_llm_from_folder(ck.load_checkpoint(folder), "mlx", "fp16")
    assert (lm.precision, lm.recipe) == ("fp16", "")


def write_group_sized_folder(tiny_model_dir: Path, directory: Path) -> Path:
    """The tiny official folder with an LLM whose widths MLX's own int8 (groups of 64) accepts."""
    shutil.copytree(tiny_model_dir, directory)
    blank = directory / ck.BLANK_EN
    config = {**json.loads((blank / "config.json").read_text()), "hidden_size": 64, "intermediate_size": 128}
    (blank / "config.json").write_text(json.dumps(config))
    torch.save(rw.random_llm_state_dict(LLMArgs.from_config(config), seed=5), directory / "llm.pt")
    (directory / "cosyvoice3.yaml").write_text(fx.recipe_yaml(fx.tiny_flow_args(), fx.tiny_hift_args(), 64))
    return directory


def test_int8_folder_on_mlx_is_not_mlx_own_int8_and_both_stay_close(tiny_model_dir, tmp_path, tokenizer):
    """MLX's own int8 quantises llm.pt's fp32 weights asymmetrically per 64 inputs (and the text
    table too); the folder holds torch's symmetric per-row int8 and an fp32 text table. Two int8
    grids: not equal, and each within the int8 bound of the fp32 reference (test_llm_mlx: TV < 0.1)."""
    official = write_group_sized_folder(tiny_model_dir, tmp_path / "official")
    own = build_llm(ck.load_checkpoint(official), "mlx", "int8", cache_root=tmp_path / "cache")
    fp32 = build_llm(ck.load_checkpoint(official), "mlx", "fp32", cache_root=tmp_path / "cache")
    folder = cz.build_llm_from_folder(ck.load_checkpoint(compressed(official, tmp_path / "int8", llm="int8")), "mlx")
    assert (own.precision, folder.precision, own.recipe, folder.recipe) == ("int8", "int8", "", "stored")
    assert isinstance(own.model.model.embed_tokens, mnn.QuantizedEmbedding)
    assert type(folder.model.model.embed_tokens) is mnn.Embedding
    want, a, b = (logp(lm, tokenizer, INSIDE).exp() for lm in (fp32, own, folder))
    assert not torch.equal(a, b)
    for got in (a, b):
        assert (0.5 * (got - want).abs().sum(-1)).max() < 0.1  # total-variation distance per step


def test_the_voice_on_mlx_records_the_folder_recipe_in_its_identity(tiny_model_dir, tmp_path, profile_dir):
    from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

    folder = compressed(tiny_model_dir, tmp_path / "int8", llm="int8", flow="bf16", hift="fp16")
    voice = CosyVoice3Voice.load(folder, profile_dir, llm_backend="mlx", max_tokens_per_segment=20)
    assert (voice.info.backend, voice.info.precision) == ("mlx+torch", "llm=int8,flow=bf16,hift=fp16")
    assert voice.info.model_id.endswith("+mlx+torch:llm=int8,flow=bf16,hift=fp16+mlx-stored")
    assert voice.synthesize(INSIDE, seed=3) == voice.synthesize(INSIDE, seed=3)
