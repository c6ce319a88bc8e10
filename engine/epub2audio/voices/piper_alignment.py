"""From a Piper sentence's durations to when each word of the segment's text is said.

Piper's graph reports how many frames each phoneme id lasts (piper-tts 1.8's alignment output);
times the hop length that is samples, and the sentence's audio is exactly their sum. The ids are
BOS, then each phoneme's ids followed by the pad id, then EOS (piper's phonemes_to_ids), so each
phoneme's span is its ids' samples with the pad after it; a phoneme the model has no id for lasts
nothing.

Words: espeak-ng phonemises a whole sentence at once and its word breaks are not always the
text's ("for a" is one word, fɚɹə), so each word of the text is phonemised alone and those
phonemes are aligned, sound by sound (stress marks, spaces and punctuation left out), with the
sentence's (difflib's longest matching blocks). A word starts where its first matched sound
starts and ends where its last one ends; a word none of whose sounds matched gets the sounds left
between its neighbours, and where there are none it has no time of its own (the caller joins it
to its neighbour). This works the same in every language espeak speaks.
"""

from __future__ import annotations

import difflib
import re
import unicodedata

from ..book.lexicon import MARKUP

BOS, EOS, PAD = "^", "$", "_"
UNSOUNDED = {" ", "ˈ", "ˌ"}
# A word of a segment's text: a pronunciation markup block (⟦TEXT|ipa:…⟧, which may hold spaces)
# or a run of other non-space characters.
WORD = re.compile(MARKUP.pattern + r"|[^\s\u27e6]+")


def phoneme_spans(phonemes: list[str], ids: list[int], samples, id_map: dict) -> list[tuple[str, int, int]] | None:
    """(phoneme, first sample, end sample) of each phoneme of one sentence, from the samples each
    of its ids lasts; None if the ids are not the ones piper makes of these phonemes."""
    pad = list(id_map.get(PAD, []))
    at, position, spans = 0, 0, []

    def take(expected: list[int]) -> int | None:
        nonlocal at, position
        if ids[at:at + len(expected)] != expected:
            return None
        length = int(sum(int(s) for s in samples[at:at + len(expected)]))
        at += len(expected)
        start = position
        position += length
        return start

    if take(list(id_map.get(BOS, [])) + pad) is None:
        return None
    for phoneme in phonemes:
        if phoneme not in id_map:  # piper drops it: no sound, no time
            spans.append((phoneme, position, position))
            continue
        start = take(list(id_map[phoneme]) + pad)
        if start is None:
            return None
        spans.append((phoneme, start, position))
    if take(list(id_map.get(EOS, []))) is None or at != len(ids):
        return None
    return spans


def sounds(phonemes, id_map: dict) -> list[int]:
    """Indices of the phonemes that are sounds: known to the model, not stress, space or punctuation."""
    return [i for i, p in enumerate(phonemes)
            if p in id_map and p not in UNSOUNDED and unicodedata.category(p)[0] not in "PSZ"]


def word_times(text: str, stream: list[tuple[str, int, int]], phonemize, id_map: dict) -> list[list[int]]:
    """[first char, end char, first sample, end sample] of each word of `text` that has a time.
    stream: the segment's phonemes with their sample spans, sentence after sentence;
    phonemize(word) → the phonemes of one word said alone."""
    words = [(m.start(), m.end()) for m in WORD.finditer(text)]
    spoken: list[str] = []
    owner: list[int] = []
    for n, (a, b) in enumerate(words):
        alone = phonemize(text[a:b])
        for i in sounds(alone, id_map):
            spoken.append(alone[i])
            owner.append(n)
    said = sounds([p for p, _, _ in stream], id_map)
    heard = [stream[i][0] for i in said]
    matched: dict[int, list[int]] = {}
    matcher = difflib.SequenceMatcher(None, spoken, heard, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            matched.setdefault(owner[block.a + k], []).append(said[block.b + k])
    # A word none of whose sounds matched ("a" alone is ˈeɪ, in a sentence ə) gets the sounds
    # heard between its matched neighbours, if there are any (split evenly among such words).
    n = 0
    while n < len(words):
        if n in matched:
            n += 1
            continue
        last = n
        while last + 1 < len(words) and last + 1 not in matched:
            last += 1
        before = matched[n - 1][-1] if n > 0 else -1
        after = matched[last + 1][0] if last + 1 < len(words) else len(stream)
        gap = [i for i in said if before < i < after]
        run = last - n + 1
        for k in range(min(run, len(gap))):
            share = gap[k * len(gap) // min(run, len(gap)):(k + 1) * len(gap) // min(run, len(gap))]
            matched[n + k] = share
        n = last + 1
    out = []
    for n, (a, b) in enumerate(words):
        where = matched.get(n)
        if where:
            out.append([a, b, stream[where[0]][1], stream[where[-1]][2]])
    return out
