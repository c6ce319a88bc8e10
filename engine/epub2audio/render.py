"""A conversion job: book → segments → workers → segment store → M4B.

Every front door (the command, the calibre plugin through the command, the folder watcher) runs
exactly this. The job lives in a work directory keyed by the output path, so running the same
command again resumes it.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from .audiobook.m4b import AudioChapter, tags_for_book, write_m4b
from .book import Book
from .book.epub import load_book
from .book.normalize import normalize
from .book.segment import segment_chapter
from .config import cache_dir
from .errors import InputError, JobFailed
from .progress import Eta, Progress
from .store import PlannedSegment, SegmentStore, segment_key, segment_seed
from .worker.supervisor import SegmentFailed, Stopped, Supervisor, VoiceDetails, VoiceLoadFailed, WorkerPolicy

DEFAULT_JOB_SEED = 1986


@dataclass
class ConvertOptions:
    voice: str = "joe"
    voice_options: dict = field(default_factory=dict)  # what the worker needs to load the voice
    chapters: list[int] | None = None  # 0-based chapter indices; None = all
    workers: int = 1
    threads_per_worker: int = 1
    job_seed: int = DEFAULT_JOB_SEED
    work_dir: Path | None = None
    policy: WorkerPolicy = field(default_factory=WorkerPolicy)
    metadata: dict = field(default_factory=dict)  # overrides for the book's metadata (calibre)


@dataclass
class ConvertResult:
    output: Path
    duration_seconds: float
    chapters: int
    segments: int
    rendered: int
    work_dir: Path


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) during rendering: the job is consistent and resumable."""

    def __init__(self, done: int, total: int):
        super().__init__(f"interrupted with {done} of {total} segments done")
        self.done, self.total = done, total


def job_dir_for(out_path: Path) -> Path:
    digest = hashlib.sha256(str(Path(out_path).resolve()).encode()).hexdigest()[:16]
    return cache_dir() / "jobs" / f"{Path(out_path).stem[:40]}-{digest}"


def select_chapters(book: Book, wanted: list[int] | None) -> list[int]:
    if wanted is None:
        return list(range(len(book.chapters)))
    for i in wanted:
        if not 0 <= i < len(book.chapters):
            raise InputError(
                f"{Path(book.path).name}: there is no chapter {i + 1} (the book has {len(book.chapters)})"
            )
    return sorted(set(wanted))


def plan_segments(book: Book, chapter_indices: list[int], job_seed: int, voice: str,
                  model_id: str) -> list[PlannedSegment]:
    planned, seen = [], Counter()
    for ci in chapter_indices:
        chapter = book.chapters[ci]
        spoken = replace(chapter, paragraphs=[normalize(p, book.language) for p in chapter.paragraphs])
        for seg in segment_chapter(ci, spoken):
            occurrence = seen[seg.text]
            seen[seg.text] += 1
            seed = segment_seed(job_seed, seg.text, occurrence)
            planned.append(PlannedSegment(ci, seg.index, segment_key(voice, model_id, seg.text, seed),
                                          seg.text, seed, seg.pause_after_ms))
    return planned


def apply_metadata(book: Book, overrides: dict) -> Book:
    """calibre's database knows better than the EPUB: let its fields win where given."""
    from .book.model import Cover

    fields = {k: v for k, v in overrides.items() if k in Book.__dataclass_fields__ and k != "cover" and v}
    if overrides.get("isbn"):  # the M4B's ISBN tag is read from the identifier
        fields["identifier"] = f"urn:isbn:{overrides['isbn']}"
    if isinstance(fields.get("authors"), str):
        fields["authors"] = [fields["authors"]]
    book = replace(book, **fields)
    cover_path = overrides.get("cover")
    if cover_path:
        data = Path(cover_path).read_bytes()
        kind = "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"
        book = replace(book, cover=Cover(data, kind))
    return book


