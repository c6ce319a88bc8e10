"""The MLX Talker and Code Predictor (talker_mlx.py, code_predictor_mlx.py) on mlx[cpu], on the tests'
tiny folder: logits against the torch port and against upstream's fp64 numbers (upstream_tiny.json)
within upstream's own fp32 floor, the M-RoPE rows, the session rules, and seeded generation that
replays upstream's codes through the shared host sampler while the MLX graph draws nothing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from epub2audio.voices.qwen3tts import code_predictor_mlx, talker_mlx  # noqa: E402
from epub2audio.voices.qwen3tts.code_predictor import CodePredictor  # noqa: E402
from epub2audio.voices.qwen3tts.generate import generate  # noqa: E402
from epub2audio.voices.qwen3tts.talker import Talker  # noqa: E402

from .test_upstream import FIXTURE, _inputs, _maxdiff  # noqa: E402


@pytest.fixture(scope="module")
def stages(tiny_checkpoint):
    ck = tiny_checkpoint
    return (
        Talker.from_state_dict(ck.talker_args, ck.state_dict),
        CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict),
        talker_mlx.Talker.from_state_dict(ck.talker_args, ck.state_dict),
        code_predictor_mlx.CodePredictor.from_state_dict(ck.code_predictor_args, ck.state_dict),
    )


def test_parameters_are_the_official_names_loaded_strictly(tiny_checkpoint, stages):
    from mlx.utils import tree_flatten

    ck = tiny_checkpoint
    _, _, talker, cp = stages
    names = {k for k, _ in tree_flatten(talker.parameters())} | {
        "code_predictor." + k for k, _ in tree_flatten(cp.parameters())}  # fmt: skip
    assert names == {k.removeprefix("talker.") for k in ck.state_dict}
    assert talker.backend == cp.backend == "mlx" and talker.precision == "fp32"
    # every block's rope is the one shared M-RoPE, not mlx-lm's default
    assert all(layer.self_attn.rope is talker.model._rope for layer in talker.model.layers)
    broken = dict(ck.state_dict)
    broken.pop("talker.codec_head.weight")
    with pytest.raises(ValueError, match="codec_head"):
        talker_mlx.Talker.from_state_dict(ck.talker_args, broken)


def test_talker_logits_match_torch_and_upstream_within_the_fp32_floor(tiny_checkpoint, stages):
    ck = tiny_checkpoint
    torch_talker, _, talker, _ = stages
    x, *_ = _inputs(ck.talker_args.hidden_size)
    with torch.inference_mode():
        want = torch_talker(x)[0]
    full = talker(x)[0]
    step = talker.start_decoding(x[:, :10])
    session = torch.stack([step(None)[0]] + [step(x[0, i])[0] for i in range(10, 14)])
    assert full.dtype == torch.float32 and full.shape == (14, 3072) and session.shape == (5, 3072)
    floor = FIXTURE["talker_floor"]
    assert (full - want).abs().max().item() <= 2 * floor + 1e-6
    assert (session - want[9:]).abs().max().item() <= 2 * floor + 1e-6
    assert _maxdiff(full[:, ::64], FIXTURE["talker_logits"]) <= 2 * floor + 1e-6
    assert _maxdiff(session[:, ::64], FIXTURE["talker_logits"][9:]) <= 2 * floor + 1e-6


def test_mrope_uses_each_frequencys_own_position_row(tiny_checkpoint, stages):
    """Three distinct rows (as a caller may pass) give talker.py's logits; rows that differ only
    in height or width move the logits, so the interleaving is really exercised."""
    ck = tiny_checkpoint
    torch_talker, _, talker, _ = stages
    x, *_ = _inputs(ck.talker_args.hidden_size)
    rows = torch.stack([torch.arange(14), torch.arange(14) * 2 + 1, torch.arange(14) * 3 + 5])
    with torch.inference_mode():
        want = torch_talker.codec_head(torch_talker.model(x, positions=rows)).float()[0]
        plain = torch_talker(x)[0]
    got = talker(x, positions=mx.array(rows.numpy()))[0]
    assert (got - want).abs().max().item() <= 2 * FIXTURE["talker_floor"] + 1e-6
    assert (want - plain).abs().max().item() > 1e-2


def test_code_predictor_logits_match_torch_and_upstream(tiny_checkpoint, stages):
    ck = tiny_checkpoint
    _, torch_cp, _, cp = stages
    _, hid, first, codes, _ = _inputs(ck.talker_args.hidden_size)
    with torch.inference_mode():
        want = torch_cp(hid[0, 0], first[0, 0], codes)
    got = cp(hid[0, 0], first[0, 0], codes)
    assert got.shape == (15, 2048) and got.dtype == torch.float32
    assert (got - want).abs().max().item() <= 2 * FIXTURE["cp_floor"] + 1e-6
    assert _maxdiff(got[:, ::64], FIXTURE["cp_logits"]) <= 2 * FIXTURE["cp_floor"] + 1e-6
    # the cached frame draws follow the teacher-forced heads: greedy picks are each head's argmax
    seen: list[torch.Tensor] = []

    def greedy(logits: torch.Tensor) -> int:
        seen.append(logits)
        return int(logits.argmax())

    drawn = cp.predict(mx.array(hid[0, 0].numpy()), first[0, 0], greedy)
    forced = cp(hid[0, 0], first[0, 0], drawn)
    assert drawn == [int(r.argmax()) for r in forced]
    assert (torch.stack(seen) - forced).abs().max().item() <= 1e-5


def test_session_order_and_id_checks(stages):
    _, _, talker, _ = stages
    step = talker.start_decoding(talker.embed_codec([2149, 2150]))
    with pytest.raises(RuntimeError):
        step(torch.zeros(talker.args.hidden_size))
    step(None)
    with pytest.raises(RuntimeError):
        step(None)
    with pytest.raises(ValueError, match="text id 151936"):
        talker.embed_text([151936])
    with pytest.raises(ValueError, match="codec id 3072"):
        talker.embed_codec([3072])


def test_seeded_generation_replays_upstream_codes_on_mlx(tiny_checkpoint, stages):
    """Upstream generate()'s codes (fixture) from the MLX stages with the same Generator seed:
    the draws are the host sampler's, the logits agree to ~1e-6, so every code is the same."""
    ck = tiny_checkpoint
    _, _, talker, cp = stages
    for key, theirs in FIXTURE["generate"].items():
        speaker, language, cap = key.split("/")
        res = generate(talker, cp, FIXTURE["generate_ids"], ck.text_ids, ck.generation,
                       torch.Generator().manual_seed(FIXTURE["generate_seed"]), speaker=speaker, language=language,
                       max_frames=int(cap), streaming=True)  # fmt: skip
        assert res.capped and res.frames == theirs, key


def test_same_seed_same_codes_and_mlx_draws_no_random_numbers(tiny_checkpoint, stages):
    ck = tiny_checkpoint
    torch_talker, torch_cp, talker, cp = stages
    ids = FIXTURE["generate_ids"]

    def run(t, c, seed):
        return generate(t, c, ids, ck.text_ids, ck.generation, torch.Generator().manual_seed(seed),
                        speaker="ryan", language="english", max_frames=30).frames  # fmt: skip

    mx.random.seed(1)
    before = np.array(mx.random.state[0])
    rng = torch.get_rng_state()
    a = run(talker, cp, 11)
    assert np.array_equal(np.array(mx.random.state[0]), before) and torch.equal(torch.get_rng_state(), rng)
    assert len(a) == 29 and run(talker, cp, 11) == a and run(talker, cp, 12) != a
    assert run(torch_talker, torch_cp, 11) == a
