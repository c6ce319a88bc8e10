"""Upstream CosyVoice3 (FunAudioLLM/CosyVoice) beside our port on this CPU: same weights, one run.

    git -C <mirror> archive HEAD cosyvoice | tar -x -C /work/upstream-src        # upstream, OUTSIDE the repo
    (Matcha-TTS's `matcha/` package under /work/upstream-src/third_party/Matcha-TTS, as in upstream's tree)
    .venv/bin/pip install --no-deps x-transformers==2.11.24 einops einx loguru frozendict
    .venv/bin/python bench/upstream.py --upstream /work/upstream-src               # 10 s of speech
    .venv/bin/python bench/upstream.py --upstream /work/upstream-src --seconds 2 --rounds 1 --skip fastest

Not a test, and nothing of upstream lives in this repository: its modules are imported at run time
from --upstream DIR (and Matcha-TTS from --matcha DIR, default DIR/third_party/Matcha-TTS). The
x-transformers pin is upstream's requirements.txt; these packages are a dev tool's, not in
pyproject.toml. Upstream pins transformers 4.51.3 and torch 2.3.1; this runs them on ours (see the
log line), so upstream's Qwen2 is timed as transformers of that version runs it.

Weights: FULL-SIZE random tensors (tests/cosyvoice3/random_weights.py; their keys are upstream's
checkpoint keys), the SAME state dicts loaded into upstream's modules and ours. Upstream's modules
are built in Python with the hyper-parameters of examples/libritts/cosyvoice3/conf/cosyvoice3.yaml,
flow then HiFT in the YAML's order (upstream's fixed flow/HiFT noise depends on the construction
order after the flow decoder's seed-0 reset; ours replays it, noise.py). Upstream's Qwen2 is built
from a config (no download): Qwen2Encoder's own __init__ only calls from_pretrained, so its instance
is made without it and given Qwen2ForCausalLM(config); its forward code is upstream's.

Stand-ins put in sys.modules (imported by upstream at module level, never called on a timed path):
  torchaudio        used by upstream only for wav loading/resampling (file_utils.load_wav), the
                    CAMPPlus fbank (utils/onnx.py EmbeddingExtractor: frontend) and the training
                    MelSpec (DiT/modules.py); its wheel is built for another torch. Any use raises.
  omegaconf         DictConfig: a dict with attribute access. The CFM reads cfm_params.solver,
                    .sigma_min, .t_scheduler ('cosine'), .training_cfg_rate, .inference_cfg_rate (0.7)
                    from it once, at construction.
  scipy.signal      get_window("hann", n, fftbins=True): called once at HiFT construction for the
                    16-point STFT window; the stand-in evaluates scipy's formula (general cosine over
                    linspace(-pi, pi, n + 1), last point dropped) in float64, as scipy does.
  matcha.utils, matcha.utils.pylogger, matcha.models.components.decoder
                    module-level imports of Matcha's flow_matching.py (Lightning's logger, the
                    U-Net Decoder of Matcha's own CFM class); BASECFM itself is Matcha's real code.

Work per stage (each side the same; variants interleaved per round, the order reversed on odd
rounds, ABBA, so machine noise and cache warmth hit all alike; warm-up calls untimed; min over
rounds is reported, every round is logged):
  LLM   upstream's own `CosyVoice3LM.inference` generator vs our `start_decoding` session, lockstep:
        prefill of [sos, 40 text ids (11 prompt text ending in <|endofprompt|>, 29 target), task_id,
        150 prompt speech tokens], then 250 decode steps. TEACHER-FORCED: upstream's `sampling`
        callable (its constructor argument) runs upstream's real ras_sampling (its cost is counted)
        and then returns the next token of a fixed random list, and eos after 250; our side runs our
        sample_token and feeds the same token. So both do identical forward work and each pays its
        own sampler, without random weights stopping early.
  flow  one non-streaming inference (finalize=True) of 150 prompt + 250 tokens (800 mel frames,
        10 Euler steps, CFG batch 2): upstream's CausalMaskedDiffWithDiT.inference vs Flow.inference.
  HiFT  10 s (500 mel frames) of our faithful flow's mel: upstream's CausalHiFTGenerator.inference
        (finalize=True; weight norm as upstream runs it, parametrized) vs our HiFT.inference.
  fastest  our opt-in paths as bench/cosyvoice3.py builds them: ONNX LLM int8, flow onnx-int8 and
        onnx-fp32 (HiFT has no faster option: ours fp32).

Equality, from the first timed round's outputs: flow mel (torch.equal), LLM log-probs over the
prefill and every step (max abs difference; id 6561 is left out: upstream's sampling_ids masks it in
place before its sampler sees the scores, during the first min_len steps), HiFT waveform (max abs).

One shim on upstream's LLM (on by default, --raw-mask turns it off): upstream's decode step passes
an all-true attention mask of shape [1, 1] against its KV cache. transformers 4.51.3 (its pin)
ignores an all-true mask on the SDPA path; transformers 5.x applies it, and the new position stops
seeing the past (measured: log-probs equal at the prefill, off by up to 17 nats from step 1). A
forward pre-hook drops an all-true mask (drop_all_true_mask), which restores the pinned behaviour;
the attention work is the same either way (SDPA over the whole cache).
RTF = seconds / seconds of speech. Ratio = upstream seconds / ours (> 1: ours is faster).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import shutil
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT))

from bench.cosyvoice3 import flow_inputs, log  # noqa: E402
from bench.fullsize import full_size_qwen_config  # noqa: E402
from epub2audio.voices.cosyvoice3 import flow_fast, llm_onnx  # noqa: E402
from epub2audio.voices.cosyvoice3.flow import FlowArgs, load_flow  # noqa: E402
from epub2audio.voices.cosyvoice3.hift import HiFTArgs, load_hift  # noqa: E402
from epub2audio.voices.cosyvoice3.llm import EOS_ID, SOS_ID, CosyVoice3LM, LLMArgs  # noqa: E402
from epub2audio.voices.cosyvoice3.sampling import sample_token  # noqa: E402
from tests.cosyvoice3.random_weights import (  # noqa: E402
    random_flow_state_dict,
    random_hift_state_dict,
    random_llm_state_dict,
)

TOKENS_PER_SECOND = 25
N_TEXT, N_PROMPT_TEXT = 40, 11  # the prompt text ends with <|endofprompt|>, which upstream asserts
END_OF_PROMPT = 151646
MEL_PER_TOKEN = 2


# ------------------------------------------------------------------------------ stand-ins


def _module(name: str, package: bool = False, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    if package:
        mod.__path__ = []
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    return mod


def _unusable(module: str):
    def getattr_(name: str):
        def call(*a, **k):
            raise RuntimeError(f"{module}.{name} is a stand-in in bench/upstream.py; the timed paths never call it")

        return call

    return getattr_


class DictConfig(dict):
    """omegaconf.DictConfig as the CFM reads it: attribute access to the keys."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def get_window(window, n: int, fftbins: bool = True) -> np.ndarray:
    """scipy.signal.get_window for "hann" only: 0.5 - 0.5 cos over linspace(-pi, pi, m), float64;
    fftbins (periodic) evaluates n + 1 points and drops the last."""
    if window != "hann":
        raise ValueError(f"stand-in get_window supports 'hann' only, got {window!r}")
    m = n + 1 if fftbins else n
    fac = np.linspace(-np.pi, np.pi, m)
    w = np.zeros(m)
    for k, a in enumerate((0.5, 0.5)):
        w += a * np.cos(k * fac)
    return w[:-1] if fftbins else w


