"""Our sampler against a literal transcription of upstream's, draw for draw.

Every case runs both samplers with identically seeded generators and requires the same token
and the same generator state afterwards, i.e. the same number and kind of draws.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from epub2audio.voices.cosyvoice3 import sampling
from epub2audio.voices.cosyvoice3.sampling import nucleus_size, sample_token

from . import literal_upstream_sampling as literal

V = 6761
SOS, EOS = 6561, 6562
NEG_INF = -math.inf


def _logp(logits) -> torch.Tensor:
    return torch.as_tensor(logits, dtype=torch.float32).log_softmax(0)


def _top(logp: torch.Tensor, n: int) -> list[int]:
    return logp.sort(descending=True, stable=True).indices[:n].tolist()


def _build_cases() -> list[dict]:
    """Deterministic cases: (category, logp, decoded, ignore_eos, top_p, top_k, seed)."""
    rs = np.random.RandomState(20260316)
    cases: list[dict] = []

    def add(category, logits, decoded=(), ignore_eos=False, top_p=0.8, top_k=25, raw=False):
        logp = torch.as_tensor(logits, dtype=torch.float32) if raw else _logp(logits)
        cases.append(dict(
            category=category, logp=logp, decoded=list(decoded), ignore_eos=ignore_eos,
            top_p=top_p, top_k=top_k, seed=int(rs.randint(0, 2**31 - 1)),
        ))

    def randn(scale):
        return rs.randn(V) * scale

    # 1. the first probability alone is already above top_p: a nucleus of one
    for gap in (3.0, 6.0, 12.0, 40.0, 200.0, 1e4):
        x = randn(1.0)
        x[rs.randint(0, SOS)] = x.max() + gap + math.log(V)
        add("first_above_top_p", x)

    # 2. exact ties: stable sort order decides which ids enter the nucleus
    add("ties", np.zeros(V))  # all 6761 equal: ids 0..24, by id order
    for width in (5, 24, 25, 26, 40, 300):  # a tied block at the top, straddling top_k or not
        x = randn(1.0) - 10
        ids = rs.choice(V, width, replace=False)
        x[ids] = 5.0
        add("ties", x)
    x = randn(1.0) - 20  # two tied leaders whose sum crosses top_p, then a tied tail
    x[[4000, 17]] = 3.0
    x[[900, 5, 3000, 6000]] = 1.0
    add("ties", x)
    x = np.full(V, -30.0)  # tie exactly at the top_p crossing point
    x[[10, 20, 30]] = [2.0, 1.0, 1.0]
    add("ties", x)

    # 3. top_k larger than the nucleus (a few dominant ids)
    for n_dom in (2, 3, 5, 8, 12, 16, 20, 24):
        x = randn(0.5)
        x[rs.choice(SOS, n_dom, replace=False)] += 12.0 + rs.rand(n_dom)
        add("nucleus_smaller_than_top_k", x)

    # 4. nucleus truncated by top_k (flat distributions)
    for scale in (0.0, 0.05, 0.1, 0.3, 0.6, 1.0, 1.5, 2.0):
        add("truncated_by_top_k", randn(scale))
    for k in (1, 2, 7, 100):  # other top_k values, including one larger than 25
        add("truncated_by_top_k", randn(0.3), top_k=k)

    # 5. repetition-aware fallback: history holds the likely ids
    for i in range(12):
        x = randn(6.0)
        lp = _logp(x)
        top = _top(lp, 4)
        hist = rs.randint(0, SOS, 10 + i).tolist()
        hist[-1 - (i % 10)] = top[i % 2]
        if i % 3 == 0:
            hist[-3] = top[0]
            hist[-5] = top[1]
        if i % 2 == 0:  # the ten likeliest ids fill the window: the fallback is near certain
            hist[-10:] = _top(lp, 10)[::-1]
        add("ras", x, hist)
    for i in range(4):  # the repeated id sat at index -11: outside the window, no fallback
        x = randn(3.0)
        top = _top(_logp(x), 1)[0]
        hist = [top] + [t for t in rs.randint(0, SOS, 10).tolist() if t != top]
        add("ras_outside_window", x, hist[:11])
    # the repeated id is the only id with nonzero probability: others underflow to 0 in fp32,
    # so the fallback softmax renormalises over them and draws a "zero-probability" id
    for i in range(3):
        x = randn(1.0)
        star = int(rs.randint(0, SOS))
        x[star] = 300.0
        add("ras_only_nonzero", x, [star] * (1 + i))
    # the repeated id is the only finite score: after the ban everything is -inf and the full
    # softmax is NaN; upstream's multinomial raises (checked below as an expected error)
    for i in range(2):
        x = np.full(V, NEG_INF)
        star = int(rs.randint(0, SOS))
        x[star] = 0.0
        add("ras_only_finite", x, [star, 3, star][: 1 + i], raw=True)

    # 6. -inf entries (masked ids: inside, around and far from the nucleus)
    for frac in (0.1, 0.5, 0.9, 0.995):
        x = randn(2.0)
        x[rs.rand(V) < frac] = NEG_INF
        x[int(rs.randint(0, V))] = 1.0
        add("neg_inf", x)
    x = np.full(V, NEG_INF)
    x[[7, 70, 700]] = [0.0, -0.5, -1.0]
    add("neg_inf", x, raw=True)
    x = np.full(V, NEG_INF)
    x[123] = 0.0
    add("neg_inf", x, raw=True)  # a single finite id
    x = randn(2.0)
    x[_top(_logp(x), 3)] = NEG_INF  # the former favourites are masked
    add("neg_inf", x)

    # 7. ignore_eos masks id 6561 only
    for ignore in (True, False):
        x = randn(1.0)
        x[SOS] = 15.0
        add("ignore_eos", x, ignore_eos=ignore)
        x = randn(1.0)
        x[EOS] = 15.0  # eos stays drawable even while "ignoring eos" (HEAD quirk)
        add("ignore_eos", x, ignore_eos=ignore)
        x = randn(2.0)
        x[SOS:] = 8.0 + rs.rand(V - SOS)  # many special ids competing
        add("ignore_eos", x, ignore_eos=ignore)
    x = np.full(V, NEG_INF)
    x[[SOS, 99]] = [20.0, 0.0]
    add("ignore_eos", x, ignore_eos=True, raw=True)

    # 8. decoded history shorter than the window
    for n in range(0, 10, 2):
        x = randn(3.0)
        top = _top(_logp(x), 2)
        hist = rs.randint(0, SOS, n).tolist()
        if n:
            hist[int(rs.randint(0, n))] = top[n % 2]
        add("short_history", x, hist)

    # 9. top_p at the fp32 rounding boundary: the running sum lands exactly on top_p
    x = randn(1.5)
    probs = torch.as_tensor(x, dtype=torch.float32).log_softmax(0).softmax(0)
    sorted_p = probs.sort(descending=True, stable=True).values[:25].numpy()
    sums = np.cumsum(sorted_p, dtype=np.float32)
    for j in (0, 3, 9):
        exact = float(sums[j])
        for tp in (exact, np.nextafter(exact, 1.0), np.nextafter(exact, 0.0)):
            add("top_p_boundary", x, top_p=float(tp))
    for tp in (0.7, 0.9, 0.95, 0.5):  # values fp32 rounds down (0.7, 0.9) or up
        add("top_p_values", randn(3.0), top_p=tp)

    # 10. random logits of realistic peakedness, histories drawn from the likely ids
    for i in range(32):
        scale = (1.5, 2.5, 3.5, 5.0, 8.0)[i % 5]
        x = randn(scale)
        lp = _logp(x)
        pool = _top(lp, 30)
        n = int(rs.randint(0, 40))
        hist = [pool[int(rs.randint(0, 30))] if rs.rand() < 0.5 else int(rs.randint(0, SOS)) for _ in range(n)]
        add("realistic", x, hist, ignore_eos=bool(i % 3 == 0))
    return cases


CASES = _build_cases()


def _run(sampler, case: dict, generator_seed: int):
    g = torch.Generator().manual_seed(generator_seed)
    try:
        token = sampler(case, g)
    except RuntimeError as e:  # both sides must fail the same way (ras_only_finite)
        token = ("error", type(e).__name__)
    return token, g.get_state()


def _ours(case, g):
    logp = case["logp"].clone()
    token = sample_token(
        logp, case["decoded"], g, ignore_eos=case["ignore_eos"], top_p=case["top_p"], top_k=case["top_k"]
    )
    assert torch.equal(logp, case["logp"]), "caller's logp was modified"
    return token


def _literal(case, g):
    return literal.sampling_ids(
        case["logp"].clone(), case["decoded"], g, case["ignore_eos"], top_p=case["top_p"], top_k=case["top_k"]
    )


def test_case_inventory():
    cats: dict[str, int] = {}
    for c in CASES:
        cats[c["category"]] = cats.get(c["category"], 0) + 1
    assert len(CASES) >= 83
    for needed in ("first_above_top_p", "ties", "nucleus_smaller_than_top_k", "truncated_by_top_k", "ras",
                   "ras_only_nonzero", "ras_only_finite", "neg_inf", "ignore_eos", "short_history", "realistic"):
        assert cats.get(needed, 0) >= 2, needed


def _nucleus_len(case) -> int:
    scores = case["logp"].clone()
    if case["ignore_eos"]:
        scores[SOS] = NEG_INF
    p = scores.softmax(0).sort(descending=True, stable=True).values
    return nucleus_size(p[: case["top_k"]].numpy(), case["top_p"], case["top_k"])


def test_cases_cover_what_they_claim():
    """Guard the harness itself: the categories really exercise their branches."""
    by = lambda cat: [c for c in CASES if c["category"] == cat]  # noqa: E731
    assert all(_nucleus_len(c) == 1 for c in by("first_above_top_p"))
    assert all(1 < _nucleus_len(c) < 25 for c in by("nucleus_smaller_than_top_k"))
    assert sum(_nucleus_len(c) == c["top_k"] for c in by("truncated_by_top_k")) >= 8
    # the fallback runs (2 draws: the state differs from a single nucleus draw) in most RAS cases
    def triggers(c):
        g = torch.Generator().manual_seed(c["seed"])
        return literal.nucleus(c["logp"].clone(), g, c["top_p"], c["top_k"]) in c["decoded"][-10:]

    assert sum(map(triggers, by("ras"))) >= 6
    assert all(map(triggers, by("ras_only_nonzero") + by("ras_only_finite")))
    assert not any(map(triggers, by("ras_outside_window")))
    assert sum(map(triggers, by("short_history") + by("realistic"))) >= 2
    for c in by("ras_only_nonzero"):
        g = torch.Generator().manual_seed(c["seed"])
        tok, _ = _run(_ours, c, c["seed"])
        assert c["logp"][tok] < -200  # the fallback drew an id that had probability 0 before


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{i}-{c['category']}" for i, c in enumerate(CASES)])
def test_same_token_and_generator_state_as_upstream(i):
    case = CASES[i]
    ours, ours_state = _run(_ours, case, case["seed"])
    theirs, their_state = _run(_literal, case, case["seed"])
    assert ours == theirs
    assert torch.equal(ours_state, their_state)
    if case["category"] == "ras_only_finite":
        assert ours == ("error", "RuntimeError")
    else:
        assert isinstance(ours, int) and 0 <= ours < V
        assert case["logp"][ours] > NEG_INF or case["category"] == "ras_only_nonzero"


def test_many_steps_with_own_history():
    """200 chained steps where each sampler's history is its own output (RAS fires often)."""
    rs = np.random.RandomState(7)
    g1, g2 = torch.Generator().manual_seed(99), torch.Generator().manual_seed(99)
    hist1: list[int] = []
    hist2: list[int] = []
    base = rs.randn(V) * 4.0
    for step in range(200):
        logp = _logp(base + rs.randn(V) * 0.5)  # a slowly varying, peaked distribution
        t1 = sample_token(logp, hist1, g1, ignore_eos=step < 50)
        t2 = literal.sampling_ids(logp.clone(), hist2, g2, step < 50)
        assert t1 == t2, step
        assert torch.equal(g1.get_state(), g2.get_state()), step
        hist1.append(t1)
        hist2.append(t2)
    assert len(set(hist1)) > 20


