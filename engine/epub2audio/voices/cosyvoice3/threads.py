"""Intra-op thread budget for CosyVoice3 workers on a CPU: never more busy threads than cores.

Rule (`intra_op_threads`): each worker gets `cores // workers` threads (at least 1); a caller
running stages at once may split that between them with `concurrent_stages`. Every torch stage (`torch.set_num_threads`) and every ONNX Runtime
session (`intra_op_num_threads`) of the worker uses the result; ORT sessions take it at creation.

Measured on the 2-core x86 machine this was written on (bench/cosyvoice3.py, "Threads" table;
1 vs 2 threads interleaved on the same work):

  * Two threads on two free cores speed the compute-bound DiT up by < 2x and the
    bandwidth-bound LLM decode by less (one core already draws most of the memory bandwidth).
  * As soon as more threads are runnable than there are cores (other workers, other processes),
    2 threads become SLOWER than 1: torch's OpenMP team waits at every barrier for a descheduled
    thread. Measured with the load average at 7-8 on 2 cores: torch fp32 DiT call 8.1 s at 1
    thread vs 19.1 s at 2; ONNX Runtime fp32 DiT 4.7 s vs 6.2 s; ORT int8 DiT 2.2 s vs 3.2 s.
  * The torch flow's mel and the LLM's logits do not depend on the thread count (bit-identical at
    1 and 2 threads in our tests and bench). Of HiFT, only the source STFT, the iSTFT and the
    small 18-channel source_downs convs do; hift.py runs just those on one thread, so the vocoder
    uses the budget too and the budget stays a pure speed setting.

So `--workers N` on C cores should run `C // N` threads per worker, and 1 thread per worker as
soon as N >= C. `concurrent_stages` lets a caller split a worker's budget between stages that run
at once; the pipelined worker (worker/pipeline.py) does not use it today: each of its two stages
keeps the worker's budget, and its measured gain on 2 cores is small (see that module).
"""

from __future__ import annotations

import os


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def intra_op_threads(workers: int = 1, cores: int | None = None, concurrent_stages: int = 1) -> int:
    """Threads for each stage of each worker so that workers x stages x threads <= cores (>= 1)."""
    if workers < 1 or concurrent_stages < 1:
        raise ValueError("workers and concurrent_stages must be >= 1")
    cores = available_cores() if cores is None else cores
    return max(1, cores // (workers * concurrent_stages))
