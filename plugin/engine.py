"""Running the epub2audio engine from calibre: plain functions, no Qt and no calibre imports.

Everything here can be tested with ordinary pytest (tests/test_plugin_engine.py). The calibre glue
in ui.py only gathers values from calibre's database, calls `run_engine` inside a ThreadedJob and
adds the result back as a format.

The engine's machine interface (`epub2audio --progress json`): one JSON object a line on stdout,
each with an "event" key (book, voice, plan, segment, stage, warning, done, error); human text on
stderr; exit codes 0 ok, 1 failed, 2 bad input, 130 interrupted. SIGTERM stops it cleanly and the
job stays resumable: the same command line (same --work-dir) picks up where it stopped.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

ENGINE_NAME = "epub2audio"

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

# Share of the progress bar given to reading aloud; the rest is assembling the M4B.
RENDER_SHARE = 0.95

# How long a SIGTERMed engine gets to save its job before its process group is SIGKILLed.
GRACE_SECONDS = 10.0

# How often a silent engine is checked for an abort request.
POLL_SECONDS = 0.2

# Variables that point a child Python or Qt at the host application's own files. calibre's frozen
# builds set several of them; a venv's Python started with them imports calibre's libraries.
_DROP_VARS = frozenset({
    "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONEXECUTABLE", "PYTHONUSERBASE",
    "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONPLATLIBDIR",
    "LD_LIBRARY_PATH", "LD_PRELOAD",
    "DYLD_LIBRARY_PATH", "DYLD_FALLBACK_LIBRARY_PATH", "DYLD_FRAMEWORK_PATH",
    "DYLD_FALLBACK_FRAMEWORK_PATH", "DYLD_INSERT_LIBRARIES",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "FONTCONFIG_FILE", "FONTCONFIG_PATH",
    "MAGICK_HOME", "MAGICK_CONFIGURE_PATH", "MAGICK_CODER_MODULE_PATH", "MAGICK_FILTER_MODULE_PATH",
})
_DROP_PREFIXES = ("QT_", "QTWEBENGINE_", "QML_", "QML2_", "CALIBRE_")


class EngineError(Exception):
    """The engine failed. str() is its one-line message; exit_code is its exit status."""

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class EngineStopped(EngineError):
    """The conversion was stopped on request; running it again resumes it."""


class ConversionResult:
    def __init__(self, output: str, duration_seconds: float | None = None, chapters: int | None = None):
        self.output = output
        self.duration_seconds = duration_seconds
        self.chapters = chapters

    def __repr__(self) -> str:
        return f"ConversionResult({self.output!r}, {self.duration_seconds!r}, {self.chapters!r})"


# ------------------------------------------------------------------------------------------------
# Finding the engine, the command line, the environment


def default_engine_candidates(home: str | None = None) -> list[str]:
    """Where epub2audio is usually installed, most likely first (used when no path is set)."""
    home = home or os.path.expanduser("~")
    exe = ENGINE_NAME + (".exe" if os.name == "nt" else "")
    scripts = "Scripts" if os.name == "nt" else "bin"
    return [
        os.path.join(home, ".local", "bin", exe),
        os.path.join(home, ".venvs", ENGINE_NAME, scripts, exe),
        os.path.join(home, ".local", "share", "pipx", "venvs", ENGINE_NAME, scripts, exe),
    ]


def find_engine(configured: str = "", env: dict | None = None) -> str:
    """The absolute path of the engine to run, or raise EngineError saying what to set.

    A configured path wins and must exist. Without one, PATH (of the sanitised environment) and
    the usual install places are searched.
    """
    configured = os.path.expanduser((configured or "").strip())
    if configured:
        if os.path.isdir(configured):
            raise EngineError(f"the epub2audio path {configured} is a folder, not the epub2audio program; "
                              "set it in the plugin's settings")
        if not os.path.isfile(configured):
            raise EngineError(f"epub2audio was not found at {configured}; set its path in the plugin's settings")
        if os.name != "nt" and not os.access(configured, os.X_OK):
            raise EngineError(f"{configured} is not executable; set the path of the epub2audio program "
                              "in the plugin's settings")
        return os.path.abspath(configured)
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(ENGINE_NAME, path=path)
    if found:
        return os.path.abspath(found)
    for candidate in default_engine_candidates():
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise EngineError("epub2audio was not found; install it and set the path of the epub2audio program "
                      "in the plugin's settings")


def build_command(engine: str, epub: str, output: str, meta: str | None = None, voice: str = "",
                  chapters: str = "", work_dir: str | None = None, extra_args: list | None = None) -> list[str]:
    """The engine's command line for one book, always with JSON-lines progress on stdout."""
    cmd = [engine, epub, "-o", output, "--progress", "json"]
    if meta:
        cmd += ["--meta", meta]
    if voice and voice.strip():
        cmd += ["--voice", voice.strip()]
    chapters = "".join((chapters or "").split())
    if chapters:
        cmd += ["--chapters", chapters]
    if work_dir:
        cmd += ["--work-dir", work_dir]
    cmd += list(extra_args or [])
    return cmd


