"""The calibre plugin inside a real calibre GUI (offscreen), driven by tests/calibre_harness.

Every test builds the plugin zip, installs it with the harness into a throwaway calibre config,
adds a corpus book whose calibre metadata differs from the EPUB's, starts `calibre-debug -g`, and
reads the JSON report the harness writes before it quits calibre. The M4B's tags are read here,
with mutagen from our venv (calibre bundles no mutagen).

Needs Debian's calibre (`make system-deps` installs it when run as root). Skipped only when calibre
is missing and we are not root; in CI (root) a missing calibre is a failure.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "packaging"))
import build_plugin  # noqa: E402

CALIBRE_DEBUG = shutil.which("calibre-debug")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
REAL_ENGINE = Path(sys.executable).with_name("epub2audio")
BOOK = "the-waste-land-poetry-notes-epub3.epub"  # small; its own title is "The Waste Land" by T.S. Eliot
GUI_TIMEOUT = 900  # a hang limit: a loaded machine must not fail the GUI tests
# Other calibre GUIs of this user would swallow ours (single-instance socket per euid): GUI runs
# are serialised with this lock, and as root each calibre command gets its own network namespace.
LOCK_FILE = Path("/tmp/epub2audio-calibre-gui-tests.lock")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CALIBRE_DEBUG is None and not IS_ROOT,
                       reason="calibre is not installed (CI installs it: make system-deps, as root)"),
]

CALIBRE_METADATA = {
    "title": "Calibre Title", "authors": "Calibre Author", "series": "Calibre Series", "series_index": "3",
    "publisher": "Calibre House", "identifiers": "isbn:9780306406157", "comments": "<p>Calibre comments</p>",
}


class Calibre:
    """A throwaway calibre: config, cache, temp folder and library under tmp_path."""

    def __init__(self, tmp_path: Path):
        if CALIBRE_DEBUG is None:
            pytest.fail("calibre-debug not found; run `make system-deps` as root (installs Debian's calibre)")
        self.tmp = tmp_path
        self.cfg, self.cache, self.temp, self.lib = (tmp_path / n for n in ("cfg", "cache", "tmp", "lib"))
        for d in (self.cfg, self.cache, self.temp):
            d.mkdir()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CALIBRE_", "QT_", "PYTHON")) and k not in ("VIRTUAL_ENV", "LD_LIBRARY_PATH")}
        env.update(CALIBRE_CONFIG_DIRECTORY=str(self.cfg), CALIBRE_CACHE_DIRECTORY=str(self.cache),
                   CALIBRE_TEMP_DIR=str(self.temp), QT_QPA_PLATFORM="offscreen", LANG="C.UTF-8")
        self.env = env
        self.prefix = ["unshare", "-n"] if IS_ROOT and shutil.which("unshare") else []

    def run(self, *args, timeout=600, env=None) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.prefix + list(args), env=env or self.env, capture_output=True, text=True,
                              timeout=timeout)
        assert proc.returncode == 0, f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        return proc

    def setup(self, corpus: Path, prefs: dict) -> None:
        # No welcome wizard (it is modal and would hang the run), no Quick Start Guide book.
        self.run("calibre-debug", "-c", "from calibre.utils.config import dynamic; "
                 "dynamic.set('welcome_wizard_was_run', True); "
                 "from calibre.gui2 import gprefs; gprefs['quick_start_guide_added'] = True")
        plugin_zip = build_plugin.build(out=self.tmp / "epub2audio-calibre-plugin.zip")
        harness_zip = build_plugin.build(ROOT / "tests" / "calibre_harness", self.tmp / "harness.zip",
                                         required=("__init__.py", "ui.py"))
        assert "Plugin added: epub2audio (" in self.run("calibre-customize", "-a", str(plugin_zip)).stdout
        self.run("calibre-customize", "-a", str(harness_zip))
        added = self.run("calibredb", "add", "--library-path", str(self.lib), str(corpus / BOOK)).stdout
        assert "Added book ids: 1" in added, added
        fields = [a for k, v in CALIBRE_METADATA.items() for a in ("--field", f"{k}:{v}")]
        self.run("calibredb", "set_metadata", "--library-path", str(self.lib), "1", *fields)
        (self.cfg / "plugins" / "epub2audio.json").write_text(json.dumps(prefs), encoding="utf-8")

    def gui(self, mode: str = "convert", timeout: int = GUI_TIMEOUT,
            ready_file: Path | None = None) -> tuple[dict, subprocess.CompletedProcess]:
        report_path = self.tmp / "report.json"
        env = {**self.env, "EPUB2AUDIO_HARNESS_OUT": str(report_path), "EPUB2AUDIO_HARNESS_BOOKS": "1",
               "EPUB2AUDIO_HARNESS_MODE": mode, "EPUB2AUDIO_HARNESS_TIMEOUT": str(timeout - 60)}
        if ready_file:
            env["EPUB2AUDIO_HARNESS_READY_FILE"] = str(ready_file)
        cmd = self.prefix + ["timeout", "-k", "5", str(timeout), "calibre-debug", "-g", "--",
                             "--with-library", str(self.lib), "--no-update-check"]
        LOCK_FILE.touch(exist_ok=True)
        with open(LOCK_FILE) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            started = time.monotonic()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout + 30)
            self.gui_seconds = time.monotonic() - started
        output = f"rc={proc.returncode} after {self.gui_seconds:.1f}s\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
        assert proc.returncode == 0, "calibre did not exit normally:\n" + output
        assert report_path.exists(), "the harness wrote no report:\n" + output
        report = json.loads(report_path.read_text(encoding="utf-8"))
        assert report.get("action_loaded") is True, "the plugin's action is missing:\n" + output
        assert "error" not in report and "finish_error" not in report, report
        return report, proc


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def only_job(report: dict) -> dict:
    assert len(report["jobs"]) == 1, report["jobs"]
    return report["jobs"][0]


def test_gui_converts_the_book_with_calibres_metadata(tmp_path, corpus):
    mp4 = pytest.importorskip("mutagen.mp4")
    assert REAL_ENGINE.exists(), f"the engine is not installed at {REAL_ENGINE}"
    calibre = Calibre(tmp_path)
    copies = tmp_path / "audiobooks"
    calibre.setup(corpus, {"engine_path": str(REAL_ENGINE), "voice": "tone", "chapters": "1-2",
                           "copy_to_folder": str(copies)})
    # "Show what will be read…" first: the dialog shows the engine's plan of the book; its Convert
    # button starts the conversion.
    report, proc = calibre.gui(mode="preview")

    assert report["selected"] == [1] and report["action_text"] == "Convert to audiobook" and report["action_icon"]
    preview = report["preview"]
    assert preview["window_title"] == "What epub2audio will read: Calibre Title"
    assert preview["summary"] == ["6 chapters read, 25,417 characters, about 29 min with the embedded voice.",
                                  "Skipping 1 part, 24 characters (0.1 % of the text): title page",
                                  "Only chapters 1-2 are converted (the Chapters setting)."]
    assert [row[:3] for row in preview["rows"]] == [
        ["1", "I. THE BURIAL OF THE DEAD", "3,387 characters, about 4 min"],
        ["2", "II. A GAME OF CHESS", "4,060 characters, about 5 min"],
        ["3", "III. THE FIRE SERMON", "4,886 characters, about 6 min"],
        ["4", "IV. DEATH BY WATER", "390 characters, under a minute"],
        ["5", "V. WHAT THE THUNDER SAID", "4,004 characters, about 5 min"],
        ["6", 'NOTES ON "THE WASTE LAND"', "8,690 characters, about 10 min"],
        ["", "The Waste Land", "skipped: title page (epub:type), 24 characters"]]
    assert preview["rows"][1][3] == "The Chair she sat in, like a burnished throne, Glowed on the …"
    assert preview["rows"][6][3].startswith("The Waste Land T.S. Eliot ")
    job = only_job(report)
    assert not job["failed"] and not report["timed_out"], job["details_tail"]
    assert job["percent"] == 100
    assert report["formats"] == {"1": ["EPUB", "M4B"]}
    stored = Path(report["m4b_paths"]["1"])
    assert stored.is_file() and stored.stat().st_size > 1000

    tags = mp4.MP4(stored).tags

    def freeform(name):
        return [bytes(v).decode() for v in tags.get("----:com.apple.iTunes:" + name, [])]

    assert tags["©nam"] == ["Calibre Title"]  # the EPUB says "The Waste Land"
    assert tags["©ART"] == ["Calibre Author"]  # the EPUB says "T.S. Eliot"
    assert freeform("ISBN") == ["9780306406157"]
    assert freeform("publisher") == ["Calibre House"]
    assert "covr" in tags  # calibre's cover
    assert [p.name for p in copies.iterdir()] == ["Calibre Title - Calibre Author.m4b"]
    assert freeform("series") == ["Calibre Series"] and freeform("series-part") == ["3"]


ERROR_ENGINE = """
import json, sys
print(json.dumps({"event": "error", "message": "book.epub: this EPUB is DRM-protected", "exit_code": 2}), flush=True)
print("epub2audio: error: book.epub: this EPUB is DRM-protected", file=sys.stderr)
sys.exit(2)
"""


@pytest.mark.parametrize("case", ["engine-error", "missing-engine"])
def test_gui_failure_fails_the_job_with_a_clear_message_and_adds_nothing(tmp_path, corpus, case):
    calibre = Calibre(tmp_path)
    if case == "engine-error":
        engine_path, expected = script(tmp_path / "epub2audio", ERROR_ENGINE), "book.epub: this EPUB is DRM-protected"
    else:
        engine_path = tmp_path / "nowhere" / "epub2audio"
        expected = f"epub2audio was not found at {engine_path}; set its path in the plugin's settings"
    calibre.setup(corpus, {"engine_path": str(engine_path), "voice": "tone"})
    report, proc = calibre.gui()

    job = only_job(report)
    assert job["failed"] and not job["killed"] and not report["timed_out"]
    assert job["exception"] == expected and job["exception_type"] == "EngineError"
    assert expected in job["details_tail"]
    assert report["formats"] == {"1": ["EPUB"]}


SILENT_ENGINE = """
import json, os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
pids = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pids.json")
with open(pids + ".tmp", "w") as f:
    json.dump([os.getpid(), child.pid], f)
