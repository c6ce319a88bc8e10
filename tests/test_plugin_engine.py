"""The calibre plugin's engine glue (plugin/engine.py), tested without calibre or Qt.

Fake engines are small Python scripts written into tmp_path; they speak the real engine's
protocol (JSON lines on stdout, human text on stderr, exit codes 0/1/2/130).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("epub2audio_calibre_engine", ROOT / "plugin" / "engine.py")
engine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(engine)

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")


class Recorder:
    """Stands in for calibre's job log and notifications queue."""

    def __init__(self):
        self.lines: list[tuple[str, str]] = []
        self.progress: list[tuple[float, str]] = []

    def info(self, msg):
        self.lines.append(("info", msg))

    def warn(self, msg):
        self.lines.append(("warn", msg))

    def error(self, msg):
        self.lines.append(("error", msg))

    def notify(self, fraction, message):
        self.progress.append((fraction, message))

    def text(self) -> str:
        return "\n".join(m for _, m in self.lines)


def fake_engine(tmp_path: Path, body: str, name: str = "epub2audio") -> Path:
    """An executable Python script with `body`; sys.argv is the engine's command line."""
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def alive(pid: int) -> bool:
    """Whether pid runs (a zombie waiting for a reaper counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def wait_for(predicate, timeout=120.0) -> bool:
    """Poll until predicate() holds; the timeout is a safety limit against hangs, not a speed test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


HAPPY_ENGINE = """
import json, os, sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
def emit(event, **f):
    print(json.dumps({"event": event, **f}), flush=True)
print("a stray line that is not JSON", flush=True)
print("loading things", file=sys.stderr, flush=True)
emit("book", title="T", chapters=2, segments=4, characters=100)
emit("voice", name="tone", narrator="Test tone", backend="tone", precision="-", sample_rate=22050, model_id="t")
emit("plan", total=4, cached=1, to_render=3)
emit("stage", stage="render")
for done in (1, 2, 3):
    emit("segment", done=done, total=3, chapter=0, index=done, audio_seconds=1.0, synth_seconds=0.1,
         eta_seconds=(3 - done) * 90.0)
emit("warning", message="chapter 2 has an odd table")
emit("stage", stage="assemble")
open(out, "wb").write(b"m4b")
emit("done", output=out, duration_seconds=12.5, chapters=2, segments_rendered=3, seconds=0.1)
with open(os.environ["FAKE_ENV_DUMP"], "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv}, f)
"""


# ------------------------------------------------------------------------------------------------
# Command line and environment


def test_build_command_has_json_progress_meta_voice_chapters_and_work_dir():
    cmd = engine.build_command("/opt/e2a/bin/epub2audio", "/tmp/b.epub", "/tmp/b.m4b", meta="/tmp/meta.json",
                               voice="tone", chapters=" 1-2, 5 ", work_dir="/cache/job")
    assert cmd == ["/opt/e2a/bin/epub2audio", "/tmp/b.epub", "-o", "/tmp/b.m4b", "--progress", "json",
                   "--meta", "/tmp/meta.json", "--voice", "tone", "--chapters", "1-2,5", "--work-dir", "/cache/job"]


def test_build_command_leaves_out_empty_options():
    cmd = engine.build_command("epub2audio", "b.epub", "b.m4b", meta=None, voice="  ", chapters="")
    assert cmd == ["epub2audio", "b.epub", "-o", "b.m4b", "--progress", "json"]


def test_sanitized_env_drops_host_python_qt_and_loader_variables():
    base = {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8",
        "PYTHONPATH": "/usr/lib/calibre", "PYTHONHOME": "/opt/calibre", "PYTHONSTARTUP": "x.py",
        "LD_LIBRARY_PATH": "/opt/calibre/lib", "LD_PRELOAD": "libfoo.so", "DYLD_LIBRARY_PATH": "/x",
        "QT_PLUGIN_PATH": "/opt/calibre/plugins", "QT_QPA_PLATFORM": "offscreen", "QTWEBENGINE_CHROMIUM_FLAGS": "-x",
        "QML2_IMPORT_PATH": "/q", "CALIBRE_DEVELOP_FROM": "/src", "EPUB2AUDIO_CACHE": "/keep/me",
    }
    env = engine.sanitized_env(base)
    assert {"PATH", "HOME", "LANG", "EPUB2AUDIO_CACHE"} <= set(env)
    for gone in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "LD_LIBRARY_PATH", "LD_PRELOAD", "DYLD_LIBRARY_PATH",
                 "QT_PLUGIN_PATH", "QT_QPA_PLATFORM", "QTWEBENGINE_CHROMIUM_FLAGS", "QML2_IMPORT_PATH",
                 "CALIBRE_DEVELOP_FROM"):
        assert gone not in env, gone
    assert env["PYTHONIOENCODING"] == "utf-8"
    assert base["PYTHONPATH"] == "/usr/lib/calibre"  # the caller's dict is not changed


