"""Small file helpers every stage needs: content hashes and crash-safe writes."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def atomic_write(path: str | os.PathLike, data: bytes, *, shared: bool = False) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part:
    a temp file in the same folder, fsync, then rename over the target. shared: a file for the
    user (beside the M4B), whose mode the umask decides as for any file they make, not mkstemp's 0600."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if shared:
            mask = os.umask(0)
            os.umask(mask)
            os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
