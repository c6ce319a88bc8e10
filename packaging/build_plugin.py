"""Build the calibre plugin zip from plugin/, byte for byte the same on every run.

    python packaging/build_plugin.py [--src plugin] [--out dist/epub2audio-calibre-plugin.zip]

The zip has __init__.py and plugin-import-name-epub2audio.txt at its root (what calibre needs), the
files in sorted order with a fixed timestamp and permissions, and no caches or editor leftovers.
Install it with `calibre-customize -a dist/epub2audio-calibre-plugin.zip` or from calibre's
Preferences → Plugins → Load plugin from file.
"""

from __future__ import annotations

import argparse
import os
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SRC = ROOT / "plugin"
DEFAULT_OUT = ROOT / "dist" / "epub2audio-calibre-plugin.zip"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold
SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej", ".swp", "~")
SKIP_NAMES = {".DS_Store", "Thumbs.db"}
REQUIRED = ("__init__.py", "plugin-import-name-epub2audio.txt", "ui.py", "images/icon.png")


def plugin_files(src: Path) -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in filenames:
            if name in SKIP_NAMES or name.endswith(SKIP_SUFFIXES) or name.startswith("."):
                continue
            files.append(Path(dirpath) / name)
    return sorted(files, key=lambda p: p.relative_to(src).as_posix())


def build(src: Path = DEFAULT_SRC, out: Path = DEFAULT_OUT, required=REQUIRED) -> Path:
    src, out = Path(src), Path(out)
    files = plugin_files(src)
    names = {f.relative_to(src).as_posix() for f in files}
    missing = [n for n in required if n not in names]
    if missing:
        raise SystemExit(f"build_plugin: {src} lacks {', '.join(missing)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            info = zipfile.ZipInfo(path.relative_to(src).as_posix(), date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100644 & 0xFFFF) << 16
            info.create_system = 3  # unix, so the permissions above mean the same everywhere
            zf.writestr(info, path.read_bytes(), compresslevel=9)
    os.replace(tmp, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC, help="the plugin folder (default: plugin/)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the zip to write")
    args = parser.parse_args(argv)
    out = build(args.src, args.out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