def test_find_engine_configured_path_must_exist_and_be_runnable(tmp_path):
    exe = fake_engine(tmp_path, "print('hi')\n")
    assert engine.find_engine(str(exe)) == str(exe)
    with pytest.raises(engine.EngineError, match="not found at .*nowhere"):
        engine.find_engine(str(tmp_path / "nowhere" / "epub2audio"))
    with pytest.raises(engine.EngineError, match="is a folder"):
        engine.find_engine(str(tmp_path))
    plain = tmp_path / "not-executable"
    plain.write_text("x")
    plain.chmod(0o644)
    if os.name == "posix" and os.geteuid() != 0:  # root may execute anything with an x bit only
        with pytest.raises(engine.EngineError, match="not executable"):
            engine.find_engine(str(plain))


def test_find_engine_searches_path_when_nothing_is_configured(tmp_path):
    exe = fake_engine(tmp_path, "print('hi')\n")
    assert engine.find_engine("", env={"PATH": str(tmp_path)}) == str(exe)


# ------------------------------------------------------------------------------------------------
# Progress events → fractions and messages


def test_progress_tracker_fractions_are_monotonic_and_carry_the_eta():
    t = engine.ProgressTracker()
    out = [t.feed({"event": "book", "title": "T", "chapters": 3, "segments": 10, "characters": 5})]
    out.append(t.feed({"event": "plan", "total": 10, "cached": 4, "to_render": 6}))
    assert out[-1][0] == pytest.approx(0.4 * engine.RENDER_SHARE)
    assert "resuming, 4 of 10" in out[-1][1]
    out.append(t.feed({"event": "segment", "done": 3, "total": 6, "eta_seconds": 150.0}))
    assert out[-1][0] == pytest.approx(0.7 * engine.RENDER_SHARE)
    assert out[-1][1] == "reading aloud, segment 7 of 10, about 2 min left"
    out.append(t.feed({"event": "segment", "done": 6, "total": 6, "eta_seconds": 0.0}))
    assert out[-1][0] == pytest.approx(engine.RENDER_SHARE)
    assert "less than a minute left" in out[-1][1]
    out.append(t.feed({"event": "stage", "stage": "assemble"}))
    assert out[-1] == (pytest.approx(engine.RENDER_SHARE), "assembling the M4B")
    out.append(t.feed({"event": "done", "output": "/x.m4b", "duration_seconds": 3.0, "chapters": 3}))
    assert out[-1] == (1.0, "done")
    fractions = [f for f, _ in out]
    assert fractions == sorted(fractions) and all(0.0 <= f <= 1.0 for f in fractions)
    assert t.output == "/x.m4b" and t.chapters == 3


def test_progress_tracker_remembers_errors_and_warnings_and_ignores_unknown_events():
    t = engine.ProgressTracker(label="Book")
    assert t.feed({"event": "something-new", "x": 1}) is None
    fraction, message = t.feed({"event": "warning", "message": "odd table"})
    assert message == "Book: warning: odd table" and t.warnings == ["odd table"]
    assert t.feed({"event": "error", "message": "bad\n  EPUB", "exit_code": 2}) is None
    assert t.error == "bad EPUB" and t.error_code == 2


@pytest.mark.parametrize("seconds, text", [
    (None, ""), ("junk", ""), (-1, ""), (0, "less than a minute left"), (59, "less than a minute left"),
    (60, "about 1 min left"), (29 * 60 + 40, "about 30 min left"), (3600 + 5 * 60, "about 1 h 05 min left"),
])
def test_format_eta(seconds, text):
    assert engine.format_eta(seconds) == text


def test_parse_event_accepts_only_json_objects_with_an_event():
    assert engine.parse_event('{"event": "plan", "total": 3}') == {"event": "plan", "total": 3}
    for line in ("", "hello", "{not json", "[1, 2]", '{"no_event": 1}', '{"event": 5}'):
        assert engine.parse_event(line) is None


