"""`epub2audio watch IN_DIR --out OUT_DIR` (also `python -m epub2audio.watch`): the arguments, the
folders checked, the job options built, then `service.watch_folder` does the work.

Exit codes: 0 after --once, 2 bad input, 130 stopped by Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ..errors import InputError
from ..options import add_ray_argument, job_options, workers_flag
from .arrivals import DEFAULT_SETTLE
from .locks import instance_lock, voice_lock_path
from .log import LOG_NAME, WatchLog
from .names import one_line
from .queue import queue_path
from .scanner import DEFAULT_RESCAN
from .service import watch_folder

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("in_dir", type=Path, metavar="IN_DIR", help="the folder to watch for books: EPUB, or with calibre "
                        "installed MOBI, AZW3, DOCX, FB2, ODT, RTF, TXT, HTML or PDF")
    parser.add_argument("--out", "-o", dest="out_dir", type=Path, required=True, metavar="OUT_DIR",
                        help="where the M4B files (and epub2audio-watch.log) go")
    parser.add_argument("--voice", help="auto (default: each book's language decides; hibari for English), hibari, joe, kokoro:NAME, "
                                            "piper:NAME, cosyvoice3:NAME or tone (see `epub2audio voice list`)")
    parser.add_argument("--model-dir", type=Path, help="the Fun-CosyVoice3-0.5B folder (for CosyVoice3 voices)")
    parser.add_argument("--workers", type=workers_flag, metavar="N|auto",
                        help="worker processes rendering each book (default 1; auto: on a GPU as many as still "
                             "add 10 %% throughput, measured once per GPU and voice)")
    add_ray_argument(parser)
    parser.add_argument("--once", action="store_true",
                        help="convert what is there and what is queued, then exit (for cron and tests)")
    parser.add_argument("--settle", type=float, default=DEFAULT_SETTLE, metavar="SECONDS",
                        help=f"a file counts as arrived after this long unchanged (default {DEFAULT_SETTLE:g})")
    parser.add_argument("--rescan", type=float, default=DEFAULT_RESCAN, metavar="SECONDS",
                        help=f"look through the whole folder this often, in case events were missed "
                             f"(default {DEFAULT_RESCAN:g})")
    parser.add_argument("--progress", choices=("auto", "bar", "json", "none"), default="auto",
                        help="progress of the book being converted; json also reports the watcher's events")
    parser.add_argument("--format", choices=("m4b", "mp3", "opus"),
                        help="the audiobooks' format (default m4b; config.toml: format)")
    parser.add_argument("--layout", choices=("flat", "audiobookshelf"),
                        help="audiobookshelf: each book as OUT_DIR/Author/Series/Book N - Title/Title.m4b with "
                             "cover.jpg, desc.txt and reader.txt, as Audiobookshelf's scanner expects "
                             "(default flat: OUT_DIR/NAME.m4b; config.toml: layout)")
    parser.add_argument("--web", metavar="[HOST:]PORT",
                        help="also serve a web page to drop books, follow the queue, cancel, retry, listen and "
                             "download (default host 127.0.0.1; any other address needs the token printed at "
                             "start or config.toml's web_token; config.toml: web; needs pip install "
                             "'epub2audio[web]')")


def _check_folders(args: argparse.Namespace) -> tuple[Path, Path]:
    in_dir, out_dir = args.in_dir.expanduser().resolve(), args.out_dir.expanduser().resolve()
    for folder, what in ((in_dir, "IN_DIR"), (out_dir, "--out")):
        if not folder.is_dir():
            raise InputError(f"{folder}: {what} is not an existing folder")
    if args.settle < 0 or args.rescan <= 0:
        raise InputError("--settle must be 0 or more and --rescan more than 0 seconds")
    return in_dir, out_dir


def run(args: argparse.Namespace) -> int:
    """The watch command. Bad arguments raise InputError (exit code 2); returns 0, or 130 when
    stopped by Ctrl-C / SIGTERM."""
    from ..config import load_config
    from .web import check_installed, web_settings

    in_dir, out_dir = _check_folders(args)
    options = job_options(args)
    web = web_settings(getattr(args, "web", None), load_config())
    if web is not None:
        check_installed()
    state = queue_path(in_dir, out_dir)
    log = WatchLog(out_dir / LOG_NAME, json_stream=sys.stdout if args.progress == "json" else None)
    previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with instance_lock(state.with_suffix(".lock"), in_dir, out_dir):
            try:
                watch_folder(in_dir, out_dir, options, state=state, log=log, voice_lock=voice_lock_path(options),
                             settle=args.settle, rescan=args.rescan, once=args.once, progress_mode=args.progress,
                             web=web)
            except KeyboardInterrupt:  # the log says so; the book being converted is back in the queue
                return EXIT_INTERRUPTED
            return EXIT_OK
    finally:
        signal.signal(signal.SIGTERM, previous_handler)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """`python -m epub2audio.watch ...` (the same as `epub2audio watch ...`)."""
    parser = argparse.ArgumentParser(prog="epub2audio watch",
                                     description="Watch a folder: every book dropped into it becomes an M4B.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except InputError as error:
        print(f"epub2audio: error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
