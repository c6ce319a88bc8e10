"""What verify found: the report's rows and problems, and the report as text.

A problem is a failure (the M4B is broken: container, layout, silence, pace, repetition, gaps, coverage; the
job exits 1) or a doubt (speech recognition disagrees with the text, or DistillMOS scores a chapter far
below its voice's norm: reported with where to listen, never a failed conversion; tiny.en and a
quality model are too weak a judge to fail a book on).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Problem:
    check: str  # container | layout | silence | pace | repetition | gap | asr | quality | coverage
    message: str
    chapter: int | None = None  # 1-based position in the M4B
    segment: int | None = None  # 1-based within the chapter
    severity: str = "fail"  # "fail" | "doubt"
    at_seconds: float | None = None  # where to listen, in the M4B


def failures(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "fail"]


def doubts(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "doubt"]


@dataclass
class Window:
    first_segment: int  # 1-based
    last_segment: int
    start_seconds: float  # in the M4B
    seconds: float  # of audio transcribed, pauses included (at most WINDOW_SECONDS)
    reference: str  # the planned text (what the voice was given)
    transcript: str
    words: int  # scored words: the book's own where the job has them, else the planned text's
    errors: int
    wer: float
    kind: str = "prose"  # "prose" | "verse" (scored leniently)
    plan_wer: float | None = None  # against the planned (normalised) text: the voice alone
    book_reference: str | None = None  # the book's own words for these segments, neutrally normalised
    loop_words: int = 0  # words of a transcriber loop left out of the score
    readings: list[str] = field(default_factory=list)  # where the plan reads the book's words otherwise
    language: str = "en"  # what the transcriber was told (and the words normalised as)


@dataclass
class QualityWindow:
    start_seconds: float  # in the M4B
    seconds: float  # scored: the window's first 7.68 s (the model's input), or all of a shorter one
    distillmos: float  # 1 (bad) .. 5 (excellent)


@dataclass
class ChapterRow:
    number: int  # 1-based position in the M4B
    book_chapter: int | None  # 1-based chapter number in the book (as in --list-chapters)
    title: str
    start_seconds: float
    seconds: float
    segments: int = 0
    silent_segments: int = 0
    pace_segments: int = 0
    long_silences: int = 0
    windows: list[Window] = field(default_factory=list)
    wer: float | None = None  # pooled over the windows (book's own words where the job has them)
    plan_wer: float | None = None  # pooled against the planned text
    unscored_segments: int = 0  # not in the transcriber's language: never scored
    book_characters: int | None = None  # letters and digits in the book's chapter
    read_characters: int | None = None  # letters and digits planned for reading
    coverage: float | None = None
    distillmos: float | None = None  # speech quality, the mean over quality_windows (quality.py)
    quality_windows: list[QualityWindow] = field(default_factory=list)
    passed: bool = True  # no failure in this chapter
    doubtful: bool = False  # speech recognition disagrees somewhere: listen


@dataclass
class SkippedText:
    title: str
    reason: str
    characters: int | None = None


@dataclass
class VerifyReport:
    path: str
    job_dir: str | None
    passed: bool
    duration_seconds: float
    sample_rate: int
    chapters: list[ChapterRow]
    problems: list[Problem]
    skipped: list[SkippedText]
    notes: list[str]
    asr: str  # "done", "off", or why it did not run
    container: dict
    coverage: float | None  # letters+digits read / in the whole book
    thresholds: dict
    pace: dict = field(default_factory=dict)  # letters a voiced second over segments: median, p99, max, limit
    quality: str = "off"  # DistillMOS: "done", "off", or why it did not run

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=1)


class VerifyInputError(ValueError):
    """The file is not something we can verify (missing, not an MP4, no audio)."""




def format_report(report: VerifyReport) -> str:
    doubtful = doubts(report.problems)
    verdict = "FAIL" if not report.passed else f"PASS, {len(doubtful)} doubtful" if doubtful else "PASS"
    c = report.container
    lines = [f"{Path(report.path).name}: {verdict} — {len(report.chapters)} chapters, "
             f"{_clock(report.duration_seconds)}, AAC {c.get('sample_rate')} Hz "
             f"{'mono' if c.get('channels') == 1 else str(c.get('channels')) + ' ch'}"]
    lines.append(f"Container: chapters QuickTime {c.get('chapters_quicktime', 0)} / Nero {c.get('chapters_nero', 0)}, "
                 f"tags {' '.join(sorted(k for k in c.get('tags', {})))}, cover {'yes' if c.get('cover') else 'no'}")
    lines.append(f"Job: {report.job_dir or 'none'}; intelligibility: {report.asr}; speech quality: {report.quality}")
    width = min(40, max([len(r.title) for r in report.chapters] + [7]))
    lines.append(f"{'#':>3}  {'Chapter':<{width}}  {'Length':>8}  {'Segs':>4}  {'Silent':>6}  {'Pace':>4}  "
                 f"{'Gaps':>4}  {'WER':>5}  {'Win':>3}  {'MOS':>4}  {'Coverage':>8}  Verdict")
    for r in report.chapters:
        title = " ".join(r.title.split())  # one line in the table
        title = title if len(title) <= width else title[: width - 1] + "…"
        wer_text = f"{r.wer:.3f}" if r.wer is not None else "-"
        cov = f"{100 * r.coverage:.1f}%" if r.coverage is not None else "-"
        mos = f"{r.distillmos:.2f}" if r.distillmos is not None else "-"
        lines.append(f"{r.number:>3}  {title:<{width}}  {_clock(r.seconds):>8}  {r.segments:>4}  "
                     f"{r.silent_segments:>6}  {r.pace_segments:>4}  {r.long_silences:>4}  {wer_text:>5}  "
                     f"{len(r.windows):>3}  {mos:>4}  {cov:>8}  {'FAIL' if not r.passed else 'doubt' if r.doubtful else 'ok'}")
    if report.pace:
        p = report.pace
        lines.append(f"Pace: median {p['median']} letters/s of voiced audio (99th percentile {p['p99']}, "
                     f"max {p['max']}; a segment above {p['fast_limit']}/s is too short for its text)")
    if report.coverage is not None:
        lines.append(f"Text coverage of the whole book: {100 * report.coverage:.1f}% of its letters and digits")
    if report.skipped:
        lines.append("Not read:")
        for s in report.skipped:
            size = f" ({s.characters:,} letters)" if s.characters is not None else ""
            lines.append(f"  - {s.title}: {s.reason}{size}")
    for heading, group in (("Problems:", failures(report.problems)),
                           ("Doubtful speech (listen there; not a failure):", doubtful)):
        if group:
            lines.append(heading)
        for p in group:
            where = f"chapter {p.chapter}: " if p.chapter is not None else ""
            at = f" [at {_clock(p.at_seconds)} in the book]" if p.at_seconds is not None else ""
            lines.append(f"  - [{p.check}] {where}{p.message}{at}")
    readings = [(r.number, w, text) for r in report.chapters for w in r.windows for text in w.readings]
    if readings:
        lines.append("Read otherwise than the book's words (normalisation; check it is right):")
        for number, w, text in readings[:12]:
            lines.append(f"  - chapter {number}, near {_clock(w.start_seconds)}: {text}")
        if len(readings) > 12:
            lines.append(f"  - … and {len(readings) - 12} more (--json lists them all)")
    for note in report.notes:
        lines.append(f"Note: {note}")
    return "\n".join(lines)


def _clock(seconds: float) -> str:
    m, s = divmod(seconds, 60)
    h, m = divmod(int(m), 60)
    return f"{h}:{m:02d}:{s:04.1f}" if h else f"{m}:{s:04.1f}"


def _quote(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