def try_voice(engine: str, voice: str, wav: str, env: dict | None = None, timeout: float = 300) -> tuple[bool, str]:
    """`epub2audio voice try VOICE -o WAV` (the settings' "Try voice" button): (True, the engine's
    line about the sample) or (False, one line saying why there is none). An empty voice is the
    engine's default voice ("default": hibari where it is installed, else joe)."""
    cmd = [engine, "voice", "try", (voice or "").strip() or "default", "-o", wav]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=sanitized_env() if env is None else env)
    except subprocess.TimeoutExpired:
        return False, f"the voice sample took over {timeout:g} s"
    except OSError as error:
        return False, f"could not run {engine}: {error.strerror or error}"
    if proc.returncode != 0 or not os.path.isfile(wav):
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        return False, _stderr_message(lines[-1]) if lines else _describe_exit(proc.returncode)
    return True, one_line(proc.stdout)


# What the settings' voice dropdown offers before anything is listed: the default, as the empty
# string the engine reads as --voice auto.
AUTO_VOICE = ("auto: the book's language decides (hibari for English)", "")


def list_voices(engine: str, env: dict | None = None, timeout: float = 60) -> list[str]:
    """The voice names `epub2audio voice list` prints (its first column, after the header row), in
    its order; [] when the engine cannot be run or fails (the dropdown then offers only the default
    and what the user types)."""
    try:
        proc = subprocess.run([engine, "voice", "list"], capture_output=True, text=True, timeout=timeout,
                              env=sanitized_env() if env is None else env)
    except (subprocess.TimeoutExpired, OSError):
        return []
    if proc.returncode != 0:
        return []
    lines = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    return lines[1:] if lines and lines[0] == "NAME" else []


def voice_choices(names: list[str], current: str = "") -> list[tuple[str, str]]:
    """The voice dropdown's (label, --voice value) rows: auto first, then every voice in `voice
    list`'s order (the engine's default English voice first, as measured in its docs/voices.md),
    the test tone last; a saved voice that is not listed (a typed name, or an engine that could
    not be asked) is kept, after auto, so opening the settings never changes it."""
    names = [n for n in dict.fromkeys(names) if n and n != "auto"]
    rows = [AUTO_VOICE]
    current = (current or "").strip()
    if current and current != "auto" and current not in names:
        rows.append((current, current))
    rows += [(n, n) for n in names if n != "tone"] + ([("tone", "tone")] if "tone" in names else [])
    return rows


