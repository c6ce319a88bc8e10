"""Word times for `--readalong words`: when each of the book's words is said, on the book's timeline.

1. The voice says when each word of a segment's (spoken, normalised) text is said in its audio.
   A worker is asked (worker/child.py, task "words"; the parent never loads a model runtime), once
   per segment: the answers are kept in the store under the segment's key, as its audio is, so a
   resumed job or a regen writes the same book. A voice that cannot say it (Kokoro's export has
   only an audio output, the test tone has no words) refuses, and the book is at sentence level.
2. A sentence of the book is said by whole segments (timings.py), so its spoken words are theirs
   in order. The book's own words ("Dr.", "3") are matched to the spoken ones ("Doctor", "three")
   by their letters: equal words pair up; between two pairs, the book's words and the spoken
   words there go together (one highlight for "3", said "three"; for "1986", said "nineteen
   eighty-six"). Spoken words with no written word ("Note" before a note read inline) add their
   time to the word before; a written word with no spoken word is joined to the one before it.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

from ..book.lexicon import plain
from .timings import Cue

SPOKEN_WORD = re.compile(r"\u27e6[^\u27e7]*\u27e7|[^\s\u27e6]+")  # the voice's words (piper_alignment.WORD)
WRITTEN_WORD = re.compile(r"\S+")


UNTIMED = "it cannot say when each word starts"  # what the worker answers such a voice's load with


class VoiceCannotTimeWords(Exception):
    """The job's voice cannot say when each word starts (or its worker could not be started)."""


def collect_word_times(store, log_path: Path | None = None) -> dict[str, tuple[int | None, list]]:
    """Every planned segment's word times, asking the job's voice for those the store lacks."""
    from ..worker.supervisor import SegmentFailed, Supervisor, VoiceLoadFailed, WorkerPolicy

    known = store.word_times()
    keys = {}
    for _chapter, _index, key, _pause in store.plan():
        row = store.segment_row(key)
        pieces = store.db.execute("SELECT 1 FROM pieces WHERE parent = ? LIMIT 1", (key,)).fetchone()
        # a segment said in pieces has their seeds, not its own: no word times for it
        if key not in known and row is not None and not pieces:
            keys[key] = row
    if not keys:
        return known
    voice = store.get_meta("voice")
    options = json.loads(store.get_meta("voice_options", "{}"))
    supervisor = Supervisor({"voice": voice, "threads": 1, "options": options, "task": "words"},
                            WorkerPolicy(retries=0), log_path)
    try:
        for key, row in keys.items():
            try:
                payload, _, _ = supervisor.synthesize(row["text"], row["seed"], row.get("lang"))
            except VoiceLoadFailed as error:
                raise VoiceCannotTimeWords(str(error)) from None
            except SegmentFailed:
                continue  # this segment's sentence stays at sentence level
            answer = json.loads(payload)
            store.record_word_times(key, answer.get("samples"), answer.get("words") or [])
            known[key] = (answer.get("samples"), answer.get("words") or [])
    finally:
        supervisor.close()
    return known


def spoken_words(cues: list[Cue], keys: dict[tuple[int, int], str], texts: dict[str, str],
                 times: dict[str, tuple[int | None, list]]) -> list[tuple[str, int, int]] | None:
    """(word, first sample, end sample) on the book's timeline of what the cues' segments say,
    in order; None if a segment has no word times or they are not for its stored audio."""
    out = []
    for cue in cues:
        for index, start, end in cue.segments:
            key = keys.get((cue.chapter, index))
            samples, words = times.get(key, (None, None))
            if key is None or samples != end - start or not words:
                return None
            text = texts[key]
            for a, b, first, last in words:
                out.append((plain(text[a:b]), start + first, start + last))
    return out


def _letters(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def written_word_begins(text: str, spoken: list[tuple[str, int, int]]) -> list[tuple[int, int, int]]:
    """(first char, end char, first sample) of each group of the written `text`'s words that has
    a time of its own, in order; the first group starts at the text's first word."""
    written = [(m.start(), m.end()) for m in WRITTEN_WORD.finditer(text) if _letters(m.group())]
    said = [w for w in spoken if _letters(w[0])]
    if not written or not said:
        return []
    a_keys = [_letters(text[a:b]) for a, b in written]
    b_keys = [_letters(w[0]) for w in said]
    groups: list[list] = []  # [first written, end written, first sample or None]
    i = j = 0
    for block in difflib.SequenceMatcher(None, a_keys, b_keys, autojunk=False).get_matching_blocks():
        if block.a > i:  # written words between pairs: they go with the spoken words there
            groups.append([i, block.a, said[j][1] if block.b > j else None])
        for k in range(block.size):
            groups.append([block.a + k, block.a + k + 1, said[block.b + k][1]])
        i, j = block.a + block.size, block.b + block.size
    merged: list[list] = []
    for group in groups:
        if merged and (group[2] is None or group[2] <= merged[-1][2]):
            merged[-1][1] = group[1]  # no time of its own: part of the word before
        elif not merged and group[2] is None:
            merged.append([group[0], group[1], None])
        else:
            if merged and merged[-1][2] is None:
                group[0] = merged.pop()[0]
            merged.append(group)
    return [(written[g[0]][0], written[g[1] - 1][1], g[2]) for g in merged if g[2] is not None]