# ------------------------------------------------------------------------------------------------
# Running an engine


def test_run_engine_reports_progress_logs_other_lines_and_returns_the_m4b(tmp_path, monkeypatch):
    exe = fake_engine(tmp_path, HAPPY_ENGINE)
    dump = tmp_path / "env.json"
    base = {**os.environ, "FAKE_ENV_DUMP": str(dump), "PYTHONPATH": "/calibre/lib", "QT_PLUGIN_PATH": "/q"}
    rec = Recorder()
    out = tmp_path / "book.m4b"
    cmd = engine.build_command(str(exe), str(tmp_path / "b.epub"), str(out), voice="tone")
    result = engine.run_engine(cmd, notify=rec.notify, log=rec, env=engine.sanitized_env(base))
    assert result.output == str(out) and result.duration_seconds == 12.5 and result.chapters == 2
    fractions = [f for f, _ in rec.progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("about 3 min left" in m for _, m in rec.progress)  # 2 segments left × 90 s
    log = rec.text()
    assert "a stray line that is not JSON" in log and "loading things" in log
    assert ("warn", "epub2audio warning: chapter 2 has an odd table") in rec.lines
    assert '"event": "segment"' not in log  # segments are progress, not log lines
    child = json.loads(dump.read_text())
    assert "PYTHONPATH" not in child["env"] and "QT_PLUGIN_PATH" not in child["env"]
    assert child["argv"][1:] == cmd[1:]


def test_run_engine_raises_the_engines_one_line_error_and_exit_code(tmp_path):
    exe = fake_engine(tmp_path, """
        import json, sys
        print(json.dumps({"event": "error", "message": "book.epub: not an EPUB (no container.xml)", "exit_code": 2}))
        print("epub2audio: error: book.epub: not an EPUB (no container.xml)", file=sys.stderr)
        sys.exit(2)
    """)
    rec = Recorder()
    with pytest.raises(engine.EngineError) as info:
        engine.run_engine(engine.build_command(str(exe), "b.epub", "b.m4b"), notify=rec.notify, log=rec)
    assert str(info.value) == "book.epub: not an EPUB (no container.xml)"
    assert info.value.exit_code == 2
    assert not isinstance(info.value, engine.EngineStopped)


def test_run_engine_falls_back_to_the_stderr_message_or_the_exit_code(tmp_path):
    exe = fake_engine(tmp_path, """
        import sys
        print("epub2audio: error: something broke", file=sys.stderr)
        sys.exit(1)
    """)
    with pytest.raises(engine.EngineError, match="^something broke$") as info:
        engine.run_engine([str(exe)])
    assert info.value.exit_code == 1
    silent = fake_engine(tmp_path, "import sys; sys.exit(3)\n", name="silent")
    with pytest.raises(engine.EngineError, match="exit code 3"):
        engine.run_engine([str(silent)])


def test_run_engine_fails_when_no_audiobook_was_written(tmp_path):
    exe = fake_engine(tmp_path, 'import json; print(json.dumps({"event": "done", "output": "/nonexistent/x.m4b"}))\n')
    with pytest.raises(engine.EngineError, match="wrote no audiobook"):
        engine.run_engine([str(exe)])


def test_run_engine_with_a_missing_program_says_where_it_looked(tmp_path):
    with pytest.raises(engine.EngineError, match="not found at .*missing/epub2audio"):
        engine.run_engine([str(tmp_path / "missing" / "epub2audio"), "b.epub"])


SILENT_ENGINE_WITH_CHILD = """
import json, os, signal, subprocess, sys, time
ignore_term = os.environ.get("FAKE_IGNORE_TERM") == "1"
if ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time\\n"
                          + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n" if ignore_term else "")
                          + "time.sleep(600)"])
with open(os.environ["FAKE_PIDS"], "w") as f:
    json.dump([os.getpid(), child.pid], f)
print(json.dumps({"event": "plan", "total": 10, "cached": 0, "to_render": 10}), flush=True)
time.sleep(600)  # silent from here on
"""


@posix_only
@pytest.mark.parametrize("ignore_term", [False, True], ids=["clean-stop", "needs-sigkill"])
def test_abort_while_the_engine_is_silent_kills_its_whole_process_group(tmp_path, ignore_term):
    exe = fake_engine(tmp_path, SILENT_ENGINE_WITH_CHILD)
    pids_file = tmp_path / "pids.json"
    env = engine.sanitized_env({**os.environ, "FAKE_PIDS": str(pids_file), "FAKE_IGNORE_TERM": "1" if ignore_term else "0"})
    abort = threading.Event()
    rec = Recorder()
    started = []

    def set_abort_when_running():
        wait_for(lambda: rec.progress)  # the engine started, said its plan and went silent
        abort.set()

    threading.Thread(target=set_abort_when_running, daemon=True).start()
    begun = time.monotonic()
    with pytest.raises(engine.EngineStopped) as info:
        engine.run_engine([str(exe)], notify=rec.notify, abort=abort, log=rec, env=env, grace=1.5,
                          on_start=started.append)
    stopped_after = time.monotonic() - begun
    pids = json.loads(pids_file.read_text())
    assert len(started) == 1 and started[0].pid == pids[0]
    assert "resume" in str(info.value)
    # The engine stays silent for 600 s: stopping well before that means abort did not wait for a line.
    assert stopped_after < 300
    assert wait_for(lambda: not any(alive(p) for p in pids)), [p for p in pids if alive(p)]
    assert rec.progress and rec.progress[0][1] == "reading aloud 10 segments"


@posix_only
def test_stop_all_stops_several_engines_and_their_children(tmp_path):
    exe = fake_engine(tmp_path, SILENT_ENGINE_WITH_CHILD)
    procs, pid_files = [], []
    for n in range(2):
        pid_files.append(tmp_path / f"pids{n}.json")
        env = engine.sanitized_env({**os.environ, "FAKE_PIDS": str(pid_files[-1]), "FAKE_IGNORE_TERM": str(n)})
        procs.append(engine.start_engine([str(exe)], env=env))
    assert wait_for(lambda: all(p.exists() for p in pid_files))
    pids = [pid for f in pid_files for pid in json.loads(f.read_text())]
    engine.stop_all(procs, grace=1.0)
    assert wait_for(lambda: not any(alive(p) for p in pids)), [p for p in pids if alive(p)]
    for proc in procs:
        proc.stdout.close()
        proc.stderr.close()


# ------------------------------------------------------------------------------------------------
# Metadata


def test_build_meta_uses_the_engines_keys_and_formats(tmp_path):
    cover = tmp_path / "cover.jpg"
    cover.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    meta = engine.build_meta(
        title="  A Title ", authors=["Ann Author", "", "Bob"], language="en",
        date=datetime(1922, 10, 1, tzinfo=timezone.utc), description="<p>About <b>it</b></p>",
        publisher="Boni & Liveright", isbn="978-0-306-40615-7", series="Poems", series_index=2.0, cover=str(cover))
    assert meta == {
        "title": "A Title", "authors": ["Ann Author", "Bob"], "language": "en", "date": "1922-10-01",
        "description": "<p>About <b>it</b></p>", "publisher": "Boni & Liveright", "isbn": "9780306406157",
        "identifier": "urn:isbn:9780306406157", "series": "Poems", "series_index": "2", "cover": str(cover),
    }
    path = engine.write_meta(meta, str(tmp_path / "meta.json"))
    assert json.loads(Path(path).read_text(encoding="utf-8")) == meta


def test_build_meta_leaves_out_what_calibre_does_not_know():
    undefined = datetime(101, 1, 1, tzinfo=timezone.utc)  # calibre's "no date"
    meta = engine.build_meta(title="", authors=[], date=undefined, isbn="", series="", series_index=1.0,
                             cover="/no/such/cover.jpg", publisher=None, description="  ")
    assert meta == {}
    assert engine.build_meta(series="S", series_index=1.5)["series_index"] == "1.5"
    assert engine.format_date("0101-01-01T00:00:00+00:00") == ""
    assert engine.format_date("2001-05-06") == "2001-05-06"


def test_copy_to_folder_never_overwrites(tmp_path):
    m4b = tmp_path / "x.m4b"
    m4b.write_bytes(b"audio")
    first = engine.copy_to_folder(str(m4b), str(tmp_path / "out"), "Title: A/B - Ann")
    second = engine.copy_to_folder(str(m4b), str(tmp_path / "out"), "Title: A/B - Ann")
    assert Path(first).name == "Title_ A_B - Ann.m4b" and Path(second).name == "Title_ A_B - Ann (2).m4b"
    assert Path(second).read_bytes() == b"audio"
    opus = tmp_path / "audiobook.opus"
    opus.write_bytes(b"ogg")
    assert Path(engine.copy_to_folder(str(opus), str(tmp_path / "out"), "Title")).name == "Title.opus"


def test_the_format_setting_becomes_the_engines_flag():
    assert engine.format_args("mp3") == ["--format", "mp3"] and engine.format_args("opus") == ["--format", "opus"]
    assert engine.format_args("m4b") == [] and engine.format_args("flac") == [] and engine.format_args(None) == []
    assert [engine.audio_format(c) for c in ("m4b", "mp3", "opus", "", "FLAC")] == ["m4b", "mp3", "opus", "m4b", "m4b"]


# ------------------------------------------------------------------------------------------------
# With the real engine (the tone voice takes seconds)

REAL_ENGINE = Path(sys.executable).with_name("epub2audio")
SMALL_BOOK = "the-waste-land-poetry-notes-epub3.epub"


@pytest.mark.skipif(not REAL_ENGINE.exists(), reason="the engine is not installed next to this Python")
def test_real_engine_takes_calibres_metadata_from_meta_json(tmp_path, corpus):
    mutagen_mp4 = pytest.importorskip("mutagen.mp4")
    meta = engine.build_meta(title="Calibre Title", authors=["Calibre Author"], series="Calibre Series",
                             series_index=3.0, isbn="9780306406157", publisher="Calibre House")
    meta_path = engine.write_meta(meta, str(tmp_path / "meta.json"))
    rec = Recorder()
    out = tmp_path / "book.m4b"
    cmd = engine.build_command(str(REAL_ENGINE), str(corpus / SMALL_BOOK), str(out), meta=meta_path,
                               voice="tone", chapters="1-2", work_dir=str(tmp_path / "job"))
    result = engine.run_engine(cmd, notify=rec.notify, log=rec)
    assert Path(result.output) == out and out.stat().st_size > 0
    assert rec.progress[-1] == (1.0, "done")
    tags = mutagen_mp4.MP4(out).tags

    def freeform(name):
        return [bytes(v).decode() for v in tags.get("----:com.apple.iTunes:" + name, [])]

    assert tags["©nam"] == ["Calibre Title"] and tags["©ART"] == ["Calibre Author"]
    assert freeform("ISBN") == ["9780306406157"]
    assert freeform("series") == ["Calibre Series"] and freeform("series-part") == ["3"]


# ------------------------------------------------------------------------------------------------
# The plugin zip


def test_plugin_zip_is_deterministic_and_has_the_layout_calibre_needs(tmp_path):
    import zipfile

    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        import build_plugin
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    src = tmp_path / "plugin"
    shutil.copytree(ROOT / "plugin", src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "ui.cpython-311.pyc").write_bytes(b"junk")
    (src / "engine.py~").write_text("editor backup")
    first = build_plugin.build(src, tmp_path / "a" / "epub2audio-calibre-plugin.zip").read_bytes()
    os.utime(src / "ui.py", (1, 1))  # a different mtime must not change the zip
    second = build_plugin.build(src, tmp_path / "b" / "epub2audio-calibre-plugin.zip").read_bytes()
    assert first == second
    with zipfile.ZipFile(tmp_path / "a" / "epub2audio-calibre-plugin.zip") as zf:
        names = zf.namelist()
        assert names == sorted(names)
        assert {"__init__.py", "ui.py", "preview.py", "engine.py", "config.py", "prefs.py", "images/icon.png",
                "plugin-import-name-epub2audio.txt"} == set(names)
        assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in zf.infolist())
        assert zf.read("images/icon.png").startswith(b"\x89PNG\r\n\x1a\n")
        assert b"qt.core" not in zf.read("__init__.py") and b"qt.core" not in zf.read("prefs.py")