def read_plan(engine: str, epub: str, env: dict | None = None, timeout: float = 600) -> dict:
    """What the engine will read of a book, before any audio is made: `epub2audio BOOK
    --list-chapters --preview --progress json` (chapters and skipped parts, each with its first
    words; the summary line; the warnings). Raises EngineError with the engine's one line."""
    cmd = [engine, epub, "--list-chapters", "--preview", "--progress", "json"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="replace",
                              timeout=timeout, env=sanitized_env() if env is None else env)
    except subprocess.TimeoutExpired:
        raise EngineError(f"reading the book took over {timeout:g} s") from None
    except OSError as error:
        raise EngineError(f"could not run {engine}: {error.strerror or error}") from None
    if proc.returncode != EXIT_OK:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        message = _stderr_message(lines[-1]) if lines else ""
        raise EngineError(message or _describe_exit(proc.returncode), proc.returncode)
    for line in reversed(proc.stdout.splitlines()):
        try:
            plan = json.loads(line)
        except ValueError:
            continue
        if isinstance(plan, dict) and isinstance(plan.get("chapters"), list):
            return plan
    raise EngineError("epub2audio printed no plan of the book")


def _duration(seconds) -> str:
    """'about 1 h 05 min', 'about 7 min', 'under a minute'."""
    minutes = int(round(max(0.0, float(seconds or 0)) / 60))
    if minutes < 1:
        return "under a minute"
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes:02d} min" if hours else f"about {minutes} min"


def plan_rows(plan: dict) -> list[tuple[str, str, str, str]]:
    """The preview table: (number, title, what happens to it, first words), the chapters in reading
    order and then the skipped parts, whose number is empty and whose middle column says why."""
    rows = [(str(c.get("number", "")), str(c.get("title", "")),
             f"{_int(c.get('characters')):,} characters, {_duration(c.get('estimated_seconds'))}",
             one_line(c.get("preview", ""))) for c in plan.get("chapters", [])]
    rows += [("", str(s.get("title", "")), f"skipped: {s.get('reason', '')}, {_int(s.get('characters')):,} characters",
              one_line(s.get("preview", ""))) for s in plan.get("skipped", [])]
    return rows


def plan_summary(plan: dict, chapters: str = "") -> list[str]:
    """The lines above the preview table: what is read, what is skipped, the book's warnings, and
    the Chapters setting where one limits the conversion."""
    read = plan.get("chapters", [])
    total = sum(_int(c.get("characters")) for c in read)
    seconds = sum(float(c.get("estimated_seconds") or 0) for c in read)
    lines = [f"{len(read)} chapter{'s' if len(read) != 1 else ''} read, {total:,} characters, "
             f"{_duration(seconds)} with the embedded voice."]
    skipping = plan.get("skipping") or {}
    if skipping.get("summary"):
        lines.append(str(skipping["summary"]))
    lines += [f"Warning: {one_line(w)}" for w in plan.get("warnings", [])]
    if chapters.strip():
        lines.append(f"Only chapters {chapters.strip()} are converted (the Chapters setting).")
    return lines


READALONG_CHOICES = ("", "epub", "folder")
# The audiobook's format (epub2audio --format): the file's suffix and the calibre format it becomes.
AUDIO_FORMATS = ("m4b", "mp3", "opus")


def audio_format(choice) -> str:
    """The saved choice, or m4b for anything else (an old or hand-edited setting)."""
    return choice if choice in AUDIO_FORMATS else "m4b"


def format_args(choice) -> list:
    """The engine's arguments for the format (none for the default, so an older engine still runs)."""
    fmt = audio_format(choice)
    return [] if fmt == "m4b" else ["--format", fmt]


def readalong_path(m4b: str) -> str:
    """Where the engine writes the read-along book of `m4b` (BOOK.readalong.epub beside it)."""
    return os.path.splitext(m4b)[0] + ".readalong.epub"


def readalong_steps(choice: str, formats, copy_folder: str) -> list[tuple[str, str]]:
    """What to do with a finished read-along book, in order: ("add_format", FMT) of the user's
    EPUB ("ORIGINAL_EPUB", only if the book has none yet: the first original is the one to keep)
    and of the read-along book ("EPUB"), or ("copy", folder). Nothing for '' (the default)."""
    if choice == "epub":
        keep = [] if "ORIGINAL_EPUB" in {f.upper() for f in formats or ()} else [("add_format", "ORIGINAL_EPUB")]
        return keep + [("add_format", "EPUB")]
    if choice == "folder":
        return [("copy", copy_folder.strip())] if copy_folder and copy_folder.strip() else [("no_folder", "")]
    return []


