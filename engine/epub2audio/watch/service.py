"""The watcher at work: the scanner (and watchdog's events) in the background, the converter in the
main thread, and how both stop.

One conversion at a time: books are converted one after another in the main thread, and the voice
lock keeps two watchers from running the same model at once (`--workers N` is the engine's own
parallelism within one book, as for the plain command). Ctrl-C or SIGTERM (raised as
KeyboardInterrupt) stops the conversion, leaves the book in the queue, and ends the threads.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..errors import InputError
from .arrivals import Arrivals
from .converter import Converter
from .locks import VoiceLock
from .log import WatchLog
from .queue import WatchQueue
from .scanner import Scanner, start_observer

TICK = 0.5  # seconds between looks at files still arriving


def watch_folder(in_dir: Path, out_dir: Path, options, *, state: Path, log: WatchLog, voice_lock: Path,
                 settle: float, rescan: float, once: bool = False, progress_mode: str = "none", web=None) -> None:
    """Convert what arrives in IN_DIR until stopped (KeyboardInterrupt, after saying so in the log),
    or with `once`, until nothing is queued or arriving. `state` is the queue's database. `web`:
    web.WebSettings to serve the page with, on a connection of its own to the same queue."""
    suffix = f".{getattr(options, 'audio_format', 'm4b')}"
    consumer_queue, scanner_queue = WatchQueue(state, out_dir, suffix), WatchQueue(state, out_dir, suffix)
    converted = threading.Event()
    scanner = Scanner(in_dir, scanner_queue, Arrivals(settle), log, rescan, on_queued=converted.set)
    converter = Converter(in_dir, out_dir, consumer_queue, log, options, progress_mode, VoiceLock(voice_lock, log))
    stop = threading.Event()
    threads = []
    if web is not None:
        from .hub import Hub
        from .web import Door, WebServer

        hub = Hub()
        log.listeners.append(hub.logged)
        converter.listener = hub.progress
        door = Door(in_dir, out_dir, WatchQueue(state, out_dir, suffix), hub, options, wake=converted.set)
        threads.append(WebServer(web, door, log).start())
    try:
        for book in consumer_queue.recover():
            log.say("resuming" if book.state == "converting" else "retrying", book.source.name,
                    f"-> {book.output}", book.sha256)
        if not once:
            threads += _start_background(in_dir, scanner, stop, log)
        log.say("watching", str(in_dir), f"-> {out_dir} (voice {options.voice}, settle {settle:g} s"
                f"{', once' if once else ''}; queue {state})")
        if once:
            _serve_once(scanner, converter, out_dir)
            return
        _serve_forever(converter, converted)
    except KeyboardInterrupt:
        log.say("stopped", str(in_dir), "Ctrl-C / SIGTERM")
        raise
    finally:
        stop.set()
        scanner.wake.set()
        for thing in threads:
            if hasattr(thing, "stop"):
                thing.stop()
            thing.join(timeout=10)
        consumer_queue.close()
        if not any(t.is_alive() for t in threads):
            scanner_queue.close()


def _serve_once(scanner: Scanner, converter: Converter, out_dir: Path) -> None:
    while True:
        scanner.step()
        if converter.convert_next():
            continue
        if not out_dir.is_dir():
            raise InputError(f"{out_dir}: the output folder went away")
        if scanner.idle and converter.queue.next_queued() is None:
            return
        time.sleep(TICK)


def _serve_forever(converter: Converter, wake: threading.Event) -> None:
    while True:
        if not converter.convert_next():
            wake.wait(TICK)
            wake.clear()


def _start_background(in_dir: Path, scanner: Scanner, stop: threading.Event, log: WatchLog) -> list:
    """File events first, then the scanner, whose first step lists the folder: a file that arrives
    in between is reported by an event, so none waits for the next rescan."""
    try:
        threads = [start_observer(in_dir, scanner)]
    except Exception as error:  # e.g. the inotify watch limit: the rescans still find every book
        log.say("warning", str(in_dir), f"no file events ({error}); relying on rescans")
        threads = []
    thread = threading.Thread(target=_scan_forever, args=(scanner, stop, log), name="watch-scanner", daemon=True)
    thread.start()
    return [thread, *threads]


def _scan_forever(scanner: Scanner, stop: threading.Event, log: WatchLog) -> None:
    while not stop.is_set():
        try:
            scanner.step()
        except Exception as error:  # keep watching; one bad moment must not end the watcher
            log.say("warning", "", f"scanner: {type(error).__name__}: {error}")
        scanner.wake.wait(TICK)
        scanner.wake.clear()
