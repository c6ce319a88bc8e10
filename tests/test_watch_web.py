"""The watcher's web page, through Starlette's TestClient: uploads (atomic, typed by content, named
safely, size-limited), the token and the Host and write-header checks, the queue's Cancel and
Retry, plans, downloads that never leave OUT_DIR, voices, the event stream, and the converter
stopping a cancelled book. The page in a real browser: test_watch_web_browser.py."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed (pip install 'epub2audio[web]')")
from starlette.testclient import TestClient  # noqa: E402

from epub2audio import render, watch  # noqa: E402
from epub2audio.book import listing  # noqa: E402
from epub2audio.book.epub import load_book  # noqa: E402
from epub2audio.errors import InputError  # noqa: E402
from epub2audio.render import ConvertOptions, ConvertResult  # noqa: E402
from epub2audio.watch.converter import Converter  # noqa: E402
from epub2audio.watch.hub import Hub  # noqa: E402
from epub2audio.watch.web import Door, WebSettings, create_app, text, upload_stem, web_settings  # noqa: E402
from test_watch import epub_bytes  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "corpus"
GLOSSARY = CORPUS / "whaling-glossary-dictionary-a-z-epub3.epub"
LOCAL = "http://127.0.0.1:8080"
WRITE = {"X-Epub2audio": "1"}
TOKEN = "a-token-of-the-tests-0123456789"


class Page:
    def __init__(self, tmp_path: Path, host: str = "127.0.0.1", token: str | None = None, max_upload: int = 1 << 20):
        self.in_dir, self.out_dir = tmp_path / "in", tmp_path / "out"
        self.in_dir.mkdir(exist_ok=True)
        self.out_dir.mkdir(exist_ok=True)
        self.db = tmp_path / "queue.sqlite3"
        self.queue = watch.WatchQueue(self.db, self.out_dir)
        self.hub, self.woken = Hub(), []
        self.door = Door(self.in_dir, self.out_dir, watch.WatchQueue(self.db, self.out_dir), self.hub,
                         ConvertOptions(voice="tone"), wake=lambda: self.woken.append(True))
        self.settings = WebSettings(host, 8080, token, max_upload)
        self.app = create_app(self.door, self.settings)

    def client(self, base_url: str = LOCAL) -> TestClient:
        return TestClient(self.app, base_url=base_url)

    def offer(self, name: str, data: bytes) -> str:
        path = self.in_dir / name
        path.write_bytes(data)
        sha = watch.sha256_file(path)
        self.queue.offer(path, sha, watch.file_signature(path))
        return sha

    def upload(self, client, name: str, data: bytes):
        from urllib.parse import quote

        return client.post("/api/upload", content=data, headers={**WRITE, "X-Epub2audio-Name": quote(name)})


@pytest.fixture
def page(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "no-config.toml"))
    return Page(tmp_path)


BOOK = epub_bytes("Web Book", [("Chapter 1", "The fox waited by the river.")])


def docx_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document/>")
    return buffer.getvalue()


@pytest.mark.parametrize("client_name, data, placed", [
    ("Moby Dick.epub", BOOK, "Moby Dick.epub"),
    ("../../etc/passwd.epub", BOOK, "passwd.epub"),  # a path is only ever the name's last part
    ("..\\..\\Windows\\win.epub", BOOK, "win.epub"),
    (".hidden.epub", BOOK, "hidden.epub"),  # a hidden name would be ignored by the watcher
    ("new\nline\x00and\x1bcontrol.epub", BOOK, "newlineandcontrol.epub"),
    ("Книга «один»: 1?.epub", BOOK, "Книга «один» 1.epub"),
    ("", BOOK, "book.epub"),
    ("...", BOOK, "book.epub"),
    ("report.txt", docx_bytes(), "report.docx"),  # the content says DOCX; the name said TXT
    ("a book.pdf", b"CHAPTER 1.\n\nCall me Ishmael.\n", "a book.txt"),
    ("x" * 300 + ".epub", BOOK, "x" * 120 + ".epub"),
])
def test_an_upload_lands_in_the_folder_under_a_safe_name_its_content_chose(page, client_name, data, placed):
    with page.client() as client:
        answer = page.upload(client, client_name, data)
    assert answer.status_code == 201, answer.text
    assert answer.json()["name"] == placed
    assert sorted(os.listdir(page.in_dir)) == [placed]  # nothing else: no partial file left behind
    assert (page.in_dir / placed).read_bytes() == data
    assert watch.is_candidate(placed)


def test_while_an_upload_is_under_way_the_folder_holds_nothing_the_watcher_would_take(page):
    seen = []

    def chunks():
        half = len(BOOK) // 2
        yield BOOK[:half]
        seen.append(sorted(os.listdir(page.in_dir)))  # the first half is on disk, under its hidden name
        yield BOOK[half:]

    with page.client() as client:
        answer = client.post("/api/upload", content=chunks(), headers={**WRITE, "X-Epub2audio-Name": "Book.epub"})
    assert answer.status_code == 201
    (during,) = seen
    assert len(during) == 1 and during[0].startswith(".upload-") and during[0].endswith(".part")
    assert not watch.is_candidate(during[0])
    assert os.listdir(page.in_dir) == ["Book.epub"]


def test_a_taken_name_is_numbered_never_replaced(page):
    (page.in_dir / "Book.epub").write_bytes(b"the user's own")
    with page.client() as client:
        assert page.upload(client, "Book.epub", BOOK).json()["name"] == "Book (2).epub"
        assert page.upload(client, "Book.epub", BOOK).json()["name"] == "Book (3).epub"
    assert (page.in_dir / "Book.epub").read_bytes() == b"the user's own"


def test_upload_names_are_text_never_paths():
    assert upload_stem("a/b/c.EPUB") == "c"
    assert upload_stem("C:\\books\\d.azw3") == "d"
    assert upload_stem("e.epub.part") == "e.epub.part"  # not a book suffix: kept in the name


@pytest.mark.parametrize("data, status, words", [
    (b"\x89PNG\r\n\x1a\n" + bytes(64), 415, "not a book"),
    (docx_bytes().replace(b"word/document.xml", b"word/something.xml"), 415, "not a book"),  # a zip, no book
    (b"", 400, "empty"),
    (b"x" * 2000, 413, "larger than the limit"),
])
def test_an_upload_that_is_no_book_or_too_large_is_refused_and_leaves_nothing(tmp_path, monkeypatch, data,
                                                                                status, words):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    page = Page(tmp_path, max_upload=1000)
    with page.client() as client:
        answer = page.upload(client, "book.epub", data)
        assert answer.status_code == status
        assert words in answer.json()["error"]
        # a body without Content-Length (streamed) is counted as it comes
        if status == 413:
            answer = client.post("/api/upload", content=iter([b"x" * 600, b"x" * 600]),
                                 headers={**WRITE, "X-Epub2audio-Name": "b.epub"})
            assert answer.status_code == 413
    assert os.listdir(page.in_dir) == []


def test_another_address_needs_the_token(tmp_path):
    page = Page(tmp_path, host="0.0.0.0", token=TOKEN)
    with page.client("http://192.0.2.7:8080") as client:
        refused = client.get("/api/state")
        assert refused.status_code == 401
        assert refused.text.startswith("401: this page needs its token")
        assert client.get("/").status_code == 401
        assert client.get("/static/app.js").status_code == 401
        assert client.get("/?token=wrong-token-wrong-token").status_code == 401
        assert client.get("/api/state", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        entry = client.get(f"/?token={TOKEN}", follow_redirects=False)
        assert entry.status_code == 303 and entry.headers["location"] == "/"
        assert "httponly" in entry.headers["set-cookie"].lower()
        assert client.get("/api/state").status_code == 200  # the cookie now
        assert "<title>epub2audio</title>" in client.get("/").text


def test_a_loopback_page_answers_loopback_hosts_only_and_changes_need_the_header(page):
    with page.client("http://attacker.example:8080") as client:  # DNS rebinding
        assert client.get("/api/state").status_code == 403
    with page.client("http://localhost:8080") as client:
        assert client.get("/api/state").status_code == 200
    with page.client() as client:
        refused = client.post("/api/upload", content=BOOK, headers={"X-Epub2audio-Name": "a.epub"})
        assert refused.status_code == 403
    assert os.listdir(page.in_dir) == []


def test_cancel_and_retry_go_through_the_watchers_queue(page):
    sha = page.offer("Book.epub", BOOK)
    with page.client() as client:
        (book,) = client.get("/api/state").json()["books"]
        assert (book["id"], book["name"], book["state"], book["output"]) == (sha, "Book.epub", "queued", "Book.m4b")
        assert client.post(f"/api/books/{sha}/cancel", headers=WRITE).json() == {"was": "queued"}
        assert page.queue.book(sha).state == "failed" and page.queue.book(sha).error_kind == "cancelled"
        assert client.get("/api/state").json()["books"][0]["state"] == "cancelled"
        assert client.post(f"/api/books/{sha}/cancel", headers=WRITE).status_code == 409
        assert client.post(f"/api/books/{sha}/retry", headers=WRITE).json() == {"state": "queued"}
        assert page.queue.book(sha).state == "queued" and page.woken == [True]
        assert client.post(f"/api/books/{sha}/retry", headers=WRITE).status_code == 409
        assert client.post(f"/api/books/{'0' * 64}/cancel", headers=WRITE).status_code == 404
        assert client.post("/api/books/..%2F..%2Fetc/cancel", headers=WRITE).status_code == 404


def test_a_file_name_that_is_not_utf8_is_shown_as_valid_text():
    """(The queue itself cannot hold such a name yet: WatchQueue.offer fails on it.)"""
    assert text(os.fsdecode(b"caf\xe9.epub")) == "caf\ufffd.epub" and text(None) is None


def test_cancelling_the_book_being_converted_asks_the_converter(page):
    sha = page.offer("Book.epub", BOOK)
    page.queue.mark_converting(sha)
    with page.client() as client:
        assert client.post(f"/api/books/{sha}/cancel", headers=WRITE).json() == {"was": "converting"}
        assert client.get("/api/state").json()["books"][0]["state"] == "cancelling"
    assert page.queue.cancel_requested(sha)


def test_a_broken_book_retried_comes_back_from_failed(page):
    sha = page.offer("Broken.epub", b"PK\x03\x04 broken")
    moved = watch.move_to_failed(page.in_dir, page.in_dir / "Broken.epub", "Broken.epub: not a readable EPUB")
    page.queue.mark_failed(sha, "Broken.epub: not a readable EPUB", "book", moved)
    with page.client() as client:
        assert client.get("/api/state").json()["books"][0]["error"] == "Broken.epub: not a readable EPUB"
        assert client.post(f"/api/books/{sha}/retry", headers=WRITE).status_code == 200
    assert (page.in_dir / "Broken.epub").exists() and not (page.in_dir / "failed" / "Broken.epub.reason.txt").exists()
    assert page.queue.book(sha).source == page.in_dir / "Broken.epub"


def test_the_plan_is_the_books_chapters_and_skips(page):
    sha = page.offer("Glossary.epub", GLOSSARY.read_bytes())
    expected = load_book(GLOSSARY)
    with page.client() as client:
        plan = client.get(f"/api/books/{sha}/plan").json()
        assert client.get(f"/api/books/{'1' * 64}/plan").status_code == 404
    assert [c["title"] for c in plan["chapters"]] == [c.title for c in expected.chapters]
    assert [c["characters"] for c in plan["chapters"]] == [c.char_count for c in expected.chapters]
    assert [(s["title"], s["reason"]) for s in plan["skipped"]] == [(s.title, s.reason) for s in expected.skipped]
    assert plan["skipping"]["summary"].startswith("Skipping ")
    # what --list-chapters --preview shows: each chapter's first words after its title, each skipped part's
    assert [c["preview"] for c in plan["chapters"]] == [listing.chapter_preview(c) for c in expected.chapters]
    assert [s["preview"] for s in plan["skipped"]] == [s.preview for s in expected.skipped]
    assert all(c["preview"] for c in plan["chapters"])


def _done(page, name: str, written: str) -> str:
    sha = page.offer(name, BOOK + name.encode())
    page.queue.mark_done(sha, written)
    return sha


def test_downloads_are_the_watchers_own_files_and_never_leave_out(page, tmp_path):
    audio = page.out_dir / "Book.m4b"
    audio.write_bytes(bytes(range(256)) * 40)
    (page.out_dir / "Book.srt").write_text("1\n00:00:00,000 --> 00:00:01,000\nHello\n", encoding="utf-8")
    sha = _done(page, "Book.epub", "Book.m4b")
    (tmp_path / "secret.txt").write_text("not yours", encoding="utf-8")
    forged = _done(page, "Forged.epub", "../secret.txt")  # a record pointing out of OUT_DIR
    (page.out_dir / "Link.m4b").symlink_to(tmp_path / "secret.txt")
    linked = _done(page, "Link.epub", "Link.m4b")
    with page.client() as client:
        books = {b["id"]: b for b in client.get("/api/state").json()["books"]}
        assert books[sha]["files"] == {"audio": f"/files/{sha}/audio", "srt": f"/files/{sha}/srt"}
        assert books[forged]["files"] == {} and books[linked]["files"] == {}
        whole = client.get(f"/files/{sha}/audio")
        assert whole.content == audio.read_bytes() and whole.headers["content-type"] == "audio/mp4"
        part = client.get(f"/files/{sha}/audio", headers={"Range": "bytes=100-199"})
        assert part.status_code == 206 and part.content == audio.read_bytes()[100:200]  # the player seeks
        assert client.get(f"/files/{sha}/srt").text.endswith("Hello\n")
        for url in (f"/files/{forged}/audio", f"/files/{linked}/audio", f"/files/{sha}/vtt", f"/files/{sha}/..",
                    "/files/../secret.txt", f"/files/{sha}/..%2F..%2Fsecret.txt", "/static/../web.py",
                    "/static/%2e%2e/web.py"):
            assert client.get(url).status_code == 404, url


def test_voices_are_listed_and_one_is_tried(page):
    with page.client() as client:
        voices = client.get("/api/voices").json()
        assert "tone" in [v["name"] for v in voices["voices"]] and voices["current"] == "tone"
        said = client.post("/api/voices/try", json={"voice": "tone", "text": "Hello there."}, headers=WRITE)
        assert said.status_code == 200 and said.headers["content-type"] == "audio/wav"
        assert said.content[:4] == b"RIFF" and len(said.content) > 1000
        assert client.post("/api/voices/try", json={"voice": "nobody"}, headers=WRITE).status_code == 400
        assert client.post("/api/voices/try", json={"voice": "tone", "text": "x" * 301},
                           headers=WRITE).status_code == 400


def test_the_event_stream_sends_the_queue(page):
    sha = page.offer("Book.epub", BOOK)
    with page.client() as client, client.stream("GET", "/api/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines) == "event: state"
        data = json.loads(next(lines).removeprefix("data: "))
        assert [b["id"] for b in data["books"]] == [sha]
        page.app.app.state.closing.set()  # the server stopping ends the stream


def test_the_converter_stops_a_cancelled_book_at_its_next_progress_event(page, monkeypatch):
    """The web page's connection asks; the converter's connection sees it at the next event."""
    sha = page.offer("Book.epub", BOOK)
    seen = []

    def convert(book_path, out_path, options, progress):
        progress.emit("book", title="Web Book", chapters=1, segments=100, characters=1000)
        progress.emit("plan", total=100, cached=0, to_render=100, skipping={})
        for done in range(1, 101):
            if done == 4:
                page.door.cancel(sha)  # as the page's Cancel button does, from its own connection
            progress.emit("segment", done=done, total=100, chapter=0, index=done - 1, audio_seconds=1.0,
                          synth_seconds=0.1, eta_seconds=100 - done)
            seen.append(done)
        raise AssertionError("not stopped")

    monkeypatch.setattr(render, "convert", convert)
    log = watch.WatchLog(page.out_dir / watch.LOG_NAME, echo=None)
    log.listeners.append(page.hub.logged)
    converter = Converter(page.in_dir, page.out_dir, page.queue, log, ConvertOptions(voice="tone"),
                          listener=page.hub.progress)
    assert converter.convert_next()
    assert seen == [1, 2, 3]  # the 4th event raised
    book = page.queue.book(sha)
    assert (book.state, book.error_kind, book.cancel) == ("failed", "cancelled", 0)
    assert " cancelled  Book.epub" in (page.out_dir / watch.LOG_NAME).read_text(encoding="utf-8")
    assert (page.in_dir / "Book.epub").exists()  # the source stays; Retry resumes the job
    assert not converter.convert_next()  # nothing left queued


def test_the_hub_keeps_live_progress(page):
    hub = page.hub
    hub.logged("converting", "Book.epub", "", "ab" * 32)
    hub.progress("ab" * 32, "plan", {"total": 10, "cached": 4, "skipping": {"summary": "Skipping 1 part"}})
    hub.progress("ab" * 32, "segment", {"done": 2, "total": 6, "eta_seconds": 8.0})
    hub.progress("ab" * 32, "chapter", {"title": "Chapter 1", "done": 1, "total": 3})
    hub.progress("ab" * 32, "warning", {"message": "ch3.xhtml: only partly read"})
    live = hub.live("ab" * 32)
    assert (live["done"], live["total"], live["eta_seconds"], live["chapter_title"]) == (6, 10, 8.0, "Chapter 1")
    assert live["warnings"] == ["ch3.xhtml: only partly read"]


@pytest.mark.parametrize("flag, config, expected", [
    ("8080", {}, ("127.0.0.1", 8080, None)),
    ("localhost:9000", {}, ("localhost", 9000, None)),
    ("[::1]:9000", {}, ("::1", 9000, None)),
    ("0.0.0.0:9000", {"web_token": TOKEN}, ("0.0.0.0", 9000, TOKEN)),
    (None, {"web": "127.0.0.1:7000", "web_token": TOKEN}, ("127.0.0.1", 7000, TOKEN)),  # a token set is asked for
    (None, {}, None),
])
def test_web_settings(flag, config, expected):
    settings = web_settings(flag, config)
    assert (settings and (settings.host, settings.port, settings.token)) == expected


def test_a_non_local_address_gets_a_new_token_and_bad_settings_are_refused():
    assert len(web_settings("0.0.0.0:9000", {}).token) >= 32
    for flag, config in (("nope", {}), ("1.2.3.4:99999", {}), ("8080", {"web_token": "short"})):
        with pytest.raises(InputError):
            web_settings(flag, config)


def test_the_watch_command_prints_the_token_once_and_never_logs_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "no-config.toml"))
    in_dir, out_dir = tmp_path / "in", tmp_path / "out"
    in_dir.mkdir()
    out_dir.mkdir()
    assert watch.main([str(in_dir), "--out", str(out_dir), "--once", "--voice", "tone", "--web", "0.0.0.0:0"]) == 0
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if "token=" in ln]
    token = line.rpartition("?token=")[2]
    assert line.startswith("epub2audio watch: the web page is at http://0.0.0.0:") and len(token) >= 32
    log = (out_dir / watch.LOG_NAME).read_text(encoding="utf-8")
    assert " web        http://0.0.0.0:" in log and "(token needed)" in log and token not in log


def test_the_printed_address_takes_connections_before_the_server_thread_runs(page):
    """The address is printed when the socket listens, not when uvicorn's thread gets round to it:
    on a busy machine that thread starts late, and a browser sent to the address in the gap was
    refused (CI saw ERR_CONNECTION_REFUSED). A connection made now waits in the backlog."""
    import socket

    from epub2audio.watch.web import WebServer

    class Log:
        def say(self, *args):
            pass

    server = WebServer(WebSettings("127.0.0.1", 0, None, 1 << 20), page.door, Log())  # never started
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5):
            pass
    finally:
        server.socket.close()