os.replace(pids + ".tmp", pids)  # whole or absent: the harness stops us as soon as it appears
print(json.dumps({"event": "plan", "total": 10, "cached": 0, "to_render": 10}), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("mode", ["quit-while-running", "kill-while-running"])
def test_gui_stopping_a_running_conversion_stops_the_engine_and_its_children(tmp_path, corpus, mode):
    calibre = Calibre(tmp_path)
    engine_path = script(tmp_path / "epub2audio", SILENT_ENGINE)
    calibre.setup(corpus, {"engine_path": str(engine_path), "voice": "tone"})
    report, proc = calibre.gui(mode=mode, ready_file=tmp_path / "pids.json")
    if mode == "kill-while-running":
        job = only_job(report)
        assert job["killed"] and not report["timed_out"]
        assert report["plugin_jobs_pending"] == 0  # the plugin's callback ran and cleaned up

    pids = json.loads((tmp_path / "pids.json").read_text())
    assert report["engine_pids"] == pids[:1]
    deadline = time.monotonic() + 120  # a safety limit: they are killed, so they go at once
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids), "the engine or its child outlived calibre"
    assert report["formats"] == {"1": ["EPUB"]}


CONFIG_SCRIPT = """
import json, sys
from calibre.gui2 import Application
app = Application([])
from calibre.customize.ui import find_plugin
base = find_plugin('epub2audio')
assert base.is_customizable()
widget = base.config_widget()
widget.engine_path.edit.setText(sys.argv[-2])
widget.voice.setEditText(' tone ')
widget.chapters.setText('1 - 2')
widget.copy_to_folder.edit.setText(sys.argv[-1])
widget.max_concurrent.setValue(2)
widget.keep_job_files.setChecked(True)
ok = widget.validate()
base.save_settings(widget)
print(json.dumps({'valid': ok}))
"""


