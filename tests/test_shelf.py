"""Audiobookshelf: the series a book says it is in, `--layout audiobookshelf` for the command and
the watcher, and names safe on every platform."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import epub2audio
from epub2audio.audiobook.shelf import COMPONENT_BYTES, safe_component, shelf_path
from epub2audio.book.epub import load_book
from epub_factory import make_epub, xhtml

DOCS = {"c1.xhtml": xhtml("<h1>One</h1><p>The morning was cold.</p>", "One")}
SERIES_EPUB3 = ('<dc:creator>Arthur Conan Doyle</dc:creator><meta property="belongs-to-collection" id="c1">'
                'Sherlock Holmes</meta><meta refines="#c1" property="collection-type">series</meta>'
                '<meta refines="#c1" property="group-position">3</meta>'
                '<dc:description>&lt;p&gt;Twelve &lt;i&gt;stories&lt;/i&gt;.&lt;/p&gt;</dc:description>')


@pytest.fixture(autouse=True)
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))


@pytest.mark.parametrize("metadata, series", [
    (SERIES_EPUB3, ("Sherlock Holmes", "3")),
    # an untyped collection with a position is an ordered one
    ('<meta property="belongs-to-collection" id="c">Sea Tales</meta><meta refines="#c" property="group-position">'
     '2.0</meta>', ("Sea Tales", "2")),
    # a "set" is a list the book is on (Standard Ebooks: "The Guardian's Best 100 Novels"), not a series
    ('<meta property="belongs-to-collection" id="c">Best 100</meta><meta refines="#c" property="collection-type">'
     'set</meta><meta refines="#c" property="group-position">8</meta>', ("", "")),
    ('<meta name="calibre:series" content="Barsetshire"/><meta name="calibre:series_index" content="1.5"/>',
     ("Barsetshire", "1.5")),
    ("", ("", "")),
])
def test_the_series_comes_from_calibre_or_an_epub3_series_collection(tmp_path, metadata, series):
    book = make_epub(tmp_path, DOCS, nav=[("One", "c1.xhtml")], metadata=metadata)
    loaded = load_book(book)
    assert (loaded.series, loaded.series_index) == series


@pytest.mark.parametrize("text, expected", [
    ("Plain Title", "Plain Title"),
    ("../../etc/passwd", "_.._etc_passwd"), (".hidden", "hidden"),
    ("a/b\\c:d*e?f\"g<h>i|j", "a_b_c_d_e_f_g_h_i_j"),
    ("CON", "_CON"), ("nul.txt", "_nul.txt"), ("Lpt1", "_Lpt1"),
    ("..", "fallback"), (" . ", "fallback"), ("///", "fallback"), ("", "fallback"),
    ("Title.", "Title"), ("line\nbreak\ttab\x00nul", "line break tab nul"),
    ("Cafe\u0301", "Café"),  # NFC
])
def test_names_are_safe_on_every_platform(text, expected):
    assert safe_component(text, "fallback") == expected


def test_a_long_name_is_cut_at_a_character_boundary():
    name = safe_component("日本語" * 100, "x")
    assert len(name.encode("utf-8")) <= COMPONENT_BYTES and name == ("日本語" * 100)[:COMPONENT_BYTES // 3]


def test_shelf_paths():
    root = Path("/lib")
    assert shelf_path(root, "A Study", ["Ann", "Bo"], "Sea Tales", "2", ".m4b") == \
        root / "Ann & Bo" / "Sea Tales" / "Book 2 - A Study" / "A Study.m4b"
    assert shelf_path(root, "A Study", ["Ann"], "Sea Tales", "", ".mp3") == root / "Ann" / "Sea Tales" / "A Study" / "A Study.mp3"
    assert shelf_path(root, "A/Study", [], "", "", ".opus") == root / "Unknown Author" / "A_Study" / "A_Study.opus"


def test_layout_audiobookshelf_writes_the_folders_cover_desc_and_reader(tmp_path):
    from test_m4b import make_cover

    cover = make_cover(tmp_path / "cover.jpg", ".jpg")
    book = make_epub(tmp_path, DOCS, nav=[("One", "c1.xhtml")],
                     metadata=SERIES_EPUB3 + '<meta name="cover" content="img"/>',
                     extra_items={"cover.jpg": (cover, "image/jpeg", "cover-image")}, title="The Adventures")
    library = tmp_path / "library"
    library.mkdir()
    run = epub2audio(book, "-o", library, "--layout", "audiobookshelf", "--voice", "tone", "--progress", "json")
    assert run.code == 0, run.stderr
    folder = library / "Arthur Conan Doyle" / "Sherlock Holmes" / "Book 3 - The Adventures"
    assert run.events("done")[0]["output"] == str(folder / "The Adventures.m4b")
    assert sorted(p.name for p in folder.iterdir()) == ["The Adventures.m4b", "cover.jpg", "desc.txt", "reader.txt"]
    assert (folder / "cover.jpg").read_bytes() == cover
    assert (folder / "desc.txt").read_text() == "Twelve stories.\n"
    assert (folder / "reader.txt").read_text() == "Test tone\n"
    again = epub2audio(book, "-o", library, "--layout", "audiobookshelf", "--voice", "tone", "--progress", "json")
    assert again.code == 0 and again.events("plan")[0]["to_render"] == 0  # the same job: resumed
    missing = epub2audio(book, "-o", tmp_path / "nowhere", "--layout", "audiobookshelf", "--voice", "tone",
                         "--progress", "none")
    assert missing.code == 2 and "the output is the library folder, which must exist" in missing.stderr


def test_the_watcher_files_books_under_author_and_title_in_the_format_asked(tmp_path):
    in_dir, out_dir = tmp_path / "in", tmp_path / "out"
    in_dir.mkdir(), out_dir.mkdir()
    make_epub(in_dir, DOCS, nav=[("One", "c1.xhtml")], metadata="<dc:creator>Ann Author</dc:creator>",
              title="Night: A Story?", name="night.epub")
    run = subprocess.run([sys.executable, "-m", "epub2audio.watch", str(in_dir), "--out", str(out_dir), "--voice",
                          "tone", "--once", "--settle", "0", "--progress", "none", "--layout", "audiobookshelf",
                          "--format", "opus"], capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert run.returncode == 0, run.stderr
    assert (out_dir / "Ann Author" / "Night_ A Story_" / "Night_ A Story_.opus").is_file()
    log = (out_dir / "epub2audio-watch.log").read_text()
    assert "-> Ann Author/Night_ A Story_/Night_ A Story_.opus (1 chapters" in log
