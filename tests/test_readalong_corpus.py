"""EPUBCheck reports 0 errors on the read-along book of every corpus book that converts.

Each book's shortest chapter of at least a few sentences and the shortest of its other chapters
(its only one, for a one-chapter book) are read with the test tone: the voice does not matter for the book's validity, and every
content document is in the read-along book whether read or not (an EPUB 2 has every document
upgraded), so this checks the whole book; the wrapping of sentences is checked in the two chapters
read. Reading the shortest rather than the first two keeps the check and cuts the audio encoded
(Alice's first two chapters are 47 minutes of tone, 84 s to encode twice; the corpus's chapters
read come to 95,000 characters instead of 133,000 for two of 400 or more each). The audiobook beside
it is written as MP3: the read-along book is the same byte for byte beside an M4B
(test_readalong.test_the_read_along_book_is_the_same_beside_an_mp3), and MP3 encodes 7 times faster
than AAC (37 minutes of tone: 2.6 s to 18.5 s; the regime book's run 32 s to 19 s). The books the command
refuses are exempt: they get one line and no file. Measured times (bench/results/readalong-corpus.txt):
the books marked `slow` take over a minute each on a loaded two-core machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_run import ROOT, epub2audio
from epub2audio.book.epub import load_book
from corpus_expectations import ADDED, ADDED_REFUSED, BOOKS, BROKEN, MALFORMED, SWEPT
from test_readalong import EPUBCHECK, epubcheck, needs_epubcheck

CORPUS = ROOT / "tests" / "corpus"
# The longest: its one chapter, 28,741 characters, is 37 minutes of tone to encode (as MP3, and as the
# read-along book's AAC); 27 s beside another test on two cores (44 s when the audiobook was AAC too).
LONG = {"regime-anticancer-arabic-rtl-epub3.epub"}
# Valid HTML that Debian's EPUBCheck 4.2.6 (the fallback when the dev extra's 5.3.0 is missing)
# counts as errors: <p> in <hgroup>.
OLD_SCHEMA = {"a-tale-of-two-cities-nested-books-se-epub3.epub"}
REFUSED = sorted([BROKEN, MALFORMED] + [name for name, book in BOOKS.items() if book.get("refused")])
# Issue 29's books are swept only as far as SWEPT (one per kind) and their refused ones: 20 more
# conversions with EPUBCheck would cost minutes the suite has not got; test_book_epub reads them all.
NOT_SWEPT = sorted(set(ADDED) - set(SWEPT) - set(ADDED_REFUSED))
CONVERTED = sorted(name for name in BOOKS if name not in REFUSED and name not in NOT_SWEPT)
# A chapter this long holds a few sentences to wrap, as the first two chapters of every book do.
SENTENCES = 400


def shortest_chapters(path: Path) -> str:
    """The --chapters list: the book's shortest chapter that holds a few sentences, and the shortest
    of the others (a second chapter puts two in the navigation and the overlays)."""
    sizes = [sum(len(p) for p in c.paragraphs) for c in load_book(path).chapters]
    ranked = sorted(range(len(sizes)), key=lambda i: (sizes[i] < SENTENCES, sizes[i], i))
    first = ranked[0]
    rest = sorted((i for i in range(len(sizes)) if i != first), key=lambda i: (sizes[i], i))
    return ",".join(str(i + 1) for i in sorted([first, *rest[:1]]))


@pytest.fixture(autouse=True)
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))


def test_every_corpus_book_is_checked():
    assert sorted(p.name for p in CORPUS.glob("*.epub")) == sorted(CONVERTED + REFUSED + NOT_SWEPT)
    assert set(SWEPT) <= set(CONVERTED) and set(ADDED_REFUSED) <= set(REFUSED)
    assert LONG <= set(CONVERTED)


@needs_epubcheck
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in LONG else n for n in CONVERTED])
def test_read_along_book_has_no_epubcheck_errors(name, tmp_path):
    if name in OLD_SCHEMA and EPUBCHECK == Path("/usr/share/java/epubcheck.jar"):
        pytest.skip("EPUBCheck 4.2.6 refuses <p> in <hgroup>; the dev extra's EPUBCheck 5.3.0 checks this book")
    chapters = shortest_chapters(CORPUS / name)
    out = tmp_path / "book.mp3"
    run = epub2audio(CORPUS / name, "-o", out, "--voice", "tone", "--no-verify", "--progress", "none",
                     "--chapters", chapters, "--readalong")
    assert run.code == 0, run.stderr
    errors, report = epubcheck(tmp_path / "book.readalong.epub")
    assert errors == 0, "\n".join(line[:400] for line in report.splitlines() if line.startswith(("ERROR", "FATAL")))


@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_book_gets_one_line_and_no_read_along_book(name, tmp_path):
    run = epub2audio(CORPUS / name, "-o", tmp_path / "book.m4b", "--voice", "tone", "--no-verify",
                     "--progress", "none", "--readalong")
    assert run.code == 2
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith(f"epub2audio: error: {name}: ")
    assert not (tmp_path / "book.readalong.epub").exists() and not (tmp_path / "book.m4b").exists()
