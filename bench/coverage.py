"""How much of each book's body text is read: chapters, characters read, and every skipped part.

    PYTHONPATH=engine .venv/bin/python bench/coverage.py [--parts] [--half odd|even] [BOOK.epub | FOLDER ...]

--parts prints, instead, the confusion table against tests/corpus_labels.py (see `confusion`): per
book and in total, the characters of its parts read as expected (read and meant to be read, or
skipped and meant to be skipped), leaked (read, but labelled skip), lost (not read, but labelled
read) and either, and leaked as a share of what is read. --half picks the alphabetically odd
(1st, 3rd, ...) or even books, so a rule written against one half is measured on the other.

Default: every book in tests/corpus. For each book one line: the chapter count, the characters
read out of the characters of linear body text, the read share, and then one line per skipped
part with its size, its evidence and the rule that skipped it. Then the mean and the worst book.

The denominator is counted here, without our reading rules, so that a rule that drops text cannot
also shrink what it is measured against: the zip, the OPF and the spine are read with zipfile and
lxml alone, and for every linear spine document all text under <body> is taken, <script> and
<style> left out (and ruby readings, <rt>/<rp>: the base text is read once), whitespace collapsed to single spaces. The numerator is the chapters'
paragraphs joined by one space, the same shape, so a paragraph break weighs what a pretty-printed
line break in the source weighs.

"share" is read / body. "share-s" leaves the parts skipped on structural evidence (epub:type, ARIA
role, landmarks, guide, nav document, non-linear spine items, Gutenberg's START/END markers) out of
the denominator: issue 20 asks that the worst book reach 98 % by that measure. "unaccounted" is
body text neither read nor counted by any skip (Skipped.chars); until every skip carries its size
it is simply body - read. A book with no body text at all has no share and is left out of the mean.
"""

from __future__ import annotations

import argparse
import bisect
from contextlib import contextmanager
import re
import posixpath
import sys
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import numpy as np
from lxml import etree, html

from epub2audio.book.epub import load_book
from epub2audio.book.text import CJK
from epub2audio.errors import InputError

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus"
# A ruby annotation (<rt>, with its <rp> brackets) is read once, as its base text.
NOT_SPOKEN = {"script", "style", "rt", "rp"}


def _local(tag) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else ""


def _parse(data: bytes):
    try:
        return etree.fromstring(data, etree.XMLParser(recover=True, resolve_entities=False, huge_tree=True))
    except etree.XMLSyntaxError:
        return html.document_fromstring(data)


def _body_text(root) -> str:
    body = next((el for el in root.iter() if _local(el.tag) == "body"), None)
    if body is None:
        return ""
    parts: list[str] = []

    def walk(el):
        if _local(el.tag) in NOT_SPOKEN:
            if el.tail and el is not body:
                parts.append(el.tail)
            return
        if isinstance(el.tag, str) and el.text:
            parts.append(el.text)
        for child in el:
            walk(child)
        if el is not body and el.tail:
            parts.append(el.tail)

    walk(body)
    # A line wrap between two CJK characters is not text (scripts written without spaces): the
    # reader drops it, and so does this count.
    text = re.sub(f"(?<=[{CJK}])[ \t]*[\r\n][ \t\r\n]*(?=[{CJK}])", "", "".join(parts))
    return " ".join(text.split())


def linear_body_chars(path: Path) -> int:
    """Characters of text in the <body> of every linear spine document (see the module docstring)."""
    with zipfile.ZipFile(path) as zf:
        container = etree.fromstring(zf.read("META-INF/container.xml"))
        opf_path = next(el.get("full-path") for el in container.iter() if _local(el.tag) == "rootfile")
        opf = etree.fromstring(zf.read(opf_path))
        base = posixpath.dirname(opf_path)
        manifest = {el.get("id"): el.get("href") for el in opf.iter() if _local(el.tag) == "item"}
        total = 0
        for ref in (el for el in opf.iter() if _local(el.tag) == "itemref"):
            if ref.get("linear", "yes").strip().lower() == "no" or ref.get("idref") not in manifest:
                continue
            name = posixpath.normpath(posixpath.join(base, unquote(manifest[ref.get("idref")].split("#")[0])))
            total += len(_body_text(_parse(zf.read(name))))
        return total


