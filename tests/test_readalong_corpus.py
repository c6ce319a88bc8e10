"""EPUBCheck reports 0 errors on the read-along book of every corpus book that converts: all 53 in
tests/corpus but the 4 the command refuses.

Every content document is in the read-along book whether read or not (an EPUB 2 has every document
upgraded), so reading any chapter checks the upgrade of the whole book's markup. The voice is the
test tone, spoken ten times faster (tests/brisk_tone): the voice does not matter for the book's
validity, and the audio's length only changes the clock values, so a tenth of the audio to encode
checks the same markup. The books of the first sweep (one of each kind of issue 29's books among
them: SWEPT) read two chapters, the shortest of at least a few sentences and the shortest of the
others (its only one, for a one-chapter book), which puts two in the navigation and the overlays and
wraps sentences; the other 20 of issue 29's books read their one shortest chapter with text, which
checks their markup for the least audio (Die Verwandlung's shortest is still 38,625 characters: 26 s
quiet at the tone's own pace). Reading the shortest rather than the first two keeps the check and
cuts the audio encoded (Alice's first two chapters are 47 minutes of tone, 84 s to encode twice).
The audiobook beside it is written as MP3: the read-along book is the same byte for byte beside an
M4B (test_readalong.test_the_read_along_book_is_the_same_beside_an_mp3), and MP3 encodes 7 times
faster than AAC (37 minutes of tone: 2.6 s to 18.5 s).

The books are checked in GROUPS, spread over the test processes, each process's books in its one
JVM (test_readalong.epubcheck_many): a JVM per book spent 3 of its 3.5 s starting, 20 books 64 s
against 16 s in one. The books that take longest each lead a group of their own. The books the command refuses are exempt: they get one
line and no file. Measured times: bench/results/readalong-corpus.txt.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli_run import ROOT, epub2audio
from epub2audio.book.model import Book
from corpus_expectations import ADDED, ADDED_REFUSED, BOOKS, BROKEN, MALFORMED, READALONG_CHAPTERS, SWEPT
from test_readalong import EPUBCHECK, epubcheck_many, needs_epubcheck

CORPUS = ROOT / "tests" / "corpus"
# The longest, each the first of its group: the Arabic book's one chapter, 28,741 characters, was 37
# minutes of tone to encode (as MP3, and as the read-along book's AAC), 27 s beside another test on
# two cores; Die Verwandlung's shortest chapter 26 s; moby-dick-calibre's two 21 s, Vingt mille's 18 s.
# With the brisk tone the whole sweep is 130 s of CPU (370 s at the tone's own pace), its largest
# group 17 s.
LONG = ["regime-anticancer-arabic-rtl-epub3.epub", "die-verwandlung-de-pg-ebookmaker-0-12-boilerplate-epub3.epub",
        "moby-dick-calibre-from-txt.epub", "vingt-mille-lieues-sous-les-mers-fr-epub2-ncx.epub"]
# Valid HTML that Debian's EPUBCheck 4.2.6 (the fallback when the dev extra's 5.3.0 is missing)
# counts as errors: <p> in <hgroup>.
OLD_SCHEMA = {"a-tale-of-two-cities-nested-books-se-epub3.epub"}
REFUSED = sorted([BROKEN, MALFORMED] + [name for name, book in BOOKS.items() if book.get("refused")])
# Issue 29's books outside SWEPT read one chapter, the others two (the docstring says why).
ONE_CHAPTER = sorted(set(ADDED) - set(SWEPT) - set(ADDED_REFUSED))
CONVERTED = sorted(name for name in BOOKS if name not in REFUSED)
_ORDER = LONG + [name for name in CONVERTED if name not in LONG]
GROUPS = [_ORDER[k::10] for k in range(10)]
# A chapter this long holds a few sentences to wrap, as the first two chapters of every book do.
SENTENCES = 400
BRISK_TONE = ROOT / "tests" / "brisk_tone"


def shortest_chapters(book: Book, count: int = 2) -> str:
    """The --chapters list: the book's shortest chapter that holds a few sentences, and the shortest
    of the others (a second chapter puts two in the navigation and the overlays); with count 1, the
    shortest chapter that has any text. The sweep reads corpus_expectations.READALONG_CHAPTERS,
    which test_book_epub holds equal to this on the books it loads anyway (49 loads fewer here)."""
    sizes = [sum(len(p) for p in c.paragraphs) for c in book.chapters]
    if count == 1:
        return str(min(range(len(sizes)), key=lambda i: (sizes[i] == 0, sizes[i], i)) + 1)
    ranked = sorted(range(len(sizes)), key=lambda i: (sizes[i] < SENTENCES, sizes[i], i))
    first = ranked[0]
    rest = sorted((i for i in range(len(sizes)) if i != first), key=lambda i: (sizes[i], i))
    return ",".join(str(i + 1) for i in sorted([first, *rest[:1]]))


@pytest.fixture(autouse=True)
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))


@pytest.fixture
def brisk_tone(monkeypatch):
    """The commands this test runs speak the tone ten times faster (tests/brisk_tone)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BRISK_TONE), os.environ.get("PYTHONPATH")])))


def test_every_corpus_book_is_checked():
    assert sorted(p.name for p in CORPUS.glob("*.epub")) == sorted(CONVERTED + REFUSED)
    assert sorted(sum(GROUPS, [])) == CONVERTED and len(CONVERTED) == 49
    assert set(SWEPT) <= set(CONVERTED) and set(ADDED_REFUSED) <= set(REFUSED)
    assert [group[0] for group in GROUPS[:len(LONG)]] == LONG
    assert sorted(READALONG_CHAPTERS) == CONVERTED


@needs_epubcheck
@pytest.mark.parametrize("group", [pytest.param(g, marks=pytest.mark.slow) if g[0] in LONG else g for g in GROUPS],
                         ids=[f"group-{k + 1:02d}" for k in range(len(GROUPS))])
def test_read_along_books_have_no_epubcheck_errors(group, tmp_path, brisk_tone):
    books = {}
    for name in group:
        chapters = READALONG_CHAPTERS[name]
        out = tmp_path / name.removesuffix(".epub") / "book.mp3"
        out.parent.mkdir()
        run = epub2audio(CORPUS / name, "-o", out, "--voice", "tone", "--no-verify", "--progress", "json",
                         "--chapters", chapters, "--readalong")
        assert run.code == 0, f"{name}: {run.stderr}"
        assert run.events("voice")[0]["model_id"] == "tone:2-brisk10"  # the brisk tone is what spoke
        books[name] = out.parent / "book.readalong.epub"
    if EPUBCHECK == Path("/usr/share/java/epubcheck.jar"):
        # EPUBCheck 4.2.6 refuses <p> in <hgroup>; the dev extra's EPUBCheck 5.3.0 checks this book.
        books = {name: path for name, path in books.items() if name not in OLD_SCHEMA}
    checked = epubcheck_many(list(books.values()))
    failed = {name: checked[path] for name, path in books.items() if checked[path][0]}
    assert not failed, "\n".join(f"{name}: {errors} errors\n" + "\n".join(
        line[:400] for line in report.splitlines() if line.startswith(("ERROR", "FATAL")))
        for name, (errors, report) in failed.items())


@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_book_gets_one_line_and_no_read_along_book(name, tmp_path):
    run = epub2audio(CORPUS / name, "-o", tmp_path / "book.m4b", "--voice", "tone", "--no-verify",
                     "--progress", "none", "--readalong")
    assert run.code == 2
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith(f"epub2audio: error: {name}: ")
    assert not (tmp_path / "book.readalong.epub").exists() and not (tmp_path / "book.m4b").exists()
