"""The safe container reader: hostile zips and DRM are refused in one line, exit 2, nothing written;
font-obfuscated books still convert. The hostile books are built at test time (hostile_epubs)."""

import os
import struct
import zipfile

import pytest

import hostile_epubs as hostile
import m4b_probe
from cli_run import epub2audio
from epub2audio.book import container
from epub2audio.book.container import MAX_ENTRIES, open_container
from epub2audio.book.epub import load_book
from epub2audio.errors import InputError

GiB = 1 << 30
MiB = 1 << 20
CHAPTERS = [("One", ["One", "The first chapter."]), ("Two", ["Two", "The second chapter."])]
DRM = "DRM-protected ({}); epub2audio cannot read it"
BOMB = "unsafe EPUB (entry OEBPS/bomb.xhtml inflates more than 200 times over: a zip bomb)"

REFUSED = [
    (hostile.traversal, "traversal.epub: unsafe EPUB (entry ../evil.xhtml points outside the book)"),
    (hostile.absolute, "absolute.epub: unsafe EPUB (entry /etc/x has an absolute path)"),
    (hostile.symlink, "symlink.epub: unsafe EPUB (entry OEBPS/passwd.xhtml is a symbolic link)"),
    (hostile.duplicate, "duplicate.epub: unsafe EPUB (entry OEBPS/c1.xhtml appears twice)"),
    (hostile.zip_encrypted, "zip-encrypted.epub: not a readable EPUB (entry OEBPS/c1.xhtml is password-encrypted)"),
    (hostile.deflate64, "deflate64.epub: not a readable EPUB (entry OEBPS/c1.xhtml uses compression method 9, "
                        "which EPUB does not allow)"),
    (lambda d: hostile.many_entries(d, MAX_ENTRIES + 1),
     "many.epub: unsafe EPUB (it holds 10,001 files, more than the 10,000 allowed)"),
    (hostile.adept_rights, "adept-rights.epub: " + DRM.format("Adobe ADEPT")),
    (hostile.adept_encryption, "adept-encryption.epub: " + DRM.format("Adobe ADEPT")),
    (hostile.lcp, "lcp.epub: " + DRM.format("Readium LCP")),
    (hostile.lcp_encryption, "lcp-encryption.epub: " + DRM.format("Readium LCP")),
    (hostile.fairplay, "fairplay.epub: " + DRM.format("Apple FairPlay")),
    (hostile.unknown_drm, "unknown-drm.epub: " + DRM.format("unknown scheme")),
]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    """The 2 GiB bomb and its lying twin (about 2 MB each), built once."""
    folder = tmp_path_factory.mktemp("bombs")
    return {"bomb.epub": hostile.zip_bomb(folder), "lying-bomb.epub": hostile.lying_bomb(folder)}


