"""The fixed "random" buffers that CosyVoice3's flow and HiFT stages use instead of fresh noise.

Upstream never draws random numbers at inference time in these two stages. Instead, while the model
is being constructed, it resets every RNG to seed 0 and draws a few large tensors once:

    flow   rand_noise  [1, 80, 15000]        float32  randn   the ODE start point (300 s of mel)
    hift   rand_ini    [1, 9]                float32  rand    initial harmonic phases ([0, 0] = 0)
    hift   sine_waves  [1, 7_200_000, 9]     float32  rand    uniform "noise" added to the source
    hift   uv          [1, 7_200_000, 1]     float32  rand    noise output of the source module

None of them is stored in a checkpoint, so we regenerate them here. Their values depend on how many
numbers the CPU generator produced in between, i.e. on the module initialisations that upstream runs
after the seed-0 reset (spec section 6.2). We replay that exact sequence of draws on a *private*
``torch.Generator`` seeded with 0, which produces the same stream as the global CPU generator would
after ``torch.manual_seed(0)``; the process-wide RNG state is never read or modified.

The buffers always have the real model's shapes, whatever the dims of the model that uses them:
upstream's values are a fixed function of this recipe, not of the checkpoint.

Memory. ``rand_noise`` is 4.8 MB and always built whole. ``sine_waves`` is 300 s x 24000 x 9 floats =
259.2 MB at the default 300 s cap, so it is built once per process and only as long as the cap asks
for (``max_seconds``; 36 kB per second of audio); a smaller cap keeps the same leading values.
``uv`` (28.8 MB at 300 s) is not used by inference at all (upstream discards that output); it is
provided to check the recipe. ``rand_ini`` is added at a sample that the downsampling
interpolation never reads, so it has no effect either, but we reproduce it all the same.
"""

from __future__ import annotations

import threading

import torch

SEED = 0
FLOW_NOISE_CHANNELS = 80
FLOW_NOISE_FRAMES = 50 * 300  # 15000 mel frames = 300 s at 50 frames/s
HIFT_SAMPLE_RATE = 24000
HIFT_NOISE_SECONDS = 300  # upstream's buffer length
HIFT_NOISE_SAMPLES = HIFT_NOISE_SECONDS * HIFT_SAMPLE_RATE  # 7_200_000
HIFT_HARMONICS = 9  # fundamental + 8 overtones

# Every table is drawn on the CPU (explicitly: whatever torch's default device is) and moved to
# the stage's device by its user, so the noise is the same numbers on CPU, CUDA and MPS.
_CPU = torch.device("cpu")
_CHUNK = 1 << 22  # draw very long uniform streams in pieces of 4M numbers (CPU uniform_ is serial)

_lock = threading.Lock()
_flow_noise: torch.Tensor | None = None
_rand_ini: torch.Tensor | None = None
_sine_waves: torch.Tensor | None = None
_uv: torch.Tensor | None = None


def _draw_module_inits(gen: torch.Generator, kind: str) -> None:
    """Consume exactly the numbers that upstream's module constructors draw between two buffers.

    Only the count (and kind) of draws matters, so we initialise throw-away tensors with the same
    shapes and the same init calls as ``nn.Embedding`` / ``nn.Linear`` / ``nn.Conv1d`` use.
    """
    def linear_or_conv(*weight_shape: int) -> None:  # kaiming_uniform_ on the weight, uniform_ on the bias
        torch.empty(weight_shape, device=_CPU).uniform_(generator=gen)
        torch.empty(weight_shape[0], device=_CPU).uniform_(generator=gen)

    if kind == "after_rand_noise":
        torch.empty(6561, 80, device=_CPU).normal_(generator=gen)  # flow.input_embedding
        linear_or_conv(80, 192)  # flow.spk_embed_affine_layer
        linear_or_conv(512, 80, 4)  # hift.f0_predictor.condnet.0 (built before HiFT: a YAML argument)
        for _ in range(4):
            linear_or_conv(512, 512, 3)  # condnet.2/4/6/8
        linear_or_conv(1, 512)  # f0_predictor.classifier
    elif kind == "after_sine_waves":
        linear_or_conv(1, 9)  # hift.m_source.l_linear
    else:  # pragma: no cover - programming error
        raise ValueError(kind)


