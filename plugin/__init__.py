"""epub2audio for calibre: turn a book's EPUB into an M4B audiobook and add it as a format.

This module is what calibre's command line tools load, so it must not import Qt; the action
itself lives in ui.py (see actual_plugin) and the settings widget in config.py.
"""

from calibre.customize import InterfaceActionBase


class Epub2AudioPlugin(InterfaceActionBase):
    name = 'epub2audio'
    description = ('Convert books to M4B audiobooks with chapters, read aloud on this computer by '
                   'the epub2audio engine, and add the audiobook to the book as an M4B format.')
    supported_platforms = ['windows', 'osx', 'linux']
    author = 'epub2audio developers'
    version = (0, 1, 0)
    minimum_calibre_version = (6, 0, 0)

    actual_plugin = 'calibre_plugins.epub2audio.ui:ConvertToAudiobookAction'

    def is_customizable(self):
        return True

    def config_widget(self):
        from calibre_plugins.epub2audio.config import ConfigWidget
        return ConfigWidget()

    def save_settings(self, config_widget):
        config_widget.save_settings()
        action = self.actual_plugin_
        if action is not None and hasattr(action, 'apply_settings'):
            action.apply_settings()