def sanitized_env(base: dict | None = None) -> dict:
    """A copy of `base` (default os.environ) that does not leak the host's Python or Qt into the engine."""
    env = dict(os.environ if base is None else base)
    for name in list(env):
        if name in _DROP_VARS or name.startswith(_DROP_PREFIXES):
            del env[name]
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ------------------------------------------------------------------------------------------------
# Progress events → (fraction, message)


def format_eta(seconds) -> str:
    """'about 2 h 05 min left', 'about 7 min left', 'less than a minute left' or ''."""
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        return ""
    if seconds != seconds or seconds < 0:  # NaN or negative
        return ""
    if seconds < 60:
        return "less than a minute left"
    minutes = int(round(seconds / 60))
    if minutes < 60:
        return f"about {minutes} min left"
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes:02d} min left"


class ProgressTracker:
    """Turns the engine's events into monotonic (fraction 0..1, message) pairs.

    feed(event) returns a pair when the display should change, else None. It also remembers what
    the caller needs afterwards: the output path, the error message, the warnings.
    """

    def __init__(self, label: str = ""):
        self.label = label
        self.fraction = 0.0
        self.total = 0
        self.cached = 0
        self.output = None
        self.duration_seconds = None
        self.chapters = None
        self.error = None
        self.error_code = None
        self.warnings: list[str] = []

    def _say(self, fraction: float, message: str):
        self.fraction = min(1.0, max(self.fraction, fraction))
        if self.label:
            message = f"{self.label}: {message}"
        return self.fraction, message

    def feed(self, event: dict):
        kind = event.get("event")
        if kind == "book":
            chapters = event.get("chapters")
            segments = event.get("segments")
            return self._say(self.fraction, f"{chapters} chapters, {segments} segments to read")
        if kind == "voice":
            who = event.get("narrator") or event.get("name") or "?"
            return self._say(self.fraction, f"loading the voice {who}")
        if kind == "plan":
            self.total = _int(event.get("total"))
            self.cached = _int(event.get("cached"))
            start = self.cached / self.total * RENDER_SHARE if self.total else 0.0
            if self.cached:
                return self._say(start, f"resuming, {self.cached} of {self.total} segments already done")
            return self._say(start, f"reading aloud {self.total} segments")
        if kind == "segment":
            done, todo = _int(event.get("done")), _int(event.get("total"))
            total = self.total or todo
            finished = self.cached + done
            fraction = finished / total * RENDER_SHARE if total else 0.0
            message = f"reading aloud, segment {finished} of {total}"
            eta = format_eta(event.get("eta_seconds"))
            if eta:
                message += f", {eta}"
            return self._say(fraction, message)
        if kind == "stage":
            if event.get("stage") == "assemble":
                return self._say(RENDER_SHARE, "assembling the M4B")
            return None
        if kind == "warning":
            message = str(event.get("message", ""))
            self.warnings.append(message)
            return self._say(self.fraction, f"warning: {message}")
        if kind == "done":
            self.output = event.get("output")
            self.duration_seconds = event.get("duration_seconds")
            self.chapters = event.get("chapters")
            return self._say(1.0, "done")
        if kind == "error":
            self.error = one_line(str(event.get("message", "")))
            self.error_code = event.get("exit_code")
            return None
        return None


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def parse_event(line: str):
    """The event dict of one stdout line, or None when the line is not a JSON event."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if isinstance(event, dict) and isinstance(event.get("event"), str):
        return event
    return None


# Events worth a line in calibre's job log (segments are far too many). Warnings get a line of
# their own, at the level calibre shows as a warning: see warning_line.
_LOGGED = {"book", "voice", "plan", "stage", "done", "error"}


def warning_line(event: dict) -> str:
    """The job log's line for a warning event: one line, whatever the message holds."""
    return "epub2audio warning: " + one_line(str(event.get("message", "")))


