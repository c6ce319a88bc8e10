"""The watcher's web page in a real browser: Debian's headless chromium, driven by Playwright
through executable_path (Playwright never downloads a browser here). A watcher runs as a user runs
it, in its own process with `--web 127.0.0.1:0`; the tests drop a corpus book and wait until it is
done, play the first second of the M4B in the page, try a voice, cancel a book held mid-way (at a
gate, so that nothing races the clock), and are refused without the token on a non-local address.

Skipped only where chromium is not installed (`make system-deps` installs it)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_watch import epub_bytes
from worker_gate import SAFETY_SECONDS, Gate, wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (make system-deps)"),
    pytest.mark.xdist_group("chromium"),  # one browser per worker process is plenty on 2 cores
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the dev extra (playwright) is not installed")

CORPUS = Path(__file__).resolve().parent / "corpus"
SHORT_BOOK = CORPUS / "whaling-glossary-dictionary-a-z-epub3.epub"  # about 3,000 characters
WAIT_MS = SAFETY_SECONDS * 1000  # only a hang waits this long


@pytest.fixture(scope="module")
def browser():
    with playwright_sync.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--autoplay-policy=no-user-gesture-required"])
        yield browser
        browser.close()


class Watcher:
    """`python -m epub2audio.watch IN --out OUT --voice tone --web ADDRESS` in its own process."""

    def __init__(self, tmp_path: Path, address: str, env_extra: dict | None = None):
        self.in_dir, self.out_dir = tmp_path / "in", tmp_path / "out"
        self.in_dir.mkdir()
        self.out_dir.mkdir()
        env = dict(os.environ, EPUB2AUDIO_DATA_DIR=str(tmp_path / "data"), EPUB2AUDIO_CACHE_DIR=str(tmp_path / "cache"),
                   EPUB2AUDIO_CONFIG=str(tmp_path / "no-config.toml"), PYTHONUNBUFFERED="1", **(env_extra or {}))
        self.stderr_path = tmp_path / "watch.err"
        with open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "epub2audio.watch", str(self.in_dir), "--out", str(self.out_dir),
                 "--voice", "tone", "--settle", "0.5", "--progress", "none", "--web", address],
                env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        found = wait_for(self._url, "the web page to start", self.alive)
        self.url = found.group(1)

    def _url(self):
        log = self.out_dir / "epub2audio-watch.log"
        text = log.read_text(encoding="utf-8") if log.exists() else ""
        return re.search(r" web +(http://\S+/)", text)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(SAFETY_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()


@pytest.fixture
def watcher_factory(tmp_path):
    started = []

    def start(address="127.0.0.1:0", env_extra=None, name="w"):
        folder = tmp_path / name
        folder.mkdir()
        started.append(Watcher(folder, address, env_extra))
        return started[-1]

    yield start
    for watcher in started:
        watcher.stop()


def drop(page, book: Path) -> None:
    """A file dropped on the drop zone: the browser's own drop event, with the file in its DataTransfer."""
    page.evaluate("""([data, name]) => {
        const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
        const transfer = new DataTransfer();
        transfer.items.add(new File([bytes], name, { type: "application/epub+zip" }));
        document.getElementById("drop").dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true }));
    }""", [base64.b64encode(book.read_bytes()).decode(), book.name])


def _row(page, name: str):
    return page.locator("#queue tbody tr", has_text=name)


