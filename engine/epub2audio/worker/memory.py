"""What a process really costs in memory, measured from inside it: host and accelerator.

Peak RSS overstates (shared libraries, clean file-backed pages the kernel can drop) and never comes
back down, so a budget on it would recycle healthy workers. We measure the memory that only this
process holds: private pages plus what was swapped out (Linux), or the task's phys_footprint, the
number Activity Monitor shows and jetsam acts on (macOS).

Accelerator memory (`accelerator_bytes`) is counted beside it: what torch's CUDA caching allocator
has reserved, or on Apple what the Metal driver holds for MPS. That is why a worker is disposable on
accelerators too: the CUDA cache only grows with the longest segment seen, and MPS keeps every
compiled graph (one per new input shape, i.e. per segment length) in a cache that is never freed,
so a long book grows the worker until the supervisor recycles it. On Apple Silicon the GPU's memory
is the host's, and phys_footprint may already include part of what MPS holds; counting it twice
errs towards recycling early, never towards running out.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys


def private_bytes() -> int:
    """Memory this process alone is responsible for, in bytes (0 where we cannot tell)."""
    if sys.platform.startswith("linux"):
        return _linux_private_plus_swap()
    if sys.platform == "darwin":
        return _macos_phys_footprint()
    return 0


def accelerator_bytes() -> int:
    """Accelerator memory this process holds, in bytes; 0 when torch is not loaded (the parent and
    the voices without torch never import it just to look)."""
    return _torch_accelerator_bytes(sys.modules.get("torch"))


def _torch_accelerator_bytes(torch) -> int:
    if torch is None:
        return 0
    try:
        if torch.cuda.is_initialized():
            return sum(int(torch.cuda.memory_reserved(i)) for i in range(torch.cuda.device_count()))
        if torch.backends.mps.is_available():
            return int(torch.mps.driver_allocated_memory())
    except (AttributeError, RuntimeError):
        pass
    return 0


def _linux_private_plus_swap(path: str = "/proc/self/smaps_rollup") -> int:
    fields = {}
    try:
        with open(path) as f:
            for line in f:
                name, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB":
                    fields[name] = int(parts[0]) * 1024
    except OSError:
        return 0
    return fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0) + fields.get("Swap", 0)


class _TaskVMInfo(ctypes.Structure):
    # The head of struct task_vm_info (mach/task_info.h) up to phys_footprint.
    _fields_ = [
        ("virtual_size", ctypes.c_uint64),
        ("region_count", ctypes.c_int32),
        ("page_size", ctypes.c_int32),
        ("resident_size", ctypes.c_uint64),
        ("resident_size_peak", ctypes.c_uint64),
        ("device", ctypes.c_uint64),
        ("device_peak", ctypes.c_uint64),
        ("internal", ctypes.c_uint64),
        ("internal_peak", ctypes.c_uint64),
        ("external", ctypes.c_uint64),
        ("external_peak", ctypes.c_uint64),
        ("reusable", ctypes.c_uint64),
        ("reusable_peak", ctypes.c_uint64),
        ("purgeable_volatile_pmap", ctypes.c_uint64),
        ("purgeable_volatile_resident", ctypes.c_uint64),
        ("purgeable_volatile_virtual", ctypes.c_uint64),
        ("compressed", ctypes.c_uint64),
        ("compressed_peak", ctypes.c_uint64),
        ("compressed_lifetime", ctypes.c_uint64),
        ("phys_footprint", ctypes.c_uint64),
    ]


_TASK_VM_INFO = 22


def _macos_phys_footprint() -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    info = _TaskVMInfo()
    count = ctypes.c_uint32(ctypes.sizeof(info) // 4)
    task = ctypes.c_uint32.in_dll(libc, "mach_task_self_")
    kr = libc.task_info(task, _TASK_VM_INFO, ctypes.byref(info), ctypes.byref(count))
    return int(info.phys_footprint) if kr == 0 else 0