def install_stand_ins(upstream: Path, matcha: Path) -> None:
    for name in ("torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi", "torchaudio.transforms"):
        _module(name, package=name.count(".") < 2, __getattr__=_unusable(name))
    sys.modules["torchaudio"].compliance = sys.modules["torchaudio.compliance"]
    sys.modules["torchaudio"].transforms = sys.modules["torchaudio.transforms"]
    sys.modules["torchaudio.compliance"].kaldi = sys.modules["torchaudio.compliance.kaldi"]
    _module("omegaconf", DictConfig=DictConfig)
    _module("scipy", package=True)
    sys.modules["scipy"].signal = _module("scipy.signal", get_window=get_window)
    if not (matcha / "matcha" / "models" / "components" / "flow_matching.py").is_file():
        sys.exit(f"no Matcha-TTS under {matcha} (need matcha/models/components/flow_matching.py); pass --matcha")
    _module("matcha.utils", package=True)
    _module("matcha.utils.pylogger", get_pylogger=logging.getLogger)
    _module("matcha.models.components.decoder", Decoder=None)
    sys.path.insert(0, str(matcha))
    sys.path.insert(0, str(upstream))


# ------------------------------------------------------------------------------ upstream modules


def upstream_llm(config: dict, sd: dict, sampling, mask_shim: bool = True):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from cosyvoice.llm.llm import CosyVoice3LM as UpstreamLM
    from cosyvoice.llm.llm import Qwen2Encoder

    encoder = Qwen2Encoder.__new__(Qwen2Encoder)  # its __init__ is from_pretrained(path) only
    torch.nn.Module.__init__(encoder)
    encoder.model = Qwen2ForCausalLM(Qwen2Config(**config))
    size = config["hidden_size"]  # 896 at full size; bench/gpu_check.py --small builds the tiny one
    lm = UpstreamLM(llm_input_size=size, llm_output_size=size, speech_token_size=6561, llm=encoder,
                    sampling=sampling, length_normalized_loss=True, lsm_weight=0, mix_ratio=[5, 15])  # fmt: skip
    lm.load_state_dict(sd, strict=True, assign=True)  # the same tensors as ours: no second 2 GB
    if mask_shim:
        encoder.model.register_forward_pre_hook(drop_all_true_mask, with_kwargs=True)
    return lm.eval()