# ---- the settings' "Try voice" button --------------------------------------------------------------

def test_try_voice_runs_voice_try_and_reports_its_line(tmp_path):
    fake = fake_engine(tmp_path, """
        import sys
        out = sys.argv[sys.argv.index("-o") + 1]
        open(out, "wb").write(b"RIFF")
        print("Wrote " + out + ": 2.0 s of audio in 0.20 s (RTF 0.100 on this machine).")
        open(out + ".argv", "w").write(" ".join(sys.argv[1:]))
    """)
    wav = str(tmp_path / "s.wav")
    ok, message = engine.try_voice(str(fake), "", wav)
    assert (ok, message) == (True, f"Wrote {wav}: 2.0 s of audio in 0.20 s (RTF 0.100 on this machine).")
    assert Path(wav + ".argv").read_text() == f"voice try default -o {wav}"  # the engine's default voice
    engine.try_voice(str(fake), " kokoro:jm_kumo ", wav)
    assert Path(wav + ".argv").read_text() == f"voice try kokoro:jm_kumo -o {wav}"


def test_try_voice_gives_the_engines_one_line_when_it_fails(tmp_path):
    fake = fake_engine(tmp_path, """
        import sys
        print("epub2audio: error: unknown voice 'piper:nope' (Piper voices: none)", file=sys.stderr)
        sys.exit(2)
    """)
    ok, message = engine.try_voice(str(fake), "piper:nope", str(tmp_path / "s.wav"))
    assert not ok and message == "unknown voice 'piper:nope' (Piper voices: none)"


