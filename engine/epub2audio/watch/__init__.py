"""`epub2audio watch IN_DIR --out OUT_DIR`: drop a book into a folder, get an M4B.

The watcher finds books, keeps a queue and calls `render.convert` for each; everything about books
and audio is the engine's. One room per concern:

  arrivals.py   which files are books (`*.epub`, and the formats read through calibre: `*.mobi`,
                `*.docx`, `*.pdf`, ...; not hidden, not a download in progress: `.part`,
                `.crdownload`, `.tmp`, `.download`, `~`), and when one has finished arriving
  scanner.py    watchdog's events for IN_DIR's top level, plus a scan at start and every `--rescan`
                seconds for what the events missed; arrived files are offered to the queue
  queue.py      the SQLite queue in `data_dir()/watch/`: each book by the SHA-256 of its bytes,
                queued → converting → done | failed, converted exactly once
  converter.py  the queued books one at a time, oldest first: `render.convert`, broken books to
                IN_DIR/failed/ with a .reason.txt, the engine's warnings to the log
  locks.py      one watcher per IN_DIR/OUT_DIR pair, one conversion per model at a time
  log.py        OUT_DIR/epub2audio-watch.log: plain timestamped lines, also on stderr, and with
                `--progress json` on stdout as {"event": "watch"}
  service.py    the scanner in the background, the converter in the main thread, and stopping:
                Ctrl-C or SIGTERM leaves a resumable job, the book back in the queue, exit 130
  command.py    the command itself: arguments, folders, job options, then service.watch_folder
  names.py      numbered file names ("Book (2).m4b"), one-line messages

The source EPUB stays where it is: the watcher never deletes, renames or edits a good book.
"""

from .arrivals import (ARRIVED, DEFAULT_SETTLE, GONE, IGNORED_ENDINGS, PATIENCE_FACTOR, WAITING, Arrivals,
                       file_signature, is_candidate, sha256_file, zip_readable)
from .command import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, add_arguments, main, run
from .converter import FAILED_DIR, Converter, WarningsToLog, move_to_failed
from .locks import VoiceLock, instance_lock, voice_lock_path
from .log import LOG_NAME, WatchLog
from .names import numbered_names, one_line
from .queue import SCHEMA, Offer, QueuedBook, WatchQueue, queue_path
from .scanner import DEFAULT_RESCAN, Scanner, start_observer
from .service import TICK, watch_folder

__all__ = [
    "ARRIVED", "DEFAULT_RESCAN", "DEFAULT_SETTLE", "EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK",
    "FAILED_DIR", "GONE", "IGNORED_ENDINGS", "LOG_NAME", "PATIENCE_FACTOR", "SCHEMA", "TICK", "WAITING",
    "Arrivals", "Converter", "Offer", "QueuedBook", "Scanner", "VoiceLock", "WarningsToLog", "WatchLog",
    "WatchQueue", "add_arguments", "file_signature", "instance_lock", "is_candidate", "main", "move_to_failed",
    "numbered_names", "one_line", "queue_path", "run", "sha256_file", "start_observer", "voice_lock_path",
    "watch_folder", "zip_readable",
]
