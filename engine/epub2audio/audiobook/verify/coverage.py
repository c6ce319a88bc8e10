"""Text coverage: the characters planned for reading against the book's chapters, with every
skip listed with its reason."""

from __future__ import annotations

import difflib

from .job import _Job
from .report import Problem, SkippedText, _quote
from .words import NUMBER_READING_WORDS, _alnum, normalize_words, spoken_text


# Text coverage: a run of at least this many book words missing from the plan is a drop.
DROP_MIN_WORDS = 1


def _check_coverage(job: _Job, rows, skipped, problems, notes) -> float | None:
    """Coverage = the share of the book chapter's letters and digits that the plan accounts for
    (word by word, after the same normalisation as the WER: the segmenter's normaliser may spell
    "1851" as "eighteen fifty-one", which is a reading of it, not a loss)."""
    book = job.book
    if book is None:
        return None
    for s in book.skipped:
        skipped.append(SkippedText(s.title, s.reason))
    selected = {ci for ci, _t in job.chapters}
    for ci, chapter in enumerate(book.chapters):
        if ci not in selected:
            skipped.append(SkippedText(chapter.title, "chapter not selected (--chapters)",
                                       sum(_alnum(p) for p in chapter.paragraphs)))
    book_total = sum(_alnum(p) for c in book.chapters for p in c.paragraphs)
    read_total = 0
    for row, (ci, _t) in zip(rows, job.chapters):
        if ci >= len(book.chapters):
            problems.append(Problem("coverage", f"the book has no chapter {ci + 1} any more (it changed since "
                                                "the conversion)", row.number))
            continue
        chapter = book.chapters[ci]
        planned = [spoken_text(s.text) for s in job.segments.get(ci, [])]
        row.book_characters = sum(_alnum(p) for p in chapter.paragraphs)
        lost = 0
        for kind, excerpt, n in _text_drops(chapter.paragraphs, planned):
            if kind == "dropped":
                lost += n
                skipped.append(SkippedText(chapter.title, f"dropped by the segmenter: {excerpt}", n))
                problems.append(Problem("coverage", f"{n} letters of the book are not read: {excerpt}", row.number))
            else:
                problems.append(Problem("coverage", f"read text that is not in the book's chapter: {excerpt} "
                                                    "(the book changed since the conversion?)", row.number))
        row.read_characters = max(0, row.book_characters - lost)
        read_total += row.read_characters
        row.coverage = round(row.read_characters / row.book_characters, 4) if row.book_characters else 1.0
    return round(read_total / book_total, 4) if book_total else None


def _is_number_reading(words: list[str]) -> bool:
    """True for a run of number words and range joiners: the narrator's fuller reading of a
    numeral ("367-77" is read "three hundred and sixty-seven to three hundred and seventy-seven",
    where the neutral reading has no "to three hundred and")."""
    return all(w in NUMBER_READING_WORDS for w in words)


def _inside_read_numeral(book_words: list[tuple[str, list[str]]], owner: list[int], i1: int, i2: int) -> bool:
    """True when the normalised words a[i1:i2] lie strictly inside one numeral's words, with words
    of that numeral on both sides: the plan read the numeral in another style ("585 B.C." is read as
    a year, "five eighty-five", where the neutral reading is "five hundred and eighty-five"). A
    numeral left out whole, or cut short, is still a drop."""
    if i1 == 0 or i2 >= len(owner):
        return False
    numeral = owner[i1 - 1]
    return (owner[i2] == numeral and all(o == numeral for o in owner[i1:i2])
            and any(ch.isdigit() for ch in book_words[numeral][0]))


def _text_drops(paragraphs: list[str], planned: list[str]) -> list[tuple[str, str, int]]:
    """Runs of the book's words that the plan does not read ("dropped"), and runs of words the plan
    reads that the book does not have ("added"); a word replaced by its reading (a numeral by its
    words, "Dr." by "Doctor") is neither."""
    book_words = [(w, normalize_words(w)) for w in " ".join(paragraphs).split()]
    book_words = [(w, k) for w, k in book_words if k]
    read = normalize_words(" ".join(planned))
    a = [k for _w, ks in book_words for k in ks]
    owner = [i for i, (_w, ks) in enumerate(book_words) for _k in ks]  # normalised word → book word
    if a == read:
        return []
    found = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, read, autojunk=False).get_opcodes():
        book_run, read_run = i2 - i1, j2 - j1
        if tag == "delete" or (tag == "replace" and book_run >= 4 and read_run * 3 < book_run):
            if _inside_read_numeral(book_words, owner, i1, i2) and _is_number_reading(read[j1:j2]):
                continue
            words = [book_words[i][0] for i in sorted(set(owner[i1:i2]))]
            letters = sum(_alnum(w) for w in a[i1:i2]) - sum(_alnum(w) for w in read[j1:j2])
            found.append(("dropped", _quote(" ".join(words), 60), letters))
        elif tag == "insert" and read_run >= 4 and not _is_number_reading(read[j1:j2]):
            found.append(("added", _quote(" ".join(read[j1:j2]), 60), sum(_alnum(w) for w in read[j1:j2])))
    return found