# ------------------------------------------------------------------------------------------------
# Running the engine


class _Log:
    """Adapts calibre's Log (info/warn/error), a print-like callable, or None."""

    def __init__(self, log):
        self.log = log

    def _emit(self, level: str, message: str) -> None:
        log = self.log
        if log is None:
            return
        fn = getattr(log, level, None) or getattr(log, "info", None)
        if fn is None and callable(log):
            fn = log
        if fn is not None:
            try:
                fn(message)
            except Exception:
                pass

    def info(self, message: str) -> None:
        self._emit("info", message)

    def warn(self, message: str) -> None:
        self._emit("warn", message)

    def error(self, message: str) -> None:
        self._emit("error", message)


def start_engine(cmd: list[str], env: dict | None = None, cwd: str | None = None) -> subprocess.Popen:
    """Start the engine in its own session (so its whole process group can be stopped)."""
    kwargs = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                  env=sanitized_env() if env is None else env, cwd=cwd)
    if os.name == "nt":
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0) | getattr(
            subprocess, "CREATE_NO_WINDOW", 0)
    else:
        kwargs["start_new_session"] = True
    try:
        return subprocess.Popen(cmd, **kwargs)
    except FileNotFoundError:
        raise EngineError(f"epub2audio was not found at {cmd[0]}; set its path in the plugin's settings") from None
    except PermissionError:
        raise EngineError(f"{cmd[0]} cannot be run (permission denied); set the path of the epub2audio "
                          "program in the plugin's settings") from None
    except OSError as error:
        raise EngineError(f"could not start {cmd[0]}: {error.strerror or error}") from None


