"""A compact text embedding: only the rows a language needs, plus a map from token id to row.

The tokenizer is unchanged; a compressed model folder (compress.py) stores the kept rows of the
Qwen2 text embedding and ``row_of_id`` (int32 over the whole text vocabulary, -1 = not kept).
CosyVoice3 reads the text embedding only for the prompt, so dropping rows loses nothing for a text
whose ids are all kept: those rows are the same numbers (tests prove identical log-probs).

Which ids are kept for a language (``kept_ids``):
    every word of the language's word list (wordfreq's top 100,000) as lower, UPPER and Title
    case, each with and without a leading space (BPE words carry their space), encoded whole;
    every printable ASCII character and every digit run the tokenizer makes of 0-999;
    every token whose text has no letter at all (digits, punctuation such as ``."`` or curly
    quotes, symbols, whitespace runs) and the 256 single-byte tokens;
    the special-token region (<|endoftext|>, <|endofprompt|>, [breath], the phone tokens...).

A text that needs an id outside the map is refused, segment by segment (``OutsideVocabulary``,
naming the piece of text and the fix: a folder made with ``--vocab all``); a zero or stale row is
never read. Rare names split into pieces the word list never produced are what this catches.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence

import torch
from torch import nn

WORDS_PER_LANGUAGE = 100_000


class OutsideVocabulary(ValueError):
    """A text needs a token whose embedding row this compressed model left out."""


def word_list(language: str, n: int = WORDS_PER_LANGUAGE) -> list[str]:
    """The `n` most frequent words of `language` (wordfreq, the `compress` extra)."""
    try:
        import wordfreq
    except ImportError:
        raise ValueError("--vocab LANG needs the word lists of the wordfreq package: pip install 'epub2audio[compress]'") from None
    if language not in wordfreq.available_languages():
        raise ValueError(f"--vocab: no word list for language {language!r}")
    return wordfreq.top_n_list(language, n)


def _forms(word: str) -> set[str]:
    cased = {word.lower(), word.upper(), word.title(), word}
    return cased | {" " + w for w in cased}


def _has_letter(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


def kept_ids(tokenizer, words: Iterable[str], base_vocab_size: int) -> set[int]:
    """Ids to keep for a text in `words` (see the module docstring). `tokenizer` is a
    frontend.TextTokenizer; `base_vocab_size` counts the BPE ids (specials come after)."""
    hf = tokenizer._tok  # batch encoding: 600,000 forms in seconds
    kept: set[int] = set(range(base_vocab_size, len(tokenizer)))
    for token, tid in hf.get_vocab().items():
        text = hf.convert_tokens_to_string([token])
        if tid >= base_vocab_size or len(token) == 1 or not _has_letter(text):
            kept.add(int(tid))
    forms = sorted({f for w in words for f in _forms(w)})
    forms += list(string.printable) + [str(i) for i in range(1000)] + [" " + str(i) for i in range(1000)]
    for start in range(0, len(forms), 4096):
        for ids in hf(forms[start : start + 4096], add_special_tokens=False)["input_ids"]:
            kept.update(int(i) for i in ids)
    return kept


def row_map(kept: Iterable[int], vocab_size: int) -> torch.Tensor:
    """int32 [vocab_size]: the compact row of each kept id (in id order), -1 elsewhere."""
    ids = sorted(i for i in set(kept) if 0 <= i < vocab_size)
    rows = torch.full((vocab_size,), -1, dtype=torch.int32)
    rows[torch.tensor(ids, dtype=torch.long)] = torch.arange(len(ids), dtype=torch.int32)
    return rows


class CompactEmbedding(nn.Module):
    """Stands for the Qwen2 text embedding: `table` holds the kept rows only, as a float tensor
    (`weight`) or a module that looks rows up (compress.Int8RowEmbedding: int8 tables)."""

    def __init__(self, table: torch.Tensor | nn.Module, row_of_id: torch.Tensor) -> None:
        super().__init__()
        if isinstance(table, nn.Module):
            self.table = table
        else:
            self.weight = nn.Parameter(table, requires_grad=False)
        self.register_buffer("row_of_id", row_of_id, persistent=True)

    @property
    def vocab_size(self) -> int:
        return int(self.row_of_id.shape[0])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.row_of_id.to(ids.device)[ids].long()
        if bool((rows < 0).any()):
            missing = sorted({int(i) for i in ids[rows < 0].reshape(-1).tolist()})
            raise OutsideVocabulary(f"token id(s) {missing[:5]} are outside this compressed model's vocabulary")
        if hasattr(self, "table"):
            return self.table(rows)
        return nn.functional.embedding(rows, self.weight)


def check_text_ids(row_of_id: torch.Tensor | None, ids: Sequence[int], tokenizer=None, vocab: str = "") -> None:
    """OutsideVocabulary naming the pieces of text a compressed model cannot read (before any
    backend sees the ids: ONNX / MLX expand the compact table, and must never read a filler row)."""
    if row_of_id is None:
        return
    n = int(row_of_id.shape[0])
    missing = [i for i in ids if not 0 <= i < n or int(row_of_id[i]) < 0]
    if missing:
        pieces = sorted({repr(tokenizer.decode([i])) if tokenizer is not None else str(i) for i in missing})
        raise OutsideVocabulary(
            f"this text needs {len(set(missing))} token(s) outside the compressed model's vocabulary"
            f"{f' ({vocab})' if vocab else ''}: {', '.join(pieces[:5])}; use a model folder compressed with --vocab all"
        )
