import os
import sys

import pytest

from epub2audio.worker import memory

ROLLUP = """55d0a1e0a000-7ffd2b1f6000 ---p 00000000 00:00 0                          [rollup]
Rss:              409600 kB
Pss:              300000 kB
Shared_Clean:      90000 kB
Shared_Dirty:       1000 kB
Private_Clean:     20000 kB
Private_Dirty:    280000 kB
Referenced:       400000 kB
Anonymous:        280000 kB
Swap:              12000 kB
SwapPss:           12000 kB
"""


def test_private_plus_swap_from_smaps_rollup(tmp_path):
    path = tmp_path / "smaps_rollup"
    path.write_text(ROLLUP)
    # Private_Clean + Private_Dirty + Swap; shared pages and RSS do not count.
    assert memory._linux_private_plus_swap(str(path)) == (20000 + 280000 + 12000) * 1024


def test_missing_file_means_unknown(tmp_path):
    assert memory._linux_private_plus_swap(str(tmp_path / "nope")) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_own_memory_grows_with_a_private_allocation():
    # An anonymous mapping of its own (not malloc: a library loaded earlier in the same xdist worker
    # may have raised glibc's mmap threshold, and then a freed block stays in the heap): touching it
    # adds exactly its pages and unmapping it removes them, whatever else the process does meanwhile.
    import mmap

    block = mmap.mmap(-1, 64 * 1024 * 1024, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    with_block = memory.private_bytes()
    block.close()
    assert with_block - memory.private_bytes() >= 60 * 1024 * 1024


# --- accelerator memory (read in the child, never by importing torch in the parent) ---------------

from types import SimpleNamespace  # noqa: E402

GB = 1024**3


def fake_torch(cuda_reserved=None, mps_bytes=None):
    cuda = SimpleNamespace(
        is_initialized=lambda: cuda_reserved is not None,
        device_count=lambda: len(cuda_reserved or []),
        memory_reserved=lambda i: cuda_reserved[i],
    )
    mps = SimpleNamespace(is_available=lambda: mps_bytes is not None)
    return SimpleNamespace(cuda=cuda, backends=SimpleNamespace(mps=mps),
                           mps=SimpleNamespace(driver_allocated_memory=lambda: mps_bytes))


def test_accelerator_memory_is_cuda_reserved_on_every_gpu_or_the_mps_driver_allocation():
    assert memory._torch_accelerator_bytes(fake_torch(cuda_reserved=[3 * GB, 1 * GB])) == 4 * GB
    assert memory._torch_accelerator_bytes(fake_torch(mps_bytes=5 * GB)) == 5 * GB
    assert memory._torch_accelerator_bytes(fake_torch()) == 0
    assert memory._torch_accelerator_bytes(None) == 0  # torch not loaded: nothing to ask


def test_growth_on_the_accelerator_recycles_the_worker():
    from epub2audio.worker.supervisor import MB, Supervisor, WorkerPolicy

    s = Supervisor({"voice": "tone"}, WorkerPolicy(memory_budget_mb=1024))
    worker = SimpleNamespace(memory=500 * MB, device_memory=2000 * MB, requests=1)
    assert not s._needs_recycling(worker)  # the first success latches the baseline: 2500 MB
    worker.device_memory += 1000 * MB  # host flat, GPU +1000 MB: within the budget
    assert not s._needs_recycling(worker)
    worker.device_memory += 100 * MB  # +1100 MB in all
    assert s._needs_recycling(worker)
    assert s.stats.memory_samples[-1][1] == 500 * MB + 3100 * MB
    capped = Supervisor({"voice": "tone"}, WorkerPolicy(max_memory_mb=2048))
    assert capped._needs_recycling(SimpleNamespace(memory=1000 * MB, device_memory=1100 * MB, requests=1))


def test_a_worker_without_torch_reports_no_accelerator_memory():
    from epub2audio.worker.supervisor import Supervisor, WorkerPolicy

    s = Supervisor({"voice": "tone"}, WorkerPolicy(request_timeout=20, start_timeout=30))
    try:
        s.synthesize("hello", 1)
        assert s.worker.device_memory == 0 and s.worker.memory > 0
    finally:
        s.close()


def test_each_worker_on_one_gpu_is_recycled_on_its_own_device_memory(monkeypatch):
    """Two workers sharing a GPU: each reports its own CUDA reserve through the protocol (faked:
    +300 MB per request of its own) and is recycled on that alone, however many requests the
    other one served."""
    from epub2audio.worker.supervisor import MB, Supervisor, WorkerPolicy

    monkeypatch.setenv("EPUB2AUDIO_FAULTS", "device_leak_mb=300,device_name=Fake GPU")
    policy = WorkerPolicy(memory_budget_mb=1024, request_timeout=20, start_timeout=30)
    busy, quiet = Supervisor({"voice": "tone"}, policy), Supervisor({"voice": "tone"}, policy)
    try:
        assert busy.details.device == quiet.details.device == "Fake GPU"
        assert quiet.worker.device_memory == 0  # ready: nothing reserved yet
        quiet.synthesize("a", 1)
        reported = []
        for i in range(4):  # the baseline (300 MB) then +300, +600, +900: within 1024 MB
            busy.synthesize(f"busy {i}", i)
            reported.append(busy.worker.device_memory)
        assert reported == [300 * MB, 600 * MB, 900 * MB, 1200 * MB]
        assert (busy.stats.recycled, quiet.stats.recycled) == (0, 0)
        busy.synthesize("busy 4", 4)  # its own 5th request: +1200 MB over its baseline
        assert (busy.stats.recycled, busy.worker) == (1, None)
        quiet.synthesize("b", 2)  # the other worker's second: +300 MB of its own, kept
        assert (quiet.stats.recycled, quiet.worker.device_memory) == (0, 600 * MB)
        busy.synthesize("busy 5", 5)  # a fresh worker: its own count starts again
        assert (busy.stats.spawned, busy.worker.device_memory) == (2, 300 * MB)
    finally:
        busy.close()
        quiet.close()