@dataclass
class Coverage:
    name: str
    chapters: int
    read: int
    body: int
    skipped: list = field(default_factory=list)

    @property
    def structural(self) -> int:
        return sum(getattr(s, "chars", 0) for s in self.skipped if getattr(s, "evidence", "?") == "structure")

    @property
    def counted_skips(self) -> int:
        return sum(getattr(s, "chars", 0) for s in self.skipped)

    @property
    def share(self) -> float:
        return self.read / self.body if self.body else 0.0

    @property
    def share_s(self) -> float:
        rest = self.body - self.structural
        return self.read / rest if rest > 0 else 0.0


def measure(path: Path) -> Coverage:
    book = load_book(path)
    read = sum(len(" ".join(c.paragraphs)) for c in book.chapters)
    return Coverage(path.name, len(book.chapters), read, linear_body_chars(path), list(book.skipped))


SHINGLE = 12  # characters of letters and digits: long enough that a match is the same text
# Where a run of a part is also found elsewhere in the book (a contents line is a chapter's heading,
# an imprint names the book), a read copy counts for it only if it lies where the part's own sure
# runs put it: within ANCHOR_REACH letters of one of them, at the place that offset predicts, give
# or take SLACK letters and one in DRIFT of the distance (the reader adds titles, "Image: …" notes
# and notes read inline between them).
ANCHOR_REACH = 4000
SLACK = 48
DRIFT = 8


# A gap this short (letters) between read runs is judged word by word: a heading between a note read
# inline and the text, a two-word note between back-links, are shorter than a run.
WORD_GAP = 40

# What the reader says before a note it reads (book/notes.py: "Note: …", "Note 3: …" at a chapter's
# end): its words, not the book's (Matcher.read_units).
NOTE_LABEL = re.compile(r"^Note(?: \d+)?: ")


# Joins the paragraphs read, so that runs across two of them are known (Matcher).
PARAGRAPH = "\x00"


def _skeleton(text: str) -> str:
    # Letters only: digits are note markers, line and page numbers far more often than text, and
    # a dropped marker must not make the words around it count as lost.
    letters = "".join(ch for ch in text.lower() if ch.isalpha())
    return letters or "".join(ch for ch in text if ch.isdigit())


def _words(text: str) -> list[str]:
    """Its runs of letters, lowercased: the skeleton, cut at everything else."""
    return "".join(ch if ch.isalpha() else " " for ch in text.lower()).split()


def _starts(words: list[str]) -> list[int]:
    """Where each word starts in the skeleton they make."""
    starts, at = [], 0
    for word in words:
        starts.append(at)
        at += len(word)
    return starts