def _signal_group(proc: subprocess.Popen, sig) -> None:
    if os.name == "nt":
        if sig == getattr(signal, "SIGKILL", None) or sig is None:
            subprocess.call(["taskkill", "/F", "/T", "/PID", str(proc.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            try:
                proc.send_signal(signal.CTRL_BREAK_EVENT)
            except (OSError, ValueError):
                pass
        return
    try:
        os.killpg(proc.pid, sig)  # start_new_session: the group id is the engine's pid
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still exists (POSIX)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_engine(proc: subprocess.Popen, grace: float = GRACE_SECONDS) -> None:
    """SIGTERM the engine's process group (it saves a resumable job), SIGKILL it after `grace` s."""
    _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        leader_done = proc.poll() is not None
        if leader_done and (os.name == "nt" or not group_alive(proc.pid)):
            return
        time.sleep(0.05)
    _signal_group(proc, getattr(signal, "SIGKILL", None))
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def stop_all(procs, grace: float = 3.0) -> None:
    """Stop several engines at once (calibre is closing): SIGTERM all groups, SIGKILL what is left."""
    procs = [p for p in procs if p is not None]
    for proc in procs:
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    pending = list(procs)
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if p.poll() is None or (os.name != "nt" and group_alive(p.pid))]
        if pending:
            time.sleep(0.05)
    for proc in pending:
        _signal_group(proc, getattr(signal, "SIGKILL", None))
    for proc in pending:
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass


def _pump(stream, name: str, lines: queue.Queue) -> None:
    try:
        for raw in iter(stream.readline, b""):
            lines.put((name, raw.decode("utf-8", "replace").rstrip("\r\n")))
    except (OSError, ValueError):
        pass
    finally:
        lines.put((name, None))


def run_engine(cmd: list[str], notify=None, abort=None, log=None, env: dict | None = None,
               label: str = "", grace: float = GRACE_SECONDS, on_start=None) -> ConversionResult:
    """Run one conversion to the end; return where the M4B is, or raise EngineError.

    notify(fraction, message) gets progress; abort is a threading.Event (or anything with
    is_set()), checked every POLL_SECONDS even while the engine prints nothing; on abort the
    process group gets SIGTERM, then SIGKILL after `grace` seconds, and EngineStopped is raised.
    on_start(proc) is called once the process runs (the GUI keeps it to stop it at shutdown).
    """
    out = _Log(log)
    tracker = ProgressTracker(label)
    out.info("Running: " + subprocess.list2cmdline(cmd))
    proc = start_engine(cmd, env=env)
    if on_start is not None:
        on_start(proc)
    lines: queue.Queue = queue.Queue()
    readers = [threading.Thread(target=_pump, args=(proc.stdout, "stdout", lines), daemon=True),
               threading.Thread(target=_pump, args=(proc.stderr, "stderr", lines), daemon=True)]
    for reader in readers:
        reader.start()
    open_streams = 2
    last_stderr = ""
    aborted = False
    exited_at = 0.0
    try:
        while open_streams:
            if abort is not None and abort.is_set():
                aborted = True
                out.warn("Stopping epub2audio (it keeps what it has done; converting again resumes)")
                stop_engine(proc, grace)
                break
            try:
                name, line = lines.get(timeout=POLL_SECONDS)
            except queue.Empty:
                # A leftover child holding the pipes open must not keep us waiting after the engine ended.
                if proc.poll() is not None:
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > 2.0:
                        break
                continue
            if line is None:
                open_streams -= 1
                continue
            if name == "stderr":
                if line.strip():
                    last_stderr = line.strip()
                    out.info(line)
                continue
            event = parse_event(line)
            if event is None:
                if line.strip():
                    out.info(line)
                continue
            if event["event"] == "warning":  # at once: a job that fails later still shows it
                out.warn(warning_line(event))
            elif event["event"] in _LOGGED:
                out.info("epub2audio: " + json.dumps(event, ensure_ascii=False))
            update = tracker.feed(event)
            if update is not None and notify is not None:
                try:
                    notify(*update)
                except Exception:
                    pass
        if not aborted:
            # Streams closed: the engine is ending. Keep honouring abort while it does.
            while proc.poll() is None:
                if abort is not None and abort.is_set():
                    aborted = True
                    stop_engine(proc, grace)
                    break
                time.sleep(0.05)
    except BaseException:
        if proc.poll() is None:
            stop_engine(proc, grace)
        raise
    finally:
        for reader in readers:
            reader.join(timeout=2)
        for stream in (proc.stdout, proc.stderr):
            try:
                stream.close()
            except Exception:
                pass
    code = proc.wait()
    if aborted:
        raise EngineStopped("stopped; convert the book again to resume where it stopped", code)
    if code != EXIT_OK or tracker.error:
        message = tracker.error or _stderr_message(last_stderr) or _describe_exit(code)
        if tracker.error:
            out.error(f"epub2audio failed (exit code {code}): {message}")
        raise EngineError(message, tracker.error_code if tracker.error_code is not None else code)
    output = tracker.output
    if not output or not os.path.isfile(output):
        raise EngineError("epub2audio finished but wrote no audiobook" + (f" (expected {output})" if output else ""),
                          code)
    return ConversionResult(output, tracker.duration_seconds, tracker.chapters)


def _stderr_message(line: str) -> str:
    prefix = "epub2audio: error:"
    line = one_line(line)
    if line.startswith(prefix):
        return line[len(prefix):].strip()
    return ""


def _describe_exit(code: int) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except (ValueError, AttributeError):
            name = f"signal {-code}"
        return f"epub2audio was killed by {name}"
    if code == EXIT_INTERRUPTED:
        return "epub2audio was interrupted; convert the book again to resume"
    return f"epub2audio failed with exit code {code} and no message"


# ------------------------------------------------------------------------------------------------
# Metadata → META.json


def format_series_index(value) -> str:
    """1.0 → '1', 2.5 → '2.5'; '' for nothing."""
    if value is None or value == "":
        return ""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value).strip()
    if number != number:
        return ""
    return str(int(number)) if number == int(number) else f"{number:g}"


def format_date(value) -> str:
    """A datetime/date/str → 'YYYY-MM-DD' ('' for calibre's undefined date, year 101 or earlier)."""
    if value is None or value == "":
        return ""
    if isinstance(value, (_dt.datetime, _dt.date)):
        if value.year <= 101:
            return ""
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    text = str(value).strip()
    if text[:4].isdigit() and int(text[:4]) <= 101:
        return ""
    return text


def normalize_isbn(value) -> str:
    return "".join(ch for ch in str(value or "") if ch.isdigit() or ch in "xX").upper()


def build_meta(title=None, authors=None, language=None, date=None, description=None, publisher=None,
               isbn=None, identifier=None, series=None, series_index=None, cover=None) -> dict:
    """The `--meta` object: only the fields that have a value, each in the engine's format."""
    meta: dict = {}
    if title and str(title).strip():
        meta["title"] = str(title).strip()
    if authors:
        if isinstance(authors, str):
            authors = [a.strip() for a in authors.split("&")]
        names = [str(a).strip() for a in authors if a and str(a).strip()]
        if names:
            meta["authors"] = names
    if language and str(language).strip():
        meta["language"] = str(language).strip()
    date = format_date(date)
    if date:
        meta["date"] = date
    if description and str(description).strip():
        meta["description"] = str(description).strip()
    if publisher and str(publisher).strip():
        meta["publisher"] = str(publisher).strip()
    isbn = normalize_isbn(isbn)
    if isbn:
        meta["isbn"] = isbn
        # The engine tags the ISBN it finds in the identifier; make it calibre's, not the EPUB's.
        meta["identifier"] = identifier or f"urn:isbn:{isbn}"
    elif identifier and str(identifier).strip():
        meta["identifier"] = str(identifier).strip()
    if series and str(series).strip():
        meta["series"] = str(series).strip()
        index = format_series_index(series_index)
        if index:
            meta["series_index"] = index
    if cover and os.path.isfile(str(cover)):
        meta["cover"] = os.path.abspath(str(cover))
    return meta


def write_meta(meta: dict, path: str) -> str:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=2, sort_keys=True)
        f.write("\n")
    return path


