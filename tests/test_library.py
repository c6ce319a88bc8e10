"""`epub2audio library`: the walk over a calibre-style folder, skip-done, refusals; no Ray."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import THREE_CHAPTERS, epub2audio, story_epub
from epub2audio.library import find_books, is_done, output_for


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "none.toml"))


def calibre_library(root: Path) -> Path:
    """Author/Title (id)/Title - Author.epub, calibre's layout, with a cover and metadata beside each book."""
    for n, title in ((1, "First Book"), (2, "Second Book")):
        folder = root / "Ann Author" / f"{title} ({n})"
        folder.mkdir(parents=True)
        story_epub(folder, THREE_CHAPTERS, name=f"{title} - Ann Author.epub")
        (folder / "metadata.opf").write_text("<package/>")
        (folder / "cover.jpg").write_bytes(b"\xff\xd8")
    (root / ".calnotes").mkdir()
    (root / ".calnotes" / "hidden.epub").write_bytes(b"not a book")
    (root / "Ann Author" / "download.epub.part").write_bytes(b"half")
    return root


def test_find_books_walks_calibre_folders_and_maps_outputs(tmp_path):
    library = calibre_library(tmp_path / "lib")
    books = find_books(library)
    assert [str(b.relative_to(library)) for b in books] == [
        "Ann Author/First Book (1)/First Book - Ann Author.epub",
        "Ann Author/Second Book (2)/Second Book - Ann Author.epub",
    ]
    assert output_for(books[0], library, tmp_path / "out") == \
        tmp_path / "out" / "Ann Author" / "First Book (1)" / "First Book - Ann Author.m4b"


def test_a_book_is_done_when_its_m4b_is_newer(tmp_path):
    book = story_epub(tmp_path, THREE_CHAPTERS)
    out = tmp_path / "story.m4b"
    assert not is_done(book, out)
    out.write_bytes(b"m4b")
    os.utime(out, ns=(book.stat().st_mtime_ns + 1, book.stat().st_mtime_ns + 1))
    assert is_done(book, out)
    os.utime(book, ns=(out.stat().st_mtime_ns + 1, out.stat().st_mtime_ns + 1))  # a new edition
    assert not is_done(book, out)


def test_library_converts_skips_done_and_refuses_bad_books(tmp_path):
    library = calibre_library(tmp_path / "lib")
    (library / "Bad" / "Broken (3)").mkdir(parents=True)
    (library / "Bad" / "Broken (3)" / "Broken - Bad.epub").write_bytes(b"PK\x03\x04 not really a zip")
    out = tmp_path / "out"
    out.mkdir()
    first = epub2audio("library", library, "--out", out, "--voice", "tone", "--no-verify")
    assert first.code == 2  # a refused book
    lines = first.stderr.strip().splitlines()
    assert lines[-1] == "epub2audio: library: 2 converted, 0 done already, 1 refused, 0 failed"
    refused = [line for line in lines if line.startswith("epub2audio: ")][:-1]  # the rest are milestones
    assert len(refused) == 1 and refused[0].startswith("epub2audio: Bad/Broken (3)/Broken - Bad.epub: refused: ")
    made = sorted(str(p.relative_to(out)) for p in out.rglob("*.m4b"))
    assert made == ["Ann Author/First Book (1)/First Book - Ann Author.m4b",
                    "Ann Author/Second Book (2)/Second Book - Ann Author.m4b"]
    assert not list((tmp_path / "cache").rglob("*.wav"))  # finished books leave no job folder

    again = epub2audio("library", library, "--out", out, "--voice", "tone", "--no-verify")
    assert again.stderr.strip().splitlines()[-1] == \
        "epub2audio: library: 0 converted, 2 done already, 1 refused, 0 failed"


NO_RAY = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "ray":
            raise ImportError("the local path must not import ray")
sys.meta_path.insert(0, Refuse())
from epub2audio.cli import main
code = main(sys.argv[1:])
print("LOADED", sorted(m for m in sys.modules if m.split(".")[0] == "ray"))
sys.exit(code)
"""


def test_the_local_path_imports_no_ray(tmp_path):
    book = story_epub(tmp_path, THREE_CHAPTERS)
    out = tmp_path / "out"
    out.mkdir()
    for args in ([book, "-o", tmp_path / "a.m4b"], ["library", tmp_path, "--out", out]):
        proc = subprocess.run([sys.executable, "-c", NO_RAY, *map(str, args), "--voice", "tone", "--no-verify"],
                              capture_output=True, text=True, env={**os.environ}, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "LOADED []" in proc.stdout
    assert (tmp_path / "a.m4b").stat().st_size > 0 and (out / "story.m4b").stat().st_size > 0
