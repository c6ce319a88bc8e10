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


# A model folder's id reads 16 blocks of 1 MiB from a large file (every file of a small one): cheap
# on gigabytes, and changed by any retrained file in practice.
ID_BLOCK, ID_BLOCKS = 1 << 20, 16


def sampled_digest_update(h, path: Path, name: str) -> None:
    """Feed `h` a file's name, size and ID_BLOCKS evenly spaced ID_BLOCK-byte blocks (small files
    whole): the model ids of CosyVoice3 and Qwen3-TTS folders."""
    size = path.stat().st_size
    h.update(f"{name}\0{size}\0".encode())
    with open(path, "rb") as f:
        if size <= ID_BLOCK * ID_BLOCKS:
            h.update(f.read())
            return
        last = size - ID_BLOCK
        for i in range(ID_BLOCKS):
            f.seek(last * i // (ID_BLOCKS - 1))
            h.update(f.read(ID_BLOCK))


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


def join_parts(parts, target: Path, sha256: str) -> str:
    """Concatenate `parts` (paths or package resources, anything with open("rb"), in order) into
    `target`, atomically: a temp file in target's folder, hashed as it is written and renamed into
    place only when its sha256 is `sha256`. Returns the digest of what the parts made (the caller
    words the error when it differs). Concurrent callers each write a whole copy; the last rename wins."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() == sha256:
            os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return digest.hexdigest()
