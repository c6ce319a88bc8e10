"""Chapter audio → one chaptered, tagged M4B (a single streamed AAC encode with ffmpeg)."""

from .ffmpeg import FFmpegNotFound, ffmpeg_exe
from .m4b import AudioChapter, M4BError, M4BResult, Tags, tags_for_book, write_m4b

__all__ = [
    "AudioChapter",
    "FFmpegNotFound",
    "M4BError",
    "M4BResult",
    "Tags",
    "ffmpeg_exe",
    "tags_for_book",
    "write_m4b",
]