# ---- the settings' voice dropdown ------------------------------------------------------------------

# `epub2audio voice list` as the engine prints it with the [kokoro] extra, one calibre Piper voice
# and a saved CosyVoice3 voice (columns: cli.run_voice).
VOICE_LIST = """\
NAME                     FAMILY           LANGUAGES                      RATE  SPEED          ABOUT
joe                      Piper            en                         22050 Hz  RTF 0.081      Joe, the embedded Piper voice (en_US medium; default)
kokoro:jf_alpha          Kokoro           en,ja                      24000 Hz  not measured   Kokoro-82M, packaged female speaker jf_alpha
kokoro:jm_kumo           Kokoro           en,ja                      24000 Hz  RTF 0.790      Kokoro-82M, packaged male speaker jm_kumo
piper:fr_FR-siwis-medium Piper (calibre)  fr                         22050 Hz  not measured   siwis (Piper fr_FR medium)
cosyvoice3:anna          CosyVoice3       zh,en,ja,ko,de,es,fr,it,ru 24000 Hz  not measured   cloned from a reference recording
tone                     test             -                          16000 Hz  not measured   a test tone (checks the pipeline)
"""


def test_list_voices_reads_the_names_voice_list_prints(tmp_path):
    fake = fake_engine(tmp_path, f"""
        import sys
        assert sys.argv[1:] == ["voice", "list"], sys.argv
        sys.stdout.write({VOICE_LIST!r})
    """)
    assert engine.list_voices(str(fake)) == ["joe", "kokoro:jf_alpha", "kokoro:jm_kumo", "piper:fr_FR-siwis-medium",
                                             "cosyvoice3:anna", "tone"]


