"""CI-only driver for tests/test_calibre_gui.py; never shipped.

Installed next to the real plugin in a throwaway calibre config, it drives calibre's GUI from the
inside (see ui.py) when EPUB2AUDIO_HARNESS_OUT is set, and does nothing otherwise.
"""

from calibre.customize import InterfaceActionBase


class Epub2AudioTestHarness(InterfaceActionBase):
    name = 'epub2audio test harness'
    description = 'Drives the epub2audio plugin in automated GUI tests (not for users)'
    supported_platforms = ['windows', 'osx', 'linux']
    author = 'epub2audio developers'
    version = (0, 1, 0)
    minimum_calibre_version = (6, 0, 0)
    actual_plugin = 'calibre_plugins.epub2audio_test_harness.ui:HarnessAction'
