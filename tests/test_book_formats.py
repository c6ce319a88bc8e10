"""Books in the formats calibre reads (MOBI, AZW3, DOCX, FB2, ODT, RTF, TXT, HTML, PDF): told by
their bytes, converted to EPUB with ebook-convert, then read as any EPUB; refused in one line with
exit 2 when calibre is missing, fails or the format is unknown."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from calibre_books import AUTHOR, FORMATS, TITLE, chapters, make_books
from epub2audio import cli, watch
from epub2audio.book import formats
from epub2audio.book.epub import load_book
from epub2audio.errors import InputError

pytestmark = [
    pytest.mark.skipif(not formats.shutil.which("ebook-convert"),
                       reason="calibre's ebook-convert is not installed (make system-deps installs it)"),
    pytest.mark.xdist_group("calibre-formats"),  # one worker makes the books (two ebook-convert runs) once
]
HEADINGS = [heading for heading, _ in chapters()]


@pytest.fixture(scope="session")
def books(tmp_path_factory) -> dict[str, Path]:
    """moby-dick.FORMAT in every format, made once per session (MOBI and AZW3 by ebook-convert)."""
    return make_books(tmp_path_factory.mktemp("calibre-books"))


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "no-config.toml"))


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("kind", FORMATS)
def test_each_format_is_read_with_its_chapters_and_text(books, kind, tmp_path):
    book = load_book(books[kind])
    expected = chapters()
    if kind == "txt":  # plain text has no metadata: calibre names the book after its file
        assert (book.title, book.authors) == ("moby-dick", ["Unknown"])
        # the title block before CHAPTER 1 is its title page ("Moby-Dick" / "By Herman Melville")
        assert [(s.title, s.reason, s.chars) for s in book.skipped] == [
            ("Start", "cover (guide)", 0), (TITLE, "title page (text)", len(f"{TITLE}By {AUTHOR}"))]
        read = book.chapters
        headings = [h.replace("Chapter", "CHAPTER", 1) for h in HEADINGS]
    else:
        assert (book.title, book.authors, book.language) == (TITLE, [AUTHOR], "en")
        read, headings = book.chapters, HEADINGS
    assert [c.title for c in read] == headings
    for chapter, (heading, paragraphs), shown in zip(read, expected, headings):
        assert _words(chapter.paragraphs[0]) == shown  # the heading is read first
        # every word of every paragraph, in order (pdftohtml may split a paragraph at a line's full stop)
        assert _words(" ".join(chapter.paragraphs[1:])) == _words(" ".join(paragraphs))
    # the converted EPUB lies in the cache under the book's SHA-256, named after the book
    (converted,) = (tmp_path / "cache" / "converted").glob("*/*.epub")
    assert converted.name == "moby-dick.epub"
    assert not list((tmp_path / "cache" / "converted").glob("*/.converting-*"))


@pytest.mark.parametrize("kind", ["mobi", "docx", "odt", "pdf", "rtf", "fb2", "html", "txt"])
def test_the_kind_is_told_by_the_bytes_not_the_name(books, kind, tmp_path):
    renamed = tmp_path / "book.bin"
    renamed.write_bytes(books[kind].read_bytes())
    assert formats.book_kind(renamed) == kind
    assert formats.book_kind(books["azw3"]) == "azw3"  # BOOKMOBI like a MOBI; calibre's suffix follows the name


def test_a_file_named_epub_is_an_epub_whatever_it_holds(tmp_path):
    fake = tmp_path / "Not a zip.epub"
    fake.write_text("This is not an EPUB at all.\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"^Not a zip\.epub: not an EPUB \(not a zip archive\)$"):
        load_book(fake)


def test_the_command_reads_a_docx_and_the_second_read_uses_the_cache(books, capsys, tmp_path):
    assert cli.main([str(books["docx"]), "--list-chapters"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{TITLE} — {AUTHOR} [en]"
    assert all(heading in out for heading in HEADINGS)
    (converted,) = (tmp_path / "cache" / "converted").glob("*/*.epub")
    before = converted.stat().st_mtime_ns
    assert cli.main([str(books["docx"]), "--list-chapters"]) == 0
    assert converted.stat().st_mtime_ns == before  # not converted again


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.strip()


def test_no_calibre_says_what_to_install(books, capsys, monkeypatch):
    monkeypatch.setattr(formats, "EBOOK_CONVERT", "no-such-ebook-convert")
    assert cli.main([str(books["rtf"]), "--list-chapters"]) == 2
    assert _one_error_line(capsys) == (
        "epub2audio: error: moby-dick.rtf: a RTF book is read through calibre's ebook-convert, which is not "
        "installed: install calibre (Debian/Ubuntu: apt install calibre; else https://calibre-ebook.com)")


def test_an_unknown_format_is_refused_in_one_line(tmp_path, capsys):
    picture = tmp_path / "cover.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(64))
    assert cli.main([str(picture), "--list-chapters"]) == 2
    assert _one_error_line(capsys) == (
        "epub2audio: error: cover.png: not a book epub2audio reads (EPUB, MOBI, AZW3, DOCX, FB2, ODT, RTF, TXT, "
        "HTML or PDF); convert it to EPUB first, e.g. with calibre")


def test_a_file_calibre_cannot_convert_is_refused_and_leaves_nothing(tmp_path, capsys):
    broken = tmp_path / "broken.mobi"
    broken.write_bytes(b"\0" * 60 + b"BOOKMOBI" + os.urandom(400))  # a MOBI header, then noise
    assert cli.main([str(broken), "--list-chapters"]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("epub2audio: error: broken.mobi: calibre's ebook-convert could not convert this "
                           "MOBI file (")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]  # no partial EPUB kept


def test_calibre_runs_within_a_memory_limit(books, monkeypatch):
    """The limit is really applied: at 64 MiB of address space calibre's Python cannot even start."""
    monkeypatch.setattr(formats, "CONVERT_MEMORY", 64 << 20)
    with pytest.raises(InputError, match=r"^moby-dick\.rtf: calibre's ebook-convert could not convert this RTF "
                                         r"file \(.+\)$"):
        load_book(books["rtf"])