def test_config_widget_saves_the_settings_calibre_reads(tmp_path):
    calibre = Calibre(tmp_path)
    plugin_zip = build_plugin.build(out=tmp_path / "epub2audio-calibre-plugin.zip")
    calibre.run("calibre-customize", "-a", str(plugin_zip))
    path = tmp_path / "config_check.py"
    path.write_text(CONFIG_SCRIPT, encoding="utf-8")
    engine_path = script(tmp_path / "epub2audio", "print('hi')\n")
    out = calibre.run("calibre-debug", "-e", str(path), "--", str(engine_path), str(tmp_path / "books")).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {"valid": True}
    saved = json.loads((calibre.cfg / "plugins" / "epub2audio.json").read_text(encoding="utf-8"))
    assert saved == {"engine_path": str(engine_path), "voice": "tone", "chapters": "1-2",
                     "copy_to_folder": str(tmp_path / "books"), "max_concurrent": 2, "keep_job_files": True,
                     "readalong": "", "format": "m4b"}  # read-along off, M4B by default


VOICE_MENU_SCRIPT = """
import json, sys
from calibre.gui2 import Application
app = Application([])
from calibre.customize.ui import find_plugin
base = find_plugin('epub2audio')
widget = base.config_widget()
menu = [(widget.voice.itemText(i), widget.voice.itemData(i)) for i in range(widget.voice.count())]
shown = widget.voice_name()
widget.voice.setCurrentIndex(widget.voice.findData('kokoro:jm_kumo'))
base.save_settings(widget)
print(json.dumps({'menu': menu, 'shown': shown}))
"""


