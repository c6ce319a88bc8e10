"""Model shells: modules built as shapes only, ready to adopt a checkpoint's tensors.

Every stage is built on the meta device and then takes the checkpoint's tensors with
`load_state_dict(..., assign=True)`, so no weight is initialised or copied. torch.nn.init would still
run on the meta tensors, and a meta `normal_` (every nn.Embedding) is a Python kernel whose first call
imports torch._dynamo: 0.8 s of every worker start on this CPU, for numbers that are thrown away.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.nn import init

# torch.nn.init's in-place initialisers (the ones nn.Linear, nn.Embedding, nn.Conv*d and weight
# norm call); each returns its tensor unchanged here.
_INITIALISERS = tuple(name for name in dir(init) if name.endswith("_") and not name.startswith("_"))


def _keep(tensor, *args, **kwargs):
    return tensor


@contextmanager
def shell(device: str = "meta") -> Iterator[None]:
    """Build modules inside this on `device` with torch.nn.init skipped. Not thread-safe (it swaps
    module attributes for the duration); model loading is single-threaded.

    HiFT passes "cpu": weight norm takes a norm of each weight as it is registered, the same
    dynamo-importing kernel on meta, and its 20 M parameters cost little to allocate uninitialised."""
    saved = {name: getattr(init, name) for name in _INITIALISERS}
    try:
        for name in _INITIALISERS:
            setattr(init, name, _keep)
        with torch.device(device):
            yield
    finally:
        for name, fn in saved.items():
            setattr(init, name, fn)