def test_ignore_eos_masks_only_sos():
    x = torch.full((V,), NEG_INF)
    x[SOS] = 0.0
    x[EOS] = -1.0
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        assert sample_token(x, [], g, ignore_eos=True) == EOS
    only_sos = torch.full((V,), NEG_INF)
    only_sos[SOS] = 0.0
    assert sample_token(only_sos, [], g, ignore_eos=False) == SOS


def test_global_rng_untouched():
    before = torch.random.get_rng_state()
    g = torch.Generator().manual_seed(3)
    for c in CASES[:20]:
        _run(_ours, c, c["seed"])
        sample_token(c["logp"], [], g, ignore_eos=True)
    assert torch.equal(before, torch.random.get_rng_state())


def test_nucleus_size_matches_loop():
    rs = np.random.RandomState(1)
    for _ in range(300):
        p = np.sort(rs.dirichlet(np.full(40, rs.choice([0.05, 0.3, 1.0]))).astype(np.float32))[::-1]
        top_p, top_k = float(rs.choice([0.5, 0.7, 0.8, 0.9, 0.99])), int(rs.choice([1, 3, 25, 40]))
        kept, running = 0, torch.tensor(0.0)
        for v in torch.from_numpy(p.copy()):
            if running < top_p and kept < top_k:
                running = running + v
                kept += 1
            else:
                break
        assert nucleus_size(p, top_p, top_k) == kept