def safe_filename(text: str, limit: int = 80) -> str:
    """A file name made from a title: no path separators or control characters."""
    bad = '<>:"/\\|?*'
    cleaned = "".join("_" if (ch in bad or ord(ch) < 32) else ch for ch in str(text or ""))
    cleaned = " ".join(cleaned.split()).strip(" .")
    return cleaned[:limit].rstrip(" .") or "audiobook"


def unique_path(folder: str, name: str, ext: str) -> str:
    """folder/name.ext, or folder/name (2).ext ... when that exists."""
    candidate = os.path.join(folder, name + ext)
    n = 2
    while os.path.exists(candidate):
        candidate = os.path.join(folder, f"{name} ({n}){ext}")
        n += 1
    return candidate


def copy_to_folder(m4b: str, folder: str, name: str) -> str:
    """Copy the finished audiobook into `folder` as '<name>.m4b' (.mp3, .opus: its own suffix;
    never overwriting); return the new path."""
    folder = os.path.expanduser(folder)
    os.makedirs(folder, exist_ok=True)
    dest = unique_path(folder, safe_filename(name), os.path.splitext(m4b)[1] or ".m4b")
    shutil.copyfile(m4b, dest)
    return dest


def copy_readalong_to_folder(readalong: str, folder: str, name: str) -> str:
    """Copy the read-along book into `folder` as '<name>.readalong.epub' (never overwriting)."""
    os.makedirs(folder, exist_ok=True)
    dest = unique_path(folder, safe_filename(name), ".readalong.epub")
    shutil.copyfile(readalong, dest)
    return dest


if __name__ == "__main__":  # a tiny manual check: python engine.py ENGINE BOOK.epub OUT.m4b
    result = run_engine(build_command(sys.argv[1], sys.argv[2], sys.argv[3], voice="tone"),
                        notify=lambda f, m: print(f"{f:6.1%} {m}"), log=print)
    print(result)