def _skip_uniform(gen: torch.Generator, count: int) -> None:
    while count > 0:
        n = min(count, _CHUNK)
        torch.empty(n, device=_CPU).uniform_(generator=gen)
        count -= n


def _seeded() -> torch.Generator:
    return torch.Generator(device=_CPU).manual_seed(SEED)


def flow_noise() -> torch.Tensor:
    """``rand_noise`` [1, 80, 15000] float32 (shared, read-only; slice it, never write to it)."""
    global _flow_noise
    with _lock:
        if _flow_noise is None:
            _flow_noise = torch.randn([1, FLOW_NOISE_CHANNELS, FLOW_NOISE_FRAMES], generator=_seeded(), device=_CPU)
        return _flow_noise


def rand_ini() -> torch.Tensor:
    """``rand_ini`` [1, 9] float32: the initial harmonic phases, with the fundamental's set to 0."""
    global _rand_ini
    with _lock:
        if _rand_ini is None:
            gen = _seeded()
            torch.randn([1, FLOW_NOISE_CHANNELS, FLOW_NOISE_FRAMES], generator=gen, device=_CPU)
            _draw_module_inits(gen, "after_rand_noise")
            ini = torch.rand(1, HIFT_HARMONICS, generator=gen, device=_CPU)
            ini[:, 0] = 0
            _rand_ini = ini
        return _rand_ini.clone()  # tiny: a private copy


def _samples_for(max_seconds: float) -> int:
    n = int(round(max_seconds * HIFT_SAMPLE_RATE))
    if not 0 < n <= HIFT_NOISE_SAMPLES:
        raise ValueError(f"max_seconds must be in (0, {HIFT_NOISE_SECONDS}], got {max_seconds}")
    return n


def sine_waves(max_seconds: float = HIFT_NOISE_SECONDS) -> torch.Tensor:
    """Leading ``max_seconds`` of the ``sine_waves`` buffer: [1, max_seconds*24000, 9] float32.

    Built once per process; a later call with a longer cap rebuilds (and replaces) the cached copy,
    a shorter one returns a view of it. Read-only.
    """
    global _sine_waves
    n = _samples_for(max_seconds)
    with _lock:
        if _sine_waves is None or _sine_waves.shape[1] < n:
            gen = _seeded()
            torch.randn([1, FLOW_NOISE_CHANNELS, FLOW_NOISE_FRAMES], generator=gen, device=_CPU)
            _draw_module_inits(gen, "after_rand_noise")
            torch.rand(1, HIFT_HARMONICS, generator=gen, device=_CPU)  # rand_ini
            _sine_waves = torch.rand(1, n, HIFT_HARMONICS, generator=gen, device=_CPU)
        return _sine_waves[:, :n]


def uv(max_seconds: float = HIFT_NOISE_SECONDS) -> torch.Tensor:
    """Leading ``max_seconds`` of the source module's ``uv`` buffer: [1, max_seconds*24000, 1].

    Not needed for inference (kept for verifying the recipe). Costs ~1 s: the whole 300 s
    ``sine_waves`` stream has to be drawn (and discarded) first.
    """
    global _uv
    n = _samples_for(max_seconds)
    with _lock:
        if _uv is None or _uv.shape[1] < n:
            gen = _seeded()
            torch.randn([1, FLOW_NOISE_CHANNELS, FLOW_NOISE_FRAMES], generator=gen, device=_CPU)
            _draw_module_inits(gen, "after_rand_noise")
            torch.rand(1, HIFT_HARMONICS, generator=gen, device=_CPU)  # rand_ini
            _skip_uniform(gen, HIFT_NOISE_SAMPLES * HIFT_HARMONICS)  # sine_waves
            _draw_module_inits(gen, "after_sine_waves")
            _uv = torch.rand(1, n, 1, generator=gen, device=_CPU)
        return _uv[:, :n]
