"""Prove that an M4B (or the MP3 or Opus of `--format`) is a complete audiobook that says what the book says.

`verify_m4b(path, job_dir)` runs five groups of checks and returns a VerifyReport:

1. Container: chapters in both formats (the QuickTime chapter text track, read here straight from
   the boxes, and ffmpeg's listing of it; the Nero `chpl` atom through mutagen), monotonic, the
   first at 0, each end at the next start, the last end at the decoded duration; the iTunes tags a
   player needs (©nam ©ART ©alb ©wrt ©gen, stik=2); the cover when the book has one; AAC, mono.
2. Audio: the M4B is decoded once (streamed, so memory stays small however long the book is) into
   10 ms energy frames. With the conversion job at hand, every segment's exact place is known: the
   job's store gives the same parts, WAV then pause, that `render.assemble()` encoded
   (`SegmentStore.layout`), so the segment boundaries in samples are the cumulative WAV lengths
   plus pauses. Each segment is checked for near-silence, for being far shorter (or longer) than its
   text warrants, and every chapter for a silence longer than 3 s.
3. Intelligibility: a few windows of at most 30 s a chapter, chosen deterministically from `seed`
   and aligned to segment boundaries so the reference text is exact, are transcribed with the
   packaged Whisper tiny.en (English) or the multilingual base (French, German, Spanish, Italian,
   Portuguese: speech.py, multilingual.py) and scored by word error rate against the book's own
   words (and the planned text). Text in any other language is never scored; speech problems are
   doubts, not failures.
4. Speech quality (`epub2audio verify`, not the verify after a conversion; `--no-quality` skips it):
   DistillMOS, Microsoft's compact speech-quality model, scores the first 7.68 s of each window in a
   child process (quality.py); a chapter far below its voice's norm, or the book's other chapters,
   is a doubt.
5. Text coverage: the characters planned for reading against the book's chapters (the EPUB the job
   recorded), with every skip listed with its reason: the book's own skips (cover, contents, ...),
   chapters not selected, and any text the segmenter dropped.

An MP3 or Opus gets the same checks, its container's through formats.py (ID3 CHAP/CTOC or Vorbis
chapters, tags, cover); its marks may sit up to one codec frame from the job's (milliseconds).

Without a job folder only the container and chapter-level audio checks run (there is no reference).
The engine's ffmpeg and mutagen do all the reading; ffprobe is not needed.

The parts: container.py, audio.py, speech.py (with words.py), quality.py, coverage.py, each adding Problems
to one list; job.py reads the conversion job; report.py holds the report and prints it;
command.py is `epub2audio verify`.
"""

from __future__ import annotations

from pathlib import Path

from .audio import (LONG_SILENCE_SECONDS, PACE_FAST_CEILING, PACE_FAST_FACTOR, PACE_FAST_FLOOR, SILENT_SEGMENT_DBFS,
                    _check_segments, _db, _decode_frames, _frame_len, _long_silences, _rms_dbfs)
from .container import DURATION_TOLERANCE_SAMPLES, REQUIRED_TAGS, _check_container, nero_title
from .coverage import _check_coverage, _text_drops
from .job import _check_layout, _load_job, _Seg
from .quality import BOOK_MARGIN, VOICE_NORMS, check_quality
from .report import (ChapterRow, Problem, QualityWindow, SkippedText, VerifyInputError, VerifyReport, Window, doubts,
                     failures, format_report)
from .speech import (WER_DOUBT, WER_DOUBT_BY_LANGUAGE, WER_DOUBT_VERSE, WINDOW_SECONDS, _check_asr, choose_windows,
                     score_window, transcribe)
from .words import edit_distance, normalize_words, spoken_text, wer

__all__ = ["ChapterRow", "Problem", "QualityWindow", "SkippedText", "VerifyInputError", "VerifyReport", "WER_DOUBT", "Window",
           "_Seg", "_text_drops", "add_arguments", "choose_windows", "edit_distance", "format_report", "main",
           "nero_title", "normalize_words", "run", "score_window", "spoken_text", "transcribe", "verify_conversion",
           "verify_m4b",
           "wer"]


