"""Crash safety: killed workers, a killed command, Ctrl-C, recycling and parallel workers never
change a byte of the audiobook, and a rerun recomputes only what was not finished."""

import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cli_run import THREE_CHAPTERS, epub2audio, story_epub
from epub2audio.progress import Progress
from epub2audio.render import ConvertOptions, convert
from epub2audio.worker.supervisor import WorkerPolicy
from run_cache import built_once
from worker_gate import SAFETY_SECONDS, Gate

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _book_and_reference(folder: Path) -> Path:
    """The book, and its uninterrupted conversion every other run must equal, byte for byte."""
    (folder / "book").mkdir(), (folder / "reference").mkdir()
    book = story_epub(folder / "book", THREE_CHAPTERS)
    env = {**os.environ, "EPUB2AUDIO_CACHE_DIR": str(folder / "cache")}
    run = epub2audio(book, "-o", folder / "reference" / "story.m4b", env=env)
    assert run.code == 0, run.stderr
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    # Once per test run (run_cache.built_once): the tests that need it run in both xdist workers.
    return built_once(tmp_path_factory, "resume-book-and-reference", _book_and_reference, in_place=True)


@pytest.fixture(scope="module")
def book(built) -> Path:
    return built / "book" / "story.epub"  # read only: each test converts it into its own folder


@pytest.fixture(scope="module")
def reference(built) -> str:
    return sha(built / "reference" / "story.m4b")


def worker_pids() -> list[int]:
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in map(int, children):
            try:
                if b"epub2audio.worker.child" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    pids.append(pid)
            except OSError:
                pass
    return pids


def test_killing_workers_at_random_points_changes_no_byte(book, reference, tmp_path, monkeypatch):
    out = tmp_path / "story.m4b"
    # The last segment waits at the gate until the killer has struck five times, so the book
    # cannot finish first, however fast the machine.
    gate = Gate(tmp_path / "gate", "Then it was night.")
    monkeypatch.setenv("EPUB2AUDIO_FAULTS", gate.faults)
    kills, stop = [], threading.Event()
    chance = random.Random(7)

    def killer():
        while not stop.is_set() and len(kills) < 5:
            time.sleep(chance.uniform(0.2, 1.2))
            for pid in worker_pids():
                os.kill(pid, signal.SIGKILL)
                kills.append(pid)
        gate.open()

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        result = convert(book, out, ConvertOptions(policy=WorkerPolicy(retries=8)), Progress())
    finally:
        stop.set()
        thread.join()
    assert len(kills) >= 5, "the killer should have hit several workers"
    assert result.segments == 12  # 3 headings and 9 sentences
    assert sha(out) == reference


def test_killing_the_command_mid_book_resumes_with_only_in_flight_work_redone(book, reference, tmp_path):
    out = tmp_path / "story.m4b"
    gate = Gate(tmp_path / "gate", "A bell rang twice.")  # the 8th of 12 segments waits there
    proc = subprocess.Popen([sys.executable, "-m", "epub2audio.cli", str(book), "-o", str(out),
                             "--progress", "json"], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "EPUB2AUDIO_FAULTS": gate.faults})
    seen = 0
    for line in proc.stdout:
        if '"event": "segment"' in line:
            seen += 1
            if seen == 4:
                break
    gate.wait_held(alive=lambda: proc.poll() is None)
    proc.kill()
    proc.wait()
    assert seen == 4
    assert not out.exists() and not list(tmp_path.glob("*.m4b"))

    run = epub2audio(book, "-o", out, "--progress", "json")
    assert run.code == 0, run.stderr
    [plan] = run.events("plan")
    assert plan["total"] == 12
    # At most the one segment the single worker had in flight is done again.
    assert plan["cached"] >= seen and plan["to_render"] == 12 - plan["cached"]
    assert sha(out) == reference


def test_ctrl_c_leaves_a_resumable_job_and_no_partial_m4b(book, reference, tmp_path):
    out = tmp_path / "story.m4b"
    gate = Gate(tmp_path / "gate", "Nobody spoke.")  # the 4th segment waits there until Ctrl-C
    # A command started in the background by a non-interactive shell inherits SIGINT ignored (and
    # so does this test's child): give it Ctrl-C back, as a terminal would have it.
    proc = subprocess.Popen([sys.executable, "-m", "epub2audio.cli", str(book), "-o", str(out),
                             "--progress", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "EPUB2AUDIO_FAULTS": gate.faults},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in proc.stdout:
        if '"event": "segment"' in line:
            break
    gate.wait_held(alive=lambda: proc.poll() is None)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=SAFETY_SECONDS)
    assert proc.returncode == 130
    assert "run the same command again to resume" in stderr
    assert not out.exists()
    run = epub2audio(book, "-o", out, "--progress", "json")
    assert run.code == 0 and run.events("plan")[0]["cached"] >= 1
    assert sha(out) == reference


