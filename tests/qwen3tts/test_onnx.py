"""The ONNX Runtime Talker (talker_onnx.py) on the tests' tiny folders: its logits and hidden
states against the torch Talker's and upstream's fp64 numbers (upstream_tiny.json) within
upstream's own fp32 floor, upstream's seeded codes replayed through it, both prompt layouts and a
clone prompt giving torch's codes, the session rules, and the export cache built once."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from epub2audio.voices.qwen3tts import talker_onnx  # noqa: E402
from epub2audio.voices.qwen3tts.code_predictor import CodePredictor  # noqa: E402
from epub2audio.voices.qwen3tts.generate import generate, generate_clone  # noqa: E402
from epub2audio.voices.qwen3tts.talker import Talker  # noqa: E402

from .test_upstream import FIXTURE, _inputs, _maxdiff  # noqa: E402

MODES = json.loads((Path(__file__).parent / "upstream_tiny_modes.json").read_text(encoding="utf-8"))


def _torch_stages(ck):
    return Talker.from_state_dict(ck.talker_args, ck.state_dict), CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict)


@pytest.fixture(scope="module")
def stages(tiny_checkpoint, tmp_path_factory):
    ck = tiny_checkpoint
    talker, cp = _torch_stages(ck)
    onnx_talker = talker_onnx.load_onnx_talker(Talker.from_state_dict(ck.talker_args, ck.state_dict), "tiny",
                                               tmp_path_factory.mktemp("onnx"), threads=1)  # fmt: skip
    return talker, cp, onnx_talker


def test_the_graph_holds_the_stack_and_the_host_keeps_only_the_tables(stages):
    _, _, ot = stages
    assert ot.backend == "onnx" and ot.precision == "fp32" and ot.threads == 1
    assert len(ot.model.layers) == 0  # released: the graph holds them
    names = {i.name for i in ot.session.get_inputs()}
    assert names == set(talker_onnx.io_names(ot.args.num_hidden_layers)[0])


def test_logits_and_hidden_match_torch_and_upstream_within_the_fp32_floor(tiny_checkpoint, stages):
    talker, _, ot = stages
    x, *_ = _inputs(tiny_checkpoint.talker_args.hidden_size)
    with torch.inference_mode():
        want = talker(x)[0]
        ref = talker.start_decoding(x[:, :10])
        ref_steps = [ref(None)] + [ref(x[0, i]) for i in range(10, 14)]
    step = ot.start_decoding(x[:, :10])
    got = [step(None)] + [step(x[0, i]) for i in range(10, 14)]
    logits = torch.stack([g[0] for g in got])
    assert logits.dtype == torch.float32 and logits.shape == (5, 3072)
    floor = FIXTURE["talker_floor"]
    assert (logits - want[9:]).abs().max().item() <= 2 * floor + 1e-6
    assert _maxdiff(logits[:, ::64], FIXTURE["talker_logits"][9:]) <= 2 * floor + 1e-6
    # the hidden state the Code Predictor reads: torch's within fp32 rounding
    hidden = torch.stack([g[1] for g in got])
    assert (hidden - torch.stack([r[1] for r in ref_steps])).abs().max().item() <= 1e-5


def test_session_order_is_enforced(stages):
    _, _, ot = stages
    step = ot.start_decoding(ot.embed_codec([2149, 2150]))
    with pytest.raises(RuntimeError, match="prompt"):
        step(torch.zeros(ot.args.hidden_size))
    step(None)
    with pytest.raises(RuntimeError, match="already run"):
        step(None)


def test_seeded_generation_replays_upstreams_codes(tiny_checkpoint, stages):
    """Upstream generate()'s codes (streaming layout, seed 3) from the ONNX Talker: the draws are the
    host sampler's and the logits agree to ~1e-6, so every code is the same."""
    ck = tiny_checkpoint
    _, cp, ot = stages
    for key, theirs in FIXTURE["generate"].items():
        speaker, language, cap = key.split("/")
        res = generate(ot, cp, FIXTURE["generate_ids"], ck.text_ids, ck.generation,
                       torch.Generator().manual_seed(FIXTURE["generate_seed"]), speaker=speaker, language=language,
                       max_frames=int(cap), streaming=True)  # fmt: skip
        assert res.capped and res.frames == theirs, key


def test_default_layout_and_a_clone_give_upstreams_codes(tiny_checkpoint, tiny_base_dir, stages, tmp_path):
    """Upstream's default calls (upstream_tiny_modes.json): CustomVoice's non-streaming layout, and
    a Base clone in ICL mode (its default streaming layout, the reference codes in the prompt),
    through the ONNX Talker give upstream's codes, seed for seed."""
    from epub2audio.voices.qwen3tts.checkpoint import load_checkpoint
    from epub2audio.voices.qwen3tts.clone import ClonePrompt

    ck = tiny_checkpoint
    _, cp, ot = stages
    case = MODES["custom"]["ryan/english"]
    got = generate(ot, cp, case["modes"]["non_streaming"]["ids"], ck.text_ids, ck.generation,
                   torch.Generator().manual_seed(MODES["seed"]), speaker=case["speaker"], language=case["language"],
                   max_frames=case["cap"])  # fmt: skip
    assert got.frames == case["default_codes"]
    base = load_checkpoint(tiny_base_dir)
    b_onnx = talker_onnx.load_onnx_talker(Talker.from_state_dict(base.talker_args, base.state_dict), "tiny-base",
                                          tmp_path, threads=1)  # fmt: skip
    c = MODES["base"]["icl_long_text"]
    mode = c["modes"]["streaming"]
    emb = np.frombuffer(base64.b64decode(c["speaker_embedding"]["f32le_base64"]), dtype="<f4").copy()
    prompt = ClonePrompt(speaker_embedding=emb, ref_codes=np.asarray(c["ref_codes"]), ref_text="reference",
                         ref_text_ids=np.asarray(mode["ref_ids"]), model_id="test")  # fmt: skip
    got = generate_clone(b_onnx, _torch_stages(base)[1], mode["ids"], base.text_ids, base.generation,
                         torch.Generator().manual_seed(MODES["seed"]), prompt, language=c["language"], max_frames=c["cap"])  # fmt: skip
    assert got.frames == c["default_codes"]


def test_the_export_is_cached_once_and_a_stale_entry_rebuilt(tiny_checkpoint, tmp_path):
    ck = tiny_checkpoint
    path, built = talker_onnx.ensure_exported(Talker.from_state_dict(ck.talker_args, ck.state_dict), "m1", tmp_path)
    assert built and path == talker_onnx.cache_path("m1", tmp_path)
    assert json.loads((path / "meta.json").read_text())["model_id"] == "m1"
    again, built = talker_onnx.ensure_exported(None, "m1", tmp_path)  # a valid entry: the Talker is never read
    assert again == path and not built
    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, "version": "0"}))
    _, built = talker_onnx.ensure_exported(Talker.from_state_dict(ck.talker_args, ck.state_dict), "m1", tmp_path)
    assert built


def test_backends_build_the_onnx_talker_with_torchs_code_predictor(tiny_checkpoint, tmp_path):
    from epub2audio.voices.qwen3tts.backends import build_talker_and_code_predictor

    talker, cp = build_talker_and_code_predictor(tiny_checkpoint, "onnx", model_id="tiny", cache_root=tmp_path, threads=1)
    assert isinstance(talker, talker_onnx.OnnxTalker) and type(cp) is CodePredictor
    assert (talker_onnx.cache_path("tiny", tmp_path) / talker_onnx.MODEL_FILE).is_file()