def refused_by_cli(tmp_path, book, message, **limits):
    """Convert `book` as a user would: exit 2, the message as the only stderr line, nothing written."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    run = epub2audio(book, "-o", out_dir / "book.m4b", "--voice", "tone", **limits)
    assert (run.code, run.stderr) == (2, f"epub2audio: error: {message}\n")
    assert list(out_dir.iterdir()) == []
    assert not (tmp_path / "cache" / "jobs").exists() or not any((tmp_path / "cache" / "jobs").iterdir())


@pytest.mark.parametrize("make, message", REFUSED, ids=[m.split(":")[0] for _, m in REFUSED])
def test_hostile_book_is_refused_in_one_line(tmp_path, make, message):
    book = make(tmp_path)
    with pytest.raises(InputError) as err:
        load_book(book)
    assert str(err.value) == message


@pytest.mark.parametrize("make, message", REFUSED, ids=[m.split(":")[0] for _, m in REFUSED])
def test_cli_refuses_hostile_book_with_exit_2_and_writes_nothing(tmp_path, make, message):
    (tmp_path / "in").mkdir()
    refused_by_cli(tmp_path, make(tmp_path / "in"), message)


@pytest.mark.parametrize("name", ["bomb.epub", "lying-bomb.epub"])
def test_zip_bombs_are_refused(bombs, name):
    with zipfile.ZipFile(bombs[name]) as zf:  # what the headers claim
        assert zf.getinfo("OEBPS/bomb.xhtml").file_size == (2 * GiB if name == "bomb.epub" else 1000)
    with pytest.raises(InputError) as err:
        load_book(bombs[name])
    assert str(err.value) == f"{name}: {BOMB}"


@pytest.mark.parametrize("name", ["bomb.epub", "lying-bomb.epub"])
def test_cli_refuses_zip_bombs_within_1_gib(tmp_path, bombs, name):
    refused_by_cli(tmp_path, bombs[name], f"{name}: {BOMB}", memory_limit=1 * GiB)


def test_a_sound_book_reads_within_the_same_1_gib(tmp_path):
    """The control for the bomb test: the limit itself leaves room to read a book."""
    book = hostile.obfuscated_fonts(tmp_path)
    run = epub2audio(book, "--list-chapters", memory_limit=1 * GiB)
    assert run.code == 0, run.stderr
    assert "One" in run.stdout and "Two" in run.stdout


def test_a_bomb_the_book_does_not_list_is_never_inflated(tmp_path):
    book = hostile.unlisted_bomb(tmp_path)
    assert [(c.title, c.paragraphs) for c in load_book(book).chapters] == CHAPTERS
    with zipfile.ZipFile(open_container(book).archive) as zf:
        assert "OEBPS/bomb.xhtml" not in zf.namelist()


def test_ebooklib_gets_only_what_the_book_needs(tmp_path):
    book = hostile.obfuscated_fonts(tmp_path)
    with zipfile.ZipFile(open_container(book).archive) as zf:
        assert sorted(zf.namelist()) == ["META-INF/container.xml", "OEBPS/c1.xhtml", "OEBPS/c2.xhtml",
                                         "OEBPS/content.opf", "OEBPS/f1.otf", "OEBPS/f2.ttf", "OEBPS/nav.xhtml"]
        assert zf.read("OEBPS/f1.otf") == zf.read("OEBPS/f2.ttf") == b""  # fonts are never inflated
        assert zf.read("OEBPS/c1.xhtml") == hostile.CHAPTERS["c1.xhtml"].encode()


@pytest.mark.slow
def test_font_obfuscation_is_not_drm_and_the_book_converts(tmp_path):
    book = hostile.obfuscated_fonts(tmp_path)
    assert [(c.title, c.paragraphs) for c in load_book(book).chapters] == CHAPTERS
    out = tmp_path / "fonts.m4b"
    run = epub2audio(book, "-o", out, "--voice", "tone", "--no-verify")
    assert run.code == 0, run.stderr
    assert [c.title for c in m4b_probe.chapters(m4b_probe.ffprobe(out))] == ["One", "Two"]


# -- the limits, made small so that small books cross them ------------------------------------


def test_one_entry_over_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(container, "MAX_ENTRY_BYTES", 1 * MiB)
    image = os.urandom(1 * MiB + 1)  # incompressible: the ratio cap stays out of it
    book = hostile.hostile(tmp_path, "big.epub", extra_items={"big.png": (image, "image/png", "")})
    with pytest.raises(InputError) as err:
        load_book(book)
    assert str(err.value) == "big.epub: unsafe EPUB (entry OEBPS/big.png inflates to more than 1 MiB)"


def test_all_entries_over_the_total_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(container, "MAX_TOTAL_BYTES", 2 * MiB)
    images = {f"{i}.png": (os.urandom(MiB), "image/png", "") for i in range(3)}
    book = hostile.hostile(tmp_path, "heavy.epub", extra_items=images)
    with pytest.raises(InputError) as err:
        load_book(book)
    assert str(err.value) == "heavy.epub: unsafe EPUB (its files inflate to more than 2 MiB)"


def test_small_files_that_compress_well_are_not_bombs(tmp_path):
    """Under RATIO_FLOOR the ratio is not checked: 512 KiB of one letter (about 1000:1) reads."""
    paragraph = "a" * (512 * 1024)
    book = hostile.hostile(tmp_path, "airy.epub", docs={"c3.xhtml": hostile.xhtml(f"<p>{paragraph}</p>")})
    assert load_book(book).chapters[-1].paragraphs == ["Two", "The second chapter.", paragraph]


def test_a_bomb_just_over_the_floor_is_refused(tmp_path):
    book = hostile.zip_bomb(tmp_path, size=16 * MiB)
    with pytest.raises(InputError) as err:
        load_book(book)
    assert str(err.value) == f"bomb.epub: {BOMB}"


def _patch_end_record(path, **fields):
    """Rewrite the end-of-central-directory record's entry counts and/or directory size."""
    data = bytearray(path.read_bytes())
    at = data.rfind(b"PK\x05\x06")
    sig, disk, cd_disk, on_disk, total, size, offset, comment = struct.unpack_from("<4s4H2LH", data, at)
    count = fields.get("count", total)
    struct.pack_into("<4s4H2LH", data, at, sig, disk, cd_disk, count, count, fields.get("size", size), offset, comment)
    path.write_bytes(bytes(data))
    return path


def test_an_end_record_that_hides_entries_does_not_hide_them(tmp_path):
    book = _patch_end_record(hostile.many_entries(tmp_path, MAX_ENTRIES + 1), count=7)
    with pytest.raises(InputError) as err:
        load_book(book)
    assert str(err.value) == "many.epub: unsafe EPUB (it holds 10,001 files, more than the 10,000 allowed)"


def test_a_huge_directory_is_refused_before_it_is_read(tmp_path):
    book = _patch_end_record(hostile.traversal(tmp_path), size=9 * MiB)
    with pytest.raises(InputError) as err:
        load_book(book)
    assert str(err.value) == "traversal.epub: unsafe EPUB (its zip directory is 9 MiB, more than the 8 MiB allowed)"


def test_a_damaged_entry_is_named(tmp_path):
    c1 = hostile.deflated("OEBPS/c1.xhtml", hostile.CHAPTERS["c1.xhtml"].encode())
    c1.crc ^= 1
    book = hostile.hostile(tmp_path, "crc.epub", {c1.name: c1})
    with pytest.raises(InputError) as err:
        load_book(book)
    assert str(err.value) == "crc.epub: not a readable EPUB (entry OEBPS/c1.xhtml is damaged)"


def test_an_entry_name_cannot_break_the_line(tmp_path):
    book = hostile.hostile(tmp_path, "newline.epub", add=[hostile.stored("../evil\n.xhtml", b"x")])
    with pytest.raises(InputError) as err:
        load_book(book)
    assert str(err.value) == "newline.epub: unsafe EPUB (entry ../evil\\n.xhtml points outside the book)"


def test_a_malformed_encryption_xml_is_refused(tmp_path):
    book = hostile.hostile(tmp_path, "enc.epub", add=[hostile.stored("META-INF/encryption.xml", b"<encryption>")])
    with pytest.raises(InputError) as err:
        load_book(book)
    assert str(err.value).startswith("enc.epub: not a valid EPUB (malformed META-INF/encryption.xml: ")
