"""A Kokoro-family graph's phoneme durations as a second output, and a segment's phonemes on its
audio's timeline (kokoro.py, hibari.py; piper.py has its own, for Piper's Ceil).

Kokoro and its students compute each token's duration in frames (Clip(Round(d / speed), min 1),
cast to int64, before the decoder repeats each token's features that many frames). Making that
tensor an output changes nothing that is computed, so the audio stays byte-identical; the audio is
exactly the frames' sum times a fixed number of samples a frame. A chunk's tokens are its phoneme
characters between two 0 pads: the first pad is the chunk's lead-in, the last its tail.
"""

from __future__ import annotations

import numpy as np


# ---- durations ----------------------------------------------------------------------------------

def expose_durations(model) -> str | None:
    """Make the duration predictor's frames per token a second output of the graph: the int64 Cast
    of Clip(Round(durations / speed), min 1), the graph's one Round (kokoro's pred_dur). None if
    the graph has no such chain. Nothing is computed differently: the audio stays byte-identical."""
    rounds = [n for n in model.graph.node if n.op_type == "Round"]
    if len(rounds) != 1:
        return None
    consumers: dict[str, list] = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    clip = consumers.get(rounds[0].output[0], [])
    if len(clip) != 1 or clip[0].op_type != "Clip":
        return None
    cast = [n for n in consumers.get(clip[0].output[0], []) if n.op_type == "Cast"]
    if len(cast) != 1:
        return None
    name = cast[0].output[0]
    if not any(o.name == name for o in model.graph.output):
        from onnx import ValueInfoProto

        value = ValueInfoProto()
        value.name = name
        model.graph.output.append(value)
    return name


def durations_session(model, durations: str, options):
    """An ONNX Runtime session of durations_graph (no decoder), or False if it cannot be cut out."""
    import onnxruntime

    graph = durations_graph(model, durations)
    if graph is None:
        return False
    return onnxruntime.InferenceSession(graph.SerializeToString(), sess_options=options,
                                        providers=["CPUExecutionProvider"])


def durations_graph(model, durations: str):
    """The part of the graph that computes the durations (text encoder and duration predictor,
    not the decoder), or None if it cannot be cut out."""
    import onnx.utils

    try:
        return onnx.utils.Extractor(model).extract_model([i.name for i in model.graph.input], [durations])
    except Exception:  # noqa: BLE001 — an export we cannot cut: the full graph reports them too
        return None


def chunk_stream(chunks: list[str], samples: list[np.ndarray]):
    """((phoneme, first sample, end sample) over the whole segment, the segment's length), from
    each chunk's samples per token; (None, None) if a chunk's tokens are not its characters."""
    stream, at = [], 0
    for chunk, per_token in zip(chunks, samples, strict=True):
        per_token = np.asarray(per_token).reshape(-1).astype(np.int64)
        if len(per_token) != len(chunk) + 2:
            return None, None
        position = at + int(per_token[0])
        for phoneme, length in zip(chunk, per_token[1:-1]):
            stream.append((phoneme, position, position + int(length)))
            position += int(length)
        at += int(per_token.sum())
    return stream, at
