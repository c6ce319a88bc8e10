"""Written text → the words a narrator says.

For now this only tidies what every voice stumbles on (stray whitespace, typographic characters
with no sound); numbers, numerals and abbreviations are read by the voice's own front end.
Language-specific rules plug in by language code.
"""

from __future__ import annotations

import re

_SPACES = re.compile(r"\s+")
_SILENT = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))  # soft hyphen, zero-widths


def normalize(text: str, language: str = "en") -> str:
    text = text.translate(_SILENT)
    return _SPACES.sub(" ", text).strip()
