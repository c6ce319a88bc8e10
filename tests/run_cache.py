"""Things the tests build once per test run and share between pytest-xdist's workers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from filelock import FileLock


def built_once(tmp_path_factory, name: str, build: Callable[[Path], Path], *, in_place: bool = False) -> Path:
    """A read-only folder built once per test run, whatever the number of xdist workers.

    Under xdist every worker has its own base temp dir inside one run folder; the folder is built
    there by whichever worker asks first (the others wait on the lock) and renamed into place whole,
    so no worker ever sees half of it. Without xdist it is simply built in the session's temp dir.
    `build(folder)` writes into `folder` and returns the path the tests use (the folder or a file or
    subfolder in it).

    in_place: built in its final folder, for what records its own path (a conversion's job names
    its book and its output, which verify reads); the others still wait on the lock, and the marker
    written last is what says it is whole (a build cut short is removed and made again)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    done = root / "built-once" / name
    marker = done.with_name(name + ".path")
    done.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(done.with_name(name + ".lock"))):
        if not marker.exists():
            where = done if in_place else done.with_name(name + ".partial")
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir()
            inner = Path(build(where)).relative_to(where)
            if not in_place:
                where.rename(done)
            marker.write_text(str(inner), encoding="utf-8")
    return done / marker.read_text(encoding="utf-8")