def test_list_voices_is_empty_when_the_engine_fails_or_is_missing(tmp_path):
    fake = fake_engine(tmp_path, """
        import sys
        print("epub2audio: error: something", file=sys.stderr)
        sys.exit(1)
    """)
    assert engine.list_voices(str(fake)) == []
    assert engine.list_voices(str(tmp_path / "no-such-engine")) == []


def test_voice_dropdown_offers_auto_then_the_engines_order_and_the_tone_last():
    names = ["hibari", "joe", "tone", "kokoro:jf_alpha", "kokoro:jm_kumo", "piper:fr_FR-siwis-medium", "cosyvoice3:anna"]
    assert engine.voice_choices(names) == [
        ("auto: the book's language decides (hibari for English)", ""),
        ("hibari", "hibari"), ("joe", "joe"), ("kokoro:jf_alpha", "kokoro:jf_alpha"),
        ("kokoro:jm_kumo", "kokoro:jm_kumo"), ("piper:fr_FR-siwis-medium", "piper:fr_FR-siwis-medium"),
        ("cosyvoice3:anna", "cosyvoice3:anna"), ("tone", "tone")]


def test_voice_dropdown_keeps_a_saved_voice_the_engine_did_not_list():
    assert [v for _label, v in engine.voice_choices([], " piper:mine ")] == ["", "piper:mine"]
    assert [v for _label, v in engine.voice_choices(["joe", "tone"], "auto")] == ["", "joe", "tone"]
    assert [v for _label, v in engine.voice_choices(["joe", "kokoro:jm_kumo"], "kokoro:jm_kumo")] == \
        ["", "joe", "kokoro:jm_kumo"]


