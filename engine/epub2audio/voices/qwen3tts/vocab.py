"""Which text-embedding rows a compressed Qwen3-TTS folder keeps (`model compress --vocab LANG...`).

The Talker reads the text embedding only to embed the text it speaks, so a row that no text of the
chosen languages produces can be left out; the tokenizer is unchanged and a token map (int32 over
the whole text vocabulary, -1 = dropped: cosyvoice3/vocab.row_map) sends each kept id to its row.
Kept rows are the same numbers, so a text of kept ids gives identical logits (tests prove it).

Kept ids, decided by script rather than by word list (any word of a kept script reads, rare names
included):
    every BPE token whose bytes decode to text whose letters all belong to the scripts of the
        languages asked for (below), Latin always among them: books in every language quote
        Latin-script names, units and web addresses;
    every token with no letter at all (digits, punctuation, symbols, whitespace runs);
    every token that is not whole UTF-8 (a piece of a multi-byte character): which character it
        ends up in is only known in context, so none is dropped;
    the space-prefixed form (BPE's "Ġ") and the bare form of every kept token, so a kept word piece
        reads at the start of a text and after a space alike;
    every added/special token: those tokenizer_config.json names, the ones the tokenizer assigns,
        and config.json's im_start/im_end/tts_pad/tts_bos/tts_eos.
The rows past the tokenizer's ids (151676..151935 in the official file) are never produced and
are dropped.

Scripts per language (Qwen3-TTS's ten, by ISO code): en de fr es it pt -> Latin; ru -> Cyrillic;
zh -> Han; ja -> Han, Hiragana, Katakana; ko -> Hangul. A text that needs a dropped id is refused
before anything runs, in one line naming the characters (OutsideVocabulary, `check_text_ids`).
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

from ..cosyvoice3.vocab import OutsideVocabulary, row_map  # noqa: F401 (part of this module's API)

SCRIPTS = {
    "en": ("LATIN",), "de": ("LATIN",), "fr": ("LATIN",), "es": ("LATIN",), "it": ("LATIN",), "pt": ("LATIN",),
    "ru": ("CYRILLIC",), "zh": ("CJK",), "ja": ("CJK", "HIRAGANA", "KATAKANA"), "ko": ("HANGUL",),
}  # fmt: skip
ALWAYS = ("LATIN",)
SPACE = "\u0120"  # "Ġ": byte-level BPE's space




@lru_cache(maxsize=1)
def _byte_of() -> dict[str, int]:
    """Byte-level BPE's printable character -> byte (transformers' GPT-2 table, inverted)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {c: b for b, c in bytes_to_unicode().items()}


def token_text(token: str) -> str | None:
    """The text of a byte-level BPE token, or None when its bytes are not whole UTF-8."""
    try:
        raw = bytes(_byte_of()[c] for c in token)
    except KeyError:  # an added token written as plain text
        return token
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def script_of(ch: str) -> str:
    """The script word of a letter's Unicode name ("LATIN", "CYRILLIC", "CJK", ...); "" if unnamed."""
    name = unicodedata.name(ch, "")
    for script in ("LATIN", "CYRILLIC", "CJK", "HIRAGANA", "KATAKANA", "HANGUL"):
        if script in name.split():
            return script
    return name.split(" ")[0] if name else ""


def scripts_for(languages: Sequence[str]) -> set[str]:
    unknown = [lang for lang in languages if lang not in SCRIPTS]
    if unknown:
        raise ValueError(f"--vocab: {unknown[0]!r} is not one of Qwen3-TTS's languages ({', '.join(SCRIPTS)}) or all")
    return {s for lang in languages for s in SCRIPTS[lang]} | set(ALWAYS)


def readable(text: str, scripts: set[str]) -> bool:
    return all(script_of(ch) in scripts for ch in text if ch.isalpha())


def kept_ids(vocab: dict[str, int], special_ids: Iterable[int], languages: Sequence[str]) -> set[int]:
    """The ids to keep (module docstring); `vocab` is the tokenizer's token -> id (vocab.json)."""
    scripts = scripts_for(languages)
    kept = {int(i) for i in special_ids}
    for token, tid in vocab.items():
        text = token_text(token)
        if text is None or readable(text, scripts):
            kept.add(int(tid))
    by_token = {t: i for t, i in vocab.items()}
    for token, tid in list(vocab.items()):
        if tid in kept:
            bare = token[1:] if token.startswith(SPACE) else token
            for form in (bare, SPACE + bare):
                if form in by_token:
                    kept.add(int(by_token[form]))
    return kept


def special_ids(model_dir: Path, tokenizer, config_ids: Iterable[int]) -> set[int]:
    """Added tokens by tokenizer_config.json's ids and by the tokenizer's own, and config.json's."""
    ids = {int(i) for i in config_ids}
    try:
        added = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8")).get("added_tokens_decoder") or {}
        ids |= {int(i) for i in added}
    except (OSError, ValueError):
        pass
    ids |= {int(i) for i in tokenizer.get_added_vocab().values()}
    return ids


@lru_cache(maxsize=4)
def _load(model_dir: str, _stamp: tuple):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import Qwen2Tokenizer  # by name: AutoTokenizer would read config.json's qwen3_tts as a model

    return Qwen2Tokenizer.from_pretrained(model_dir)


def load_text_tokenizer(model_dir: str | os.PathLike):
    """The folder's Qwen2 byte-level BPE (vocab.json, merges.txt, tokenizer_config.json), offline."""
    d = Path(model_dir)
    stamp = tuple((n, (d / n).stat().st_mtime_ns) for n in ("vocab.json", "merges.txt", "tokenizer_config.json"))
    return _load(str(d.resolve()), stamp)


def check_text_ids(row_of_id, ids: Sequence[int], tokenizer=None, vocab: Sequence[str] = ()) -> None:
    """OutsideVocabulary, one line naming the characters whose tokens this folder left out."""
    if row_of_id is None:
        return
    n = int(row_of_id.shape[0])
    missing = list(dict.fromkeys(int(i) for i in ids if not 0 <= i < n or int(row_of_id[i]) < 0))  # text order
    if not missing:
        return
    chars: list[str] = []
    for i in missing:
        text = tokenizer.decode([i]) if tokenizer is not None else ""
        odd = [ch for ch in text if ch.isalpha() and script_of(ch) not in scripts_for(vocab)] if vocab else []
        for piece in odd or ([text] if text else [f"id {i}"]):
            if piece not in chars:
                chars.append(piece)
    shown = ", ".join(f"{c!r} (U+{ord(c):04X})" if len(c) == 1 else repr(c) for c in chars[:8])
    more = f" and {len(chars) - 8} more" if len(chars) > 8 else ""
    langs = " ".join(vocab) or "pruned"
    raise OutsideVocabulary(f"this text needs characters outside the compressed model's vocabulary ({langs}): "
                            f"{shown}{more}; use a model folder compressed with --vocab all or with their language")
