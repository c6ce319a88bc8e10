"""Qwen3-TTS's text side: the folder's Qwen2 BPE tokenizer, upstream's assistant wrapping, and the
book's language as one of the model's language names.

Upstream (qwen-tts 0.1.1, `Qwen3TTSModel.generate_custom_voice`) tokenizes
`<|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>assistant\\n` with the folder's tokenizer
(no BOS/EOS added) and hands the ids to generate(), which slices the role (3 ids) and the 5-id
suffix off (generate.py). Its languages are "auto" plus the folder's `codec_language_id` names that
are not dialects (`supported_languages`); it refuses any other name, and with no language given
it uses "Auto". A dialect is never asked for: it follows from the speaker (generate.build_prompt).

A segment's language is a BCP 47 tag (the book's dc:language or an xml:lang); its primary subtag
picks the name below when the folder has it, and anything else (no tag, a language the model was
not trained on) is "auto", upstream's own default, where the model reads the language from the text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from epub2audio.errors import InputError

from .checkpoint import TEXT_TOKENIZER_FILES

AUTO = "auto"
# primary subtag -> the language name in config.json's codec_language_id (English first: what
# `voice try` says by default)
LANGUAGE_NAMES = {"en": "english", "zh": "chinese", "de": "german", "it": "italian", "pt": "portuguese",
                  "es": "spanish", "ja": "japanese", "ko": "korean", "fr": "french", "ru": "russian"}  # fmt: skip


def assistant_text(text: str) -> str:
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def supported_languages(codec_language_id: Mapping[str, int]) -> list[str]:
    """Upstream's rule: auto, then every language id that is not a dialect."""
    return [AUTO] + [name for name in codec_language_id if "dialect" not in name]


def language_name(tag: str | None, codec_language_id: Mapping[str, int]) -> str:
    """A BCP 47 tag -> the model's language name, "auto" when there is none for it."""
    primary = (tag or "").strip().lower().replace("_", "-").split("-")[0]
    name = LANGUAGE_NAMES.get(primary)
    return name if name in supported_languages(codec_language_id) else AUTO


def spoken_codes(codec_language_id: Mapping[str, int]) -> list[str]:
    """The primary subtags a folder speaks (for `voice list` and --voice auto)."""
    names = set(supported_languages(codec_language_id))
    return [code for code, name in LANGUAGE_NAMES.items() if name in names]


class TextTokenizer:
    def __init__(self, hf_tokenizer) -> None:
        self._tok = hf_tokenizer

    def encode(self, text: str) -> list[int]:
        """The ids upstream's processor gives the assistant-wrapped `text`."""
        return [int(i) for i in self._tok([assistant_text(text)], add_special_tokens=True)["input_ids"][0]]

    def token_id(self, token: str) -> int:
        return int(self._tok.convert_tokens_to_ids(token))


@lru_cache(maxsize=4)
def _load(model_dir: str, _stamp: tuple) -> TextTokenizer:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    except Exception as e:  # transformers raises many types here (OSError, ValueError, ...)
        raise InputError(f"cannot load the Qwen2 tokenizer from {model_dir}: {e}".splitlines()[0]) from None
    return TextTokenizer(tok)


def load_text_tokenizer(model_dir: str | os.PathLike, text_ids: Mapping[str, int]) -> TextTokenizer:
    """The folder's tokenizer, offline, checked: its special tokens must have config.json's ids
    (a tokenizer that numbers them otherwise would feed the Talker the wrong rows)."""
    d = Path(model_dir)
    stamp = tuple((n, (d / n).stat().st_size, (d / n).stat().st_mtime_ns) for n in TEXT_TOKENIZER_FILES)
    tok = _load(str(d.resolve()), stamp)
    wanted = {"<|im_start|>": text_ids["im_start_token_id"], "<|im_end|>": text_ids["im_end_token_id"],
              "<tts_pad>": text_ids["tts_pad_token_id"], "<tts_text_bos>": text_ids["tts_bos_token_id"],
              "<tts_text_eod>": text_ids["tts_eos_token_id"]}  # fmt: skip
    wrong = [f"{t} is {tok.token_id(t)}" for t, i in wanted.items() if tok.token_id(t) != i]
    if wrong:
        raise InputError(f"{d}: the tokenizer's special tokens do not have config.json's ids ({', '.join(wrong)})")
    return tok