def test_drop_a_book_wait_until_done_play_it_and_try_a_voice(browser, watcher_factory):
    watcher = watcher_factory()
    page = browser.new_page()
    page.goto(watcher.url)
    drop(page, SHORT_BOOK)  # dragged onto the page, as from a file manager
    page.wait_for_selector("#uploads li:has-text('in the folder as')")
    row = _row(page, SHORT_BOOK.name)
    row.locator("td.state-done").wait_for(timeout=WAIT_MS)
    assert (watcher.out_dir / SHORT_BOOK.with_suffix(".m4b").name).is_file()

    # after: the plan and the player
    row.locator("button[data-action=listen]").click()
    page.wait_for_selector("#chapters tbody tr")
    titles = page.locator("#chapters tbody tr td:nth-child(2)").all_inner_texts()
    assert titles[:2] == ["A", "B"] and len(titles) == 26
    begins = page.locator("#chapters tbody tr td:nth-child(5)").all_inner_texts()  # --preview's first words
    assert begins[0].startswith("“Aft Towards the stern of a ship.") and all(b.startswith("“") for b in begins)
    assert "title page" in page.locator("#skipped").inner_text()
    page.wait_for_function("document.getElementById('audio').readyState >= 1", timeout=WAIT_MS)
    duration = page.evaluate("document.getElementById('audio').duration")
    assert duration > 60  # the whole book, in the page's own player
    page.evaluate("document.getElementById('audio').play()")
    page.wait_for_function("document.getElementById('audio').currentTime >= 1", timeout=WAIT_MS)
    page.evaluate("document.getElementById('audio').pause()")
    assert page.locator("#downloads a", has_text="audiobook").get_attribute("href").startswith("/files/")

    # a voice tried in the page
    page.wait_for_selector("#voice option[value=tone]", state="attached")
    page.select_option("#voice", "tone")
    page.fill("#try-text", "Call me Ishmael.")
    page.click("#try")
    page.wait_for_function("document.getElementById('try-audio').duration > 0", timeout=WAIT_MS)
    assert page.locator("#try-state").inner_text() == ""


def test_cancel_a_book_being_converted(browser, watcher_factory, tmp_path):
    gate = Gate(tmp_path / "gate", "The fox waited")  # the worker waits there until the test lets it on
    watcher = watcher_factory(env_extra={"EPUB2AUDIO_FAULTS": gate.faults})
    long_book = tmp_path / "Long.epub"
    text = " ".join(f"Sentence {i} of the long book." for i in range(40)) + " The fox waited by the river."
    long_book.write_bytes(epub_bytes("Long", [("One", text), ("Two", text)]))
    page = browser.new_page()
    page.goto(watcher.url)
    page.set_input_files("#pick", str(long_book))  # picked with the file chooser
    row = _row(page, "Long.epub")
    row.locator("td.state-converting").wait_for(timeout=WAIT_MS)
    ticket = gate.wait_held(watcher.alive)
    row.locator("button[data-action=cancel]").click()
    # "cancelling" may be too brief to be seen: the converter stops the book at the next progress
    # event, which another worker may send at once (a run at load 4 waited here for a state gone by).
    row.locator("td.state-cancelling, td.state-cancelled").first.wait_for(timeout=WAIT_MS)
    gate.open()
    Gate.release(ticket)
    row.locator("td.state-cancelled").wait_for(timeout=WAIT_MS)
    assert not (watcher.out_dir / "Long.m4b").exists()
    assert row.locator("button[data-action=retry]").count() == 1
    assert " cancelled  Long.epub" in (watcher.out_dir / "epub2audio-watch.log").read_text(encoding="utf-8")


def test_a_non_local_address_refuses_a_browser_without_the_token(browser, watcher_factory):
    watcher = watcher_factory(address="0.0.0.0:0")
    url = watcher.url.replace("0.0.0.0", "127.0.0.1")
    page = browser.new_page()
    refused = page.goto(url)
    assert refused.status == 401 and "needs its token" in page.content()
    (line,) = [ln for ln in watcher.stderr_path.read_text(encoding="utf-8").splitlines() if "?token=" in ln]
    token = line.rpartition("?token=")[2]
    entered = page.goto(f"{url}?token={token}")
    assert entered.status == 200 and page.url == url  # the token left the address bar for a cookie
    page.wait_for_selector("#connection:has-text('live')")
    assert page.evaluate("fetch('/api/state').then(r => r.status)") == 200
    other = browser.new_page()  # another browser context: no cookie
    assert other.goto(url + "api/state").status == 401
