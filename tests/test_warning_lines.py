"""Every warning the engine gives about a book reaches the watcher's log and the calibre job's log,
one line each, with the real engine reading a book that has three invalid character references."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from epub_factory import make_epub, xhtml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("epub2audio_calibre_engine_for_warnings", ROOT / "plugin" / "engine.py")
plugin_engine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plugin_engine)

WARNING = "a.xhtml: 3 invalid character reference(s) dropped (&#xD800;, &#0;, &#x110000;)"


def warned_book(folder: Path, name: str = "book.epub") -> Path:
    docs = {"a.xhtml": xhtml("<h1>One</h1><p>Bad&#xD800; char&#0;, far&#x110000; &#65;ok.</p>"),
            "b.xhtml": xhtml("<h1>Two</h1><p>Second text.</p>")}
    return make_epub(folder, docs, nav=[("One", "a.xhtml"), ("Two", "b.xhtml")], name=name)


def private_env(tmp_path: Path, base: dict | None = None) -> dict:
    """This tree's engine, with its own data, cache and (absent) config."""
    return dict(os.environ if base is None else base, PYTHONPATH=str(ROOT / "engine"),
                EPUB2AUDIO_DATA_DIR=str(tmp_path / "data"), EPUB2AUDIO_CACHE_DIR=str(tmp_path / "cache"),
                EPUB2AUDIO_CONFIG=str(tmp_path / "no-config.toml"), PYTHONUNBUFFERED="1")


def lines_with(text: str, lines) -> list[str]:
    return [line for line in lines if text in line]


# ------------------------------------------------------------------------------------------
# The watcher


def test_the_watchers_log_has_each_warning_once_under_the_books_name(tmp_path):
    in_dir, out_dir = tmp_path / "in", tmp_path / "out"
    in_dir.mkdir()
    out_dir.mkdir()
    warned_book(in_dir, "Warned.epub")
    proc = subprocess.run([sys.executable, "-m", "epub2audio.watch", str(in_dir), "--out", str(out_dir), "--voice",
                           "tone", "--once", "--settle", "0", "--progress", "json"],
                          env=private_env(tmp_path), capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    assert (out_dir / "Warned.m4b").stat().st_size > 0

    log = (out_dir / "epub2audio-watch.log").read_text(encoding="utf-8").splitlines()
    (line,) = lines_with(WARNING, log)
    assert line.split("  ", 1)[1].startswith("warning    Warned.epub [")  # after the time stamp
    assert line.endswith(f"] {WARNING}")
    assert lines_with(WARNING, proc.stderr.splitlines()) == [line]  # the same line, once

    events = [json.loads(raw) for raw in proc.stdout.splitlines() if raw.startswith("{")]
    mentions = [e for e in events if WARNING in json.dumps(e, ensure_ascii=False)]
    assert [(e["event"], e["action"], e["file"], e["detail"]) for e in mentions] == [
        ("watch", "warning", "Warned.epub", WARNING)]
    assert mentions[0]["sha256"] and line.split("[", 1)[1].startswith(mentions[0]["sha256"][:12])


def test_warnings_to_log_sends_warnings_to_the_log_and_everything_else_on(tmp_path):
    from epub2audio.progress import Progress
    from epub2audio.watch import WarningsToLog, WatchLog
    from epub2audio.watch.queue import QueuedBook

    class Events(Progress):
        def __init__(self):
            self.seen, self.closed = [], False

        def emit(self, event, **fields):
            self.seen.append((event, fields))

        def close(self):
            self.closed = True

    inner = Events()
    log = WatchLog(tmp_path / "watch.log", echo=None)
    book = QueuedBook("ab" * 32, "x.epub", tmp_path / "x.epub", "x.m4b", "converting", 1, 1, 1, None, None)
    progress = WarningsToLog(inner, log, book)
    progress.emit("plan", total=2, cached=0, to_render=2)
    progress.emit("warning", message="c1.xhtml: only partly read\n(line 3): the text after that point is lost")
    progress.close()
    assert inner.seen == [("plan", {"total": 2, "cached": 0, "to_render": 2})] and inner.closed
    (line,) = (tmp_path / "watch.log").read_text(encoding="utf-8").splitlines()
    assert line.endswith("  warning    x.epub [abababababab] c1.xhtml: only partly read (line 3): the text after "
                         "that point is lost")


# ------------------------------------------------------------------------------------------
# The calibre plugin's job log


class JobLog:
    """Stands in for calibre's job log."""

    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def info(self, msg):
        self.lines.append(("info", msg))

    def warn(self, msg):
        self.lines.append(("warn", msg))

    def error(self, msg):
        self.lines.append(("error", msg))


def test_the_calibre_job_log_has_each_warning_of_the_real_engine_once(tmp_path):
    engine_script = tmp_path / "epub2audio"  # what the plugin runs: the command of this tree
    engine_script.write_text(f"#!{sys.executable}\nimport sys\nfrom epub2audio.cli import main\nsys.exit(main())\n",
                             encoding="utf-8")
    engine_script.chmod(engine_script.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "book.m4b"
    cmd = plugin_engine.build_command(str(engine_script), str(warned_book(tmp_path)), str(out), voice="tone",
                                      work_dir=str(tmp_path / "job"), extra_args=["--no-verify"])
    log = JobLog()
    env = private_env(tmp_path, plugin_engine.sanitized_env())
    result = plugin_engine.run_engine(cmd, log=log, env=env)
    assert Path(result.output) == out and out.stat().st_size > 0
    assert [entry for entry in log.lines if WARNING in entry[1]] == [("warn", f"epub2audio warning: {WARNING}")]


def test_a_warning_is_one_line_in_the_job_log_even_when_the_job_then_fails(tmp_path):
    fake = tmp_path / "epub2audio"
    fake.write_text(f"#!{sys.executable}\n" + textwrap.dedent("""
        import json, sys
        print(json.dumps({"event": "warning", "message": "c2.xhtml: only partly read\\n  (bad entity)"}), flush=True)
        print(json.dumps({"event": "error", "message": "1 segment(s) failed", "exit_code": 1}), flush=True)
        sys.exit(1)
    """), encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    log = JobLog()
    with pytest.raises(plugin_engine.EngineError, match="1 segment"):
        plugin_engine.run_engine(plugin_engine.build_command(str(fake), "b.epub", "b.m4b"), log=log)
    assert [entry for entry in log.lines if "c2.xhtml" in entry[1]] == [
        ("warn", "epub2audio warning: c2.xhtml: only partly read (bad entity)")]