# ---- "Show what will be read…": the engine's plan of a book ----------------------------------------

# What `epub2audio BOOK --list-chapters --preview --progress json` printed for
# tests/corpus/the-waste-land-poetry-notes-epub3.epub (its first two chapters and its skipped title page).
WASTE_LAND_PLAN = {
    "title": "The Waste Land", "authors": ["T.S. Eliot"], "language": "en-US",
    "chapters": [
        {"number": 1, "title": "I. THE BURIAL OF THE DEAD", "characters": 3387, "estimated_seconds": 233.6,
         "preview": "\"Nam Sibyllam quidem Cumis ego ipse oculis meis vidi in ampulla pendere, \u2026"},
        {"number": 4, "title": "IV. DEATH BY WATER", "characters": 390, "estimated_seconds": 26.9,
         "preview": "Phlebas the Phoenician, a fortnight dead, Forgot the cry of gulls, and \u2026"},
        {"number": 6, "title": "NOTES ON \"THE WASTE LAND\"", "characters": 8690, "estimated_seconds": 4599.3,
         "preview": "Not only the title,\nbut the plan \u2026"},
    ],
    "skipped": [{"title": "The Waste Land", "reason": "title page (epub:type)", "characters": 24, "evidence": "structure",
                 "preview": "The Waste Land T.S. Eliot \u2026"}],
    "skipping": {"parts": 1, "characters": 24, "summary": "Skipping 1 part, 24 characters (0.1 % of the text): title page"},
    "warnings": ["12.0 % of the text is skipped on a guess"],
}


def test_read_plan_asks_for_the_preview_listing_and_reads_its_json(tmp_path):
    fake = fake_engine(tmp_path, f"""
        import json, sys
        assert sys.argv[2:] == ["--list-chapters", "--preview", "--progress", "json"], sys.argv
        print("a line that is not the plan")
        print(json.dumps({WASTE_LAND_PLAN!r}))
    """)
    assert engine.read_plan(str(fake), str(tmp_path / "book.epub")) == WASTE_LAND_PLAN


def test_read_plan_raises_the_engines_one_line_and_exit_code(tmp_path):
    refusing = fake_engine(tmp_path, """
        import sys
        print("epub2audio: error: book.epub: this EPUB is DRM-protected", file=sys.stderr)
        sys.exit(2)
    """)
    with pytest.raises(engine.EngineError) as caught:
        engine.read_plan(str(refusing), "book.epub")
    assert (str(caught.value), caught.value.exit_code) == ("book.epub: this EPUB is DRM-protected", 2)
    silent = fake_engine(tmp_path, "print('no plan here')\n", name="silent")
    with pytest.raises(engine.EngineError, match="^epub2audio printed no plan of the book$"):
        engine.read_plan(str(silent), "book.epub")
    with pytest.raises(engine.EngineError, match="^could not run .*no-such-engine: No such file or directory$"):
        engine.read_plan(str(tmp_path / "no-such-engine"), "book.epub")


def test_the_preview_rows_list_the_chapters_then_the_skipped_parts_with_their_first_words():
    assert engine.plan_rows(WASTE_LAND_PLAN) == [
        ("1", "I. THE BURIAL OF THE DEAD", "3,387 characters, about 4 min",
         "\"Nam Sibyllam quidem Cumis ego ipse oculis meis vidi in ampulla pendere, \u2026"),
        ("4", "IV. DEATH BY WATER", "390 characters, under a minute",
         "Phlebas the Phoenician, a fortnight dead, Forgot the cry of gulls, and \u2026"),
        ("6", "NOTES ON \"THE WASTE LAND\"", "8,690 characters, about 1 h 17 min", "Not only the title, but the plan \u2026"),
        ("", "The Waste Land", "skipped: title page (epub:type), 24 characters", "The Waste Land T.S. Eliot \u2026"),
    ]
    assert engine.plan_summary(WASTE_LAND_PLAN, " 1-2 ") == [
        "3 chapters read, 12,467 characters, about 1 h 21 min with the embedded voice.",
        "Skipping 1 part, 24 characters (0.1 % of the text): title page",
        "Warning: 12.0 % of the text is skipped on a guess",
        "Only chapters 1-2 are converted (the Chapters setting).",
    ]
    assert engine.plan_summary({"chapters": []}) == ["0 chapters read, 0 characters, under a minute with the embedded voice."]
