"""The conversion job as verify sees it: where every segment lies in the M4B, its text and language,
and the book's own words of each chapter.

`SegmentStore.layout()` gives the same parts, WAV then pause, that `render.assemble()` encoded,
so the segment boundaries in samples are the cumulative WAV lengths plus pauses. Everything comes
from the job's store (and the EPUB it recorded); verify never imports render.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from .report import Problem


@dataclass
class _Seg:
    chapter: int  # 0-based book chapter index
    index: int  # 0-based within the chapter
    text: str
    start: int  # samples from the start of the M4B
    samples: int  # the WAV's length (its pause follows)
    pause: int = 0  # samples of planned silence after the WAV
    lang: str | None = None  # the segment's language where the plan records one (else the book's)


@dataclass
class _Job:
    store: object
    meta: dict
    chapters: list[tuple[int, str]]  # (book chapter index, title) in M4B order
    segments: dict[int, list[_Seg]]  # by book chapter index
    starts: list[int]
    total: int
    layout_ok: bool = True
    longest_pause: int = 0  # samples
    has_cover: bool = False
    book: object = None
    book_texts: dict[int, str] = field(default_factory=dict)  # the book's own words by chapter index


def _load_job(job_dir: Path, sample_rate: int, notes: list[str]) -> _Job | None:
    from ...store import SegmentStore
    from ..m4b import _part_length

    if not (job_dir / "job.sqlite3").exists():
        notes.append(f"no conversion job in {job_dir}")
        return None
    store = SegmentStore(job_dir)
    meta = {k: store.get_meta(k) for k in ("book", "output", "voice", "model_id")}
    plan = store.plan()
    if not plan:
        notes.append(f"the job in {job_dir} has no plan")
        return None
    texts, rates = {}, set()
    for _c, _i, key, _p in plan:
        row = store.segment_row(key)
        texts[key] = row["text"] if row else None
        if row and row.get("sample_rate"):
            rates.add(row["sample_rate"])
    rate = rates.pop() if len(rates) == 1 else sample_rate
    layout = store.layout(rate)
    languages = store.plan_languages()
    segs: dict[int, list[_Seg]] = {}
    starts, pos, longest_pause = [], 0, 0
    rows_by_chapter = itertools.groupby(plan, key=lambda r: r[0])
    for (ci, title, parts), (ci2, rows) in zip(layout, rows_by_chapter):
        assert ci == ci2
        starts.append(pos)
        for (key, pause), (_c, idx, _key, _p) in zip(parts, rows):
            try:
                length = _part_length(store.audio_path(key), rate, 0, title)
            except Exception:
                length = 0
                notes.append(f"chapter {ci + 1} segment {idx + 1}: its WAV is missing or unreadable")
            segs.setdefault(ci, []).append(_Seg(ci, idx, texts[key] or "", pos, length, pause,
                                                languages.get((ci, idx))))
            pos += length + pause
            longest_pause = max(longest_pause, pause)
    job = _Job(store, meta, [(ci, title) for ci, title, _parts in layout], segs, starts, pos,
               longest_pause=longest_pause, book_texts={i: t for i, t in store.chapter_texts().items() if t})
    if rate != sample_rate:
        job.layout_ok = False
        notes.append(f"the job rendered at {rate} Hz but the M4B is {sample_rate} Hz")
    if meta.get("book") and Path(meta["book"]).is_file():
        from ...book.epub import load_book
        from ...errors import InputError

        try:
            job.book = load_book(meta["book"])
            job.has_cover = job.book.cover is not None
            for ci, _title in job.chapters:  # a job planned before the store kept the book's words
                if ci not in job.book_texts and ci < len(job.book.chapters):
                    job.book_texts[ci] = "\n".join(job.book.chapters[ci].paragraphs)
        except InputError as error:
            notes.append(f"the book could not be read again: {error}")
        except Exception as error:  # a reader bug must not hide the audio checks
            notes.append(f"the book could not be read again: {type(error).__name__}: {error}")
    else:
        notes.append(f"the book the job was made from is gone ({meta.get('book')}): coverage not checked")
    return job


def _check_layout(job: _Job, marks, rows, container, problems) -> None:
    """The M4B's chapter marks must be exactly where the job's layout puts them; else the M4B is
    stale (or from another job) and segment offsets mean nothing."""
    expected = list(zip(job.starts, [*job.starts[1:], job.total]))
    actual = [(s, e) for s, e, _t in marks]
    tolerance = container.get("mark_tolerance", 0)  # MP3 and Opus hold milliseconds: one codec frame
    if len(expected) != len(actual):
        problems.append(Problem("layout", f"the M4B has {len(actual)} chapters, the job planned {len(expected)}"))
        job.layout_ok = False
    elif any(abs(a - b) > tolerance for pair, got in zip(expected, actual) for a, b in zip(pair, got)):
        problems.append(Problem("layout", "the M4B's chapter marks are not where the job's segments put them "
                                          "(the M4B is out of date or from another job)"))
        job.layout_ok = False
    for row, (ci, title), (_s, _e, mark_title) in zip(rows, job.chapters, marks):
        row.book_chapter = ci + 1
        row.segments = len(job.segments.get(ci, []))
        if title != mark_title:
            problems.append(Problem("layout", f"chapter title {mark_title!r}, the job planned {title!r}", row.number))
