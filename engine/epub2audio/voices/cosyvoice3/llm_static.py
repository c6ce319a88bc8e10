"""A static decode step for the torch LLM: fixed shapes per length bucket, replayable as a CUDA graph.

Why: on a GPU one decode step of the 24-layer Qwen2 is a few hundred small kernels, and launching
them from Python bounds the rate (bench/gpu_check.py measured 44 tokens/s in fp32 on an H200, the
GPU mostly idle). A step whose every tensor has a fixed shape and address can be captured once as
a CUDA graph and replayed for each token: one launch instead of hundreds. The sampler stays on
the host, unchanged (generate.py), so the seed contract is the same as the dynamic path's.

What is static:
- the KV cache is preallocated per layer as [1, n_kv_heads, capacity, head_dim], with capacity a
  multiple of `BUCKET` positions (a "length bucket"); a session that outgrows it moves to the next
  bucket (a copy, and on CUDA one more capture, made once per bucket and kept);
- the step's inputs live in fixed buffers: the speech token id and the position (int64 [1]), so
  the host writes two scalars and replays; the embedding lookup, rotary tables, cache write
  (`index_copy_` at the position), attention mask (`arange(capacity) <= position`) and the
  log-softmax all run inside the step;
- attention runs over the whole padded cache under that mask. Masked columns get exactly zero
  weight, but the reduction runs over `capacity` columns instead of `position + 1`, so the
  summation order can differ from the dynamic path by float rounding. The prompt (prefill) runs the
  dynamic path unchanged and is copied into the buffers.

So the static step is its own arithmetic: tests/cosyvoice3/test_llm_static.py measures it against
the dynamic step on the CPU (log-probabilities within the fp32 noise floor, the same sampled tokens
on the tests' seeds), and the voice records the step in its model id ("+step-static"), as it
records the device, so one book never mixes the two. Replaying the graph runs the very kernels the
eager static step runs, on the same buffers: on CUDA the two are bit-identical (bench/gpu_check.py
checks it on a lent GPU).

One session at a time: the buffers (and a graph's captured addresses) belong to the decoder, so
starting a session ends the previous one, whose `next_logp` then refuses to run. A worker decodes
one segment at a time, so this costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .llm import CosyVoice3LM, DecoderLayer, NextLogp, apply_rope, rope_cos_sin

BUCKET = 256  # positions per length bucket: 10 s of speech; prompts are ~150-400 positions
STEPS = ("dynamic", "static")


def choose_step(requested: str, device: str) -> str:
    """"auto" is the static step (captured as a CUDA graph) on CUDA, the dynamic one elsewhere:
    on the CPU there are no launches to save (the step is bound by reading the weights)."""
    if requested == "auto":
        return "static" if device == "cuda" else "dynamic"
    if requested not in STEPS:
        raise ValueError(f"LLM decode step must be auto, {' or '.join(STEPS)}; got {requested!r}")
    return requested


def bucket_capacity(positions: int) -> int:
    """The smallest bucket that holds `positions` plus at least one free slot."""
    return max(1, math.ceil((positions + 1) / BUCKET)) * BUCKET


@dataclass
class _Slot:
    """One bucket's buffers (and, on CUDA, its captured graph)."""

    capacity: int
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    token: torch.Tensor  # int64 [1]: the speech id fed this step
    position: torch.Tensor  # int64 [1]: where it goes
    columns: torch.Tensor  # int64 [capacity]: 0..capacity-1, for the mask
    logp: torch.Tensor | None = None  # fp32 [V]: the step's output (a graph writes it in place)
    graph: object | None = None  # torch.cuda.CUDAGraph
    warm: bool = field(default=False)