def test_forced_recycling_changes_no_byte(book, reference, tmp_path):
    out = tmp_path / "story.m4b"
    env = {**os.environ, "EPUB2AUDIO_MAX_REQUESTS_PER_WORKER": "2"}
    run = epub2audio(book, "-o", out, env=env)
    assert run.code == 0, run.stderr
    assert sha(out) == reference


def test_two_workers_give_the_same_bytes_as_one(book, reference, tmp_path):
    out = tmp_path / "story.m4b"
    run = epub2audio(book, "-o", out, "--workers", "2")
    assert run.code == 0, run.stderr
    assert sha(out) == reference


def test_an_edited_book_re_renders_only_the_changed_sentences(tmp_path):
    original = story_epub(tmp_path, THREE_CHAPTERS, name="v1.epub")
    edited_chapters = [list(c) for c in THREE_CHAPTERS]
    edited_chapters[1] = ("Two", ["By noon the fog had gone. The boats came out.", "A bell rang twice."])
    edited = story_epub(tmp_path, edited_chapters, name="v2.epub")
    out = tmp_path / "story.m4b"
    assert epub2audio(original, "-o", out, "--voice", "tone").code == 0
    run = epub2audio(edited, "-o", out, "--voice", "tone", "--progress", "json")
    assert run.code == 0
    [plan] = run.events("plan")
    assert (plan["total"], plan["to_render"]) == (12, 1)  # only "By noon the fog had gone."


def test_a_segment_that_keeps_failing_fails_the_job_clearly_and_keeps_the_rest(tmp_path):
    book = story_epub(tmp_path, THREE_CHAPTERS)
    out = tmp_path / "story.m4b"
    env = {**os.environ, "EPUB2AUDIO_FAULTS": "crash_on=bell rang"}
    run = epub2audio(book, "-o", out, "--voice", "tone", "--progress", "json", env=env)
    assert run.code == 1
    assert run.stderr.strip() == (
        "epub2audio: error: 1 segment(s) failed, e.g. chapter 2 segment 4: worker exited with exit code 9 "
        "while synthesising (3 attempts). Finished segments are kept; rerun to retry.")
    assert not out.exists()
    run = epub2audio(book, "-o", out, "--voice", "tone", "--progress", "json")
    assert run.code == 0 and run.events("plan")[0]["to_render"] == 1


def test_regen_remakes_one_segment_byte_identically(book, reference, tmp_path):
    out = tmp_path / "story.m4b"
    assert epub2audio(book, "-o", out).code == 0
    run = epub2audio("regen", out, "--segment", "2.3")
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == (f"Segment 2.3 ('The boats came out.') re-made: identical to the stored audio. "
                                  f"Wrote {out}")
    assert sha(out) == reference
    run = epub2audio("regen", out, "--segment", "2.9")
    assert (run.code, run.stderr.strip()) == (2, f"epub2audio: error: {out}: the job has no segment 9 in chapter 2")
    run = epub2audio("regen", tmp_path / "other.m4b", "--segment", "1.1")
    assert run.code == 2 and "no conversion job found" in run.stderr


def test_a_partial_m4b_left_by_a_killed_run_is_removed_by_the_next(tmp_path):
    book = story_epub(tmp_path, THREE_CHAPTERS)
    out = tmp_path / "story.m4b"
    stale = tmp_path / ".story.0badf00d.partial.m4b"
    stale.write_bytes(b"half an audiobook")
    other = tmp_path / ".other.0badf00d.partial.m4b"
    other.write_bytes(b"not ours")
    assert epub2audio(book, "-o", out, "--voice", "tone").code == 0
    assert not stale.exists() and other.exists() and out.exists()


def test_a_segment_no_worker_answers_fails_the_job_instead_of_the_assembly(tmp_path, monkeypatch):
    from epub2audio import render
    from epub2audio.errors import JobFailed

    book = story_epub(tmp_path, THREE_CHAPTERS)
    real = render.WorkerPool.render

    def drops_the_last(self, todo, on_result):  # a pool that silently loses one segment
        return real(self, todo[:-1], on_result)

    monkeypatch.setattr(render.WorkerPool, "render", drops_the_last)
    with pytest.raises(JobFailed, match="no worker returned this segment"):
        convert(book, tmp_path / "story.m4b", ConvertOptions(voice="tone"), Progress())
    assert not (tmp_path / "story.m4b").exists()