class WorkerPool:
    """N supervised worker slots sharing one queue of segments."""

    def __init__(self, voice: str, voice_options: dict, workers: int, threads: int,
                 policy: WorkerPolicy, log_path: Path | None):
        config = {"voice": voice, "threads": threads, "options": voice_options}
        self.supervisors = [Supervisor(config, policy, log_path) for _ in range(max(1, workers))]

    def details(self) -> VoiceDetails:
        try:
            return self.supervisors[0].details
        except VoiceLoadFailed as error:
            raise JobFailed(str(error)) from None

    def render(self, todo: list[PlannedSegment], on_result) -> None:
        """Synthesise `todo`; on_result(segment, pcm | None, seconds, details, error) runs in this thread."""
        tasks: queue.Queue = queue.Queue()
        for item in todo:
            tasks.put(item)
        results: queue.Queue = queue.Queue()

        def work(supervisor: Supervisor) -> None:
            while True:
                try:
                    segment = tasks.get_nowait()
                except queue.Empty:
                    return
                try:
                    pcm, seconds, details = supervisor.synthesize(segment.text, segment.seed)
                    results.put((segment, pcm, seconds, details, None))
                except SegmentFailed as error:
                    results.put((segment, None, 0.0, None, str(error)))
                except Stopped:
                    return
                except Exception as error:  # a supervisor bug must not hang the job
                    results.put((segment, None, 0.0, None, f"{type(error).__name__}: {error}"))

        threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in self.supervisors]
        for t in threads:
            t.start()
        try:
            for _ in range(len(todo)):
                while True:
                    try:
                        result = results.get(timeout=0.2)  # short waits keep Ctrl-C responsive
                        break
                    except queue.Empty:
                        if not any(t.is_alive() for t in threads) and results.empty():
                            return
                on_result(*result)
        except BaseException:
            self.kill()
            raise
        finally:
            for t in threads:
                t.join(timeout=5)

    def kill(self) -> None:
        for s in self.supervisors:
            s.kill()

    def close(self) -> None:
        for s in self.supervisors:
            s.close()


def convert(book_path: Path, out_path: Path, options: ConvertOptions, progress: Progress) -> ConvertResult:
    started = time.monotonic()
    book = apply_metadata(load_book(book_path), options.metadata)
    chapter_indices = select_chapters(book, options.chapters)
    out_path = Path(out_path)
    if out_path.suffix.lower() != ".m4b":
        raise InputError(f"{out_path}: the output must be an .m4b file")
    if not out_path.parent.is_dir():
        raise InputError(f"{out_path.parent}: the output folder does not exist")

    work_dir = Path(options.work_dir or job_dir_for(out_path))
    store = SegmentStore(work_dir)
    pool = WorkerPool(options.voice, options.voice_options, options.workers,
                      options.threads_per_worker, options.policy, work_dir / "worker.log")
    try:
        details = pool.details()
        progress.emit("voice", name=details.name, narrator=details.narrator, backend=details.backend,
                      precision=details.precision, sample_rate=details.sample_rate, model_id=details.model_id)
        planned = plan_segments(book, chapter_indices, options.job_seed, options.voice, details.model_id)
        if not planned:
            raise InputError(f"{Path(book_path).name}: the selected chapters contain no text to read")
        progress.emit("book", title=book.title, chapters=len(chapter_indices), segments=len(planned),
                      characters=sum(len(s.text) for s in planned))
        store.set_meta(book=str(Path(book_path).resolve()), output=str(out_path.resolve()),
                       voice=options.voice, job_seed=options.job_seed, model_id=details.model_id)
        store.replace_plan(
            [(ci, book.chapters[ci].title, "\n".join(book.chapters[ci].sources)) for ci in chapter_indices],
            planned,
        )
        todo = [s for s in planned if not store.finished(s.key)]
        progress.emit("plan", total=len(planned), cached=len(planned) - len(todo), to_render=len(todo))
        progress.emit("stage", stage="render")
        failures = _render(pool, store, todo, options.voice, details, progress)
    finally:
        pool.close()
    if failures:
        first = failures[0]
        raise JobFailed(
            f"{len(failures)} segment(s) failed, e.g. chapter {first[0].chapter + 1} segment "
            f"{first[0].index + 1}: {first[1]}. Finished segments are kept; rerun to retry."
        )

    progress.emit("stage", stage="assemble")
    result = assemble(store, book, out_path, details)
    store.close()
    progress.emit("done", output=str(out_path), duration_seconds=result.duration_samples / details.sample_rate,
                  chapters=len(chapter_indices), segments_rendered=len(todo),
                  seconds=round(time.monotonic() - started, 2))
    return ConvertResult(out_path, result.duration_samples / details.sample_rate, len(chapter_indices),
                         len(planned), len(todo), work_dir)


