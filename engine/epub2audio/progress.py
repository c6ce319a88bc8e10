"""Progress events: one dict per thing that happened, shown as lines for people or as JSON lines.

People get milestone lines on stderr (the plan, each chapter read, assembling, checking, "Wrote …"),
with a progress bar under them when stderr is a terminal; stdout stays free for programs.

The JSON-lines stream (`--progress json`) is the machine interface the calibre plugin and other
front ends read: one object a line on stdout, each with an "event" key:
  book     {title, chapters, segments, characters}
  voice    {name, narrator, backend, precision, sample_rate, model_id}
  plan     {total, cached, to_render, skipping: {parts, characters, read_characters, share, by_evidence,
           summary}}   (what of the book is not read: book/skips.py; summary is the line people see)
  segment  {done, total, chapter, index, audio_seconds, synth_seconds, eta_seconds}
  split    {chapter, index, pieces}   (a segment the voice could not say within its length cap is said
           in `pieces` shorter ones instead: the `total` of later segment events grows by pieces - 1)
  chapter  {chapter, title, done, total}   (every segment of a chapter rendered in this run; `done`
           of `total` chapters this run renders; chapter is 0-based, as in segment)
  stage    {stage: "render" | "assemble" | "verify"}
  verify   {passed, problems, asr, coverage, wer}
  warning  {message}
  done     {output, duration_seconds, chapters, segments_rendered, seconds}
  error    {message, exit_code}
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import TextIO

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_line(value) -> str:
    """One JSON object on one line, non-ASCII text as is. A file name that is not UTF-8 holds lone
    surrogates ('caf\\udce9.epub'), which no UTF-8 stream can write: they become \\udcXX escapes,
    valid JSON that decodes to the same str (os.fsencode gives the file's bytes back)."""
    text = json.dumps(value, ensure_ascii=False)
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


# The embedded voice's pace, pauses included (measured on the sample book); estimates only.
CHARS_PER_SECOND = 14.5


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def emit(self, event: str, **fields) -> None:
        pass

    def close(self) -> None:
        pass


class JsonLinesProgress(Progress):
    def __init__(self, stream: TextIO = sys.stdout):
        self.stream = stream

    def emit(self, event: str, **fields) -> None:
        self.stream.write(json_line({"event": event, **fields}) + "\n")
        self.stream.flush()


class TextProgress(Progress):
    """Milestone lines on stderr; with `bar` (stderr is a terminal) a tqdm bar over the segments under them."""

    def __init__(self, stream: TextIO = sys.stderr, *, bar: bool = True):
        self.stream = stream
        self.show_bar = bar
        self.bar = None

    def _say(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def emit(self, event: str, **f) -> None:
        if event == "book":
            estimate = format_duration(f["characters"] / CHARS_PER_SECOND)
            self._say(f"{f['title']}: {f['chapters']} chapters, {f['segments']} segments, "
                      f"{f['characters']:,} characters, about {estimate} of audio")
        elif event == "voice":
            self._say(f"Voice: {f['narrator']} ({f['backend']}, {f['precision']}, {f['sample_rate']} Hz)")
        elif event == "workers":  # --workers auto on a GPU (render._auto_workers)
            how = "measured" if f["measured"] else "as measured before"
            self._say(f"Workers: {f['workers']} on {f['device']} ({how})")
        elif event == "plan":
            if f.get("skipping"):
                self._say(f["skipping"]["summary"])
            if f["cached"]:
                self._say(f"Resuming: {f['cached']} of {f['total']} segments already done")
            if self.show_bar:
                from tqdm import tqdm

                self.bar = tqdm(total=f["to_render"], unit="seg", file=self.stream, dynamic_ncols=True,
                                disable=not f["to_render"])
        elif event == "segment" and self.bar is not None:
            self.bar.update(1)
        elif event == "chapter":
            self._say(f"Read chapter {f['chapter'] + 1} ({f['done']} of {f['total']}): {f['title']}")
        elif event == "stage" and f["stage"] == "assemble":
            self.close()
            self._say("Assembling the M4B…")
        elif event == "stage" and f["stage"] == "verify":
            self._say("Checking the M4B…")
        elif event == "verify":
            wer = f" worst chapter WER {f['wer']:.2f}," if f.get("wer") is not None else ""
            verdict = "passed" if f["passed"] else f"FAILED ({len(f['problems'])} problems)"
            self._say(f"Check {verdict}:{wer} text coverage {f['coverage']:.1%}" if f.get("coverage") is not None
                      else f"Check {verdict}")
        elif event == "warning":
            self._say(f"warning: {f['message']}")
        elif event == "done":
            self.close()
            minutes = f["duration_seconds"] / 60
            chapters = f"{f['chapters']} chapter" + ("s" if f["chapters"] != 1 else "")
            self._say(f"Wrote {f['output']} ({minutes:.1f} min, {chapters})")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def for_mode(mode: str) -> Progress:
    """--progress: json = events on stdout; none = nothing; bar = lines and a bar on stderr;
    auto = the bar when stderr is a terminal, else the lines alone (logs, pipes, front ends)."""
    if mode == "json":
        return JsonLinesProgress(sys.stdout)
    if mode == "none":
        return Progress()
    return TextProgress(sys.stderr, bar=mode == "bar" or sys.stderr.isatty())


class Eta:
    """Remaining time from the pace of the segments rendered so far in this run."""

    def __init__(self, total: int):
        self.total = total
        self.done = 0
        self.started = time.monotonic()

    def step(self) -> float | None:
        self.done += 1
        elapsed = time.monotonic() - self.started
        return round(elapsed / self.done * (self.total - self.done), 1)