def drop_all_true_mask(module, args, kwargs):
    """transformers 4.51.3 (upstream's pin) ignores an all-true 2-D attention mask on its SDPA path
    (AttentionMaskConverter._ignore_causal_mask_sdpa) and attends causally over the whole cache.
    transformers 5.x applies it: upstream's decode steps pass masks[:, -1, :], shape [1, 1], against
    a longer KV cache, and the new position no longer sees the past (log-probs differ from step 1
    on). Dropping the all-true mask gives upstream's code the attention it had on its pin."""
    mask = kwargs.get("attention_mask")
    if mask is not None and bool(mask.all()):
        kwargs["attention_mask"] = None
    return args, kwargs


def upstream_flow_and_hift(flow_sd: dict, hift_sd: dict, fa: FlowArgs | None = None, ha: HiFTArgs | None = None):
    """cosyvoice3.yaml's `flow` and `hift`, constructed in the YAML's order (nested first); other
    dimensions (the tests' tiny ones, for bench/gpu_check.py --small) from `fa` / `ha`."""
    fa, ha = fa or FlowArgs(), ha or HiFTArgs()
    from cosyvoice.flow.DiT.dit import DiT
    from cosyvoice.flow.flow import CausalMaskedDiffWithDiT
    from cosyvoice.flow.flow_matching import CausalConditionalCFM
    from cosyvoice.hifigan.f0_predictor import CausalConvRNNF0Predictor
    from cosyvoice.hifigan.generator import CausalHiFTGenerator
    from cosyvoice.transformer.upsample_encoder import PreLookaheadLayer

    pre = PreLookaheadLayer(in_channels=80, channels=fa.pre_lookahead_channels, pre_lookahead_len=3)
    cfm_params = DictConfig(sigma_min=1e-06, solver="euler", t_scheduler="cosine", training_cfg_rate=0.2,
                            inference_cfg_rate=0.7, reg_loss_type="l1")  # fmt: skip
    dit = DiT(dim=fa.dim, depth=fa.depth, heads=fa.heads, dim_head=fa.dim_head, ff_mult=fa.ff_mult, mel_dim=80,
              mu_dim=80, spk_dim=80, out_channels=80, static_chunk_size=25 * 2, num_decoding_left_chunks=-1)  # fmt: skip
    decoder = CausalConditionalCFM(in_channels=240, n_spks=1, spk_emb_dim=80, cfm_params=cfm_params, estimator=dit)
    flow = CausalMaskedDiffWithDiT(input_size=80, output_size=80, spk_embed_dim=192, output_type="mel",
                                   vocab_size=6561, input_frame_rate=25, only_mask_loss=True, token_mel_ratio=2,
                                   pre_lookahead_len=3, pre_lookahead_layer=pre, decoder=decoder)  # fmt: skip
    f0 = CausalConvRNNF0Predictor(num_class=1, in_channels=80, cond_channels=ha.f0_cond_channels)
    hift = CausalHiFTGenerator(in_channels=80, base_channels=ha.base_channels, nb_harmonics=8, sampling_rate=24000, nsf_alpha=0.1,
                               nsf_sigma=0.003, nsf_voiced_threshold=10, upsample_rates=[8, 5, 3],
                               upsample_kernel_sizes=[16, 11, 7], istft_params={"n_fft": 16, "hop_len": 4},
                               resblock_kernel_sizes=[3, 7, 11], resblock_dilation_sizes=[[1, 3, 5]] * 3,
                               source_resblock_kernel_sizes=[7, 7, 11], source_resblock_dilation_sizes=[[1, 3, 5]] * 3,
                               lrelu_slope=0.1, audio_limit=0.99, conv_pre_look_right=4, f0_predictor=f0)  # fmt: skip
    flow.load_state_dict(flow_sd, strict=True)  # as upstream's CosyVoice3Model.load does (a copy)
    hift.load_state_dict(hift_sd, strict=True)
    return flow.eval(), hift.eval()