def test_config_widget_offers_the_engines_voices_in_its_order_after_auto(tmp_path):
    calibre = Calibre(tmp_path)
    plugin_zip = build_plugin.build(out=tmp_path / "epub2audio-calibre-plugin.zip")
    calibre.run("calibre-customize", "-a", str(plugin_zip))
    listing = ("NAME                     FAMILY           LANGUAGES   RATE  SPEED          ABOUT\n"
               "hibari                   hibari           en      24000 Hz  not measured   Heart (default)\n"
               "joe                      Piper            en      22050 Hz  not measured   Joe\n"
               "kokoro:jf_alpha          Kokoro           en,ja   24000 Hz  not measured   jf_alpha\n"
               "kokoro:jm_kumo           Kokoro           en,ja   24000 Hz  not measured   jm_kumo\n"
               "piper:fr_FR-siwis-medium Piper (calibre)  fr      22050 Hz  not measured   siwis\n"
               "tone                     test             -       16000 Hz  not measured   a test tone\n")
    engine_path = script(tmp_path / "epub2audio", f"""
        import sys
        assert sys.argv[1:] == ["voice", "list"], sys.argv
        sys.stdout.write({listing!r})
    """)
    (calibre.cfg / "plugins" / "epub2audio.json").write_text(
        json.dumps({"engine_path": str(engine_path), "voice": ""}), encoding="utf-8")
    path = tmp_path / "voice_menu.py"
    path.write_text(VOICE_MENU_SCRIPT, encoding="utf-8")
    out = json.loads(calibre.run("calibre-debug", "-e", str(path)).stdout.strip().splitlines()[-1])
    assert out["menu"] == [["auto: the book's language decides (hibari for English)", ""],
                           ["hibari", "hibari"], ["joe", "joe"],
                           ["kokoro:jf_alpha", "kokoro:jf_alpha"], ["kokoro:jm_kumo", "kokoro:jm_kumo"],
                           ["piper:fr_FR-siwis-medium", "piper:fr_FR-siwis-medium"], ["tone", "tone"]]
    assert out["shown"] == ""  # the saved default stays the default
    saved = json.loads((calibre.cfg / "plugins" / "epub2audio.json").read_text(encoding="utf-8"))
    assert saved["voice"] == "kokoro:jm_kumo"
