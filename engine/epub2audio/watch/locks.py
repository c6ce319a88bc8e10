"""The watcher's locks, in `data_dir()/watch/`: one watcher per IN_DIR/OUT_DIR pair (they would
share a queue), and one conversion per model at a time across all watchers of this user.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

from ..errors import InputError
from .log import WatchLog
from .names import safe_name

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; running one watcher a folder is up to the user
    fcntl = None


def voice_lock_path(options) -> Path:
    """One lock per model: CosyVoice3 voices made from different recordings share one model."""
    from ..config import data_dir

    model = options.voice_options.get("model_dir") or options.voice
    key = hashlib.sha256(str(model).encode()).hexdigest()[:12]
    return data_dir() / "watch" / f"model-{safe_name(Path(str(model)).name)}-{key}.lock"


class VoiceLock:
    """Held while converting, so that watchers of other folders never run the same model at once."""

    def __init__(self, path: Path, log: WatchLog):
        self.path, self.log, self._file = Path(path), log, None

    def __enter__(self):
        if fcntl is None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a")
        told = False
        while True:
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if not told:
                    self.log.say("waiting", "", f"another watcher is using this voice ({self.path.name})")
                    told = True
                time.sleep(1.0)

    def __exit__(self, *exc):
        if self._file is not None:
            self._file.close()  # closing releases the lock
            self._file = None


@contextlib.contextmanager
def instance_lock(path: Path, in_dir: Path, out_dir: Path):
    """Refuse to run two watchers for the same IN_DIR/OUT_DIR pair (they would share a queue)."""
    if fcntl is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise InputError(f"another watcher (pid {holder}) already watches {in_dir} for {out_dir}") from None
        f.truncate(0)
        f.write(str(os.getpid()))
        f.flush()
        yield