# ------------------------------------------------------------------------------ LLM runs


class ForcedSampler:
    """Upstream's `sampling` callable: runs upstream's ras_sampling (cost counted, draw discarded),
    records the scores it was given, returns the next forced token, then eos."""

    def __init__(self, ras_sampling):
        self.ras_sampling = ras_sampling
        self.reset([])

    def reset(self, forced: list[int]) -> None:
        self.forced, self.logps = forced, []

    def __call__(self, scores, decoded, k):
        self.logps.append(scores.clone())  # ras_sampling may write -inf into scores
        self.ras_sampling(scores, decoded, k, top_p=0.8, top_k=25, win_size=10, tau_r=0.1)  # cosyvoice3.yaml
        i = len(self.logps) - 1
        return self.forced[i] if i < len(self.forced) else EOS_ID


class UpstreamLLMRun:
    """One decode of upstream's generator; step() is one forward + sampler call."""

    def __init__(self, lm, sampler: ForcedSampler, text: list[int], prompt: list[int], forced: list[int],
                 device: str = "cpu"):
        sampler.reset(forced)
        self.sampler = sampler
        t = torch.tensor([text], dtype=torch.int32, device=device)  # the frontend's dtype, moved as upstream's model does
        self.gen = lm.inference(
            text=t[:, N_PROMPT_TEXT:], text_len=torch.tensor([t.shape[1] - N_PROMPT_TEXT], dtype=torch.int32, device=device),
            prompt_text=t[:, :N_PROMPT_TEXT], prompt_text_len=torch.tensor([N_PROMPT_TEXT], dtype=torch.int32, device=device),
            prompt_speech_token=torch.tensor([prompt], dtype=torch.int32, device=device),
            prompt_speech_token_len=torch.tensor([len(prompt)], dtype=torch.int32, device=device),
            embedding=torch.zeros(1, 192, device=device),
        )  # fmt: skip

    def step(self) -> torch.Tensor:
        next(self.gen, None)  # None: the last step drew eos and ended the generator
        return self.sampler.logps[-1]


