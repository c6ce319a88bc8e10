"""Run fuzz inputs through `epub2audio BOOK --list-chapters --progress json`, in-process, in worker
processes that are killed when one input runs past the hang guard.

The rule being checked: every input ends in exit 0 (a chapter listing) or exit 2 with exactly one
line on stderr naming the file. Anything else is a crash: "internal error" (an exception the reader
let through), an exception escaping main, a worker that died, or an input that hung.

Each worker generates its inputs itself from (seed, index) and calls cli.main in-process, so an
input costs what the reader costs, not a Python start-up. The parent hands out one index at a time
and times it; a worker silent past `hang_seconds` is killed, the input is reported as a hang and a
fresh worker carries on.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import resource
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator

TESTS = Path(__file__).resolve().parent
CLI_ARGS = ["--list-chapters", "--progress", "json"]
PREFIX = "epub2audio: error: "


@dataclass
class Result:
    index: int
    outcome: str  # "ok", "refused", "crash", "hang" (or "generator-error": a bug in fuzz_epubs)
    kind: str  # the refusal's message class, or the crash class (exception type and where)
    message: str  # the stderr line, or the crash's details
    seconds: float = 0.0  # the check itself, generation not included
    rss_kb: int = 0  # the worker's peak RSS after this input
    mutations: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome in ("crash", "hang", "generator-error")


def input_name(seed: int, index: int) -> str:
    return f"fuzz-{seed}-{index}.epub"


def reproducer(seed: int, index: int) -> str:
    """The commands, from the repository root, that write input `index` to a file and run it."""
    import fuzz_epubs

    out = f"/tmp/{input_name(seed, index)}"
    options = " ".join(fuzz_epubs.make_input(seed, index).options + ["--debug"])
    return (f"{fuzz_epubs.reproduce_command(seed, index, out)} && "
            f"PYTHONPATH=engine python -m epub2audio.cli {out} {' '.join(CLI_ARGS)} {options}")


def _safe_reproducer(seed: int, index: int) -> str:
    try:
        return reproducer(seed, index)
    except Exception as exc:  # noqa: BLE001 - a generator error: the input cannot be made
        return f"(cannot make the input: {exc!r})"


def failure_report(seed: int, failed: list[Result], per_class: int = 3) -> str:
    """Failures grouped by class, biggest first, each with a few reproducers."""
    classes: dict[str, list[Result]] = {}
    for r in sorted(failed, key=lambda r: r.index):
        classes.setdefault(f"{r.outcome}: {r.kind}", []).append(r)
    lines = []
    for kind, results in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"[{len(results)}x] {kind}")
        for r in results[:per_class]:
            lines += [f"    index {r.index}: {r.message[:160]}", f"      mutations: {r.mutations[:300]}",
                      f"      reproduce: {_safe_reproducer(seed, r.index)}"]
    return "\n".join(lines)


def message_class(line: str, name: str) -> str:
    """'epub2audio: error: fuzz-1-7.epub: not a readable EPUB (Opening and ending tag mismatch: p line 3
    and body, ...)' → 'not a readable EPUB (Opening and ending tag ...': the cause, without details."""
    text = line.removeprefix(PREFIX).replace(name, "BOOK").removeprefix("BOOK: ")
    text = re.sub(r"\d+", "N", text)
    head, paren, rest = text.partition("(")
    return (head + paren + " ".join(rest.split()[:4]))[:90]


def verdict(code: int, stdout: str, stderr: str, name: str) -> tuple[str, str, str]:
    """(outcome, kind, message) for one run of the command."""
    lines = stderr.splitlines()
    if code == 0:
        try:
            listing = json.loads(stdout)
        except ValueError:
            listing = None
        if isinstance(listing, dict) and isinstance(listing.get("chapters"), list) and not stderr:
            return "ok", "exit 0", ""
        return "crash", "exit 0 without a clean chapter listing", (stderr or stdout)[:300]
    if code == 2:
        if len(lines) == 1 and lines[0].startswith(PREFIX) and name in lines[0]:
            return "refused", message_class(lines[0], name), lines[0]
        return "crash", "exit 2 without one stderr line naming the file", stderr[:300]
    internal = re.search(r"internal error: (\w+)", stderr)
    if internal:
        return "crash", f"internal error: {internal.group(1)}", lines[-1] if lines else ""
    return "crash", f"exit {code}", stderr[:300]


def crash_site(tb: str) -> str:
    """The innermost engine frame of a traceback, 'book/epub.py:_nav_list', and the innermost frame
    overall when that is a library's."""
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', tb)
    ours = [(f, fn) for f, fn in frames if "/epub2audio/" in f]
    site = ""
    if ours:
        f, fn = ours[-1]
        site = f"{f.rpartition('/epub2audio/')[2]}:{fn}"
    if frames and (not ours or frames[-1] != ours[-1]):
        f, fn = frames[-1]
        site += f" → {Path(f).name}:{fn}"
    return site


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """cli.main in this process; an exception escaping it becomes code -1 with its traceback."""
    from epub2audio import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except BaseException:  # noqa: BLE001 - nothing may escape main; that is the finding
            return -1, out.getvalue(), f"escaped main:\n{traceback.format_exc()}"
    return code, out.getvalue(), err.getvalue()


def check_file(path: Path, options: list[str] = ()) -> tuple[str, str, str]:
    code, stdout, stderr = run_cli([str(path), *CLI_ARGS, *options])
    if code == -1:
        exc = stderr.strip().splitlines()[-1].partition(":")[0]
        return "crash", f"{exc} escaped main at {crash_site(stderr)}", stderr.strip().splitlines()[-1][:300]
    outcome, kind, message = verdict(code, stdout, stderr, path.name)
    if outcome == "crash" and kind.startswith("internal error"):
        # Once more with --debug for the traceback, to say where.
        _, _, debug_err = run_cli([str(path), *CLI_ARGS, *options, "--debug"])
        kind = f"{kind} at {crash_site(debug_err)}"
    return outcome, kind, message


# ----------------------------------------------------------------------------------------------
# The worker: indices in on stdin, one JSON result per line out


def worker(seed: int, target: str | None) -> None:
    import fuzz_epubs

    check = check_file
    if target:  # tests swap in a check that misbehaves, to prove the guard works
        module, _, func = target.partition(":")
        check = getattr(__import__(module), func)
    os.environ["EPUB2AUDIO_CONFIG"] = "/nonexistent/epub2audio-fuzz/config.toml"  # the user's settings stay out
    results = sys.stdout
    sys.stdout = sys.stderr  # stray prints must not corrupt the result stream
    with tempfile.TemporaryDirectory(prefix="epub2audio-fuzz-") as tmp:
        warm = Path(tmp) / "warm-up.epub"  # the first run imports the engine: not an input's cost
        warm.write_bytes(fuzz_epubs.base_books()[0].zip_bytes())
        check_file(warm)
        print("READY", file=results, flush=True)
        for line in sys.stdin:
            index = int(line)
            try:
                item = fuzz_epubs.make_input(seed, index)
            except Exception as exc:  # a bug of ours, not the reader's: say so, loudly
                result = Result(index, "generator-error", type(exc).__name__, traceback.format_exc()[-300:])
                print(json.dumps(asdict(result)), file=results, flush=True)
                continue
            path = Path(tmp) / input_name(seed, index)
            path.write_bytes(item.data)
            start = time.perf_counter()
            outcome, kind, message = check(path, item.options)
            seconds = time.perf_counter() - start
            path.unlink()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print(json.dumps(asdict(Result(index, outcome, kind, message, seconds, rss, item.description))),
                  file=results, flush=True)


class _Worker:
    def __init__(self, seed: int, memory_mb: int, target: str | None):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), *sys.path]))
        cmd = [sys.executable, str(Path(__file__)), "--worker", str(seed), "--memory-mb", str(memory_mb)]
        self.proc = subprocess.Popen(cmd + (["--target", target] if target else []), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, text=True, bufsize=1)
        self.index: int | None = None
        self.started = 0.0
        ready = self.proc.stdout.readline()
        if ready.strip() != "READY":
            self.proc.kill()
            raise RuntimeError(f"fuzz worker failed to start (exit {self.proc.wait()})")

    def send(self, index: int):
        self.index, self.started = index, time.monotonic()
        self.proc.stdin.write(f"{index}\n")
        self.proc.stdin.flush()

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def fuzz(seed: int, indices: Iterable[int], jobs: int = 1, hang_seconds: float = 60, memory_mb: int = 2048,
         target: str | None = None) -> Iterator[Result]:
    """Results for these inputs, in the order they finish."""
    import fuzz_epubs

    todo = iter(indices)
    selector = selectors.DefaultSelector()
    workers: list[_Worker] = []

    def start_worker():
        w = _Worker(seed, memory_mb, target)
        workers.append(w)
        selector.register(w.proc.stdout, selectors.EVENT_READ, w)
        return w

    def feed(w) -> bool:
        index = next(todo, None)
        if index is None:
            retire(w, kill=False)
            return False
        w.send(index)
        return True

    def retire(w, kill: bool):
        selector.unregister(w.proc.stdout)
        workers.remove(w)
        w.kill() if kill else w.close()

    def lost(w, outcome, kind, message, seconds) -> Result:
        retire(w, kill=True)
        try:
            mutations = fuzz_epubs.make_input(seed, w.index).description
        except Exception as exc:  # noqa: BLE001
            mutations = f"(generator error: {exc!r})"
        index = next(todo, None)
        if index is not None:  # a fresh worker carries on
            start_worker().send(index)
        return Result(w.index, outcome, kind, message, seconds, 0, mutations)

    try:
        for _ in range(jobs):
            if not feed(start_worker()):
                break
        while workers:
            now = time.monotonic()
            deadline = min(w.started for w in workers) + hang_seconds
            events = selector.select(timeout=max(0.0, deadline - now))
            for key, _ in events:
                w = key.data
                line = w.proc.stdout.readline()
                if not line:
                    code = w.proc.wait()
                    yield lost(w, "crash", f"worker died (exit {code})", "the process ended mid-input", 0.0)
                    continue
                yield Result(**json.loads(line))
                feed(w)
            now = time.monotonic()
            for w in [w for w in workers if now - w.started > hang_seconds]:
                yield lost(w, "hang", "hang", f"no answer after {hang_seconds:g} s", now - w.started)
    finally:
        for w in list(workers):
            retire(w, kill=True)


def _worker_main(argv: list[str]) -> None:
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--worker", type=int, required=True, metavar="SEED")
    p.add_argument("--memory-mb", type=int, default=2048)
    p.add_argument("--target")
    args = p.parse_args(argv)
    limit = args.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # a bomb fails here, not on the shared machine
    worker(args.worker, args.target)


if __name__ == "__main__":
    _worker_main(sys.argv[1:])