# --- the harness can fail: plausible near-miss samplers must be caught ------------------------


def _mutant_inclusive_check(case, g):
    """Checks the running sum *after* adding (excludes the crossing entry)."""
    scores = case["logp"].clone()
    if case["ignore_eos"]:
        scores[SOS] = NEG_INF
    p, order = scores.softmax(0).sort(descending=True, stable=True)
    sums = np.cumsum(p[: case["top_k"]].numpy(), dtype=np.float32)
    n = max(1, int(np.searchsorted(sums, np.float32(case["top_p"]))))
    tok = int(order[p[:n].multinomial(1, replacement=True, generator=g)])
    if tok in case["decoded"][-10:]:
        scores[tok] = NEG_INF
        tok = sampling.random_sample(scores, g)
    return tok


def _mutant_unstable_ties(case, g):
    """Breaks ties by descending id instead of ascending."""
    scores = case["logp"].clone()
    if case["ignore_eos"]:
        scores[SOS] = NEG_INF
    flipped = scores.flip(0)
    p, order = flipped.softmax(0).sort(descending=True, stable=True)
    order = V - 1 - order
    n = nucleus_size(p[: case["top_k"]].numpy(), case["top_p"], case["top_k"])
    tok = int(order[p[:n].multinomial(1, replacement=True, generator=g)])
    if tok in case["decoded"][-10:]:
        scores[tok] = NEG_INF
        tok = sampling.random_sample(scores, g)
    return tok