def verify_m4b(m4b_path, job_dir: Path | None, *, windows_per_chapter: int = 2,
               window_seconds: float = WINDOW_SECONDS,
               seed: int = 0, asr: bool = True, quality: bool = False) -> VerifyReport:
    path = Path(m4b_path)
    if not path.is_file():
        raise VerifyInputError(f"{path}: no such file")
    problems: list[Problem] = []
    notes: list[str] = []

    if path.suffix.lower() in (".mp3", ".opus"):  # --format mp3 / opus
        from .formats import check_container

        container, marks, sample_rate = check_container(path, problems)
    else:
        container, marks, sample_rate = _check_container(path, problems)
    frames, decoded = _decode_frames(path, sample_rate)
    frame = _frame_len(sample_rate)
    if marks and abs(decoded - marks[-1][1]) > DURATION_TOLERANCE_SAMPLES:
        problems.append(Problem("container", f"the audio decodes to {decoded / sample_rate:.3f} s but the "
                                             f"chapters end at {marks[-1][1] / sample_rate:.3f} s"))
    container["decoded_samples"] = decoded
    if not marks:  # still check the audio as one span
        marks = [(0, decoded, "(whole file)")]

    rows = [ChapterRow(number=i, book_chapter=None, title=t, start_seconds=round(s / sample_rate, 3),
                       seconds=round((e - s) / sample_rate, 3)) for i, (s, e, t) in enumerate(marks, 1)]
    job = _load_job(Path(job_dir), sample_rate, notes) if job_dir is not None else None
    # Unexpected = longer than 3 s, or than the longest planned pause plus a second if a voice's
    # pauses are ever planned longer.
    gap_limit = max(LONG_SILENCE_SECONDS, (job.longest_pause / sample_rate + 1.0) if job else 0)
    for row, (s, e, _t) in zip(rows, marks):
        row.long_silences = _long_silences(frames, frame, s, e, sample_rate, row.number, problems, gap_limit)
    skipped: list[SkippedText] = []
    coverage = None
    pace: dict = {}
    asr_status = "off" if not asr else "no job: nothing to compare with"
    quality_status = "off" if not quality else "no job: no voice to judge by"
    if job is None:
        if job_dir is None:
            notes.append("no conversion job given or found: segment, intelligibility and coverage checks skipped")
        for row, (s, e, _t) in zip(rows, marks):
            level = _rms_dbfs(frames, s // frame, -(-e // frame))
            if level <= SILENT_SEGMENT_DBFS:
                problems.append(Problem("silence", f"the whole chapter is near-silent ({_db(level)})", row.number))
    else:
        _check_layout(job, marks, rows, container, problems)
        if job.layout_ok:
            pace = _check_segments(job, frames, frame, sample_rate, rows, problems)
            if asr:
                asr_status = _check_asr(path, job, rows, sample_rate, windows_per_chapter, window_seconds, seed,
                                        problems, notes)
        elif asr:
            asr_status = "skipped: the M4B does not match the job's plan"
        if quality:
            quality_status = (check_quality(path, job, rows, sample_rate, windows_per_chapter, window_seconds, seed,
                                            problems, notes)
                              if job.layout_ok else "skipped: the M4B does not match the job's plan")
        coverage = _check_coverage(job, rows, skipped, problems, notes)
        if job.has_cover and not container.get("cover"):
            what = {".mp3": "APIC", ".opus": "METADATA_BLOCK_PICTURE"}.get(path.suffix.lower(), "covr")
            problems.append(Problem("container", f"the book has a cover but the audiobook has none ({what})"))
    missing = container.get("missing_tags", [])
    if job is not None and job.book is not None and not job.book.authors:
        missing = [atom for atom in missing if atom != "©ART"]  # a book with no author names none
    if missing:
        problems.append(Problem("container", "missing tags: " + ", ".join(f"{a} ({REQUIRED_TAGS[a]})" for a in missing)))
    if not container.get("cover") and (job is None or not job.has_cover):
        notes.append("no cover image (the book has none)" if job else "no cover image")

    if job is not None:
        job.store.close()
    for row in rows:
        row.passed = not any(p.chapter == row.number for p in failures(problems))
        row.doubtful = any(p.chapter == row.number for p in doubts(problems))
    return VerifyReport(
        path=str(path), job_dir=str(job_dir) if job is not None else None,
        passed=not failures(problems), duration_seconds=round(decoded / sample_rate, 3), sample_rate=sample_rate,
        chapters=rows, problems=problems, skipped=skipped, notes=notes, asr=asr_status, container=container,
        coverage=coverage, pace=pace, quality=quality_status,
        thresholds={"wer_doubt": WER_DOUBT, "wer_doubt_verse": WER_DOUBT_VERSE, "silent_segment_dbfs": SILENT_SEGMENT_DBFS,
                    "long_silence_seconds": LONG_SILENCE_SECONDS, "pace_fast_factor": PACE_FAST_FACTOR,
                    "pace_fast_floor": PACE_FAST_FLOOR, "pace_fast_ceiling": PACE_FAST_CEILING,
                    "wer_doubt_by_language": {code: list(limits) for code, limits in WER_DOUBT_BY_LANGUAGE.items()},
                    "distillmos_voice_norms": {family: {"good": good, "doubt_below": floor}
                                               for family, (good, floor) in VOICE_NORMS.items()},
                    "distillmos_book_margin": BOOK_MARGIN},
    )


def verify_conversion(out_path: Path, work_dir: Path, progress=None, *, asr: bool = True) -> VerifyReport:
    """What render.convert() calls after assembling (unless --no-verify): the report, also as events
    `stage {stage: "verify"}` and `verify {passed, problems, asr, coverage, wer}`."""
    if progress is not None:
        progress.emit("stage", stage="verify")
    from .multilingual import DamagedModel

    try:
        report = verify_m4b(out_path, work_dir, asr=asr)
    except DamagedModel as error:  # the M4B is written: check what can be checked, and say why not the speech
        report = verify_m4b(out_path, work_dir, asr=False)
        report.asr = "unavailable"
        report.notes.append(f"intelligibility not checked: {error}")
    if progress is not None:
        wers = [c.wer for c in report.chapters if c.wer is not None]
        progress.emit("verify", passed=report.passed, problems=[p.message for p in failures(report.problems)],
                      doubts=[p.message for p in doubts(report.problems)], asr=report.asr, coverage=report.coverage,
                      wer=round(max(wers), 3) if wers else None)
    return report


from .command import add_arguments, main, run  # noqa: E402  (command imports verify_m4b)
