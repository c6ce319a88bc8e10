"""On PYTHONPATH, this makes a test's `epub2audio` process a machine without the companion wheel of
Kokoro's 54 official packs (tests/conftest.py's `without_official_packs`): the wheel is installed by
`make test`, and some tests are about a language no installed voice speaks."""

import sys

HIDDEN = "epub2audio_kokoro_voices"


class _Hiding:
    """A meta-path finder that finds what the one it wraps finds, except the hidden package."""

    def __init__(self, finder):
        self._finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == HIDDEN:
            return None
        find = getattr(self._finder, "find_spec", None)
        return find(name, path, target) if find else None

    def __getattr__(self, attribute):
        return getattr(self._finder, attribute)


sys.meta_path[:] = [_Hiding(finder) for finder in sys.meta_path]
