"""The CosyVoice3 voice: zero-shot cloning of a saved voice profile, in PyTorch (fp32 reference).

    text --Qwen2 BPE--> ids --LLM + RAS sampling (seeded)--> speech tokens --silence cap-->
    --flow (DiT, fixed noise)--> mel --HiFT--> 24 kHz float --> int16 PCM

LLM backend and precision: `load(..., llm_backend="auto"|"mlx"|"onnx"|"torch", llm_precision=...)`; see
`backends.py` for the rule, the precisions and how `info.backend` / `info.precision` record what
actually ran ("torch" / "fp32" for the all-torch fp32 reference; e.g. "mlx+torch" and
"llm=int4,flow=fp32,hift=fp32" otherwise). Every backend feeds the same host sampler.

Devices: `load(..., device="auto"|"cpu"|"cuda"|"mps", device_llm=..., device_flow=..., device_hift=...)`;
see `devices.py` for the rule. The stages' devices, read back from the built modules, end the
model id ("@cuda", "@llm=metal,flow=mps,hift=cpu"; nothing when all run on the CPU).

Determinism: the only random draws are the LLM sampler's, from a ``torch.Generator`` seeded with
the segment's seed and created per call; the flow and the vocoder draw nothing (their "noise" is
fixed buffers), and no stage keeps state between calls. So a segment's audio depends only on its
text, its seed, the weights and the profile, never on what was synthesised before.

Conversion to PCM: HiFT already clamps to +-0.99; samples are scaled by 32767, rounded half to
even (numpy.rint) and clipped to the int16 range, little-endian.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import epub2audio
from epub2audio.errors import InputError
from epub2audio.voices.base import LengthCapReached, VoiceInfo

from . import frontend
from .backends import SpeechLM, build_llm, describe_pipeline, torch_module_precision
from .checkpoint import load_checkpoint
from .devices import Placement, describe_devices, exact_fp32_on_cuda, place_stages
from .flow import load_flow
from .flow_fast import flow_precision as flow_precision_of
from .generate import LENGTH_CAPS, LengthCap, filter_silent_tokens, generate_speech_tokens, speech_token_cap
from .hift import load_hift, set_hift_dtype
from .profile import Profile, load_profile
from .vocab import check_text_ids

SAMPLE_RATE = 24000
SILENCE_SECONDS = 0.2  # what a segment that yields no speech tokens becomes
DEFAULT_MAX_TOKENS_PER_SEGMENT = 25 * 60  # one minute of speech (upstream caps at 20 tokens per text token)
HIFT_PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def pcm16(wave: torch.Tensor | np.ndarray) -> bytes:
    """float waveform (any shape, nominally [-1, 1]) -> mono int16 little-endian bytes."""
    x = np.asarray(wave.detach().cpu().numpy() if isinstance(wave, torch.Tensor) else wave, dtype=np.float64).reshape(-1)
    return np.clip(np.rint(x * 32767.0), -32768, 32767).astype("<i2").tobytes()


def _profile_digest(p: Profile) -> str:
    h = hashlib.sha256()
    for a in (p.prompt_text_ids, p.speech_tokens, p.mel, p.embedding):
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:12]


@dataclass
class CosyVoice3Voice:
    info: VoiceInfo
    tokenizer: frontend.TextTokenizer
    llm: SpeechLM  # backends.TorchSpeechLM (wraps llm.CosyVoice3LM) or llm_mlx.MLXSpeechLM
    flow: torch.nn.Module
    hift: torch.nn.Module
    profile: Profile
    max_tokens_per_segment: int | None = DEFAULT_MAX_TOKENS_PER_SEGMENT
    length_cap: LengthCap = LENGTH_CAPS["upstream"]
    row_of_id: torch.Tensor | None = None  # a compressed folder's kept text ids (vocab.py)
    vocab: str = ""

    @classmethod
    def load(
        cls,
        model_dir: str | os.PathLike,
        profile_dir: str | os.PathLike,
        *,
        max_tokens_per_segment: int | None = DEFAULT_MAX_TOKENS_PER_SEGMENT,
        llm_backend: str = "auto",
        llm_precision: str = "fp32",
        flow_precision: str = "fp32",
        hift_precision: str = "fp32",
        threads: int | None = None,
        device: str = "auto",
        device_llm: str | None = None,
        device_flow: str | None = None,
        device_hift: str | None = None,
        length_cap: str = "upstream",
        llm_step: str = "auto",
    ) -> "CosyVoice3Voice":
        """Load weights (memory-mapped) and a saved profile. Needs no ONNX model.

        llm_backend: "auto" (the fastest measured: MLX on Apple Silicon, else ONNX Runtime, else torch), "mlx", "onnx" or "torch" (the faithful reference).
        llm_precision: "fp32" (reference), "bf16", "int8" on either backend; "fp16", "int4" on MLX.
        The MLX weights are converted once per model and precision into the engine's cache dir.
        llm_backend "onnx" (ONNX Runtime on the CPU) runs at "fp32", "int8" or "int4"; its graph is
        exported once per model and precision into the cache dir (see llm_onnx).
        flow_precision: "fp32" (the faithful torch flow), "onnx-fp32" (same math on ONNX Runtime,
        within ~1e-5), "int8" (torch dynamic int8), "onnx-int8", "bf16", "fp16" (for GPUs); see flow_fast.
        hift_precision: "fp32" (reference), "bf16", "fp16" (the f0 predictor stays float64).
        device, device_llm/_flow/_hift: where the stages run; see devices.py.
        threads: intra-op threads of the ONNX sessions (default: torch's current count, which
        the worker sets to its budget).
        length_cap: "upstream" (the default: 20 speech tokens per text token, and the audio stops
        there, exactly as upstream) or "tight" (what a job uses: max(12 per text token, 2 s), and
        reaching it, or `max_tokens_per_segment`, raises LengthCapReached so that the job re-splits
        the text instead of keeping cut audio); see generate.LENGTH_CAPS for why.
        llm_step: the torch LLM's decode step: "auto" (static, replayed as a CUDA graph, on CUDA;
        dynamic elsewhere), "dynamic" or "static" (llm_static.py).
        """
        if length_cap not in LENGTH_CAPS:
            raise ValueError(f"length cap must be one of {', '.join(LENGTH_CAPS)}; got {length_cap!r}")
        ckpt = load_checkpoint(model_dir)
        profile = load_profile(profile_dir)
        if profile.model_id not in (ckpt.model_id, ckpt.source_model_id):
            raise InputError(
                f"voice profile {Path(profile_dir).name!r} was made with model {profile.model_id}, "
                f"not {ckpt.source_model_id}; re-create the profile with this model"
            )
        if hift_precision not in HIFT_PRECISIONS:
            raise ValueError(f"HiFT precision must be one of {', '.join(HIFT_PRECISIONS)}; got {hift_precision!r}")
        place: Placement = place_stages(
            device, {"llm": device_llm, "flow": device_flow, "hift": device_hift},
            llm_backend=llm_backend, llm_precision=llm_precision, flow_precision=flow_precision,
        )  # fmt: skip
        if "cuda" in (place.llm, place.flow, place.hift):
            exact_fp32_on_cuda()
        tokenizer = frontend.load_text_tokenizer(ckpt.paths.blank_en)
        row_of_id = None
        if ckpt.compressed is None:  # frees ckpt's torch LLM tensors
            llm = build_llm(ckpt, place.llm_backend, llm_precision, threads=threads, device=place.llm, step=llm_step)
            flow = load_flow(ckpt.flow_state_dict)
        else:  # a compressed folder runs at its stored precisions unless asked for another option
            from .compress import ROW_MAP_KEY, build_llm_from_folder, stage_precision, stored_precision

            row_of_id = ckpt.llm_state_dict.get(ROW_MAP_KEY)
            llm = build_llm_from_folder(ckpt, place.llm_backend, llm_precision, threads=threads, device=place.llm,
                                        step=llm_step)
            flow_stored = stored_precision(ckpt, "flow")
            flow_precision = stage_precision(flow_stored, flow_precision)
            flow = load_flow(ckpt.flow_state_dict, keep_dtype=flow_precision == flow_stored)
            hift_precision = stage_precision(stored_precision(ckpt, "hift"), hift_precision)
        if flow_precision != "fp32" and flow_precision != flow_precision_of(flow)[1]:
            from .flow_fast import apply_flow_precision

            apply_flow_precision(flow, flow_precision, ckpt.model_id, threads=threads)
        flow.to(place.flow)
        # HiFT renders only the generated tokens (2 frames = 0.04 s each), so a per-segment token cap
        # bounds its fixed noise buffer too (36 kB per second; 300 s = upstream's full buffer)
        seconds = 300.0 if max_tokens_per_segment is None else min(300.0, max_tokens_per_segment / 25 + 1)
        hift = load_hift(ckpt.hift_state_dict, max_seconds=seconds)
        if hift_precision != "fp32":
            set_hift_dtype(hift, HIFT_PRECISIONS[hift_precision])
        hift.to(place.hift)

        vocab = llm.args.vocab_size
        if int(profile.prompt_text_ids.max(initial=0)) >= vocab or len(tokenizer) > vocab:
            raise InputError(f"voice profile {profile.name!r} does not fit this model's text vocabulary")
        spk_dim = flow.args.spk_embed_dim
        if profile.embedding.shape != (spk_dim,):
            raise InputError(
                f"voice profile {profile.name!r} has a {profile.embedding.shape[0]}-d speaker embedding; the flow takes {spk_dim}"
            )
        if profile.mel.shape[1] != flow.args.mel_dim:
            raise InputError(f"voice profile {profile.name!r} has {profile.mel.shape[1]} mel bins; the flow takes {flow.args.mel_dim}")

        backend, precision = describe_pipeline([
            ("llm", llm.backend, llm.precision),
            ("flow", *flow_precision_of(flow)),  # read back from the estimator's type / modules
            ("hift", "torch", torch_module_precision(hift)),
        ])  # fmt: skip
        devices = {"llm": getattr(llm, "device", "cpu"), "flow": flow.input_embedding.weight.device.type,
                   "hift": hift.conv_pre.weight.device.type}
        versions = {"torch": torch.__version__, "epub2audio": epub2audio.__version__}
        if "cuda" in devices.values():
            versions["cuda"] = str(torch.version.cuda)
        if llm.backend == "mlx":
            from importlib.metadata import version

            versions.update({"mlx": version("mlx"), "mlx-lm": version("mlx-lm")})
        recipe = f"+mlx-{llm.recipe}" if getattr(llm, "recipe", "") else ""  # a folder's own quantisation on MLX
        if getattr(llm, "step", "dynamic") == "static":  # its attention sums over a padded cache
            recipe += "+step-static"
        if "onnx" in backend:
            import onnxruntime

            from .onnx_cache import INT8_RECIPE

            versions["onnxruntime"] = onnxruntime.__version__
            if (llm.backend, llm.precision) == ("onnx", "int8") or flow_precision_of(flow) == ("onnx", "int8"):
                recipe += f"+int8-{INT8_RECIPE}"  # another int8 recipe is another sound
        info = VoiceInfo(
            name=f"cosyvoice3:{profile.name}",
            narrator=f"CosyVoice3 ({profile.name})",
            sample_rate=SAMPLE_RATE,
            backend=backend,
            precision=precision,
            # Backend, precision, devices and the length cap change the audio, so they are part of
            # its identity: a job resumed at another precision, on another device or under another
            # cap (a segment cut under "upstream" is re-split under "tight") renders new segments
            # instead of mixing the two.
            model_id=f"{ckpt.model_id}+profile-{_profile_digest(profile)}+{backend}:{precision}{recipe}"
                     f"{describe_devices(devices)}{'' if length_cap == 'upstream' else '+cap-' + length_cap}",
            versions=versions,
        )
        return cls(
            info=info, tokenizer=tokenizer, llm=llm, flow=flow, hift=hift, profile=profile,
            max_tokens_per_segment=max_tokens_per_segment, length_cap=LENGTH_CAPS[length_cap], row_of_id=row_of_id,
            vocab=",".join(ckpt.compressed["options"]["vocab"]) if ckpt.compressed else "",
        )  # fmt: skip

    # -- stages, separately callable for tests

    def speech_tokens(self, text: str, seed: int) -> list[int]:
        """LLM stage: speech tokens for `text` (silence runs capped), all randomness from `seed`.
        Raises LengthCapReached where the cap would cut the speech and `length_cap.resplit` is set."""
        tokens, cap = self.decode(text, seed)
        if cap and len(tokens) == cap and self.length_cap.resplit:
            raise LengthCapReached(f"the speech reached the length cap of {cap} speech tokens "
                                   f"({cap / 25:.1f} s) before the end of the text")
        return filter_silent_tokens(tokens)

    def decode(self, text: str, seed: int) -> tuple[list[int], int]:
        """The LLM's raw speech tokens for `text` and the cap they ran under: exactly `cap` tokens
        means the loop stopped at the cap, not at a stop token (the speech was cut)."""
        text_ids = self.tokenizer.encode(text)
        if not text_ids:
            return [], 0
        # a compressed vocabulary refuses the segment rather than read a row it left out
        check_text_ids(self.row_of_id, text_ids, self.tokenizer, self.vocab)
        cap = self.length_cap
        generator = torch.Generator(device="cpu").manual_seed(int(seed))
        with torch.inference_mode():
            tokens = generate_speech_tokens(
                self.llm,
                text_ids,
                self.profile.prompt_text_ids.tolist(),
                self.profile.speech_tokens.tolist(),
                generator,
                max_token_text_ratio=cap.max_token_text_ratio,
                min_cap=cap.min_cap,
                max_tokens=self.max_tokens_per_segment,
            )
        return tokens, speech_token_cap(len(text_ids), cap.max_token_text_ratio, cap.min_cap, self.max_tokens_per_segment)

    def render(self, tokens: list[int]) -> torch.Tensor:
        """Flow + HiFT: speech tokens -> float waveform [1, 480 * 2 * len(tokens)] on the CPU
        (deterministic). Inputs are made on the host; each stage moves them to its device."""
        p = self.profile
        with torch.inference_mode():
            mel = self.flow.inference(
                torch.tensor([tokens], dtype=torch.long, device="cpu"),
                torch.from_numpy(p.speech_tokens[None]).long(),
                torch.from_numpy(np.ascontiguousarray(p.mel[None], dtype=np.float32)),
                torch.from_numpy(np.ascontiguousarray(p.embedding[None], dtype=np.float32)),
            )
            # HiFT runs on the thread budget: its thread-dependent ops pin themselves to one thread
            # (hift.one_thread), so a segment's bytes do not depend on --workers or the budget
            return self.hift.inference(mel).cpu()

    def synthesize(self, text: str, seed: int, language: str | None = None) -> bytes:
        """Mono int16 little-endian PCM at 24 kHz. No speech tokens -> 0.2 s of silence.

        language: taken and not needed. CosyVoice3 has no language tokens (its added special
        tokens are the prompt/system markers, the sound events and the CMU/pinyin pronunciation
        tokens) and upstream's zero-shot mode marks no language: the LLM reads the language from
        the text itself. A CosyVoice-1 style ``<|fr|>`` would be split into ordinary BPE pieces and
        said. So a French segment's LLM input is its text's ids, as for any other segment, and
        its audio does not depend on `language` (the store keys it without one)."""
        tokens = self.speech_tokens(text.strip(), seed)
        if not tokens:
            return bytes(2 * int(SILENCE_SECONDS * SAMPLE_RATE))
        return pcm16(self.render(tokens))
