"""Building a stage's module from its tensors: a shell with no init, then the checkpoint's tensors
adopted (strict keys and shapes). Kept apart so that every stage file and the checkpoint loader can
use it without importing each other."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ..cosyvoice3 import meta


def build(cls, args, state_dict: Mapping[str, torch.Tensor], dtype: torch.dtype = torch.float32):
    """A module of `cls(args)` holding `state_dict`'s tensors (cast to `dtype`), strict keys/shapes."""
    with meta.shell():
        module = cls(args)
    sd = {k: v.to(dtype) for k, v in state_dict.items()}
    module.load_state_dict(sd, strict=True, assign=True)
    return module.eval()


def expected_shapes(cls, args) -> dict[str, tuple[int, ...]]:
    with meta.shell():
        module = cls(args)
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}
