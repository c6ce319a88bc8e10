"""The names and lines the watcher writes: numbered file names, file-name-safe text, one-line messages."""

from __future__ import annotations

import itertools
import re


def numbered_names(stem: str, suffix: str):
    """'Book.m4b', 'Book (2).m4b', 'Book (3).m4b', ..."""
    yield f"{stem}{suffix}"
    for n in itertools.count(2):
        yield f"{stem} ({n}){suffix}"


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:40]


def one_line(message: str) -> str:
    return " ".join(str(message).split())