class OurLLMRun:
    def __init__(self, lm, text: list[int], prompt: list[int], forced: list[int]):
        self.next_logp = lm.start_decoding(text, prompt)
        self.forced, self.out, self.steps = forced, [], 0
        self.min_len = 2 * (len(text) - N_PROMPT_TEXT)  # generate.length_bounds: target text only
        self.gen = torch.Generator().manual_seed(0)

    def step(self) -> torch.Tensor:
        i = self.steps
        logp = self.next_logp(None if i == 0 else self.forced[i - 1])
        sample_token(logp, self.out, self.gen, ignore_eos=i < self.min_len)  # cost counted, draw discarded
        if i < len(self.forced):
            self.out.append(self.forced[i])
        self.steps += 1
        return logp


def stage_round(run, arg, outputs: dict):
    """A run_round for timed_rounds: each named variant runs `run(name, arg)` once, timed; its
    first output is kept in `outputs` (the equality checks use the first round's)."""

    def one_round(order):
        seconds = {}
        for name in order:
            t0 = time.perf_counter()
            out = run(name, arg)
            seconds[name] = time.perf_counter() - t0
            outputs.setdefault(name, out)
        return seconds

    return one_round


def timed_rounds(names: list[str], run_round, rounds: int) -> dict[str, list[float]]:
    """run_round(order) -> {name: seconds}; ABBA order over rounds."""
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        got = run_round(order)
        for n in names:
            times[n].append(got[n])
        log(f"  round {r + 1}: " + ", ".join(f"{n} {got[n]:.2f} s" for n in names))
    return times