class StaticDecoder:
    """`start_decoding` for a CosyVoice3LM, with the static step (see the module docstring).

    use_graph: capture each bucket's step as a CUDA graph (only where the model is on CUDA);
    False runs the same static step eagerly, which is what a graph replays.
    """

    def __init__(self, model: CosyVoice3LM, use_graph: bool | None = None) -> None:
        self.model = model
        weight = model.speech_embedding.weight
        self.device, self.dtype = weight.device, weight.dtype
        self.use_graph = (self.device.type == "cuda") if use_graph is None else use_graph
        if self.use_graph and self.device.type != "cuda":
            raise ValueError("a CUDA graph needs the model on a CUDA device")
        self.slots: dict[int, _Slot] = {}
        self.session = 0  # which session owns the buffers

    # -- buffers

    def _slot(self, capacity: int) -> _Slot:
        slot = self.slots.get(capacity)
        if slot is None:
            a = self.model.args
            shape = (1, a.num_key_value_heads, capacity, a.head_dim)
            kw = {"device": self.device}
            slot = _Slot(
                capacity,
                [torch.zeros(shape, dtype=self.dtype, **kw) for _ in range(a.num_hidden_layers)],
                [torch.zeros(shape, dtype=self.dtype, **kw) for _ in range(a.num_hidden_layers)],
                torch.zeros(1, dtype=torch.long, **kw),
                torch.zeros(1, dtype=torch.long, **kw),
                torch.arange(capacity, dtype=torch.long, **kw),
            )
            self.slots[capacity] = slot
        return slot

    @staticmethod
    def _clear(slot: _Slot) -> None:
        # Masked columns get zero weight, but 0 * NaN is NaN: stale values must be finite. Zeros
        # also make a session's numbers independent of the one before it.
        for k, v in zip(slot.keys, slot.values):
            k.zero_()
            v.zero_()

    # -- the step

    def _layer(self, layer: DecoderLayer, x, cos, sin, keys, values, position, mask):
        """DecoderLayer.forward for one position over the static cache: the same projections,
        rotary, norms and MLP; only the cache write and the attention's extent differ."""
        attn = layer.self_attn
        h = layer.input_layernorm(x)
        q = attn.q_proj(h).view(1, 1, attn.n_heads, attn.head_dim).transpose(1, 2)
        k = attn.k_proj(h).view(1, 1, attn.n_kv, attn.head_dim).transpose(1, 2)
        v = attn.v_proj(h).view(1, 1, attn.n_kv, attn.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        keys.index_copy_(2, position, k)
        values.index_copy_(2, position, v)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
        x = x + attn.o_proj(out.transpose(1, 2).reshape(1, 1, attn.n_heads * attn.head_dim))
        return x + layer.mlp(layer.post_attention_layernorm(x))

    def _step(self, slot: _Slot) -> torch.Tensor:
        """One token through the network, every shape fixed by the slot; returns fp32 log-probs [V]."""
        m = self.model
        x = F.embedding(slot.token, m.speech_embedding.weight).view(1, 1, -1)
        cos, sin = rope_cos_sin(m.args, slot.position, x.dtype)
        mask = (slot.columns <= slot.position).view(1, 1, 1, slot.capacity)
        for i, layer in enumerate(m.qwen2.layers):
            x = self._layer(layer, x, cos, sin, slot.keys[i], slot.values[i], slot.position, mask)
        return m.llm_decoder(m.qwen2.norm(x)[0, -1]).float().log_softmax(dim=-1)

    def _run(self, slot: _Slot) -> torch.Tensor:
        if not self.use_graph:
            return self._step(slot)
        if slot.graph is None:
            self._capture(slot)
        slot.graph.replay()
        return slot.logp

    def _capture(self, slot: _Slot) -> None:
        # Warm up on a side stream (cuBLAS workspaces, lazy inits), then capture. Both write the
        # current token's keys and values at the current position: the same values the replay
        # writes, so nothing the session needs is disturbed.
        stream = torch.cuda.Stream(device=self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._step(slot)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            slot.logp = self._step(slot)
        slot.graph = graph

    # -- sessions

    def start_decoding(self, text_ids: Sequence[int], prompt_speech_tokens: Sequence[int]) -> NextLogp:
        """A decoding session with the NextLogp contract (llm.py); it ends the previous one."""
        model = self.model
        with torch.inference_mode():
            prompt = model.embed_prompt(text_ids, prompt_speech_tokens)
        self.session += 1
        session = self.session
        state = {"slot": None, "offset": 0}

        @torch.inference_mode()
        def next_logp(token: int | None) -> torch.Tensor:
            if session != self.session:
                raise RuntimeError("this decoding session was ended by a newer one on the same decoder")
            if token is None:
                if state["offset"]:
                    raise RuntimeError("this session has already run its prompt")
                return self._prefill(prompt, state)
            if not state["offset"]:
                raise RuntimeError("run the prompt (next_logp(None)) before feeding tokens")
            slot = state["slot"]
            if state["offset"] >= slot.capacity:
                slot = state["slot"] = self._grow(slot, state["offset"])
            slot.token.fill_(int(token))
            slot.position.fill_(state["offset"])
            logp = self._run(slot)
            state["offset"] += 1
            return logp.cpu()

        return next_logp

    def _prefill(self, prompt: torch.Tensor, state: dict) -> torch.Tensor:
        """The prompt runs the dynamic path (its own causal attention, unchanged) into a temporary
        cache, whose keys and values then fill the start of the bucket's buffers."""
        model = self.model
        cache = model.qwen2.make_cache()
        hidden = model.qwen2(prompt, cache)
        n = prompt.shape[1]
        slot = self._slot(bucket_capacity(n))
        self._clear(slot)
        for i, layer_cache in enumerate(cache):
            slot.keys[i][:, :, :n] = layer_cache.keys[:, :, :n]
            slot.values[i][:, :, :n] = layer_cache.values[:, :, :n]
        state["slot"], state["offset"] = slot, n
        return model.speech_logp(hidden[0, -1])

    def _grow(self, slot: _Slot, filled: int) -> _Slot:
        bigger = self._slot(bucket_capacity(filled))
        self._clear(bigger)
        for i in range(len(slot.keys)):
            bigger.keys[i][:, :, :filled] = slot.keys[i][:, :, :filled]
            bigger.values[i][:, :, :filled] = slot.values[i][:, :, :filled]
        return bigger
