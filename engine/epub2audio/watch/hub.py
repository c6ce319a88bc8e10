"""What the web page shows live: the engine's progress events of the book being converted and the
watcher's log lines, kept as a small state per book with a version number that moves on each
change. The converter's thread writes; the page's server reads (it polls the version, so no
event loop is shared between threads). No queue here: the queue is WatchQueue's alone."""

from __future__ import annotations

import threading
import time

KEPT_WARNINGS = 20


class Hub:
    def __init__(self):
        self._lock = threading.Lock()
        self._live: dict[str, dict] = {}
        self.version = 0

    def _changed(self) -> None:
        self.version += 1

    def progress(self, sha256: str, event: str, fields: dict) -> None:
        """An engine progress event of the book with this content (converter.Watched's listener)."""
        with self._lock:
            live = self._live.setdefault(sha256, {"warnings": []})
            if event == "book":
                live.update(title=fields.get("title"), chapters=fields.get("chapters"), started=time.time())
            elif event == "plan":  # segments already in the job store (a resumed job) count as done
                live.update(stage="render", cached=fields.get("cached", 0), done=fields.get("cached", 0),
                            total=fields.get("total"), skipping=(fields.get("skipping") or {}).get("summary"))
            elif event == "stage":
                live["stage"] = fields.get("stage")
            elif event == "segment":
                cached = live.get("cached", 0)
                live.update(done=cached + fields.get("done", 0), total=cached + fields.get("total", 0),
                            eta_seconds=fields.get("eta_seconds"))
            elif event == "chapter":
                live.update(chapter_title=fields.get("title"), chapters_done=fields.get("done"),
                            chapters_this_run=fields.get("total"))
            elif event == "warning":
                live["warnings"] = (live["warnings"] + [str(fields.get("message", ""))])[-KEPT_WARNINGS:]
            elif event == "done":
                live.update(stage="done", eta_seconds=0, duration_seconds=fields.get("duration_seconds"))
            else:
                return
            self._changed()

    def logged(self, action: str, name: str, detail: str, sha256: str | None) -> None:
        """A watcher log line (WatchLog's listener): the queue may have changed."""
        with self._lock:
            if sha256 and action == "converting":
                self._live[sha256] = {"warnings": [], "stage": "starting"}
            self._changed()

    def live(self, sha256: str) -> dict:
        with self._lock:
            found = self._live.get(sha256)
            return {**found, "warnings": list(found["warnings"])} if found else {}