def bench_llm(args, n_tokens: int, work: Path, threads: int) -> tuple[dict, dict]:
    from cosyvoice.utils.common import ras_sampling

    cfg = full_size_qwen_config()
    log("LLM: building full-size random weights (506 M parameters), ours and upstream's (shared tensors)")
    sd = random_llm_state_dict(LLMArgs.from_config(cfg), seed=0)
    ours = CosyVoice3LM.from_checkpoint(cfg, sd)
    sampler = ForcedSampler(ras_sampling)
    up = upstream_llm(cfg, sd, sampler, mask_shim=not args.raw_mask)
    attn = up.llm.model.config._attn_implementation
    shim = "off (--raw-mask)" if args.raw_mask else "on"
    log(f"upstream Qwen2ForCausalLM attention implementation: {attn}; all-true-mask shim {shim}")
    g = torch.Generator().manual_seed(1)
    text = torch.randint(0, 151643, (N_TEXT,), generator=g).tolist()
    text[N_PROMPT_TEXT - 1] = END_OF_PROMPT
    prompt = torch.randint(0, 6561, (args.prompt_tokens,), generator=g).tolist()
    forced = torch.randint(0, 6561, (n_tokens,), generator=g).tolist()

    makers = {
        "upstream": lambda f: UpstreamLLMRun(up, sampler, text, prompt, f),
        "ours": lambda f: OurLLMRun(ours, text, prompt, f),
    }
    if "fastest" not in args.skip:
        t0 = time.perf_counter()
        path, _ = llm_onnx.ensure_exported(ours, "bench", "int8", work / "onnx")
        sess = llm_onnx.make_session(path / llm_onnx.MODEL_FILE, threads)
        onnx_lm = llm_onnx.OnnxSpeechLM(sess, ours.args, ours.qwen2.embed_tokens.weight.detach(),
                                        ours.speech_embedding.weight.detach(), path / llm_onnx.MODEL_FILE)  # fmt: skip
        log(f"ONNX LLM int8: exported + session in {time.perf_counter() - t0:.0f} s, runs {onnx_lm.precision}")
        makers["fastest: onnx int8"] = lambda f: OurLLMRun(onnx_lm, text, prompt, f)

    # warm-up, untimed: a short prefill and a few steps on each
    for make in makers.values():
        run = make(forced[:3])
        for _ in range(4):
            run.step()

    names = list(makers)
    log(f"LLM timing: prefill {N_TEXT + args.prompt_tokens + 2} positions + {n_tokens} decode steps, lockstep over {names}")
    lps: dict[str, list[torch.Tensor]] = {}

    def llm_round(order):
        runs = {n: makers[n](forced) for n in order}
        t = dict.fromkeys(order, 0.0)
        out = {n: [] for n in order}
        for _ in range(n_tokens + 1):  # prefill, then one step per forced token (the last draws eos)
            for n in order:
                t0 = time.perf_counter()
                out[n].append(runs[n].step())
                t[n] += time.perf_counter() - t0
        if not lps:  # equality from the first round's log-probs
            lps.update(out)
        return t

    times = timed_rounds(names, llm_round, args.rounds)
    keep = torch.cat([torch.arange(SOS_ID), torch.arange(SOS_ID + 1, 6761)])
    pairs = list(zip(lps["upstream"], lps["ours"]))
    diffs = [float((a[keep] - b[keep]).abs().max()) for a, b in pairs]
    equal = all(torch.equal(a[keep], b[keep]) for a, b in pairs)
    argmax = np.mean([int(a[keep].argmax()) == int(b[keep].argmax()) for a, b in pairs])
    eq = {"llm_equal": equal, "llm_maxdiff": max(diffs), "llm_prefill_diff": diffs[0], "llm_argmax": float(argmax),
          "llm_first_diff": next((i for i, d in enumerate(diffs) if d > 0), None), "attn": f"{attn}, mask shim {shim}"}  # fmt: skip
    log(f"LLM equality: log-probs equal {equal}, max abs diff {max(diffs):.3g} (prefill {diffs[0]:.3g}), argmax agree {argmax:.3f}")
    return times, eq


# ------------------------------------------------------------------------------ flow + HiFT