def _mutant_no_ban(case, g):
    """RAS before upstream commit f2ddcbe: the repeated id is not banned before redrawing."""
    scores = case["logp"].clone()
    if case["ignore_eos"]:
        scores[SOS] = NEG_INF
    tok = sampling.nucleus_sample(scores, g, case["top_p"], case["top_k"])
    if tok in case["decoded"][-10:]:
        tok = sampling.random_sample(scores, g)
    return tok


def _mutant_mask_eos(case, g):
    """Masks eos (6562) instead of upstream's 6561."""
    scores = case["logp"].clone()
    if case["ignore_eos"]:
        scores[EOS] = NEG_INF
    return sampling.ras_sample(scores, case["decoded"], g, case["top_p"], case["top_k"])


def _mutant_float64_sum(case, g):
    """Accumulates the running sum and compares with top_p in float64 (upstream: fp32)."""
    scores = case["logp"].clone()
    if case["ignore_eos"]:
        scores[SOS] = NEG_INF
    p, order = scores.softmax(0).sort(descending=True, stable=True)
    before = np.cumsum(p[: case["top_k"]].numpy().astype(np.float64))[:-1]
    stops = np.flatnonzero(~(before < case["top_p"]))
    n = int(stops[0]) + 1 if stops.size else min(case["top_k"], V)
    tok = int(order[p[:n].multinomial(1, replacement=True, generator=g)])
    if tok in case["decoded"][-10:]:
        scores[tok] = NEG_INF
        tok = sampling.random_sample(scores, g)
    return tok


@pytest.mark.parametrize(
    "mutant", [_mutant_inclusive_check, _mutant_unstable_ties, _mutant_no_ban, _mutant_mask_eos, _mutant_float64_sum]
)
def test_harness_catches_mutant(mutant):
    mismatches = 0
    for case in CASES:
        a = _run(mutant, case, case["seed"])
        b = _run(_literal, case, case["seed"])
        mismatches += a[0] != b[0] or not torch.equal(a[1], b[1])
    assert mismatches >= 1