def test_a_hung_calibre_is_stopped(tmp_path, books, monkeypatch):
    """The time limit, with a stand-in for ebook-convert that never finishes (it sleeps far past it)."""
    hung = tmp_path / "ebook-convert"
    hung.write_text("#!/bin/sh\nexec sleep 600\n")
    hung.chmod(hung.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(formats, "EBOOK_CONVERT", str(hung))
    monkeypatch.setattr(formats, "CONVERT_SECONDS", 0.2)
    with pytest.raises(InputError, match=r"^moby-dick\.odt: calibre's ebook-convert did not convert this ODT "
                                         r"file within 0\.2 s$"):
        load_book(books["odt"])
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


@pytest.mark.slow
def test_the_watcher_converts_an_fb2_book(books, tmp_path):
    """One book dropped as FB2 comes out as an M4B of its two chapters (the tone voice)."""
    in_dir, out_dir = tmp_path / "in", tmp_path / "out"
    in_dir.mkdir()
    out_dir.mkdir()
    (in_dir / "Moby Dick.fb2").write_bytes(books["fb2"].read_bytes())
    assert watch.main([str(in_dir), "--out", str(out_dir), "--once", "--voice", "tone", "--settle", "0",
                       "--progress", "none"]) == 0
    log = (out_dir / watch.LOG_NAME).read_text(encoding="utf-8")
    assert re.search(r" converted +Moby Dick\.fb2 \[[0-9a-f]{12}\] -> Moby Dick\.m4b \(2 chapters, ", log), log
    assert (out_dir / "Moby Dick.m4b").stat().st_size > 0
    assert (in_dir / "Moby Dick.fb2").exists()  # the source stays where it is