def _run_hashes(skeleton: str) -> np.ndarray:
    """A 64-bit hash of each SHINGLE-letter run of the skeleton, by position (none if shorter)."""
    codes = np.frombuffer(skeleton.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    count = len(codes) - SHINGLE + 1
    hashes = np.zeros(max(0, count), np.uint64)
    if count > 0:
        for k in range(SHINGLE):  # (wraps modulo 2**64, as a polynomial hash does)
            hashes = hashes * RUN_BASE + codes[k:k + count]
    return hashes


RUN_BASE = np.uint64(0x100000001B3)


class _Counts:
    """How many times each hash is among `hashes`, and the position given for its first copy."""

    def __init__(self, hashes: np.ndarray, positions: np.ndarray | None = None):
        self.keys, first, self.counts = np.unique(hashes, return_index=True, return_counts=True)
        self.first = positions[first] if positions is not None else first

    def get(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(count, first position) for each of `hashes`; 0 and -1 where it is not among them."""
        if not len(self.keys):
            return np.zeros(len(hashes), np.int64), np.full(len(hashes), -1)
        at = np.searchsorted(self.keys, hashes)
        found = at < len(self.keys)
        found[found] = self.keys[at[found]] == hashes[found]
        at = np.where(found, at, 0)
        return np.where(found, self.counts[at], 0), np.where(found, self.first[at], -1)


class Matcher:
    """Which letters of each part of a book are in what was read, one read copy for one copy in the
    book. A 12-letter run of a part is read where the read text holds it at least as often as the
    book's parts do (every copy read; a run found once on both sides is an anchor that places its
    part in the read text). A run the book has more often than the reader read it is read where an
    anchor within reach places it, or where the copies read are as many as the copies in parts
    labelled to be read (a read copy counts for those first: a heading that is also a contents
    line, with notes read inline around it, is still read), and never otherwise: a skipped contents page whose lines are the chapters'
    headings is not read because the headings are, nor an imprint because it names the book. A gap
    shorter than WORD_GAP is judged by its words, by the same two rules; between read runs of its
    part, a word the reader says anywhere is read there (a note read inline is placed by no anchor).
    In text labelled skip (a part, or a span `apart` from its part) a read copy is placed only where
    the reader said it more often than the text labelled read holds it (_spare), and words are judged
    alone only in a part too short for a run."""

    def __init__(self, read_text: str, part_texts: list[str], skipped: frozenset[int] = frozenset(),
                 apart: dict[int, list[tuple[int, int, bool]]] | None = None):
        paragraphs = [_skeleton(p) for p in read_text.split(PARAGRAPH)] if read_text else []
        self.read = "".join(paragraphs)
        # Runs across two paragraphs read (the end of one poem and the title of the next) may only
        # be placed by an anchor, never counted: a contents page lists titles in the same order.
        across = bytearray(len(self.read) + 1)
        at = 0
        for p in paragraphs[:-1]:
            at += len(p)
            across[max(0, at - SHINGLE + 1):at] = b"\x01" * (at - max(0, at - SHINGLE + 1))
        self.parts = [_skeleton(t) for t in part_texts]
        # (a part with no letters is matched by its digits, with no words)
        self.words = [_words(t) for t in part_texts]
        self.read_words = Counter(_words(read_text))
        # Paragraphs read that are too short for a run, less the reader's label ("Note: L. II, c.
        # x.", a note read inline), by their words: placed as a whole where a gap of a part is made
        # of such paragraphs (_tiled).
        units = [NOTE_LABEL.sub("", p, count=1) for p in read_text.split(PARAGRAPH)] if read_text else []
        self.read_units = Counter(tuple(_words(p)) for p in units if 0 < len(_skeleton(p)) < SHINGLE)
        self.book_words = Counter(w for words in self.words for w in words)
        # Copies in the parts labelled skip (`skipped`, by index): a read copy that no anchor places
        # counts for the parts meant to be read first.
        self.skipped = skipped
        # Spans of a part's letters classed apart from it: (start, end, labelled skip).
        self.apart = apart or {}
        self.skip_letters = [self._skip_mask(i, len(sk)) for i, sk in enumerate(self.parts)]
        self.skip_words = Counter(w for i, words in enumerate(self.words)
                                  for w, at in zip(words, _starts(words)) if self.skip_at(i, at))
        # Runs as 64-bit hashes (_run_hashes), counted with numpy: a book is millions of runs.
        read_hashes = _run_hashes(self.read)
        counted = np.frombuffer(bytes(across[:len(read_hashes)]), dtype=np.uint8) == 0
        self.read_count = _Counts(read_hashes[counted], np.flatnonzero(counted))
        self.read_across = _Counts(read_hashes[~counted])  # runs across two paragraphs: placed, never counted
        self.part_hashes = [_run_hashes(sk) for sk in self.parts]
        self.skip_masks = [letters[:len(h)] for letters, h in zip(self.skip_letters, self.part_hashes)]
        every = np.concatenate(self.part_hashes) if self.parts else np.zeros(0, np.uint64)
        self.book_count = _Counts(every)
        self.skip_count = _Counts(every[np.concatenate(self.skip_masks)] if self.parts else every)
        # Anchors over the parts laid end to end: (position there, position in the read text).
        self.anchors: list[tuple[int, int]] = []
        self.offsets: list[int] = []
        offset = 0
        for sk, hashes in zip(self.parts, self.part_hashes):
            self.offsets.append(offset)
            have, first = self.read_count.get(hashes)
            sure = np.flatnonzero((have == 1) & (self.book_count.get(hashes)[0] == 1))
            self.anchors += [(offset + int(i), int(r)) for i, r in zip(sure, first[sure])]
            offset += len(sk) + SHINGLE  # a gap: no run spans two parts
        self.anchor_keys = [g for g, _ in self.anchors]

    def _skip_mask(self, index: int, size: int) -> np.ndarray:
        """For each of the `size` letters of part `index`: whether it is in text labelled skip."""
        mask = np.full(size, index in self.skipped)
        for start, end, skip in self.apart.get(index, ()):
            mask[start:end] = skip
        return mask

    def skip_at(self, index: int, at: int) -> bool:
        """Whether the letter `at` of part `index` is in text labelled skip."""
        return bool(self.skip_letters[index][at])

    def _spare(self, have: int, h, counter: dict, book: dict) -> bool:
        """Whether the reader said a run (or word) more often than the text labelled read holds
        it: a read copy counts for that text first, so only a spare one may be placed in text
        labelled skip (a section's heading read once, right after its parent's list of links to
        its sections, is the heading's, not the list's)."""
        return have > book.get(h, 0) - counter.get(h, 0)

    def _placed(self, run: str, at: int) -> bool:
        """Whether the read text holds `run` where an anchor within reach of `at` (a position over
        the parts laid end to end) puts it."""
        k = bisect.bisect_left(self.anchor_keys, at)
        for j in (k - 1, k):
            if 0 <= j < len(self.anchors):
                g, r = self.anchors[j]
                distance = abs(at - g)
                if distance > ANCHOR_REACH:
                    continue
                expected = r + (at - g)
                slack = SLACK + distance // DRIFT
                end = expected + slack + len(run)
                if end > 0 and self.read.find(run, max(0, expected - slack), end) >= 0:
                    return True
        return False

    def covered(self, index: int, strict: list[tuple[int, int]] = ()) -> bytearray:
        """Per letter of part `index`'s skeleton: 1 where it is read. Words inside the `strict` spans
        are never read by the weaker rule for a gap between read runs (a back-link between two
        notes is not read because the word "return" is read elsewhere)."""
        sk, base = self.parts[index], self.offsets[index]
        covered = bytearray(len(sk))
        if not sk or not self.read:
            return covered
        hashes, skip = self.part_hashes[index], self.skip_masks[index]
        have = self.read_count.get(hashes)[0]
        across = self.read_across.get(hashes)[0]
        copies = self.book_count.get(hashes)[0]
        skipped = self.skip_count.get(hashes)[0]
        meant = copies - np.where(skip, 0, skipped)
        # a read copy placed in text labelled skip only where it is spare after the text labelled read
        spare = ~skip | (have + across > copies - skipped)
        read = (have > 0) & (have >= meant)
        for i in np.flatnonzero(~read & ((have > 0) | (across > 0)) & spare):
            read[i] = self._placed(sk[i:i + SHINGLE], base + int(i))
        starts = np.flatnonzero(read)
        if len(starts):
            edges = np.zeros(len(sk) + 1, np.int32)
            np.add.at(edges, starts, 1)
            np.add.at(edges, starts + SHINGLE, -1)
            covered[:] = (np.cumsum(edges[:-1]) > 0).astype(np.uint8).tobytes()
        self._tiled(index, covered)
        start = 0
        for word in self.words[index]:
            end = start + len(word)
            if 0 in covered[start:end]:
                gap = self._short_gap(covered, start, end, strict)
                have = self.read_words.get(word, 0)
                loose = gap == "inside" and not any(a < end and start < b for a, b in strict)
                skip = self.skip_at(index, start)
                meant = self.book_words[word] - (0 if skip else self.skip_words[word])
                spare = not skip or self._spare(have, word, self.skip_words, self.book_words)
                # (Not inside text labelled skip: "linear" is said a thousand times, one is always
                # near, and a leak is found by its runs. A skipped part too short for a run is
                # judged by its words.)
                if skip and gap != "edge":
                    gap = None
                if gap and have and (loose or have >= meant or (spare and self._placed(word, base + start))):
                    covered[start:end] = b"\x01" * len(word)
            start = end
        return covered

    def _tiled(self, index: int, covered: bytearray) -> None:
        """Mark read each gap of part `index`, outside text labelled skip, whose words are, end to
        end, paragraphs read too short for a run, each used no more often than it was read: a row
        of one-line notes ("L. II, c. x. Ib. Ib. L. V, c. xi."), each read inline where it is
        referenced, is longer than WORD_GAP, and no anchor places any of them."""
        if not self.read_units:
            return
        words, longest = self.words[index], max(map(len, self.read_units))
        starts = _starts(words)
        unread = np.frombuffer(bytes(covered), np.uint8) == 0
        if not unread.any():
            return
        # Runs of unread letters (numpy: most parts have none or a few), then their whole words.
        edges = np.flatnonzero(np.diff(np.concatenate(([0], unread.view(np.int8), [0]))))
        for a, b in zip(edges[::2].tolist(), edges[1::2].tolist()):
            k = bisect.bisect_left(starts, a)  # the first word starting inside [a, b)
            while k < len(words) and starts[k] + len(words[k]) <= b:
                if self.skip_at(index, starts[k]):
                    k += 1
                    continue
                end = k + 1
                while end < len(words) and starts[end] + len(words[end]) <= b and not self.skip_at(index, starts[end]):
                    end += 1
                if self._tiling(tuple(words[k:end]), longest):
                    lo, hi = starts[k], starts[end - 1] + len(words[end - 1])
                    covered[lo:hi] = b"\x01" * (hi - lo)
                k = end

    def _tiling(self, gap: tuple[str, ...], longest: int) -> bool:
        """Whether `gap` is read units end to end, none used more often than it was read."""
        reachable: dict[int, Counter] = {0: Counter()}  # words tiled so far → units used
        for at in range(len(gap)):
            if at not in reachable:
                continue
            used = reachable[at]
            for size in range(1, min(longest, len(gap) - at) + 1):
                unit = gap[at:at + size]
                if self.read_units.get(unit, 0) > used[unit] and at + size not in reachable:
                    reachable[at + size] = used + Counter([unit])
        return len(gap) in reachable

    @staticmethod
    def _short_gap(covered: bytearray, start: int, end: int, strict=()) -> str | None:
        """Whether the unread letters around [start, end) are fewer than WORD_GAP, not counting
        those of `strict` spans (text labelled apart, such as back-links): "inside" where read
        letters of the part stand beside them (a short note between notes read inline, a heading
        before a note read inline), "edge" where the part is that short and unread; None for a
        longer gap."""
        def apart(i: int) -> bool:
            return any(a <= i < b for a, b in strict)

        left, size = start, end - start
        while left > 0 and not covered[left - 1] and size < WORD_GAP:
            left -= 1
            size += not apart(left)
        right = end
        while right < len(covered) and not covered[right] and size < WORD_GAP:
            size += not apart(right)
            right += 1
        if size >= WORD_GAP:
            return None
        return "inside" if left > 0 or right < len(covered) else "edge"

    def fraction(self, index: int) -> float:
        """The share of part `index`'s letters that are read."""
        covered = self.covered(index)
        return sum(covered) / len(covered) if covered else 0.0


@dataclass
class Confusion:
    name: str
    right: int = 0  # read and meant to be read, or not read and meant to be skipped
    leaked: int = 0  # read, labelled skip
    lost: int = 0  # not read, labelled read
    either: int = 0
    read: int = 0  # characters of parts read (any label)
    rows: list = field(default_factory=list)  # (part, class, characters read, characters)

    @property
    def leaked_share(self) -> float:
        return self.leaked / self.read if self.read else 0.0

    def add(self, other: "Confusion") -> None:
        for k in ("right", "leaked", "lost", "either", "read"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


# A formula as the reader says it, bracketed while the book is read for the table (formulas_marked):
# the parts' prose leaves out MathML's tokens (corpus_parts.py), so what is read leaves out the words
# the reader says for them. Prose is matched with prose: "the transpose of I sub n Theorem TMSM"
# must not meet a list's "…addition Theorem TMSM" by chance.
FORMULA_OPEN, FORMULA_CLOSE = "\ue024", "\ue025"
SPOKEN_FORMULA = re.compile(f"{FORMULA_OPEN}[^{FORMULA_CLOSE}]*{FORMULA_CLOSE}")


@contextmanager
def formulas_marked():
    """While in it, the reader's spoken formulas come bracketed (SPOKEN_FORMULA)."""
    from epub2audio.book import mathml
    speak = mathml.speak

    def marked(*args, **kwargs):
        spoken = speak(*args, **kwargs)
        return f"{FORMULA_OPEN}{spoken}{FORMULA_CLOSE}" if spoken else spoken

    mathml.speak = marked
    try:
        yield
    finally:
        mathml.speak = speak


def confusion(path: Path, book=None) -> Confusion:
    """Each part of the book (bench/corpus_parts.py) against its label (tests/corpus_labels.py), by
    characters: a part counts as read in the share of its letters that `Matcher` finds in the
    chapters read (one read copy for one copy in the book, so a contents page is not read because
    the headings it repeats are). Strings the labels class on their own (`within`: a back-link's
    "( return )" inside a notes section) count in their own class. The book is read with --notes
    inline (unless given), so that notes a listener chose not to hear are not counted lost: where
    they are read does not matter here, only whether."""
    expected_class, within, parts = _labels_and_parts()
    result = Confusion(path.name)
    try:
        if book is None:
            with formulas_marked():
                book = load_book(path, notes="inline")
        read_text = SPOKEN_FORMULA.sub(" ", PARAGRAPH.join(p for c in book.chapters for p in c.paragraphs))
    except InputError:
        read_text = ""
    labels = within(path.name)
    found = parts(path, marked=tuple(k[len("class:"):] for k in labels if k.startswith("class:")))
    texts = [p.prose if _skeleton(p.prose) else p.text for p in found]
    # The strings the labels class on their own, as spans of each part's letters (see `within`).
    inside = [within_spans(text, labels) for text in texts]
    skipped = frozenset(i for i, p in enumerate(found) if expected_class(path.name, p).startswith("skip"))
    matcher = Matcher(read_text, texts, skipped, {i: [(a, b, own.startswith("skip")) for a, b, _, own in spans]
                                                  for i, spans in enumerate(inside) if spans})
    rows: dict[tuple, list] = {}

    def count(part, cls, got, chars, label=None):
        row = rows.setdefault((label or part.label, cls), [part if label is None else Within(label), 0, 0])
        row[1] += got
        row[2] += chars
        result.read += got
        if cls == "either":
            result.either += chars
        elif cls == "read":
            result.right += got
            result.lost += chars - got
        else:
            result.leaked += got
            result.right += chars - got

    for index, part in enumerate(found):
        cls = expected_class(path.name, part)
        covered = matcher.covered(index, strict=[(a, b) for a, b, _, _ in inside[index]])
        letters, chars = len(covered), part.chars
        for a, b, text, own in inside[index]:
            count(part, own, round(len(text) * sum(covered[a:b]) / (b - a)), len(text), label=text)
            chars -= len(text)
            letters -= b - a
            covered[a:b] = b""  # (the rest of the part, below)
        if chars > 0:
            got = round(chars * sum(covered) / letters) if letters else 0
            count(part, cls, got, chars)
    result.rows = [(part, cls, got, chars) for (_, cls), (part, got, chars) in rows.items()]
    return result


@dataclass
class Within:
    """A row of the table for a string the labels class on its own."""
    label: str


def _labels_and_parts():
    """tests/corpus_labels.py's expected_class and within, and bench/corpus_parts.py's parts (this
    file is also loaded by path from the tests, with neither folder on the path)."""
    sys.path[:0] = [str(Path(__file__).resolve().parent), str(CORPUS.parent)]
    try:
        from corpus_labels import expected_class, within
        from corpus_parts import parts
    finally:
        del sys.path[:2]
    return expected_class, within, parts


def within_spans(text: str, strings: dict[str, str]) -> list[tuple[int, int, str, str]]:
    """(start, end, the string, its class) of each occurrence in `text` of a string the labels class
    on its own, and of each element's text marked by its class ("class:related-links"), as positions in the text's skeleton, last first (so that cutting them out in turn
    leaves the earlier ones where they are)."""
    from corpus_parts import MARK_BASE, MARK_CLOSE, MARK_OPEN  # (loaded by _labels_and_parts)

    spans = []
    classes = [cls for key, cls in strings.items() if key.startswith("class:")]
    for m in re.finditer(f"{MARK_OPEN}(.)([^{MARK_CLOSE}]*){MARK_CLOSE}", text):
        a = len(_skeleton_letters(text[:m.start()]))
        inner = " ".join(m.group(2).split())
        spans.append((a, a + len(_skeleton_letters(inner)), inner, classes[ord(m.group(1)) - MARK_BASE]))
    for string, cls in strings.items():
        if string.startswith("class:"):
            continue
        for m in re.finditer(re.escape(" ".join(string.split())), text):
            a = len(_skeleton_letters(text[:m.start()]))
            spans.append((a, a + len(_skeleton_letters(m.group(0))), m.group(0), cls))
    kept: list[tuple[int, int, str, str]] = []
    for span in sorted(spans):
        if span[1] > span[0] and (not kept or span[0] >= kept[-1][1]):  # overlapping: the first wins
            kept.append(span)
    return kept[::-1]


def _skeleton_letters(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalpha())


def half(paths: list[Path], which: str | None) -> list[Path]:
    """The alphabetically odd (1st, 3rd, ...) or even books of the list; all of them for None."""
    ordered = sorted(paths, key=lambda p: p.name)
    return ordered if which is None else ordered[(0 if which == "odd" else 1)::2]


def print_confusion(paths: list[Path], verbose: bool = False) -> Confusion:
    total = Confusion("total")
    print(f"{'book':62} {'right':>9} {'leaked':>8} {'lost':>8} {'either':>8} {'leak%':>6}")
    for path in paths:
        if path.name.startswith("broken-"):
            continue
        c = confusion(path)
        total.add(c)
        print(f"{c.name[:62]:62} {c.right:9,d} {c.leaked:8,d} {c.lost:8,d} {c.either:8,d} {c.leaked_share:6.2%}")
        for part, cls, got, chars in c.rows:
            wrong = (cls == "read" and chars - got > 20) or (cls.startswith("skip") and got > 20)
            if verbose or wrong:
                print(f"    {'LOST' if cls == 'read' else 'LEAK' if cls != 'either' else '':4} {cls:24} "
                      f"{got:8,d}/{chars:<8,d} {part.label[:60]}")
    print(f"{'TOTAL':62} {total.right:9,d} {total.leaked:8,d} {total.lost:8,d} {total.either:8,d} "
          f"{total.leaked_share:6.2%}")
    return total


def books(args: list[str]) -> list[Path]:
    found: list[Path] = []
    for arg in args or [str(CORPUS)]:
        p = Path(arg)
        found += sorted(p.glob("*.epub")) if p.is_dir() else [p]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("books", nargs="*", help="EPUB files or folders (default: tests/corpus)")
    parser.add_argument("--parts", action="store_true", help="the confusion table against tests/corpus_labels.py")
    parser.add_argument("--half", choices=("odd", "even"), help="only the alphabetically odd or even books")
    parser.add_argument("--verbose", action="store_true", help="with --parts: every part, not only the wrong ones")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # ebooklib's future warnings
    if args.parts:
        print_confusion(half(books(args.books), args.half), args.verbose)
        return 0
    results: list[Coverage] = []
    print(f"{'book':62} {'ch':>4} {'read':>9} {'body':>9} {'share':>7} {'share-s':>7} {'unaccounted':>11}")
    for path in books(args.books):
        try:
            cov = measure(path)
        except InputError as exc:
            print(f"{path.name:62} not read: {exc}")
            continue
        if cov.body:
            results.append(cov)
            shares = f"{cov.share:7.1%} {cov.share_s:7.1%}"
        else:  # nothing to read (a comic): no share, and not the worst book
            shares = f"{'—':>7} {'—':>7}"
        print(f"{cov.name:62} {cov.chapters:4d} {cov.read:9,d} {cov.body:9,d} {shares} "
              f"{cov.body - cov.read - cov.counted_skips:11,d}")
        for s in cov.skipped:
            print(f"    skipped {getattr(s, 'chars', 0):9,d} chars  [{getattr(s, 'evidence', '?')}]  "
                  f"{s.reason}: {s.title}")
    if not results:
        return 1
    mean = sum(c.share for c in results) / len(results)
    mean_s = sum(c.share_s for c in results) / len(results)
    worst = min(results, key=lambda c: c.share)
    worst_s = min(results, key=lambda c: c.share_s)
    print(f"\n{len(results)} books with body text: mean share {mean:.1%}, mean share-s {mean_s:.1%}")
    print(f"worst share:   {worst.share:.1%}  {worst.name}")
    print(f"worst share-s: {worst_s.share_s:.1%}  {worst_s.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
