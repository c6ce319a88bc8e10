"""Run the English normaliser over real books and count misreadings a listener would notice.

    PYTHONPATH=engine python bench/normalize_corpus.py tests/corpus/*.epub

Prints, per suspicious pattern, how often it occurs in the spoken text and a few examples, and the
time the normaliser took. Not a test: the books live outside the repository.

    PYTHONPATH=engine python bench/normalize_corpus.py --spoken 40 BOOK.epub

Prints the text that reaches the voice for any book, in any language: the first 40 segments of its
first chapter as the job plans them (titles, pronunciations, each passage normalised by its own
language's rules), one a line, with the passage's language where it is not the book's; then how
many segments of the whole book still hold a digit.
"""

from __future__ import annotations

import re
import sys
import time

from epub2audio.book.epub import load_book
from epub2audio.book.normalize import normalize
from epub2audio.book.segment import segment_chapter
from epub2audio.render import spoken_chapter

# The pronoun "I" read as the numeral "one", and other readings no narrator would give.
SUSPECT = {
    "pronoun I read as one": re.compile(
        r"\b(?:[Bb]ook|[Cc]hapter|[Pp]art|[Qq]uestion|[Ss]cene|[Aa]ct|[Vv]olume|[Ll]etter|[Cc]ase|[Rr]ule|"
        r"[Cc]lass|[Tt]ype|[Nn]umber|[Ss]ection|[Vv]erse)\s+one\s+(?:have|am|was|had|think|know|said|"
        r"will|would|could|should|shall|can|must|may|might|did|do|never|also|just|felt|saw|see|"
        r"thought|went|got|heard|found|asked|mean|believe|suppose|remember|read|wrote|tell|told|"
        r"hope|wish|fear|dare|began|cannot|can't|ever|still|only|really|once|took|made|came|"
        r"knew|looked|wanted|want)\b"),
    "one + pronoun verb": re.compile(r"\b(?!(?:no|any|some|every|that|this|which|each|the|a|little|one)\b)"
                                     r"\w+ one (?:have|am|was|had|think|know)\b", re.IGNORECASE),
    "letter read as a numeral": re.compile(r"\b(?:Appendix|Table|Figure|Plate|Section|Class|Type) "
                                           r"(?:one hundred|five hundred|fifty|one thousand)\b"),
    "digit left over": re.compile(r"\d"),
    "symbol left over": re.compile(r"[+=×±§−%°£$€]"),
}
# The pronoun: every "I" standing alone in running text must still be there after normalising.
PRONOUN = re.compile(r"(?<![\w.’'])I(?![\w’'.]|\.\w)")


def main(paths: list[str]) -> None:
    counts = {name: 0 for name in SUSPECT} | {"pronoun I lost": 0}
    examples: dict[str, list[str]] = {name: [] for name in counts}
    chars, seconds = 0, 0.0
    for path in paths:
        try:
            book = load_book(path)
        except Exception as error:  # a broken corpus file: say so and go on
            print(f"skipped {path}: {error}")
            continue
        if not (book.language or "en").lower().startswith("en"):
            continue
        for chapter in book.chapters:
            for i, paragraph in enumerate(chapter.paragraphs):
                start = time.perf_counter()
                spoken = normalize(paragraph, book.language, heading=chapter.kind(i) == "heading")
                seconds += time.perf_counter() - start
                chars += len(paragraph)
                lost = len(PRONOUN.findall(paragraph)) - len(PRONOUN.findall(spoken))
                if lost > 0 and chapter.kind(i) != "heading":
                    counts["pronoun I lost"] += lost
                    if len(examples["pronoun I lost"]) < 8:
                        examples["pronoun I lost"].append(f"{paragraph[:70]} → {spoken[:70]}")
                for name, pattern in SUSPECT.items():
                    for m in pattern.finditer(spoken):
                        counts[name] += 1
                        if len(examples[name]) < 8:
                            examples[name].append(spoken[max(0, m.start() - 40):m.end() + 30])
    for name in counts:
        print(f"{counts[name]:6d}  {name}")
        for e in examples[name]:
            print(f"        …{e}…")
    print(f"{chars} characters normalised in {seconds:.2f} s")


def spoken(count: int, paths: list[str]) -> None:
    for path in paths:
        book = load_book(path)
        print(f"# {book.title} ({book.language or 'no dc:language'}): chapter 1, {book.chapters[0].title}")
        planned = [s for i, c in enumerate(book.chapters) for s in segment_chapter(i, spoken_chapter(book, c))]
        for s in [s for s in planned if s.chapter == 0][:count]:
            print(s.text if s.lang is None else f"[{s.lang}] {s.text}")
        with_digits = sum(1 for s in planned if re.search(r"\d", s.text))
        print(f"# {with_digits} of {len(planned)} segments of the book still hold a digit")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--spoken"]:
        spoken(int(sys.argv[2]), sys.argv[3:])
    else:
        main(sys.argv[1:])