def _render(pool: WorkerPool, store: SegmentStore, todo: list[PlannedSegment], voice: str,
            details: VoiceDetails, progress: Progress) -> list[tuple[PlannedSegment, str]]:
    failures = []
    eta = Eta(len(todo))

    def on_result(segment, pcm, seconds, seg_details, error):
        if error is not None:
            store.record_failed(segment, voice, details.model_id, error)
            failures.append((segment, error))
            progress.emit("warning", message=f"chapter {segment.chapter + 1} segment {segment.index + 1} failed: {error}")
            return
        if seg_details.model_id != details.model_id or seg_details.sample_rate != details.sample_rate:
            raise JobFailed("a worker loaded a different model than the first one; refusing to mix them")
        store.record_done(segment, voice, seg_details, pcm, seconds)
        progress.emit("segment", done=eta.done + 1, total=len(todo), chapter=segment.chapter,
                      index=segment.index, audio_seconds=round(len(pcm) / 2 / details.sample_rate, 3),
                      synth_seconds=round(seconds, 3), eta_seconds=eta.step())

    try:
        pool.render(todo, on_result)
    except KeyboardInterrupt:
        raise Interrupted(eta.done, len(todo)) from None
    return failures


def assemble(store: SegmentStore, book: Book, out_path: Path, details: VoiceDetails):
    """The M4B from the stored segments, in plan order, with the planned pauses."""
    titles = dict(store.chapters())
    chapters: dict[int, AudioChapter] = {}
    for chapter, _idx, key, pause_ms in store.plan():
        audio = chapters.setdefault(chapter, AudioChapter(title=titles[chapter], parts=[]))
        audio.parts.append(store.audio_path(key))
        audio.parts.append(pause_ms * details.sample_rate // 1000)
    tags = tags_for_book(book, narrator=details.narrator)
    return write_m4b(out_path, list(chapters.values()), tags, book.cover, details.sample_rate)


@dataclass
class RegenResult:
    text: str
    identical: bool  # the new audio equals what the store held


def regen(out_path: Path, chapter: int, index: int, *, work_dir: Path | None = None,
          policy: WorkerPolicy | None = None, voice_options: dict | None = None) -> RegenResult:
    """Re-make one stored segment (chapter and index 0-based) with its own seed, then the M4B.

    The seed is the segment's, so a healthy voice gives the same bytes again; a different result
    means the voice, its model or the machine's numerics changed since the job ran."""
    work_dir = Path(work_dir or job_dir_for(out_path))
    if not (work_dir / "job.sqlite3").exists():
        raise InputError(f"{out_path}: no conversion job found for this output (looked in {work_dir})")
    store = SegmentStore(work_dir)
    keys = {(c, i): k for c, i, k, _ in store.plan()}
    key = keys.get((chapter, index))
    if key is None:
        raise InputError(f"{out_path}: the job has no segment {index + 1} in chapter {chapter + 1}")
    row = store.segment_row(key)
    if row is None:
        raise InputError(f"{out_path}: segment {chapter + 1}.{index + 1} was never rendered; rerun the conversion")
    old = store.audio_path(key).read_bytes() if store.audio_path(key).exists() else b""
    segment = PlannedSegment(chapter, index, key, row["text"], row["seed"], 0)
    pool = WorkerPool(row["voice"], voice_options or {}, 1, 1, policy or WorkerPolicy(), work_dir / "worker.log")
    try:
        details = pool.details()
        pcm, seconds, details = pool.supervisors[0].synthesize(segment.text, segment.seed)
    except SegmentFailed as error:
        raise JobFailed(f"segment {chapter + 1}.{index + 1} failed again: {error}") from None
    finally:
        pool.close()
    if details.model_id != row["model_id"]:
        raise JobFailed(f"the voice now loads model {details.model_id}, the job used {row['model_id']}")
    store.record_done(segment, row["voice"], details, pcm, seconds)
    identical = store.audio_path(key).read_bytes() == old
    book = load_book(store.get_meta("book"))
    assemble(store, book, Path(out_path), details)
    store.close()
    return RegenResult(row["text"], identical)
