"""Fuzzing the EPUB reader: hostile EPUBs made from the corpus must end in exit 0 or in a one-line
exit 2 naming the file, never an internal error, a traceback or a hang (tests/fuzz_epubs.py makes
them, tests/fuzz_harness.py runs them; bench/fuzz.py does the same for long runs)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import fuzz_epubs
from fuzz_harness import check_file, crash_site, failure_report, fuzz, message_class, reproducer, verdict

SEED = 20261130
COUNT = 1000


@pytest.mark.slow
def test_a_thousand_fuzzed_epubs_end_in_exit_0_or_one_line_exit_2():
    results = list(fuzz(SEED, range(COUNT), jobs=2, hang_seconds=60))
    assert sorted(r.index for r in results) == list(range(COUNT))
    failed = [r for r in results if r.failed]
    if failed:
        pytest.fail(f"{len(failed)} of {COUNT} inputs crashed or hung (seed {SEED}):\n"
                    f"{failure_report(SEED, failed)}", pytrace=False)
    # The inputs reach past the front door: many are read to a chapter listing, many are refused.
    outcomes = [r.outcome for r in results]
    assert outcomes.count("ok") > COUNT // 5 and outcomes.count("refused") > COUNT // 10


def test_the_same_seed_and_index_give_the_same_input(tmp_path):
    first, again, other = (fuzz_epubs.make_input(SEED, 7), fuzz_epubs.make_input(SEED, 7),
                           fuzz_epubs.make_input(SEED, 8))
    assert first.data == again.data and first.mutations == again.mutations
    assert first.data != other.data
    assert fuzz_epubs.main(["--seed", str(SEED), "--index", "7", "-o", str(tmp_path / "x.epub")]) == 0
    assert (tmp_path / "x.epub").read_bytes() == first.data


def test_inputs_are_mutated_base_books():
    for index in range(40):
        item = fuzz_epubs.make_input(SEED, index)
        assert item.mutations[0].startswith("base=") and len(item.mutations) >= 2, item.mutations
        assert item.data[:4] == b"PK\x03\x04" or "zip_" in item.description


# Cut down to 4 spine files, these keep no text to read: Laozi keeps only the Gutenberg licence, The
# Waste Land (and calibre's copy of it) only files typed titlepage; the comic has none even whole.
# (Georgia read nothing here while a title-page guess could take every section; bounded, it reads.)
TEXTLESS_WHEN_CUT_DOWN = {"laozi-daodejing-zh-epub2-ncx", "the-waste-land-poetry-notes-epub3",
                          "the-waste-land-calibre-from-epub",
                          "drawn-panels-comic-fixed-layout-epub3"}  # no text even whole


def test_every_cut_down_base_book_reads_cleanly(tmp_path):
    # Mutations start from books the reader accepts, so what breaks is the mutation's doing.
    books = fuzz_epubs.base_books()
    assert len(books) >= 10
    for book in books:
        path = tmp_path / f"{book.label}.epub"
        path.write_bytes(book.zip_bytes())
        outcome, kind, message = check_file(path)
        if book.label in TEXTLESS_WHEN_CUT_DOWN:
            # nothing left to read is refused in one line, exit 2, like any book without text
            assert outcome == "refused" and kind.startswith("contains no text to read (N parts skipped"), message
            continue
        assert outcome == "ok", (book.label, kind, message)
        assert len(path.read_bytes()) < 64_000, book.label  # small, so thousands run quickly


def test_verdicts():
    name = "fuzz-1-2.epub"
    assert verdict(0, '{"title": "T", "chapters": []}\n', "", name) == ("ok", "exit 0", "")
    assert verdict(0, "T — unknown author\n", "", name)[0] == "crash"  # not the JSON listing
    line = f"epub2audio: error: {name}: not a readable EPUB (Opening and ending tag mismatch: p line 3 and b)"
    assert verdict(2, "", line + "\n", name) == (
        "refused", "not a readable EPUB (Opening and ending tag", line)
    assert verdict(2, "", line + "\nmore\n", name)[0] == "crash"  # two lines
    assert verdict(2, "", "epub2audio: error: not a readable EPUB\n", name)[0] == "crash"  # file not named
    assert verdict(1, "", f"epub2audio: error: internal error: KeyError: 'x'\n", name)[:2] == (
        "crash", "internal error: KeyError")
    assert message_class(f"epub2audio: error: {name}: bad (line 12, column 40 here and there)", name) == \
        "bad (line N, column N"


def test_reproducer_writes_the_input_and_runs_it_with_its_options():
    index = next(i for i in range(100) if fuzz_epubs.make_input(SEED, i).options)
    options = " ".join(fuzz_epubs.make_input(SEED, index).options)
    assert reproducer(SEED, index) == (
        f"python tests/fuzz_epubs.py --seed {SEED} --index {index} -o /tmp/fuzz-{SEED}-{index}.epub && "
        f"PYTHONPATH=engine python -m epub2audio.cli /tmp/fuzz-{SEED}-{index}.epub --list-chapters --progress json "
        f"{options} --debug")


def test_crash_site_names_the_engine_frame_and_the_library_frame():
    tb = ('Traceback (most recent call last):\n'
          '  File "/x/engine/epub2audio/cli.py", line 9, in main\n'
          '  File "/x/engine/epub2audio/book/epub.py", line 140, in _open_epub\n'
          '  File "/usr/lib/python3/zipfile.py", line 1, in open\n'
          'RuntimeError: encrypted\n')
    assert crash_site(tb) == "book/epub.py:_open_epub → zipfile.py:open"


# Checks that misbehave on one input, run by the workers instead of the reader (--target).

def _index(path: Path) -> int:
    return int(path.stem.rpartition("-")[2])


def hang_on_index_3(path: Path, options):
    if _index(path) == 3:
        threading.Event().wait()  # never set: a hang
    return "ok", "exit 0", ""


def die_on_index_2(path: Path, options):
    if _index(path) == 2:
        os._exit(3)
    return "ok", "exit 0", ""


@pytest.mark.slow
def test_a_hanging_input_is_reported_and_the_run_goes_on():
    results = {r.index: r for r in fuzz(SEED, range(6), jobs=2, hang_seconds=10, target="test_fuzz:hang_on_index_3")}
    assert sorted(results) == list(range(6))
    assert [i for i, r in results.items() if r.failed] == [3]
    assert results[3].outcome == "hang" and results[3].mutations == fuzz_epubs.make_input(SEED, 3).description


def test_a_worker_that_dies_is_reported_and_the_run_goes_on():
    results = {r.index: r for r in fuzz(SEED, range(5), jobs=1, target="test_fuzz:die_on_index_2")}
    assert sorted(results) == list(range(5))
    assert [(i, r.outcome, r.kind) for i, r in results.items() if r.failed] == [(2, "crash", "worker died (exit 3)")]
