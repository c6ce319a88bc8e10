"""The folder watcher: what counts as an arrived book, the exactly-once queue, and the whole thing
end to end with a crash and a stop in the middle (`test_watch_folder_end_to_end`)."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from epub2audio import render, watch
from epub2audio.errors import InputError, JobFailed
from epub2audio.render import ConvertOptions, ConvertResult
from epub2audio.watch import ARRIVED, GONE, WAITING, Arrivals, WatchQueue
from worker_gate import SAFETY_SECONDS, Gate, wait_for

# ------------------------------------------------------------------------------------------
# Synthetic EPUBs

CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""

XHTML = ('<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" '
         'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>{title}</title></head><body>{body}</body></html>')


def epub_bytes(title: str, chapters: list[tuple[str, str]]) -> bytes:
    """A minimal valid EPUB3: a nav document and one XHTML file a chapter."""
    manifest, spine, nav, files = [], [], [], {}
    for i, (heading, text) in enumerate(chapters, 1):
        files[f"OEBPS/c{i}.xhtml"] = XHTML.format(title=heading, body=f"<h1>{heading}</h1><p>{text}</p>")
        manifest.append(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>')
        spine.append(f'<itemref idref="c{i}"/>')
        nav.append(f'<li><a href="c{i}.xhtml">{heading}</a></li>')
    files["OEBPS/nav.xhtml"] = XHTML.format(title="Contents", body=f'<nav epub:type="toc"><ol>{"".join(nav)}</ol></nav>')
    files["OEBPS/content.opf"] = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f'<dc:identifier id="uid">urn:x:{title}</dc:identifier><dc:title>{title}</dc:title>'
        '<dc:language>en</dc:language></metadata><manifest>'
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        f'{"".join(manifest)}</manifest><spine>{"".join(spine)}</spine></package>')
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")  # first and stored
        archive.writestr(zipfile.ZipInfo("META-INF/container.xml"), CONTAINER, zipfile.ZIP_DEFLATED)
        for name, content in files.items():
            archive.writestr(zipfile.ZipInfo(name), content, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def numbered_book(n: int) -> tuple[bytes, int]:
    """Book n: odd numbers have two chapters, even ones one; the text differs for every n."""
    count = 2 if n % 2 else 1
    chapters = [(f"Chapter {c}", f"This is book number {n}, chapter {c}. The fox waited {n * c} days by the river.")
                for c in range(1, count + 1)]
    return epub_bytes(f"Book {n:02d}", chapters), count


# ------------------------------------------------------------------------------------------
# Ignore rules and the completeness check


@pytest.mark.parametrize("name, wanted", [
    ("Book.epub", True),
    ("Book With Spaces (2).EPUB", True),
    ("Book.epub.part", False),
    ("Book.epub.crdownload", False),
    ("Book.epub.tmp", False),
    ("Book.epub.download", False),
    ("Book.epub~", False),
    (".Book.epub", False),
    (".Book.epub.abc123", False),  # rsync's temp name
    ("Book.pdf", True),  # read through calibre (book/formats.py)
    ("Book.MOBI", True),
    ("Book.docx.part", False),
    ("Book.m4b", False),
    ("cover.jpg", False),
    ("Book.epub.reason.txt.tmp", False),
])
def test_ignore_rules(name, wanted):
    assert watch.is_candidate(name) is wanted


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_arrival_needs_a_quiet_settle_period(tmp_path):
    clock = FakeClock()
    arrivals = Arrivals(settle=3.0, clock=clock)
    book = tmp_path / "a.epub"
    book.write_bytes(numbered_book(1)[0])
    assert arrivals.check(book) == WAITING  # first sighting
    clock.now += 2.9
    assert arrivals.check(book) == WAITING
    clock.now += 0.2
    assert arrivals.check(book) == ARRIVED
    assert arrivals.pending() == []


def test_arrival_clock_restarts_while_the_file_grows(tmp_path):
    clock = FakeClock()
    arrivals = Arrivals(settle=3.0, clock=clock)
    data = numbered_book(1)[0]
    book = tmp_path / "a.epub"
    book.write_bytes(data[:100])
    assert arrivals.check(book) == WAITING
    for end in range(200, len(data), 100):  # a slow copy: a piece every 2 s, never quiet for 3 s
        clock.now += 2.0
        with open(book, "ab") as f:
            f.write(data[end - 100:end])
        assert arrivals.check(book) == WAITING
    book.write_bytes(data)
    clock.now += 2.0
    assert arrivals.check(book) == WAITING
    clock.now += 3.0
    assert arrivals.check(book) == ARRIVED


def test_arrival_waits_for_the_zip_directory_until_patience_runs_out(tmp_path):
    """A copy that stalls longer than the settle time is not taken for complete: its zip central
    directory is missing. Only after `patience` is it handed on (the engine then calls it broken)."""
    clock = FakeClock()
    arrivals = Arrivals(settle=1.0, patience=5.0, clock=clock)
    book = tmp_path / "a.epub"
    book.write_bytes(numbered_book(1)[0][:700])
    assert not watch.zip_readable(book)
    assert arrivals.check(book) == WAITING
    clock.now += 2.0
    assert arrivals.check(book) == WAITING  # quiet for longer than settle, but not a whole zip yet
    clock.now += 3.0
    assert arrivals.check(book) == ARRIVED


def test_arrival_of_a_format_that_is_not_a_zip_needs_only_the_settle_period(tmp_path):
    """A PDF or a TXT has no zip directory to wait for: quiet for `settle` is arrived."""
    clock = FakeClock()
    arrivals = Arrivals(settle=1.0, patience=5.0, clock=clock)
    book = tmp_path / "a.txt"
    book.write_text("CHAPTER 1. Loomings.\n\nCall me Ishmael.\n", encoding="utf-8")
    assert arrivals.check(book) == WAITING
    clock.now += 1.0
    assert arrivals.check(book) == ARRIVED


def test_arrival_of_a_file_that_went_away(tmp_path):
    arrivals = Arrivals(settle=0.0)
    book = tmp_path / "a.epub"
    book.write_bytes(b"x")
    assert arrivals.check(book) == WAITING
    book.unlink()
    assert arrivals.check(book) == GONE
    assert arrivals.pending() == []
    (tmp_path / "folder.epub").mkdir()  # an unpacked EPUB folder is not a file
    assert arrivals.check(tmp_path / "folder.epub") == GONE


# ------------------------------------------------------------------------------------------
# The queue


def signature_of(path: Path):
    return watch.file_signature(path)


def drop(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def test_queue_converts_each_content_once(tmp_path):
    db, out = tmp_path / "q.sqlite3", tmp_path / "out"
    out.mkdir()
    queue = WatchQueue(db, out)
    data = numbered_book(1)[0]
    first, second = drop(tmp_path, "one.epub", data), drop(tmp_path, "one again.epub", data)
    sha = watch.sha256_file(first)
    assert queue.offer(first, sha, signature_of(first)).outcome == "queued"
    assert queue.offer(second, sha, signature_of(second)).outcome == "duplicate"  # while queued
    assert queue.offer(first, sha, signature_of(first)).outcome == "known"  # the same file again
    book = queue.next_queued()
    assert (book.name, book.output) == ("one.epub", "one.m4b")
    queue.mark_converting(sha)
    assert queue.next_queued() is None
    queue.mark_done(sha)
    queue.close()

    queue = WatchQueue(db, out)  # a restart
    third = drop(tmp_path, "third name.epub", data)
    assert queue.offer(third, sha, signature_of(third)).outcome == "duplicate"
    assert queue.recover() == []
    assert queue.next_queued() is None
    assert [(b.state, b.attempts) for b in queue.books()] == [("done", 1)]


def test_queue_follows_a_renamed_book(tmp_path):
    queue = WatchQueue(tmp_path / "q.sqlite3", tmp_path)
    old = drop(tmp_path, "old.epub", numbered_book(2)[0])
    sha = watch.sha256_file(old)
    queue.offer(old, sha, signature_of(old))
    new = old.rename(tmp_path / "new.epub")
    offer = queue.offer(new, sha, signature_of(new))
    assert offer.outcome == "renamed"
    assert offer.book.source == new and offer.book.output == "old.m4b"  # same output: same job


def test_queue_recovers_interrupted_and_failed_jobs(tmp_path):
    db = tmp_path / "q.sqlite3"
    queue = WatchQueue(db, tmp_path)
    shas = []
    for n in range(1, 5):
        path = drop(tmp_path, f"b{n}.epub", numbered_book(n)[0])
        shas.append(watch.sha256_file(path))
        queue.offer(path, shas[-1], signature_of(path))
    queue.mark_converting(shas[0])  # then the process is killed
    queue.mark_converting(shas[1])
    queue.mark_failed(shas[1], "a segment kept failing", "job")
    queue.mark_converting(shas[2])
    queue.mark_failed(shas[2], "b3.epub: not a readable EPUB", "book")
    queue.close()

    queue = WatchQueue(db, tmp_path)
    assert {b.sha256 for b in queue.recover()} == {shas[0], shas[1]}
    assert [b.sha256 for b in queue.books("queued")] == [shas[0], shas[1], shas[3]]  # oldest first
    assert queue.book(shas[2]).state == "failed"


def test_output_names_never_clash(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "Taken.m4b").write_bytes(b"someone else's audiobook")
    queue = WatchQueue(tmp_path / "q.sqlite3", out)
    names = []
    for n, name in enumerate(["Taken.epub", "Free.epub", "sub/Free.epub", "FREE.epub"], 1):
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(numbered_book(n)[0])
        names.append(queue.offer(path, watch.sha256_file(path), signature_of(path)).book.output)
    # FREE.m4b would be the same file as Free.m4b on a case-insensitive disk (macOS).
    assert names == ["Taken (2).m4b", "Free.m4b", "Free (2).m4b", "FREE (3).m4b"]


def test_a_failed_book_put_back_is_tried_again(tmp_path):
    queue = WatchQueue(tmp_path / "q.sqlite3", tmp_path)
    path = drop(tmp_path, "bad.epub", b"not a zip")
    sha = watch.sha256_file(path)
    queue.offer(path, sha, signature_of(path))
    moved = watch.move_to_failed(tmp_path, path, "bad.epub: not an EPUB")
    queue.mark_failed(sha, "bad.epub: not an EPUB", "book", moved)
    assert queue.book(sha).output is None  # the name bad.m4b is free again
    back = drop(tmp_path, "bad.epub", b"not a zip")
    offer = queue.offer(back, sha, signature_of(back))
    assert offer.outcome == "retry" and offer.book.state == "queued" and offer.book.output == "bad.m4b"


def test_move_to_failed_numbers_names_and_writes_the_reason(tmp_path):
    for attempt in range(2):
        book = drop(tmp_path, "x.epub", b"junk %d" % attempt)
        watch.move_to_failed(tmp_path, book, "x.epub: not an EPUB\n(not a zip archive)")
    failed = tmp_path / "failed"
    assert sorted(p.name for p in failed.iterdir()) == [
        "x (2).epub", "x (2).epub.reason.txt", "x.epub", "x.epub.reason.txt"]
    assert (failed / "x.epub").read_bytes() == b"junk 0"
    assert (failed / "x.epub.reason.txt").read_text() == "x.epub: not an EPUB (not a zip archive)\n"


def test_second_watcher_for_the_same_folders_is_refused(tmp_path):
    lock = tmp_path / "q.lock"
    with watch.instance_lock(lock, tmp_path, tmp_path):
        with pytest.raises(InputError, match=f"pid {os.getpid()}"):
            with watch.instance_lock(lock, tmp_path, tmp_path):
                pass
    with watch.instance_lock(lock, tmp_path, tmp_path):  # free again
        pass


# ------------------------------------------------------------------------------------------
# Scanner and converter, in process


def make_scanner(tmp_path, in_dir, queue):
    log = watch.WatchLog(tmp_path / "watch.log", echo=None)
    return watch.Scanner(in_dir, queue, Arrivals(settle=0.0), log, rescan_every=0.0), log


def log_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_rescans_find_books_without_file_events_and_report_a_duplicate_once(tmp_path):
    in_dir = tmp_path / "in"
    in_dir.mkdir()
    queue = WatchQueue(tmp_path / "q.sqlite3", tmp_path)
    scanner, log = make_scanner(tmp_path, in_dir, queue)
    data = numbered_book(1)[0]
    drop(in_dir, "a.epub", data)
    drop(in_dir, "b.epub", data)
    drop(in_dir, "c.epub.part", data)
    drop(in_dir, ".d.epub", data)
    assert not scanner.idle
    for _ in range(5):  # no watchdog here: the folder scans alone find the books
        scanner.step()
    assert scanner.idle
    assert [(b.name, b.state) for b in queue.books()] == [("a.epub", "queued")]
    lines = log_lines(log.path)
    assert sum(" queued " in line for line in lines) == 1
    assert sum(" duplicate " in line and "b.epub" in line for line in lines) == 1
    assert not any("c.epub.part" in line or ".d.epub" in line for line in lines)


def fake_convert(book_path: Path, out_path: Path, options, progress) -> ConvertResult:
    stem = Path(book_path).stem
    if stem == "broken":
        raise InputError("broken.epub: not a readable EPUB (the zip archive is truncated or damaged)")
    if stem == "job":
        raise JobFailed("1 segment(s) failed")
    if stem == "stop":
        raise render.Interrupted(3, 10)
    Path(out_path).write_bytes(b"m4b")
    return ConvertResult(Path(out_path), 60.0, 2, 5, 5, Path("/tmp"))


def test_converter_outcomes(tmp_path, monkeypatch):
    monkeypatch.setattr(render, "convert", fake_convert)
    in_dir, out_dir = tmp_path / "in", tmp_path / "out"
    in_dir.mkdir()
    out_dir.mkdir()
    queue = WatchQueue(tmp_path / "q.sqlite3", out_dir)
    log = watch.WatchLog(out_dir / watch.LOG_NAME, echo=None)
    shas = {}
    for n, stem in enumerate(["good", "broken", "job", "stop", "gone"], 1):
        path = drop(in_dir, f"{stem}.epub", numbered_book(n)[0])
        shas[stem] = watch.sha256_file(path)
        queue.offer(path, shas[stem], signature_of(path))
    (in_dir / "gone.epub").unlink()
    converter = watch.Converter(in_dir, out_dir, queue, log, ConvertOptions(voice="tone"))

    for _ in range(3):
        assert converter.convert_next()
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C / SIGTERM mid-book
        converter.convert_next()
    state = {stem: queue.book(sha) for stem, sha in shas.items()}
    assert state["good"].state == "done" and (out_dir / "good.m4b").exists()
    assert (in_dir / "good.epub").exists()  # the source stays where it was
    assert state["broken"].state == "failed" and state["broken"].error_kind == "book"
    assert not (in_dir / "broken.epub").exists()
    assert (in_dir / "failed" / "broken.epub.reason.txt").read_text().strip() == (
        "broken.epub: not a readable EPUB (the zip archive is truncated or damaged)")
    assert state["job"].state == "failed" and state["job"].error_kind == "job"
    assert (in_dir / "job.epub").exists()  # not the book's fault: left in place
    assert state["stop"].state == "queued"  # the interrupted book stays queued

    monkeypatch.setattr(render, "convert", lambda *a: fake_convert(in_dir / "good.epub", *a[1:]))
    assert converter.convert_next()  # "stop" again, now finishing
    assert queue.book(shas["stop"]).state == "done"
    assert queue.book(shas["stop"]).attempts == 2
    assert converter.convert_next()  # "gone": forgotten, not converted
    assert queue.book(shas["gone"]) is None
    assert not converter.convert_next()
    lines = log_lines(out_dir / watch.LOG_NAME)
    assert any(" converting stop.epub" in line and "(resuming)" in line for line in lines)
    assert any(" forgotten  gone.epub" in line for line in lines)


# ------------------------------------------------------------------------------------------
# End to end: 20 files dropped at once, a crash, a stop, a restart

FFPROBE = shutil.which("ffprobe")


def ffprobe_chapters(path: Path) -> int:
    probe = json.loads(subprocess.run(
        [FFPROBE, "-v", "error", "-show_format", "-show_chapters", "-of", "json", str(path)],
        check=True, capture_output=True, text=True).stdout)
    assert "mp4" in probe["format"]["format_name"], probe["format"]
    return len(probe["chapters"])


def write_slowly(path: Path, data: bytes, pieces: int, pause: float) -> None:
    step = -(-len(data) // pieces)
    with open(path, "wb") as f:
        for start in range(0, len(data), step):
            f.write(data[start:start + step])
            f.flush()
            if start + step < len(data):
                time.sleep(pause)


class Run:
    """One watcher process, in its own process group so that a SIGKILL takes its workers too."""

    def __init__(self, tmp_path: Path, env: dict, args: list[str], tag: str):
        self.stderr_path = tmp_path / f"watcher-{tag}.stderr"
        self.stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "epub2audio.watch", *args], env=env, stdout=subprocess.DEVNULL,
            stderr=self.stderr, start_new_session=True)

    def finish(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.stderr.close()

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.finish(SAFETY_SECONDS)

    def alive(self) -> bool:
        return self.process.poll() is None


def db_states(db: Path) -> dict[str, str]:
    if not db.exists():
        return {}
    con = sqlite3.connect(db, timeout=10)
    try:
        return dict(con.execute("SELECT sha256, state FROM books").fetchall())
    except sqlite3.OperationalError:  # the watcher has not made the tables yet
        return {}
    finally:
        con.close()


def wait_until(condition, what: str, run: Run):
    try:
        return wait_for(condition, what, run.alive)
    except AssertionError as error:
        pytest.fail(f"{error}; watcher stderr:\n{run.stderr_path.read_text()[-3000:]}")


def hold_when(gate: Gate, condition, what: str, run: Run) -> None:
    """Let held workers through until `condition()` is true while one is held, then keep that one
    at the gate: the watcher is then converting a book and stays so until the test acts."""
    def held_and_ready():
        held = gate.held()  # first the tickets: a held worker's book cannot finish meanwhile
        if held and condition():
            return True
        for ticket in held:
            gate.release(ticket)
        return False

    wait_until(held_and_ready, what, run)


@pytest.mark.slow
@pytest.mark.skipif(FFPROBE is None, reason="needs ffprobe to check the M4B files")
def test_watch_folder_end_to_end(tmp_path, monkeypatch):
    from epub2audio.book.epub import load_book

    in_dir, out_dir, staging = tmp_path / "in", tmp_path / "out", tmp_path / "staging"
    for folder in (in_dir, out_dir, staging):
        folder.mkdir()
    env = dict(os.environ, EPUB2AUDIO_DATA_DIR=str(tmp_path / "data"), EPUB2AUDIO_CACHE_DIR=str(tmp_path / "cache"),
               EPUB2AUDIO_CONFIG=str(tmp_path / "no-config.toml"), PYTHONUNBUFFERED="1")
    for key in ("EPUB2AUDIO_DATA_DIR", "EPUB2AUDIO_CACHE_DIR"):
        monkeypatch.setenv(key, env[key])
    db = watch.queue_path(in_dir, out_dir)
    log_path = out_dir / watch.LOG_NAME
    args = [str(in_dir), "--out", str(out_dir), "--voice", "tone", "--settle", "1", "--progress", "none"]
    watching = [*args, "--rescan", "600"]  # file events must do the work: no rescan to fall back on
    # Watchers 1 and 2 convert through a gate (every book waits at its "The fox waited" sentence
    # until the test lets it on), so each is stopped mid-book at a point the test chooses.
    gate = Gate(tmp_path / "gate", "The fox waited")
    gated = dict(env, EPUB2AUDIO_FAULTS=gate.faults)

    # 17 valid books (3 of them copied slowly), a duplicate, 2 broken files: 20 files; and 3 to ignore.
    books = {f"Book {n:02d}.epub": numbered_book(n) for n in range(1, 18)}
    slow = {"Book 15.epub": (8, 0.3), "Book 16.epub": (8, 0.3),  # a piece every 0.3 s: never quiet for 1 s
            "Book 17.epub": (2, 2.5)}  # stalls 2.5 s half-way: only the zip check sees it is not complete
    broken = {"Broken truncated.epub": books["Book 02.epub"][0][:900],
              "Not a zip.epub": b"This is not an EPUB at all.\n" * 20}
    duplicate = ("Copy of Book 01.epub", books["Book 01.epub"][0])
    ignored = {"Book 99.epub.part": numbered_book(99)[0], ".Book 98.epub": numbered_book(98)[0],
               "cover.jpg": b"not a book\n"}
    (out_dir / "Book 03.m4b").write_bytes(b"the user's own file, not ours")  # a name clash

    expected_messages = {}
    for name, data in broken.items():  # what the engine says about each broken file
        (staging / name).write_bytes(data)
        with pytest.raises(InputError) as error:
            load_book(staging / name)
        expected_messages[name] = " ".join(str(error.value).split())

    # 1. Start watching, drop everything at once, SIGKILL the watcher while a book is converting.
    first = Run(tmp_path, gated, watching, "1")
    wait_until(lambda: " watching " in "".join(log_lines(log_path)), "the watcher to start", first)
    writers = [threading.Thread(target=write_slowly, args=(in_dir / name, books[name][0], *how))
               for name, how in slow.items()]
    for thread in writers:
        thread.start()
    for name, (data, _) in books.items():
        if name not in slow:
            (in_dir / name).write_bytes(data)
    for name, data in [*broken.items(), duplicate, *ignored.items()]:
        (in_dir / name).write_bytes(data)
    ignored_before = {name: (in_dir / name).stat().st_mtime_ns for name in ignored}

    def midway():
        states = list(db_states(db).values())
        return states.count("done") >= 3 and "converting" in states

    hold_when(gate, midway, "three books done and a fourth converting", first)
    first.kill()
    for ticket in gate.held():  # the killed worker's
        gate.release(ticket)
    (killed,) = [sha for sha, state in db_states(db).items() if state == "converting"]
    done_at_kill = list(db_states(db).values()).count("done")

    # 2. Restart: it resumes the killed book. Stop it with SIGTERM while converting: exit 130,
    #    and whatever was in flight is back in the queue.
    second = Run(tmp_path, gated, watching, "2")

    def converting_again():
        started = sum(" watching " in line for line in log_lines(log_path)) == 2
        states = list(db_states(db).values())
        return started and states.count("done") > done_at_kill and "converting" in states

    hold_when(gate, converting_again, "the restarted watcher to convert", second)
    second.process.send_signal(signal.SIGTERM)
    assert second.finish(SAFETY_SECONDS) == 130, second.stderr_path.read_text()
    assert "converting" not in db_states(db).values()
    assert any(" stopped " in line for line in log_lines(log_path))

    # 3. --once: finish the queue and whatever is still arriving, then exit.
    third = Run(tmp_path, env, [*args, "--once"], "3")  # no gate
    assert third.finish(SAFETY_SECONDS) == 0, third.stderr_path.read_text()
    for thread in writers:
        thread.join()

    lines = log_lines(log_path)
    shas = {name: watch.sha256_file(in_dir / name) for name in books}
    con = sqlite3.connect(db)
    rows = {r[0]: r[1:] for r in con.execute("SELECT sha256, state, error_kind, output FROM books")}
    con.close()

    # Every valid book converted exactly once, into a valid M4B with its chapters.
    for name, (data, chapter_count) in books.items():
        sha = shas[name]
        assert (in_dir / name).read_bytes() == data  # the source stays, untouched
        converted = [line for line in lines if " converted " in line and f"[{sha[:12]}]" in line]
        assert len(converted) == 1, (name, converted)
        state, _, output = rows[sha]
        assert state == "done"
        assert ffprobe_chapters(out_dir / output) == chapter_count, name
    assert sum(" converted " in line for line in lines) == len(books)
    assert any(" converting " in line and f"[{killed[:12]}]" in line and "(resuming)" in line for line in lines)
    assert (render.job_dir_for(out_dir / rows[killed][2]) / "job.sqlite3").exists()

    # The duplicate: logged, left alone, not converted again. Which of the two names was seen first
    # is up to the scheduler; the other one is the duplicate.
    pair = ["Book 01.epub", duplicate[0]]
    made = [name for name in pair if (out_dir / name).with_suffix(".m4b").exists()]
    assert len(made) == 1, made
    (other,) = set(pair) - set(made)
    assert any(" duplicate " in line and other in line for line in lines)
    assert (in_dir / duplicate[0]).read_bytes() == duplicate[1]

    # The name clash: the user's file is untouched, ours got a number.
    assert (out_dir / "Book 03.m4b").read_bytes() == b"the user's own file, not ours"
    assert rows[shas["Book 03.epub"]][2] == "Book 03 (2).m4b"
    expected_outputs = {Path(n).with_suffix(".m4b").name for n in books if n != "Book 01.epub"}
    expected_outputs |= {"Book 03 (2).m4b", Path(made[0]).with_suffix(".m4b").name}
    assert {p.name for p in out_dir.glob("*.m4b") if not p.name.startswith(".")} == expected_outputs

    # Broken books: in failed/, each with the engine's message beside it.
    failed = in_dir / "failed"
    assert sorted(p.name for p in failed.iterdir()) == sorted(
        [*broken, *(f"{name}.reason.txt" for name in broken)])
    for name, data in broken.items():
        assert not (in_dir / name).exists()
        assert (failed / name).read_bytes() == data
        assert (failed / f"{name}.reason.txt").read_text(encoding="utf-8").strip() == expected_messages[name]
    assert sorted(state for state, kind, _ in rows.values() if kind == "book") == ["failed", "failed"]
    assert len(rows) == len(books) + len(broken)

    # Ignored files: untouched and never mentioned.
    for name, data in ignored.items():
        assert (in_dir / name).read_bytes() == data
        assert (in_dir / name).stat().st_mtime_ns == ignored_before[name]
        assert not any(name in line for line in lines)


def json_events(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_killed_watcher_resumes_a_half_converted_book_from_the_engines_job(tmp_path):
    """SIGKILL after part of a long book is rendered: the restart renders only the rest.

    The gate holds the first run at sentence 60 of 160, so the kill lands mid-book with work both
    done and left, whatever the machine's speed; the book is no longer than that needs."""
    in_dir, out_dir = tmp_path / "in", tmp_path / "out"
    in_dir.mkdir()
    out_dir.mkdir()
    sentences = " ".join(f"Sentence {i} of this chapter, with a few more words to read aloud." for i in range(80))
    (in_dir / "long.epub").write_bytes(epub_bytes("Long", [("One", sentences), ("Two", sentences + " The end.")]))
    env = dict(os.environ, EPUB2AUDIO_DATA_DIR=str(tmp_path / "data"), EPUB2AUDIO_CACHE_DIR=str(tmp_path / "cache"),
               EPUB2AUDIO_CONFIG=str(tmp_path / "no-config.toml"), PYTHONUNBUFFERED="1")
    args = [str(in_dir), "--out", str(out_dir), "--voice", "tone", "--settle", "0.5", "--progress", "json"]

    gate = Gate(tmp_path / "gate", "Sentence sixty of")  # the first run is held there, then killed

    def segments(path: Path) -> int:
        return sum(e["event"] == "segment" for e in json_events(path))

    first_out = tmp_path / "first.jsonl"
    with open(first_out, "wb") as stdout:
        first = subprocess.Popen([sys.executable, "-m", "epub2audio.watch", *args],
                                 env=dict(env, EPUB2AUDIO_FAULTS=gate.faults), stdout=stdout,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
        gate.wait_held(lambda: first.poll() is None)
        wait_for(lambda: segments(first_out) >= 50, "the segments before the gate to be reported",
                 lambda: first.poll() is None)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(SAFETY_SECONDS)
    rendered_before = segments(first_out)

    second_out = tmp_path / "second.jsonl"
    with open(second_out, "wb") as stdout:
        assert subprocess.run([sys.executable, "-m", "epub2audio.watch", *args, "--once"], env=env,
                              stdout=stdout, stderr=subprocess.DEVNULL, timeout=SAFETY_SECONDS).returncode == 0
    events = json_events(second_out)
    (plan,) = [e for e in events if e["event"] == "plan"]
    assert plan["cached"] >= rendered_before >= 50  # what was rendered before the kill is kept
    assert plan["to_render"] == plan["total"] - plan["cached"]
    actions = [(e["action"], e["file"]) for e in events if e["event"] == "watch"]
    assert ("resuming", "long.epub") in actions and ("converted", "long.epub") in actions
    assert (out_dir / "long.m4b").exists()


@pytest.mark.parametrize("extra, message", [
    (["--voice", "no-such-voice"], "unknown voice"),
    (["--workers", "0"], "--workers"),
    (["--settle", "-1"], "--settle"),
])
def test_bad_arguments_exit_with_2(tmp_path, monkeypatch, capsys, extra, message):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "no-config.toml"))
    assert watch.main([str(tmp_path), "--out", str(tmp_path), *extra]) == 2
    assert message in capsys.readouterr().err
    assert watch.main([str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
