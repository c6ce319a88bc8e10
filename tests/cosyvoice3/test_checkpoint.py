"""Loading an official-layout CosyVoice3 directory: the happy path and every clear error."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from epub2audio.errors import InputError
from epub2audio.voices.cosyvoice3 import checkpoint as ck

from . import fixtures as fx


@pytest.fixture
def model_copy(tiny_model_dir, tmp_path) -> Path:
    """A private copy of the tiny model directory that a test may break."""
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))


# Records every Python-level open() of a BlankEN weights file (an audit hook cannot be removed, so
# it stays installed but only records while a test has armed it).
_OPENED: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and args and "model.safetensors" in str(args[0]):
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)


# ---------------------------------------------------------------------------------------------


def test_loads_official_layout(tiny_model_dir):
    c = ck.load_checkpoint(tiny_model_dir)
    assert c.sample_rate == 24000
    assert c.paths.model_dir == tiny_model_dir
    assert c.qwen_config["hidden_size"] == 32 and c.qwen_config["vocab_size"] == fx.TINY_TEXT_VOCAB
    assert c.model_id.startswith("cosyvoice3-") and len(c.model_id) == len("cosyvoice3-") + 16
    # exactly the tensors torch.save wrote
    for name, sd in (("llm.pt", c.llm_state_dict), ("flow.pt", c.flow_state_dict)):
        saved = torch.load(tiny_model_dir / name, weights_only=True)
        assert sd.keys() == saved.keys()
        assert all(torch.equal(sd[k], saved[k]) for k in saved)
    hift = torch.load(tiny_model_dir / "hift.pt", weights_only=True)
    assert c.hift_state_dict.keys() == hift.keys()  # already in the canonical parametrizations form
    # the recipe was read without HyperPyYAML: tags kept, simple refs resolved, expressions left alone
    assert c.recipe["llm"].tag == "!new:cosyvoice.llm.llm.CosyVoice3LM"
    assert c.recipe["flow"]["spk_embed_dim"] == 192
    assert c.recipe["flow"]["decoder"]["estimator"]["static_chunk_size"].tag == "!ref"
    assert ck.load_checkpoint(tiny_model_dir).model_id == c.model_id


def test_stage_models_build_from_the_checkpoint(tiny_model_dir):
    """The path real weights take: checkpoint -> LLM / flow / HiFT modules, strict loads."""
    from epub2audio.voices.cosyvoice3.flow import load_flow
    from epub2audio.voices.cosyvoice3.hift import load_hift
    from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM

    c = ck.load_checkpoint(tiny_model_dir)
    llm = CosyVoice3LM.from_checkpoint(c.qwen_config, c.llm_state_dict)
    assert torch.equal(llm.speech_embedding.weight, c.llm_state_dict["speech_embedding.weight"])
    load_flow(c.flow_state_dict)
    load_hift(c.hift_state_dict)


def test_blank_en_weights_are_never_read(model_copy):
    global _OPENED
    blank = model_copy / fx.BLANK_EN / "model.safetensors"
    assert blank.read_bytes() == fx.GARBAGE_SAFETENSORS  # a garbage file: any reader would fail
    from epub2audio.voices.cosyvoice3.frontend import load_text_tokenizer
    from epub2audio.voices.cosyvoice3.llm import CosyVoice3LM

    _OPENED = []
    try:
        c = ck.load_checkpoint(model_copy)
        llm = CosyVoice3LM.from_checkpoint(c.qwen_config, c.llm_state_dict)
        load_text_tokenizer(c.paths.blank_en)
        opened = list(_OPENED)
    finally:
        _OPENED = None
    assert opened == []
    saved = torch.load(model_copy / "llm.pt", weights_only=True)
    emb = "llm.model.model.embed_tokens.weight"
    assert torch.equal(llm.llm.model.model.embed_tokens.weight, saved[emb])
    # and a directory without the BlankEN weights at all loads just the same
    blank.unlink()
    assert ck.load_checkpoint(model_copy).model_id == c.model_id


@pytest.mark.parametrize("form,prefix", [("parametrizations", ""), ("legacy", ""), ("legacy", "generator.")])
def test_hift_weight_norm_forms_all_load(model_copy, form, prefix):
    from .random_weights import random_hift_state_dict

    # clone: the loaded tensors are memory-mapped views of the file we are about to overwrite
    reference = {k: v.clone() for k, v in ck.load_checkpoint(model_copy).hift_state_dict.items()}
    torch.save(random_hift_state_dict(fx.tiny_hift_args(), 2, weight_norm_form=form, prefix=prefix), model_copy / "hift.pt")
    c = ck.load_checkpoint(model_copy)
    assert c.hift_state_dict.keys() == reference.keys()
    assert all(torch.equal(c.hift_state_dict[k], reference[k]) for k in reference)


def test_fixture_writes_legacy_hift_on_request(tmp_path):
    d = fx.write_tiny_checkpoint(tmp_path / "legacy", seed=0, hift_weight_norm_form="legacy")
    raw = torch.load(d / "hift.pt", weights_only=True)
    assert any(k.endswith(".weight_g") for k in raw)
    assert any(k.endswith(".parametrizations.weight.original0") for k in ck.load_checkpoint(d).hift_state_dict)


# --------------------------------------------------------------------------------------------- errors


def test_not_a_directory(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        ck.load_checkpoint(tmp_path / "absent")
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(InputError, match="is not a directory"):
        ck.load_checkpoint(f)


def test_missing_files_are_all_listed(model_copy):
    for rel in ("flow.pt", "campplus.onnx", f"{fx.BLANK_EN}/merges.txt"):
        (model_copy / rel).unlink()
    with pytest.raises(InputError) as e:
        ck.load_checkpoint(model_copy)
    msg = str(e.value)
    assert "\n" not in msg
    for rel in ("flow.pt", "campplus.onnx", f"{fx.BLANK_EN}/merges.txt"):
        assert rel in msg
    assert "hift.pt" not in msg


def test_empty_directory_lists_everything(tmp_path):
    with pytest.raises(InputError) as e:
        ck.load_checkpoint(tmp_path)
    for name in ("cosyvoice3.yaml", "llm.pt", "flow.pt", "hift.pt", "speech_tokenizer_v3.onnx", "config.json"):
        assert name in str(e.value)


@pytest.mark.parametrize(
    "content,match",
    [
        (["not", "a", "dict"], "does not hold a state dict"),
        ({"a": torch.zeros(1), "b": 3}, "not a named tensor"),
        ({}, "does not hold a state dict"),
    ],
)
def test_pt_that_is_not_a_state_dict(model_copy, content, match):
    torch.save(content, model_copy / "flow.pt")
    with pytest.raises(InputError, match=match):
        ck.load_checkpoint(model_copy)


def test_pt_that_is_not_a_checkpoint(model_copy):
    (model_copy / "llm.pt").write_bytes(b"this is not a zip file" * 10)
    with pytest.raises(InputError, match="cannot read llm.pt"):
        ck.load_checkpoint(model_copy)


def test_wrong_keys_are_named(model_copy):
    sd = torch.load(model_copy / "llm.pt", weights_only=True)
    del sd["llm.model.model.layers.1.mlp.up_proj.weight"]
    sd["llm_embedding.weight"] = torch.zeros(2, 32)  # the CosyVoice2 layout has this
    torch.save(sd, model_copy / "llm.pt")
    with pytest.raises(InputError) as e:
        ck.load_checkpoint(model_copy)
    msg = str(e.value)
    assert "llm.pt" in msg and "layers.1.mlp.up_proj.weight" in msg and "llm_embedding.weight" in msg


def test_flow_missing_block_keys_are_named(model_copy):
    sd = torch.load(model_copy / "flow.pt", weights_only=True)
    for k in [k for k in sd if k.startswith("decoder.estimator.transformer_blocks.1.ff.")]:
        del sd[k]
    torch.save(sd, model_copy / "flow.pt")
    with pytest.raises(InputError, match=r"flow\.pt .*missing key\(s\): decoder\.estimator\.transformer_blocks\.1\.ff"):
        ck.load_checkpoint(model_copy)


def test_llm_shape_mismatch_against_config(model_copy):
    cfg_path = model_copy / fx.BLANK_EN / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["intermediate_size"] = 96
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match=r"llm\.pt has tensors of the wrong shape.*mlp\.gate_proj\.weight \[64, 32\] \(expected \[96, 32\]\)"):
        ck.load_checkpoint(model_copy)


def test_llm_layer_count_mismatch_against_config(model_copy):
    cfg_path = model_copy / fx.BLANK_EN / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["num_hidden_layers"] = 3
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match=r"missing key\(s\): llm\.model\.model\.layers\.2\."):
        ck.load_checkpoint(model_copy)


def test_flow_mismatch_against_yaml(model_copy):
    y = model_copy / "cosyvoice3.yaml"
    y.write_text(y.read_text().replace("            depth: 2\n", "            depth: 22\n"))
    with pytest.raises(InputError, match="flow.pt disagrees with cosyvoice3.yaml: DiT depth: checkpoint 2, yaml 22"):
        ck.load_checkpoint(model_copy)


def test_hift_mismatch_against_yaml(model_copy):
    y = model_copy / "cosyvoice3.yaml"
    y.write_text(y.read_text().replace("    base_channels: 32\n", "    base_channels: 512\n"))
    with pytest.raises(InputError, match="hift.pt disagrees with cosyvoice3.yaml: base_channels: checkpoint 32, yaml 512"):
        ck.load_checkpoint(model_copy)


def test_not_a_cosyvoice3_recipe(model_copy):
    y = model_copy / "cosyvoice3.yaml"
    y.write_text(y.read_text().replace("cosyvoice.llm.llm.CosyVoice3LM", "cosyvoice.llm.llm.Qwen2LM"))
    with pytest.raises(InputError, match="builds llm as Qwen2LM, not CosyVoice3LM"):
        ck.load_checkpoint(model_copy)


def test_unparsable_yaml(model_copy):
    (model_copy / "cosyvoice3.yaml").write_text("llm: [unclosed\n")
    with pytest.raises(InputError, match="cannot parse cosyvoice3.yaml"):
        ck.load_checkpoint(model_copy)


def test_yaml_tags_are_inert(tmp_path):
    marker = tmp_path / "executed"
    y = tmp_path / "r.yaml"
    y.write_text(
        f"boom: !apply:pathlib.Path.touch [!new:pathlib.Path ['{marker}']]\n"
        "obj: !new:os.system\n  command: 'echo hacked'\n"
        "x: 3\nref: !ref <x>\n"
    )
    r = ck.read_recipe(y)
    assert not marker.exists()
    assert r["boom"].tag == "!apply:pathlib.Path.touch" and r["obj"].tag == "!new:os.system"
    assert r["ref"] == 3


def test_bad_qwen_config(model_copy):
    (model_copy / fx.BLANK_EN / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="cannot parse CosyVoice-BlankEN/config.json"):
        ck.load_checkpoint(model_copy)


# --------------------------------------------------------------------------------------------- model_id


def test_model_id_is_path_independent_and_content_sensitive(model_copy, tiny_model_dir):
    base = ck.compute_model_id(ck.check_layout(tiny_model_dir))
    assert ck.compute_model_id(ck.check_layout(model_copy)) == base  # copied elsewhere: same id
    sd = torch.load(model_copy / "flow.pt", weights_only=True)
    sd["pre_lookahead_layer.conv2.bias"] = sd["pre_lookahead_layer.conv2.bias"] + 1e-3
    torch.save(sd, model_copy / "flow.pt")
    assert ck.compute_model_id(ck.check_layout(model_copy)) != base


def test_model_id_samples_large_files(tmp_path):
    """Files above 16 MiB are hashed by 16 sampled 1 MiB blocks including the first and last."""
    import hashlib

    from epub2audio.files import sampled_digest_update

    big = tmp_path / "big.bin"
    size = 40 * (1 << 20) + 123
    with open(big, "wb") as f:
        f.truncate(size)
    h1 = hashlib.sha256()
    sampled_digest_update(h1, big, big.name)
    with open(big, "r+b") as f:  # change the very last byte: always sampled
        f.seek(size - 1)
        f.write(b"\x01")
    h2 = hashlib.sha256()
    sampled_digest_update(h2, big, big.name)
    assert h1.hexdigest() != h2.hexdigest()
