"""epub2audio: turn EPUB books into M4B audiobooks with local neural text-to-speech."""

__version__ = "0.1.0"
