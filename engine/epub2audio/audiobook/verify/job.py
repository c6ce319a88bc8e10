"""The conversion job as verify sees it: where every segment lies in the M4B, and its text.

The job's store gives the same parts, WAV then pause, that `render.assemble()` encoded
(`render.audio_chapters`), so the segment boundaries in samples are the cumulative WAV lengths
plus pauses.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from .report import Problem


@dataclass
class _Seg:
    chapter: int  # 0-based book chapter index
    index: int  # 0-based within the chapter
    text: str
    start: int  # samples from the start of the M4B
    samples: int  # the WAV's length (its pause follows)


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


def _load_job(job_dir: Path, sample_rate: int, notes: list[str]) -> _Job | None:
    from ...render import audio_chapters
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
    layout = audio_chapters(store, rate)
    titles = dict(store.chapters())
    segs: dict[int, list[_Seg]] = {}
    starts, pos, longest_pause = [], 0, 0
    rows_by_chapter = itertools.groupby(plan, key=lambda r: r[0])
    for (ci, audio), (ci2, rows) in zip(layout.items(), rows_by_chapter):
        assert ci == ci2
        starts.append(pos)
        parts = audio.parts
        for n, (_c, idx, key, _p) in enumerate(rows):
            wav, pause = parts[2 * n], parts[2 * n + 1]
            try:
                length = _part_length(wav, rate, 0, audio.title)
            except Exception:
                length = 0
                notes.append(f"chapter {ci + 1} segment {idx + 1}: its WAV is missing or unreadable")
            segs.setdefault(ci, []).append(_Seg(ci, idx, texts[key] or "", pos, length))
            pos += length + pause
            longest_pause = max(longest_pause, pause)
    job = _Job(store, meta, [(ci, titles.get(ci, "")) for ci in layout], segs, starts, pos,
               longest_pause=longest_pause)
    if rate != sample_rate:
        job.layout_ok = False
        notes.append(f"the job rendered at {rate} Hz but the M4B is {sample_rate} Hz")
    if meta.get("book") and Path(meta["book"]).is_file():
        from ...book.epub import load_book
        from ...errors import InputError

        try:
            job.book = load_book(meta["book"])
            job.has_cover = job.book.cover is not None
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
    if len(expected) != len(actual):
        problems.append(Problem("layout", f"the M4B has {len(actual)} chapters, the job planned {len(expected)}"))
        job.layout_ok = False
    elif expected != actual:
        problems.append(Problem("layout", "the M4B's chapter marks are not where the job's segments put them "
                                          "(the M4B is out of date or from another job)"))
        job.layout_ok = False
    for row, (ci, title), (_s, _e, mark_title) in zip(rows, job.chapters, marks):
        row.book_chapter = ci + 1
        row.segments = len(job.segments.get(ci, []))
        if title != mark_title:
            problems.append(Problem("layout", f"chapter title {mark_title!r}, the job planned {title!r}", row.number))
