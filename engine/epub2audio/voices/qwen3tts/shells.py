"""Building a stage's module from its tensors: a shell with no init, then the checkpoint's tensors
adopted (strict keys and shapes). Kept apart so that every stage file and the checkpoint loader can
use it without importing each other."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from ..cosyvoice3 import meta


def build(cls, args, state_dict: Mapping[str, torch.Tensor], dtype: torch.dtype = torch.float32,
          modules: Mapping[str, nn.Module] | None = None):
    """A module of `cls(args)` holding `state_dict`'s tensors (cast to `dtype`), strict keys/shapes.
    `modules` puts ready submodules in by dotted name (a compressed folder's compact text table);
    their tensors are then the only ones state_dict may lack."""
    with meta.shell():
        module = cls(args)
    sd = {k: v.to(dtype) for k, v in state_dict.items()}
    if not modules:
        module.load_state_dict(sd, strict=True, assign=True)
        return module.eval()
    result = module.load_state_dict(sd, strict=False, assign=True)
    missing = [k for k in result.missing_keys if not any(k.startswith(name + ".") for name in modules)]
    if missing or result.unexpected_keys:
        raise RuntimeError(f"{cls.__name__}: missing {missing[:3]}, unexpected {result.unexpected_keys[:3]}")
    for name, sub in modules.items():
        parent, _, child = name.rpartition(".")
        setattr(module.get_submodule(parent), child, sub)
    return module.eval()


def expected_shapes(cls, args) -> dict[str, tuple[int, ...]]:
    with meta.shell():
        module = cls(args)
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}
