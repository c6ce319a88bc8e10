"""Where things live and the few settings a user may keep in a file.

Settings come from, weakest first: built-in defaults, `~/.config/epub2audio/config.toml`,
environment variables, command-line options. Keys in config.toml:
  voice = "auto"                 workers = 1     (auto: the book's language picks the voice;
                                 workers = "auto": on a GPU, measured, see worker/autoscale.py)
  [preferred_voices]             fr = "siwis"    (which voice auto picks for a language, as calibre's)
  memory_budget_mb = 2048        max_worker_memory_mb = 0      max_requests_per_worker = 0
  segment_timeout = 600          cosyvoice3_model_dir = "/path/to/Fun-CosyVoice3-0.5B"
  llm_backend = "auto"           llm_precision = "fp32"         flow_precision = "fp32"
  hift_precision = "fp32"        device = "auto"                (auto, cpu, cuda, mps)
  device_llm / device_flow / device_hift = "cpu" ...   (one stage's device; `--device` overrides)
                                 (llm_backend also picks Qwen3-TTS's Talker and Code Predictor backend,
                                  device its decoder's device)
  llm_step = "auto"              (CosyVoice3's torch LLM: "static" = fixed shapes, replayed as a CUDA
                                  graph on CUDA, the default there; "dynamic" elsewhere)
  pipeline_depth = 1             (2: a CosyVoice3 worker decodes the next segment while rendering)
  length_cap = "tight"           (CosyVoice3: a segment that reaches it is re-split; "upstream": 20 per
                                  text token and cut there, as upstream; Qwen3-TTS: T_max frames and
                                  re-split; "upstream": max_new_tokens frames, kept)
  qwen3_streaming = true         (Qwen3-TTS: feed the text one token a frame, upstream's non_streaming_mode
                                  = False; unset: upstream's default, non-streaming for a built-in speaker,
                                  streaming for a cloned voice)
  lexicon = "/path/to/lexicon.txt"   (pronunciations shared by the command, calibre and the watcher)
  image_alt = false              (do not read pictures' descriptions; `--image-alt` and BOOK.epub2audio.toml's
                                  image_alt win over it)
  format = "mp3"                 ("m4b", the default, "mp3" or "opus": the audiobook's format; `--format`)
  subtitles = "srt"              ("srt" or "vtt": BOOK.srt / BOOK.vtt beside every M4B; `--subtitles`)
  readalong = true               (BOOK.readalong.epub beside every M4B; `--readalong`; "words": each
                                 word highlighted where the voice says when it starts, `--readalong words`)
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from .errors import InputError
from .worker.supervisor import WorkerPolicy


def _xdg(var: str, fallback: str) -> Path:
    return Path(os.environ.get(var) or Path.home() / fallback)


def cache_dir() -> Path:
    return Path(os.environ.get("EPUB2AUDIO_CACHE_DIR") or _xdg("XDG_CACHE_HOME", ".cache") / "epub2audio")


def data_dir() -> Path:
    return Path(os.environ.get("EPUB2AUDIO_DATA_DIR") or _xdg("XDG_DATA_HOME", ".local/share") / "epub2audio")


def config_path() -> Path:
    return Path(os.environ.get("EPUB2AUDIO_CONFIG") or _xdg("XDG_CONFIG_HOME", ".config") / "epub2audio" / "config.toml")


def load_config() -> dict:
    path = config_path()
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: not a valid TOML settings file ({error})") from None


def _setting(config: dict, key: str, env: str, default):
    raw = os.environ.get(env, config.get(key, default))
    try:
        return type(default)(raw)
    except (TypeError, ValueError):
        raise InputError(f"setting {key} (or ${env}) must be a {type(default).__name__}, got {raw!r}") from None


def worker_policy(config: dict) -> WorkerPolicy:
    return WorkerPolicy(
        memory_budget_mb=_setting(config, "memory_budget_mb", "EPUB2AUDIO_MEMORY_BUDGET_MB", 2048),
        max_memory_mb=_setting(config, "max_worker_memory_mb", "EPUB2AUDIO_MAX_WORKER_MEMORY_MB", 0),
        max_requests=_setting(config, "max_requests_per_worker", "EPUB2AUDIO_MAX_REQUESTS_PER_WORKER", 0),
        request_timeout=_setting(config, "segment_timeout", "EPUB2AUDIO_SEGMENT_TIMEOUT", 600.0),
        pipeline_depth=_setting(config, "pipeline_depth", "EPUB2AUDIO_PIPELINE_DEPTH", 1),
    )


SUBTITLE_FORMATS = ("srt", "vtt")
AUDIO_FORMATS = ("m4b", "mp3", "opus")
READALONG_LEVELS = ("sentences", "words")


def outputs(config: dict, subtitles: str | None = None, readalong: str | None = None,
            audio_format: str | None = None) -> dict:
    """The audiobook's format and the files beside it: the flags (--format, --subtitles,
    --readalong) over config.toml's keys."""
    audio_format = audio_format or config.get("format") or "m4b"
    if audio_format not in AUDIO_FORMATS:
        raise InputError(f"setting format must be one of {', '.join(AUDIO_FORMATS)}, got {audio_format!r}")
    if subtitles is None:
        subtitles = config.get("subtitles") or None
    if subtitles is not None and subtitles not in SUBTITLE_FORMATS:
        raise InputError(f"setting subtitles must be one of {', '.join(SUBTITLE_FORMATS)}, got {subtitles!r}")
    if readalong is None:
        raw = config.get("readalong", False)
        readalong = "sentences" if raw is True else (raw or None)
    if readalong is not None and readalong not in READALONG_LEVELS:
        raise InputError(f"setting readalong must be true or one of {', '.join(READALONG_LEVELS)}, got {readalong!r}")
    return {"subtitles": subtitles, "readalong": readalong, "audio_format": audio_format}
