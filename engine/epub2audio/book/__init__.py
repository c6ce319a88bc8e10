"""EPUB → Book: pure Python, no audio."""

from .model import Book, Chapter, Cover, Skipped

__all__ = ["Book", "Chapter", "Cover", "Skipped"]
