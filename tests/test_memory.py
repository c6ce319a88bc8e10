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
    before = memory.private_bytes()
    block = bytearray(64 * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])
    assert memory.private_bytes() - before >= 60 * 1024 * 1024
    del block