def bench_flow_hift(args, n_tokens: int, work: Path, threads: int) -> tuple[dict, dict, dict]:
    log("flow + HiFT: building full-size random weights (332 M + 21 M), ours and upstream's")
    fsd = random_flow_state_dict(FlowArgs(), seed=0)
    hsd = random_hift_state_dict(HiFTArgs(), seed=0)
    up_flow, up_hift = upstream_flow_and_hift(fsd, hsd)
    flows = {"upstream": None, "ours": load_flow(fsd)}
    if "fastest" not in args.skip:
        for opt in ("onnx-int8", "onnx-fp32"):
            t0 = time.perf_counter()
            flows[f"fastest: {opt}"] = flow_fast.apply_flow_precision(load_flow(dict(fsd)), opt, "bench", work / "onnx", threads)
            log(f"flow {opt}: built in {time.perf_counter() - t0:.0f} s")
    hifts = {"upstream": None, "ours": load_hift(dict(hsd), max_seconds=n_tokens / TOKENS_PER_SECOND + 1)}
    inp = flow_inputs(args.prompt_tokens, n_tokens)

    def run_flow(name, x):
        if name == "upstream":
            tok, ptok = x["token"].to(torch.int32), x["prompt_token"].to(torch.int32)  # the frontend's dtype
            mel, _ = up_flow.inference(
                token=tok, token_len=torch.tensor([tok.shape[1]], dtype=torch.int32),
                prompt_token=ptok, prompt_token_len=torch.tensor([ptok.shape[1]], dtype=torch.int32),
                prompt_feat=x["prompt_feat"], prompt_feat_len=torch.tensor([x["prompt_feat"].shape[1]], dtype=torch.int32),
                embedding=x["embedding"], streaming=False, finalize=True,
            )  # fmt: skip
            return mel
        with torch.inference_mode():
            return flows[name].inference(**x)

    def run_hift(name, mel):
        if name == "upstream":
            return up_hift.inference(speech_feat=mel, finalize=True)[0]
        return hifts[name].inference(mel)

    for n in flows:  # warm-up on a short input, untimed
        run_flow(n, flow_inputs(4, 8))
    for n in hifts:
        run_hift(n, torch.randn(1, 80, 20, generator=torch.Generator().manual_seed(3)))

    log(f"flow timing: {args.prompt_tokens} prompt + {n_tokens} tokens = {2 * (args.prompt_tokens + n_tokens)} mel frames")
    mels: dict[str, torch.Tensor] = {}

    flow_t = timed_rounds(list(flows), stage_round(run_flow, inp, mels), args.rounds)
    mel_up, mel_ours = mels["upstream"], mels["ours"]
    log(f"HiFT timing: {mel_ours.shape[2]} mel frames ({mel_ours.shape[2] / 50:g} s) of our flow's mel")
    waves: dict[str, torch.Tensor] = {}


    hift_t = timed_rounds(list(hifts), stage_round(run_hift, mel_ours, waves), args.rounds)
    wav_up, wav_ours = waves["upstream"], waves["ours"]
    n_wav = min(wav_up.shape[-1], wav_ours.shape[-1])
    eq = {
        "flow_equal": torch.equal(mel_up, mel_ours), "flow_maxdiff": float((mel_up - mel_ours).abs().max()),
        "flow_shape": tuple(mel_up.shape),
        "hift_maxdiff": float((wav_up[..., :n_wav] - wav_ours[..., :n_wav]).abs().max()),
        "hift_shapes": (tuple(wav_up.shape), tuple(wav_ours.shape)), "hift_equal": torch.equal(wav_up, wav_ours),
    }  # fmt: skip
    log(f"flow equality: mel torch.equal {eq['flow_equal']}, max abs diff {eq['flow_maxdiff']:.3g}, shape {eq['flow_shape']}")
    log(f"HiFT equality: wave equal {eq['hift_equal']}, max abs diff {eq['hift_maxdiff']:.3g}, shapes {eq['hift_shapes']}")
    return flow_t, hift_t, eq


