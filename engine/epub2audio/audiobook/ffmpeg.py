"""Which ffmpeg binary the engine runs.

We encode with the ffmpeg that ships inside the pinned imageio-ffmpeg wheel (n9.0.2) so that every
machine produces the same M4B from the same PCM. `EPUB2AUDIO_FFMPEG` overrides it (a packager's own
build, or a stand-in for tests). The engine never needs ffprobe.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ENV_VAR = "EPUB2AUDIO_FFMPEG"


class FFmpegNotFound(RuntimeError):
    """No usable ffmpeg binary."""


def ffmpeg_exe() -> str:
    """Path of the ffmpeg binary to run. Looked up on every call: it is cheap and tests change the env."""
    override = os.environ.get(ENV_VAR, "").strip()
    if override:
        return _checked_override(override)
    try:
        import imageio_ffmpeg
    except ImportError as exc:  # a broken install, not a user error we can recover from
        raise FFmpegNotFound(
            f"imageio-ffmpeg is not installed and {ENV_VAR} is not set; reinstall epub2audio"
        ) from exc
    try:
        return imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as exc:  # the wheel's binary is missing for this platform
        raise FFmpegNotFound(f"imageio-ffmpeg has no ffmpeg for this platform ({exc}); set {ENV_VAR}") from exc


def _checked_override(value: str) -> str:
    # Accept a bare command name ("ffmpeg") as well as a path, but fail here with a clear message
    # rather than later with a bare FileNotFoundError from subprocess.
    found = shutil.which(value) if os.sep not in value else (value if _is_executable(value) else None)
    if not found:
        raise FFmpegNotFound(f"{ENV_VAR}={value!r} is not an executable file")
    return found


def _is_executable(path: str) -> bool:
    p = Path(path)
    return p.is_file() and os.access(p, os.X_OK)
