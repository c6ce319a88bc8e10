"""A book whose file name is not UTF-8 (b'caf\\xe9.epub', Latin-1 on a Linux disk) converts, and the
M4B lands beside it under the same bytes; every JSON line stays valid UTF-8 and gives the bytes back."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import THREE_CHAPTERS, story_epub

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux only")


def run(*args, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, EPUB2AUDIO_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "epub2audio.cli", *args], capture_output=True, env=env,
                          timeout=600)


def json_lines(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.decode("utf-8").splitlines()]  # strict UTF-8


def test_a_non_utf8_file_name_converts_beside_itself(tmp_path):
    folder = os.fsencode(tmp_path)
    book = os.path.join(folder, b"caf\xe9.epub")
    os.rename(os.fsencode(story_epub(tmp_path, THREE_CHAPTERS)), book)
    cache = tmp_path / "cache"

    listing = run(book, "--list-chapters", "--progress", "json", cache=cache)
    assert listing.returncode == 0, listing.stderr
    assert [c["title"] for c in json_lines(listing.stdout)[0]["chapters"]] == ["One", "Two", "Three"]

    converted = run(book, "--voice", "tone", "--progress", "json", cache=cache)
    assert converted.returncode == 0, converted.stderr
    events = json_lines(converted.stdout)
    assert events[-1]["event"] == "done"
    assert os.fsencode(events[-1]["output"]) == os.path.join(folder, b"caf\xe9.m4b")
    assert sorted(os.listdir(folder)) == [b"cache", b"caf\xe9.epub", b"caf\xe9.m4b"]

    out = os.path.join(folder, b"caf\xe9.m4b")
    checked = run("verify", out, "--no-asr", cache=cache)
    assert checked.returncode == 0, checked.stderr
    assert b"caf\\udce9.m4b" in checked.stdout  # shown escaped, not a crash
    again = run("regen", out, "--segment", "2.1", cache=cache)  # the job found by the same bytes
    assert again.returncode == 0, again.stderr


def test_a_book_without_title_is_named_after_its_file_as_valid_text(tmp_path):
    path = story_epub(tmp_path, THREE_CHAPTERS)
    from epub_factory import edit_epub

    edit_epub(path, "OEBPS/content.opf", "<dc:title>A Story</dc:title>", "")
    book = os.path.join(os.fsencode(tmp_path), b"r\xe9sum\xe9.epub")
    os.rename(os.fsencode(path), book)
    listing = run(book, "--list-chapters", cache=tmp_path / "cache")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.decode("utf-8").startswith("r\ufffdsum\ufffd — Ann Author")
