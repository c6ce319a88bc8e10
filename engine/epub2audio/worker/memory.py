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

Loading a voice is metered by the worker itself (child.py, `PeakSampler`): seconds, private and
anonymous bytes after the load, the sampled peak of private bytes during it and the kernel's peak
RSS. Weights are memory-mapped, so a model's mapped pages count as private only once read;
`anonymous_bytes` tells the two apart.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading


def private_bytes() -> int:
    """Memory this process alone is responsible for, in bytes (0 where we cannot tell)."""
    if sys.platform.startswith("linux"):
        return _linux_private_plus_swap()
    if sys.platform == "darwin":
        return _macos_phys_footprint()
    return 0


def anonymous_bytes() -> int:
    """The part of private_bytes() that only swap can free: anonymous pages plus swap (Linux).

    Memory-mapped weights are file-backed: once read they count as Private_Clean in
    private_bytes(), yet the kernel can drop and re-read them. So private_bytes() minus this is
    what the process holds of its mapped files. macOS's phys_footprint already leaves clean
    file-backed pages out, so there the two are the same number."""
    if sys.platform.startswith("linux"):
        return _linux_fields(("Anonymous", "Swap"))
    return private_bytes()


def peak_rss_bytes() -> int:
    """The kernel's exact peak resident set (shared and file-backed pages included): an upper
    bound for the sampled peak of private_bytes(), which can miss a spike between samples."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # macOS: bytes; Linux: KiB


class PeakSampler:
    """The highest private_bytes() seen while a block runs (e.g. loading a voice), sampled every
    `interval` seconds on a daemon thread and once at each end. Neither Linux nor macOS keeps a
    peak of private memory, so this is a sample: peak_rss_bytes() bounds it from above."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> int:
        now = private_bytes()
        self.peak = max(self.peak, now)
        return now

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> "PeakSampler":
        self.sample()
        self._thread = threading.Thread(target=self._run, name="memory-peak", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()


def accelerator_bytes() -> int:
    """Accelerator memory this process holds, in bytes; 0 when torch is not loaded (the parent and
    the voices without torch never import it just to look)."""
    return _torch_accelerator_bytes(sys.modules.get("torch"))


def accelerator_name() -> str:
    """The CUDA device this process computes on, by name ("NVIDIA H200"), or "" when it uses none:
    what `--workers auto` measures per (autoscale.py). Apple's MPS counts as no GPU here: its memory
    is the host's, so it keeps the CPU's worker count."""
    return _torch_accelerator_name(sys.modules.get("torch"))


def _torch_accelerator_name(torch) -> str:
    if torch is None:
        return ""
    try:
        if torch.cuda.is_initialized():
            return str(torch.cuda.get_device_name(torch.cuda.current_device()))
    except (AttributeError, RuntimeError):
        pass
    return ""


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
    return _linux_fields(("Private_Clean", "Private_Dirty", "Swap"), path)


def _linux_fields(names: tuple[str, ...], path: str = "/proc/self/smaps_rollup") -> int:
    """The sum of the named smaps_rollup fields, in bytes (0 where the file cannot be read)."""
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
    return sum(fields.get(name, 0) for name in names)


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
