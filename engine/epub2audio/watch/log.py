"""The watcher's log: what happened to each file, in plain timestamped lines.

OUT_DIR/epub2audio-watch.log gets every line, stderr the same lines, and with `--progress json`
stdout gets each as {"event": "watch", ...}.
"""

from __future__ import annotations

import json
import sys
import threading
from datetime import datetime
from pathlib import Path

LOG_NAME = "epub2audio-watch.log"


class WatchLog:
    """Plain timestamped lines in OUT_DIR/epub2audio-watch.log and on stderr (+ JSON on request)."""

    def __init__(self, path: Path, echo=sys.stderr, json_stream=None):
        self.path, self.echo, self.json_stream = Path(path), echo, json_stream
        self._lock = threading.Lock()
        self.listeners = []  # called with (action, name, detail, sha256) after each line (the web page)

    def say(self, action: str, name: str = "", detail: str = "", sha256: str | None = None) -> None:
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        tag = f" [{sha256[:12]}]" if sha256 else ""
        line = f"{stamp}  {action:<10} {name}{tag}" + (f" {detail}" if detail else "")
        with self._lock:
            try:
                with open(self.path, "a", encoding="utf-8") as f:  # reopened a line: logrotate-safe
                    f.write(line + "\n")
            except OSError as error:
                line += f"  (not written to {self.path}: {error.strerror})"
            if self.echo is not None:
                print(line, file=self.echo, flush=True)
            if self.json_stream is not None:
                event = {"event": "watch", "action": action, "file": name, "sha256": sha256, "detail": detail}
                self.json_stream.write(json.dumps(event, ensure_ascii=False) + "\n")
                self.json_stream.flush()
        for listener in self.listeners:
            listener(action, name, detail, sha256)