# ------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", type=Path, required=True, help="directory holding upstream's `cosyvoice` package")
    ap.add_argument("--matcha", type=Path, default=None, help="directory holding Matcha-TTS's `matcha` package (default: UPSTREAM/third_party/Matcha-TTS)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of generated speech (25 tokens/s)")
    ap.add_argument("--prompt-tokens", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds per stage")
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads, both sides (default: all cores)")
    ap.add_argument("--skip", nargs="*", default=[], help="any of: llm flow fastest")
    ap.add_argument("--raw-mask", action="store_true", help="run upstream's LLM without the all-true-mask shim (see drop_all_true_mask)")
    args = ap.parse_args()
    # transformers probes the installed packages (find_spec) when imported: before the stand-ins exist
    import transformers
    from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: F401

    install_stand_ins(args.upstream.resolve(), (args.matcha or args.upstream / "third_party" / "Matcha-TTS").resolve())
    import cosyvoice.utils.file_utils  # noqa: F401  (sets the root logger to DEBUG at import)

    logging.getLogger().setLevel(logging.WARNING)
    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    n_tokens = max(4, int(round(args.seconds * TOKENS_PER_SECOND)))
    secs = n_tokens / TOKENS_PER_SECOND
    log(f"upstream vs ours: {secs:g} s of speech ({args.prompt_tokens} prompt + {n_tokens} tokens), {threads} threads, "
        f"{args.rounds} rounds, torch {torch.__version__}, transformers {transformers.__version__}, upstream {args.upstream}")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="upstream-bench-"))
    eq: dict = {}
    stages: dict[str, dict[str, float]] = {}  # stage -> variant -> best seconds
    allt: dict[str, dict[str, list[float]]] = {}
    try:
        if "llm" not in args.skip:
            t, e = bench_llm(args, n_tokens, work, threads)
            eq.update(e)
            allt["LLM"] = t
            stages["LLM"] = {n: min(v) for n, v in t.items()}
            gc.collect()
        if "flow" not in args.skip:
            ft, ht, e = bench_flow_hift(args, n_tokens, work, threads)
            eq.update(e)
            allt["flow"], allt["HiFT"] = ft, ht
            stages["flow"] = {n: min(v) for n, v in ft.items()}
            stages["HiFT"] = {n: min(v) for n, v in ht.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\n## Upstream CosyVoice3 vs ours, CPU, {threads} threads, {secs:g} s of speech after a {args.prompt_tokens}-token prompt")
    print(f"best of {args.rounds} interleaved rounds; ratio = upstream s / ours s (> 1: ours faster)\n")
    print("| stage | variant | seconds (all rounds) | RTF | upstream / this |")
    print("|---|---|---|---|---|")
    for stage, vs in stages.items():
        for n, s in vs.items():
            ratio = "" if n == "upstream" else f"{vs['upstream'] / s:.2f}x"
            rounds = ", ".join(f"{x:.2f}" for x in allt[stage][n])
            print(f"| {stage} | {n} | {s:.2f} ({rounds}) | {s / secs:.3f} | {ratio} |")
    if len(stages) == 3:
        def total(picks):
            return sum(stages[st][picks.get(st, "ours")] for st in stages)

        up = total({st: "upstream" for st in stages})
        pipelines = {"upstream (faithful fp32)": {st: "upstream" for st in stages}, "ours faithful fp32": {}}
        fl = [n for n in stages["flow"] if n.startswith("fastest")]
        if "fastest: onnx int8" in stages["LLM"]:
            for n in fl:
                pipelines[f"ours fastest: LLM onnx int8 + flow {n.removeprefix('fastest: ')}"] = {"LLM": "fastest: onnx int8", "flow": n}
        print("\n## Whole pipeline (sum of stages)")
        print("| pipeline | LLM s | flow s | HiFT s | total s | RTF | upstream / this |")
        print("|---|---|---|---|---|---|---|")
        for label, picks in pipelines.items():
            p = {st: stages[st][picks.get(st, "ours")] for st in stages}
            tot = total(picks)
            print(f"| {label} | {p['LLM']:.2f} | {p['flow']:.2f} | {p['HiFT']:.2f} | {tot:.2f} | {tot / secs:.3f} | {up / tot:.2f}x |")
    print("\n## Equality (same weights, same inputs)")
    if "llm_equal" in eq:
        print(f"- LLM log-probs, prefill + {n_tokens} teacher-forced steps (id 6561 left out): equal {eq['llm_equal']}, "
              f"max abs diff {eq['llm_maxdiff']:.3g} (prefill {eq['llm_prefill_diff']:.3g}, first differing step "
              f"{eq['llm_first_diff']}), argmax agree {eq['llm_argmax']:.3f}; upstream attention: {eq['attn']}")  # fmt: skip
    if "flow_equal" in eq:
        print(f"- flow mel {eq['flow_shape']}: torch.equal {eq['flow_equal']}, max abs diff {eq['flow_maxdiff']:.3g}")
        print(f"- HiFT waveform {eq['hift_shapes'][0]} vs {eq['hift_shapes'][1]}: equal {eq['hift_equal']}, max abs diff {eq['hift_maxdiff']:.3g}")
    log("done")


if __name__ == "__main__":
    main()
